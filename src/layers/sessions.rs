//! MCP sessions bound to the caller that opened them.
//!
//! rmcp checks credentials per request, not per session, so without this a
//! person could send requests on someone else's `Mcp-Session-Id`. The layer
//! sits behind the credentials layer, which put the [`Caller`] on the
//! request.

use crate::relay::Caller;
use crate::wire::ApiError;
use axum::{
    extract::{Request, State},
    http::HeaderValue,
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

const SESSION_HEADER: &str = "mcp-session-id";

/// Who opened each live MCP session.
pub struct SessionOwners {
    owners: Mutex<Owners>,
    /// rmcp's sessions, to forget owners of sessions that have ended.
    sessions: Arc<LocalSessionManager>,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<HeaderValue, Caller>,
    /// How many owners were left by the last pruning; the next comes when
    /// the map has doubled, so pruning costs O(1) per session opened.
    after_pruning: usize,
}

/// The smallest map that is pruned.
const PRUNE_FROM: usize = 64;

impl SessionOwners {
    pub fn new(sessions: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: Mutex::default(),
            sessions,
        }
    }

    /// rmcp's session manager, which the MCP service must share with this.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.sessions.clone()
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners.lock().expect("session owners lock")
    }

    fn owner(&self, session: &HeaderValue) -> Option<Caller> {
        self.owners().by_session.get(session).cloned()
    }

    async fn record(&self, session: HeaderValue, caller: Caller) {
        let due = {
            let mut owners = self.owners();
            owners.by_session.insert(session, caller);
            owners.by_session.len() > owners.after_pruning.max(PRUNE_FROM) * 2
        };
        if due {
            let live: HashSet<HeaderValue> = {
                let sessions = self.sessions.sessions.read().await;
                sessions
                    .keys()
                    .filter_map(|id| HeaderValue::from_str(id).ok())
                    .collect()
            };
            let mut owners = self.owners();
            owners.by_session.retain(|id, _| live.contains(id));
            owners.after_pruning = owners.by_session.len();
        }
    }

    fn forget(&self, session: &HeaderValue) {
        self.owners().by_session.remove(session);
    }
}

/// Refuses a request on an MCP session that another caller opened; records
/// the owner of every session opened.
pub async fn bind(
    State(sessions): State<Arc<SessionOwners>>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let session = request.headers().get(SESSION_HEADER).cloned();
    let deleting = request.method() == axum::http::Method::DELETE;
    if let (Some(session), Some(caller)) = (&session, &caller) {
        // A session we never saw opened is unknown to rmcp as well (it answers
        // 404); owners are forgotten only after rmcp has dropped the session.
        if let Some(owner) = sessions.owner(session)
            && &owner != caller
        {
            return ApiError::forbidden("this MCP session belongs to someone else").into_response();
        }
    }
    let mut response = next.run(request).await;
    match (session, response.headers().get(SESSION_HEADER), caller) {
        (None, Some(opened), Some(caller)) if response.status().is_success() => {
            sessions.record(opened.clone(), caller).await;
        }
        (Some(session), _, _) if deleting && response.status().is_success() => {
            sessions.forget(&session);
            // rmcp answers a session's end with 202; clients (the Python SDK
            // among them) expect 200 or 204, and warn otherwise.
            *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
        }
        _ => {}
    }
    response
}
