//! The relay as an attacker and a careless operator would try it: each test
//! pins one point of the hardening (revocation, exposure, connections,
//! sessions, quotas, cross-site requests, careless configurations).

use crate::support::{
    Mcp, Outcome, RawSession, SseReader, crosstalk, get, http, rpc_messages, spawn_app,
    spawn_app_with, stdout,
};
use crosstalk::config::{Config, Rate};
use crosstalk::host::{Cidr, Origin};
use serde_json::{Value, json};
use std::time::Duration;

/// How long revocation may take to end what a token holds.
const REVOKED_WITHIN: Duration = Duration::from_secs(2);

/// Waits until `n` waits are parked in the core, so a test acts on waits
/// that are really waiting.
async fn parked(app: &crate::support::TestApp, n: u64) {
    let mut parked = app.running.state.relay.parked_waits();
    tokio::time::timeout(
        Duration::from_secs(10),
        parked.wait_for(|count| *count >= n),
    )
    .await
    .expect("the waits park")
    .expect("the relay runs");
}

/// What `future` gives, which must come within [`REVOKED_WITHIN`].
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
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
    let raw = RawSession::open(&url, &alice).await;
    let listening = raw.listen().send().await.unwrap();
    assert_eq!(listening.status(), 200, "the standalone stream opens");
    let mut listening = SseReader::new(listening);
    let in_flight = raw
        .call(
            9,
            "wait_for_message",
            json!({ "channel": "ops", "since_id": 0, "timeout_s": 50 }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(in_flight.status(), 200);
    let mcp_wait = tokio::spawn(rpc_messages(in_flight));
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
    assert_eq!(app.running.state.sessions.open(), 0);
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
    let new_token = crate::support::token_in(&rotated);
    let seen = within("the old token's stream", stream.until_closed()).await;
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(get(&app, "/api/people", &new_token).await.0, 200);
}
