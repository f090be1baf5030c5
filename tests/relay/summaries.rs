//! The overviews kept as messages commit: after any sends, replies, expiry
//! and purges, every summary equals what a full scan of the messages
//! computes; and a database from before them gets them built.

use crate::postgres::{client, fresh_database};
use crosstalk::model::{Channel, Handle, MessageId, Millis, ThreadId, now_millis};
use crosstalk::store::{
    Conversation, NewMessage, PostgresStore, RecipientCheck, SqliteStore, Store,
};
use proptest::prelude::*;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Arc;

type ChannelRow = (String, i64, i64, i64);
type ThreadRow = (i64, i64, String, i64, i64, String);
/// The channel and thread summaries of a database.
type Summaries = (Vec<ChannelRow>, Vec<ThreadRow>);

/// The summaries as stored: (channel, count, last id, last activity), and
/// (thread, count, opening, last id, last activity, people with how many
/// of its messages each sent or received), in one backend's SQL; then the
/// same as a full scan of the messages computes them.
struct Scan {
    channels: &'static str,
    threads: &'static str,
    scanned_channels: &'static str,
    scanned_threads: &'static str,
}

const SCANNED_CHANNELS: &str = "SELECT channel, count(*), max(id), max(created_at) FROM messages \
     WHERE channel IS NOT NULL GROUP BY channel ORDER BY channel";
const STORED_CHANNELS: &str = "SELECT channel, message_count, last_id, last_activity \
     FROM channel_summaries ORDER BY channel";

const SQLITE_SCAN: Scan = Scan {
    channels: STORED_CHANNELS,
    threads: "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, \
         (SELECT group_concat(key || ':' || value, ',') FROM \
          (SELECT key, value FROM json_each(t.people) ORDER BY key)) \
         FROM threads t LEFT JOIN messages f ON f.id = t.first_id ORDER BY t.id",
    scanned_channels: SCANNED_CHANNELS,
    scanned_threads: "SELECT m.thread_id, count(*), \
         (SELECT body FROM messages f WHERE f.thread_id = m.thread_id ORDER BY id LIMIT 1), \
         max(m.id), max(m.created_at), \
         (SELECT group_concat(h || ':' || n, ',') FROM (SELECT h, count(*) AS n FROM \
          (SELECT id, sender AS h FROM messages WHERE thread_id = m.thread_id \
           UNION SELECT id, recipient FROM messages WHERE thread_id = m.thread_id AND recipient IS NOT NULL) \
          GROUP BY h ORDER BY h)) \
         FROM messages m WHERE m.thread_id IS NOT NULL GROUP BY m.thread_id ORDER BY m.thread_id",
};

const POSTGRES_SCAN: Scan = Scan {
    channels: STORED_CHANNELS,
    threads: "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, \
         (SELECT string_agg(key || ':' || value, ',' ORDER BY key) FROM jsonb_each_text(t.people)) \
         FROM threads t LEFT JOIN messages f ON f.id = t.first_id ORDER BY t.id",
    scanned_channels: SCANNED_CHANNELS,
    scanned_threads: "SELECT m.thread_id, count(*), \
         (SELECT body FROM messages f WHERE f.thread_id = m.thread_id ORDER BY id LIMIT 1), \
         max(m.id), max(m.created_at), \
         (SELECT string_agg(h || ':' || n, ',' ORDER BY h) FROM (SELECT h, count(*) AS n FROM \
          (SELECT id, sender AS h FROM messages WHERE thread_id = m.thread_id \
           UNION SELECT id, recipient FROM messages WHERE thread_id = m.thread_id AND recipient IS NOT NULL) u \
          GROUP BY h) c) \
         FROM messages m WHERE m.thread_id IS NOT NULL GROUP BY m.thread_id ORDER BY m.thread_id",
};

/// Expires the `?1`/`$1` oldest live messages.
const EXPIRE_OLDEST: [&str; 2] = [
    "UPDATE messages SET expires_at = 0 WHERE id IN \
     (SELECT id FROM messages WHERE expires_at > 0 ORDER BY id LIMIT ?1)",
    "UPDATE messages SET expires_at = 0 WHERE id IN \
     (SELECT id FROM messages WHERE expires_at > 0 ORDER BY id LIMIT $1)",
];
/// Expires the live message at `?1`/`$1` modulo how many there are.
const EXPIRE_ONE: [&str; 2] = [
    "UPDATE messages SET expires_at = 0 WHERE id = (SELECT id FROM messages \
     WHERE expires_at > 0 ORDER BY id LIMIT 1 OFFSET (?1 % max(1, \
     (SELECT count(*) FROM messages WHERE expires_at > 0))))",
    "UPDATE messages SET expires_at = 0 WHERE id = (SELECT id FROM messages \
     WHERE expires_at > 0 ORDER BY id LIMIT 1 OFFSET ($1 % greatest(1, \
     (SELECT count(*) FROM messages WHERE expires_at > 0))))",
];
const ORPHANS: &str =
    "SELECT count(*) FROM inbox WHERE message_id NOT IN (SELECT id FROM messages)";

/// A store under test, and a way into its tables beside it.
enum Tables {
    Sqlite {
        db: PathBuf,
        _dir: Option<tempfile::TempDir>,
    },
    Postgres(tokio_postgres::Client),
}

impl Tables {
    async fn open() -> (Arc<dyn Store>, Tables) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("relay.db");
        let store = SqliteStore::open(&db).unwrap();
        let tables = Tables::Sqlite {
            db,
            _dir: Some(dir),
        };
        (Arc::new(store), tables)
    }

    async fn open_postgres() -> (Arc<dyn Store>, Tables) {
        let url = fresh_database().await;
        let store = PostgresStore::connect(&url).await.unwrap();
        (Arc::new(store), Tables::Postgres(client(&url).await))
    }

    async fn execute(&self, sql: [&str; 2], n: i64) {
        match self {
            Tables::Sqlite { db, .. } => {
                Connection::open(db).unwrap().execute(sql[0], [n]).unwrap();
            }
            Tables::Postgres(client) => {
                client.execute(sql[1], &[&n]).await.unwrap();
            }
        }
    }

    async fn count(&self, sql: &str) -> i64 {
        match self {
            Tables::Sqlite { db, .. } => Connection::open(db)
                .unwrap()
                .query_row(sql, [], |row| row.get(0))
                .unwrap(),
            Tables::Postgres(client) => client.query_one(sql, &[]).await.unwrap().get(0),
        }
    }

    /// The summaries as stored, and as a full scan computes them.
    async fn summaries_and_scan(&self) -> (Summaries, Summaries) {
        match self {
            Tables::Sqlite { db, .. } => {
                let conn = Connection::open(db).unwrap();
                let channels = |sql: &str| -> Vec<ChannelRow> {
                    conn.prepare(sql)
                        .unwrap()
                        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                        .unwrap()
                        .map(Result::unwrap)
                        .collect()
                };
                let threads = |sql: &str| -> Vec<ThreadRow> {
                    conn.prepare(sql)
                        .unwrap()
                        .query_map([], |r| {
                            Ok((
                                r.get(0)?,
                                r.get(1)?,
                                r.get(2)?,
                                r.get(3)?,
                                r.get(4)?,
                                r.get(5)?,
                            ))
                        })
                        .unwrap()
                        .map(Result::unwrap)
                        .collect()
                };
                let scan = SQLITE_SCAN;
                (
                    (channels(scan.channels), threads(scan.threads)),
                    (
                        channels(scan.scanned_channels),
                        threads(scan.scanned_threads),
                    ),
                )
            }
            Tables::Postgres(client) => {
                let channels = async |sql: &str| -> Vec<ChannelRow> {
                    let rows = client.query(sql, &[]).await.unwrap();
                    rows.iter()
                        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                        .collect()
                };
                let threads = async |sql: &str| -> Vec<ThreadRow> {
                    let rows = client.query(sql, &[]).await.unwrap();
                    rows.iter()
                        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                        .collect()
                };
                let scan = POSTGRES_SCAN;
                (
                    (channels(scan.channels).await, threads(scan.threads).await),
                    (
                        channels(scan.scanned_channels).await,
                        threads(scan.scanned_threads).await,
                    ),
                )
            }
        }
    }
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Step {
    /// A channel post in channel `n % 3`.
    Post(u8),
    /// Two to seven posts sent at once, over the channels in turn from
    /// `n % 3`: one group commit, on PostgreSQL, counts each channel once.
    Burst(u8),
    /// A direct message: a new thread, or a reply in thread `n` of those
    /// made; to someone else, or (`true`) a note to oneself.
    Send(Option<u8>, bool),
    /// The `n` oldest live messages expire.
    Expire(u8),
    /// Any message expires, by its position among the live ones.
    ExpireOne(u8),
    Purge,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => any::<u8>().prop_map(Step::Post),
        2 => any::<u8>().prop_map(Step::Burst),
        4 => (proptest::option::of(any::<u8>()), proptest::bool::weighted(0.2))
            .prop_map(|(reply, to_self)| Step::Send(reply, to_self)),
        1 => (1u8..6).prop_map(Step::Expire),
        1 => any::<u8>().prop_map(Step::ExpireOne),
        2 => Just(Step::Purge),
    ]
}

fn handle(name: &str) -> Handle {
    Handle::parse(name).unwrap()
}

/// Plays `steps` on a fresh store; checks the summaries after each purge
/// and at the end.
async fn play(
    steps: &[Step],
    (store, tables): (Arc<dyn Store>, Tables),
) -> Result<(), TestCaseError> {
    let mut threads: Vec<ThreadId> = Vec::new();
    let far: Millis = now_millis() + 86_400_000;
    for (n, step) in steps.iter().enumerate() {
        let people = [handle("alice"), handle("bob"), handle("carol")];
        let from = people[n % 3].clone();
        let message = |conversation, to: Option<Handle>| NewMessage {
            conversation,
            from: from.clone(),
            to,
            check_to: RecipientCheck::None,
            kind: "NOTE".into(),
            body: format!("message {n}"),
            reply_to: None,
            // Room between steps for a burst's posts, each a moment apart.
            created_at: 1_000 + 8 * n as Millis,
            expires_at: far,
            expects: crosstalk::model::Expects::Nothing,
            due_at: None,
            attachments: Vec::new(),
        };
        match step {
            Step::Post(c) => {
                let channel = Channel::parse(&format!("c{}", c % 3)).unwrap();
                let to = (c % 2 == 0).then(|| people[(n + 1) % 3].clone());
                store
                    .insert_message(message(Conversation::Channel(channel), to))
                    .await
                    .unwrap();
            }
            Step::Burst(c) => {
                let posts = (0..2 + c % 6).map(|i| {
                    let channel = Channel::parse(&format!("c{}", (c % 3 + i) % 3)).unwrap();
                    let to = (i % 2 == 0).then(|| people[(n + 1) % 3].clone());
                    let mut post = message(Conversation::Channel(channel), to);
                    post.created_at += Millis::from(i);
                    store.insert_message(post)
                });
                for stored in futures::future::join_all(posts).await {
                    stored.unwrap();
                }
            }
            Step::Send(reply, to_self) => {
                let to = Some(people[(n + usize::from(!to_self)) % 3].clone());
                let conversation = match reply {
                    Some(k) if !threads.is_empty() => {
                        Conversation::Thread(threads[*k as usize % threads.len()])
                    }
                    _ => Conversation::NewThread,
                };
                // A reply to a thread the purge emptied is refused: fine.
                if let Ok(stored) = store.insert_message(message(conversation, to)).await
                    && let Some(thread) = stored.place.thread()
                    && !threads.contains(&thread)
                {
                    threads.push(thread);
                }
            }
            Step::Expire(k) => tables.execute(EXPIRE_OLDEST, i64::from(*k)).await,
            Step::ExpireOne(k) => tables.execute(EXPIRE_ONE, i64::from(*k)).await,
            Step::Purge => {
                store.purge_expired(now_millis(), 0).await.unwrap();
                let (stored, scanned) = tables.summaries_and_scan().await;
                prop_assert_eq!(stored, scanned, "after step {}", n);
                let orphans = tables.count(ORPHANS).await;
                prop_assert_eq!(orphans, 0, "inbox rows outlive their message");
            }
        }
    }
    let (stored, scanned) = tables.summaries_and_scan().await;
    prop_assert_eq!(stored, scanned);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any history of sends, replies, posts, expiry and purges leaves every
    /// summary equal to a full scan.
    #[test]
    fn summaries_equal_a_full_scan_after_any_history(steps in proptest::collection::vec(step(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async { play(&steps, Tables::open().await).await })?;
    }

    /// The same on PostgreSQL, whose statements are its own.
    #[test]
    #[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
    fn summaries_equal_a_full_scan_after_any_history_on_postgres(steps in proptest::collection::vec(step(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async { play(&steps, Tables::open_postgres().await).await })?;
    }
}

#[tokio::test]
async fn summaries_follow_sends_replies_expiry_and_the_purge() {
    play(&scripted(), Tables::open().await).await.unwrap();
}

#[tokio::test]
#[ignore = "needs PostgreSQL (apt-get install postgresql); cargo test -- --ignored"]
async fn summaries_follow_sends_replies_expiry_and_the_purge_on_postgres() {
    play(&scripted(), Tables::open_postgres().await)
        .await
        .unwrap();
}

/// A history that opens, replies in, expires and empties threads and channels.
fn scripted() -> Vec<Step> {
    use Step::*;
    vec![
        Send(None, false),
        Send(Some(0), false),
        Post(0),
        Post(1),
        Burst(4),
        Send(None, false),
        Send(Some(1), true),
        Post(0),
        // The opening message of the first thread expires: its opening moves on.
        Expire(1),
        Purge,
        Send(Some(0), false),
        Post(2),
        Expire(3),
        Purge,
        // Everything expires: every summary goes.
        Expire(255),
        Purge,
    ]
}

#[tokio::test]
async fn a_database_from_before_the_summaries_gets_them_built() {
    // From before the summaries (version 2), from before their people were
    // counted (version 3), and from before they moved into the thread's
    // own row (version 6).
    for version in [2, 3, 6] {
        a_database_at(version).await;
    }
}

async fn a_database_at(version: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    {
        let conn = Connection::open(&db).unwrap();
        let migrations = crosstalk::store::sqlite::MIGRATIONS;
        for step in &migrations[..2] {
            conn.execute_batch(step).unwrap();
        }
        let far = now_millis() + 86_400_000;
        conn.execute_batch(&format!(
            "INSERT INTO threads (id, created_at) VALUES (1, 1), (2, 2);
             INSERT INTO messages (thread_id, channel, sender, recipient, type, body, created_at, expires_at) VALUES
               (1, NULL, 'alice', 'bob', 'QUESTION', 'which migration?', 10, {far}),
               (1, NULL, 'bob', 'alice', 'ANSWER', '0042', 11, {far}),
               (NULL, 'ops', 'carol', NULL, 'NOTE', 'deploying', 12, {far}),
               (2, NULL, 'carol', 'dave', 'NOTE', 'hello', 13, {far}),
               (NULL, 'ops', 'alice', 'carol', 'DONE', 'done', 14, {far});"
        ))
        .unwrap();
        for step in &migrations[2..version] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", version).unwrap();
        // As if the newest messages had been purged: ids must not go back.
        conn.execute(
            "UPDATE sqlite_sequence SET seq = 100 WHERE name = 'messages'",
            [],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&db).unwrap();
    let tables = Tables::Sqlite { db, _dir: None };
    let (stored, scanned) = tables.summaries_and_scan().await;
    assert_eq!(stored, scanned, "from version {version}");
    assert_eq!(stored.0, vec![("ops".to_owned(), 2, 5, 14)]);
    assert_eq!(stored.1[0].5, "alice:2,bob:2");
    let listed = store.threads(now_millis(), None, 10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].id, ThreadId(2), "latest activity first");
    assert_eq!(listed[1].opening, "which migration?");
    assert_eq!(
        listed[1]
            .people
            .iter()
            .map(|h| h.as_str())
            .collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    let found = store
        .search("migration", None, 10, now_millis())
        .await
        .unwrap();
    assert_eq!(
        found.len(),
        1,
        "from version {version}: the search index still finds it"
    );
    let next = store
        .insert_message(NewMessage {
            conversation: Conversation::Thread(ThreadId(1)),
            from: handle("bob"),
            to: Some(handle("alice")),
            check_to: RecipientCheck::None,
            kind: "NOTE".into(),
            body: "after the upgrade".into(),
            reply_to: None,
            created_at: 20,
            expires_at: now_millis() + 86_400_000,
            expects: crosstalk::model::Expects::Nothing,
            due_at: None,
            attachments: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(
        next.id,
        MessageId(101),
        "from version {version}: ids carry on"
    );
    let (stored, scanned) = tables.summaries_and_scan().await;
    assert_eq!(stored, scanned, "from version {version}, after a reply");
}

#[tokio::test]
async fn overviews_come_in_pages_and_count_what_each_person_has_not_read() {
    use crate::support::{get, http, post, spawn_app};
    use serde_json::json;
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    for channel in ["one", "two", "three"] {
        let (status, _) = post(
            &app,
            &format!("/api/channels/{channel}/messages"),
            &alice,
            json!({ "body": "hi" }),
        )
        .await;
        assert_eq!(status, 201);
    }
    let (_, first) = get(&app, "/api/channels?limit=2", &bob).await;
    let names: Vec<&str> = first["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["three", "two"]);
    let before = first["next_before"].as_i64().expect("a cursor for more");
    let (_, rest) = get(
        &app,
        &format!("/api/channels?limit=2&before={before}"),
        &bob,
    )
    .await;
    assert_eq!(rest, json!({ "channels": [rest["channels"][0].clone()] }));
    assert_eq!(rest["channels"][0]["name"], "one");

    // Unread, per person, from the last message each has read.
    for n in 0..2 {
        post(
            &app,
            "/api/channels/one/messages",
            &alice,
            json!({ "body": format!("more {n}") }),
        )
        .await;
    }
    let overview = |token: String| {
        let request = http()
            .get(format!("{}/", app.url()))
            .basic_auth("x", Some(token));
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let page = overview(bob.clone()).await;
    assert!(
        page.contains("<span class=\"hash\">#</span>one <span class=\"badge\" aria-label=\"3 unread\">3</span>"),
        "{page}"
    );
    let opened = http()
        .get(format!("{}/channels/one", app.url()))
        .basic_auth("x", Some(&bob))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let page = overview(bob.clone()).await;
    assert!(
        !page.contains("one <span class=\"badge\""),
        "read after opening it: {page}"
    );
    assert!(
        page.contains("two <span class=\"badge\" aria-label=\"1 unread\">1</span>"),
        "{page}"
    );
}
