//! `crosstalk bridge`: a local stdio MCP server that Claude Code spawns
//! (from `.mcp.json`), for clients or protocol versions where pushes over
//! HTTP are not delivered.
//!
//! - **Tools**: the relay's own, listed and called through an MCP session
//!   with the person's token (`CROSSTALK_URL`, `CROSSTALK_TOKEN`).
//! - **Pushes**: the relay's inbox stream (`GET /api/inbox/stream`), each
//!   message turned into a `notifications/claude/channel` notification on
//!   stdout. The relay claims a message as it writes it to the stream, so
//!   the claim rules are the relay's: each message once, here or anywhere.
//!   The stream is opened only once Claude Code has initialized, so nothing
//!   is claimed before it can be shown. The tools' own session listens too
//!   (`?push=1`), so channels followed through the bridge reach it; what
//!   that session's stream carries goes on to Claude Code the same way.
//! - **Restarts**: when the relay goes away, the bridge says so on stderr
//!   and reconnects with backoff (0.5 s doubling to 30 s); a tool call that
//!   meets a lost session opens a new one and is tried once more.
//!
//! stdout carries MCP only; everything the bridge says goes to stderr.

use crate::agent::Agent;
use crate::wire::{MessageView, push};
use futures::StreamExt;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CustomNotification,
        Implementation, ListToolsResult, PaginatedRequestParams, ServerConfig, ServerNotification,
    },
    service::{NotificationContext, Peer, RequestContext},
};
use serde_json::Value;
use sse_stream::SseStream;
use std::{sync::Arc, time::Duration};
use tokio::sync::{Mutex, MutexGuard, mpsc, watch};

/// The first wait before reconnecting, doubled on each failure up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Serves MCP on stdin/stdout until the client closes it. It answers at
/// once, whether or not the relay can be reached yet.
pub async fn run(url: String, token: String) -> anyhow::Result<()> {
    let bridge = Bridge {
        url: url.trim_end_matches('/').to_owned(),
        token,
        relay: Arc::new(Mutex::new(None)),
        client: watch::Sender::new(None),
    };
    let running = bridge.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

#[derive(Clone)]
struct Bridge {
    url: String,
    token: String,
    /// The session on the relay the tools go through, once opened.
    relay: Arc<Mutex<Option<Agent>>>,
    /// Claude Code, once it has initialized: where pushes go.
    client: watch::Sender<Option<Peer<RoleServer>>>,
}

impl Bridge {
    /// The session on the relay, opened if there is none.
    async fn session(&self) -> Result<MutexGuard<'_, Option<Agent>>, ErrorData> {
        let mut relay = self.relay.lock().await;
        if relay.is_none() {
            // A session that listens (`?push=1`): what its stream carries
            // (the channels `follow_channel` follows through the bridge,
            // and inbox messages it claims before the inbox stream does)
            // goes on to Claude Code like the inbox stream's.
            let (agent, pushed) =
                Agent::listening(&self.url, &self.token)
                    .await
                    .map_err(|error| {
                        tracing::warn!(%error, "cannot reach the relay at {}", self.url);
                        ErrorData::internal_error(
                            format!("cannot reach the relay at {}", self.url),
                            None,
                        )
                    })?;
            tokio::spawn(pass_on(pushed, self.client.subscribe()));
            *relay = Some(agent);
        }
        Ok(relay)
    }

    /// Calls a tool on the relay; a lost session is opened again once.
    async fn forward(&self, call: CallToolRequestParams) -> Result<CallToolResult, ErrorData> {
        for attempt in 0..2 {
            let mut relay = self.session().await?;
            let agent = relay.as_ref().expect("a session was opened");
            match agent.client.call_tool(call.clone()).await {
                Ok(result) => return Ok(result),
                Err(error) if attempt == 0 => {
                    tracing::warn!(%error, "the relay session was lost; opening a new one");
                    *relay = None;
                }
                Err(error) => {
                    return Err(ErrorData::internal_error(
                        format!("the relay: {error}"),
                        None,
                    ));
                }
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Turns the relay's inbox stream into channel notifications to `peer`,
    /// reconnecting whenever the stream ends, until the peer is gone.
    async fn relay_inbox(self, peer: Peer<RoleServer>) {
        let http = reqwest::Client::new();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let opened = http
                .get(format!("{}/api/inbox/stream", self.url))
                .bearer_auth(&self.token)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            match opened {
                Ok(response) => {
                    tracing::info!("listening to the relay's inbox stream");
                    backoff = FIRST_BACKOFF;
                    if !deliver(response, &peer).await {
                        return; // the client is gone
                    }
                    tracing::warn!("the relay's inbox stream ended; reconnecting");
                    // The relay may have restarted: the next tool call opens
                    // a new session, whose stream carries its pushes.
                    *self.relay.lock().await = None;
                }
                Err(error) => tracing::warn!(
                    %error,
                    "cannot open the relay's inbox stream; trying again in {backoff:?}"
                ),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Passes each message of an open inbox stream to `peer` as a channel
/// notification; false once `peer` cannot be written to.
async fn deliver(response: reqwest::Response, peer: &Peer<RoleServer>) -> bool {
    let mut events = SseStream::from_bytes_stream(response.bytes_stream());
    while let Some(Ok(event)) = events.next().await {
        let message = match (event.event.as_deref(), event.data) {
            (None | Some("message"), Some(data)) => serde_json::from_str::<MessageView>(&data),
            _ => continue, // the notice, a keep-alive
        };
        let Ok(message) = message else { continue };
        if !notify(peer, push::channel_params(&message)).await {
            return false;
        }
    }
    true
}

/// Passes on what the relay pushes to the bridge's own session, as it
/// came (a channel notification's params), once Claude Code has
/// initialized (what comes before waits), until either side is gone.
async fn pass_on(
    mut pushed: mpsc::UnboundedReceiver<Value>,
    mut client: watch::Receiver<Option<Peer<RoleServer>>>,
) {
    let Some(client) = client
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|peer| peer.clone())
    else {
        return;
    };
    while let Some(params) = pushed.recv().await {
        if !notify(&client, params).await {
            return;
        }
    }
}

/// Sends Claude Code one channel notification; false once it is gone.
async fn notify(client: &Peer<RoleServer>, params: Value) -> bool {
    let notification = CustomNotification::new(push::CHANNEL_NOTIFICATION, Some(params));
    client
        .send_notification(ServerNotification::CustomNotification(notification))
        .await
        .is_ok()
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(crate::mcp::capabilities())
            .with_server_info(Implementation::new(
                "crosstalk-bridge",
                env!("CARGO_PKG_VERSION"),
            ))
            // The relay's own: the tools are its tools.
            .with_instructions(crate::mcp::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut relay = self.session().await?;
        let listed = relay
            .as_ref()
            .expect("a session was opened")
            .client
            .list_all_tools()
            .await;
        match listed {
            Ok(tools) => Ok(ListToolsResult::with_all_items(tools)),
            Err(error) => {
                *relay = None; // opened again next time
                Err(ErrorData::internal_error(
                    format!("the relay: {error}"),
                    None,
                ))
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.forward(request).await.map(CallToolResponse::from)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.client.send_replace(Some(context.peer.clone()));
        tokio::spawn(self.clone().relay_inbox(context.peer));
    }
}
