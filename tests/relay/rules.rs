//! What the relay refuses, and how it says so.

use crate::support::{http, spawn_app, spawn_app_with};
use serde_json::json;

#[tokio::test]
async fn a_refused_secret_is_not_stored_and_not_repeated() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob = app.rest(&app.add_person("bob").await);
    let key = "AKIAIOSFODNN7EXAMPLE";
    let refused = alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": format!("the key is {key}, use it") }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "secret_refused");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("an AWS access key id"), "{message}");
    assert!(
        !message.contains(key),
        "the refusal repeats the secret: {message}"
    );
    assert_eq!(bob.stored_messages().await, 0);
    assert_eq!(bob.get("/api/threads/1").await.0, 404, "no thread opened");
    let (_, inbox) = bob.get("/api/inbox?timeout_s=0").await;
    assert_eq!(inbox["messages"], json!([]));

    // The relay's own tokens are secrets too.
    let bobs_token = app.add_person("carol").await;
    let leaked = alice
        .call(
            "post_message",
            json!({ "channel": "ops", "body": format!("token: {bobs_token}") }),
        )
        .await
        .tool_error();
    assert_eq!(leaked["error"]["code"], "secret_refused");
    assert!(
        leaked["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a crosstalk token")
    );
    assert_eq!(bob.stored_messages().await, 0);
}

#[tokio::test]
async fn bad_arguments_get_a_clear_error_and_the_relay_goes_on() {
    let app = spawn_app_with(|c| c.settings.max_body_bytes = 100).await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob = app.rest(&app.add_person("bob").await);

    let tool_error =
        |code: &str, message: &str| json!({ "error": { "code": code, "message": message } });
    let cases = [
        (
            "check_inbox",
            json!({ "timeout_seconds": -1 }),
            tool_error(
                "bad_request",
                "a timeout is a number of seconds from 0 to 50; got -1",
            ),
        ),
        (
            "send_message",
            json!({ "to": "nobody", "body": "hi" }),
            tool_error("not_found", "there is nobody called nobody on this relay"),
        ),
        (
            "send_message",
            json!({ "to": "Bob!", "body": "hi" }),
            tool_error(
                "bad_request",
                "to: a handle starts with a lowercase letter or a digit: \"Bob!\"",
            ),
        ),
        (
            "send_message",
            json!({ "to": "bob", "body": "   " }),
            tool_error("bad_request", "the body is empty"),
        ),
        (
            "send_message",
            json!({ "to": "bob", "body": "x".repeat(101) }),
            tool_error(
                "too_large",
                "the body is 101 bytes; this relay accepts at most 100",
            ),
        ),
        (
            "send_message",
            json!({ "to": "bob", "body": "hi", "thread_id": 999 }),
            tool_error("not_found", "there is no thread 999"),
        ),
        (
            "read_thread",
            json!({ "thread_id": 7 }),
            tool_error("not_found", "there is no thread 7"),
        ),
        (
            "post_message",
            json!({ "channel": "no spaces", "body": "hi" }),
            tool_error(
                "bad_request",
                "channel \"no spaces\" is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', \
                 starting with a letter or digit",
            ),
        ),
        (
            "post_message",
            json!({ "channel": "ops", "body": "hi", "reply_to": 12345 }),
            tool_error(
                "not_found",
                "reply_to 12345 is not a live message of this conversation",
            ),
        ),
    ];
    for (tool, arguments, expected) in cases {
        let got = alice.call(tool, arguments.clone()).await.tool_error();
        assert_eq!(got, expected, "{tool} {arguments}");
    }

    // Arguments of the wrong shape get the same error shape, saying what is wrong.
    for (tool, arguments, message) in [
        (
            "send_message",
            json!({ "to": "bob" }),
            "invalid arguments: missing field `body`",
        ),
        (
            "read_thread",
            json!({ "thread_id": "seven" }),
            "invalid arguments: invalid type: string \"seven\", expected i64",
        ),
        (
            "check_inbox",
            json!({ "timeout_seconds": "soon" }),
            "invalid arguments: invalid type: string \"soon\", expected f64",
        ),
    ] {
        let got = alice.call(tool, arguments).await.tool_error();
        assert_eq!(got, tool_error("bad_request", message), "{tool}");
    }

    // Nothing was stored, and the relay still works.
    assert_eq!(bob.stored_messages().await, 0);
    let sent = alice
        .call("send_message", json!({ "to": "bob", "body": "still here" }))
        .await
        .ok();
    assert_eq!(sent["message_id"], 1);
}

#[tokio::test]
async fn long_timeouts_are_clamped_not_refused() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let _bob = app.add_person("bob").await;
    alice
        .call(
            "send_message",
            json!({ "to": "alice", "body": "note to self" }),
        )
        .await
        .ok();
    // A message is waiting, so even a clamped 50 s wait returns at once.
    let inbox = alice
        .call("check_inbox", json!({ "timeout_seconds": 3600 }))
        .await
        .ok();
    assert_eq!(inbox["messages"][0]["body"], "note to self");
}

#[tokio::test]
async fn healthz_needs_no_credentials() {
    let app = spawn_app().await;
    app.add_person("alice").await;
    let response = http()
        .get(format!("{}/healthz", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<serde_json::Value>().await.unwrap(),
        json!({ "status": "ok" })
    );
}
