//! What the app mounts and the server keeps running of the MCP edge, and
//! the answers of rmcp's that are shaped or quietened here.

use super::RelayTools;
use super::sessions::{self, SessionOwners};
use crate::state::AppState;
use crate::wire::{AnsweredInBand, ApiError};
use axum::{extract::Request, http::StatusCode, middleware::Next, response::Response};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// rmcp's answers, shaped: its refusals, which it answers in plain text,
/// in the API's JSON shape (a body that is not JSON (415) in MCP's words, a
/// missing `Accept` (406) in rmcp's own, which say what it checked). The
/// app puts this right in front of the service.
pub async fn shape_answers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if !ApiError::is_plain_refusal(&response) {
        // rmcp answers "method not found" in JSON-RPC, with a 404: an
        // answer as designed (a client probing for what it may ask), not a
        // failure. Any other 404 is logged as one.
        let json = response
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|kind| kind.as_bytes().starts_with(b"application/json"));
        if response.status() == StatusCode::NOT_FOUND && json {
            response.extensions_mut().insert(AnsweredInBand);
        }
        return response;
    }
    let (code, default) = match response.status() {
        StatusCode::NOT_ACCEPTABLE => (
            "not_acceptable",
            "send Accept: application/json, text/event-stream",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "send Content-Type: application/json",
        ),
        _ => return response,
    };
    let (parts, said) = ApiError::plain_words(response).await;
    // rmcp's 406 names what it checked; its 415 speaks of the body's JSON,
    // where the fix is the header.
    let message = match (parts.status, said.is_empty()) {
        (StatusCode::NOT_ACCEPTABLE, false) => said,
        _ => default.to_owned(),
    };
    ApiError::new(parts.status, code, message).replacing(&parts)
}

/// The MCP edge of one relay: its sessions, and the service over them.
#[derive(Clone)]
pub struct McpEdge {
    sessions: Arc<SessionOwners>,
}

impl McpEdge {
    pub fn new(state: &AppState) -> McpEdge {
        McpEdge {
            sessions: Arc::new(SessionOwners::new(
                state.relay.clone(),
                state.config.sessions,
            )),
        }
    }

    /// The sessions, the state of [`sessions::layer`], which the app puts in
    /// front of [`McpEdge::service`].
    pub fn sessions(&self) -> Arc<SessionOwners> {
        self.sessions.clone()
    }

    /// The streamable HTTP service at `/mcp`: a [`RelayTools`] per call,
    /// every call served statelessly; the sessions are [`sessions::layer`]'s,
    /// in front of it.
    pub fn service(
        &self,
        state: &AppState,
        request_limit: usize,
    ) -> StreamableHttpService<RelayTools, NeverSessionManager> {
        // rmcp's own Host check is off: the host layer applies the same rule
        // to every route, so the two can never disagree.
        //
        // An answer is plain JSON, one write, where rmcp would open an
        // event stream for it: no tool sends anything before its answer
        // (no progress, no requests to the client), and every client
        // reads either (the MCP spec has them accept both).
        //
        // rmcp is given no part in the relay's shutdown: a JSON answer it
        // is still waiting for when its token fires becomes a 500, while
        // the relay's waits end at shutdown by themselves, answering what
        // they found, and the server drains them.
        let config = StreamableHttpServerConfig::default()
            .with_max_request_body_bytes(request_limit)
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .disable_allowed_hosts();
        let relay = state.relay.clone();
        StreamableHttpService::new(
            move || Ok(RelayTools::new(relay.clone())),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }

    /// Ends revoked sessions as credentials change, until `shutdown`.
    pub async fn end_revoked(self, shutdown: CancellationToken) {
        sessions::end_revoked(self.sessions, shutdown).await
    }

    /// Writes sessions' use and forgets idle ones, until `shutdown` (and
    /// once more then).
    pub async fn upkeep(self, shutdown: CancellationToken) {
        sessions::upkeep(self.sessions, shutdown).await
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.sessions.open_now()
    }
}

/// rmcp logs every error it answers a request with as a warning; an
/// unknown tool or method, or arguments that do not fit, is the client's
/// mistake, answered in the client's terms, and no news to an operator.
/// Those warnings are dropped; every other one is kept.
pub struct ClientMistakes;

impl<S> tracing_subscriber::layer::Filter<S> for ClientMistakes {
    fn enabled(
        &self,
        _: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        true
    }

    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let meta = event.metadata();
        if meta.target() != "rmcp::service" || *meta.level() != tracing::Level::WARN {
            return true;
        }
        /// The event's message and error, as rmcp writes them.
        #[derive(Default)]
        struct Said {
            response_error: bool,
            clients: bool,
        }
        impl tracing::field::Visit for Said {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                let value = format!("{value:?}");
                match field.name() {
                    "message" => self.response_error = value == "response error",
                    // Method not found, invalid params (an unknown tool).
                    "error" => {
                        self.clients = ["ErrorCode(-32601)", "ErrorCode(-32602)"]
                            .iter()
                            .any(|code| value.contains(code))
                    }
                    _ => {}
                }
            }
        }
        let mut said = Said::default();
        event.record(&mut said);
        !(said.response_error && said.clients)
    }
}
