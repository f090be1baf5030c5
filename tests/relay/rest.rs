//! The REST mirror: the same conversation as over MCP, long-polls, errors.

use crate::support::{TestApp, get, post, rest, spawn_app};
use reqwest::Method;
use serde_json::{Value, json};

/// What a conversation left on the relay, every message as `token`'s person
/// reads it, without times or where each stands.
async fn stored(app: &TestApp, token: &str) -> Vec<Value> {
    let mut stored = app.rest(token).stored().await;
    for message in &mut stored {
        for moment in ["created_at", "expires_at", "delivery"] {
            message.as_object_mut().unwrap().remove(moment);
        }
    }
    stored
}

#[tokio::test]
async fn the_same_conversation_over_mcp_and_rest_is_stored_the_same() {
    // Over MCP.
    let over_mcp = spawn_app().await;
    let over_mcp_alice = over_mcp.add_person("alice").await;
    let alice = over_mcp.mcp(&over_mcp_alice).await;
    let bob = over_mcp.mcp(&over_mcp.add_person("bob").await).await;
    alice.call("post_message", json!({ "channel": "release", "type": "QUESTION", "body": "tag 1.4?", "recipient": "bob" })).await.ok();
    bob.call(
        "post_message",
        json!({ "channel": "release", "type": "ANSWER", "body": "yes", "reply_to": 1 }),
    )
    .await
    .ok();
    alice
        .call(
            "post_message",
            json!({ "channel": "release", "type": "DONE", "body": "tagged" }),
        )
        .await
        .ok();
    alice
        .call("send_message", json!({ "to": "bob", "body": "thanks!" }))
        .await
        .ok();
    bob.call(
        "send_message",
        json!({ "to": "alice", "body": "any time", "thread_id": 1, "type": "ANSWER" }),
    )
    .await
    .ok();
    let mcp_inbox = bob.call("check_inbox", json!({})).await.ok();

    // Over REST.
    let over_rest = spawn_app().await;
    let alice = over_rest.add_person("alice").await;
    let bob = over_rest.add_person("bob").await;
    let app = &over_rest;
    let posted = post(
        app,
        "/api/channels/release/messages",
        &alice,
        json!({ "type": "QUESTION", "body": "tag 1.4?", "recipient": "bob" }),
    )
    .await;
    assert_eq!(posted, (201, json!({ "id": 1 })));
    post(
        app,
        "/api/channels/release/messages",
        &bob,
        json!({ "type": "ANSWER", "body": "yes", "reply_to": 1 }),
    )
    .await;
    post(
        app,
        "/api/channels/release/messages",
        &alice,
        json!({ "type": "DONE", "body": "tagged" }),
    )
    .await;
    let sent = post(
        app,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "thanks!" }),
    )
    .await;
    assert_eq!(sent, (201, json!({ "message_id": 4, "thread_id": 1 })));
    post(
        app,
        "/api/messages",
        &bob,
        json!({ "to": "alice", "body": "any time", "thread_id": 1, "type": "ANSWER" }),
    )
    .await;
    let (status, rest_inbox) = get(app, "/api/inbox", &bob).await;
    assert_eq!(status, 200);

    let on_rest = stored(&over_rest, &alice).await;
    assert_eq!(stored(&over_mcp, &over_mcp_alice).await, on_rest);
    assert_eq!(on_rest.len(), 5);
    let ids = |inbox: &Value| {
        inbox["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&mcp_inbox), ids(&rest_inbox));
    // Bob answered 1 (reply_to): his agent has it, so only 4 is left.
    assert_eq!(ids(&rest_inbox), [json!(4)]);

    // The reads agree too.
    let (_, page) = get(app, "/api/channels/release/messages?since_id=1", &bob).await;
    assert_eq!(page["last_id"], 3);
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    let (_, channels) = get(app, "/api/channels", &bob).await;
    assert_eq!(channels["channels"][0]["name"], "release");
    assert_eq!(channels["channels"][0]["message_count"], 3);
    assert_eq!(channels["channels"][0]["last_id"], 3);
    let (_, thread) = get(app, "/api/threads/1", &alice).await;
    assert_eq!(thread["messages"].as_array().unwrap().len(), 2);
    assert!(thread["notice"].is_string());
    let (status, set) = app
        .rest(&alice)
        .put("/api/status", json!({ "status": "on call" }))
        .await;
    assert_eq!(
        (status, set),
        (200, json!({ "handle": "alice", "status": "on call" }))
    );
    let (_, people) = get(app, "/api/people", &bob).await;
    assert_eq!(people["peers"][0]["status"], "on call");
}

#[tokio::test]
async fn a_rest_long_poll_wakes_on_an_mcp_post() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob = app.add_person("bob").await;
    let mut parked = app.running.state.relay.parked_waits();
    let before = *parked.borrow();
    let url = format!(
        "{}/api/channels/ops/wait?since_id=0&timeout_s=50",
        app.url()
    );
    let waiting = tokio::spawn(async move {
        let response = crate::support::http()
            .get(url)
            .bearer_auth(bob)
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    });
    parked.wait_for(|n| *n > before).await.unwrap();
    alice
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "deploy done" }),
        )
        .await
        .ok();
    let (status, page) = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(page["messages"][0]["body"], "deploy done");
    assert_eq!(page["last_id"], 1);
}

#[tokio::test]
async fn an_mcp_wait_for_message_wakes_on_a_rest_post() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.mcp(&app.add_person("bob").await).await;
    let mut parked = app.running.state.relay.parked_waits();
    let before = *parked.borrow();
    let waiting = tokio::spawn(async move {
        bob.call(
            "wait_for_message",
            json!({ "channel": "ops", "since_id": 0, "timeout_s": 50 }),
        )
        .await
        .ok()
    });
    parked.wait_for(|n| *n > before).await.unwrap();
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "from REST" }),
    )
    .await;
    let page = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(page["messages"][0]["body"], "from REST");
    assert_eq!(page["messages"][0]["from"], "alice");
}

#[tokio::test]
async fn a_long_poll_with_nothing_ends_empty_at_its_timeout() {
    let app = spawn_app().await;
    let bob = app.add_person("bob").await;
    let (status, page) = get(
        &app,
        "/api/channels/ops/wait?since_id=7&timeout_s=0.1",
        &bob,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(page["messages"], json!([]));
    assert_eq!(page["last_id"], 7);
}

#[tokio::test]
async fn every_error_has_the_contract_shape_and_status() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let _bob = app.add_person("bob").await;
    let error =
        |code: &str, message: &str| json!({ "error": { "code": code, "message": message } });

    /// Method, path, token, body; the status and body expected.
    type Case<'a> = (Method, &'a str, Option<&'a str>, Option<Value>, u16, Value);
    let cases: Vec<Case> = vec![
        (
            Method::GET,
            "/api/channels",
            None,
            None,
            401,
            error(
                "unauthorized",
                "this relay needs a token: Authorization: Bearer TOKEN",
            ),
        ),
        (
            Method::GET,
            "/api/people",
            Some("xtalk_wrong"),
            None,
            401,
            error("unauthorized", "unknown or revoked token"),
        ),
        (
            Method::POST,
            "/api/messages",
            Some(&alice),
            Some(json!({ "to": "bob", "body": "hi", "sender": "bob" })),
            403,
            error("forbidden", "you are alice; you cannot act as \"bob\""),
        ),
        (
            Method::GET,
            "/api/threads/42",
            Some(&alice),
            None,
            404,
            error("not_found", "there is no thread 42"),
        ),
        (
            Method::POST,
            "/api/messages",
            Some(&alice),
            Some(json!({ "to": "zed", "body": "hi" })),
            404,
            error("not_found", "there is nobody called zed on this relay"),
        ),
        (
            Method::POST,
            "/api/channels/ops/messages",
            Some(&alice),
            Some(json!({ "body": "-----BEGIN RSA PRIVATE KEY-----" })),
            422,
            error(
                "secret_refused",
                "refused: the message looks like it contains a private key. Nothing was stored. Remove the secret and send again; share secrets through your team's secret store",
            ),
        ),
        (
            Method::POST,
            "/api/channels/ops/messages",
            Some(&alice),
            Some(json!({ "body": "x".repeat(65_537) })),
            413,
            error(
                "too_large",
                "the body is 65537 bytes; this relay accepts at most 65536",
            ),
        ),
        (
            Method::GET,
            "/api/channels/bad%20name/messages",
            Some(&alice),
            None,
            400,
            error(
                "bad_request",
                "channel \"bad name\" is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
            ),
        ),
        (
            Method::GET,
            "/api/channels/ops/wait?timeout_s=-3",
            Some(&alice),
            None,
            400,
            error(
                "bad_request",
                "a timeout is a number of seconds from 0 to 50; got -3",
            ),
        ),
        (
            Method::GET,
            "/api/channels/ops/messages?since_id=abc",
            Some(&alice),
            None,
            400,
            error(
                "bad_request",
                "Failed to deserialize query string: since_id: invalid digit found in string",
            ),
        ),
        (
            Method::GET,
            "/api/threads/abc",
            Some(&alice),
            None,
            400,
            error("bad_request", "Invalid URL: Cannot parse `abc` to a `i64`"),
        ),
        (
            Method::POST,
            "/api/messages",
            Some(&alice),
            Some(json!({ "to": "bob" })),
            400,
            error(
                "bad_request",
                "the JSON body does not fit this route: missing field `body` at line 1 column 12",
            ),
        ),
    ];
    for (method, path, token, body, status, expected) in cases {
        let got = rest(&app, method.clone(), path, token, body).await;
        assert_eq!(got, (status, expected), "{method} {path}");
    }

    // Not JSON at all.
    let response = crate::support::http()
        .post(format!("{}/api/messages", app.url()))
        .bearer_auth(&alice)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the body is not valid JSON: ")
    );
    assert_eq!(app.rest(&alice).stored_messages().await, 0);
}
