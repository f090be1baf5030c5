//! What a purge batch deletes, and how the summaries are kept true after
//! it (`rules::purge_batch`).

use crate::model::{MessageId, Millis, ThreadId};
use crate::store::StoreResult;
use crate::store::columns::from_row;
use crate::store::sql::{Dialect, Executor, List};
use crate::store::summary::Removed;

/// Deletes up to `batch` messages expired at `now`, soonest expired first.
pub(in crate::store) async fn delete_expired(
    db: &impl Executor,
    now: Millis,
    batch: u32,
) -> StoreResult<Vec<Removed>> {
    db.rows(
        "DELETE FROM messages WHERE id IN \
         (SELECT id FROM messages WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2) \
         RETURNING id, thread_id, channel, sender, recipient",
        &[&now, &i64::from(batch)],
        |row| Ok(from_row!(row.get, Removed: id, thread_id, channel, sender, recipient)),
    )
    .await
}

/// Deletes the inbox rows of `removed`: on SQLite one lookup each (the
/// recipient is the key's first part), not the scan a foreign key's
/// cascade would need an index of its own for; on PostgreSQL all in one
/// statement.
pub(in crate::store) async fn delete_inbox_rows(
    db: &impl Executor,
    removed: &[Removed],
) -> StoreResult<()> {
    let addressed = removed
        .iter()
        .filter_map(|m| Some((m.recipient.as_deref()?, m.id)));
    match db.dialect() {
        Dialect::Sqlite => {
            for (recipient, id) in addressed {
                let sql = "DELETE FROM inbox WHERE recipient = ?1 AND message_id = ?2";
                db.write(sql, &[&recipient, &id]).await?;
            }
            Ok(())
        }
        Dialect::Postgres => {
            let (recipients, ids): (Vec<&str>, Vec<MessageId>) = addressed.unzip();
            db.write(
                "DELETE FROM inbox WHERE (recipient, message_id) IN \
                 (SELECT * FROM unnest(?1::text[], ?2::bigint[]))",
                &[&List(recipients), &List(ids)],
            )
            .await
        }
    }
}

pub(in crate::store) async fn subtract_from_channel(
    db: &impl Executor,
    channel: &str,
    gone: i64,
) -> StoreResult<()> {
    db.write(
        "UPDATE channel_summaries SET message_count = message_count - ?2 WHERE channel = ?1",
        &[&channel, &gone],
    )
    .await
}

pub(in crate::store) async fn drop_channel_if_empty(
    db: &impl Executor,
    channel: &str,
) -> StoreResult<()> {
    db.write(
        "DELETE FROM channel_summaries WHERE channel = ?1 AND message_count <= 0",
        &[&channel],
    )
    .await
}

/// Finds the channel's newest message again, if the one it named
/// (`newest` or below) went.
pub(in crate::store) async fn refind_channel_newest(
    db: &impl Executor,
    channel: &str,
    newest: MessageId,
) -> StoreResult<()> {
    db.write(
        "UPDATE channel_summaries SET (last_id, last_activity) = \
         (SELECT id, created_at FROM messages WHERE channel = ?1 ORDER BY id DESC LIMIT 1) \
         WHERE channel = ?1 AND last_id <= ?2",
        &[&channel, &newest],
    )
    .await
}

/// A thread's message count and people, as stored.
pub(in crate::store) async fn thread_counts(
    db: &impl Executor,
    thread: ThreadId,
) -> StoreResult<Option<(i64, String)>> {
    let sql = db.pick(
        "SELECT message_count, people FROM threads WHERE id = ?1",
        "SELECT message_count, people::text FROM threads WHERE id = ?1",
    );
    db.row(sql, &[&thread], |row| Ok((row.get(0)?, row.get(1)?)))
        .await
}

/// Deletes the thread's row if no message is left in it; whether it did.
pub(in crate::store) async fn drop_thread_if_empty(
    db: &impl Executor,
    thread: ThreadId,
) -> StoreResult<bool> {
    let dropped = db
        .exec(
            "DELETE FROM threads WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1)",
            &[&thread],
        )
        .await?;
    Ok(dropped == 1)
}

pub(in crate::store) async fn set_thread_counts(
    db: &impl Executor,
    thread: ThreadId,
    count: i64,
    people: &str,
) -> StoreResult<()> {
    let sql = db.pick(
        "UPDATE threads SET message_count = ?2, people = ?3 WHERE id = ?1",
        "UPDATE threads SET message_count = ?2, people = CAST(?3 AS TEXT)::jsonb WHERE id = ?1",
    );
    db.write(sql, &[&thread, &count, &people]).await
}

/// Finds the thread's opening again, if the one it named (`oldest` or
/// above) went.
pub(in crate::store) async fn refind_thread_opening(
    db: &impl Executor,
    thread: ThreadId,
    oldest: MessageId,
) -> StoreResult<()> {
    db.write(
        "UPDATE threads SET first_id = \
         (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY id LIMIT 1) \
         WHERE id = ?1 AND first_id >= ?2",
        &[&thread, &oldest],
    )
    .await
}

/// Finds the thread's newest message again, if the one it named
/// (`newest` or below) went.
pub(in crate::store) async fn refind_thread_newest(
    db: &impl Executor,
    thread: ThreadId,
    newest: MessageId,
) -> StoreResult<()> {
    db.write(
        "UPDATE threads SET (last_id, last_activity) = \
         (SELECT id, created_at FROM messages WHERE thread_id = ?1 ORDER BY id DESC LIMIT 1) \
         WHERE id = ?1 AND last_id <= ?2",
        &[&thread, &newest],
    )
    .await
}
