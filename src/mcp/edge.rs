//! What the app mounts and the server keeps running of the MCP edge, and
//! the answers of rmcp's that are shaped or quietened here.

use super::RelayTools;
use super::sessions::{self, SessionOwners};
use crate::state::AppState;
use crate::wire::{AnsweredInBand, ApiError};
use axum::{extract::Request, http::StatusCode, middleware::Next, response::Response};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// rmcp's answers, shaped: its refusals, which it answers in plain text,
/// in the API's JSON shape (an unknown session (404) and a body that is not
/// JSON (415) in MCP's words, a missing `Accept` (406) in rmcp's own, which
/// say what it checked); and its streams' priming events kept from the
/// clients that send no protocol version (see [`knows_priming`]). The app
/// puts this right in front of the service.
pub async fn shape_answers(request: Request, next: Next) -> Response {
    let primes = knows_priming(&request);
    let response = next.run(request).await;
    if !ApiError::is_plain_refusal(&response) {
        let mut response = if primes {
            response
        } else {
            without_priming(response)
        };
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
        StatusCode::NOT_FOUND => (
            "not_found",
            "this MCP session does not exist: it ended or went idle; start a new one",
        ),
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

/// Whether the client can be sent priming events (an event with an id and
/// no data, which opens an SSE stream so that a client can resume it,
/// since revision 2025-11-25): one that names its revision in
/// `MCP-Protocol-Version`, as every revision since 2025-06-18 requires. The
/// clients that send no header are the ones that choke on them: Gemini CLI
/// 0.61 speaks 2025-06-18 without the header. (The conformance suite's
/// priming check names 2025-03-26 in its header, so the revision it names
/// is not what decides.) An `initialize` carries no header: its answer,
/// which comes at once, loses nothing without one.
fn knows_priming(request: &Request) -> bool {
    request.headers().contains_key("mcp-protocol-version")
}

/// The response with each priming event of its stream made a comment. A
/// client that reads an event with no data as a JSON message fails to
/// parse it and may drop the connection: Gemini CLI 0.61 did, so its
/// sessions had no crosstalk tools while `gemini mcp list` (which only
/// lists them) said Connected.
fn without_priming(response: Response) -> Response {
    use http_body_util::BodyExt;
    let is_stream = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !is_stream {
        return response;
    }
    response.map(|body| {
        axum::body::Body::new(body.map_frame(|frame| match frame.into_data() {
            // rmcp writes each event as one frame; a priming event's data
            // is empty.
            Ok(data) if data.starts_with(b"data: \n") || data.starts_with(b"data:\n") => {
                http_body::Frame::data(bytes::Bytes::from_static(b":\n\n"))
            }
            Ok(data) => http_body::Frame::data(data),
            Err(frame) => frame,
        }))
    })
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

    /// The sessions, the state of [`sessions::bind`], which the app puts in
    /// front of [`McpEdge::service`].
    pub fn sessions(&self) -> Arc<SessionOwners> {
        self.sessions.clone()
    }

    /// The streamable HTTP service at `/mcp`: one [`RelayTools`] per
    /// session, over the sessions the binding layer watches.
    pub fn service(
        &self,
        state: &AppState,
        request_limit: usize,
    ) -> StreamableHttpService<RelayTools, LocalSessionManager> {
        // rmcp's own Host check is off: the host layer applies the same rule
        // to every route, so the two can never disagree.
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(state.relay.shutdown_token().child_token())
            .with_max_request_body_bytes(request_limit)
            .disable_allowed_hosts();
        // Sessions outlive a restart: kept in the store, bound to their opener.
        config.session_store = Some(self.sessions.kept());
        let relay = state.relay.clone();
        StreamableHttpService::new(
            move || Ok(RelayTools::new(relay.clone())),
            self.sessions.manager(),
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
        self.sessions.open()
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
