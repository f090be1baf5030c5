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
//! What the relay cannot keep is not offered: no streaming, no push
//! notifications (the card says so), no cancel (a message once sent
//! stays; the recipient is asked in its thread instead).

mod task;

use crate::model::{Handle, MessageId, ThreadId};
use crate::relay::{Caller, DirectMessage, MAX_WAIT, RelayError, SCOPE};
use crate::state::AppState;
use crate::wire::ApiError;
use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The protocol version this edge speaks (`A2A-Version`).
pub const VERSION: &str = "1.0";

/// The card, for anyone: it says no more than its URL does (the same card
/// for any well-formed handle, whether or not such a person is on the
/// team), so it needs no credential.
pub fn cards() -> Router<AppState> {
    Router::new().route("/a2a/{handle}/.well-known/agent-card.json", get(card))
}

/// The JSON-RPC endpoint: Bearer only. `SendMessage` may wait for the
/// answer, so it has no response timeout (as `POST /api/messages`).
pub fn endpoint() -> Router<AppState> {
    Router::new().route("/a2a/{handle}", post(call))
}

async fn card(
    State(state): State<AppState>,
    Path(handle): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let handle = Handle::parse(&handle).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no agent card here: /a2a/{handle} takes a person's handle",
        )
    })?;
    let public = &state.config.public_url;
    let url = format!("{public}/a2a/{handle}");
    Ok(Json(json!({
        "name": format!("{handle}'s agent"),
        "description": format!(
            "The coding agent of {handle}, on this team's crosstalk relay. A message sent \
             here reaches {handle}'s agent (or {handle}, told when no agent is there) as a \
             direct message; the task completes with their answer."
        ),
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": VERSION,
        }],
        "provider": { "organization": "crosstalk", "url": public },
        "capabilities": { "streaming": false, "pushNotifications": false },
        "securitySchemes": {
            "bearer": { "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "The sender's crosstalk token (`crosstalk add` prints it).",
            } },
            "oauth": { "oauth2SecurityScheme": {
                "description": format!(
                    "The relay's own OAuth: the sender signs in on its page as themselves. \
                     Ask for the resource {public}/a2a; a token for another resource (its \
                     MCP endpoint's) is not taken here."
                ),
                "flows": { "authorizationCode": {
                    "authorizationUrl": format!("{public}/oauth/authorize"),
                    "tokenUrl": format!("{public}/oauth/token"),
                    "refreshUrl": format!("{public}/oauth/token"),
                    "scopes": { SCOPE: "act as yourself on this relay" },
                    "pkceRequired": true,
                } },
                "oauth2MetadataUrl": format!("{public}/.well-known/oauth-authorization-server"),
            } },
        },
        "securityRequirements": [
            { "schemes": { "bearer": { "list": [] } } },
            { "schemes": { "oauth": { "list": [SCOPE] } } },
        ],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "ask",
            "name": format!("ask {handle}'s agent"),
            "description": format!(
                "Ask {handle}'s agent something only they know; the answer is theirs."
            ),
            "tags": ["question", "team"],
            "examples": ["Which port does the staging database listen on?"],
        }],
    })))
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

/// An A2A or JSON-RPC error: its code, and what to change.
struct RpcError {
    code: i64,
    message: String,
    /// A2A's name of it (`google.rpc.ErrorInfo`'s `reason`), for its own
    /// codes.
    reason: Option<&'static str>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            reason: None,
        }
    }

    fn a2a(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            reason: Some(reason),
            ..RpcError::new(code, message)
        }
    }

    fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }

    fn task_not_found(id: &str) -> RpcError {
        RpcError::a2a(
            -32001,
            "TASK_NOT_FOUND",
            format!("there is no task {id} of yours"),
        )
    }

    fn body(self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(reason) = self.reason {
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
            }]);
        }
        error
    }
}

/// What a call comes to: a JSON-RPC result or error, or a refusal the
/// relay gives every client alike (a quota's 429, an outage's 503), as
/// HTTP.
enum Outcome {
    Result(Value),
    Error(RpcError),
    Http(ApiError),
}

impl From<RpcError> for Outcome {
    fn from(error: RpcError) -> Outcome {
        Outcome::Error(error)
    }
}

/// The relay's refusal of a call: bad input is the caller's to change
/// (invalid params); what every client is told the same way (quotas, waits,
/// outages, the relay's own failures) stays HTTP.
impl From<RelayError> for Outcome {
    fn from(error: RelayError) -> Outcome {
        match error {
            RelayError::BadInput(_)
            | RelayError::NotFound(_)
            | RelayError::Forbidden(_)
            | RelayError::Conflict(_)
            | RelayError::TooLarge { .. } => RpcError::invalid_params(error.to_string()).into(),
            other => Outcome::Http(ApiError::from(other)),
        }
    }
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
            );
        }
        Err(error) if serde_json::from_slice::<Value>(&body).is_ok() => {
            return answer(
                Value::Null,
                RpcError::new(-32600, format!("not a JSON-RPC request: {error}")).into(),
            );
        }
        Err(error) => {
            return answer(
                Value::Null,
                RpcError::new(-32700, format!("not JSON: {error}")).into(),
            );
        }
    };
    let outcome = match version_refused(&headers) {
        Some(refused) => refused.into(),
        None => dispatch(&state, &caller, &handle, &request).await,
    };
    answer(request.id, outcome)
}

/// `A2A-Version` names a version this edge does not speak (none sent is
/// taken as this one).
fn version_refused(headers: &HeaderMap) -> Option<RpcError> {
    let asked = headers.get("a2a-version")?.to_str().unwrap_or("");
    let speaks = asked == "1" || asked.split('.').next() == Some("1");
    (!speaks).then(|| {
        RpcError::a2a(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!("A2A-Version {asked:?} is not spoken here; this agent speaks {VERSION}"),
        )
    })
}

async fn dispatch(state: &AppState, caller: &Caller, handle: &str, request: &Request) -> Outcome {
    let result = match request.method.as_str() {
        "SendMessage" => send_message(state, caller, handle, &request.params).await,
        "GetTask" => get_task(state, caller, &request.params).await,
        "CancelTask" => cancel_task(state, caller, &request.params).await,
        "SendStreamingMessage" | "SubscribeToTask" => Err(RpcError::a2a(
            -32004,
            "UNSUPPORTED_OPERATION",
            "streaming is not offered (the card's capabilities.streaming is false): \
             use SendMessage and GetTask",
        )
        .into()),
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
        other => Err(RpcError::new(-32601, format!("no method {other:?} here")).into()),
    };
    result.unwrap_or_else(|outcome| outcome)
}

/// The answer to a call, always JSON-RPC's shape (HTTP 200) but for the
/// relay's own refusals.
fn answer(id: Value, outcome: Outcome) -> Response {
    let body = match outcome {
        Outcome::Result(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Outcome::Error(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.body() }),
        Outcome::Http(refused) => return refused.into_response(),
    };
    Json(body).into_response()
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

/// `SendMessage`: a question to the agent's person, in a new thread, or in
/// the thread of `contextId` (or of the caller's task `taskId`). Unless
/// `returnImmediately`, it waits for the answer (at most [`MAX_WAIT`]) and
/// answers with the task as it then stands.
async fn send_message(
    state: &AppState,
    caller: &Caller,
    handle: &str,
    params: &Value,
) -> Result<Outcome, Outcome> {
    let send: SendParams = self::params(params)?;
    let body = text_of(&send.message)?;
    let thread_id = match (&send.message.task_id, &send.message.context_id) {
        (Some(task), _) => {
            let id = number(task).ok_or_else(|| RpcError::task_not_found(task))?;
            match state.relay.sent_by(caller, MessageId(id)).await {
                Ok(sent) => sent.place.thread(),
                Err(RelayError::NotFound(_)) => return Err(RpcError::task_not_found(task).into()),
                Err(error) => return Err(error.into()),
            }
        }
        (None, Some(context)) => Some(ThreadId(number(context).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "contextId {context:?}: not a context of this relay"
            ))
        })?)),
        (None, None) => None,
    };
    let wait = (!send.configuration.return_immediately).then_some(MAX_WAIT.as_secs_f64());
    let question = DirectMessage {
        to: handle.to_owned(),
        body,
        thread_id,
        kind: Some("QUESTION".to_owned()),
        wait_for_reply_seconds: wait,
        ..DirectMessage::default()
    };
    // A client that goes away drops this future, which ends the wait.
    let sent = match state
        .relay
        .ask(caller, question, std::future::pending())
        .await
    {
        Ok((sent, _)) => sent,
        Err(refused @ RelayError::SecretRefused(_)) => {
            let task = task::rejected(&send.message.message_id, refused.to_string());
            return Ok(Outcome::Result(json!({ "task": task })));
        }
        Err(error) => return Err(error.into()),
    };
    // As it stands now: the wait may have ended with the answer.
    let (sent, answer) = state.relay.sent_and_answer(caller, sent.id).await?;
    let task = task::task(&sent, answer.as_ref(), send.configuration.history_length);
    Ok(Outcome::Result(json!({ "task": task })))
}

/// The caller's task (a question they sent), or `TASK_NOT_FOUND` for any
/// other id.
async fn found(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(crate::model::Message, Option<crate::model::Message>), Outcome> {
    let number = number(id).ok_or_else(|| RpcError::task_not_found(id))?;
    match state.relay.sent_and_answer(caller, MessageId(number)).await {
        Ok(found) => Ok(found),
        Err(RelayError::NotFound(_)) => Err(RpcError::task_not_found(id).into()),
        Err(error) => Err(error.into()),
    }
}

async fn get_task(state: &AppState, caller: &Caller, params: &Value) -> Result<Outcome, Outcome> {
    let asked: TaskParams = self::params(params)?;
    let (sent, answer) = found(state, caller, &asked.id).await?;
    let task = task::task(&sent, answer.as_ref(), asked.history_length);
    Ok(Outcome::Result(json!(task)))
}

async fn cancel_task(
    state: &AppState,
    caller: &Caller,
    params: &Value,
) -> Result<Outcome, Outcome> {
    let asked: TaskParams = self::params(params)?;
    found(state, caller, &asked.id).await?;
    Err(RpcError::a2a(
        -32002,
        "TASK_NOT_CANCELABLE",
        "a question once sent stays with its recipient; say so in its thread instead \
         (SendMessage with its taskId)",
    )
    .into())
}
