//! The search index in generations (one FTS5 table per range of ids): a
//! search reads across them newest first, and the purge drops a generation
//! once none of its messages is left, never taking messages out one by one.

use crosstalk::model::{Channel, Handle, MessageId, now_millis};
use crosstalk::store::{Conversation, NewMessage, RecipientCheck, SqliteStore, Store};
use rusqlite::Connection;

/// Where the second generation starts (`search.rs`'s `GENERATION`).
const SECOND: i64 = 65_536;

#[tokio::test]
async fn a_search_spans_generations_and_the_purge_drops_the_ones_it_empties() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let store = SqliteStore::open(&db).unwrap();
    // Ids as on a relay that has seen most of a generation already.
    Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', ?1)",
            [SECOND - 6],
        )
        .unwrap();
    let far = now_millis() + 86_400_000;
    let mut ids = Vec::new();
    for n in 0..12 {
        let stored = store
            .insert_message(NewMessage {
                conversation: Conversation::Channel(Channel::parse("ops").unwrap()),
                from: Handle::parse("alice").unwrap(),
                to: None,
                check_to: RecipientCheck::None,
                kind: "NOTE".into(),
                body: format!("deploy step {n}"),
                reply_to: None,
                created_at: 1_000 + n,
                expires_at: far,
                expects: crosstalk::model::Expects::Nothing,
                due_at: None,
                attachments: Vec::new(),
            })
            .await
            .unwrap();
        ids.push(stored.id.0);
    }
    assert_eq!(ids.first(), Some(&(SECOND - 5)));
    let found = |before: Option<i64>, limit: u32| {
        let store = &store;
        async move {
            store
                .search("deploy", before.map(MessageId), limit, now_millis())
                .await
                .unwrap()
                .iter()
                .map(|f| f.message.id.0)
                .collect::<Vec<i64>>()
        }
    };
    let newest_first: Vec<i64> = ids.iter().rev().copied().collect();
    assert_eq!(found(None, 50).await, newest_first);
    // A page that crosses from one generation into the one before.
    assert_eq!(found(Some(SECOND + 2), 4).await, newest_first[5..9]);
    let generations = || -> Vec<String> {
        let conn = Connection::open(&db).unwrap();
        let mut tables = conn
            .prepare(
                "SELECT name FROM sqlite_master \
                 WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name",
            )
            .unwrap();
        tables
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(generations(), ["messages_fts_0", "messages_fts_1"]);

    // The first generation's messages expire, and one of the second's.
    let expire = |sql: &str| Connection::open(&db).unwrap().execute(sql, []).unwrap();
    expire(&format!(
        "UPDATE messages SET expires_at = 1 WHERE id < {SECOND} OR id = {}",
        SECOND + 3
    ));
    assert_eq!(store.purge_expired(now_millis(), 0).await.unwrap(), 6);
    assert_eq!(
        generations(),
        ["messages_fts_1"],
        "the emptied one is dropped"
    );
    let left: Vec<i64> = newest_first
        .iter()
        .copied()
        .filter(|&id| id >= SECOND && id != SECOND + 3)
        .collect();
    assert_eq!(found(None, 50).await, left, "nothing purged is found");

    // Every message gone: so is the index, and it comes back with the next.
    expire("UPDATE messages SET expires_at = 1");
    store.purge_expired(now_millis(), 0).await.unwrap();
    assert!(generations().is_empty());
    assert_eq!(found(None, 50).await, Vec::<i64>::new());
}
