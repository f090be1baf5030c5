//! The CLI binary, run for real, on the database of a running relay.

use crate::support::{LogWatch, Mcp, crosstalk, initialize, mcp_post, spawn_app, stdout, token_in};
use serde_json::json;
use std::process::Command;

#[tokio::test]
async fn add_prints_the_token_once_with_ready_to_paste_connections() {
    let app = spawn_app().await;
    let output = crosstalk(
        &app.db,
        &[
            "add",
            "dana",
            "Dana Scully",
            "--public-url",
            "https://relay.example.com/",
        ],
    );
    let printed = stdout(&output);
    let token = token_in(&printed);
    assert!(
        printed.starts_with("Added dana (Dana Scully)."),
        "{printed}"
    );
    assert!(printed.contains(&format!(
        "claude mcp add --transport http crosstalk https://relay.example.com/mcp --header \"Authorization: Bearer {token}\""
    )));
    // The connectors that sign in with OAuth, at the same URL.
    assert!(printed.contains(
        "claude.ai: Settings → Connectors → Add custom connector, URL https://relay.example.com/mcp"
    ));
    assert!(printed.contains(
        "ChatGPT: in developer mode, create a connector with URL https://relay.example.com/mcp and OAuth"
    ));
    // One command that sets Claude Code up, no flag needed.
    assert!(
        printed.contains(&format!(
            "crosstalk connect claude --url https://relay.example.com --token {token}"
        )),
        "{printed}"
    );
    // What the other paths need is one page away, not here.
    assert!(printed.contains("docs/agents.md"), "{printed}");
    assert!(
        !printed.contains("--dangerously-load-development-channels"),
        "{printed}"
    );
    assert!(printed.lines().count() < 30, "{printed}");
    // An address was named: no warning.
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("warning"),
        "{output:?}"
    );
    // The token is stored only as its hash.
    let stored: Vec<u8> = app.sql(
        "SELECT token_hash FROM people WHERE handle = 'dana'",
        |c, q| c.query_row(q, [], |r| r.get(0)).unwrap(),
    );
    assert_eq!(stored.len(), 32);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM people WHERE instr(token_hash, '{token}') > 0"
        )),
        0
    );

    // The running server accepts the new token on the next request.
    let dana = Mcp::connect(&app.url(), &token)
        .await
        .expect("the new token works at once");
    let peers = dana.call("list_peers", json!({})).await.ok();
    assert_eq!(peers["peers"][0]["name"], "Dana Scully");

    let people = stdout(&crosstalk(&app.db, &["people"]));
    assert!(
        people.lines().nth(1).unwrap().starts_with("dana "),
        "{people}"
    );
}

#[tokio::test]
async fn add_and_rotate_warn_when_they_print_only_the_default_address() {
    let app = spawn_app().await;
    for args in [&["add", "erin"][..], &["rotate", "erin"][..]] {
        let output = crosstalk(&app.db, args);
        let warned = String::from_utf8_lossy(&output.stderr);
        assert!(
            warned.contains(
                "warning: nothing names this relay's address (RELAY_PUBLIC_URL, RELAY_DOMAINS, \
                 RELAY_PORT), so the lines below use the default, http://127.0.0.1:8787."
            ),
            "{warned}"
        );
        assert!(stdout(&output).contains("http://127.0.0.1:8787/mcp"));
    }
}

#[tokio::test]
async fn revoke_and_rotate_from_the_cli_take_effect_at_once() {
    let app = spawn_app().await;
    let alice = stdout(&crosstalk(&app.db, &["add", "alice"]));
    let alice = token_in(&alice);
    let bob = token_in(&stdout(&crosstalk(&app.db, &["add", "bob"])));
    let alice_session = Mcp::connect(&app.url(), &alice).await.unwrap();
    alice_session.call("list_peers", json!({})).await.ok();

    let revoked = stdout(&crosstalk(&app.db, &["revoke", "alice"]));
    assert_eq!(revoked, "Revoked alice: their token no longer works.\n");
    // The very next request on her open session is refused.
    match alice_session.call("list_peers", json!({})).await {
        crate::support::Outcome::Protocol(message) => {
            assert!(message.contains("Auth required"), "{message}")
        }
        other => panic!("a revoked token was accepted: {other:?}"),
    }
    let status = mcp_post(&app.url(), &alice, initialize())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    let people = stdout(&crosstalk(&app.db, &["people"]));
    let alice_row = people.lines().find(|l| l.starts_with("alice ")).unwrap();
    assert!(
        !alice_row.ends_with(" -"),
        "alice shows as revoked: {alice_row}"
    );

    let rotated = stdout(&crosstalk(&app.db, &["rotate", "bob"]));
    let new_bob = token_in(&rotated);
    assert_ne!(new_bob, bob);
    assert_eq!(
        mcp_post(&app.url(), &bob, initialize())
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let bob_session = Mcp::connect(&app.url(), &new_bob)
        .await
        .expect("the new token works");
    bob_session.call("list_peers", json!({})).await.ok();
}

#[test]
fn the_cli_refuses_bad_input_with_a_reason_and_a_failing_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let bad_handle = crosstalk(&db, &["add", "Not OK"]);
    assert!(!bad_handle.status.success());
    assert!(
        String::from_utf8_lossy(&bad_handle.stderr)
            .contains("a handle starts with a lowercase letter")
    );

    stdout(&crosstalk(&db, &["add", "erin"]));
    let twice = crosstalk(&db, &["add", "erin"]);
    assert!(!twice.status.success());
    assert!(String::from_utf8_lossy(&twice.stderr).contains("erin is already taken"));

    let unknown = crosstalk(&db, &["revoke", "nobody"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("there is no active person nobody"));

    let zero_retention = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0"])
        .env("RELAY_DB", &db)
        .env("RELAY_RETENTION_DAYS", "0")
        .output()
        .unwrap();
    assert!(!zero_retention.status.success());
    assert!(String::from_utf8_lossy(&zero_retention.stderr).contains("RELAY_RETENTION_DAYS is 0"));
}

#[test]
fn serve_refuses_a_public_address_with_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--host", "0.0.0.0", "--port", "0"])
        .env("RELAY_DB", dir.path().join("relay.db"))
        .env_remove("RELAY_TOKEN")
        .env_remove("RELAY_PARTICIPANTS")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to serve on 0.0.0.0:0 with no credentials"),
        "{stderr}"
    );
}

/// `crosstalk serve` on a free port over a database in `dir` with alice
/// added, logging at `level`: her token, the process, its log and its
/// address.
fn serve_logging(
    dir: &std::path::Path,
    level: &str,
) -> (String, std::process::Child, LogWatch, String) {
    let db = dir.join("relay.db");
    let token = token_in(&stdout(&crosstalk(&db, &["add", "alice"])));
    let mut child = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0"])
        .env("RELAY_DB", &db)
        .env("RUST_LOG", level)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = LogWatch::new(&mut child);
    let url = log.serving_url();
    (token, child, log, url)
}

/// What the relay answers as designed is not logged as a failure: the
/// `server/discover` a client that asks for pushes is refused (MCP's
/// "method not found", a 404) is at debug; a refused token at info.
#[tokio::test]
async fn a_probe_refused_by_design_is_not_logged_as_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (token, mut child, log, url) = serve_logging(dir.path(), "info");
    let client = crate::support::http();
    let discover = json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {} } } });
    let refused = client
        .post(format!("{url}/mcp?push=1"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .json(&discover)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32601, "{body}");
    let unknown = client
        .get(format!("{url}/api/people"))
        .bearer_auth("xtalk_unknown")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 401);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = log.whole();
    assert!(log.contains("status=401"), "{log}");
    assert!(!log.contains("status=404"), "{log}");
}

#[tokio::test]
async fn logs_never_contain_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let (token, mut child, log, url) = serve_logging(dir.path(), "trace");
    let client = crate::support::http();
    let basic = format!("x:{token}");
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(basic);
    let requests = [
        client.get(format!("{url}/api/people")).bearer_auth(&token),
        client
            .get(format!("{url}/api/people"))
            .header("authorization", format!("Basic {basic}")),
        client.get(format!(
            "{url}/api/channels/ops/wait?timeout_s=0&token={token}"
        )),
        client
            .post(format!("{url}/api/messages"))
            .bearer_auth(&token)
            .json(&json!({ "to": "alice", "body": format!("leak {token}") })),
        client
            .get(format!("{url}/api/people"))
            .bearer_auth(format!("{token}x")),
    ];
    for request in requests {
        request.send().await.unwrap();
    }
    let mut stream = client
        .get(format!("{url}/api/channels/ops/stream?token={token}"))
        .send()
        .await
        .unwrap();
    stream.chunk().await.unwrap();
    drop(stream);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = log.whole();
    assert!(log.contains("request"), "requests were logged:\n{log}");
    assert!(
        !log.contains(&token[6..]),
        "a token reached the log:\n{log}"
    );
    assert!(!log.contains(&basic), "Basic credentials reached the log");
}

#[test]
fn careless_tls_configurations_are_refused_with_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("x.pem");
    std::fs::write(&pem, "not a certificate").unwrap();
    let serve = |vars: &[(&str, &std::ffi::OsStr)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crosstalk"));
        command
            .args(["serve", "--port", "0"])
            .env("RELAY_DB", dir.path().join("relay.db"));
        for (name, value) in vars {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let domains = ("RELAY_DOMAINS", std::ffi::OsStr::new("relay.example.com"));
    assert!(
        serve(&[
            domains,
            ("RELAY_TLS_CERT", pem.as_os_str()),
            ("RELAY_TLS_KEY", pem.as_os_str())
        ])
        .contains(
            "RELAY_DOMAINS (ACME) and RELAY_TLS_CERT/RELAY_TLS_KEY (certificate files) are both set"
        )
    );
    let missing = dir.path().join("missing-ca.pem");
    assert!(serve(&[domains, ("RELAY_ACME_CA", missing.as_os_str())]).contains("RELAY_ACME_CA"));
    assert!(
        serve(&[
            domains,
            (
                "RELAY_ACME_DIRECTORY",
                std::ffi::OsStr::new("http://insecure.example")
            )
        ])
        .contains("RELAY_ACME_DIRECTORY is \"http://insecure.example\"")
    );
    assert!(
        serve(&[("RELAY_TLS_CERT", pem.as_os_str())])
            .contains("RELAY_TLS_CERT is set without RELAY_TLS_KEY")
    );
    assert!(
        serve(&[("RELAY_PARTICIPANTS", std::ffi::OsStr::new("ci:short"))])
            .contains("RELAY_PARTICIPANTS entry 1 (ci): the token is shorter than 16 characters")
    );
}

#[test]
fn add_prints_the_https_address_of_the_first_domain() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["add", "frank"])
        .env("RELAY_DB", dir.path().join("relay.db"))
        .env("RELAY_DOMAINS", "relay.example.com,crosstalk.example.com")
        .env_remove("RELAY_PUBLIC_URL")
        .env_remove("RELAY_PORT")
        .output()
        .unwrap();
    let printed = stdout(&output);
    assert!(
        printed.contains("crosstalk https://relay.example.com/mcp --header"),
        "{printed}"
    );
}

#[tokio::test]
async fn revoke_says_when_an_identity_from_the_environment_still_works() {
    let app = spawn_app().await;
    stdout(&crosstalk(&app.db, &["add", "bob"]));
    let output = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["revoke", "bob"])
        .env("RELAY_DB", &app.db)
        .env(
            "RELAY_PARTICIPANTS",
            "ci:ci-token-0123456789abcdefghijklmnopqrstuv,bob:bob-token-0123456789abcdefghijklmnopqrs",
        )
        .output()
        .unwrap();
    assert!(!output.status.success(), "it does not claim bob is cut off");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains(
            "Revoked bob's token, but bob also has an identity in RELAY_PARTICIPANTS, which \
             still works: remove it there and restart the relay."
        ),
        "{said}"
    );
    assert!(!said.contains("bob-token"), "never the token");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("no longer works"));
}
