//! How the message rules take inbox rows (a claim, an offer, an overdue
//! mark) and read messages and read marks.
//!
//! Taking rows: SQLite's writer runs one job at a time inside `BEGIN
//! IMMEDIATE`, so an UPDATE that finds and marks rows is all a claim
//! needs to take them alone. On PostgreSQL the rows are locked as they
//! are chosen, and rows another claim holds are skipped, so no two claims
//! (on any relay) take the same message; each row is checked again as it
//! is updated, and the rows are chosen once, in a CTE (an `IN` subquery
//! with a `LIMIT` may be run again per row).

use super::messages::messages;
use super::storing::column;
use crate::model::{Handle, Message, MessageId, Millis, Place};
use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS, OWED};
use crate::store::sql::{Dialect, Executor, List, Param, in_list};
use crate::store::{Offer, sql::Row};
use crate::store::{StoreError, StoreResult};

/// What an inbox row must be for a claim or an offer to take it: unread,
/// its message live, and no stream's lease on it running.
macro_rules! takeable {
    () => {
        "SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
         WHERE i.recipient = ?1 AND i.read_at IS NULL AND m.expires_at > ?2 \
         AND (i.lease_until IS NULL OR i.lease_until <= ?2)"
    };
}

/// The row's own part of [`takeable!`], checked again as PostgreSQL
/// updates it.
macro_rules! still_takeable {
    () => {
        "inbox.read_at IS NULL AND (inbox.lease_until IS NULL OR inbox.lease_until <= ?2)"
    };
}

/// Marks up to `limit` of `recipient`'s takeable rows (unread, live, under
/// no running lease) read at `now`, oldest first; their ids.
pub async fn take_for_claim(
    db: &impl Executor,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<MessageId>> {
    let sql = db.pick(
        concat!(
            "UPDATE inbox SET read_at = ?2, lease_until = NULL, via = 'inbox' \
             WHERE recipient = ?1 AND message_id IN (",
            takeable!(),
            " ORDER BY i.message_id LIMIT ?3) RETURNING message_id"
        ),
        concat!(
            "WITH taken AS (",
            takeable!(),
            " ORDER BY i.message_id LIMIT ?3 FOR UPDATE OF i SKIP LOCKED) \
             UPDATE inbox SET read_at = ?2, lease_until = NULL, via = 'inbox' FROM taken \
             WHERE inbox.recipient = ?1 AND inbox.message_id = taken.message_id AND ",
            still_takeable!(),
            " RETURNING inbox.message_id"
        ),
    );
    db.column(sql, &[recipient, &now, &i64::from(limit)]).await
}

/// Leases up to `limit` of the same rows, never one last offered to
/// `offer.holder` nor one offered `most` times already, to that holder;
/// their ids.
pub async fn take_for_offer(
    db: &impl Executor,
    recipient: &Handle,
    offer: Offer,
    most: u32,
    limit: u32,
) -> StoreResult<Vec<MessageId>> {
    let sql = db.pick(
        concat!(
            "UPDATE inbox SET pushed_at = coalesce(pushed_at, ?2), lease_until = ?4, \
                 push_holder = ?5, offers = offers + 1, via = ?7 \
             WHERE recipient = ?1 AND message_id IN (",
            takeable!(),
            " AND i.push_holder IS NOT ?5 AND i.offers < ?6 \
             ORDER BY i.message_id LIMIT ?3) RETURNING message_id"
        ),
        concat!(
            "WITH taken AS (",
            takeable!(),
            " AND i.push_holder IS DISTINCT FROM ?5 AND i.offers < ?6 \
                 ORDER BY i.message_id LIMIT ?3 FOR UPDATE OF i SKIP LOCKED) \
             UPDATE inbox SET pushed_at = coalesce(pushed_at, ?2), lease_until = ?4, \
                 push_holder = ?5, offers = offers + 1, via = ?7 FROM taken \
             WHERE inbox.recipient = ?1 AND inbox.message_id = taken.message_id AND ",
            still_takeable!(),
            " RETURNING inbox.message_id"
        ),
    );
    // `offers` is an integer column.
    let most = i32::try_from(most).unwrap_or(i32::MAX);
    let params: [&dyn Param; 7] = [
        recipient,
        &offer.now,
        &i64::from(limit),
        &offer.until,
        &offer.holder,
        &most,
        &offer.via.as_str(),
    ];
    db.column(sql, &params).await
}

/// Marks up to `limit` rows due by `now` and still owed, of live
/// messages, overdue at `now`, soonest due first; their ids. A row
/// another relay is marking is skipped, and each is checked again as it
/// is marked.
pub async fn mark_overdue(
    db: &impl Executor,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<MessageId>> {
    let due = format!(
        "FROM inbox i JOIN messages m ON m.id = i.message_id \
         WHERE i.due_at IS NOT NULL AND i.due_at <= ?1 AND i.overdue_at IS NULL \
         AND {OWED} AND m.expires_at > ?1 ORDER BY i.due_at LIMIT ?2"
    );
    let sql = match db.dialect() {
        Dialect::Sqlite => format!(
            "UPDATE inbox SET overdue_at = ?1 WHERE message_id IN (SELECT i.message_id {due}) \
             RETURNING message_id"
        ),
        Dialect::Postgres => format!(
            "WITH due AS (SELECT i.recipient, i.message_id {due} FOR UPDATE OF i SKIP LOCKED) \
             UPDATE inbox SET overdue_at = ?1 FROM due \
             WHERE inbox.recipient = due.recipient AND inbox.message_id = due.message_id \
             AND inbox.overdue_at IS NULL AND inbox.answered_at IS NULL \
             AND inbox.acked_at IS NULL \
             RETURNING inbox.message_id"
        ),
    };
    db.column(&sql, &[&now, &i64::from(limit)]).await
}

/// Messages by id, oldest first, with their ledgers as they are now.
pub async fn messages_by_id(db: &impl Executor, ids: &[MessageId]) -> StoreResult<Vec<Message>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let listed = in_list!(db, "", "m.id", "?1", "");
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} WHERE {listed} ORDER BY m.id"
    );
    messages(db, &sql, &[&List(ids)]).await
}

/// Live messages of `place`: with `after`, those with a higher id, oldest
/// first; without, the newest, newest first.
pub async fn messages_in(
    db: &impl Executor,
    place: &Place,
    after: Option<MessageId>,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let (column, value) = column(place);
    let (after, order) = match after {
        Some(id) => (id, "ASC"),
        None => (MessageId(0), "DESC"),
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
         WHERE {column} = ?1 AND m.id > ?2 AND m.expires_at > ?3 ORDER BY m.id {order} LIMIT ?4"
    );
    messages(db, &sql, &[value, &after, &now, &i64::from(limit)]).await
}

/// Raises `reader`'s read mark kept under `key` to `last_id`, never lower.
pub async fn raise_read_mark(
    db: &impl Executor,
    reader: &Handle,
    key: &str,
    last_id: MessageId,
) -> StoreResult<()> {
    let sql = db.pick(
        "INSERT INTO last_read (handle, conversation, last_id) VALUES (?1, ?2, ?3) \
         ON CONFLICT (handle, conversation) DO UPDATE SET last_id = max(last_id, ?3)",
        "INSERT INTO last_read (handle, conversation, last_id) VALUES (?1, ?2, ?3) \
         ON CONFLICT (handle, conversation) DO UPDATE \
         SET last_id = greatest(last_read.last_id, ?3)",
    );
    db.write(sql, &[reader, &key, &last_id]).await
}

/// For each place with its mark's key, how many live messages came after
/// `reader`'s mark (all, without one), counting at most `cap`. SQLite
/// reads an index range of the unread messages only, a place at a time;
/// PostgreSQL takes every place in one statement (a page asks for dozens).
pub async fn unread_after_marks(
    db: &impl Executor,
    reader: &Handle,
    places: &[(Place, String)],
    cap: u64,
    now: Millis,
) -> StoreResult<Vec<u64>> {
    let cap = cap.min(i64::MAX as u64) as i64;
    let count = |row: Row<'_>| Ok(row.get::<i64>(0)?.max(0) as u64);
    if db.dialect() == Dialect::Postgres {
        let keys: Vec<&str> = places.iter().map(|(_, key)| key.as_str()).collect();
        let (channels, threads): (Vec<_>, Vec<_>) = places
            .iter()
            .map(|(place, _)| (place.channel(), place.thread()))
            .unzip();
        let params: [&dyn Param; 6] = [
            reader,
            &List(&keys),
            &List(&channels),
            &List(&threads),
            &now,
            &cap,
        ];
        return db
            .rows(
                "SELECT CASE \
                     WHEN a.channel IS NOT NULL THEN (SELECT count(*) FROM (SELECT 1 \
                         FROM messages m WHERE m.channel = a.channel \
                         AND m.id > coalesce(r.last_id, 0) AND m.expires_at > ?5 LIMIT ?6) u) \
                     ELSE (SELECT count(*) FROM (SELECT 1 FROM messages m \
                         WHERE m.thread_id = a.thread AND m.id > coalesce(r.last_id, 0) \
                         AND m.expires_at > ?5 LIMIT ?6) u) \
                     END \
                 FROM unnest(?2::text[], ?3::text[], ?4::bigint[]) WITH ORDINALITY \
                     AS a(conversation, channel, thread, n) \
                 LEFT JOIN last_read r ON r.handle = ?1 AND r.conversation = a.conversation \
                 ORDER BY a.n",
                &params,
                count,
            )
            .await;
    }
    let mut counts = Vec::with_capacity(places.len());
    for (place, key) in places {
        let since: Option<i64> = db
            .value(
                "SELECT last_id FROM last_read WHERE handle = ?1 AND conversation = ?2",
                &[reader, key],
            )
            .await?;
        let sql = match place {
            Place::Channel(_) => {
                "SELECT count(*) FROM (SELECT 1 FROM messages WHERE channel = ?1 \
                 AND id > ?2 AND expires_at > ?3 LIMIT ?4)"
            }
            Place::Thread(_) => {
                "SELECT count(*) FROM (SELECT 1 FROM messages WHERE thread_id = ?1 \
                 AND id > ?2 AND expires_at > ?3 LIMIT ?4)"
            }
        };
        let params: [&dyn Param; 4] = [column(place).1, &since.unwrap_or(0), &now, &cap];
        let counted = db.row(sql, &params, count).await?;
        counts.push(counted.ok_or_else(|| StoreError::backend("counting unread", "no count"))?);
    }
    Ok(counts)
}
