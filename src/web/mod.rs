//! The team page: server-rendered (askama), read-only for now. People sign
//! in with HTTP Basic, their token as the password. Channels stream new
//! messages live through `static/live.js` (never an inline script); every
//! page works without scripts. Every byte of message text is escaped.

use crate::relay::{Caller, Conversation, MAX_UNREAD, NOTICE, secrets};
use crate::state::AppState;
use crate::wire::{
    self, ApiError,
    extract::{Path, Query},
};
use askama::Template;
use axum::{
    Extension, Router,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{Html, IntoResponse, Response},
    routing::get,
};

/// The pages: they need credentials (Basic, from a browser) and answer at once.
pub fn pages() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/threads/{id}", get(thread))
        .route("/channels/{channel}", get(channel))
}

/// The page's static files: no credentials, so the sign-in prompt is styled.
pub fn assets() -> Router<AppState> {
    Router::new()
        .route(
            "/static/app.css",
            get(|| {
                asset(
                    "text/css; charset=utf-8",
                    include_str!("../../static/app.css"),
                )
            }),
        )
        .route(
            "/static/live.js",
            get(|| {
                asset(
                    "text/javascript; charset=utf-8",
                    include_str!("../../static/live.js"),
                )
            }),
        )
        .route(
            "/favicon.ico",
            get(|| asset("image/svg+xml", include_str!("../../static/favicon.svg"))),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// A browser asks for credentials only when told it may use Basic: the
/// pages' own layer, in front of their credentials.
pub async fn basic_challenge(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"crosstalk\", charset=\"UTF-8\""),
        );
    }
    response
}

/// Message views for a page, with invisible characters (zero-width spaces,
/// bidirectional controls) shown as visible marks like `[U+202E]`, so a
/// body cannot read differently from what it holds.
fn shown(messages: &[crate::model::Message]) -> Vec<wire::MessageView> {
    let mut views = wire::views(messages);
    for view in &mut views {
        if view.body.contains(secrets::is_invisible) {
            view.body = view
                .body
                .chars()
                .map(|c| {
                    if secrets::is_invisible(c) {
                        format!("[U+{:04X}]", c as u32)
                    } else {
                        c.to_string()
                    }
                })
                .collect();
        }
    }
    views
}

/// A page that could not be rendered: a bug of ours, logged with its cause.
#[derive(Debug, thiserror::Error)]
#[error("rendering a page failed")]
struct RenderError(#[source] askama::Error);

fn render(page: impl Template) -> Result<Response, ApiError> {
    let html = page
        .render()
        .map_err(|e| ApiError::internal(&RenderError(e)))?;
    Ok(Html(html).into_response())
}

/// A channel as the overview lists it.
struct ChannelLine {
    name: String,
    message_count: u64,
    last_activity: String,
    /// Messages the viewer has not read, as shown ("99+" past the cap).
    unread: String,
}

/// A thread as the overview lists it.
struct ThreadLine {
    id: i64,
    people: String,
    opening: String,
    message_count: u64,
    last_activity: String,
    unread: String,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    viewer: String,
    channels: Vec<ChannelLine>,
    /// The link to the next page of channels, if there is one.
    more_channels: Option<String>,
    threads: Vec<ThreadLine>,
    more_threads: Option<String>,
    people: wire::Peers,
}

/// The overview's cursors: where each list's page starts.
#[derive(Debug, serde::Deserialize)]
struct OverviewQuery {
    channels_before: Option<i64>,
    threads_before: Option<i64>,
}

fn unread_label(count: u64) -> String {
    match count {
        0 => String::new(),
        n if n >= MAX_UNREAD => format!("{MAX_UNREAD}+"),
        n => n.to_string(),
    }
}

async fn index(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<OverviewQuery>,
) -> Result<Response, ApiError> {
    let relay = &state.relay;
    let channels = relay.channels(query.channels_before, None).await?;
    let threads = relay.threads(query.threads_before, None).await?;
    let mut conversations: Vec<Conversation> = channels
        .items
        .iter()
        .map(|c| Conversation::Channel(&c.name))
        .collect();
    conversations.extend(threads.items.iter().map(|t| Conversation::Thread(t.id)));
    let unread = relay.unread(&caller, &conversations).await?;
    let (channel_unread, thread_unread) = unread.split_at(channels.items.len());
    render(IndexPage {
        viewer: caller.account(),
        channels: channels
            .items
            .iter()
            .zip(channel_unread)
            .map(|(c, unread)| ChannelLine {
                name: c.name.to_string(),
                message_count: c.message_count,
                last_activity: wire::timestamp(c.last_activity),
                unread: unread_label(*unread),
            })
            .collect(),
        more_channels: channels
            .next_before
            .map(|before| format!("/?channels_before={before}")),
        threads: threads
            .items
            .iter()
            .zip(thread_unread)
            .map(|(t, unread)| ThreadLine {
                id: t.id,
                people: t
                    .people
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                opening: t.opening.chars().take(120).collect(),
                message_count: t.message_count,
                last_activity: wire::timestamp(t.last_activity),
                unread: unread_label(*unread),
            })
            .collect(),
        more_threads: threads
            .next_before
            .map(|before| format!("/?threads_before={before}")),
        people: wire::Peers::new(&relay.peers().await?),
    })
}

#[derive(Template)]
#[template(path = "conversation.html")]
struct ConversationPage {
    viewer: String,
    heading: String,
    notice: &'static str,
    messages: Vec<wire::MessageView>,
    /// The channel's event stream, for live updates.
    stream: Option<String>,
    last_id: i64,
}

async fn thread(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let messages = state.relay.read_thread(id).await?;
    if let Some(last) = messages.last() {
        state
            .relay
            .mark_read(&caller, Conversation::Thread(id), last.id)
            .await?;
    }
    render(ConversationPage {
        viewer: caller.account(),
        heading: format!("Thread {id}"),
        notice: NOTICE,
        last_id: messages.last().map_or(0, |m| m.id),
        messages: shown(&messages),
        stream: None,
    })
}

async fn channel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
) -> Result<Response, ApiError> {
    let page = state.relay.channel_messages(&channel, None, None).await?;
    if let Some(last) = page.messages.last()
        && let Some(name) = &last.channel
    {
        state
            .relay
            .mark_read(&caller, Conversation::Channel(name), last.id)
            .await?;
    }
    render(ConversationPage {
        viewer: caller.account(),
        heading: format!("#{channel}"),
        notice: NOTICE,
        last_id: page.last_id,
        messages: shown(&page.messages),
        stream: Some(format!("/api/channels/{channel}/stream")),
    })
}
