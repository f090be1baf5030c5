//! `crosstalk bridge`: a local stdio MCP server that Claude Code spawns
//! (from `.mcp.json`, or as the `crosstalk` plugin's server), so that what
//! teammates send reaches a running session by itself.
//!
//! - **Negotiation**: Claude Code shows channel events only on a connection
//!   of a revision with a path for notifications nobody asked for. The
//!   bridge answers `server/discover` with "method not found" and offers
//!   only revisions that have the `initialize` handshake, so Claude Code
//!   falls back to `initialize` (2025-11-25) and registers its channel
//!   handler.
//! - **Readiness**: Claude Code registers that handler 20–50 ms after
//!   answering its first `tools/list`, and silently drops what comes
//!   before; nothing tells the server when. But it installs its
//!   `tools/list_changed` handler in the same step, right after. So from
//!   `initialized` on, the bridge says its tools changed every 25 ms until
//!   Claude Code lists them a second time: from then on it shows channel
//!   events. Only then does the bridge open the relay's inbox stream;
//!   until then nothing of the person's inbox is offered to it, and the
//!   relay does not count them as reachable by push.
//! - **Tools**: the relay's own, listed and called through an MCP session
//!   with the person's token (`CROSSTALK_URL`, `CROSSTALK_TOKEN`), except
//!   `follow_channel` and `unfollow_channel`: the bridge's one push path is
//!   its inbox stream, so it keeps the follows itself and opens the stream
//!   again with them (`?follow=`).
//! - **Pushes**: each message of the inbox stream becomes a
//!   `notifications/claude/channel` notification on stdout. The relay
//!   leases it to the stream (a push is not a hand-over: unconfirmed, it is
//!   offered again); the bridge shows each message to Claude Code once.
//! - **Approvals**: the bridge declares `claude/channel/permission`, so
//!   Claude Code sends it each permission prompt; the bridge asks the
//!   relay (`POST /api/approvals`), waits for the person's answer, and
//!   passes it back as a `permission` notification (`bridge/approvals.rs`).
//! - **Restarts**: when the relay goes away, the bridge says so on stderr
//!   and reconnects with backoff (0.5 s doubling to 30 s); a tool call that
//!   meets a lost session opens a new one and is tried once more.
//! - **Whether channels show**: `channels.rs` reads it from how Claude Code
//!   was started, or as `CROSSTALK_CHANNELS` says; the hooks ask it too.
//!
//! stdout carries MCP only; everything the bridge says goes to stderr.

mod approvals;
mod channels;

pub use channels::Channels;
mod inbox;
mod lacking;

use crate::agent::Agent;
use crate::model::Channel;
use crate::protocol::{INSTRUCTIONS, PUSH_REVISION, bridge_capabilities};
use crate::wire::Following;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CustomNotification,
        DiscoverRequestMethod, DiscoverResult, Implementation, ListToolsResult,
        PaginatedRequestParams, ProtocolVersion, ServerConfig,
    },
    service::{NotificationContext, Peer, RequestContext},
};
use std::{
    borrow::Cow,
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};
use tokio::sync::{Mutex, watch};

/// The first wait before reconnecting, doubled on each failure up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How often, and for how long, the bridge asks Claude Code to list the
/// tools again until it does (its proof of listening).
pub const PROBE_EVERY: Duration = Duration::from_millis(25);
const PROBE_FOR: Duration = Duration::from_secs(30);

/// Message ids the bridge remembers having shown, so a message offered to
/// it again (after a reconnect, or when its lease ended) is not shown twice.
const SHOWN_REMEMBERED: usize = 4096;

/// How the bridge and the hooks reach the relay, and as whom: the command
/// line's `--url`, `--token` and `--channels`.
#[derive(Debug, clap::Args)]
pub struct Reach {
    /// The relay's address, e.g. https://relay.example.com.
    #[arg(long, env = "CROSSTALK_URL", value_name = "URL")]
    pub url: Option<String>,
    /// Your token (never the server's shared RELAY_TOKEN).
    #[arg(long, env = "CROSSTALK_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Whether Claude Code shows crosstalk's channel events: `auto` reads
    /// how it was started (`--channels plugin:crosstalk@…` or
    /// `--dangerously-load-development-channels server:crosstalk`). Where it
    /// does, the bridge delivers and the hooks do nothing.
    #[arg(long, env = "CROSSTALK_CHANNELS", value_enum, default_value_t)]
    pub channels: Channels,
}

/// Serves MCP on stdin/stdout until the client closes it. It answers at
/// once, whether or not the relay can be reached yet. A relay that is not
/// `https://` is refused unless it is on this machine: the token would
/// travel in the clear. Without a relay it can use, it says why to its
/// client (`lacking.rs`) and fails when the client closes it.
pub async fn run(reach: Reach) -> anyhow::Result<()> {
    let Reach {
        url,
        token,
        channels,
    } = reach;
    let (url, token) = match (url, token) {
        (Some(url), Some(token)) => match check_url(&url) {
            Ok(()) => (url, token),
            Err(error) => return lacking::serve(error.to_string()).await,
        },
        (url, _) => {
            let unset = match url {
                None => "CROSSTALK_URL is",
                Some(_) => "CROSSTALK_TOKEN is",
            };
            return lacking::serve(format!(
                "{unset} not set. Run `crosstalk connect claude --url https://YOUR-RELAY` with \
                 your token in CROSSTALK_TOKEN (as `crosstalk add` printed it), then restart \
                 Claude Code."
            ))
            .await;
        }
    };
    let bridge = Bridge {
        channels,
        url: url.trim_end_matches('/').to_owned(),
        token,
        relay: Arc::new(Mutex::new(None)),
        client: watch::Sender::new(Client::Starting),
        listed: Arc::new(AtomicUsize::new(0)),
        follows: watch::Sender::new(BTreeSet::new()),
    };
    let running = bridge.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// What the bridge says it is, configured or not.
fn bridge_server_info() -> ServerConfig {
    ServerConfig::new(bridge_capabilities()).with_server_info(Implementation::new(
        "crosstalk-bridge",
        env!("CARGO_PKG_VERSION"),
    ))
}

/// `https://` anywhere, `http://` only to a loopback host.
pub(crate) fn check_url(url: &str) -> anyhow::Result<()> {
    let shown = without_credentials(url);
    let host = crate::host::url_host(url)
        .ok_or_else(|| anyhow::anyhow!("CROSSTALK_URL {shown:?} is not an http(s):// URL"))?;
    if url.starts_with("https://") || crate::host::is_loopback(&host) {
        return Ok(());
    }
    anyhow::bail!(
        "CROSSTALK_URL {shown:?} is plain http to another machine: the token would travel in \
         the clear. Use the relay's https:// address."
    )
}

/// `url` as it may be shown (to the person, and to the model when the
/// bridge says what it lacks): without a user name or password in it.
fn without_credentials(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if !parsed.username().is_empty() || parsed.password().is_some() => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => match url.rsplit_once('@') {
            Some((_, after)) => format!("…@{after}"),
            None => url.to_owned(),
        },
    }
}

/// Where Claude Code stands.
#[derive(Clone)]
enum Client {
    /// Not initialized yet.
    Starting,
    /// Initialized: asked to list the tools again, as proof that it listens.
    Initialized(Peer<RoleServer>),
    /// It listens: what is sent to it is shown.
    Ready(Peer<RoleServer>),
}

#[derive(Clone)]
struct Bridge {
    /// Whether to push at all.
    channels: Channels,
    url: String,
    token: String,
    /// The session on the relay the tools go through, once opened. Held
    /// only to open it or to let it go: calls run beside each other (a
    /// model calls tools in parallel, and one may wait minutes for a reply).
    relay: Arc<Mutex<Option<Arc<Agent>>>>,
    /// Claude Code, and whether it can be pushed to yet.
    client: watch::Sender<Client>,
    /// `tools/list` requests since `initialized`: the second is the proof.
    listed: Arc<AtomicUsize>,
    /// The channels followed through the bridge: its inbox stream's.
    follows: watch::Sender<BTreeSet<Channel>>,
}

impl Bridge {
    /// The session on the relay, opened if there is none.
    async fn session(&self) -> Result<Arc<Agent>, ErrorData> {
        let mut relay = self.relay.lock().await;
        if let Some(agent) = &*relay {
            return Ok(agent.clone());
        }
        let agent = Agent::connect(&self.url, &self.token)
            .await
            .map_err(|error| {
                tracing::warn!(%error, "cannot reach the relay at {}", self.url);
                ErrorData::internal_error(format!("cannot reach the relay at {}", self.url), None)
            })?;
        Ok(relay.insert(Arc::new(agent)).clone())
    }

    /// Lets `lost` go, unless another call replaced it already: the next
    /// call opens a new session.
    async fn forget(&self, lost: &Arc<Agent>) {
        let mut relay = self.relay.lock().await;
        if relay.as_ref().is_some_and(|agent| Arc::ptr_eq(agent, lost)) {
            *relay = None;
        }
    }

    /// Calls a tool on the relay; a lost session is opened again once.
    async fn forward(&self, call: CallToolRequestParams) -> Result<CallToolResult, ErrorData> {
        for attempt in 0..2 {
            let agent = self.session().await?;
            match agent.client.call_tool(call.clone()).await {
                Ok(result) => return Ok(result),
                Err(error) if attempt == 0 => {
                    tracing::warn!(%error, "the relay session was lost; opening a new one");
                    self.forget(&agent).await;
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

    /// `follow_channel` and `unfollow_channel`, kept here: the inbox
    /// stream is opened again with the new set.
    fn follow(&self, call: &CallToolRequestParams) -> Option<CallToolResult> {
        let following = match call.name.as_ref() {
            "follow_channel" => true,
            "unfollow_channel" => false,
            _ => return None,
        };
        let named = call
            .arguments
            .as_ref()
            .and_then(|args| args.get("channel"))
            .and_then(|name| name.as_str())
            .unwrap_or_default();
        let channel = match Channel::parse(named) {
            Ok(channel) => channel,
            Err(error) => return Some(refusal(&error.to_string())),
        };
        let changed = self.follows.send_if_modified(|follows| match following {
            true => follows.insert(channel.clone()),
            false => follows.remove(&channel),
        });
        if changed {
            tracing::info!(%channel, following, "follows changed; reopening the inbox stream");
        }
        let result = Following {
            channel: channel.to_string(),
            following,
        };
        let value = serde_json::to_value(result).expect("a result serializes");
        Some(CallToolResult::structured(value))
    }
}

/// A refusal, in the relay's error shape.
fn refusal(message: &str) -> CallToolResult {
    let body = serde_json::json!({ "error": { "code": "bad_request", "message": message } });
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(body.to_string())])
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        // The relay's own: the tools are its tools.
        bridge_server_info().with_instructions(INSTRUCTIONS)
    }

    /// Only revisions with the `initialize` handshake, up to the one
    /// Claude Code shows channel events on.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PUSH_REVISION))
    }

    /// Not offered: a client that discovers would settle on a revision
    /// without a path for channel events.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let agent = self.session().await?;
        let answer = match agent.client.list_all_tools().await {
            Ok(tools) => Ok(ListToolsResult::with_all_items(tools)),
            Err(error) => {
                self.forget(&agent).await; // opened again next time
                Err(ErrorData::internal_error(
                    format!("the relay: {error}"),
                    None,
                ))
            }
        };
        // The second list since `initialized` answers the bridge's own
        // `list_changed`: Claude Code's notification handlers are in place.
        if self.listed.fetch_add(1, Ordering::AcqRel) + 1 >= 2 {
            self.client.send_if_modified(|client| match client {
                Client::Initialized(peer) => {
                    *client = Client::Ready(peer.clone());
                    true
                }
                _ => false,
            });
        }
        answer
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(answer) = self.follow(&request) {
            return Ok(CallToolResponse::from(answer));
        }
        self.forward(request).await.map(CallToolResponse::from)
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        self.on_client_notification(notification, context.peer);
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer.clone();
        self.client.send_replace(Client::Initialized(peer.clone()));
        if !self.channels.shown() {
            tracing::info!(
                "Claude Code was not started with a channel flag naming crosstalk (--channels \
                 plugin:crosstalk@crosstalk, or --dangerously-load-development-channels \
                 server:crosstalk): it would skip channel events, so the bridge pushes nothing; \
                 the crosstalk plugin's hooks bring messages to the session, and check_inbox \
                 takes them"
            );
            return;
        }
        let bridge = self.clone();
        tokio::spawn(async move {
            if let Some(peer) = bridge.until_ready(peer).await {
                tracing::info!("Claude Code listens for channel events");
                bridge.relay_inbox(peer).await;
            }
        });
    }
}

impl Bridge {
    /// Says the tools changed, every [`PROBE_EVERY`], until Claude Code
    /// lists them a second time (see the module's notes): then it shows
    /// what it is sent. `None` if it never does within [`PROBE_FOR`] (a
    /// client that does not show channel events): nothing is pushed, and
    /// messages wait in the inbox for `check_inbox`.
    async fn until_ready(&self, peer: Peer<RoleServer>) -> Option<Peer<RoleServer>> {
        let mut client = self.client.subscribe();
        let probing = async {
            let mut every = tokio::time::interval(PROBE_EVERY);
            loop {
                every.tick().await;
                if peer.notify_tool_list_changed().await.is_err() {
                    return; // the client is gone
                }
            }
        };
        let ready = client.wait_for(|client| matches!(client, Client::Ready(_)));
        tokio::select! {
            ready = ready => match ready.ok().as_deref() {
                Some(Client::Ready(peer)) => Some(peer.clone()),
                _ => None,
            },
            () = probing => None,
            () = tokio::time::sleep(PROBE_FOR) => {
                tracing::warn!(
                    "the client did not list the tools again after being told they changed: \
                     it shows no channel events, so nothing is pushed to it (check_inbox works)"
                );
                None
            }
        }
    }
}

#[cfg(test)]
#[test]
fn a_url_is_shown_without_its_credentials() {
    for url in [
        "http://alice:hunter2@relay.example.com:8080/",
        "htp://alice:hunter2@relay.example.com:8080/",
    ] {
        let said = check_url(url).unwrap_err().to_string();
        assert!(
            !said.contains("hunter2") && !said.contains("alice"),
            "{said}"
        );
        assert!(said.contains("relay.example.com:8080"), "{said}");
    }
}
