//! The REST routes: thin twins of the MCP tools over the same core calls.

use super::extract::{Body, Path, Query};
use super::{ApiError, stream, wire};
use crate::app::AppState;
use crate::layers::{
    auth::{self, Accept},
    edge,
};
use crate::relay::{self, Caller, ChannelPost};
use axum::{
    Extension, Json, Router,
    extract::State,
    http::StatusCode,
    middleware,
    routing::{get, post, put},
};
use serde::Deserialize;

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The `/api` routes, each group behind the credentials it accepts. Routes
/// that answer at once also have the request timeout; waits and streams
/// have their own bounds (at most 50 s, or until the client leaves).
pub fn router(state: AppState) -> Router<AppState> {
    let credentials =
        |accept| middleware::from_fn_with_state((state.clone(), accept), auth::require_credentials);
    let timeout = || middleware::from_fn(edge::request_timeout);
    // Reads: Bearer, or the team page's Basic credentials.
    let reads = Router::new()
        .route("/api/channels", get(channels))
        .route("/api/channels/{channel}/messages", get(channel_messages))
        .route("/api/threads/{id}", get(thread))
        .route("/api/people", get(people))
        .route_layer(timeout())
        .route("/api/channels/{channel}/wait", get(wait_channel))
        .route_layer(credentials(Accept::BearerOrBasic));
    // Changes (claiming an inbox is one): Bearer only, which no browser
    // sends by itself.
    let writes = Router::new()
        .route("/api/channels/{channel}/messages", post(post_message))
        .route("/api/messages", post(send_message))
        .route("/api/status", put(set_status))
        .route_layer(timeout())
        .route("/api/inbox", get(inbox))
        .route_layer(credentials(Accept::Bearer));
    // Streams: as reads, plus `?token=` for clients that cannot set headers.
    let streams = Router::new()
        .route(
            "/api/channels/{channel}/stream",
            get(stream::channel_stream),
        )
        .route_layer(credentials(Accept::Stream));
    reads.merge(writes).merge(streams)
}

async fn channels(State(state): State<AppState>) -> ApiResult<wire::Channels> {
    let channels = state.relay.channels().await?;
    Ok(Json(wire::Channels::new(&channels)))
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    since_id: Option<i64>,
    limit: Option<u32>,
}

async fn channel_messages(
    State(state): State<AppState>,
    Path(channel): Path<String>,
    Query(query): Query<PageQuery>,
) -> ApiResult<wire::MessagePage> {
    let page = state
        .relay
        .channel_messages(&channel, query.since_id.unwrap_or(0), query.limit)
        .await?;
    Ok(Json(wire::MessagePage::from(&page)))
}

#[derive(Debug, Deserialize)]
struct WaitQuery {
    since_id: Option<i64>,
    timeout_s: Option<f64>,
}

async fn wait_channel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Query(query): Query<WaitQuery>,
) -> ApiResult<wire::MessagePage> {
    let timeout = relay::parse_wait(query.timeout_s, relay::CHANNEL_WAIT)?;
    // A client that goes away drops this future, which ends the wait.
    let page = state
        .relay
        .wait_channel(
            &caller,
            &channel,
            query.since_id.unwrap_or(0),
            timeout,
            std::future::pending(),
        )
        .await?;
    Ok(Json(wire::MessagePage::from(&page)))
}

#[derive(Debug, Deserialize)]
struct PostBody {
    body: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    recipient: Option<String>,
    reply_to: Option<i64>,
    sender: Option<String>,
}

async fn post_message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(channel): Path<String>,
    Body(body): Body<PostBody>,
) -> Result<(StatusCode, Json<wire::Posted>), ApiError> {
    let post = ChannelPost {
        sender: body.sender,
        channel,
        body: body.body,
        kind: body.kind,
        recipient: body.recipient,
        reply_to: body.reply_to,
    };
    let posted = state.relay.post(&caller, post).await?;
    Ok((StatusCode::CREATED, Json(wire::Posted { id: posted.id })))
}

async fn send_message(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<wire::SendMessage>,
) -> Result<(StatusCode, Json<wire::Sent>), ApiError> {
    let sent = state.relay.send_direct(&caller, body.into()).await?;
    Ok((StatusCode::CREATED, Json(wire::Sent::from(&sent))))
}

#[derive(Debug, Deserialize)]
struct InboxQuery {
    timeout_s: Option<f64>,
    sender: Option<String>,
}

async fn inbox(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<InboxQuery>,
) -> ApiResult<wire::Messages> {
    let timeout = relay::parse_wait(query.timeout_s, relay::INBOX_WAIT)?;
    let messages = state
        .relay
        .check_inbox(
            &caller,
            query.sender.as_deref(),
            timeout,
            std::future::pending(),
        )
        .await?;
    Ok(Json(wire::Messages::new(&messages)))
}

async fn thread(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<wire::Messages> {
    let messages = state.relay.read_thread(id).await?;
    Ok(Json(wire::Messages::new(&messages)))
}

async fn people(State(state): State<AppState>) -> ApiResult<wire::Peers> {
    let peers = state.relay.peers().await?;
    Ok(Json(wire::Peers::new(&peers)))
}

async fn set_status(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<wire::SetStatus>,
) -> ApiResult<wire::StatusSet> {
    let set = state
        .relay
        .set_status(&caller, body.sender.as_deref(), &body.status)
        .await?;
    Ok(Json(wire::StatusSet::from(set)))
}
