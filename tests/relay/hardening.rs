//! The relay as an attacker and a careless operator would try it: each test
//! pins one point of the hardening (revocation, exposure, connections,
//! sessions, quotas, cross-site requests, careless configurations).

use crate::support::{
    LogWatch, Mcp, Outcome, RawSession, SseReader, config_from_flags, crosstalk, get, http,
    rpc_messages, spawn_app, spawn_app_with, stdout, token_in,
};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long revocation may take to end what a token holds.
const REVOKED_WITHIN: Duration = Duration::from_secs(2);

/// Waits until `n` waits are parked in the core, so a test acts on waits
/// that are really waiting.
pub async fn parked(app: &crate::support::TestApp, n: u64) {
    let mut parked = app.running.state.relay.parked_waits();
    tokio::time::timeout(
        Duration::from_secs(10),
        parked.wait_for(|count| *count >= n),
    )
    .await
    .expect("the waits park")
    .expect("the relay runs");
}

/// An MCP session of `token`'s holding its standalone stream open, with a
/// `wait_for_message` on `ops` (JSON-RPC id `id`) sent: the stream, and
/// the call's messages to come (its answer is one JSON body, which comes
/// when the call ends; [`parked`] says when it waits).
pub async fn a_session_waiting(
    url: &str,
    token: &str,
    id: u64,
) -> (SseReader, tokio::task::JoinHandle<Vec<Value>>) {
    let raw = RawSession::open(url, token).await;
    let listening = raw.listen().send().await.unwrap();
    assert_eq!(listening.status(), 200, "the standalone stream opens");
    let call = raw.call(
        id,
        "wait_for_message",
        json!({ "channel": "ops", "since_id": 0, "timeout_s": 50 }),
    );
    let answered = tokio::spawn(async move {
        let answered = call.send().await.unwrap();
        assert_eq!(answered.status(), 200);
        rpc_messages(answered).await
    });
    (SseReader::new(listening), answered)
}

/// What `future` gives, which must come within [`REVOKED_WITHIN`].
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(REVOKED_WITHIN, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within 2 s"))
}

async fn open_stream(app: &crate::support::TestApp, request: reqwest::RequestBuilder) -> SseReader {
    let _ = app;
    let mut stream = SseReader::new(request.send().await.expect("the stream opens"));
    assert_eq!(stream.next().await.event.as_deref(), Some("notice"));
    stream
}

/// A request's line and headers may take 8 KiB: a larger head is refused
/// with 431, one within it is served, on the same relay.
#[tokio::test]
async fn a_request_head_over_8_kib_is_refused_with_431() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let with_padding = |bytes: usize| {
        http()
            .get(format!("{}/api/channels/general/messages", app.url()))
            .bearer_auth(&alice)
            .header("x-padding", "p".repeat(bytes))
            .send()
    };
    assert_eq!(with_padding(9 * 1024).await.unwrap().status(), 431);
    assert_eq!(with_padding(7 * 1024).await.unwrap().status(), 200);
}

#[tokio::test]
async fn revoking_from_the_cli_ends_streams_waits_and_mcp_sessions_within_two_seconds() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let url = app.url();
    let stream_url = format!("{url}/api/channels/ops/stream");
    let mut by_bearer = open_stream(&app, http().get(&stream_url).bearer_auth(&alice)).await;
    let mut by_basic = open_stream(
        &app,
        http().get(&stream_url).basic_auth("alice", Some(&alice)),
    )
    .await;
    let mut by_query = open_stream(&app, http().get(format!("{stream_url}?token={alice}"))).await;
    let rest_wait = tokio::spawn({
        let request = http()
            .get(format!(
                "{url}/api/channels/ops/wait?since_id=0&timeout_s=50"
            ))
            .bearer_auth(&alice);
        async move { request.send().await.expect("the wait answers").status() }
    });
    let session = Mcp::connect(&url, &alice).await.expect("alice connects");
    let (mut listening, mcp_wait) = a_session_waiting(&url, &alice, 9).await;
    parked(&app, 2).await;

    // Revoked by another process, on the same database.
    let db = app.db.clone();
    let revoked =
        tokio::task::spawn_blocking(move || stdout(&crosstalk(&db, &["revoke", "alice"])))
            .await
            .unwrap();
    assert!(revoked.starts_with("Revoked alice"), "{revoked}");

    let rest = within("the long-poll", rest_wait).await.unwrap();
    let mcp = within("the MCP wait", mcp_wait).await.unwrap();
    let streams = (
        within("the Bearer stream", by_bearer.until_closed()).await,
        within("the Basic stream", by_basic.until_closed()).await,
        within("the ?token= stream", by_query.until_closed()).await,
        within("the MCP session's stream", listening.until_closed()).await,
    );
    assert_eq!(rest, 401, "the long-poll ends refused");
    // The call in flight ends with the relay's refusal, never a message.
    let answer = mcp
        .iter()
        .find(|m| m["id"] == 9)
        .expect("the call is answered");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let refusal: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(refusal["error"]["code"], "unauthorized");
    for seen in [&streams.0, &streams.1, &streams.2, &streams.3] {
        assert!(!seen.iter().any(|e| e == "message"), "{seen:?}");
    }
    // Nothing posted afterwards reaches her session, which is gone.
    let (status, _) = crate::support::post(
        &app,
        "/api/channels/ops/messages",
        &bob,
        json!({ "body": "after the revoke" }),
    )
    .await;
    assert_eq!(status, 201);
    assert!(matches!(
        session
            .call("get_messages", json!({ "channel": "ops" }))
            .await,
        Outcome::Protocol(_)
    ));
    assert_eq!(app.running.mcp.open_sessions(), 0);
}

#[tokio::test]
async fn rotating_ends_the_old_tokens_streams() {
    let app = spawn_app().await;
    let carol = app.add_person("carol").await;
    let stream_url = format!("{}/api/channels/ops/stream", app.url());
    let mut stream = open_stream(&app, http().get(&stream_url).bearer_auth(&carol)).await;
    let db = app.db.clone();
    let rotated =
        tokio::task::spawn_blocking(move || stdout(&crosstalk(&db, &["rotate", "carol"])))
            .await
            .unwrap();
    let new_token = token_in(&rotated);
    let seen = within("the old token's stream", stream.until_closed()).await;
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(get(&app, "/api/people", &new_token).await.0, 200);
}

/// The refusal a configuration gets at start, given whether anyone was added.
fn exposure(flags: &[&str], has_people: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let config = config_from_flags(dir.path().join("relay.db"), flags).map_err(|e| e.0)?;
    config.check_exposure(has_people).map_err(|e| e.0)
}

#[tokio::test]
async fn an_open_relay_is_refused_wherever_others_could_reach_it() {
    // Open (nobody added, no token) on loopback under no public name: fine.
    assert_eq!(exposure(&[], false), Ok(()));
    // Published beyond loopback, as behind a reverse proxy: refused.
    let refused = exposure(&["--public-url", "https://relay.example.com"], false).unwrap_err();
    assert!(
        refused.starts_with(
            "refusing to serve on 127.0.0.1:0 (published as https://relay.example.com) with no credentials"
        ),
        "{refused}"
    );
    assert!(exposure(&["--domains", "relay.example.com"], false).is_err());
    assert_eq!(
        exposure(&["--public-url", "https://relay.example.com"], true),
        Ok(())
    );
    // And the relay itself will not start so.
    let dir = tempfile::tempdir().unwrap();
    let config = config_from_flags(
        dir.path().join("relay.db"),
        &["--public-url", "https://relay.example.com"],
    )
    .unwrap();
    let started = crosstalk::server::spawn(config).await;
    assert!(
        started.is_err(),
        "an open relay started behind a public name"
    );
}

#[test]
fn a_public_address_needs_a_name_and_tls_or_plain_http_in_so_many_words() {
    let participant = ["--participants", "ci:0123456789abcdef0123"];
    let unnamed = [&participant[..], &["--host", "0.0.0.0"]].concat();
    let refused = exposure(&unnamed, true).unwrap_err();
    assert!(refused.contains("set RELAY_PUBLIC_URL"), "{refused}");
    let named = [&unnamed[..], &["--public-url", "http://relay.internal"]].concat();
    let refused = exposure(&named, true).unwrap_err();
    assert!(
        refused.starts_with("refusing to serve plain HTTP on 0.0.0.0:0"),
        "{refused}"
    );
    assert!(refused.contains("RELAY_ALLOW_PLAIN_HTTP=1"));
    let allowed = [&named[..], &["--allow-plain-http"]].concat();
    assert_eq!(exposure(&allowed, true), Ok(()));
}

#[test]
fn careless_shared_tokens_and_origins_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let short = config_from_flags(db.clone(), &["--token", "abc"])
        .unwrap_err()
        .0;
    assert!(
        short.starts_with("RELAY_TOKEN is shorter than 32 characters"),
        "{short}"
    );
    assert!(!short.contains("abc"), "the refusal repeats the token");
    let origin = config_from_flags(db, &["--allowed-origins", "not a url"])
        .unwrap_err()
        .0;
    assert!(
        origin.starts_with("RELAY_ALLOWED_ORIGINS has \"not a url\", which is not an origin"),
        "{origin}"
    );
}

#[tokio::test]
async fn a_half_sent_mcp_body_gets_the_same_timeout_as_everything_else() {
    let app = spawn_app_with(|config| config.request_timeout = Duration::from_secs(1)).await;
    let alice = app.add_person("alice").await;
    let mut socket = tokio::net::TcpStream::connect(app.running.addr)
        .await
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {alice}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: 200\r\n\r\n{{\"jsonrpc\":"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            let n = socket.read(&mut buffer).await.unwrap();
            answer.extend_from_slice(&buffer[..n]);
            if n == 0 || String::from_utf8_lossy(&answer).contains("}}") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer to a half-sent body");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"code\":\"timeout\""), "{answer}");
}

#[tokio::test]
async fn the_database_is_for_the_relays_user_only_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state").join("relay.db");
    let running = crosstalk::server::spawn(crosstalk::config::Config::local(db.clone()))
        .await
        .unwrap();
    running.state.relay.team().add("alice", None).await.unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(db.parent().unwrap()), 0o700);
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&db.with_extension("db-wal")), 0o600);
    running.stop().await.unwrap();
    // A clean stop leaves everything in the database file itself.
    let wal = std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the write-ahead log is checkpointed at stop");
}

#[tokio::test]
async fn no_body_reaches_the_log_at_any_level_and_serve_says_which_credentials_count() {
    let log = a_logged_conversation("text").await;
    assert!(log.contains("request"), "requests were logged");
}

/// `RELAY_LOG_FORMAT=json`: one JSON object a line, with the fields the
/// text log has, and as little in them.
#[tokio::test]
async fn the_json_log_is_one_object_a_line_with_the_same_fields_and_no_body() {
    let log = a_logged_conversation("json").await;
    let lines: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    for line in &lines {
        assert!(
            line["timestamp"].is_string()
                && line["level"].is_string()
                && line["target"].is_string(),
            "{line}"
        );
    }
    let credentials = lines
        .iter()
        .find(|l| l["fields"]["people"].is_number())
        .expect("the credentials line");
    assert_eq!(credentials["fields"]["people"], 1, "{credentials}");
    assert_eq!(
        credentials["fields"]["shared_token"], false,
        "{credentials}"
    );
    let request = lines
        .iter()
        .find(|l| l["fields"]["status"].is_number())
        .expect("a request's line");
    assert!(request["fields"]["method"].is_string(), "{request}");

    // The same events carry the same fields in the text log.
    let text = a_logged_conversation("text").await;
    for event in ["request", "credentials"] {
        let in_json: std::collections::BTreeSet<String> = lines
            .iter()
            .filter(|l| l["fields"]["message"] == event)
            .flat_map(|l| l["fields"].as_object().unwrap().keys().cloned())
            .filter(|k| k != "message")
            .collect();
        let in_text: std::collections::BTreeSet<String> = text
            .lines()
            .filter_map(|l| l.split_once(&format!(": {event} ")).map(|(_, rest)| rest))
            .flat_map(|rest| {
                rest.split(' ')
                    .filter_map(|pair| pair.split_once('=').map(|(k, _)| k.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(!in_json.is_empty(), "no {event} line in JSON");
        assert_eq!(in_json, in_text, "{event}");
    }
}

/// A relay run at `trace` in `format` that is sent a body to keep, and
/// refused one holding a key: its whole log, in which neither body, nor
/// the key, nor the token appears.
async fn a_logged_conversation(format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let token = token_in(&stdout(&crosstalk(&db, &["add", "alice"])));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0"])
        .env("RELAY_DB", &db)
        .env("RELAY_PARTICIPANTS", "ci:0123456789abcdef0123")
        .env("RUST_LOG", "trace")
        .env("RELAY_LOG_FORMAT", format)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = LogWatch::new(&mut child);
    let url = log.serving_url();
    let credentials = log.wait_for("credentials");
    for said in ["people", "participants", "shared_token"] {
        assert!(credentials.contains(said), "{credentials}");
    }
    let agent = Mcp::connect(&url, &token).await.unwrap();
    let said = "a-sentence-that-must-stay-out-of-the-log";
    agent
        .call("post_message", json!({ "channel": "ops", "body": said }))
        .await
        .ok();
    let refused = agent
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "key AKIAIOSFODNN7EXAMPLE for the-refused-body" }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "secret_refused");
    child.kill().unwrap();
    child.wait().unwrap();
    let log = log.whole();
    for secret in [
        said,
        "the-refused-body",
        "AKIAIOSFODNN7EXAMPLE",
        &token[6..],
    ] {
        assert!(!log.contains(secret), "{secret:?} reached the log");
    }
    log
}

/// The status line of a raw HTTP/1.1 request.
async fn raw_status(app: &crate::support::TestApp, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(app.running.addr)
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = within("an answer", stream.read(&mut answer)).await.unwrap();
    String::from_utf8_lossy(&answer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_request_names_one_well_formed_host() {
    let app = spawn_app().await;
    let token = app.add_person("alice").await;
    let port = app.running.addr.port();
    let ask = |hosts: &str| {
        format!(
            "GET /api/people HTTP/1.1\r\n{hosts}Authorization: Bearer {token}\r\n\
             Connection: close\r\n\r\n"
        )
    };
    let good = raw_status(&app, &ask(&format!("Host: 127.0.0.1:{port}\r\n"))).await;
    assert_eq!(good, "HTTP/1.1 200 OK");
    for hosts in [
        format!("Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n"),
        format!("Host: 127.0.0.1:{port}.evil.example\r\n"),
        "Host: 127.0.0.1:port\r\n".to_owned(),
    ] {
        let refused = raw_status(&app, &ask(&hosts)).await;
        assert_eq!(refused, "HTTP/1.1 400 Bad Request", "{hosts:?}");
    }
}

#[test]
fn the_bridge_refuses_plain_http_to_another_machine() {
    let run = |url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .arg("bridge")
            .env("CROSSTALK_URL", url)
            .env("CROSSTALK_TOKEN", "xtalk_not_a_real_token")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let refused = run("http://relay.example.com");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("the token would travel in the clear"),
        "{said}"
    );
    assert!(!said.contains("xtalk_not_a_real_token"));
    // Loopback is this machine: allowed (it ends when its stdin does).
    for url in ["http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1"] {
        let allowed = run(url);
        let said = String::from_utf8_lossy(&allowed.stderr);
        assert!(!said.contains("in the clear"), "{url}: {said}");
    }
}

/// Started without its relay (the plugin installed, nothing set), the
/// bridge still answers its client and says what is missing: in its
/// instructions and in every tool call, not as a closed connection.
#[tokio::test]
async fn the_bridge_without_a_relay_says_what_it_lacks() {
    use rmcp::ServiceExt;
    use std::process::Stdio;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .arg("bridge")
        .env_remove("CROSSTALK_URL")
        .env_remove("CROSSTALK_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve((stdout, stdin)).await.unwrap();
    let info = client.peer_info().unwrap();
    let said = info.instructions.clone().unwrap_or_default();
    assert!(said.contains("CROSSTALK_URL is not set"), "{said}");
    assert!(said.contains("crosstalk connect claude"), "{said}");
    assert!(client.list_all_tools().await.unwrap().is_empty());
    let call = rmcp::model::CallToolRequestParams::new("check_inbox");
    let answer = client.call_tool(call).await.unwrap();
    assert_eq!(answer.is_error, Some(true));
    let text = format!("{:?}", answer.content);
    assert!(text.contains("crosstalk is not connected"), "{text}");
    client.cancel().await.unwrap();
    let done = child.wait_with_output().await.unwrap();
    assert!(!done.status.success());
    let log = String::from_utf8_lossy(&done.stderr);
    assert!(log.contains("CROSSTALK_URL is not set"), "{log}");
}

#[tokio::test]
async fn another_sites_page_cannot_take_an_open_relays_inbox() {
    // An open relay: on loopback, nobody added, no token needed.
    let app = spawn_app().await;
    let agent = crate::support::Mcp::connect(&app.url(), "").await.unwrap();
    agent
        .call(
            "send_message",
            json!({ "to": "bob", "body": "for bob", "sender": "alice" }),
        )
        .await
        .ok();
    // A page elsewhere loads the inbox as an image, or opens its stream.
    for path in ["/api/inbox?sender=bob", "/api/inbox/stream?sender=bob"] {
        let response = crate::support::http()
            .get(format!("{}{path}", app.url()))
            .header("sec-fetch-site", "cross-site")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{path}");
    }
    // Nothing was taken: bob's agent still finds it.
    let inbox = agent
        .call("check_inbox", json!({ "sender": "bob" }))
        .await
        .ok();
    assert_eq!(inbox["messages"][0]["body"], "for bob");
}

#[tokio::test]
async fn a_browser_that_signed_out_is_refused_on_the_api_too() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let browser = crate::support::browser();
    let signed_out = browser
        .get(format!("{}/signout", app.url()))
        .basic_auth("alice", Some(&alice))
        .send()
        .await
        .unwrap();
    let cookie = signed_out.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    for path in [
        "/",
        "/api/people",
        "/api/channels",
        "/api/threads/1",
        "/api/search?q=x",
        "/api/channels/ops/wait?timeout_s=0",
        "/api/channels/ops/stream",
    ] {
        let response = browser
            .get(format!("{}{path}", app.url()))
            .basic_auth("alice", Some(&alice))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
    // An agent with the token as Bearer is not a browser that signed out.
    let (status, _) = crate::support::get(&app, "/api/people", &alice).await;
    assert_eq!(status, 200);
}

/// A 64 KB body of GFM tables with wide headers and one-cell rows:
/// pulldown-cmark pads every row to the header's width, so unbounded it
/// renders as tens of megabytes. `n` makes each body its own.
fn padded_tables(n: usize) -> String {
    let columns = 100;
    let table = format!(
        "|{}\n|{}\n{}\n",
        "h|".repeat(columns),
        ":-|".repeat(columns),
        "|x|\n".repeat(700)
    );
    let mut body = format!("padded tables, number {n}\n\n");
    while body.len() + table.len() < 64_000 {
        body.push_str(&table);
        body.push('\n');
    }
    body
}

/// One message renders to at most a small multiple of its body, pages are
/// rendered off the async workers, and `/healthz` answers at once while
/// four pages of such messages load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_padded_tables_are_bounded_and_healthz_answers_while_four_load() {
    // `/healthz` is asked as often as it answers: no quota on addresses.
    let app = spawn_app_with(|config| {
        config.limits.per_address = crosstalk::config::Rate::new(1_000_000, 1_000_000)
    })
    .await;
    let alice = app.add_person("alice").await;
    let channels = ["tables1", "tables2", "tables3", "tables4"];
    for (c, channel) in channels.iter().enumerate() {
        for k in 0..3 {
            let body = padded_tables(c * 3 + k);
            assert!(body.len() > 60_000 && body.len() <= 65_536);
            let (status, answer) = crate::support::post(
                &app,
                &format!("/api/channels/{channel}/messages"),
                &alice,
                json!({ "body": body }),
            )
            .await;
            assert_eq!(status, 201, "{answer}");
        }
    }
    let url = app.url();
    let loads: Vec<_> = channels
        .iter()
        .map(|channel| {
            let request = crate::support::visit(&app, &format!("/channels/{channel}"), &alice);
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            })
        })
        .collect();
    let client = http();
    let mut healthz = Vec::new();
    // Asked at least once as the loads start, and then until they end
    // (they may all end before the first answer on a fast machine).
    loop {
        let started = std::time::Instant::now();
        let status = client
            .get(format!("{url}/healthz"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
        healthz.push(started.elapsed());
        if loads.iter().all(|load| load.is_finished()) {
            break;
        }
    }
    for load in loads {
        let (status, html) = load.await.unwrap();
        assert_eq!(status, 200);
        // Three messages of at most 4 × 64 KB + 4 KB each, and the page.
        assert!(
            html.len() < 3 * (4 * 65_536 + 4096) + 64 * 1024,
            "{}",
            html.len()
        );
        assert_eq!(html.matches("<pre class=\"as-written\">").count(), 3);
    }
    healthz.sort();
    let (median, p90) = (healthz[healthz.len() / 2], healthz[healthz.len() * 9 / 10]);
    println!(
        "/healthz while the pages loaded: {} answers, median {median:?}, p90 {p90:?}, max {:?}",
        healthz.len(),
        healthz[healthz.len() - 1]
    );
    assert!(median < Duration::from_millis(10), "median {median:?}");
}

#[tokio::test]
async fn every_post_in_a_thread_made_its_reply_waits_read_the_thread_again() {
    let app = spawn_app_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        config.limits.per_credential = None;
    })
    .await;
    let metrics = app.running.metrics_addr.unwrap();
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (status, opened) = crate::support::post(
        &app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "the thread" }),
    )
    .await;
    assert_eq!(status, 201, "{opened}");
    let thread = opened["thread_id"].clone();
    // Four questions in it, each waiting for bob's reply.
    let waits: Vec<_> = (0..4)
        .map(|i| {
            let (app_url, alice) = (app.url(), alice.clone());
            let thread = thread.clone();
            tokio::spawn(async move {
                let response = http()
                    .post(format!("{app_url}/api/messages"))
                    .bearer_auth(&alice)
                    .json(&json!({
                        "to": "bob", "body": format!("question {i}"),
                        "thread_id": thread, "wait_for_reply_seconds": 30,
                    }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 201);
                response.json::<Value>().await.unwrap()
            })
        })
        .collect();
    parked(&app, 4).await;
    let looks = |scrape: &prometheus_parse::Scrape| {
        crate::metrics::value(scrape, "crosstalk_wait_looks_total", &[])
    };
    let before = looks(&crate::metrics::scrape(metrics).await.1);
    // The asker goes on posting in the thread: none of it is the reply.
    for n in 0..20 {
        let (status, _) = crate::support::post(
            &app,
            "/api/messages",
            &alice,
            json!({ "to": "bob", "body": format!("more {n}"), "thread_id": thread }),
        )
        .await;
        assert_eq!(status, 201);
    }
    let (status, reply) = crate::support::post(
        &app,
        "/api/messages",
        &bob,
        json!({ "to": "alice", "body": "the answer", "thread_id": thread }),
    )
    .await;
    assert_eq!(status, 201, "{reply}");
    for wait in waits {
        let asked = wait.await.unwrap();
        assert_eq!(asked["reply"]["id"], reply["message_id"], "{asked}");
    }
    // Each wait looked in the store once more, for the reply; before, once
    // for each of the 20 posts too.
    let after = looks(&crate::metrics::scrape(metrics).await.1);
    assert_eq!(after - before, 4.0);
}

/// The most a process's resident memory has been, in KiB (`VmHWM`).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_table_bomb_cost_hundreds_of_megabytes_to_parse_however_little_was_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let token = token_in(&stdout(&crosstalk(&db, &["add", "alice"])));
    // Its own process, so its peak memory is the relay's alone.
    let mut child = crate::support::KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["serve", "--port", "0"])
            .env("RELAY_DB", &db)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let url = LogWatch::new(&mut child.0).serving_url();
    let pid = child.0.id();
    // Wide headers over one-cell rows, as much as a body holds: parsed as
    // it was, each made pulldown-cmark build millions of padded cells.
    let table = "|h".repeat(2000) + "|\n" + &"|-".repeat(2000) + "|\n" + &"|x|\n".repeat(200);
    for n in 0..4 {
        // Lines may end at a lone carriage return too (as CommonMark has it).
        let table = match n % 2 {
            0 => table.clone(),
            _ => table.replace('\n', "\r"),
        };
        let body = format!("bomb {n}\n\n{}", &table.repeat(8)[..60_000]);
        let posted = http()
            .post(format!("{url}/api/channels/bombs/messages"))
            .bearer_auth(&token)
            .json(&json!({ "body": body }))
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 201);
    }
    let before = peak_kib(pid);
    let page = http()
        .get(format!("{url}/channels/bombs"))
        .basic_auth("alice", Some(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert_eq!(html.matches("<pre class=\"as-written\">bomb ").count(), 4);
    let grew = peak_kib(pid).saturating_sub(before);
    // Four bodies of 60 KB: the page is a few hundred KB, and so, within
    // a small multiple, is what rendering it may take.
    assert!(
        grew < 32 * 1024,
        "rendering took {grew} KiB more at its peak"
    );
}
