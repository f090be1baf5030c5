//! The REST edge: thin twins of the MCP tools over the same core calls,
//! reading the same argument types ([`crate::wire::args`]).
//!
//! The routes come in groups by the credentials they take and whether they
//! answer at once; [`crate::app::router`] puts the layers in front of each.

mod attention;
pub mod oauth;
mod openapi;
mod stream;
mod work;

use crate::model::{MessageId, ThreadId};
use crate::relay::{Caller, Reader};
use crate::state::AppState;
use crate::wire::{
    self, ApiError, args,
    extract::{Body, Path, Query},
};
use axum::{
    Extension, Json, Router,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{delete, get, post, put},
};
use serde::Serialize;

pub(super) type ApiResult<T> = Result<Json<T>, ApiError>;

/// Messages as JSON, written into a buffer sized for them at once. axum's
/// `Json` starts at 128 bytes and doubles: a page of a hundred messages
/// (about 40 KB) grew nine times, and growing and copying took about a
/// tenth of a read's time in a profile (bench/README.md).
struct SizedJson<T>(T);

impl<T: Serialize + wire::JsonSize> IntoResponse for SizedJson<T> {
    fn into_response(self) -> Response {
        let mut buffer = Vec::with_capacity(self.0.json_size());
        match serde_json::to_writer(&mut buffer, &self.0) {
            Ok(()) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                buffer,
            )
                .into_response(),
            Err(error) => ApiError::internal(&error).into_response(),
        }
    }
}

type Listed<T> = Result<SizedJson<T>, ApiError>;

/// What anyone may read, without credentials: the API's own description.
pub fn public() -> Router<AppState> {
    Router::new().route("/api/openapi.json", get(openapi::serve))
}

/// Reads that answer at once: Bearer, or the team page's Basic credentials.
pub fn reads() -> Router<AppState> {
    Router::new()
        .route("/api/channels", get(channels))
        .route("/api/channels/{channel}/messages", get(channel_messages))
        .route("/api/threads/{id}", get(thread))
        .route("/api/messages/{id}", get(message))
        .route("/api/people", get(people))
        .route("/api/search", get(search))
        .route("/api/me/notifications", get(attention::notifications))
        .route("/api/approvals", get(attention::approvals))
        .route("/api/push/key", get(attention::push_key))
        .route("/api/push/subscriptions", get(attention::devices))
        .route("/api/open", get(work::open))
        .route("/api/messages/{id}/attachments/{n}", get(work::attachment))
        .route("/api/claims", get(work::claims))
}

/// The channel long-poll: credentials as reads; bounded by its own timeout.
pub fn waits() -> Router<AppState> {
    Router::new()
        .route("/api/channels/{channel}/wait", get(wait_channel))
        .route("/api/approvals/{id}", get(attention::approval))
}

/// Changes that answer at once: Bearer only, which no browser sends by itself.
pub fn writes() -> Router<AppState> {
    Router::new()
        .route("/api/channels/{channel}/messages", post(post_message))
        .route("/api/status", put(set_status))
        .route(
            "/api/me/notifications",
            put(attention::change_notifications),
        )
        .route("/api/approvals", post(attention::ask_approval))
        .route("/api/approvals/{id}", post(attention::answer_approval))
        .route("/api/push/subscriptions", post(attention::add_device))
        .route(
            "/api/push/subscriptions/{id}",
            delete(attention::remove_device),
        )
        .route("/api/messages/{id}/ack", post(work::ack))
        .route("/api/claims", post(work::claim))
        .route("/api/claims/{id}", delete(work::release))
}

/// Sending a direct message, which may wait for the reply
/// (`wait_for_reply_seconds`): Bearer only.
pub fn asks() -> Router<AppState> {
    Router::new().route("/api/messages", post(send_message))
}

/// Claiming the inbox, which changes it and may wait (or stream): Bearer
/// only.
pub fn inbox() -> Router<AppState> {
    Router::new()
        .route("/api/inbox", get(check_inbox))
        .route("/api/inbox/stream", get(stream::inbox_stream))
        .route("/api/inbox/lease", post(lease_inbox))
}

/// Server-Sent Events: as reads, plus `?token=` for clients that cannot set
/// headers.
pub fn streams() -> Router<AppState> {
    Router::new()
        .route(
            "/api/channels/{channel}/stream",
            get(stream::channel_stream),
        )
        .route("/api/threads/{id}/stream", get(stream::thread_stream))
        .route("/api/me/stream", get(stream::arrivals))
}

async fn search(
    State(state): State<AppState>,
    Query(args): Query<args::SearchMessages>,
) -> ApiResult<wire::SearchResults> {
    let found = state
        .relay
        .search(&args.query, args.before.map(MessageId), args.limit)
        .await?;
    Ok(Json(wire::SearchResults::from(&found)))
}

async fn channels(
    State(state): State<AppState>,
    Query(args): Query<args::ListChannels>,
) -> ApiResult<wire::Channels> {
    let channels = state
        .relay
        .channels(args.before.map(MessageId), args.limit)
        .await?;
    Ok(Json(wire::Channels::from(&channels)))
}

async fn channel_messages(
    State(state): State<AppState>,
    Query(args): Query<args::GetMessages>,
) -> Listed<wire::MessagePage> {
    let page = state
        .relay
        .channel_messages(&args.channel, args.since_id.map(MessageId), args.limit)
        .await?;
    Ok(SizedJson(wire::MessagePage::from(page)))
}

async fn wait_channel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(args): Query<args::WaitForMessage>,
) -> Listed<wire::MessagePage> {
    // A client that goes away drops this future, which ends the wait.
    let page = state
        .relay
        .wait_channel(&caller, args.into(), std::future::pending())
        .await?;
    Ok(SizedJson(wire::MessagePage::from(page)))
}

async fn post_message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<args::PostMessage>,
) -> Result<(StatusCode, Json<wire::Posted>), ApiError> {
    let posted = state.relay.post(&caller, args.into()).await?;
    Ok((StatusCode::CREATED, Json(wire::Posted { id: posted.id.0 })))
}

async fn send_message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<args::SendMessage>,
) -> Result<(StatusCode, Json<wire::Sent>), ApiError> {
    // A client that goes away drops this future, which ends the wait.
    let (sent, reply) = state
        .relay
        .ask(&caller, args.into(), std::future::pending())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::Sent::new(&sent, reply.as_ref())),
    ))
}

async fn check_inbox(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(args): Query<args::CheckInbox>,
) -> Listed<wire::Messages> {
    let messages = state
        .relay
        .check_inbox(&caller, args.into(), std::future::pending())
        .await?;
    Ok(SizedJson(wire::Messages::new(messages)))
}

/// `POST /api/inbox/lease`: the caller's waiting messages, leased to the
/// Claude Code hook that asks (`crosstalk hook`), which shows them to its
/// model; waits up to `timeout_seconds` for one.
async fn lease_inbox(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<args::LeaseInbox>,
) -> Listed<wire::Messages> {
    let messages = state
        .relay
        .lease_inbox(&caller, args.via.into(), args.timeout_seconds)
        .await?;
    Ok(SizedJson(wire::Messages::new(messages)))
}

async fn thread(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(page): Query<args::ThreadPage>,
) -> Listed<wire::ThreadMessages> {
    let page = state
        .relay
        .read_thread(
            &caller,
            ThreadId(id),
            page.since_id.map(MessageId),
            page.limit,
            reader(&headers),
        )
        .await?;
    Ok(SizedJson(wire::ThreadMessages::from(page)))
}

async fn message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> ApiResult<wire::OneMessage> {
    let message = state
        .relay
        .message(&caller, MessageId(id), reader(&headers))
        .await?;
    Ok(Json(wire::OneMessage::new(&message)))
}

/// Who reads: a person, with the team page's Basic credentials (their
/// browser), or an agent, with a Bearer token.
fn reader(headers: &HeaderMap) -> Reader {
    let basic = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_whitespace().next())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("basic"));
    match basic {
        true => Reader::Person,
        false => Reader::Agent,
    }
}

async fn people(State(state): State<AppState>) -> ApiResult<wire::Peers> {
    let peers = state.relay.peers().await?;
    Ok(Json(wire::Peers::new(&peers)))
}

async fn set_status(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(args): Body<args::SetStatus>,
) -> ApiResult<wire::StatusSet> {
    let set = state
        .relay
        .set_status(&caller, args.sender.as_deref(), &args.status)
        .await?;
    Ok(Json(wire::StatusSet::from(set)))
}
