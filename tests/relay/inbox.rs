//! The inbox is claimed atomically, and expired messages are invisible.

use crate::support::{Mcp, spawn_app};
use serde_json::json;
use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

#[tokio::test]
async fn four_sessions_of_one_person_receive_each_of_forty_messages_once() {
    let app = spawn_app().await;
    let alice_token = app.add_person("alice").await;
    let alice = Arc::new(app.mcp(&alice_token).await);
    let bob_token = app.add_person("bob").await;
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(app.mcp(&bob_token).await);
    }

    const TOTAL: usize = 40;
    let received = Arc::new(AtomicUsize::new(0));
    let claimers: Vec<_> = sessions
        .into_iter()
        .map(|session: Mcp| {
            let received = received.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while received.load(Ordering::SeqCst) < TOTAL {
                    let inbox = session
                        .call("check_inbox", json!({ "timeout_seconds": 0.5 }))
                        .await
                        .ok();
                    for message in inbox["messages"].as_array().unwrap() {
                        mine.push(message["id"].as_i64().unwrap());
                        received.fetch_add(1, Ordering::SeqCst);
                    }
                }
                mine
            })
        })
        .collect();
    // Send while the sessions claim, from several tasks at once.
    let senders: Vec<_> = (0..4)
        .map(|task| {
            let alice = alice.clone();
            tokio::spawn(async move {
                for n in 0..TOTAL / 4 {
                    alice
                        .call(
                            "send_message",
                            json!({ "to": "bob", "body": format!("message {task}-{n}") }),
                        )
                        .await
                        .ok();
                }
            })
        })
        .collect();
    for sender in senders {
        sender.await.unwrap();
    }
    let mut all = Vec::new();
    for claimer in claimers {
        // A lost message would keep the claimers looking forever.
        let claimed = tokio::time::timeout(std::time::Duration::from_secs(30), claimer)
            .await
            .expect("every message is claimed within 30 s");
        all.extend(claimed.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(
        all.len(),
        TOTAL,
        "every message arrives, and only once: {all:?}"
    );
    assert_eq!(unique.len(), TOTAL);
    // And the relay knows each was read: none is left in bob's inbox.
    let sender = app.rest(&alice_token);
    for id in all {
        assert_eq!(sender.delivery(id).await["state"], "read", "message {id}");
    }
}

#[tokio::test]
async fn an_expired_message_is_invisible_everywhere() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let bob_token = app.add_person("bob").await;
    let bob = app.mcp(&bob_token).await;
    alice
        .call(
            "send_message",
            json!({ "to": "bob", "body": "short-lived" }),
        )
        .await
        .ok();
    alice
        .call(
            "post_message",
            json!({ "channel": "ops", "body": "also short-lived" }),
        )
        .await
        .ok();

    // Bob reads both on the page, which marks them read.
    for page in ["/threads/1", "/channels/ops"] {
        let (status, _) = crate::support::page(&app, page, &bob_token).await;
        assert_eq!(status, 200, "{page}");
    }
    assert_eq!(app.count("SELECT count(*) FROM last_read"), 2);

    // Let both messages expire a moment ago, as retention would.
    app.sql("UPDATE messages SET expires_at = ?1", |conn, q| {
        conn.execute(q, [crosstalk::model::now_millis() - 1])
            .unwrap()
    });

    assert_eq!(
        bob.call("check_inbox", json!({})).await.ok()["messages"],
        json!([])
    );
    let missing = bob
        .call("read_thread", json!({ "thread_id": 1 }))
        .await
        .tool_error();
    assert_eq!(
        missing,
        json!({ "error": { "code": "not_found", "message": "there is no thread 1" } })
    );
    let page = bob
        .call("get_messages", json!({ "channel": "ops" }))
        .await
        .ok();
    assert_eq!(page["messages"], json!([]));
    assert_eq!(
        bob.call("list_channels", json!({})).await.ok(),
        json!({ "channels": [] })
    );

    // The purge deletes them, once, with the rows nobody reads through the
    // API: the thread they leave empty, the inbox rows, and what bob had
    // read of the conversations now gone.
    let relay = &app.running.state.relay;
    assert_eq!(relay.purge_expired().await.unwrap(), 2);
    assert_eq!(relay.purge_expired().await.unwrap(), 0);
    assert_eq!(app.count("SELECT count(*) FROM threads"), 0);
    assert_eq!(app.count("SELECT count(*) FROM inbox"), 0);
    assert_eq!(app.count("SELECT count(*) FROM last_read"), 0);
}

#[tokio::test]
async fn message_ids_keep_increasing_after_the_newest_expire() {
    let app = spawn_app().await;
    let alice = app.mcp(&app.add_person("alice").await).await;
    let first = alice
        .call("post_message", json!({ "channel": "ops", "body": "one" }))
        .await
        .ok();
    app.sql("UPDATE messages SET expires_at = 0", |conn, q| {
        conn.execute(q, []).unwrap()
    });
    app.running.state.relay.purge_expired().await.unwrap();
    let second = alice
        .call("post_message", json!({ "channel": "ops", "body": "two" }))
        .await
        .ok();
    assert!(
        second["id"].as_i64() > first["id"].as_i64(),
        "{first} then {second}"
    );
}
