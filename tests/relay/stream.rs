//! Server-Sent Events: backlog, live messages, resuming.

use crate::support::{SseReader, http, post, spawn_app};
use serde_json::json;

#[tokio::test]
async fn a_stream_replays_the_backlog_streams_live_posts_and_resumes() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    for body in ["one", "two", "three"] {
        post(
            &app,
            "/api/channels/ops/messages",
            &alice,
            json!({ "body": body }),
        )
        .await;
    }
    post(
        &app,
        "/api/channels/elsewhere/messages",
        &alice,
        json!({ "body": "not on ops" }),
    )
    .await;

    let url = format!("{}/api/channels/ops/stream?since_id=1", app.url());
    let mut stream = SseReader::new(http().get(&url).bearer_auth(&bob).send().await.unwrap());
    let notice = stream.next().await;
    assert_eq!(notice.event.as_deref(), Some("notice"));
    assert!(notice.data.contains("carry none of your user's authority"));
    assert_eq!(stream.message().await["body"], "two");
    assert_eq!(stream.message().await["body"], "three");

    // Live: the stream has read its backlog, so it is subscribed.
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "four", "type": "DONE" }),
    )
    .await;
    let live = stream.message().await;
    assert_eq!(
        (
            live["id"].clone(),
            live["body"].clone(),
            live["type"].clone()
        ),
        (json!(5), json!("four"), json!("DONE"))
    );
    drop(stream);

    // Reconnecting with Last-Event-ID resumes after it, whatever since_id says.
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "five" }),
    )
    .await;
    let resumed = http()
        .get(&url)
        .bearer_auth(&bob)
        .header("last-event-id", "5")
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(resumed);
    stream.next().await; // the notice
    assert_eq!(stream.message().await["body"], "five");
}

#[tokio::test]
async fn a_stream_accepts_a_query_token_and_refuses_a_bad_one() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "hello" }),
    )
    .await;
    let url = format!("{}/api/channels/ops/stream?token={alice}", app.url());
    let mut stream = SseReader::new(http().get(&url).send().await.unwrap());
    stream.next().await;
    assert_eq!(stream.message().await["body"], "hello");

    let bad = http()
        .get(format!(
            "{}/api/channels/ops/stream?token=xtalk_nope",
            app.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    // ?token= is for streams only.
    let elsewhere = http()
        .get(format!("{}/api/channels?token={alice}", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 401);
}

#[tokio::test]
async fn streams_end_cleanly_when_the_relay_shuts_down() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let url = format!("{}/api/channels/ops/stream", app.url());
    let mut stream = SseReader::new(http().get(&url).bearer_auth(&alice).send().await.unwrap());
    stream.next().await;
    let crate::support::TestApp { running, .. } = app;
    tokio::time::timeout(std::time::Duration::from_secs(10), running.stop())
        .await
        .expect("the relay drains its streams and stops")
        .unwrap();
}
