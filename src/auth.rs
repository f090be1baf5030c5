//! Credentials: from a request's `Authorization` header to a [`Caller`].
//!
//! [`require_bearer`] is the layer in front of `/mcp` (and the JSON API): it
//! accepts `Authorization: Bearer TOKEN` only — Basic credentials, which a
//! browser attaches on its own, are refused there — asks the core who the
//! token belongs to on every request (so a revoke or rotate from the CLI
//! counts at once), and puts the caller on the request.
//!
//! [`bind_mcp_sessions`] binds an MCP session to the caller that opened it:
//! rmcp checks credentials per request, not per session, so without this a
//! person could send requests on someone else's `Mcp-Session-Id`.

use crate::api::ApiError;
use crate::app::AppState;
use crate::relay::Caller;
use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

const SESSION_HEADER: &str = "mcp-session-id";

/// The token of an `Authorization: Bearer` header; `None` when there is no
/// `Authorization` header at all.
pub fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not readable text"))?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
        Ok(Some(token.trim()))
    } else if scheme.eq_ignore_ascii_case("basic") {
        Err(ApiError::unauthorized(
            "Basic credentials are for the team page; agents send Authorization: Bearer TOKEN",
        ))
    } else {
        Err(ApiError::unauthorized("send Authorization: Bearer TOKEN"))
    }
}

/// Authenticates with a Bearer token and puts the [`Caller`] on the request.
pub async fn require_bearer(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match bearer_token(request.headers()) {
        Ok(token) => state
            .relay
            .authenticate(token)
            .await
            .map_err(ApiError::from),
        Err(error) => Err(error),
    };
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

/// Who opened each live MCP session.
pub struct SessionOwners {
    owners: Mutex<HashMap<HeaderValue, Caller>>,
    /// rmcp's sessions, to forget owners of sessions that have ended.
    sessions: Arc<LocalSessionManager>,
    /// The number of owners at the last pruning; the next prune comes after
    /// the map doubles, so pruning costs O(1) per session opened.
    pruned_at: Mutex<usize>,
}

impl SessionOwners {
    pub fn new(sessions: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: Mutex::default(),
            sessions,
            pruned_at: Mutex::new(64),
        }
    }

    /// rmcp's session manager, which the MCP service must share with this.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.sessions.clone()
    }

    fn owner(&self, session: &HeaderValue) -> Option<Caller> {
        self.owners
            .lock()
            .expect("session owners lock")
            .get(session)
            .cloned()
    }

    async fn record(&self, session: HeaderValue, caller: Caller) {
        let len = {
            let mut owners = self.owners.lock().expect("session owners lock");
            owners.insert(session, caller);
            owners.len()
        };
        let due = len > *self.pruned_at.lock().expect("session owners lock") * 2;
        if due {
            let live: Vec<HeaderValue> = {
                let sessions = self.sessions.sessions.read().await;
                sessions
                    .keys()
                    .filter_map(|id| HeaderValue::from_str(id).ok())
                    .collect()
            };
            let mut owners = self.owners.lock().expect("session owners lock");
            owners.retain(|id, _| live.contains(id));
            *self.pruned_at.lock().expect("session owners lock") = owners.len().max(64);
        }
    }

    fn forget(&self, session: &HeaderValue) {
        self.owners
            .lock()
            .expect("session owners lock")
            .remove(session);
    }
}

/// Refuses a request on an MCP session that another caller opened; records
/// the owner of every session opened.
pub async fn bind_mcp_sessions(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let session = request.headers().get(SESSION_HEADER).cloned();
    let deleting = request.method() == axum::http::Method::DELETE;
    if let (Some(session), Some(caller)) = (&session, &caller) {
        // A session we never saw opened is unknown to rmcp as well (it answers
        // 404); owners are forgotten only after rmcp has dropped the session.
        if let Some(owner) = state.sessions.owner(session)
            && &owner != caller
        {
            return ApiError::forbidden("this MCP session belongs to someone else").into_response();
        }
    }
    let response = next.run(request).await;
    match (session, response.headers().get(SESSION_HEADER), caller) {
        (None, Some(opened), Some(caller)) if response.status().is_success() => {
            state.sessions.record(opened.clone(), caller).await;
        }
        (Some(session), _, _) if deleting && response.status().is_success() => {
            state.sessions.forget(&session);
        }
        _ => {}
    }
    response
}
