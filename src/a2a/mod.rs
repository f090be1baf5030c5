//! The A2A edge (Agent2Agent 1.0, JSON-RPC binding): every person's agent
//! is an A2A agent at `/a2a/{handle}`, its card at
//! `/a2a/{handle}/.well-known/agent-card.json`.
//!
//! `SendMessage` from an authenticated caller is a direct message from the
//! caller to that person, through the same core call as `send_message`
//! (the secret scan, the quotas, the recipient's checks), and its answer is
//! a task: the question, whose state the ledger gives (`task.rs`).
//! `GetTask` reads it again; only its sender finds it. A refused question
//! is a `REJECTED` task that is not kept (nothing was stored).
//!
//! A caller presents their crosstalk token, or an OAuth access token the
//! relay issued for its A2A resource (`{relay}/a2a`); one issued for its
//! MCP endpoint is refused here (the credentials layer).
//!
//! `SendStreamingMessage` and `SubscribeToTask` stream a task's changes
//! (`stream.rs`). What the relay cannot keep is not offered: no push
//! notifications (the card says so), no cancel (a message once sent
//! stays; the recipient is asked in its thread instead).

mod card;
mod rpc;
mod stream;
mod task;

use crate::model::{MessageId, ThreadId};
use crate::relay::{Caller, Content, DirectMessage, RelayError};
use crate::state::AppState;
use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use rpc::{Outcome, RpcError};
use serde::Deserialize;
use serde_json::{Value, json};

/// The protocol version this edge speaks (`A2A-Version`).
pub const VERSION: &str = "1.0";

/// The methods whose answer is a stream of events.
const STREAMING: [&str; 2] = ["SendStreamingMessage", "SubscribeToTask"];

/// The card, for anyone: it says no more than its URL does (the same card
/// for any well-formed handle, whether or not such a person is on the
/// team), so it needs no credential.
pub fn cards() -> Router<AppState> {
    Router::new().route("/a2a/{handle}/.well-known/agent-card.json", get(card::card))
}

/// The JSON-RPC endpoint: Bearer only. `SendMessage` may wait for the
/// answer, so it has no response timeout (as `POST /api/messages`).
pub fn endpoint() -> Router<AppState> {
    Router::new().route("/a2a/{handle}", post(call))
}

/// A JSON-RPC 2.0 request, as far as this edge reads it.
#[derive(Deserialize)]
struct Request {
    jsonrpc: String,
    #[serde(default)]
    id: Value,
    method: String,
    #[serde(default)]
    params: Value,
}

async fn call(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(handle): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match serde_json::from_slice::<Request>(&body) {
        Ok(request) if request.jsonrpc == "2.0" => request,
        Ok(request) => {
            return answer(
                request.id,
                RpcError::new(-32600, "jsonrpc must be \"2.0\"").into(),
                false,
            );
        }
        Err(error) if serde_json::from_slice::<Value>(&body).is_ok() => {
            return answer(
                Value::Null,
                RpcError::new(-32600, format!("not a JSON-RPC request: {error}")).into(),
                false,
            );
        }
        Err(error) => {
            return answer(
                Value::Null,
                RpcError::new(-32700, format!("not JSON: {error}")).into(),
                false,
            );
        }
    };
    let outcome = match version_refused(&headers) {
        Some(refused) => refused.into(),
        None => dispatch(&state, &caller, &handle, &request).await,
    };
    let streaming = STREAMING.contains(&request.method.as_str());
    answer(request.id, outcome, streaming)
}

/// `A2A-Version` names a version this edge does not speak; none sent means
/// 0.3, as A2A 1.0 says.
fn version_refused(headers: &HeaderMap) -> Option<RpcError> {
    let asked = match headers.get("a2a-version") {
        Some(value) => value.to_str().unwrap_or(""),
        None => "0.3",
    };
    let major = asked.trim().split('.').next();
    (major != Some("1")).then(|| {
        RpcError::a2a(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!(
                "A2A-Version {asked:?} is not spoken here (none sent means 0.3); this agent \
                 speaks {VERSION}: send A2A-Version: {VERSION}"
            ),
        )
    })
}

async fn dispatch(state: &AppState, caller: &Caller, handle: &str, request: &Request) -> Outcome {
    let result = match request.method.as_str() {
        "SendMessage" => send_message(state, caller, handle, request, false).await,
        "GetTask" => get_task(state, caller, handle, &request.params).await,
        "CancelTask" => cancel_task(state, caller, handle, &request.params).await,
        "SendStreamingMessage" => send_message(state, caller, handle, request, true).await,
        "SubscribeToTask" => subscribe(state, caller, handle, &request.id, &request.params).await,
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(RpcError::a2a(
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "push notifications are not offered: use GetTask",
        )
        .into()),
        "GetExtendedAgentCard" => Err(RpcError::a2a(
            -32007,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "this agent has no extended card",
        )
        .into()),
        "ListTasks" => Err(RpcError::a2a(
            -32004,
            "UNSUPPORTED_OPERATION",
            "tasks are not listed here: GetTask or SubscribeToTask the ones you sent",
        )
        .into()),
        other => Err(RpcError::new(-32601, format!("no method {other:?} here")).into()),
    };
    result.unwrap_or_else(|outcome| outcome)
}

/// The answer to a call, always JSON-RPC's shape (HTTP 200) but for the
/// relay's own refusals; to a streaming call, as a stream (of one event,
/// when it comes to one answer), which is what its client reads.
fn answer(id: Value, outcome: Outcome, streaming: bool) -> Response {
    let body = match outcome {
        Outcome::Result(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Outcome::Error(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.body() }),
        Outcome::Http(refused) => return refused.into_response(),
        Outcome::Stream(events) => return *events,
    };
    match streaming {
        true => stream::once(body),
        false => Json(body).into_response(),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendParams {
    message: IncomingMessage,
    #[serde(default)]
    configuration: Configuration,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Configuration {
    #[serde(default)]
    return_immediately: bool,
    history_length: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingMessage {
    message_id: String,
    #[serde(default)]
    parts: Vec<Value>,
    context_id: Option<String>,
    task_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    id: String,
    history_length: Option<u32>,
}

fn params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, Outcome> {
    T::deserialize(params).map_err(|e| RpcError::invalid_params(format!("params: {e}")).into())
}

/// A task's or a context's id, as the relay numbers them.
fn number(id: &str) -> Option<i64> {
    id.parse().ok().filter(|n| *n > 0)
}

/// The message's text: its text parts, in order, a blank line between.
fn text_of(message: &IncomingMessage) -> Result<String, Outcome> {
    let mut texts = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => texts.push(text),
            None => {
                return Err(RpcError::a2a(
                    -32005,
                    "CONTENT_TYPE_NOT_SUPPORTED",
                    "only text parts are taken here (a part with \"text\")",
                )
                .into());
            }
        }
    }
    match texts.is_empty() {
        true => Err(RpcError::invalid_params("message.parts: no text part").into()),
        false => Ok(texts.join("\n\n")),
    }
}

/// What sending a question came to.
enum Sent {
    Stored(crate::model::Message),
    /// Refused (a likely secret): nothing was stored.
    Rejected(task::Task),
}

/// Sends the question of `send` to the agent's person, in a new thread, or
/// in the thread of `contextId` (or of the caller's task `taskId`).
async fn send(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    send: &SendParams,
) -> Result<Sent, Outcome> {
    let body = text_of(&send.message)?;
    let thread_id = match (&send.message.task_id, &send.message.context_id) {
        (Some(task), _) => found(state, caller, handle, task).await?.place.thread(),
        (None, Some(context)) => Some(ThreadId(number(context).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "contextId {context:?}: not a context of this relay"
            ))
        })?)),
        (None, None) => None,
    };
    let question = DirectMessage {
        to: handle.to_owned(),
        thread_id,
        content: Content::text(body, Some("QUESTION".to_owned())),
        ..DirectMessage::default()
    };
    match state.relay.send_direct(caller, question).await {
        Ok(sent) => Ok(Sent::Stored(sent)),
        Err(refused @ RelayError::SecretRefused(_)) => Ok(Sent::Rejected(task::rejected(
            &send.message.message_id,
            refused.to_string(),
        ))),
        Err(error) => Err(error.into()),
    }
}

/// `SendMessage` and `SendStreamingMessage`: the question ([`send`]), and
/// the task it is. Streamed, as a stream of its changes (`stream.rs`);
/// otherwise at once with `returnImmediately`, or once it settles
/// (answered, acknowledged, asking back), at most
/// [`crate::relay::MAX_WAIT`], as it then stands. A client that goes away
/// drops the wait.
async fn send_message(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    request: &Request,
    streaming: bool,
) -> Result<Outcome, Outcome> {
    let asked: SendParams = params(&request.params)?;
    let sent = match send(state, caller, handle, &asked).await? {
        Sent::Stored(sent) => sent,
        Sent::Rejected(task) => return Ok(Outcome::Result(json!({ "task": task }))),
    };
    let history = asked.configuration.history_length;
    let (task, following) = stream::follow(state, caller, &sent, history).await?;
    Ok(match (streaming, asked.configuration.return_immediately) {
        (true, _) => Outcome::Stream(Box::new(stream::events(
            request.id.clone(),
            task,
            following,
        ))),
        (false, true) => Outcome::Result(json!({ "task": task })),
        (false, false) => Outcome::Result(json!({ "task": following.settle(task).await })),
    })
}

/// `SubscribeToTask`: one of the caller's tasks as a stream of its changes.
async fn subscribe(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    id: &Value,
    params: &Value,
) -> Result<Outcome, Outcome> {
    let (asked, sent) = task_asked(state, caller, handle, params).await?;
    let (task, following) = stream::follow(state, caller, &sent, asked.history_length).await?;
    Ok(Outcome::Stream(Box::new(stream::events(
        id.clone(),
        task,
        following,
    ))))
}

/// The caller's task `id`: a question they sent to this agent's person;
/// `TASK_NOT_FOUND` for any other id, whether or not it exists.
async fn found(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    id: &str,
) -> Result<crate::model::Message, Outcome> {
    let number = number(id).ok_or_else(|| RpcError::task_not_found(id))?;
    match state.relay.sent_by(caller, MessageId(number)).await {
        Ok(sent) if sent.to.as_ref().is_some_and(|to| to.as_str() == handle) => Ok(sent),
        Ok(_) | Err(RelayError::NotFound(_)) => Err(RpcError::task_not_found(id).into()),
        Err(error) => Err(error.into()),
    }
}

/// The caller's task a call's `params` name (`{id, historyLength?}`), and
/// what they ask.
async fn task_asked(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    params: &Value,
) -> Result<(TaskParams, crate::model::Message), Outcome> {
    let asked: TaskParams = self::params(params)?;
    let sent = found(state, caller, handle, &asked.id).await?;
    Ok((asked, sent))
}

async fn get_task(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    params: &Value,
) -> Result<Outcome, Outcome> {
    let (asked, sent) = task_asked(state, caller, handle, params).await?;
    let (sent, answer) = state.relay.sent_and_answer(caller, sent.id).await?;
    let task = task::task(&sent, answer.as_ref(), asked.history_length);
    Ok(Outcome::Result(json!(task)))
}

async fn cancel_task(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    params: &Value,
) -> Result<Outcome, Outcome> {
    task_asked(state, caller, handle, params).await?;
    Err(RpcError::a2a(
        -32002,
        "TASK_NOT_CANCELABLE",
        "a question once sent stays with its recipient; say so in its thread instead \
         (SendMessage with its taskId)",
    )
    .into())
}
