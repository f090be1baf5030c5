//! An agent's side of MCP: rmcp's own client over streamable HTTP, calling
//! tools and reading their results the way an agent sees them. The demo,
//! the benchmarks and the tests all drive the relay through this.

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, CustomNotification},
    service::{ClientInitializeError, NotificationContext, RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::protocol::CHANNEL_NOTIFICATION;

/// An MCP connection to a relay, as one person.
pub struct Agent {
    pub client: RunningService<RoleClient, Listener>,
}

/// The client's side of what the relay sends unasked: the `params` of each
/// channel notification go to `pushes`, when the agent listens for them.
#[derive(Clone, Default)]
pub struct Listener {
    pushes: Option<mpsc::UnboundedSender<Value>>,
}

impl Listener {
    /// A listener, and the receiver of what it hears.
    pub fn new() -> (Listener, mpsc::UnboundedReceiver<Value>) {
        let (pushes, received) = mpsc::unbounded_channel();
        (
            Listener {
                pushes: Some(pushes),
            },
            received,
        )
    }
}

impl ClientHandler for Listener {
    /// Lists the tools again, as a client that shows pushes does: the
    /// relay takes the second listing as proof that it listens.
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        if self.pushes.is_some() {
            let peer = context.peer.clone();
            tokio::spawn(async move { peer.list_all_tools().await });
        }
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == CHANNEL_NOTIFICATION
            && let (Some(pushes), Some(params)) = (&self.pushes, notification.params)
        {
            let _ = pushes.send(params);
        }
    }
}

/// What a tool call ended as.
#[derive(Debug)]
pub enum Outcome {
    /// A structured result.
    Ok(Value),
    /// A refusal: a tool error carrying the relay's JSON error body.
    ToolError(Value),
    /// A protocol or transport failure, with its text.
    Protocol(String),
}

impl Outcome {
    /// The result; panics on anything else (for tests and benchmarks).
    pub fn ok(self) -> Value {
        match self {
            Outcome::Ok(value) => value,
            other => panic!("expected a result, got {other:?}"),
        }
    }

    /// The error body of a refusal; panics on anything else.
    pub fn tool_error(self) -> Value {
        match self {
            Outcome::ToolError(body) => body,
            other => panic!("expected a tool error, got {other:?}"),
        }
    }

    /// The result, or a sentence saying why there is none: the relay's
    /// error message for a refusal, the failure for anything else.
    pub fn into_result(self) -> Result<Value, String> {
        match self {
            Outcome::Ok(value) => Ok(value),
            Outcome::ToolError(body) => Err(body["error"]["message"]
                .as_str()
                .map_or_else(|| body.to_string(), str::to_owned)),
            Outcome::Protocol(message) => Err(message),
        }
    }
}

impl Agent {
    /// Connects to `url`'s `/mcp` with `token` (none when empty).
    pub async fn connect(url: &str, token: &str) -> Result<Agent, ClientInitializeError> {
        Agent::open(format!("{url}/mcp"), token, Listener::default()).await
    }

    /// Connects asking for pushes (`?push=1`): what the relay pushes comes
    /// out of the receiver, as each notification's `params`.
    pub async fn listening(
        url: &str,
        token: &str,
    ) -> Result<(Agent, mpsc::UnboundedReceiver<Value>), ClientInitializeError> {
        let (listener, received) = Listener::new();
        let agent = Agent::open(format!("{url}/mcp?push=1"), token, listener).await?;
        Ok((agent, received))
    }

    async fn open(
        uri: String,
        token: &str,
        listener: Listener,
    ) -> Result<Agent, ClientInitializeError> {
        // The HTTP client's TLS needs a process-wide crypto provider, and a
        // caller of this library may not have installed one (an error
        // means one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = StreamableHttpClientTransportConfig::with_uri(uri);
        if !token.is_empty() {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = listener.serve(transport).await?;
        Ok(Agent { client })
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &str, arguments: Value) -> Outcome {
        let Value::Object(arguments) = arguments else {
            return Outcome::Protocol("tool arguments must be a JSON object".into());
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await;
        match result {
            Err(ServiceError::McpError(error)) => Outcome::Protocol(error.message.to_string()),
            Err(other) => Outcome::Protocol(other.to_string()),
            Ok(result) if result.is_error == Some(true) => {
                let text = result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                match serde_json::from_str(&text) {
                    Ok(body) => Outcome::ToolError(body),
                    Err(_) => Outcome::Protocol(format!("a tool error that is not JSON: {text}")),
                }
            }
            Ok(result) => match result.structured_content {
                Some(value) => Outcome::Ok(value),
                None => Outcome::Protocol(format!("{tool} returned no structured result")),
            },
        }
    }

    /// Ends the session.
    pub async fn close(self) -> Result<(), tokio::task::JoinError> {
        self.client.cancel().await.map(|_| ())
    }
}
