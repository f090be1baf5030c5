//! What an MCP client is told when something is wrong: every error on
//! `/mcp`, rmcp's own included, in the relay's JSON shape with a status the
//! SDKs understand; and a client's mistake is no warning in the log.

use crate::support::{
    LogWatch, Mcp, RawSession, crosstalk, initialize, mcp_post, spawn_app, stdout, token_in,
};
use serde_json::{Value, json};

#[tokio::test]
async fn every_error_on_mcp_speaks_the_relays_json() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let session = RawSession::open(&app.url(), &alice).await;
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "malformed JSON",
            mcp_post(&app.url(), &alice, json!(null))
                .header("mcp-session-id", &session.id)
                .body("{\"jsonrpc\":"),
            400,
            "bad_request",
        ),
        (
            "a wrong media type",
            crate::support::http()
                .post(format!("{}/mcp", app.url()))
                .bearer_auth(&alice)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "text/plain")
                .body(initialize().to_string()),
            415,
            "unsupported_media_type",
        ),
        (
            "an unknown session",
            mcp_post(
                &app.url(),
                &alice,
                json!({ "jsonrpc": "2.0", "id": 5, "method": "ping" }),
            )
            .header("mcp-session-id", "no-such-session")
            .header("mcp-protocol-version", "2025-06-18"),
            404,
            "not_found",
        ),
    ];
    for (case, request, status, code) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{case}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{case}"
        );
        let said: Value = response.json().await.unwrap();
        assert_eq!(said["error"]["code"], code, "{case}: {said}");
        assert!(
            !said["error"]["message"].as_str().unwrap().is_empty(),
            "{case}"
        );
    }
}

#[tokio::test]
async fn an_unknown_tool_is_the_clients_mistake_not_a_warning() {
    crosstalk::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let token = token_in(&stdout(&crosstalk(&db, &["add", "alice"])));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0"])
        .env("RELAY_DB", &db)
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = LogWatch::new(&mut child);
    let url = log.serving_url();
    // Whatever happens, the relay is stopped before anything is asserted.
    let talked = async {
        let agent = Mcp::connect(&url, &token).await.unwrap();
        let unknown = agent.call("no_such_tool", json!({})).await.into_result();
        // A call after it: its reply means the unknown one was logged, if at all.
        let peers = agent.call("list_peers", json!({})).await.into_result();
        (unknown, peers)
    }
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let (unknown, peers) = talked;
    assert!(unknown.is_err(), "{unknown:?}");
    assert!(peers.is_ok(), "{peers:?}");
    let log = log.whole();
    assert!(!log.contains("WARN"), "a warning was logged:\n{log}");
    assert!(!log.contains("tool not found"), "{log}");
}
