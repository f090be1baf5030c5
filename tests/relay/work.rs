//! Coordinating work, through the real server: what a message expects and
//! its acknowledgement, what is owed on both sides, an overdue question
//! coming back to its sender, and claims on work, each over REST and its
//! MCP twin.

use crate::attention::{Hook, relay};
use crate::support::{Mcp, spawn_app};
use serde_json::{Value, json};
use std::time::Duration;

/// A relay with alice and bob on it, and an MCP client of each.
struct Pair {
    app: crate::support::TestApp,
    alice: String,
    bob: String,
    alices: Mcp,
    bobs: Mcp,
}

impl Pair {
    async fn start() -> Pair {
        let app = spawn_app().await;
        let alice = app.add_person("alice").await;
        let bob = app.add_person("bob").await;
        let (alices, bobs) = (app.mcp(&alice).await, app.mcp(&bob).await);
        Pair {
            app,
            alice,
            bob,
            alices,
            bobs,
        }
    }
}

fn ids(messages: &Value) -> Vec<i64> {
    messages
        .as_array()
        .unwrap_or_else(|| panic!("a list: {messages}"))
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_message_says_what_it_expects_and_only_its_recipient_acknowledges_it() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let carol = app.add_person("carol").await;
    let (alices, bobs) = (app.rest(&alice), app.rest(&bob));

    // A question expects a reply; a note nothing; either may say otherwise.
    let question = alices
        .send("bob", "Which port?", json!({ "type": "QUESTION" }))
        .await["message_id"]
        .as_i64()
        .unwrap();
    let note = alices.send("bob", "fyi: deployed", json!({})).await["message_id"]
        .as_i64()
        .unwrap();
    let task = alices
        .send(
            "bob",
            "Rotate the staging key",
            json!({ "expects": "ack", "due_seconds": 3600 }),
        )
        .await["message_id"]
        .as_i64()
        .unwrap();
    let fine = alices
        .send(
            "bob",
            "Quick one?",
            json!({ "type": "QUESTION", "expects": "none" }),
        )
        .await["message_id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        alices.delivery(question).await,
        json!({ "state": "waiting", "expects": "reply" })
    );
    assert_eq!(alices.delivery(note).await, json!({ "state": "waiting" }));
    assert_eq!(alices.delivery(fine).await, json!({ "state": "waiting" }));
    let task_delivery = alices.delivery(task).await;
    assert_eq!(task_delivery["expects"], "ack");
    assert!(task_delivery["due_at"].is_string(), "{task_delivery}");

    // What cannot be expected is refused, and nothing is stored.
    let before = alices.stored_messages().await;
    for (fields, says) in [
        (
            json!({ "to": "bob", "body": "x", "expects": "maybe" }),
            "unknown variant",
        ),
        (
            json!({ "to": "bob", "body": "x", "type": "QUESTION", "due_seconds": 0 }),
            "due_seconds",
        ),
        (
            json!({ "to": "bob", "body": "x", "type": "QUESTION", "due_seconds": 604801 }),
            "due_seconds",
        ),
        (
            json!({ "to": "bob", "body": "x", "due_seconds": 60 }),
            "expects nothing",
        ),
    ] {
        let (status, refused) = alices.post("/api/messages", fields.clone()).await;
        assert_eq!(status, 400, "{fields}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{fields}: {message}");
    }
    let (status, refused) = alices
        .post(
            "/api/channels/ops/messages",
            json!({ "body": "anyone?", "expects": "reply" }),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only a message to someone")
    );
    assert_eq!(alices.stored_messages().await, before);

    // What is owed, on both sides.
    let (_, open) = bobs.get("/api/open").await;
    assert_eq!(ids(&open["owed_by_me"]), [question, task]);
    assert_eq!(ids(&open["owed_to_me"]), Vec::<i64>::new());
    let (_, open) = alices.get("/api/open").await;
    assert_eq!(ids(&open["owed_to_me"]), [question, task]);
    assert!(open["notice"].is_string());

    // Only the recipient acknowledges, with a result the relay knows.
    let ack = format!("/api/messages/{task}/ack");
    for (token, status, code) in [(&alice, 403, "forbidden"), (&carol, 403, "forbidden")] {
        let (got, refused) = app
            .rest(token)
            .post(&ack, json!({ "result": "done" }))
            .await;
        assert_eq!(
            (got, refused["error"]["code"].as_str()),
            (status, Some(code)),
            "{refused}"
        );
    }
    let (status, refused) = bobs.post(&ack, json!({ "result": "ok" })).await;
    assert_eq!(status, 400, "{refused}");
    let (status, refused) = bobs
        .post(
            &ack,
            json!({ "result": "done", "note": "key AKIAIOSFODNN7EXAMPLE" }),
        )
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (422, Some("secret_refused")),
        "{refused}"
    );
    let (status, missing) = bobs
        .post("/api/messages/999999/ack", json!({ "result": "done" }))
        .await;
    assert_eq!(status, 404, "{missing}");

    let (status, acked) = bobs
        .post(
            &ack,
            json!({ "result": "blocked", "note": "no access to staging" }),
        )
        .await;
    assert_eq!(status, 200, "{acked}");
    let delivery = &acked["message"]["delivery"];
    assert_eq!(delivery["state"], "acked");
    assert_eq!(delivery["ack"]["result"], "blocked");
    assert_eq!(delivery["ack"]["note"], "no access to staging");
    assert!(
        delivery["read_at"].is_string(),
        "an acknowledgement reads it"
    );
    assert_eq!(alices.delivery(task).await, *delivery, "its sender sees it");
    let (_, open) = alices.get("/api/open").await;
    assert_eq!(ids(&open["owed_to_me"]), [question]);

    // An answer in the thread settles the question.
    let (_, inbox) = bobs.get("/api/inbox").await;
    assert!(ids(&inbox["messages"]).contains(&question));
    let thread = alices.message(question).await["thread_id"].clone();
    bobs.send("alice", "8080", json!({ "thread_id": thread }))
        .await;
    assert_eq!(alices.delivery(question).await["state"], "answered");
    let (_, open) = alices.get("/api/open").await;
    assert_eq!(ids(&open["owed_to_me"]), Vec::<i64>::new());
    let (_, open) = bobs.get("/api/open").await;
    assert_eq!(ids(&open["owed_by_me"]), Vec::<i64>::new());
}

#[tokio::test]
async fn acknowledging_and_what_is_owed_are_the_same_over_mcp() {
    let Pair {
        app,
        alice,
        alices,
        bobs,
        ..
    } = Pair::start().await;

    let sent = alices
        .call(
            "send_message",
            json!({ "to": "bob", "body": "Can you review #12?", "type": "QUESTION",
                    "expects": "ack", "due_seconds": 600 }),
        )
        .await
        .ok();
    let id = sent["message_id"].as_i64().unwrap();
    let open = bobs.call("open_questions", json!({})).await.ok();
    assert_eq!(ids(&open["owed_by_me"]), [id]);
    assert_eq!(open["owed_by_me"][0]["delivery"]["expects"], "ack");
    let open = alices.call("open_questions", json!({})).await.ok();
    assert_eq!(ids(&open["owed_to_me"]), [id]);

    let refused = alices
        .call("ack_message", json!({ "message_id": id, "result": "done" }))
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "forbidden");
    let refused = bobs
        .call(
            "ack_message",
            json!({ "message_id": id, "result": "later" }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "bad_request");
    let acked = bobs
        .call(
            "ack_message",
            json!({ "message_id": id, "result": "rejected", "note": "not mine" }),
        )
        .await
        .ok();
    assert_eq!(acked["message"]["delivery"]["state"], "acked");
    assert_eq!(
        acked["message"],
        app.rest(&alice).message(id).await,
        "the REST twin reads the same message"
    );
    let open = bobs.call("open_questions", json!({})).await.ok();
    assert_eq!(ids(&open["owed_by_me"]), Vec::<i64>::new());
    alices.close().await.unwrap();
    bobs.close().await.unwrap();
}

#[tokio::test]
async fn an_overdue_question_comes_back_to_its_sender_once_and_its_recipient_is_told() {
    let app = relay().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let mut hook = Hook::start().await;
    let bobs = app.rest(&bob);
    let (status, _) = bobs
        .put(
            "/api/me/notifications",
            json!({ "webhook": format!("{}/bob", hook.url), "after_seconds": 3600 }),
        )
        .await;
    assert_eq!(status, 200);

    let alices = app.rest(&alice);
    let sent = alices
        .send(
            "bob",
            "Which region does billing run in?",
            json!({ "type": "QUESTION", "due_seconds": 1 }),
        )
        .await;
    let (question, thread) = (
        sent["message_id"].as_i64().unwrap(),
        sent["thread_id"].as_i64().unwrap(),
    );

    // Alice's inbox receives one OVERDUE item naming the question.
    let (_, inbox) = alices.get("/api/inbox?timeout_seconds=20").await;
    let items = inbox["messages"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{inbox}");
    let item = &items[0];
    assert_eq!(
        (
            item["type"].as_str(),
            item["from"].as_str(),
            item["to"].as_str()
        ),
        (Some("OVERDUE"), Some("alice"), Some("alice"))
    );
    let body = item["body"].as_str().unwrap();
    for named in [
        format!("message {question}"),
        format!("thread {thread}"),
        "bob".into(),
        "Which region".into(),
    ] {
        assert!(body.contains(&named), "{named} in {body}");
    }
    assert!(alices.delivery(question).await["overdue_at"].is_string());
    let (_, open) = alices.get("/api/open").await;
    assert_eq!(ids(&open["owed_to_me"]), [question], "still owed");

    // Bob's person is told, as for an unread message, whatever the delay.
    let (path, told) = hook.next().await;
    assert_eq!(path, "/bob");
    assert_eq!(told["type"], "overdue");
    assert_eq!(told["from"], "alice");
    assert_eq!(told["message_id"], question);

    // Once: the next looks return nothing more.
    let (_, later) = alices.get("/api/inbox?timeout_seconds=3").await;
    assert_eq!(later["messages"], json!([]), "{later}");
    assert!(hook.within(Duration::from_millis(500)).await.is_none());
}

#[tokio::test]
async fn claims_keep_two_people_off_the_same_work() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (alices, bobs) = (app.rest(&alice), app.rest(&bob));
    let repo = "git@github.com:Org/App.git";

    let (status, made) = alices
        .post(
            "/api/claims",
            json!({ "what": "src/store/**", "repo": repo, "note": "moving the schema" }),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let claim = made["claim"].clone();
    assert_eq!(claim["what"], "src/store/**");
    assert_eq!(
        claim["repo"], "github.com/org/app",
        "one name however the remote is written"
    );
    assert_eq!(claim["holder"], "alice");
    assert_eq!(claim["note"], "moving the schema");
    let id = claim["id"].as_i64().unwrap();

    // Bob's overlapping claim: 409, naming alice's.
    let (status, refused) = bobs
        .post(
            "/api/claims",
            json!({ "what": "src/**/mod.rs", "repo": "https://github.com/org/app" }),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "claimed");
    assert_eq!(refused["claim"], claim);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("alice holds src/store/**") && message.contains("moving the schema"),
        "{message}"
    );
    // Elsewhere is free: another repository, other files, a branch.
    for what in [
        json!({ "what": "src/**/mod.rs", "repo": "github.com/org/other" }),
        json!({ "what": "docs/**", "repo": repo }),
        json!({ "what": "branch:main", "repo": repo }),
        json!({ "what": "key:release-notes" }),
    ] {
        let (status, made) = bobs.post("/api/claims", what.clone()).await;
        assert_eq!(status, 201, "{what}: {made}");
    }
    // Bad claims are refused.
    for bad in [
        json!({ "what": "" }),
        json!({ "what": "../etc/passwd" }),
        json!({ "what": "branch:" }),
        json!({ "what": "x", "ttl_seconds": 86401 }),
        json!({ "what": "*a*a*a*a*a*a*a*a*a" }),
    ] {
        let (status, refused) = bobs.post("/api/claims", bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {refused}");
    }

    // Who holds what: all, in a repository, covering a path, others'.
    let (_, all) = bobs.get("/api/claims").await;
    assert_eq!(all["claims"].as_array().unwrap().len(), 5);
    let (_, covering) = bobs
        .get("/api/claims?repo=github.com/org/app&path=src/store/sqlite/mod.rs")
        .await;
    assert_eq!(covering["claims"], json!([claim]));
    let (_, others) = alices
        .get("/api/claims?repo=github.com/org/app&others=true")
        .await;
    let holders: Vec<&str> = others["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["holder"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["bob", "bob"]);

    // Renewing keeps the claim; only its holder releases it.
    let (status, renewed) = alices
        .post(
            "/api/claims",
            json!({ "what": "src/store/**", "repo": repo, "ttl_seconds": 7200 }),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(renewed["claim"]["id"], id);
    assert_ne!(renewed["claim"]["expires_at"], claim["expires_at"]);
    let (status, refused) = bobs.delete(&format!("/api/claims/{id}")).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, released) = alices.delete(&format!("/api/claims/{id}")).await;
    assert_eq!(status, 200, "{released}");
    assert_eq!(released["claim"]["id"], id);
    let (status, _) = alices.delete(&format!("/api/claims/{id}")).await;
    assert_eq!(status, 404);
    let (status, _) = bobs
        .post(
            "/api/claims",
            json!({ "what": "src/**/mod.rs", "repo": repo }),
        )
        .await;
    assert_eq!(status, 201, "free once released");
}

#[tokio::test]
async fn a_claim_ends_when_its_time_runs_out() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (status, _) = app
        .rest(&alice)
        .post(
            "/api/claims",
            json!({ "what": "README.md", "ttl_seconds": 1 }),
        )
        .await;
    assert_eq!(status, 201);
    let bobs = app.rest(&bob);
    let (status, _) = bobs
        .post("/api/claims", json!({ "what": "README.md" }))
        .await;
    assert_eq!(status, 409);
    // Moved past its end in the store (no waiting): gone from every read.
    app.sql(
        "UPDATE claims SET expires_at = 1 WHERE holder = 'alice'",
        |conn, sql| conn.execute(sql, []).unwrap(),
    );
    let (_, all) = bobs.get("/api/claims").await;
    assert_eq!(all["claims"], json!([]));
    let (status, made) = bobs
        .post("/api/claims", json!({ "what": "README.md" }))
        .await;
    assert_eq!(status, 201, "{made}");
}

#[tokio::test]
async fn claims_are_the_same_over_mcp() {
    let Pair {
        app,
        bob,
        alices,
        bobs,
        ..
    } = Pair::start().await;
    let made = alices
        .call(
            "claim",
            json!({ "what": "key:deploy", "note": "releasing 2.1" }),
        )
        .await
        .ok();
    let claim = made["claim"].clone();
    assert_eq!(
        (claim["holder"].as_str(), claim["repo"].clone()),
        (Some("alice"), Value::Null)
    );
    let refused = bobs
        .call("claim", json!({ "what": "key:deploy" }))
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "claimed");
    assert_eq!(refused["claim"], claim);
    let listed = bobs.call("list_claims", json!({})).await.ok();
    assert_eq!(listed["claims"], json!([claim]));
    let (_, rest) = app.rest(&bob).get("/api/claims").await;
    assert_eq!(rest, listed, "the REST twin lists the same");
    let refused = bobs
        .call("release", json!({ "claim_id": claim["id"] }))
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "forbidden");
    let released = alices
        .call("release", json!({ "claim_id": claim["id"] }))
        .await
        .ok();
    assert_eq!(released["claim"], claim);
    let listed = bobs.call("list_claims", json!({})).await.ok();
    assert_eq!(listed["claims"], json!([]));
    alices.close().await.unwrap();
    bobs.close().await.unwrap();
}

#[tokio::test]
async fn the_page_shows_what_is_owed_acknowledgements_and_who_holds_what() {
    let app = spawn_app().await;
    let alice = app.add_named("alice", "Alice").await;
    let bob = app.add_named("bob", "Bob").await;
    let (alices, bobs) = (app.rest(&alice), app.rest(&bob));
    let question = alices
        .send(
            "bob",
            "Which **port** does staging use?",
            json!({ "type": "QUESTION" }),
        )
        .await;
    let task = alices
        .send("bob", "Rotate the staging key", json!({ "expects": "ack" }))
        .await;
    let (status, _) = bobs
        .post(
            "/api/claims",
            json!({ "what": "src/billing/**", "repo": "github.com/org/app", "note": "<b>fixing</b> rounding" }),
        )
        .await;
    assert_eq!(status, 201);

    let (status, bobs_page) = crate::support::page(&app, "/", &bob).await;
    assert_eq!(status, 200);
    let owed = bobs_page
        .split("You owe")
        .nth(1)
        .expect("bob's page lists what he owes");
    assert!(owed.contains("Which port does staging use?"), "{owed}");
    assert!(owed.contains("from Alice · reply expected"), "{owed}");
    assert!(owed.contains("Rotate the staging key") && owed.contains("ack expected"));
    let claims = bobs_page
        .split("Claimed work")
        .nth(1)
        .expect("claims are listed");
    assert!(
        claims.contains("<code>src/billing/**</code> in github.com/org/app"),
        "{claims}"
    );
    assert!(
        claims.contains("&#60;b&#62;fixing&#60;/b&#62; rounding"),
        "a note is text: {claims}"
    );
    let (_, alices_page) = crate::support::page(&app, "/", &alice).await;
    let owed = alices_page
        .split("Owed to you")
        .nth(1)
        .expect("alice's lists what she is owed");
    assert!(owed.contains("to Bob · reply expected"), "{owed}");
    assert!(!alices_page.contains("You owe"));

    // Acknowledged: gone from both lists, and its thread says so.
    let id = task["message_id"].as_i64().unwrap();
    let (status, _) = bobs
        .post(
            &format!("/api/messages/{id}/ack"),
            json!({ "result": "done", "note": "rotated" }),
        )
        .await;
    assert_eq!(status, 200);
    let (_, bobs_page) = crate::support::page(&app, "/", &bob).await;
    let owed = bobs_page.split("You owe").nth(1).unwrap();
    let owed = owed.split("Claimed work").next().unwrap();
    assert!(
        owed.contains("Which port") && !owed.contains("Rotate the staging key"),
        "{owed}"
    );
    let thread = task["thread_id"].as_i64().unwrap();
    let (_, thread_page) = crate::support::page(&app, &format!("/threads/{thread}"), &alice).await;
    assert!(
        thread_page.contains("acked: done — rotated"),
        "{thread_page}"
    );
    let thread = question["thread_id"].as_i64().unwrap();
    let (_, thread_page) = crate::support::page(&app, &format!("/threads/{thread}"), &alice).await;
    assert!(
        thread_page.contains("waiting · reply expected"),
        "{thread_page}"
    );
}

use base64::Engine as _;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A PNG's first bytes, and a little more: what the relay checks.
fn png() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend((0..200u8).map(|i| i.wrapping_mul(7)));
    png
}

const DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-old\n+new ✓\n";

#[tokio::test]
async fn files_travel_byte_for_byte_and_come_back_as_downloads() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    let (alices, bobs) = (app.rest(&alice), app.rest(&bob));
    let sent = alices
        .send(
            "bob",
            "The failing diff and a screenshot",
            json!({ "attachments": [
                { "name": "fix.diff", "content_type": "text/x-diff", "data_base64": b64(DIFF.as_bytes()) },
                { "name": "screen shot é.png", "content_type": "image/png", "data_base64": b64(&png()) },
            ] }),
        )
        .await;
    let id = sent["message_id"].as_i64().unwrap();
    let listed = bobs.message(id).await["attachments"].clone();
    assert_eq!(
        listed,
        json!([
            { "n": 1, "name": "fix.diff", "content_type": "text/x-diff", "size": DIFF.len(),
              "url": format!("/api/messages/{id}/attachments/1") },
            { "n": 2, "name": "screen shot é.png", "content_type": "image/png", "size": png().len(),
              "url": format!("/api/messages/{id}/attachments/2") },
        ])
    );

    let fetch = |token: Option<&str>, n: u32| {
        let mut request =
            crate::support::http().get(format!("{}/api/messages/{id}/attachments/{n}", app.url()));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let diff = fetch(Some(&bob), 1).await.unwrap();
    assert_eq!(diff.status(), 200);
    let headers = diff.headers().clone();
    assert_eq!(headers["content-type"], "text/x-diff; charset=utf-8");
    assert_eq!(
        headers["content-disposition"],
        "attachment; filename=\"fix.diff\"; filename*=UTF-8''fix.diff"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["content-security-policy"], "sandbox");
    assert_eq!(diff.bytes().await.unwrap(), DIFF.as_bytes());
    let image = fetch(Some(&alice), 2).await.unwrap();
    assert_eq!(image.headers()["content-type"], "image/png");
    assert_eq!(
        image.headers()["content-disposition"],
        "attachment; filename=\"screen shot _.png\"; filename*=UTF-8''screen%20shot%20%C3%A9.png"
    );
    assert_eq!(image.bytes().await.unwrap(), png());
    // Strangers get nothing; a file that is not there is 404.
    assert_eq!(fetch(None, 1).await.unwrap().status(), 401);
    assert_eq!(
        fetch(Some("xtalk_not-a-token"), 1).await.unwrap().status(),
        401
    );
    assert_eq!(fetch(Some(&bob), 3).await.unwrap().status(), 404);
    // A type kept before types were checked, which no header can hold, is
    // served as plain bytes rather than failing every download.
    app.sql(
        &format!(
            r#"UPDATE messages SET attachments = replace(attachments, '"text/x-diff"', '"text/a\u0007b"') WHERE id = {id}"#
        ),
        |conn, query| conn.execute(query, []).unwrap(),
    );
    let kept = fetch(Some(&bob), 1).await.unwrap();
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.headers()["content-type"], "application/octet-stream");
    assert_eq!(kept.bytes().await.unwrap(), DIFF.as_bytes());

    // A channel post carries files too; the page links them, never shows them.
    let (status, posted) = alices
        .post(
            "/api/channels/ops/messages",
            json!({ "body": "the log", "attachments": [
                { "name": "build.log", "content_type": "text/plain", "data_base64": b64(b"error: E0432\n") },
                { "name": "graph.png", "content_type": "image/png", "data_base64": b64(&png()) },
            ] }),
        )
        .await;
    assert_eq!(status, 201, "{posted}");
    let (_, page) = crate::support::page(&app, "/channels/ops", &bob).await;
    let post = posted["id"].as_i64().unwrap();
    assert!(
        page.contains(&format!(
            "<a href=\"/api/messages/{post}/attachments/1\" download>build.log</a>"
        )),
        "{page}"
    );
    assert!(!page.contains("<img"), "no image inline");
    let (status, bytes) =
        crate::support::page(&app, &format!("/api/messages/{post}/attachments/1"), &bob).await;
    assert_eq!(
        (status, bytes.as_str()),
        (200, "error: E0432\n"),
        "the page's credentials fetch it"
    );

    // Purged with their message.
    app.sql(
        &format!("UPDATE messages SET expires_at = 1 WHERE id = {id}"),
        |conn, sql| conn.execute(sql, []).unwrap(),
    );
    assert_eq!(
        fetch(Some(&bob), 1).await.unwrap().status(),
        404,
        "gone with its message"
    );
    app.running.state.relay.purge_expired().await.unwrap();
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM attachments WHERE message_id = {id}"
        )),
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM attachments"),
        2,
        "the post's stay"
    );
}

#[tokio::test]
async fn a_file_that_breaks_the_rules_is_refused_and_nothing_is_kept() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    app.add_person("bob").await;
    let alices = app.rest(&alice);
    let file = |name: &str, content_type: &str, bytes: &[u8]| json!({ "name": name, "content_type": content_type, "data_base64": b64(bytes) });
    let text = file("a.txt", "text/plain", b"hello");
    let big = vec![b'a'; (1 << 20) + 1];
    let cases = [
        (json!([text, text, text, text, text]), 400, "at most 4"),
        (json!([file("a.txt", "text/plain", &big)]), 413, "bytes"),
        (
            json!([file("a.pdf", "application/pdf", b"%PDF-1.7")]),
            400,
            "not taken",
        ),
        (
            json!([file("a.txt", &format!("text/{}", "a".repeat(200)), b"x")]),
            400,
            "a media type",
        ),
        (
            json!([file("a.txt", "text/a\u{7}b", b"x")]),
            400,
            "a media type",
        ),
        (
            json!([file("a.png", "image/png", b"GIF89a not a png")]),
            400,
            "not a image/png",
        ),
        (
            json!([file("a.bin", "text/plain", &[0xff, 0xfe, 0x00])]),
            400,
            "not UTF-8",
        ),
        (
            json!([file("../a.txt", "text/plain", b"x")]),
            400,
            "without /",
        ),
        (
            json!([{ "name": "a.txt", "content_type": "text/plain", "data_base64": "!!!" }]),
            400,
            "not base64",
        ),
        (
            json!([file(
                "creds.env",
                "text/plain",
                b"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
            )]),
            422,
            "refused",
        ),
    ];
    let before = alices.stored_messages().await;
    for (attachments, status, says) in cases {
        let (got, refused) = alices
            .post(
                "/api/messages",
                json!({ "to": "bob", "body": "see attached", "attachments": attachments }),
            )
            .await;
        assert_eq!(got, status, "{says}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{says}: {message}");
    }
    assert_eq!(alices.stored_messages().await, before);
    assert_eq!(app.count("SELECT count(*) FROM attachments"), 0);

    // Files count against the daily quota as bodies do.
    let app =
        crate::support::spawn_app_with(|config| config.settings.max_bytes_per_day = 4096).await;
    let alice = app.add_person("alice").await;
    app.add_person("bob").await;
    let (status, refused) = app
        .rest(&alice)
        .post(
            "/api/messages",
            json!({ "to": "bob", "body": "x", "attachments": [file("a.txt", "text/plain", &[b'a'; 5000])] }),
        )
        .await;
    assert_eq!(status, 429, "{refused}");
}

#[tokio::test]
async fn files_are_the_same_over_mcp() {
    let Pair {
        app,
        bob,
        alices,
        bobs,
        ..
    } = Pair::start().await;
    let sent = alices
        .call(
            "send_message",
            json!({ "to": "bob", "body": "two files", "attachments": [
                { "name": "fix.diff", "content_type": "text/x-diff", "data_base64": b64(DIFF.as_bytes()) },
                { "name": "shot.png", "content_type": "image/png", "data_base64": b64(&png()) },
            ] }),
        )
        .await
        .ok();
    let id = sent["message_id"].as_i64().unwrap();
    let inbox = bobs.call("check_inbox", json!({})).await.ok();
    assert_eq!(inbox["messages"][0]["attachments"][1]["name"], "shot.png");

    let session = crate::support::RawSession::open(&app.url(), &bob).await;
    let raw = |n: u32| {
        let call = session.call(7, "get_attachment", json!({ "message_id": id, "n": n }));
        async move {
            crate::support::rpc_messages(call.send().await.unwrap())
                .await
                .remove(0)
        }
    };
    let text = raw(1).await;
    assert_eq!(
        text["result"]["content"],
        json!([{ "type": "text", "text": DIFF }]),
        "{text}"
    );
    let image = raw(2).await;
    assert_eq!(
        image["result"]["content"],
        json!([{ "type": "image", "data": b64(&png()), "mimeType": "image/png" }]),
        "{image}"
    );
    let missing = bobs
        .call("get_attachment", json!({ "message_id": id, "n": 9 }))
        .await
        .tool_error();
    assert_eq!(missing["error"]["code"], "not_found");
    let refused = alices
        .call(
            "send_message",
            json!({ "to": "bob", "body": "x", "attachments": [
                { "name": "k.txt", "content_type": "text/plain", "data_base64": b64(b"key AKIAIOSFODNN7EXAMPLE") },
            ] }),
        )
        .await
        .tool_error();
    assert_eq!(refused["error"]["code"], "secret_refused");
    alices.close().await.unwrap();
    bobs.close().await.unwrap();
}
