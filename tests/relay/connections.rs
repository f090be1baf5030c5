//! Bounded connections and sessions, tried with a kept HTTP/2 client (h2c,
//! prior knowledge) and raw MCP sessions.

use crate::support::{RawSession, TestApp, http, spawn_app, spawn_app_with, stateless_call};
use crosstalk::config::Rate;
use serde_json::{Value, json};
use std::{net::SocketAddr, time::Duration};
use tokio::io::AsyncReadExt;

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
        self.send(request).await
    }

    /// A GET with a Bearer token.
    async fn get_as(&mut self, app: &TestApp, path: &str, token: &str) -> (u16, Value) {
        let request = http::Request::get(format!("{}{path}", app.url()))
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .unwrap();
        self.send(request).await
    }

    async fn send(&mut self, request: http::Request<()>) -> (u16, Value) {
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
        config.connections.unauthenticated = 4;
        config.connections.unauthenticated_per_address = 2;
        // Only making room may close a connection within the test's waits.
        config.connections.idle = Duration::from_secs(600);
    })
    .await;
    let alice = app.add_person("alice").await;
    // Connections a credential vouched for: nothing makes room from them.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut connection = H2::connect(&app, [127, 0, 0, 1]).await;
        assert_eq!(
            connection.get_as(&app, "/api/channels", &alice).await.0,
            200
        );
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
    for local in [[127, 0, 0, 2], [127, 0, 0, 3]] {
        let mut elsewhere = H2::connect(&app, local).await;
        assert_eq!(elsewhere.get_as(&app, "/api/channels", &alice).await.0, 200);
        held.push(elsewhere);
    }
    // ...until the relay as a whole is full.
    let mut over = H2::connect(&app, [127, 0, 0, 4]).await;
    let (status, body) = over.get(&app, "/healthz").await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "overloaded");
}

/// Opens `count` TCP connections from `local` that send nothing.
async fn idle_sockets(app: &TestApp, local: [u8; 4], count: usize) -> Vec<tokio::net::TcpStream> {
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((local, 0))).unwrap();
        sockets.push(socket.connect(app.running.addr).await.unwrap());
    }
    sockets
}

/// The attack of a few addresses, with the default caps (4,096
/// connections, 512 per address): eight addresses open all the
/// connections they may and send nothing. Each keeps only its share of the
/// budget for connections nobody has vouched for, and a teammate's request
/// is answered.
#[tokio::test]
async fn idle_connections_from_eight_addresses_leave_a_valid_token_answered() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let limits = app.running.state.config.connections;
    assert_eq!(
        (limits.max, limits.per_address),
        (4096, 512),
        "the defaults"
    );
    let share = limits.unauthenticated_per_address;
    let mut idle = Vec::new();
    for last in 2..10 {
        let mut sockets = idle_sockets(&app, [127, 0, 0, last], limits.per_address).await;
        // Each past the address's share closed its oldest: the relay has
        // counted them all once the last of those closed is.
        let mut byte = [0; 1];
        let last_closed = &mut sockets[limits.per_address - share - 1];
        let read = tokio::time::timeout(Duration::from_secs(10), last_closed.read(&mut byte))
            .await
            .expect("the relay closes what is past the address's share");
        assert_eq!(read.unwrap(), 0);
        idle.push(sockets);
    }
    let mut teammate = H2::connect(&app, [127, 0, 0, 1]).await;
    let (status, body) = teammate.get_as(&app, "/api/channels", &alice).await;
    assert_eq!(status, 200, "{body}");
}

/// Past the budget for connections nobody has vouched for, from however
/// many addresses, the oldest idle one is closed to make room, and a
/// connection a credential vouched for is never the one closed.
#[tokio::test]
async fn a_full_budget_of_strangers_makes_room_by_closing_the_oldest_idle_one() {
    let app = spawn_app_with(|config| {
        config.connections.unauthenticated = 4;
        config.connections.unauthenticated_per_address = 2;
        // Only making room may close a connection within the test's waits.
        config.connections.idle = Duration::from_secs(600);
    })
    .await;
    let alice = app.add_person("alice").await;
    let mut strangers = Vec::new();
    for last in [2, 2, 3, 3] {
        strangers.push(H2::connect(&app, [127, 0, 0, last]).await);
    }
    let mut teammate = H2::connect(&app, [127, 0, 0, 1]).await;
    assert_eq!(teammate.get_as(&app, "/api/channels", &alice).await.0, 200);
    let oldest = strangers.remove(0);
    // Sooner than a connection that never sent a request is closed anyway
    // (10 s), so only making room can pass this wait.
    tokio::time::timeout(Duration::from_secs(5), oldest.closed)
        .await
        .expect("the oldest idle stranger is closed to make room")
        .unwrap();
    // More strangers come; the teammate's connection stays.
    for last in [4, 4, 5, 5, 6, 6] {
        strangers.push(H2::connect(&app, [127, 0, 0, last]).await);
        assert_eq!(
            strangers.last_mut().unwrap().get(&app, "/healthz").await.0,
            200
        );
    }
    assert_eq!(teammate.get_as(&app, "/api/channels", &alice).await.0, 200);
}

/// A client that holds many connections is the one that makes room: a
/// teammate's new connection, not yet signed in, outlives a stranger's
/// however old it is.
#[tokio::test]
async fn room_is_made_from_the_client_holding_the_most() {
    let app = spawn_app_with(|config| {
        config.connections.unauthenticated = 4;
        config.connections.unauthenticated_per_address = 3;
        // Only making room may close a connection within the test's waits.
        config.connections.idle = Duration::from_secs(600);
    })
    .await;
    let alice = app.add_person("alice").await;
    // The oldest of all: a teammate's, not signed in yet.
    let mut teammate = H2::connect(&app, [127, 0, 0, 1]).await;
    let mut stranger = Vec::new();
    for _ in 0..3 {
        stranger.push(H2::connect(&app, [127, 0, 0, 2]).await);
    }
    // Full: the next stranger's connection closes one of the first's.
    let mut another = H2::connect(&app, [127, 0, 0, 3]).await;
    assert_eq!(another.get(&app, "/healthz").await.0, 200);
    tokio::time::timeout(Duration::from_secs(5), stranger.remove(0).closed)
        .await
        .expect("the oldest connection of the client holding the most is closed")
        .unwrap();
    assert_eq!(teammate.get_as(&app, "/api/channels", &alice).await.0, 200);
}

/// A stranger who keeps a response unread (an HTTP/2 window of zero) has
/// a request in flight forever; past a short grace that does not keep its
/// connection from being closed to make room.
#[tokio::test]
async fn a_response_held_unread_does_not_make_a_strangers_connection_unclosable() {
    let app = spawn_app_with(|config| {
        config.connections.unauthenticated = 2;
        config.connections.unauthenticated_per_address = 2;
        // Only making room may close a connection within the test's waits.
        config.connections.idle = Duration::from_secs(600);
    })
    .await;
    let alice = app.add_person("alice").await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).unwrap();
        let tcp = socket.connect(app.running.addr).await.unwrap();
        let (client, connection) = h2::client::Builder::new()
            .initial_window_size(0)
            .handshake::<_, bytes::Bytes>(tcp)
            .await
            .unwrap();
        let closed = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut client = client.ready().await.unwrap();
        let request = http::Request::get(format!("{}/healthz", app.url()))
            .body(())
            .unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        // The headers come; the body waits for a window that never opens.
        assert_eq!(response.await.unwrap().status(), 200);
        held.push((client, closed));
    }
    // Refused while the requests are young, admitted once they are not.
    let admitted = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut teammate = H2::connect(&app, [127, 0, 0, 1]).await;
            match teammate.get_as(&app, "/api/channels", &alice).await.0 {
                200 => return teammate,
                status => assert_eq!(status, 503),
            }
            // The grace is a time: ask again a little later.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a teammate is admitted within the grace");
    drop(admitted);
    let (_, closed) = held.remove(0);
    tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .expect("the stranger's connection is closed")
        .unwrap();
}

/// `/readyz`: ready once the store answers (here, SQLite's at once); no
/// credentials, and the address's quota, as `/healthz`.
#[tokio::test]
async fn readyz_says_ready_when_the_store_answers() {
    let app = spawn_app_with(|config| config.limits.per_address = Rate::new(1, 2)).await;
    let readyz = format!("{}/readyz", app.url());
    for _ in 0..2 {
        let answer = http().get(&readyz).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(
            answer.json::<serde_json::Value>().await.unwrap(),
            json!({"status": "ready"})
        );
    }
    assert_eq!(http().get(&readyz).send().await.unwrap().status(), 429);
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
    assert_eq!(app.running.mcp.open_sessions(), 2);
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

/// The Python SDK (2.3) sends `Content-Type: application/json` with no body
/// on a session's GET (its stream, where pushes come) and on its DELETE:
/// no body is not malformed JSON. Both were refused with 400, so that
/// SDK's sessions had no stream and were never ended.
#[tokio::test]
async fn a_session_s_stream_and_its_end_say_json_with_no_body() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let session = RawSession::open(&format!("{}/mcp", app.url()), &alice).await;
    let stream = session
        .listen()
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(stream);
    let ended = http()
        .delete(format!("{}/mcp", app.url()))
        .bearer_auth(&alice)
        .header("content-type", "application/json")
        .header("mcp-session-id", &session.id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    // Malformed JSON is still refused in the relay's words.
    let malformed = http()
        .post(format!("{}/mcp", app.url()))
        .bearer_auth(&alice)
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
}

/// Bob's session, and a call on it waiting up to 50 s for his inbox,
/// parked. (Its answer is one JSON body: nothing comes until it ends.)
async fn a_wait_on_a_session(
    app: &TestApp,
    bob: &str,
) -> (RawSession, tokio::task::JoinHandle<reqwest::Response>) {
    let session = RawSession::open(&app.url(), bob).await;
    let before = *app.running.state.relay.parked_waits().borrow();
    let call = session.call(7, "check_inbox", json!({ "timeout_seconds": 50 }));
    let waiting = tokio::spawn(async move { call.send().await.unwrap() });
    crate::hardening::parked(app, before + 1).await;
    (session, waiting)
}

/// The waiting call ends at once with `status` and no result, and a
/// message sent to bob afterwards waits for him: the call took nothing.
async fn ends_taking_nothing(
    app: &TestApp,
    waiting: tokio::task::JoinHandle<reqwest::Response>,
    status: u16,
    alice: &str,
    bob: &str,
) -> String {
    let said = tokio::time::timeout(Duration::from_secs(10), async {
        let answered = waiting.await.unwrap();
        assert_eq!(answered.status(), status);
        answered.text().await.unwrap()
    })
    .await
    .expect("the call ends at once, not after its wait");
    assert!(!said.contains("\"result\""), "{said}");
    let message = json!({ "to": "bob", "body": "still there?" });
    let (status, _) = crate::support::post(app, "/api/messages", alice, message).await;
    assert_eq!(status, 201);
    let (_, inbox) = crate::support::get(app, "/api/inbox", bob).await;
    assert_eq!(inbox["messages"][0]["body"], "still there?", "{inbox}");
    said
}

/// A client that cancels a waiting call (`notifications/cancelled`) but
/// keeps reading its stream sees the call end at once; a message that
/// arrives afterwards waits for the next check instead of going to a call
/// nobody reads.
#[tokio::test]
async fn a_waiting_call_its_client_cancels_ends_and_takes_nothing() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (session, waiting) = a_wait_on_a_session(&app, &bob).await;
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 7, "reason": "the person pressed Esc" },
    });
    let cancelled = session.post(cancel).send().await.unwrap();
    assert_eq!(cancelled.status(), 202);
    let said = ends_taking_nothing(&app, waiting, 200, &alice, &bob).await;
    assert_eq!(said, "", "a cancelled call is answered with no event");
}

/// A cancel that reaches the relay before the call it names (a client
/// sends them on two connections, and either may be read first) still
/// ends that call: it starts cancelled, and takes nothing.
#[tokio::test]
async fn a_call_whose_cancel_came_first_ends_and_takes_nothing() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let session = RawSession::open(&app.url(), &bob).await;
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 7, "reason": "the person pressed Esc" },
    });
    let cancelled = session.post(cancel).send().await.unwrap();
    assert_eq!(cancelled.status(), 202);
    let call = session.call(7, "check_inbox", json!({ "timeout_seconds": 50 }));
    let waiting = tokio::spawn(async move { call.send().await.unwrap() });
    let said = ends_taking_nothing(&app, waiting, 200, &alice, &bob).await;
    assert_eq!(said, "", "a cancelled call is answered with no event");
    // Kept for the one call: the next by another id runs as usual.
    let message = json!({ "to": "bob", "body": "and now?" });
    let (status, _) = crate::support::post(&app, "/api/messages", &alice, message).await;
    assert_eq!(status, 201);
    let answered = session
        .call(8, "check_inbox", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let said: Value = answered.json().await.unwrap();
    let messages = &said["result"]["structuredContent"]["messages"];
    assert_eq!(messages[0]["body"], "and now?", "{said}");
}

/// A call's answer is one JSON body, not an event stream: written at once,
/// read whole.
#[tokio::test]
async fn a_call_is_answered_in_one_json_body() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let session = RawSession::open(&app.url(), &alice).await;
    let posted = json!({ "channel": "general", "body": "hello" });
    let answered = session
        .call(3, "post_message", posted)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.headers()["content-type"], "application/json");
    assert!(answered.headers().contains_key("content-length"));
    let said: Value = answered.json().await.unwrap();
    assert_eq!(said["id"], 3, "{said}");
    let id = &said["result"]["structuredContent"]["id"];
    let (_, stored) = crate::support::get(&app, "/api/channels/general/messages", &alice).await;
    assert_eq!(stored["messages"][0]["id"], *id, "{said} {stored}");
    assert_eq!(stored["messages"][0]["body"], "hello", "{stored}");
}

/// Calls waiting as the relay stops are answered, on a session or not:
/// the waits end, and their answers go out as the server drains (rmcp's
/// own shutdown turned a JSON answer it still waited for into a 500).
#[tokio::test]
async fn calls_waiting_as_the_relay_stops_are_answered_not_failed() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let (_session, on_session) = a_wait_on_a_session(&app, &bob).await;
    let before = *app.running.state.relay.parked_waits().borrow();
    let stateless: Vec<_> = (0..8)
        .map(|id| {
            let wait = json!({ "timeout_seconds": 50 });
            let call = stateless_call(&app.url(), &bob, id, "check_inbox", wait);
            tokio::spawn(async move { call.send().await.unwrap() })
        })
        .collect();
    crate::hardening::parked(&app, before + 8).await;
    app.running.stop().await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        let mut statuses = vec![on_session.await.unwrap().status()];
        for call in stateless {
            statuses.push(call.await.unwrap().status());
        }
        statuses
    })
    .await
    .expect("the calls are answered as the relay stops");
    assert!(answered.iter().all(|status| *status == 200), "{answered:?}");
}

/// An `initialize` is kept with its session for as long as the session
/// lasts, so one of more than 64 KiB is refused, and opens nothing.
#[tokio::test]
async fn an_initialize_past_64_kib_is_refused_and_opens_no_session() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let mut initialize = crate::support::initialize();
    initialize["params"]["clientInfo"]["name"] = json!("n".repeat(64 * 1024));
    let refused = crate::support::mcp_post(&app.url(), &bob, initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 413);
    assert!(refused.headers().get("mcp-session-id").is_none());
    let said: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(said["error"]["code"], "too_large", "{said}");
    assert_eq!(app.count("SELECT count(*) FROM mcp_sessions"), 0);
    // One of a usual size opens one.
    crate::support::RawSession::open(&app.url(), &bob).await;
    assert_eq!(app.count("SELECT count(*) FROM mcp_sessions"), 1);
}

/// A session's end (`DELETE`) ends the calls still running on it: each is
/// answered with the 404 of a request on an ended session, which tells
/// its client to start a new one.
#[tokio::test]
async fn a_waiting_call_ends_with_its_session() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (session, waiting) = a_wait_on_a_session(&app, &bob).await;
    let ended = http()
        .delete(format!("{}/mcp", app.url()))
        .bearer_auth(&bob)
        .header("mcp-session-id", &session.id)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    let said = ends_taking_nothing(&app, waiting, 404, &alice, &bob).await;
    let said: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(said["error"]["code"], "not_found", "{said}");
}
