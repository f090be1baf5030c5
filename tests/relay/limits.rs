//! Rate limits, caps on waits, and bounded inputs.

use crate::support::{get, http, spawn_app_with};
use crosstalk::config::Rate;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_flood_gets_429_with_retry_after_and_never_slows_another_person() {
    let app = spawn_app_with(|config| config.limits.per_credential = Rate::new(1, 3)).await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    for _ in 0..3 {
        assert_eq!(get(&app, "/api/people", &alice).await.0, 200);
    }
    let flooded = http()
        .get(format!("{}/api/people", app.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(flooded.status(), 429);
    let retry_after: u64 = flooded.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        retry_after >= 1,
        "Retry-After is at least one second: {retry_after}"
    );
    assert_eq!(
        flooded.json::<Value>().await.unwrap()["error"]["code"],
        "rate_limited"
    );
    // Bob's quota is his own.
    assert_eq!(get(&app, "/api/people", &bob).await.0, 200);
}

fn from_address(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(ip))
        .build()
        .unwrap()
}

#[tokio::test]
async fn failed_authentication_is_limited_per_address_and_never_refuses_a_valid_token() {
    let app = spawn_app_with(|config| config.limits.per_address = Rate::new(1, 3)).await;
    let alice = app.add_person("alice").await;
    let people = format!("{}/api/people", app.url());
    let here = from_address([127, 0, 0, 1]);
    for _ in 0..3 {
        assert_eq!(
            here.get(&people)
                .bearer_auth("xtalk_guess")
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
    }
    let limited = here
        .get(&people)
        .bearer_auth("xtalk_guess")
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    // Out of its quota, the address is refused before any lookup for bad
    // tokens, but a valid credential counts against its own quota only.
    assert_eq!(
        here.get(&people)
            .bearer_auth("xtalk_another_guess")
            .send()
            .await
            .unwrap()
            .status(),
        429
    );
    assert_eq!(
        here.get(&people)
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Another address is not.
    let elsewhere = from_address([127, 0, 0, 2]);
    assert_eq!(
        elsewhere
            .get(&people)
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        elsewhere
            .get(&people)
            .bearer_auth("xtalk_guess")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}

#[tokio::test]
async fn waits_and_streams_are_capped_per_person_and_in_total() {
    let app = spawn_app_with(|config| {
        config.settings.max_waits_per_person = 2;
        config.settings.max_waits = 3;
    })
    .await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let carol = app.add_person("carol").await;
    let mut parked = app.running.state.relay.parked_waits();
    let wait_url = format!(
        "{}/api/channels/ops/wait?since_id=0&timeout_s=50",
        app.url()
    );
    let mut waits = Vec::new();
    for token in [&alice, &alice, &bob] {
        let before = *parked.borrow_and_update();
        let request = http().get(&wait_url).bearer_auth(token);
        waits.push(tokio::spawn(async move { request.send().await }));
        parked.wait_for(|n| *n > before).await.unwrap();
    }
    assert_eq!(app.running.state.relay.open_waits(), 3);

    let third = http()
        .get(&wait_url)
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: Value = third.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "alice already has 2 waits and streams open, the most one caller may; close one before opening another"
    );
    let stream = http()
        .get(format!("{}/api/channels/ops/stream", app.url()))
        .bearer_auth(&carol)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 503);
    assert_eq!(
        stream.json::<Value>().await.unwrap()["error"]["code"],
        "overloaded"
    );
    // A call that does not wait needs no slot.
    assert_eq!(
        get(
            &app,
            "/api/channels/ops/wait?since_id=0&timeout_s=0",
            &carol
        )
        .await
        .0,
        200
    );

    for wait in waits {
        wait.abort();
    }
}

#[tokio::test]
async fn oversized_requests_get_413_with_the_error_shape() {
    let app = spawn_app_with(|config| config.settings.max_body_bytes = 100).await;
    let alice = app.add_person("alice").await;
    let huge = json!({ "to": "alice", "body": "x".repeat(20_000) });
    let response = http()
        .post(format!("{}/api/messages", app.url()))
        .bearer_auth(&alice)
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "too_large"
    );
    // MCP reads a body as large as a message's files may make it, no larger.
    let past = crosstalk::app::message_body_limit(100) + 1;
    let over_mcp =
        crate::support::mcp_post(&app.url(), &alice, json!({ "padding": "x".repeat(past) }))
            .send()
            .await
            .unwrap();
    assert_eq!(over_mcp.status(), 413);
    assert_eq!(app.rest(&alice).stored_messages().await, 0);
}

#[tokio::test]
async fn hundreds_of_half_sent_requests_do_not_delay_anyone() {
    let app = spawn_app_with(|_| {}).await;
    let alice = app.add_person("alice").await;
    let mut stalled = Vec::new();
    for _ in 0..300 {
        let mut socket = tokio::net::TcpStream::connect(app.running.addr)
            .await
            .unwrap();
        socket
            .write_all(b"POST /api/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Len")
            .await
            .unwrap();
        stalled.push(socket);
    }
    let answered =
        tokio::time::timeout(Duration::from_secs(5), get(&app, "/api/people", &alice)).await;
    assert_eq!(answered.expect("answered while 300 requests hang").0, 200);
    drop(stalled);
}
