//! The session layer itself, in front of rmcp: what it reads of a
//! request, what it answers itself (a session's standalone stream and its
//! end), and how a call on a session is ended when its client cancels it
//! or its session ends. The sessions it keeps are [`SessionOwners`].

use super::{HeldSession, SessionOwners, not_found};
use crate::protocol::{SESSION_HEADER, wants_pushes};
use crate::relay::{Caller, WaitSlot};
use crate::wire::{self, ApiError};
use axum::body::{Body, Bytes};
use axum::{
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::StreamExt;
use rmcp::model::{InitializeRequestParams, ProtocolVersion};
use serde_json::Value;
use std::{convert::Infallible, sync::Arc};
use tokio_util::sync::CancellationToken;

/// The session layer, in front of rmcp: opens a session at an `initialize`
/// rmcp answers; refuses a request on a session that another caller
/// opened, and answers one on a session it does not know with 404; names
/// the session held to the tools; serves a session's standalone stream
/// (`GET`) and its end (`DELETE`) itself. Behind the layer that read the
/// body.
pub async fn layer(
    State(owners): State<Arc<SessionOwners>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return next.run(request).await;
    };
    // A copy, not a slice of the request's head: a standalone stream holds
    // it while it lasts, and a slice would keep the buffer the head was
    // read into (8 KiB) with it.
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|session| HeaderValue::from_bytes(session.as_bytes()).ok());
    let Some(session) = session else {
        return match request.method() {
            &Method::POST => opening(&owners, caller, request, next).await,
            // rmcp's answer: only POST is served without a session.
            _ => next.run(request).await,
        };
    };
    let held = match owners.holder(&session, &caller).await {
        Ok(Some(held)) => held,
        // Revision 2026-07-28 has no sessions: a header naming one that
        // is not the caller's is just a header.
        Ok(None) if sessionless(&request) => return next.run(request).await,
        Ok(None) => return not_found(),
        Err(refused) => return refused,
    };
    match *request.method() {
        Method::GET => standalone(&owners, session, held, caller, &request),
        Method::DELETE => {
            owners.end(vec![session]).await;
            StatusCode::NO_CONTENT.into_response()
        }
        Method::POST => {
            request.extensions_mut().insert(held);
            on_session(&owners, session, request, next).await
        }
        // rmcp's 405.
        _ => next.run(request).await,
    }
}

/// A message on a held session, passed on to rmcp. A call runs until it
/// is answered or its client leaves, as rmcp serves it, or until the
/// client cancels it (`notifications/cancelled`) or the session ends,
/// which end it here.
async fn on_session(
    owners: &Arc<SessionOwners>,
    session: HeaderValue,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let Some(body) = taken_back(body).await else {
        return unreadable();
    };
    let said = Said::of(&body);
    let request = Request::from_parts(parts, Body::from(body));
    match said {
        Said::Cancels(id) => {
            owners.cancel(&session, &id);
            next.run(request).await
        }
        Said::Call(id) => {
            let (serial, ends, session_ends) = owners.calling(&session, id);
            // Made before the call runs: forgotten however it ends.
            let call = CallGuard {
                owners: owners.clone(),
                session,
                serial,
            };
            // Cancelled before it ran (its cancel came first, or its
            // session has just ended): it does not run at all.
            if ends.is_cancelled() {
                return ended(owners, &session_ends);
            }
            // An answer in JSON has no head until the call is done: a
            // cancel or the session's end ends a call still running, and
            // its client is answered as `ended` says; one in an event
            // stream ends with its stream. An answer ready as the cancel
            // comes is given.
            let response = tokio::select! {
                biased;
                response = next.run(request) => response,
                () = ends.cancelled() => return ended(owners, &session_ends),
            };
            if !is_event_stream(&response) {
                // Answered whole: the call is done.
                return response;
            }
            let (parts, body) = response.into_parts();
            let body = body
                .into_data_stream()
                .take_until(ends.cancelled_owned())
                .map(move |chunk| {
                    let _call = &call;
                    chunk
                });
            Response::from_parts(parts, Body::from_stream(body))
        }
        Said::Initialize | Said::Other => next.run(request).await,
    }
}

/// The answer to a call ended before it was answered. Its session ended
/// (`session_ends`, not by the relay stopping): the 404 that every request
/// on an ended session gets, which tells the client to start a new one.
/// Its client cancelled it, or the relay stops: an event stream with no
/// events, as the MCP spec has no answer to a cancelled call.
fn ended(owners: &SessionOwners, session_ends: &CancellationToken) -> Response {
    if session_ends.is_cancelled() && !owners.stopping() {
        not_found()
    } else {
        Sse::new(futures::stream::empty::<Result<Event, Infallible>>()).into_response()
    }
}

/// Whether rmcp answered in an event stream rather than whole.
fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"))
}

/// Held by a call's answer: the call is forgotten when its answer ends.
struct CallGuard {
    owners: Arc<SessionOwners>,
    session: HeaderValue,
    serial: u64,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.owners.called(&self.session, self.serial);
    }
}

/// The body, read whole in front of this layer, taken back to look at.
async fn taken_back(body: Body) -> Option<Bytes> {
    axum::body::to_bytes(body, usize::MAX).await.ok()
}

fn unreadable() -> Response {
    ApiError::bad_request("the request body could not be read").into_response()
}

/// What the session layer reads of a JSON-RPC message. The ids it names
/// are kept with the session (a call's while it runs, a cancel's for a
/// while), so only ids a client would use are read: a number, or a string
/// of at most [`MAX_ID_BYTES`]. A message with another id is passed on as
/// `Other`, for rmcp to answer.
enum Said {
    Initialize,
    /// A request, by its id.
    Call(Value),
    /// `notifications/cancelled`, naming the call it cancels.
    Cancels(Value),
    Other,
}

/// The longest string id the layer keeps.
const MAX_ID_BYTES: usize = 256;

/// `id`, if it is one the layer keeps.
fn kept_id(id: Value) -> Option<Value> {
    match &id {
        Value::Number(_) => Some(id),
        Value::String(text) if text.len() <= MAX_ID_BYTES => Some(id),
        _ => None,
    }
}

impl Said {
    fn of(body: &[u8]) -> Said {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            id: Option<Value>,
        }
        let Ok(head) = serde_json::from_slice::<Head>(body) else {
            return Said::Other;
        };
        match (head.method.as_deref(), head.id) {
            (Some("initialize"), _) => Said::Initialize,
            (Some("notifications/cancelled"), _) => cancelled_call(body)
                .and_then(kept_id)
                .map_or(Said::Other, Said::Cancels),
            (Some(_), Some(id)) => kept_id(id).map_or(Said::Other, Said::Call),
            _ => Said::Other,
        }
    }
}

/// The call a `notifications/cancelled` names.
fn cancelled_call(body: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Cancelled {
        params: Params,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "requestId")]
        request_id: Value,
    }
    serde_json::from_slice::<Cancelled>(body)
        .ok()
        .map(|cancelled| cancelled.params.request_id)
}

/// Whether the request speaks a revision without sessions (2026-07-28 and
/// later), by the `MCP-Protocol-Version` it names (dates, which compare as
/// text).
fn sessionless(request: &Request) -> bool {
    request
        .headers()
        .get("mcp-protocol-version")
        .is_some_and(|version| {
            version.as_bytes() >= ProtocolVersion::V_2026_07_28.as_str().as_bytes()
        })
}

/// A request without a session, passed on to rmcp; if it was an
/// `initialize` that rmcp answered, with the session it opens. A call that
/// states another method in `Mcp-Method` (as every 2026-07-28 call does,
/// checked against its body by rmcp) is passed on as it is.
async fn opening(owners: &SessionOwners, caller: Caller, request: Request, next: Next) -> Response {
    let stated = request.headers().get("mcp-method");
    if stated.is_some_and(|method| method != "initialize") {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Some(body) = taken_back(body).await else {
        return unreadable();
    };
    if body.len() > MAX_INITIALIZE_BYTES && matches!(Said::of(&body), Said::Initialize) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "an initialize is at most 64 KiB: a client's name and capabilities are kept \
             with its session",
        )
        .into_response();
    }
    let declared = initialize_params(&body);
    let mut response = next.run(Request::from_parts(parts, Body::from(body))).await;
    if let Some(declared) = declared
        && response.status().is_success()
    {
        let session = owners.open(caller, declared).await;
        response.headers_mut().insert(SESSION_HEADER, session);
    }
    response
}

/// The largest `initialize` a session is opened by. What it declares is
/// kept with the session as long as the session lasts; clients declare a
/// few KiB, and the route takes bodies of megabytes (for files).
const MAX_INITIALIZE_BYTES: usize = 64 * 1024;

/// What a client declared in its `initialize`, if the body is one.
fn initialize_params(body: &[u8]) -> Option<InitializeRequestParams> {
    #[derive(serde::Deserialize)]
    struct Initialize {
        params: InitializeRequestParams,
    }
    if !matches!(Said::of(body), Said::Initialize) {
        return None;
    }
    serde_json::from_slice::<Initialize>(body)
        .ok()
        .map(|initialize| initialize.params)
}

/// A session's standalone stream: the pushes its client asked for (its
/// person's inbox, the channels the session follows), and a comment when
/// there is nothing to say, until the session or the relay ends, or the
/// client leaves. It holds one of the person's wait slots while open.
fn standalone(
    owners: &Arc<SessionOwners>,
    session: HeaderValue,
    held: HeldSession,
    caller: Caller,
    request: &Request,
) -> Response {
    let accepts = request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .any(|accept| {
            accept
                .to_str()
                .is_ok_and(|a| a.contains("text/event-stream"))
        });
    if !accepts {
        return ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "send Accept: text/event-stream",
        )
        .into_response();
    }
    let slot = match owners.relay.hold_slot(&caller) {
        Ok(slot) => slot,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let Some(ended) = owners.streaming(&session, true) else {
        // Ended between the check and now.
        return not_found();
    };
    let pushes = wants_pushes(request.uri()).then(|| owners.relay.push_feed(&caller, &held.id));
    let guard = StreamGuard {
        owners: owners.clone(),
        session,
        _slot: slot,
    };
    // Open until the session or the relay ends, pushes or none.
    let events = futures::stream::iter(pushes)
        .flatten()
        .chain(futures::stream::pending())
        .take_until(ended.cancelled_owned())
        .map(move |push| {
            let _held = &guard;
            let notification = wire::push::channel_notification(&push);
            Ok::<_, Infallible>(Event::default().data(notification.to_string()))
        });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(wire::SSE_KEEP_ALIVE))
        .into_response()
}

/// Held by a standalone stream's body: frees its wait slot and marks the
/// session idle again when the stream ends.
struct StreamGuard {
    owners: Arc<SessionOwners>,
    session: HeaderValue,
    _slot: WaitSlot,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.owners.streaming(&self.session, false);
    }
}

#[cfg(test)]
mod tests {
    use super::Said;
    use serde_json::json;

    fn said(message: serde_json::Value) -> Said {
        Said::of(message.to_string().as_bytes())
    }

    #[test]
    fn only_ids_a_client_would_use_are_kept() {
        let cancel = |id| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
        let call = |id| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call"});
        assert!(matches!(said(cancel(json!(7))), Said::Cancels(id) if id == 7));
        assert!(matches!(said(call(json!("a-1"))), Said::Call(id) if id == "a-1"));
        let long = json!("i".repeat(257));
        let many = json!(vec![0; 100_000]);
        for id in [long, many, json!({"a": 1}), json!(null), json!(true)] {
            assert!(matches!(said(cancel(id.clone())), Said::Other), "{id:.40}");
            assert!(matches!(said(call(id.clone())), Said::Other), "{id:.40}");
        }
    }
}
