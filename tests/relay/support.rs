//! `spawn_app()` and the clients the tests drive it with.

pub use crosstalk::agent::{Agent as Mcp, Outcome};
use crosstalk::config::Config;
use crosstalk::server::{self, Running};
use serde_json::{Value, json};
use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::Child,
    time::Duration,
};
use tempfile::TempDir;

/// Serves `app` (a fake of someone else's server: a model API, a webhook)
/// on a spare loopback port, for the rest of the test; its address.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A loopback address nothing listens on.
pub fn nobody() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// The integer `field` of `value` (an id a tool answered), or the test
/// fails naming it.
pub fn id_of(value: &Value, field: &str) -> i64 {
    value[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {value}"))
}

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
    let running = server::spawn(config).await.expect("the relay starts");
    TestApp {
        running,
        db,
        _dir: dir,
    }
}

impl TestApp {
    /// Stops the relay (as `systemctl restart` does) and starts it again on
    /// the same database and address.
    pub async fn restart(self) -> TestApp {
        self.restart_with(|_| {}).await
    }

    /// As [`TestApp::restart`], after `adjust` has changed the configuration.
    pub async fn restart_with(self, adjust: impl FnOnce(&mut Config)) -> TestApp {
        let TestApp { running, db, _dir } = self;
        let addr = running.addr;
        running.stop().await.expect("the relay stops");
        let mut config = Config::local(db.clone());
        config.listen = addr;
        adjust(&mut config);
        let running = server::spawn(config).await.expect("the relay starts again");
        TestApp { running, db, _dir }
    }

    pub fn url(&self) -> String {
        self.running.url()
    }

    /// Waits until `handle` can be pushed to (a stream or a hook's waiter of
    /// theirs holds a wait on the relay), woken as waits park; whether that
    /// came within `within`.
    pub async fn until_reachable(&self, handle: &str, within: Duration) -> bool {
        let relay = self.running.state.relay.clone();
        let mut parked = relay.parked_waits();
        tokio::time::timeout(within, async {
            while !relay.reachable().iter().any(|h| h.as_str() == handle) {
                parked.changed().await.unwrap();
            }
        })
        .await
        .is_ok()
    }

    /// Waits until `handle` can no longer be pushed to (the last wait of
    /// theirs ended); whether that came within `within`. Looked at every
    /// 20 ms: the relay announces a wait that parks, not one that ends.
    pub async fn until_unreachable(&self, handle: &str, within: Duration) -> bool {
        let relay = self.running.state.relay.clone();
        tokio::time::timeout(within, async {
            while relay.reachable().iter().any(|h| h.as_str() == handle) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok()
    }

    /// Adds a person through the running relay's core, as `crosstalk add`
    /// does through its own; returns the token.
    pub async fn add_person(&self, handle: &str) -> String {
        self.add_named(handle, &handle.to_uppercase()).await
    }

    /// Adds a person with a name; returns the token.
    pub async fn add_named(&self, handle: &str, name: &str) -> String {
        self.running
            .state
            .relay
            .team()
            .add(handle, Some(name))
            .await
            .expect("add person")
            .token
            .expose()
            .to_owned()
    }

    /// Revokes a person through the running relay's core.
    pub async fn revoke(&self, handle: &str) {
        self.running
            .state
            .relay
            .team()
            .revoke(handle)
            .await
            .expect("revoke person");
    }

    /// Connects an MCP client with a token.
    pub async fn mcp(&self, token: &str) -> Mcp {
        Mcp::connect(&self.url(), token)
            .await
            .expect("MCP client connects")
    }

    /// Runs SQL against the SQLite file. Edge tests assert through the API
    /// (`Rest`, `Mcp`); this is for the few things no API shows: moving a
    /// time into the past (`expires_at`, presence), and what is kept at rest
    /// (a token only as its hash, kept MCP sessions, rows nobody can see:
    /// presence of nobody's handles, threads and inbox rows a purge left).
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

/// A plain HTTP client for what is not MCP.
pub fn http() -> reqwest::Client {
    crosstalk::tls::install_crypto_provider();
    reqwest::Client::builder().build().expect("HTTP client")
}

/// A client that shows redirects instead of following them.
pub fn browser() -> reqwest::Client {
    crosstalk::tls::install_crypto_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A GET of `path` as a browser signed in with `token` sends it.
pub fn visit(app: &TestApp, path: &str, token: &str) -> reqwest::RequestBuilder {
    browser()
        .get(format!("{}{path}", app.url()))
        .basic_auth("x", Some(token))
}

/// The page at `path` as `token` sees it.
pub async fn page(app: &TestApp, path: &str, token: &str) -> (u16, String) {
    let response = visit(app, path, token).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// An MCP request by hand: a JSON-RPC body POSTed to /mcp.
pub fn mcp_post(url: &str, token: &str, body: Value) -> reqwest::RequestBuilder {
    http()
        .post(format!("{url}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
}

/// A stateless MCP call (revision 2026-07-28): `tool` with `arguments`,
/// its revision, capabilities and client in `_meta` and the standard
/// headers.
pub fn stateless_call(
    url: &str,
    token: &str,
    id: u64,
    tool: &str,
    arguments: Value,
) -> reqwest::RequestBuilder {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "test", "version": "1" },
    });
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments, "_meta": meta },
    });
    mcp_post(url, token, body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
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

/// An MCP session driven by hand over HTTP, to see exactly what the relay
/// sends: the session's standalone stream, and each call's own stream.
pub struct RawSession {
    pub url: String,
    pub token: String,
    pub id: String,
}

impl RawSession {
    /// Initializes a session (protocol 2025-06-18) and says it is ready.
    pub async fn open(url: &str, token: &str) -> RawSession {
        let opened = mcp_post(url, token, initialize()).send().await.unwrap();
        assert_eq!(opened.status(), 200, "the session opens");
        let id = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        rpc_messages(opened).await;
        let session = RawSession {
            url: url.to_owned(),
            token: token.to_owned(),
            id,
        };
        let ready = session
            .post(serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .send()
            .await
            .unwrap();
        assert!(ready.status().is_success());
        session
    }

    /// The same session, as someone presenting `token`.
    pub fn with_token(&self, token: &str) -> RawSession {
        RawSession {
            url: self.url.clone(),
            token: token.to_owned(),
            id: self.id.clone(),
        }
    }

    /// A JSON-RPC message on the session.
    pub fn post(&self, body: Value) -> reqwest::RequestBuilder {
        mcp_post(&self.url, &self.token, body)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
    }

    /// A `tools/call` on the session.
    pub fn call(&self, id: u64, tool: &str, arguments: Value) -> reqwest::RequestBuilder {
        self.post(serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments }
        }))
    }

    /// The session's standalone server-to-client stream (`GET /mcp`).
    pub fn listen(&self) -> reqwest::RequestBuilder {
        http()
            .get(format!("{}/mcp", self.url))
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
    }
}

/// The configuration `crosstalk serve` flags make, parsed as the binary
/// parses them; a spare port whatever the flags say.
pub fn config_from_flags(
    db: PathBuf,
    flags: &[&str],
) -> Result<Config, crosstalk::config::ConfigError> {
    let db = db.to_string_lossy().into_owned();
    let mut argv = vec!["crosstalk", "serve", "--db", &db];
    argv.extend_from_slice(flags);
    // No environment: the test's own, whatever it holds, plays no part.
    let cli = crosstalk::cli::Cli::parse_with(argv, &Default::default()).expect("flags parse");
    let crosstalk::cli::Command::Serve(args) = cli.command else {
        unreachable!()
    };
    let mut config = Config::from_args(&args)?;
    config.listen.set_port(0);
    Ok(config)
}

/// Starts a relay configured from `crosstalk serve` flags.
pub async fn spawn_app_with_flags(flags: &[&str]) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("relay.db");
    let config = config_from_flags(db.clone(), flags).expect("a valid configuration");
    let running = server::spawn(config).await.expect("the relay starts");
    TestApp {
        running,
        db,
        _dir: dir,
    }
}

/// A REST call: status and JSON body.
pub async fn rest(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    call(&app.url(), method, path, token, body).await
}

/// A call to the relay at `url`: status and JSON body.
async fn call(
    url: &str,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = http().request(method, format!("{url}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    if text.is_empty() {
        return (status, Value::Null); // 204
    }
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text:?}"));
    (status, body)
}

pub async fn get(app: &TestApp, path: &str, token: &str) -> (u16, Value) {
    rest(app, reqwest::Method::GET, path, Some(token), None).await
}

pub async fn post(app: &TestApp, path: &str, token: &str, body: Value) -> (u16, Value) {
    rest(app, reqwest::Method::POST, path, Some(token), Some(body)).await
}

/// A person on the relay's REST API, as `crosstalk::agent::Agent` is one
/// on MCP: each call answers what a client would see. The plain calls give
/// the status and the JSON; the named ones are the common steps of a test
/// and fail it unless the relay did what was asked.
pub struct Rest {
    url: String,
    token: String,
}

impl TestApp {
    /// The REST client of the person holding `token`.
    pub fn rest(&self, token: &str) -> Rest {
        Rest {
            url: self.url(),
            token: token.to_owned(),
        }
    }
}

impl Rest {
    pub async fn get(&self, path: &str) -> (u16, Value) {
        call(
            &self.url,
            reqwest::Method::GET,
            path,
            Some(&self.token),
            None,
        )
        .await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        call(
            &self.url,
            reqwest::Method::POST,
            path,
            Some(&self.token),
            Some(body),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        call(
            &self.url,
            reqwest::Method::PUT,
            path,
            Some(&self.token),
            Some(body),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        call(
            &self.url,
            reqwest::Method::DELETE,
            path,
            Some(&self.token),
            None,
        )
        .await
    }

    /// Sends `body` to `to` (`POST /api/messages`, with any further
    /// `fields`); what the relay stored, which must be a new message (201).
    pub async fn send(&self, to: &str, body: &str, fields: Value) -> Value {
        let mut message = json!({ "to": to, "body": body });
        if let (Some(message), Value::Object(fields)) = (message.as_object_mut(), fields) {
            message.extend(fields);
        }
        let (status, sent) = self.post("/api/messages", message).await;
        assert_eq!(status, 201, "{sent}");
        sent
    }

    /// Posts `body` in `channel`; what the relay stored (201).
    pub async fn post_in(&self, channel: &str, body: &str) -> Value {
        let path = format!("/api/channels/{channel}/messages");
        let (status, posted) = self.post(&path, json!({ "body": body })).await;
        assert_eq!(status, 201, "{posted}");
        posted
    }

    /// Message `id` as this person reads it (200).
    pub async fn message(&self, id: i64) -> Value {
        let (status, read) = self.get(&format!("/api/messages/{id}")).await;
        assert_eq!(status, 200, "{read}");
        read["message"].clone()
    }

    /// Where message `id` stands (its `delivery`), as this person reads it;
    /// null for a message to nobody.
    pub async fn delivery(&self, id: i64) -> Value {
        self.message(id).await["delivery"].clone()
    }

    /// Message `id` as this person reads it on the page (Basic
    /// credentials), so it is not marked read; None if there is none (404).
    pub async fn glance(&self, id: i64) -> Option<Value> {
        let response = http()
            .get(format!("{}/api/messages/{id}", self.url))
            .basic_auth("", Some(&self.token))
            .send()
            .await
            .expect("request");
        match response.status().as_u16() {
            200 => Some(response.json::<Value>().await.expect("JSON")["message"].take()),
            404 => None,
            status => panic!("message {id}: {status}"),
        }
    }

    /// Every live message the relay has stored, in id order, read back one
    /// by one: on SQLite, which the tests run on, ids are given one after
    /// another from 1, only to a message that is stored (a write rolled back
    /// gives its id back), so this reads up to the first id there is no
    /// message for. A refused message takes no id; nothing read is marked
    /// read.
    pub async fn stored(&self) -> Vec<Value> {
        let mut stored = Vec::new();
        while let Some(message) = self.glance(stored.len() as i64 + 1).await {
            stored.push(message);
        }
        stored
    }

    /// How many live messages the relay has stored (see [`Rest::stored`]).
    pub async fn stored_messages(&self) -> i64 {
        self.stored().await.len() as i64
    }

    /// What a search for `words` finds, newest first (200).
    pub async fn search(&self, words: &str) -> Vec<Value> {
        let q: String = form_urlencoded::byte_serialize(words.as_bytes()).collect();
        let (status, found) = self.get(&format!("/api/search?q={q}")).await;
        assert_eq!(status, 200, "{found}");
        found["messages"].as_array().expect("a list").clone()
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Reads a `text/event-stream` response event by event.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        assert_eq!(response.status(), 200, "the stream opens");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "an SSE stream"
        );
        SseReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (comments skipped); fails the test after 10 s.
    pub async fn next(&mut self) -> SseEvent {
        tokio::time::timeout(std::time::Duration::from_secs(10), self.next_event())
            .await
            .expect("an event arrives")
    }

    async fn next_event(&mut self) -> SseEvent {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    id: None,
                    event: None,
                    data: String::new(),
                };
                let mut is_comment_only = true;
                for line in block.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    is_comment_only = false;
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => event.id = Some(value.to_owned()),
                        "event" => event.event = Some(value.to_owned()),
                        "data" => event.data.push_str(value),
                        _ => {}
                    }
                }
                if !is_comment_only {
                    return event;
                }
                continue;
            }
            let chunk = self
                .response
                .chunk()
                .await
                .expect("stream readable")
                .expect("stream still open");
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// Reads until the server ends the stream; returns the types of the
    /// events that came meanwhile.
    pub async fn until_closed(&mut self) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.response.chunk().await {
                Ok(Some(chunk)) => {
                    self.buffer.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = self.buffer.find("\n\n") {
                        let block: String = self.buffer.drain(..end + 2).collect();
                        seen.extend(
                            block
                                .lines()
                                .filter_map(|l| l.strip_prefix("event:"))
                                .map(|e| e.trim().to_owned()),
                        );
                    }
                }
                Ok(None) | Err(_) => return seen,
            }
        }
    }

    /// The next event, which must be a message; returns the message.
    pub async fn message(&mut self) -> Value {
        let event = self.next().await;
        assert_eq!(event.event.as_deref(), Some("message"), "{event:?}");
        let message: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(
            event.id,
            Some(message["id"].to_string()),
            "id: is the message id"
        );
        message
    }
}

/// Reads a child's standard error on a thread as it comes, so the child
/// never blocks on a full pipe; `wait_for` blocks until a line contains a
/// text.
pub struct LogWatch {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl LogWatch {
    pub fn new(child: &mut Child) -> LogWatch {
        let stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        LogWatch {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now on that contains `text`; fails the test after 20 s.
    pub fn wait_for(&mut self, text: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no log line with {text:?}; the log so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// The relay's URL, from the line that says where it listens (as
    /// text, `listen=ADDR`, or as JSON, `"listen":"ADDR"`).
    pub fn serving_url(&mut self) -> String {
        // The line itself, not another that happens to say "listen" (at
        // trace level, PostgreSQL's LISTEN connection's).
        let line = self.wait_for("crosstalk is serving");
        let addr = match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(json) => json["fields"]["listen"]
                .as_str()
                .expect("a listen field")
                .to_owned(),
            Err(_) => line
                .split("listen=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .expect("an address after listen=")
                .to_owned(),
        };
        format!("http://{addr}")
    }

    /// The whole log, once the child has ended.
    pub fn whole(mut self) -> String {
        self.seen.extend(self.lines.iter());
        self.seen.join("\n")
    }
}

/// Runs the `crosstalk` binary on `db`, with no address from the caller's
/// environment.
pub fn crosstalk(db: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(args)
        .env("RELAY_DB", db)
        .env_remove("RELAY_PUBLIC_URL")
        .env_remove("RELAY_HOST")
        .env_remove("RELAY_PORT")
        .output()
        .expect("run crosstalk")
}

/// The standard output of a command that must have succeeded.
pub fn stdout(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The token line of `add` or `rotate`.
pub fn token_in(printed: &str) -> String {
    printed
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("xtalk_"))
        .expect("a token line")
        .to_owned()
}

/// Ends a child process when a test ends, however it ends.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `crosstalk bridge` for `token`'s person against `app`, as Claude Code
/// starts it: its stdio for an MCP client, its log, and the process, ended
/// when the test ends.
pub fn start_bridge(
    app: &TestApp,
    token: &str,
) -> (
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
    LogWatch,
    KillOnDrop,
) {
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .arg("bridge")
        // Its client here is the test, which shows channel events.
        .env("CROSSTALK_CHANNELS", "on")
        .env("CROSSTALK_URL", app.url())
        .env("CROSSTALK_TOKEN", token)
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crosstalk bridge starts");
    let log = LogWatch::new(&mut child);
    let stdout = tokio::process::ChildStdout::from_std(child.stdout.take().unwrap()).unwrap();
    let stdin = tokio::process::ChildStdin::from_std(child.stdin.take().unwrap()).unwrap();
    (stdout, stdin, log, KillOnDrop(child))
}
