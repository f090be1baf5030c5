//! What a purge batch deletes, and how the summaries are kept true after
//! it (`rules::purge_batch`).

use crate::model::{MessageId, Millis, ThreadId};
use crate::store::StoreResult;
use crate::store::columns::from_row;
use crate::store::sql::{Dialect, Executor, List, Param};
use crate::store::summary::Removed;

/// Deletes up to `batch` messages expired at `now`, soonest expired first.
pub async fn delete_expired(
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
pub async fn delete_inbox_rows(db: &impl Executor, removed: &[Removed]) -> StoreResult<()> {
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
                &[&List(&recipients), &List(&ids)],
            )
            .await
        }
    }
}

/// Takes `gone` messages out of the channel's summary, dropping it if none
/// is left (whether it did), and else finds its newest message again if
/// the one it named (`newest` or below) went.
pub async fn uncount_channel(
    db: &impl Executor,
    channel: &str,
    gone: i64,
    newest: MessageId,
) -> StoreResult<bool> {
    let subtract =
        "UPDATE channel_summaries SET message_count = message_count - ?2 WHERE channel = ?1";
    db.write(subtract, &[&channel, &gone]).await?;
    let drop = "DELETE FROM channel_summaries WHERE channel = ?1 AND message_count <= 0";
    if db.exec(drop, &[&channel]).await? == 1 {
        return Ok(true);
    }
    let summary = ("channel_summaries", "channel", "channel");
    refind_newest(db, summary, &channel, newest).await?;
    Ok(false)
}

/// The migration, the same on both backends, that lets [`forget_marks`]
/// find a conversation's marks, and forgets those of conversations gone
/// before it.
pub const MARKS_GO_WITH_THEIR_CONVERSATION: &str = "
CREATE INDEX last_read_by_conversation ON last_read(conversation);
DELETE FROM last_read WHERE conversation LIKE 't:%'
    AND conversation NOT IN (SELECT 't:' || id FROM threads);
DELETE FROM last_read WHERE conversation LIKE 'c:%'
    AND conversation NOT IN (SELECT 'c:' || channel FROM channel_summaries);
";

/// Forgets the read marks of a conversation that is gone (`key` as marks
/// name it).
pub async fn forget_marks(db: &impl Executor, key: &str) -> StoreResult<()> {
    db.write("DELETE FROM last_read WHERE conversation = ?1", &[&key])
        .await
}

/// A thread's message count and people, as stored.
pub async fn thread_counts(
    db: &impl Executor,
    thread: ThreadId,
) -> StoreResult<Option<(i64, String)>> {
    let sql = "SELECT message_count, CAST(people AS TEXT) FROM threads WHERE id = ?1";
    db.row(sql, &[&thread], |row| Ok((row.get(0)?, row.get(1)?)))
        .await
}

/// Deletes the thread's row if no message is left in it; whether it did.
pub async fn drop_thread_if_empty(db: &impl Executor, thread: ThreadId) -> StoreResult<bool> {
    let dropped = db
        .exec(
            "DELETE FROM threads WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1)",
            &[&thread],
        )
        .await?;
    Ok(dropped == 1)
}

/// Sets the thread's message count and people, and finds its opening
/// again if the one it named (`oldest` or above) went, and its newest
/// message if the one it named (`newest` or below) went.
pub async fn recount_thread(
    db: &impl Executor,
    thread: ThreadId,
    count: i64,
    people: &str,
    oldest: MessageId,
    newest: MessageId,
) -> StoreResult<()> {
    let set = db.pick(
        "UPDATE threads SET message_count = ?2, people = ?3 WHERE id = ?1",
        "UPDATE threads SET message_count = ?2, people = CAST(?3 AS TEXT)::jsonb WHERE id = ?1",
    );
    db.write(set, &[&thread, &count, &people]).await?;
    db.write(
        "UPDATE threads SET first_id = \
         (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY id LIMIT 1) \
         WHERE id = ?1 AND first_id >= ?2",
        &[&thread, &oldest],
    )
    .await?;
    refind_newest(db, ("threads", "id", "thread_id"), &thread, newest).await
}

/// Finds a summary's newest message again, if the one it named (`newest`
/// or below) went: the row of `table` whose `key` is `conversation`, from
/// the messages whose `column` is.
async fn refind_newest(
    db: &impl Executor,
    (table, key, column): (&str, &str, &str),
    conversation: &dyn Param,
    newest: MessageId,
) -> StoreResult<()> {
    let sql = format!(
        "UPDATE {table} SET (last_id, last_activity) = \
         (SELECT id, created_at FROM messages WHERE {column} = ?1 ORDER BY id DESC LIMIT 1) \
         WHERE {key} = ?1 AND last_id <= ?2"
    );
    db.write(&sql, &[conversation, &newest]).await
}
