//! Two people's agents talking in a thread.

use crate::support::spawn_app;
use crosstalk::relay::NOTICE;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn two_people_converse_in_a_thread() {
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let alice = app.mcp(&alice_token).await;
    let bob = app.mcp(&app.add_person("bob").await).await;

    let sent = alice
        .call(
            "send_message",
            json!({ "to": "bob", "type": "QUESTION", "body": "Where is the retry logic?" }),
        )
        .await
        .ok();
    assert_eq!(sent, json!({ "message_id": 1, "thread_id": 1 }));

    let inbox = bob.call("check_inbox", json!({})).await.ok();
    assert_eq!(inbox["notice"], NOTICE);
    let messages = inbox["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1);
    let question = &messages[0];
    assert_eq!(question["id"], 1);
    assert_eq!(question["thread_id"], 1);
    assert_eq!(question["from"], "alice");
    assert_eq!(question["to"], "bob");
    assert_eq!(question["type"], "QUESTION");
    assert_eq!(question["body"], "Where is the retry logic?");
    assert!(question.get("channel").is_none());

    let reply = bob
        .call(
            "send_message",
            json!({ "to": "alice", "thread_id": 1, "type": "ANSWER", "body": "src/net/retry.rs" }),
        )
        .await
        .ok();
    assert_eq!(reply, json!({ "message_id": 2, "thread_id": 1 }));

    // Alice receives the answer in her inbox; Bob's inbox is empty again.
    let alice_inbox = alice.call("check_inbox", json!({})).await.ok();
    assert_eq!(alice_inbox["messages"][0]["body"], "src/net/retry.rs");
    assert_eq!(alice_inbox["messages"][0]["from"], "bob");
    assert_eq!(
        bob.call("check_inbox", json!({})).await.ok()["messages"],
        json!([])
    );

    let thread = alice
        .call("read_thread", json!({ "thread_id": 1 }))
        .await
        .ok();
    let bodies: Vec<_> = thread["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["from"].as_str().unwrap().to_owned(),
                m["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        bodies,
        [
            ("alice".to_owned(), "QUESTION".to_owned()),
            ("bob".to_owned(), "ANSWER".to_owned())
        ]
    );
    assert_eq!(thread["notice"], NOTICE);
    // Those two are all the relay stored.
    assert_eq!(app.rest(&alice_token).stored_messages().await, 2);
}

#[tokio::test]
async fn a_waiting_check_inbox_wakes_on_send() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob = app.mcp(&app.add_person("bob").await).await;
    let mut parked = app.running.state.relay.parked_waits();
    let before = *parked.borrow();

    let waiting = tokio::spawn(async move {
        let inbox = bob
            .call("check_inbox", json!({ "timeout_seconds": 50 }))
            .await
            .ok();
        (bob, inbox)
    });
    // Bob's call has found his inbox empty and is waiting for a wake-up.
    parked.wait_for(|n| *n > before).await.unwrap();
    alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": "are you there?" }),
        )
        .await
        .ok();

    // If the send did not wake the wait, this would take 50 s and come back empty.
    let (_bob, inbox) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait woke well before its timeout")
        .unwrap();
    assert_eq!(inbox["messages"][0]["body"], "are you there?");
}

#[tokio::test]
async fn a_wait_with_nothing_to_receive_ends_empty_at_its_timeout() {
    let app = spawn_app().await;
    let bob = app.mcp(&app.add_person("bob").await).await;
    let inbox = bob
        .call("check_inbox", json!({ "timeout_seconds": 0.2 }))
        .await
        .ok();
    assert_eq!(inbox["messages"], json!([]));
    assert_eq!(inbox["notice"], NOTICE);
}

#[tokio::test]
async fn list_peers_and_set_status() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let _bob_token = app.add_person("bob").await;
    let set = alice
        .call(
            "set_status",
            json!({ "status": "  reviewing the auth PR " }),
        )
        .await
        .ok();
    assert_eq!(
        set,
        json!({ "handle": "alice", "status": "reviewing the auth PR" })
    );

    let peers = alice.call("list_peers", json!({})).await.ok();
    let peers = peers["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 2);
    assert_eq!(peers[0]["handle"], "alice");
    assert_eq!(peers[0]["name"], "ALICE");
    assert_eq!(peers[0]["status"], "reviewing the auth PR");
    assert!(peers[0]["last_seen"].is_string(), "alice was just seen");
    assert_eq!(peers[1]["handle"], "bob");
    assert_eq!(peers[1]["status"], "");
    assert!(peers[1]["last_seen"].is_null(), "bob never connected");
}
