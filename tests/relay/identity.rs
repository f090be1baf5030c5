//! Nobody can act as someone else, on any path.

use crate::support::{Mcp, http, initialize, mcp_post, rpc_messages, spawn_app};
use serde_json::json;

fn forbidden(message: &str) -> serde_json::Value {
    json!({ "error": { "code": "forbidden", "message": message } })
}

#[tokio::test]
async fn one_person_cannot_act_as_another() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob = app.rest(&app.add_person("bob").await);

    let as_bob = alice
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "hi", "sender": "bob" }),
        )
        .await
        .tool_error();
    assert_eq!(
        as_bob,
        forbidden("you are alice; you cannot act as \"bob\"")
    );
    let dm_as_bob = alice
        .call(
            "send_message",
            json!({ "to": "alice", "body": "hi", "sender": "bob" }),
        )
        .await
        .tool_error();
    assert_eq!(dm_as_bob["error"]["code"], "forbidden");
    let bobs_inbox = alice
        .call("check_inbox", json!({ "sender": "bob" }))
        .await
        .tool_error();
    assert_eq!(bobs_inbox["error"]["code"], "forbidden");
    let bobs_status = alice
        .call("set_status", json!({ "status": "x", "sender": "bob" }))
        .await
        .tool_error();
    assert_eq!(bobs_status["error"]["code"], "forbidden");
    assert_eq!(bob.stored_messages().await, 0);

    // Naming yourself is fine, and the stored sender is always the credential's.
    alice
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "hi", "sender": "alice" }),
        )
        .await
        .ok();
    assert_eq!(bob.stored_messages().await, 1);
    assert_eq!(bob.message(1).await["from"], "alice");
}

#[tokio::test]
async fn nobody_can_ride_another_persons_mcp_session() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let url = app.url();

    let opened = mcp_post(&url, &alice, initialize()).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    rpc_messages(opened).await;
    let initialized = mcp_post(
        &url,
        &alice,
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    )
    .header("mcp-session-id", &session)
    .header("mcp-protocol-version", "2025-06-18")
    .send()
    .await
    .unwrap();
    assert!(initialized.status().is_success());

    let call = |token: &str| {
        mcp_post(
            &url,
            token,
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": { "name": "post_message", "arguments": { "channel": "ops", "body": "from the session" } } }),
        )
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
    };
    let ridden = call(&bob).send().await.unwrap();
    assert_eq!(ridden.status(), 403);
    assert_eq!(
        ridden.json::<serde_json::Value>().await.unwrap(),
        forbidden("this MCP session belongs to someone else")
    );
    assert_eq!(app.rest(&bob).stored_messages().await, 0);

    // The owner goes on using it.
    let own = call(&alice).send().await.unwrap();
    assert_eq!(own.status(), 200);
    let replies = rpc_messages(own).await;
    let reply = replies
        .iter()
        .find(|m| m["id"] == 2)
        .expect("a reply to the call");
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    assert_eq!(app.rest(&bob).stored_messages().await, 1);
    assert_eq!(app.rest(&bob).message(1).await["from"], "alice");
}

#[tokio::test]
async fn unknown_tokens_and_basic_credentials_get_401() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;

    let unknown = mcp_post(&app.url(), "xtalk_not-a-real-token", initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 401);
    // On /mcp the challenge also points an OAuth client at the metadata
    // (`oauth.rs`).
    let challenge = unknown.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"crosstalk\", resource_metadata="),
        "{challenge}"
    );
    assert_eq!(
        unknown.json::<serde_json::Value>().await.unwrap(),
        json!({ "error": { "code": "unauthorized", "message": "unknown or revoked token" } })
    );

    let basic = http()
        .post(format!("{}/mcp", app.url()))
        .basic_auth("alice", Some(&alice))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
    assert_eq!(
        basic.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        "unauthorized"
    );

    // A relay with people on it is never open: no credentials, no entry.
    let anonymous = http()
        .post(format!("{}/mcp", app.url()))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert!(Mcp::connect(&app.url(), "wrong").await.is_err());
}

#[tokio::test]
async fn an_empty_loopback_relay_is_open_but_senders_must_be_named() {
    let app = spawn_app().await;
    let anyone = match Mcp::connect(&app.url(), "").await {
        Ok(client) => client,
        Err(error) => panic!("an empty loopback relay should be open: {error}"),
    };
    let unnamed = anyone
        .call("post_message", json!({ "channel": "ops", "body": "hi" }))
        .await
        .tool_error();
    assert_eq!(unnamed["error"]["code"], "bad_request");
    let named = anyone
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "hi", "sender": "tryout" }),
        )
        .await
        .ok();
    assert_eq!(named, json!({ "id": 1 }));
}
