//! The page handlers: the overview, a conversation and its fragments, search.

use super::assets::Assets;
use super::views::{self, ClaimLine, Frame, MessageLine, OwedLine, When, plural, unread_label};
use super::{ASSETS, ConversationPage, Draft, Refusal, frame, markdown, render};
use crate::model::{ChannelSummary, Message, MessageId, Place, ThreadId, ThreadSummary};
use crate::relay::{Caller, ClaimFilter, Identity, Listing, NOTICE, Open, Relay};
use crate::state::AppState;
use crate::wire::{
    ApiError,
    extract::{Path, Query},
};
use askama::Template;
use axum::{Extension, extract::State, response::Response};

/// A conversation as the overview lists it.
struct ConversationLine {
    href: String,
    title: String,
    detail: String,
    count: String,
    when: When,
    unread: String,
    is_channel: bool,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    assets: &'static Assets,
    frame: Frame,
    conversations: Vec<ConversationLine>,
    more_channels: Option<String>,
    more_threads: Option<String>,
    /// What the signed-in person owes and is owed.
    owed_by_me: Vec<OwedLine>,
    owed_to_me: Vec<OwedLine>,
    /// Who is working on what.
    claims: Vec<ClaimLine>,
    error: Option<String>,
    draft: Draft,
}

#[derive(Template)]
#[template(path = "conversation.html")]
struct ConversationView {
    assets: &'static Assets,
    frame: Frame,
    heading: String,
    subheading: String,
    notice: &'static str,
    messages: Vec<MessageLine>,
    /// The conversation's stream and fragment routes, for live updates.
    stream: String,
    fragments: String,
    /// Where the form posts, and whether it is a channel's (type, recipient).
    action: String,
    is_channel: bool,
    last_id: i64,
    error: Option<String>,
    draft: Draft,
}

#[derive(Template)]
#[template(path = "messages.html")]
struct MessagesFragment {
    messages: Vec<MessageLine>,
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct OverviewQuery {
    channels_before: Option<i64>,
    threads_before: Option<i64>,
    /// Whom the new-conversation form is for.
    to: Option<String>,
}

pub(super) async fn overview(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<OverviewQuery>,
) -> Result<Response, ApiError> {
    let draft = Draft {
        to: query.to.clone().unwrap_or_default(),
        ..Draft::default()
    };
    render_overview(&state, &caller, &query, None, draft).await
}

async fn render_overview(
    state: &AppState,
    caller: &Caller,
    query: &OverviewQuery,
    error: Option<String>,
    draft: Draft,
) -> Result<Response, ApiError> {
    let relay = &state.relay;
    let frame = frame(state, caller).await?;
    // The first page of channels is the sidebar's, read already.
    let (channels, channel_unread) = match query.channels_before {
        None => frame.channel_page.clone(),
        before => views::channels_with_unread(relay, caller, before).await?,
    };
    let threads = relay
        .threads(query.threads_before.map(MessageId), None)
        .await?;
    let places = threads.items.iter().map(|t| Place::Thread(t.id)).collect();
    let thread_unread = relay.unread(caller, places).await?;
    let lines = conversation_lines(
        &frame,
        (&channels, channel_unread),
        (&threads, thread_unread),
    );
    let open = match caller.identity() {
        Identity::Person(me) => relay.open_of(me).await?,
        Identity::Unbound => Open::default(),
    };
    let names = &frame.names;
    let owed_by_me = open
        .owed_by_me
        .iter()
        .map(|m| OwedLine::new(m, &m.from, names))
        .collect();
    let owed_to_me = open
        .owed_to_me
        .iter()
        .filter_map(|m| Some(OwedLine::new(m, m.to.as_ref()?, names)))
        .collect();
    let claims = relay
        .claims(caller, ClaimFilter::default())
        .await?
        .iter()
        .map(|c| ClaimLine::new(c, names))
        .collect();
    render(move |_| OverviewPage {
        assets: &ASSETS,
        frame,
        conversations: lines,
        more_channels: channels
            .next_before
            .map(|before| format!("/?channels_before={before}")),
        more_threads: threads
            .next_before
            .map(|before| format!("/?threads_before={before}")),
        owed_by_me,
        owed_to_me,
        claims,
        error,
        draft,
    })
    .await
}

/// Channels and threads with how many of their messages the caller has
/// not read, as the overview lists them: together, by latest activity.
fn conversation_lines(
    frame: &Frame,
    (channels, channel_unread): (&Listing<ChannelSummary>, Vec<u64>),
    (threads, thread_unread): (&Listing<ThreadSummary>, Vec<u64>),
) -> Vec<ConversationLine> {
    let mut lines: Vec<(MessageId, ConversationLine)> = channels
        .items
        .iter()
        .zip(channel_unread)
        .map(|(c, unread)| {
            let line = ConversationLine {
                href: format!("/channels/{}", c.name),
                title: format!("#{}", c.name),
                detail: String::new(),
                count: plural(c.message_count, "message", "messages"),
                when: When::at(c.last_activity),
                unread: unread_label(unread),
                is_channel: true,
            };
            (c.last_id, line)
        })
        .collect();
    lines.extend(threads.items.iter().zip(thread_unread).map(|(t, unread)| {
        let line = ConversationLine {
            href: format!("/threads/{}", t.id),
            title: markdown::title(&views::visible(&t.opening), 120),
            detail: frame.people_named(&t.people),
            count: plural(t.message_count, "message", "messages"),
            when: When::at(t.last_activity),
            unread: unread_label(unread),
            is_channel: false,
        };
        (t.last_id, line)
    }));
    lines.sort_by_key(|(last_id, _)| std::cmp::Reverse(*last_id));
    lines.into_iter().map(|(_, line)| line).collect()
}

pub(super) async fn thread(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    render_conversation(
        &state,
        &caller,
        ConversationPage::Thread(ThreadId(id)),
        None,
    )
    .await
}

pub(super) async fn channel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
) -> Result<Response, ApiError> {
    render_conversation(&state, &caller, ConversationPage::Channel(channel), None).await
}

/// A conversation page (or the overview), with a refused form's reason and
/// text when there is one; marks what it shows as read.
pub async fn render_conversation(
    state: &AppState,
    caller: &Caller,
    page: ConversationPage,
    refusal: Refusal,
) -> Result<Response, ApiError> {
    let (error, draft) = match refusal {
        Some((error, draft)) => (Some(error), draft),
        None => (None, Draft::default()),
    };
    let relay = &state.relay;
    let (messages, heading, base, is_channel) = match &page {
        ConversationPage::Overview => {
            let query = OverviewQuery {
                channels_before: None,
                threads_before: None,
                to: None,
            };
            return render_overview(state, caller, &query, error, draft).await;
        }
        // Not found when it has no live message.
        ConversationPage::Thread(id) => {
            let messages = relay.thread_for_page(*id).await?;
            let heading = messages
                .first()
                .map(|first| markdown::title(&views::visible(&first.body), 100))
                .unwrap_or_default();
            (messages, heading, format!("/threads/{id}"), false)
        }
        ConversationPage::Channel(name) => {
            let messages = relay.channel_recent(name).await?;
            (
                messages,
                format!("#{name}"),
                format!("/channels/{name}"),
                true,
            )
        }
    };
    mark_shown(relay, caller, &messages).await?;
    let frame = frame(state, caller).await?;
    let subheading = if is_channel {
        "A channel: everyone on the team reads it.".to_owned()
    } else {
        let mut people: Vec<_> = messages
            .iter()
            .flat_map(|m| [Some(m.from.clone()), m.to.clone()])
            .flatten()
            .collect();
        people.sort();
        people.dedup();
        format!("Between {}", frame.people_named(&people))
    };
    let last_id = messages.last().map_or(0, |m| m.id.0);
    let stream = format!("/api{base}/stream");
    render(move |rendering| ConversationView {
        assets: &ASSETS,
        messages: views::lines(&messages, &frame.names, rendering),
        frame,
        heading,
        subheading,
        notice: NOTICE,
        stream,
        fragments: format!("{base}/messages"),
        action: base,
        is_channel,
        last_id,
        error,
        draft,
    })
    .await
}

/// Marks what a page shows as read by the viewer, up to its last message.
async fn mark_shown(relay: &Relay, caller: &Caller, messages: &[Message]) -> Result<(), ApiError> {
    if let Some(last) = messages.last() {
        relay.mark_read(caller, &last.place, last.id).await?;
    }
    Ok(())
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct After {
    after: Option<i64>,
}

/// `GET /threads/{id}/messages?after=ID`: the messages after `ID`, as the
/// page renders them, for the script to put in place.
pub(super) async fn thread_fragment(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(after): Query<After>,
) -> Result<Response, ApiError> {
    let messages = state
        .relay
        .thread_after(ThreadId(id), after.after.map(MessageId))
        .await?;
    mark_shown(&state.relay, &caller, &messages).await?;
    fragment(&state, &messages).await
}

pub(super) async fn channel_fragment(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Query(after): Query<After>,
) -> Result<Response, ApiError> {
    let page = state
        .relay
        .channel_messages(&channel, after.after.map(MessageId), None)
        .await?;
    mark_shown(&state.relay, &caller, &page.messages).await?;
    fragment(&state, &page.messages).await
}

pub(super) async fn fragment(
    state: &AppState,
    messages: &[crate::model::Message],
) -> Result<Response, ApiError> {
    let peers = state.relay.peers().await?;
    let names = views::Names::of(&peers);
    let messages = messages.to_vec();
    render(move |rendering| MessagesFragment {
        messages: views::lines(&messages, &names, rendering),
    })
    .await
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
    before: Option<i64>,
}

/// A message a search found, as the results page shows it.
struct FoundLine {
    href: String,
    place: String,
    from_name: String,
    when: When,
    /// Runs of the excerpt, the matched ones marked.
    excerpt: Vec<(String, bool)>,
}

#[derive(Template)]
#[template(path = "search.html")]
struct SearchPage {
    assets: &'static Assets,
    frame: Frame,
    results: Vec<FoundLine>,
    summary: String,
    more: Option<String>,
    error: Option<String>,
}

pub(super) async fn search(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<SearchQuery>,
) -> Result<Response, ApiError> {
    let mut frame = frame(&state, &caller).await?;
    frame.query = query.q.clone();
    let (results, summary, more, error) = if query.q.trim().is_empty() {
        (Vec::new(), String::new(), None, None)
    } else {
        match state
            .relay
            .search(&query.q, query.before.map(MessageId), None)
            .await
        {
            Ok(found) => {
                let lines: Vec<FoundLine> = found
                    .items
                    .iter()
                    .map(|f| {
                        let m = &f.message;
                        FoundLine {
                            href: views::link(m),
                            place: m
                                .place
                                .channel()
                                .map_or_else(|| "a thread".to_owned(), |c| format!("#{c}")),
                            from_name: frame.names.name(m.from.as_str()),
                            when: When::at(m.created_at),
                            excerpt: f
                                .excerpt
                                .iter()
                                .map(|run| (views::visible(&run.text), run.matched))
                                .collect(),
                        }
                    })
                    .collect();
                let summary = if lines.is_empty() {
                    "No live message matches.".to_owned()
                } else if found.next_before.is_some() {
                    format!(
                        "The newest {}.",
                        plural(lines.len() as u64, "match", "matches")
                    )
                } else {
                    format!("{}.", plural(lines.len() as u64, "match", "matches"))
                };
                let more = found.next_before.map(|before| {
                    format!(
                        "/search?q={}&before={before}",
                        crate::wire::extract::form_encode(&query.q)
                    )
                });
                (lines, summary, more, None)
            }
            Err(error) => (
                Vec::new(),
                String::new(),
                None,
                Some(ApiError::from(error).message),
            ),
        }
    };
    render(move |_| SearchPage {
        assets: &ASSETS,
        frame,
        results,
        summary,
        more,
        error,
    })
    .await
}
