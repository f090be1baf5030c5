//! MCP sessions outlive a restart of the relay: an agent carries on without
//! starting a new session, and a revoked person's session never comes back.

use crate::support::{Mcp, RawSession, initialize, mcp_post, spawn_app};
use serde_json::json;

#[tokio::test]
async fn an_mcp_session_survives_a_restart_and_a_revoked_one_does_not() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let agent = Mcp::connect(&app.url(), &alice).await.unwrap();
    let sent = agent
        .call(
            "send_message",
            json!({ "to": "bob", "body": "before the restart" }),
        )
        .await
        .ok();
    let thread = sent["thread_id"].clone();
    // A raw session of bob's, to see the session id and status codes.
    let bobs = RawSession::open(&app.url(), &bob).await;
    let carol = app.add_person("carol").await;
    let carols = RawSession::open(&app.url(), &carol).await;
    let sessions_before = app.count("SELECT count(*) FROM mcp_sessions WHERE owner IS NOT NULL");
    assert_eq!(sessions_before, 3);

    let app = app.restart().await;

    // The same rmcp client, on the same session: it carries on.
    let read = agent
        .call("read_thread", json!({ "thread_id": thread }))
        .await
        .ok();
    assert_eq!(read["messages"][0]["body"], "before the restart");
    let reply = agent
        .call(
            "send_message",
            json!({ "to": "bob", "thread_id": thread, "body": "after it" }),
        )
        .await
        .ok();
    assert_eq!(reply["thread_id"], thread);
    // Taken up, not started anew: no session was opened since.
    assert_eq!(app.count("SELECT count(*) FROM mcp_sessions"), 3);

    // Bob's session on another person's token: refused, not taken up.
    let stolen = bobs
        .with_token(&alice)
        .call(1, "list_peers", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(stolen.status(), 403);
    // On his own: taken up.
    let own = bobs.call(2, "check_inbox", json!({})).send().await.unwrap();
    assert_eq!(own.status(), 200);

    // A revoked person's kept session is gone, and stays gone.
    app.revoke("carol").await;
    assert_eq!(
        app.count("SELECT count(*) FROM mcp_sessions WHERE owner IS NOT NULL"),
        2
    );
    let app = app.restart().await;
    let revoked = carols
        .call(3, "list_peers", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 401);
    // An unknown session is 404 in the relay's words: start a new one.
    let unknown = mcp_post(&app.url(), &alice, initialize())
        .header("mcp-session-id", "no-such-session")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let said: serde_json::Value = unknown.json().await.unwrap();
    assert!(
        said["error"]["message"]
            .as_str()
            .unwrap()
            .contains("start a new one"),
        "{said}"
    );
}
