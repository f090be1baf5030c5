//! Several relays on one PostgreSQL database: two real relay processes,
//! each woken by the other's commits, sharing one inbox and surviving the
//! loss of the other or a restart of the database.

use crate::postgres::{Postgres, dedicated, fresh_database};
use crate::support::{LogWatch, Mcp, RawSession, http, spawn_app_with};
use crosstalk::config::Database;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};

/// A relay process serving the database at `url`.
struct Instance {
    child: Child,
    url: String,
    log: Option<LogWatch>,
    _dir: tempfile::TempDir,
}

impl Instance {
    fn start(database: &str) -> Instance {
        Instance::logging(database, "crosstalk=info")
    }

    /// A relay process logging as `RUST_LOG=filter` asks.
    fn logging(database: &str, filter: &str) -> Instance {
        crosstalk::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["serve", "--port", "0"])
            .env("RELAY_DB", dir.path().join("unused.db"))
            .env("RELAY_DATABASE_URL", database)
            .env("RUST_LOG", filter)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = LogWatch::new(&mut child);
        let url = log.serving_url();
        Instance {
            child,
            url,
            log: Some(log),
            _dir: dir,
        }
    }

    /// Ends the process at once, as a crash or `kill -9` would.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Ends the process; returns everything it logged.
    fn log(mut self) -> String {
        self.kill();
        self.log.take().expect("the log").whole()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Adds people to the database at `url`, as `crosstalk add` does; returns
/// their tokens.
async fn add_people(url: &str, handles: &[&str]) -> Vec<String> {
    let database = Database {
        db: "unused.db".into(),
        database_url: Some(url.parse().unwrap()),
        sqlite_sync: Default::default(),
    };
    let team = crosstalk::server::open_team(&database, true).await.unwrap();
    let mut tokens = Vec::new();
    for handle in handles {
        tokens.push(
            team.add(handle, None)
                .await
                .unwrap()
                .token
                .expose()
                .to_owned(),
        );
    }
    tokens
}

async fn send(relay: &str, token: &str, to: &str, body: &str) -> reqwest::Response {
    http()
        .post(format!("{relay}/api/messages"))
        .bearer_auth(token)
        .json(&json!({ "to": to, "body": body }))
        .send()
        .await
        .unwrap()
}

/// The JSON a GET of `url` answers with.
async fn get_json(url: String, token: &str) -> Value {
    let answer = http().get(url).bearer_auth(token).send().await.unwrap();
    answer.json().await.unwrap()
}

/// Claims the inbox, waiting up to `timeout_s` for a message.
async fn claim(relay: &str, token: &str, timeout_s: u32) -> Vec<Value> {
    let answer = get_json(format!("{relay}/api/inbox?timeout_s={timeout_s}"), token).await;
    match answer["messages"].as_array() {
        Some(messages) => messages.clone(),
        None => panic!("claiming answered {answer}"),
    }
}

/// The ids of every live post in `channel`, read page by page.
async fn channel_ids(relay: &str, token: &str, channel: &str) -> BTreeSet<i64> {
    let mut ids = BTreeSet::new();
    loop {
        let since = ids.last().copied().unwrap_or(0);
        let url = format!("{relay}/api/channels/{channel}/messages?since_id={since}&limit=200");
        let page = get_json(url, token).await;
        let messages = page["messages"].as_array().unwrap();
        if messages.is_empty() {
            return ids;
        }
        ids.extend(messages.iter().map(|m| m["id"].as_i64().unwrap()));
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_send_on_one_relay_wakes_a_waiter_on_the_other() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let (alice, bob) = (&tokens[0], &tokens[1]);
    // A is a process; B runs here, so the test sees its waits park before
    // A sends: each message must come through the wake-up, not a look.
    let a = Instance::start(&database);
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let b = spawn_app_with(|config| config.database_url = Some(url)).await;
    let mut parked = b.running.state.relay.parked_waits();
    for n in 0..20 {
        let before = *parked.borrow_and_update();
        let waiting = tokio::spawn({
            let (url, bob) = (b.url(), bob.clone());
            async move { claim(&url, &bob, 30).await }
        });
        parked.wait_for(|p| *p > before).await.unwrap();
        let body = format!("question {n}");
        assert_eq!(send(&a.url, alice, "bob", &body).await.status(), 201);
        let woken = waiting.await.unwrap();
        assert_eq!(woken.len(), 1, "{woken:?}");
        assert_eq!(woken[0]["body"], body);
    }
    // A channel wait on B is woken by a post made on A.
    let agent = Mcp::connect(&b.url(), alice).await.unwrap();
    let before = *parked.borrow_and_update();
    let waiting = tokio::spawn(async move {
        agent
            .call(
                "wait_for_message",
                json!({ "channel": "ops", "since_id": 0, "timeout_s": 30 }),
            )
            .await
            .ok()
    });
    parked.wait_for(|p| *p > before).await.unwrap();
    let posted: Value = http()
        .post(format!("{}/api/channels/ops/messages", a.url))
        .bearer_auth(bob)
        .json(&json!({ "body": "deployed" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waiting.await.unwrap()["messages"][0]["id"], posted["id"]);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn four_sessions_on_two_relays_claim_each_message_once() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let (alice, bob) = (tokens[0].clone(), tokens[1].clone());
    let relays = [Instance::start(&database), Instance::start(&database)];
    const MESSAGES: usize = 1000;
    let mut sessions = Vec::new();
    for n in 0..4 {
        sessions.push(Mcp::connect(&relays[n % 2].url, &bob).await.unwrap());
    }
    let done = tokio_util::sync::CancellationToken::new();
    let claimers: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let done = done.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let claimed = session
                        .call("check_inbox", json!({ "timeout_seconds": 1 }))
                        .await
                        .ok();
                    let messages = claimed["messages"].as_array().unwrap().clone();
                    if messages.is_empty() && done.is_cancelled() {
                        return got;
                    }
                    got.extend(messages.iter().map(|m| m["id"].as_i64().unwrap()));
                }
            })
        })
        .collect();
    let urls: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();
    let senders: Vec<_> = (0..4)
        .map(|s| {
            let (url, alice) = (urls[s % 2].clone(), alice.clone());
            tokio::spawn(async move {
                let mut sent = Vec::new();
                for n in 0..MESSAGES / 4 {
                    let answer = send(&url, &alice, "bob", &format!("{s}/{n}")).await;
                    assert_eq!(answer.status(), 201);
                    sent.push(
                        answer.json::<Value>().await.unwrap()["message_id"]
                            .as_i64()
                            .unwrap(),
                    );
                }
                sent
            })
        })
        .collect();
    let mut sent = BTreeSet::new();
    for sender in senders {
        sent.extend(sender.await.unwrap());
    }
    done.cancel();
    let mut claimed = Vec::new();
    for claimer in claimers {
        claimed.extend(claimer.await.unwrap());
    }
    let distinct: BTreeSet<i64> = claimed.iter().copied().collect();
    assert_eq!(
        claimed.len(),
        distinct.len(),
        "a message was handed out twice"
    );
    assert_eq!(distinct, sent, "every message sent was claimed");
    assert_eq!(sent.len(), MESSAGES);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_killed_relay_loses_no_acknowledged_message_and_the_other_serves_on() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let (alice, bob) = (tokens[0].clone(), tokens[1].clone());
    let mut a = Instance::start(&database);
    let b = Instance::start(&database);
    // Writers on both relays, posting until their relay stops answering.
    let writers: Vec<_> = [a.url.clone(), b.url.clone()]
        .into_iter()
        .flat_map(|url| std::iter::repeat_n(url, 4))
        .enumerate()
        .map(|(w, url)| {
            let alice = alice.clone();
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for n in 0..300 {
                    let answer = http()
                        .post(format!("{url}/api/channels/load/messages"))
                        .bearer_auth(&alice)
                        .json(&json!({ "body": format!("{w}/{n}") }))
                        .send()
                        .await;
                    let Ok(answer) = answer else { break };
                    if answer.status() != 201 {
                        break;
                    }
                    let Ok(posted) = answer.json::<Value>().await else {
                        break;
                    };
                    acknowledged.push(posted["id"].as_i64().unwrap());
                }
                acknowledged
            })
        })
        .collect();
    // Under load (once 100 posts are in), A dies.
    while channel_ids(&b.url, &bob, "load").await.len() < 100 {
        tokio::task::yield_now().await;
    }
    a.kill();
    let mut acknowledged = BTreeSet::new();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    // B still serves: a new post, and every acknowledged one is there.
    let after = http()
        .post(format!("{}/api/channels/load/messages", b.url))
        .bearer_auth(&alice)
        .json(&json!({ "body": "after the crash" }))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 201);
    let stored = channel_ids(&b.url, &bob, "load").await;
    let lost: Vec<&i64> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(acknowledged.len() >= 100);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_database_restart_is_survived_and_waiters_resync() {
    let server: Postgres = dedicated();
    let database = server.database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let (alice, bob) = (tokens[0].clone(), tokens[1].clone());
    // A is a process; B runs here, so the test can see its waiter park.
    let a = Instance::start(&database);
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let b = spawn_app_with(|config| {
        config.database_url = Some(url);
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    assert_eq!(send(&a.url, &alice, "bob", "before").await.status(), 201);
    assert_eq!(claim(&b.url(), &bob, 5).await[0]["body"], "before");

    // Bob waits on B; the database restarts under him; a message sent on
    // A once it is back wakes him, whether or not B's listener had
    // reconnected by the time it committed.
    let mut parked = b.running.state.relay.parked_waits();
    let before = *parked.borrow_and_update();
    let waiting = tokio::spawn({
        let (url, bob) = (b.url(), bob.clone());
        async move { claim(&url, &bob, 30).await }
    });
    parked.wait_for(|n| *n > before).await.unwrap();
    let readyz = |url: &str| {
        let url = format!("{url}/readyz");
        async move {
            let answer = http().get(url).send().await.unwrap();
            (answer.status(), answer.json::<Value>().await.unwrap())
        }
    };
    assert_eq!(readyz(&a.url).await.0, 200);
    server.stop();
    // While it is down, the relay says it is not ready, and why.
    let (status, said) = readyz(&a.url).await;
    assert_eq!(status, 503);
    assert_eq!(
        said,
        json!({"error": {"code": "not_ready", "message": "the store does not answer"}})
    );
    // A send is refused with 503 and a time to retry.
    let refused = send(&a.url, &alice, "bob", "while down").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let said: Value = refused.json().await.unwrap();
    assert_eq!(said["error"]["code"], "unavailable");
    server.start();
    // Once it is back, a send goes through (A's pool drops the connections
    // the restart closed): until then it may be refused, never lost.
    let mut acknowledged = false;
    for _ in 0..50 {
        let answer = send(&a.url, &alice, "bob", "after").await;
        if answer.status() == 201 {
            acknowledged = true;
            break;
        }
        assert_eq!(answer.status(), 503);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(acknowledged, "A never wrote again after the restart");
    assert_eq!(readyz(&a.url).await.0, 200, "ready again");
    let woken = waiting.await.unwrap();
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert_eq!(woken[0]["body"], "after");
    // Nothing is lost or handed out twice.
    assert!(claim(&a.url, &bob, 0).await.is_empty());

    // B's metrics tell the story: its listener lost the database and came
    // back, it handed on A's messages, its pool is there to see, and a
    // message sent on B goes through its group commit.
    assert_eq!(send(&b.url(), &alice, "bob", "on B").await.status(), 201);
    let (text, scraped) = crate::metrics::scrape(b.running.metrics_addr.unwrap()).await;
    for family in crate::metrics::dashboard_families() {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard's {family} is not served on PostgreSQL"
        );
    }
    let value = |name: &str, labels: &[(&str, &str)]| crate::metrics::value(&scraped, name, labels);
    assert!(value("crosstalk_postgres_listener_reconnects_total", &[]) >= 1.0);
    // (A histogram's value here is its count: two messages handed on.)
    assert!(value("crosstalk_postgres_listener_lag_seconds", &[]) >= 2.0);
    assert!(value("crosstalk_postgres_pool_max_connections", &[]) >= 1.0);
    assert!(value("crosstalk_postgres_pool_connections", &[("state", "idle")]) >= 1.0);
    assert!(value("crosstalk_store_commit_writes", &[]) >= 1.0);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_session_one_relay_holds_is_lost_on_the_other() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice"]).await;
    let (a, b) = (Instance::start(&database), Instance::start(&database));
    let on_a = RawSession::open(&a.url, &tokens[0]).await;
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" });
    assert_eq!(on_a.post(ping.clone()).send().await.unwrap().status(), 200);
    // The same session sent to B: not found, as the MCP spec answers a
    // lost session, so the client opens a new one (there, or on A).
    let on_b = RawSession {
        url: b.url.clone(),
        ..on_a.with_token(&tokens[0])
    };
    let lost = on_b.post(ping.clone()).send().await.unwrap();
    assert_eq!(lost.status(), 404);
    let said: Value = lost.json().await.unwrap();
    assert_eq!(said["error"]["code"], "not_found");
    assert_eq!(
        on_a.post(ping).send().await.unwrap().status(),
        200,
        "A still holds it"
    );
    RawSession::open(&b.url, &tokens[0]).await;
    // The database is named by its variable in the log, never by its URL.
    let log = a.log();
    assert!(
        log.contains("db=\"PostgreSQL (RELAY_DATABASE_URL)\""),
        "{log}"
    );
    assert!(!log.contains(&database), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn migrate_to_postgres_copies_people_and_live_messages_keeping_ids() {
    use crate::support::{get, post, spawn_app};
    let database = fresh_database().await;
    let sqlite = spawn_app().await;
    let alice = sqlite.add_person("alice").await;
    let bob = sqlite.add_person("bob").await;
    let (_, opened) = post(
        &sqlite,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "which migration?" }),
    )
    .await;
    let thread = opened["thread_id"].as_i64().unwrap();
    assert_eq!(claim(&sqlite.url(), &bob, 0).await.len(), 1);
    post(
        &sqlite,
        "/api/messages",
        &bob,
        json!({ "to": "alice", "body": "0042", "thread_id": thread }),
    )
    .await;
    for body in ["deployed billing", "gone soon", "lunch?"] {
        post(
            &sqlite,
            "/api/channels/ops/messages",
            &alice,
            json!({ "body": body }),
        )
        .await;
    }
    sqlite.sql(
        "UPDATE messages SET expires_at = 1 WHERE body = 'gone soon'",
        |conn, sql| conn.execute(sql, []).unwrap(),
    );
    // What is owed and acknowledged, and a claim, go along.
    let (_, task) = post(
        &sqlite,
        "/api/messages",
        &alice,
        json!({ "to": "bob", "body": "rotate the key", "expects": "ack", "due_seconds": 3600,
                "attachments": [{ "name": "steps.md", "content_type": "text/markdown",
                                  "data_base64": "MS4gcm90YXRlCjIuIGRlcGxveQo=" }] }),
    )
    .await;
    let task = task["message_id"].as_i64().unwrap();
    let (status, _) = post(
        &sqlite,
        &format!("/api/messages/{task}/ack"),
        &bob,
        json!({ "result": "blocked", "note": "no access yet" }),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(
        &sqlite,
        "/api/claims",
        &alice,
        json!({ "what": "src/**", "repo": "github.com/org/app", "note": "moving it" }),
    )
    .await;
    assert_eq!(status, 201);
    let (_, claims_before) = get(&sqlite, "/api/claims", &bob).await;
    let (_, task_before) = get(&sqlite, &format!("/api/messages/{task}"), &alice).await;
    assert_eq!(
        task_before["message"]["delivery"]["ack"]["result"],
        "blocked"
    );
    let thread_path = format!("/api/threads/{thread}");
    // Read as bob, whose message in it was claimed: reading the thread as
    // alice would mark her waiting answer read.
    let (_, thread_before) = get(&sqlite, &thread_path, &bob).await;
    let db = sqlite.db.clone();
    sqlite.running.stop().await.unwrap();

    let migrate = || {
        Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .arg("migrate-to-postgres")
            .env("RELAY_DB", &db)
            .env("RELAY_DATABASE_URL", &database)
            .output()
            .unwrap()
    };
    let copied = migrate();
    let said = String::from_utf8_lossy(&copied.stdout);
    assert!(
        copied.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert!(
        said.contains("2 people, 5 messages in 2 threads and their channels, 3 inbox rows"),
        "{said}"
    );
    assert!(!database.contains("password") && !said.contains(&database));

    // A relay on PostgreSQL: the same tokens, ids, thread and inboxes.
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let relay = spawn_app_with(|config| config.database_url = Some(url)).await;
    let (status, thread_after) = get(&relay, &thread_path, &bob).await;
    assert_eq!(status, 200);
    assert_eq!(thread_after, thread_before);
    assert_eq!(get(&relay, "/api/claims", &bob).await.1, claims_before);
    let task_path = format!("/api/messages/{task}");
    assert_eq!(get(&relay, &task_path, &alice).await.1, task_before);
    let file = http()
        .get(format!("{}{task_path}/attachments/1", relay.url()))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(
        file.text().await.unwrap(),
        "1. rotate\n2. deploy\n",
        "its file, byte for byte"
    );
    let (_, channel) = get(&relay, "/api/channels/ops/messages?since_id=0", &bob).await;
    let bodies: Vec<&str> = channel["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["deployed billing", "lunch?"], "live messages only");
    let waiting = claim(&relay.url(), &alice, 0).await;
    assert_eq!(waiting.len(), 1, "alice's unclaimed answer waits");
    assert_eq!(waiting[0]["body"], "0042");
    assert!(
        claim(&relay.url(), &bob, 0).await.is_empty(),
        "bob's was claimed"
    );
    let (_, found) = get(&relay, "/api/search?q=billing", &bob).await;
    assert_eq!(found["messages"].as_array().unwrap().len(), 1);
    let (_, next) = post(
        &relay,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": "on postgres" }),
    )
    .await;
    let last_before = channel["messages"][1]["id"].as_i64().unwrap();
    assert!(next["id"].as_i64().unwrap() > last_before, "ids carry on");

    // Into a database that holds a relay: refused, nothing changed.
    let again = migrate();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already holds"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn two_stores_purging_one_database_together_purge_each_message_once() {
    use crosstalk::model::{Channel, Handle, now_millis};
    use crosstalk::store::{Conversation, NewMessage, PostgresStore, RecipientCheck, Store};
    let database = fresh_database().await;
    let (one, other) = (
        PostgresStore::connect(&database).await.unwrap(),
        PostgresStore::connect(&database).await.unwrap(),
    );
    let now = now_millis();
    for n in 0..1_000 {
        let conversation = match n % 3 {
            0 => Conversation::NewThread,
            _ => Conversation::Channel(Channel::parse(&format!("c{}", n % 5)).unwrap()),
        };
        one.insert_message(NewMessage {
            conversation,
            from: Handle::parse("alice").unwrap(),
            to: (n % 2 == 0).then(|| Handle::parse("bob").unwrap()),
            check_to: RecipientCheck::None,
            kind: "NOTE".into(),
            body: format!("message {n}"),
            reply_to: None,
            created_at: now,
            // Half of them expire.
            expires_at: if n % 2 == 0 {
                now + 1
            } else {
                now + 86_400_000
            },
            expects: crosstalk::model::Expects::Nothing,
            due_at: None,
            attachments: Vec::new(),
        })
        .await
        .unwrap();
    }
    let later = now + 10;
    let (a, b) = tokio::join!(one.purge_expired(later, 0), other.purge_expired(later, 0));
    let (a, b) = (a.unwrap(), b.unwrap());
    // Each expired message is purged once (one store purges while the
    // other finds it purging), and the summaries stay true.
    assert_eq!(a + b, 500, "{a} + {b}");
    assert_eq!(one.purge_expired(later, 0).await.unwrap(), 0);
    let counted: u64 = one
        .channels(later, None, 100)
        .await
        .unwrap()
        .iter()
        .map(|c| c.message_count)
        .sum();
    let live_in_channels = (0..1_000).filter(|n| n % 2 == 1 && n % 3 != 0).count();
    assert_eq!(counted, live_in_channels as u64);
    assert!(
        one.claim_inbox(&Handle::parse("bob").unwrap(), later, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn a_session_whose_relay_stopped_is_taken_up_by_another() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice"]).await;
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let a = spawn_app_with(|config| config.database_url = Some(url.clone())).await;
    let b = Instance::start(&database);
    let on_a = RawSession::open(&a.url(), &tokens[0]).await;
    let on_b = RawSession {
        url: b.url.clone(),
        ..on_a.with_token(&tokens[0])
    };
    let ping = |n: u64| json!({ "jsonrpc": "2.0", "id": n, "method": "ping" });
    assert_eq!(
        on_b.post(ping(2)).send().await.unwrap().status(),
        404,
        "A holds it"
    );

    // A stops (as `systemctl stop` does): B takes the session up.
    let addr = a.running.addr;
    a.running.stop().await.unwrap();
    assert_eq!(on_b.post(ping(3)).send().await.unwrap().status(), 200);
    let tools = on_b.call(4, "list_peers", json!({})).send().await.unwrap();
    assert_eq!(tools.status(), 200);

    // A comes back at its address: now B holds the session, and lives.
    let again = spawn_app_with(|config| {
        config.database_url = Some(url);
        config.listen = addr;
    })
    .await;
    let back_on_a = RawSession {
        url: again.url(),
        ..on_a.with_token(&tokens[0])
    };
    assert_eq!(back_on_a.post(ping(5)).send().await.unwrap().status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn no_body_or_key_reaches_the_log_on_postgresql_at_any_level() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let relay = Instance::logging(&database, "trace");
    let marker = "body-marker-5e1f0c";
    let sent = send(
        &relay.url,
        &tokens[0],
        "bob",
        &format!("the {marker} is here"),
    )
    .await;
    assert_eq!(sent.status(), 201);
    assert_eq!(claim(&relay.url, &tokens[1], 0).await.len(), 1);
    // The page signs its forms with a key the store keeps.
    let page = http()
        .get(format!("{}/", relay.url))
        .basic_auth("bob", Some(&tokens[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let log = relay.log();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the log was verbose"
    );
    assert!(!log.contains(marker), "a body reached the log");
    for token in &tokens {
        assert!(!log.contains(token.as_str()), "a token reached the log");
    }
    // Nor the key, as a statement's parameter would show it.
    let store = crosstalk::store::PostgresStore::connect(&database)
        .await
        .unwrap();
    let key = crosstalk::store::Store::key(&store, "page").await.unwrap();
    assert!(
        !log.contains(&format!("{key:?}")),
        "the page's key reached the log"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn of_two_relays_claiming_the_same_work_at_once_exactly_one_wins() {
    let database = fresh_database().await;
    let tokens = add_people(&database, &["alice", "bob"]).await;
    let (alice, bob) = (tokens[0].clone(), tokens[1].clone());
    let a = Instance::start(&database);
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let b = spawn_app_with(|config| config.database_url = Some(url)).await;
    let claim_on = |relay: String, token: String, what: String| async move {
        let response = http()
            .post(format!("{relay}/api/claims"))
            .bearer_auth(token)
            .json(&json!({ "what": what, "repo": "github.com/org/app" }))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body)
    };
    for n in 0..20 {
        // Overlapping, not equal: a glob on one side, a file on the other.
        let (glob, file) = (format!("src/m{n}/**"), format!("src/m{n}/lib.rs"));
        let (one, other) = tokio::join!(
            claim_on(a.url.clone(), alice.clone(), glob),
            claim_on(b.url(), bob.clone(), file),
        );
        let mut statuses = [one.0, other.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [201, 409], "round {n}: {one:?} {other:?}");
        let (winner, loser) = if one.0 == 201 {
            (&one.1, &other.1)
        } else {
            (&other.1, &one.1)
        };
        assert_eq!(
            loser["claim"], winner["claim"],
            "the refusal names the winner's"
        );
    }
}
