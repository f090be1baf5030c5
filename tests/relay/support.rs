//! `spawn_app()` and the clients the tests drive it with.

use crosstalk::app::{self, Running};
use crosstalk::config::Config;
use crosstalk::relay::{now_millis, token::Token};
use crosstalk::store::{SqliteStore, Store};
use rmcp::{
    RoleClient, ServiceExt,
    model::CallToolRequestParams,
    service::{RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use std::path::PathBuf;
use tempfile::TempDir;

/// A running relay and the database behind it.
pub struct TestApp {
    pub running: Running,
    pub db: PathBuf,
    /// Keeps the database's directory alive for the test.
    _dir: TempDir,
}

/// Starts a relay on 127.0.0.1:0 with a fresh database.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// As [`spawn_app`], after `adjust` has changed the configuration.
pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("relay.db");
    let mut config = Config::local(db.clone());
    adjust(&mut config);
    let running = app::spawn(config).await.expect("the relay starts");
    TestApp {
        running,
        db,
        _dir: dir,
    }
}

impl TestApp {
    pub fn url(&self) -> String {
        self.running.url()
    }

    /// Adds a person straight into the database, as `crosstalk add` does.
    pub async fn add_person(&self, handle: &str) -> String {
        let token = Token::generate();
        SqliteStore::open(&self.db)
            .expect("open store")
            .add_person(handle, &handle.to_uppercase(), token.hash(), now_millis())
            .await
            .expect("add person");
        token.expose().to_owned()
    }

    /// Connects an MCP client with a token.
    pub async fn mcp(&self, token: &str) -> Mcp {
        Mcp::connect(&self.url(), token)
            .await
            .expect("MCP client connects")
    }

    /// Runs SQL against the database file, for what a test must see stored.
    pub fn sql<T>(&self, query: &str, read: impl FnOnce(&rusqlite::Connection, &str) -> T) -> T {
        let conn = rusqlite::Connection::open(&self.db).expect("open db");
        read(&conn, query)
    }

    pub fn count(&self, query: &str) -> i64 {
        self.sql(query, |conn, q| {
            conn.query_row(q, [], |row| row.get(0))
                .expect("count query")
        })
    }
}

/// An MCP client (rmcp's own) over streamable HTTP.
pub struct Mcp {
    pub client: RunningService<RoleClient, ()>,
}

/// What a tool call ended as.
#[derive(Debug)]
pub enum Outcome {
    /// A structured result.
    Ok(Value),
    /// A tool error, with the relay's JSON error body.
    ToolError(Value),
    /// A protocol error (bad arguments, transport).
    Protocol(String),
}

impl Outcome {
    pub fn ok(self) -> Value {
        match self {
            Outcome::Ok(value) => value,
            other => panic!("expected a result, got {other:?}"),
        }
    }

    pub fn tool_error(self) -> Value {
        match self {
            Outcome::ToolError(body) => body,
            other => panic!("expected a tool error, got {other:?}"),
        }
    }
}

impl Mcp {
    pub async fn connect(url: &str, token: &str) -> Result<Mcp, String> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp"));
        if !token.is_empty() {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = ().serve(transport).await.map_err(|e| e.to_string())?;
        Ok(Mcp { client })
    }

    pub async fn call(&self, tool: &'static str, arguments: Value) -> Outcome {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object")
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await;
        match result {
            Err(ServiceError::McpError(error)) => Outcome::Protocol(error.message.to_string()),
            Err(other) => Outcome::Protocol(other.to_string()),
            Ok(result) if result.is_error == Some(true) => {
                let text = result.content[0]
                    .as_text()
                    .expect("error text")
                    .text
                    .clone();
                Outcome::ToolError(
                    serde_json::from_str(&text)
                        .unwrap_or_else(|_| panic!("error body is not JSON: {text}")),
                )
            }
            Ok(result) => Outcome::Ok(result.structured_content.expect("structured result")),
        }
    }
}

/// A plain HTTP client for what is not MCP.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().build().expect("HTTP client")
}

/// An MCP request by hand: a JSON-RPC body POSTed to /mcp.
pub fn mcp_post(url: &str, token: &str, body: Value) -> reqwest::RequestBuilder {
    http()
        .post(format!("{url}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
}

/// The JSON-RPC messages of an MCP response, SSE or plain JSON.
pub async fn rpc_messages(response: reqwest::Response) -> Vec<Value> {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    let text = response.text().await.expect("response body");
    if !sse {
        return vec![serde_json::from_str(&text).expect("JSON body")];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).expect("SSE data is JSON"))
        .collect()
}

/// The initialize request of an MCP client that uses sessions.
pub fn initialize() -> Value {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "raw-test-client", "version": "1" }
        }
    })
}
