//! Identities from the environment: RELAY_PARTICIPANTS and RELAY_TOKEN.

use crate::support::{get, post, spawn_app_with_flags};
use serde_json::{Value, json};

const CI: &str = "ci-token-0123456789";
const REVIEWER: &str = "rv-token-0123456789";
// At least 32 characters: a shorter shared token is refused at start.
const SHARED: &str = "shared-token-0123456789abcdefghijklmn";

#[tokio::test]
async fn participants_are_bound_to_their_ids_and_the_shared_token_names_a_sender() {
    let participants = format!("ci:{CI},reviewer:{REVIEWER}");
    let app = spawn_app_with_flags(&["--participants", &participants, "--token", SHARED]).await;
    let alice = app.add_person("alice").await;

    // A participant acts as itself, never as another.
    assert_eq!(
        post(
            &app,
            "/api/channels/builds/messages",
            CI,
            json!({ "body": "green" })
        )
        .await
        .0,
        201
    );
    let (status, body) = post(
        &app,
        "/api/channels/builds/messages",
        CI,
        json!({ "body": "x", "sender": "reviewer" }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("forbidden"))
    );
    let mcp = app.mcp(CI).await;
    let refused = mcp
        .call(
            "post_message",
            json!({ "channel": "builds", "body": "x", "sender": "alice" }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "forbidden");

    // The shared token must name a sender: someone on the team, a person
    // or a participant, never someone revoked or never added.
    let (status, body) = post(
        &app,
        "/api/channels/builds/messages",
        SHARED,
        json!({ "body": "x" }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("bad_request"))
    );
    let (status, body) = post(
        &app,
        "/api/channels/builds/messages",
        SHARED,
        json!({ "body": "deployed", "sender": "deploy-bot" }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (
            403,
            Some("the shared token speaks only as someone on the team, and deploy-bot is not")
        )
    );
    assert_eq!(
        post(
            &app,
            "/api/channels/builds/messages",
            SHARED,
            json!({ "body": "deployed", "sender": "ci" })
        )
        .await
        .0,
        201
    );
    let shared = app.mcp(SHARED).await;
    shared
        .call(
            "post_message",
            json!({ "channel": "builds", "body": "via mcp", "sender": "alice" }),
        )
        .await
        .ok();

    // Participants are on the team; they can receive direct messages.
    let (_, people) = get(&app, "/api/people", &alice).await;
    let handles: Vec<_> = people["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["handle"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(handles, ["alice", "ci", "reviewer"]);
    assert_eq!(
        post(
            &app,
            "/api/messages",
            &alice,
            json!({ "to": "reviewer", "body": "PR 12 please" })
        )
        .await
        .0,
        201
    );
    let (_, inbox) = get(&app, "/api/inbox", REVIEWER).await;
    assert_eq!(inbox["messages"][0]["body"], "PR 12 please");

    let senders: Vec<Value> = app
        .rest(&alice)
        .stored()
        .await
        .iter()
        .map(|m| m["from"].clone())
        .collect();
    assert_eq!(senders, ["ci", "ci", "alice", "alice"]);
    // Revoked, a person is no one the shared token may speak as.
    app.running
        .state
        .relay
        .team()
        .revoke("alice")
        .await
        .unwrap();
    let refused = shared
        .call(
            "post_message",
            json!({ "channel": "builds", "body": "as a revoked one", "sender": "alice" }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "forbidden");
}
