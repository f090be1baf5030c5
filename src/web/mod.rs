//! The team page: server-rendered (askama), for reading, following live
//! and writing. People sign in with HTTP Basic, their token as the
//! password. Every page works without script; `static/live.js` (never an
//! inline script) makes times relative, follows conversations live, and
//! sends forms in place. Message bodies are Markdown made safe
//! ([`markdown`]); every other byte of text is escaped by the templates.

mod forms;
mod markdown;
mod views;

use crate::model::Message;
use crate::relay::{Caller, Conversation, NOTICE, Relay};
use crate::state::AppState;
use crate::wire::{
    ApiError,
    extract::{Path, Query},
};
use askama::Template;
use axum::{
    Extension, Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
};
use std::sync::LazyLock;
use views::{Frame, MessageLine, When, plural, unread_label};

/// The pages: they need credentials (Basic, from a browser) and answer at once.
pub fn pages() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/threads/{id}", get(thread).post(forms::reply))
        .route("/channels/{channel}", get(channel).post(forms::post))
        .route("/threads/{id}/messages", get(thread_fragment))
        .route("/channels/{channel}/messages", get(channel_fragment))
        .route("/new", axum::routing::post(forms::start))
        .route("/status", axum::routing::post(forms::status))
        .route("/search", get(search))
        .route("/signout", get(sign_out))
        .route("/signin", get(sign_in))
}

/// The page's static files, named by a hash of their content so an upgrade
/// is never served stale: no credentials, so the sign-in page is styled.
pub fn assets() -> Router<AppState> {
    Router::new()
        .route("/static/{file}", get(asset))
        .route("/favicon.ico", get(favicon))
}

/// One static file: its hashed path, type and content.
pub struct Asset {
    pub path: String,
    content_type: &'static str,
    body: &'static str,
}

impl Asset {
    fn new(name: &str, extension: &str, content_type: &'static str, body: &'static str) -> Asset {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(body.as_bytes());
        let short: String = hash[..5].iter().map(|b| format!("{b:02x}")).collect();
        Asset {
            path: format!("/static/{name}.{short}.{extension}"),
            content_type,
            body,
        }
    }
}

/// The stylesheet and the script, as every page links them.
pub struct Assets {
    pub css: Asset,
    pub js: Asset,
}

pub static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    css: Asset::new(
        "app",
        "css",
        "text/css; charset=utf-8",
        include_str!("../../static/app.css"),
    ),
    js: Asset::new(
        "live",
        "js",
        "text/javascript; charset=utf-8",
        include_str!("../../static/live.js"),
    ),
});

async fn asset(Path(file): Path<String>) -> Response {
    let path = format!("/static/{file}");
    match [&ASSETS.css, &ASSETS.js]
        .into_iter()
        .find(|a| a.path == path)
    {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            asset.body,
        )
            .into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, "not_found", "there is no such file")
            .into_response(),
    }
}

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../static/favicon.svg"),
    )
        .into_response()
}

/// The cookie that marks a credential signed out on this browser.
const SIGNED_OUT: &str = "crosstalk_signed_out";

/// A page about a failure: 401 (with how to get a token), 403, 404, 429…
#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    assets: &'static Assets,
    title: &'static str,
    message: String,
    /// Says how to sign in (a 401).
    sign_in: bool,
}

/// The pages' own layer, outermost of theirs: any failure answered for a
/// page (no credentials, a revoked token, an unknown thread, a rate limit)
/// becomes an HTML page with the same status and headers; a 401 also
/// tells the browser it may ask for Basic credentials, naming the relay.
/// The page's script gets the JSON as the API answers it.
pub async fn page_errors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // The page's own script reads failures in the API's JSON shape.
    let scripted = forms::from_script(request.headers());
    let response = next.run(request).await;
    if scripted {
        return response;
    }
    let status = response.status();
    let is_html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_owned());
    let sign_in = status == StatusCode::UNAUTHORIZED;
    let page = ErrorPage {
        assets: &ASSETS,
        title: if sign_in {
            "Sign in to crosstalk"
        } else {
            status.canonical_reason().unwrap_or("Error")
        },
        // What the credentials layer says is for agents (send a Bearer
        // token); a person signs in.
        message: if sign_in {
            "This is the team page of a crosstalk relay: sign in to read and answer what \
             your team's agents say."
                .to_owned()
        } else {
            message
        },
        sign_in,
    };
    let html = page.render().unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if status == StatusCode::UNAUTHORIZED {
        parts
            .headers
            .insert(header::WWW_AUTHENTICATE, challenge(&state));
    }
    Response::from_parts(parts, Body::from(html))
}

/// `Basic realm="crosstalk at relay.example.com"`.
fn challenge(state: &AppState) -> HeaderValue {
    let host = crate::host::url_host(&state.config.public_url).unwrap_or_default();
    let realm: String = format!("crosstalk at {host}")
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\""))
        .unwrap_or(HeaderValue::from_static("Basic realm=\"crosstalk\""))
}

/// After credentials: a credential this browser signed out with is
/// refused (401) until the person signs in again at `/signin`.
pub async fn signed_out(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let marked = cookie(request.headers(), SIGNED_OUT).map(str::to_owned);
    let caller = request.extensions().get::<Caller>().cloned();
    if let (Some(marked), Some(caller)) = (marked, caller)
        && request.uri().path() != "/signin"
    {
        match forms::signed_out_mark(&state.relay, &caller).await {
            Ok(mark) if mark == marked => {
                return ApiError::unauthorized(
                    "you signed out: sign in again to read the team page",
                )
                .into_response();
            }
            Ok(_) => {}
            Err(error) => return error.into_response(),
        }
    }
    next.run(request).await
}

fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// `GET /signout`: marks this credential signed out on this browser and
/// answers 401, so the browser forgets it.
async fn sign_out(State(state): State<AppState>, Extension(caller): Extension<Caller>) -> Response {
    let mark = match forms::signed_out_mark(&state.relay, &caller).await {
        Ok(mark) => mark,
        Err(error) => return error.into_response(),
    };
    let secure = if state.config.tls.is_on() {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{SIGNED_OUT}={mark}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response =
        ApiError::unauthorized("you are signed out; sign in again with your token").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /signin`: after signing out, forgets the mark and asks for
/// credentials again; signed in, goes to the overview.
async fn sign_in(request: Request) -> Response {
    if cookie(request.headers(), SIGNED_OUT).is_some() {
        let mut response =
            ApiError::unauthorized("sign in with your handle and token").into_response();
        response.headers_mut().insert(
            header::SET_COOKIE,
            HeaderValue::from_static(
                "crosstalk_signed_out=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
            ),
        );
        return response;
    }
    Redirect::to("/").into_response()
}

/// A page that could not be rendered: a bug of ours, logged with its cause.
#[derive(Debug, thiserror::Error)]
#[error("rendering a page failed")]
struct RenderError(#[source] askama::Error);

/// Builds a page and renders it on a blocking thread, never on the async
/// workers: a page of long messages takes milliseconds to render (its
/// Markdown the first time, its template every time), and `/healthz`,
/// streams and every other request must not wait behind it.
async fn render<T: Template>(
    build: impl FnOnce() -> T + Send + 'static,
) -> Result<Response, ApiError> {
    let html = tokio::task::spawn_blocking(move || build().render())
        .await
        .map_err(|e| ApiError::internal(&e))?
        .map_err(|e| ApiError::internal(&RenderError(e)))?;
    Ok(Html(html).into_response())
}

async fn frame(state: &AppState, caller: &Caller) -> Result<Frame, ApiError> {
    let csrf = forms::token_of(&state.relay, caller).await?;
    Ok(Frame::of(&state.relay, caller, csrf).await?)
}

/// What a person wrote in a form: sent, or shown again if refused.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Draft {
    pub body: String,
    /// The type label; empty for the default.
    pub kind: String,
    /// A recipient's handle; empty for nobody (a reply ignores it).
    pub to: String,
}

/// A refusal and the draft it refused.
type Refusal = Option<(String, Draft)>;

/// A page a form can be on.
pub enum ConversationPage {
    Overview,
    Thread(i64),
    Channel(String),
}

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
struct OverviewQuery {
    channels_before: Option<i64>,
    threads_before: Option<i64>,
    /// Whom the new-conversation form is for.
    to: Option<String>,
}

async fn overview(
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
    let threads = relay.threads(query.threads_before, None).await?;
    let keys: Vec<Conversation> = threads
        .items
        .iter()
        .map(|t| Conversation::Thread(t.id))
        .collect();
    let thread_unread = relay.unread(caller, &keys).await?;
    let mut lines: Vec<(i64, ConversationLine)> = channels
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
    // Channels and threads together, by latest activity.
    lines.sort_by_key(|(last_id, _)| std::cmp::Reverse(*last_id));
    render(move || OverviewPage {
        assets: &ASSETS,
        frame,
        conversations: lines.into_iter().map(|(_, line)| line).collect(),
        more_channels: channels
            .next_before
            .map(|before| format!("/?channels_before={before}")),
        more_threads: threads
            .next_before
            .map(|before| format!("/?threads_before={before}")),
        error,
        draft,
    })
    .await
}

async fn thread(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    render_conversation(&state, &caller, ConversationPage::Thread(id), None).await
}

async fn channel(
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
    let last_id = messages.last().map_or(0, |m| m.id);
    let stream = format!("/api{base}/stream");
    render(move || ConversationView {
        assets: &ASSETS,
        messages: views::lines(&messages, &frame.names),
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
        let conversation = match &last.channel {
            Some(channel) => Conversation::Channel(channel),
            None => Conversation::Thread(last.thread_id.unwrap_or_default()),
        };
        relay.mark_read(caller, conversation, last.id).await?;
    }
    Ok(())
}

#[derive(Debug, serde::Deserialize)]
struct After {
    after: Option<i64>,
}

/// `GET /threads/{id}/messages?after=ID`: the messages after `ID`, as the
/// page renders them, for the script to put in place.
async fn thread_fragment(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(after): Query<After>,
) -> Result<Response, ApiError> {
    let mut messages = state.relay.thread_for_page(id).await?;
    messages.retain(|m| m.id > after.after.unwrap_or(0));
    mark_shown(&state.relay, &caller, &messages).await?;
    fragment(&state, &messages).await
}

async fn channel_fragment(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Query(after): Query<After>,
) -> Result<Response, ApiError> {
    let page = state
        .relay
        .channel_messages(&channel, after.after, None)
        .await?;
    mark_shown(&state.relay, &caller, &page.messages).await?;
    fragment(&state, &page.messages).await
}

async fn fragment(
    state: &AppState,
    messages: &[crate::model::Message],
) -> Result<Response, ApiError> {
    let peers = state.relay.peers().await?;
    let names = views::Names::of(&peers);
    let messages = messages.to_vec();
    render(move || MessagesFragment {
        messages: views::lines(&messages, &names),
    })
    .await
}

#[derive(Debug, serde::Deserialize)]
struct SearchQuery {
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

async fn search(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<SearchQuery>,
) -> Result<Response, ApiError> {
    let mut frame = frame(&state, &caller).await?;
    frame.query = query.q.clone();
    let (results, summary, more, error) = if query.q.trim().is_empty() {
        (Vec::new(), String::new(), None, None)
    } else {
        match state.relay.search(&query.q, query.before, None).await {
            Ok(found) => {
                let lines: Vec<FoundLine> = found
                    .items
                    .iter()
                    .map(|f| {
                        let m = &f.message;
                        FoundLine {
                            href: views::link(m),
                            place: m
                                .channel
                                .as_ref()
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
                let more = found
                    .next_before
                    .map(|before| format!("/search?q={}&before={before}", form_encoded(&query.q)));
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
    render(move || SearchPage {
        assets: &ASSETS,
        frame,
        results,
        summary,
        more,
        error,
    })
    .await
}

/// `value`, encoded for a query string.
fn form_encoded(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
