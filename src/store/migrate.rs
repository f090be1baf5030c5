//! `crosstalk migrate-to-postgres`: copies a SQLite relay into an empty
//! PostgreSQL database. It knows both schemas, so it lives beside both
//! backends, in neither. It copies, keeping ids: people and their token hashes,
//! presence, live messages with their threads and inbox rows, read marks,
//! the relay's keys, notification settings, approvals and push devices, live claims,
//! and the files of live messages. The summaries are computed again from what was
//! copied, and the id sequences carry on past the largest id either had.
//! MCP sessions are not copied: clients open new ones.
//!
//! Everything goes in one transaction, in pages, so a failure leaves the
//! target empty; at the end the counts of both are compared.

use super::PostgresStore;
use super::postgres::WRITE_LOCK;
use crate::model::Millis;
use crate::store::{Clash, StoreError, StoreResult};
use deadpool_postgres::Transaction;
use rusqlite::{Connection, OpenFlags, params};
use std::path::Path;
use tokio_postgres::types::ToSql;

/// Rows copied at a time.
const PAGE: i64 = 5_000;

/// What was copied, counted in the target after the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub people: i64,
    pub messages: i64,
    pub threads: i64,
    pub inbox: i64,
}

impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} people, {} messages in {} threads and their channels, {} inbox rows",
            self.people, self.messages, self.threads, self.inbox
        )
    }
}

fn sqlite_error(error: rusqlite::Error) -> StoreError {
    StoreError::backend("reading the SQLite database", error)
}

/// Copies the SQLite database at `from` into `to`, which must hold no
/// relay yet. `now` decides which messages are live.
pub async fn to_postgres(to: &PostgresStore, from: &Path, now: Millis) -> StoreResult<Copied> {
    let source = Connection::open_with_flags(from, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite_error)?;
    let expected = source_counts(&source, now).map_err(sqlite_error)?;
    let mut client = to.client().await?;
    let tx = client.transaction().await?;
    // No relay's group commit may insert, or move the ids, meanwhile.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
        .await?;
    let holds: i64 = tx
        .query_one(
            "SELECT (SELECT count(*) FROM people) + (SELECT count(*) FROM messages)",
            &[],
        )
        .await?
        .get(0);
    if holds > 0 {
        return Err(StoreError::Conflict(Clash::TargetInUse));
    }
    copy_people(&source, &tx).await?;
    copy_messages(&source, &tx, now).await?;
    // The summaries of what was copied, and sequences that carry on.
    tx.batch_execute(SUMMARIES).await?;
    let next: i64 = source
        .query_row(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0), \
                        coalesce((SELECT max(id) FROM messages), 0))",
            [],
            |row| row.get(0),
        )
        .map_err(sqlite_error)?;
    tx.execute(
        "SELECT setval('message_ids', greatest($1::bigint, 1), $1::bigint > 0)",
        &[&next],
    )
    .await?;
    tx.batch_execute(
        "SELECT setval(pg_get_serial_sequence('threads', 'id'), \
                       greatest((SELECT max(id) FROM threads), 1)); \
         SELECT setval(pg_get_serial_sequence('people', 'id'), \
                       greatest((SELECT max(id) FROM people), 1));",
    )
    .await?;
    let copied = target_counts(&tx).await?;
    if copied != expected {
        return Err(StoreError::backend(
            "checking the copy",
            format!("SQLite holds {expected}, but PostgreSQL {copied}; nothing was kept"),
        ));
    }
    tx.commit().await?;
    Ok(copied)
}

/// Pages of rows, each inserted as arrays (one statement per page): the
/// rows of `$select` (after `?1`, at most `?2`, then the `$param`s) go to
/// `$insert` as one array per column.
macro_rules! copy {
($source:expr, $tx:expr, $select:expr, $insert:expr, [$($column:ident: $ty:ty),*], $($param:expr),*) => {{
        let mut after = i64::MIN;
        loop {
            $(let mut $column: Vec<$ty> = Vec::new();)*
            let mut last = None;
            {
                let mut statement = $source.prepare($select).map_err(sqlite_error)?;
                let mut rows = statement
                    .query(params![after, PAGE, $($param),*])
                    .map_err(sqlite_error)?;
                while let Some(row) = rows.next().map_err(sqlite_error)? {
                    let mut index = 0;
                    $(
                        $column.push(row.get(index).map_err(sqlite_error)?);
                        index += 1;
                    )*
                    let _ = index;
                    last = Some(row.get::<_, i64>(0).map_err(sqlite_error)?);
                }
            }
            let Some(last) = last else { break };
            let columns: &[&(dyn ToSql + Sync)] = &[$(&$column),*];
            $tx.execute($insert, columns).await?;
            after = last;
        }
    }};
}

/// People and their tokens, presence, and the relay's keys.
async fn copy_people(source: &Connection, tx: &Transaction<'_>) -> StoreResult<()> {
    copy!(source, tx,
        "SELECT id, handle, name, token_hash, created_at, revoked_at FROM people \
         WHERE id > ?1 ORDER BY id LIMIT ?2",
        "INSERT INTO people (id, handle, name, token_hash, created_at, revoked_at) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], \
                              $5::bigint[], $6::bigint[])",
        [id: i64, handle: String, name: String, hash: Vec<u8>, created: i64, revoked: Option<i64>],
    );
    copy!(source, tx,
        "SELECT rowid, handle, status, status_at, last_seen_at FROM \
         (SELECT row_number() OVER (ORDER BY handle) AS rowid, * FROM presence) \
         WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        "INSERT INTO presence (handle, status, status_at, last_seen_at) \
         SELECT h, s, sa, ls FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], \
                                        $5::bigint[]) AS p(n, h, s, sa, ls)",
        [n: i64, handle: String, status: String, status_at: Option<i64>, seen: Option<i64>],
    );
    copy!(source, tx,
        "SELECT n, name, value FROM \
         (SELECT row_number() OVER (ORDER BY name) AS n, * FROM keys) \
         WHERE n > ?1 ORDER BY n LIMIT ?2",
        "INSERT INTO keys (name, value) \
         SELECT k, v FROM unnest($1::bigint[], $2::text[], $3::bytea[]) AS r(n, k, v)",
        [n: i64, name: String, value: Vec<u8>],
    );
    copy!(source, tx,
        "SELECT n, handle, after_ms, at_once_when_away, webhook, webhook_format FROM \
         (SELECT row_number() OVER (ORDER BY handle) AS n, * FROM notify_settings) \
         WHERE n > ?1 ORDER BY n LIMIT ?2",
        "INSERT INTO notify_settings (handle, after_ms, at_once_when_away, webhook, \
                                      webhook_format) \
         SELECT h, a, w, u, f FROM unnest($1::bigint[], $2::text[], $3::bigint[], \
                                        $4::boolean[], $5::text[], $6::text[]) \
             AS r(n, h, a, w, u, f)",
        [n: i64, handle: String, after: Option<i64>, away: bool, webhook: Option<String>,
         format: String],
    );
    copy!(source, tx,
        "SELECT id, handle, request_id, tool_name, description, input_preview, withheld, \
         created_at, expires_at, behavior, answered_at FROM approvals \
         WHERE id > ?1 ORDER BY id LIMIT ?2",
        "INSERT INTO approvals (id, handle, request_id, tool_name, description, \
                                input_preview, withheld, created_at, expires_at, behavior, \
                                answered_at) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], \
                              $6::text[], $7::text[], $8::bigint[], $9::bigint[], \
                              $10::text[], $11::bigint[])",
        [id: i64, handle: String, request: String, tool: String, description: String,
         preview: String, withheld: Option<String>, created: i64, expires: i64,
         behavior: Option<String>, answered: Option<i64>],
    );
    copy!(source, tx,
        "SELECT id, handle, endpoint, p256dh, auth, created_at FROM push_devices \
         WHERE id > ?1 ORDER BY id LIMIT ?2",
        "INSERT INTO push_devices (id, handle, endpoint, p256dh, auth, created_at) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], \
                              $5::bytea[], $6::bigint[])",
        [id: i64, handle: String, endpoint: String, p256dh: Vec<u8>, auth: Vec<u8>,
         created: i64],
    );
    // The copied ids are taken: the next ones come after them.
    for table in ["approvals", "push_devices"] {
        tx.execute(
            &format!(
                "SELECT setval('{table}_id_seq', coalesce(max(id), 0) + 1, false) FROM {table}"
            ),
            &[],
        )
        .await?;
    }
    Ok(())
}

/// Live messages, their threads and inbox rows, and read marks.
async fn copy_messages(source: &Connection, tx: &Transaction<'_>, now: Millis) -> StoreResult<()> {
    copy!(source, tx,
        "SELECT id, thread_id, channel, sender, recipient, type, body, reply_to, created_at, \
         expires_at, attachments FROM messages WHERE id > ?1 AND expires_at > ?3 \
         ORDER BY id LIMIT ?2",
        "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, \
         reply_to, created_at, expires_at, attachments) \
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], \
                              $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], \
                              $11::text[])",
        [id: i64, thread: Option<i64>, channel: Option<String>, sender: String,
         recipient: Option<String>, kind: String, body: String, reply_to: Option<i64>,
         created: i64, expires: i64, attachments: Option<String>],
        now
    );
    copy!(source, tx,
        // Their files, a few at a time (each up to 1 MiB): keyed by
        // message and place, the first column the page's cursor.
        "SELECT a.message_id * 16 + a.n, a.message_id, a.n, a.data FROM attachments a \
         JOIN messages m ON m.id = a.message_id \
         WHERE a.message_id * 16 + a.n > ?1 AND m.expires_at > ?3 AND ?2 > 0 \
         ORDER BY a.message_id, a.n LIMIT 16",
        "INSERT INTO attachments (message_id, n, data) \
         SELECT m, n, d FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::bytea[]) \
             AS r(k, m, n, d)",
        [key: i64, message: i64, n: i32, data: Vec<u8>],
        now
    );
    copy!(source, tx,
        "SELECT id, created_at FROM threads WHERE id > ?1 ORDER BY id LIMIT ?2",
        "INSERT INTO threads (id, created_at, message_count, first_id, last_id, last_activity, \
                              people) \
         SELECT t.id, t.created_at, 0, 0, 0, 0, '{}' FROM unnest($1::bigint[], $2::bigint[]) \
             AS t(id, created_at) \
         WHERE EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = t.id)",
        [id: i64, created: i64],
    );
    copy!(source, tx,
        // The ledger, without leases: a stopped relay has no streams.
        "SELECT message_id, recipient, read_at, pushed_at, answered_at, offers, notified_at, via, \
                expects, due_at, ack_result, ack_note, acked_at, overdue_at \
         FROM inbox i WHERE message_id > ?1 AND EXISTS (SELECT 1 FROM messages m \
             WHERE m.id = i.message_id AND m.expires_at > ?3) \
         ORDER BY message_id LIMIT ?2",
        "INSERT INTO inbox (message_id, recipient, read_at, pushed_at, answered_at, offers, \
                            notified_at, via, expects, due_at, ack_result, ack_note, acked_at, \
                            overdue_at) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], \
                              $5::bigint[], $6::integer[], $7::bigint[], $8::text[], \
                              $9::text[], $10::bigint[], $11::text[], $12::text[], \
                              $13::bigint[], $14::bigint[])",
        [id: i64, recipient: String, read: Option<i64>, pushed: Option<i64>,
         answered: Option<i64>, offers: i32, notified: Option<i64>, via: Option<String>,
         expects: Option<String>, due: Option<i64>, ack_result: Option<String>,
         ack_note: Option<String>, acked: Option<i64>, overdue: Option<i64>],
        now
    );
    copy!(source, tx,
        // Live claims.
        "SELECT id, what, repo, holder, note, created_at, expires_at FROM claims \
         WHERE id > ?1 AND expires_at > ?3 ORDER BY id LIMIT ?2",
        "INSERT INTO claims (id, what, repo, holder, note, created_at, expires_at) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], \
                              $6::bigint[], $7::bigint[])",
        [id: i64, what: String, repo: String, holder: String, note: Option<String>,
         created: i64, expires: i64],
        now
    );
    tx.execute(
        "SELECT setval('claims_id_seq', coalesce(max(id), 0) + 1, false) FROM claims",
        &[],
    )
    .await?;
    copy!(source, tx,
        "SELECT n, handle, conversation, last_id FROM \
         (SELECT row_number() OVER (ORDER BY handle, conversation) AS n, * FROM last_read) \
         WHERE n > ?1 ORDER BY n LIMIT ?2",
        "INSERT INTO last_read (handle, conversation, last_id) \
         SELECT h, c, l FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[]) \
             AS r(n, h, c, l)",
        [n: i64, handle: String, conversation: String, last: i64],
    );
    Ok(())
}

/// Channel and thread summaries computed from the copied messages.
const SUMMARIES: &str = "
INSERT INTO channel_summaries (channel, message_count, last_id, last_activity)
    SELECT channel, count(*), max(id), max(created_at) FROM messages
    WHERE channel IS NOT NULL GROUP BY channel;
UPDATE threads t SET (message_count, first_id, last_id, last_activity) =
    (SELECT count(*), min(id), max(id), max(created_at) FROM messages m
     WHERE m.thread_id = t.id);
UPDATE threads t SET people = coalesce((
    SELECT jsonb_object_agg(handle, n) FROM (
        SELECT handle, count(*) AS n FROM (
            SELECT id, sender AS handle FROM messages WHERE thread_id = t.id
            UNION
            SELECT id, recipient FROM messages WHERE thread_id = t.id AND recipient IS NOT NULL
        ) sent_or_received GROUP BY handle
    ) counted), '{}');
";

fn source_counts(source: &Connection, now: Millis) -> rusqlite::Result<Copied> {
    let count = |sql: &str| source.query_row(sql, [now], |row| row.get::<_, i64>(0));
    Ok(Copied {
        people: count("SELECT count(*) FROM people WHERE ?1 = ?1")?,
        messages: count("SELECT count(*) FROM messages WHERE expires_at > ?1")?,
        threads: count(
            "SELECT count(DISTINCT thread_id) FROM messages \
             WHERE thread_id IS NOT NULL AND expires_at > ?1",
        )?,
        inbox: count(
            "SELECT count(*) FROM inbox i JOIN messages m ON m.id = i.message_id \
             WHERE m.expires_at > ?1",
        )?,
    })
}

async fn target_counts(tx: &deadpool_postgres::Transaction<'_>) -> StoreResult<Copied> {
    let row = tx
        .query_one(
            "SELECT (SELECT count(*) FROM people), (SELECT count(*) FROM messages), \
                    (SELECT count(*) FROM threads), (SELECT count(*) FROM inbox)",
            &[],
        )
        .await?;
    Ok(Copied {
        people: row.get(0),
        messages: row.get(1),
        threads: row.get(2),
        inbox: row.get(3),
    })
}
