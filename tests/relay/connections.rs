//! Bounded connections and sessions, tried with a kept HTTP/2 client (h2c,
//! prior knowledge) and raw MCP sessions.

use crate::support::{RawSession, TestApp, http, spawn_app_with};
use crosstalk::config::Rate;
use serde_json::{Value, json};
use std::{net::SocketAddr, time::Duration};

/// An HTTP/2 connection from `local` (a loopback address) to the relay.
struct H2 {
    client: h2::client::SendRequest<bytes::Bytes>,
    /// Ends when the connection does.
    closed: tokio::task::JoinHandle<()>,
}

impl H2 {
    async fn connect(app: &TestApp, local: [u8; 4]) -> H2 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::from((local, 0)))
            .expect("a loopback address");
        let tcp = socket.connect(app.running.addr).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.expect("h2c handshake");
        let closed = tokio::spawn(async move {
            let _ = connection.await;
        });
        H2 { client, closed }
    }

    /// A GET on the connection: the status and the JSON body.
    async fn get(&mut self, app: &TestApp, path: &str) -> (u16, Value) {
        let request = http::Request::get(format!("{}{path}", app.url()))
            .body(())
            .unwrap();
        let client = self
            .client
            .clone()
            .ready()
            .await
            .expect("the connection takes a request");
        self.client = client;
        let (response, _) = self.client.send_request(request, true).unwrap();
        let response = response.await.expect("an answer");
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            body.flow_control().release_capacity(chunk.len()).unwrap();
            bytes.extend_from_slice(&chunk);
        }
        (status, serde_json::from_slice(&bytes).expect("a JSON body"))
    }
}

#[tokio::test]
async fn idle_http2_connections_are_closed_and_busy_ones_kept() {
    let app = spawn_app_with(|config| config.connections.idle = Duration::from_secs(1)).await;
    let alice = app.add_person("alice").await;
    let mut idle = H2::connect(&app, [127, 0, 0, 1]).await;
    assert_eq!(idle.get(&app, "/healthz").await.0, 200);
    tokio::time::timeout(Duration::from_secs(10), idle.closed)
        .await
        .expect("the relay closes a connection with nothing in flight")
        .unwrap();

    // A long-poll longer than the idle timeout keeps its connection.
    let mut busy = H2::connect(&app, [127, 0, 0, 1]).await;
    let request = http::Request::get(format!(
        "{}/api/channels/ops/wait?since_id=0&timeout_s=2",
        app.url()
    ))
    .header("authorization", format!("Bearer {alice}"))
    .body(())
    .unwrap();
    let (response, _) = busy.client.send_request(request, true).unwrap();
    assert_eq!(response.await.expect("the wait is answered").status(), 200);
}

#[tokio::test]
async fn connections_are_capped_per_address_and_in_total_with_a_clear_refusal() {
    let app = spawn_app_with(|config| {
        config.connections.per_address = 2;
        config.connections.max = 4;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut connection = H2::connect(&app, [127, 0, 0, 1]).await;
        assert_eq!(connection.get(&app, "/healthz").await.0, 200);
        held.push(connection);
    }
    let mut third = H2::connect(&app, [127, 0, 0, 1]).await;
    let (status, body) = third.get(&app, "/healthz").await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], "rate_limited");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("this address has 2 connections open, the most one client may"),
        "{body}"
    );
    // Another address is not refused for this one's connections...
    let mut elsewhere = H2::connect(&app, [127, 0, 0, 2]).await;
    assert_eq!(elsewhere.get(&app, "/healthz").await.0, 200);
    held.push(elsewhere);
    let mut fourth = H2::connect(&app, [127, 0, 0, 3]).await;
    assert_eq!(fourth.get(&app, "/healthz").await.0, 200);
    held.push(fourth);
    // ...until the relay as a whole is full.
    let mut over = H2::connect(&app, [127, 0, 0, 4]).await;
    let (status, body) = over.get(&app, "/healthz").await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "overloaded");
}

#[tokio::test]
async fn healthz_counts_against_the_address_quota() {
    let app = spawn_app_with(|config| config.limits.per_address = Rate::new(1, 3)).await;
    let healthz = format!("{}/healthz", app.url());
    for _ in 0..3 {
        assert_eq!(http().get(&healthz).send().await.unwrap().status(), 200);
    }
    let limited = http().get(&healthz).send().await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn a_person_past_the_session_cap_loses_their_least_recently_used_session() {
    let app = spawn_app_with(|config| config.sessions.max_per_person = 2).await;
    let alice = app.add_person("alice").await;
    let url = app.url();
    let oldest = RawSession::open(&url, &alice).await;
    let middle = RawSession::open(&url, &alice).await;
    // Using the oldest makes the middle one the least recently used.
    assert_eq!(
        oldest
            .call(2, "list_peers", json!({}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let newest = RawSession::open(&url, &alice).await;
    let ended = middle
        .call(2, "list_peers", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 404);
    let body: Value = ended.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found", "{body}");
    for kept in [&oldest, &newest] {
        assert_eq!(
            kept.call(3, "list_peers", json!({}))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert_eq!(app.running.state.sessions.open(), 2);
}

#[tokio::test]
async fn standalone_mcp_streams_count_against_the_persons_waits() {
    let app = spawn_app_with(|config| config.settings.max_waits_per_person = 2).await;
    let alice = app.add_person("alice").await;
    let url = app.url();
    let mut streams = Vec::new();
    for _ in 0..2 {
        let session = RawSession::open(&url, &alice).await;
        let stream = session.listen().send().await.unwrap();
        assert_eq!(stream.status(), 200);
        streams.push((session, stream));
    }
    let third = RawSession::open(&url, &alice).await;
    let refused = third.listen().send().await.unwrap();
    assert_eq!(refused.status(), 429);
    let wait = http()
        .get(format!(
            "{url}/api/channels/ops/wait?since_id=0&timeout_s=5"
        ))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(wait.status(), 429, "the streams hold both of alice's slots");
    drop(streams);
}
