//! Channel and thread overviews: a few index lookups whatever the history
//! holds, since the summaries are kept as messages commit and as they are
//! purged (`../rules/`).
//!
//! A summary is updated in the same transaction as the message it counts
//! (inside the group commit), and by the purge in the same transaction as
//! the rows it deletes. Between an expiry and the purge that follows (at
//! most a minute), a count may still include the messages that just
//! expired; a conversation whose newest message has expired is never
//! listed.

use crate::model::{ChannelSummary, MessageId, Millis, ThreadSummary};
use crate::store::StoreResult;
use crate::store::sql::Executor;
use crate::store::summary::handles_of;

/// Channels whose newest message is live, newest first, after the cursor.
pub async fn channels(
    db: &impl Executor,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ChannelSummary>> {
    let before = before.unwrap_or(MessageId(i64::MAX));
    db.rows(
        "SELECT s.channel, s.message_count, s.last_id, s.last_activity \
         FROM channel_summaries s JOIN messages m ON m.id = s.last_id \
         WHERE m.expires_at > ?1 AND s.last_id < ?2 \
         ORDER BY s.last_id DESC LIMIT ?3",
        &[&now, &before, &i64::from(limit)],
        |row| {
            Ok(ChannelSummary {
                name: row.get(0)?,
                message_count: row.get::<i64>(1)?.max(0) as u64,
                last_id: row.get(2)?,
                last_activity: row.get(3)?,
            })
        },
    )
    .await
}

/// Threads whose newest message is live, newest first, after the cursor.
pub async fn threads(
    db: &impl Executor,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ThreadSummary>> {
    let before = before.unwrap_or(MessageId(i64::MAX));
    let sql = "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, \
               CAST(t.people AS TEXT) \
         FROM threads t JOIN messages m ON m.id = t.last_id \
         JOIN messages f ON f.id = t.first_id \
         WHERE m.expires_at > ?1 AND t.last_id < ?2 \
         ORDER BY t.last_id DESC LIMIT ?3";
    db.rows(sql, &[&now, &before, &i64::from(limit)], |row| {
        Ok(ThreadSummary {
            id: row.get(0)?,
            people: handles_of(&row.get::<String>(5)?)?,
            message_count: row.get::<i64>(1)?.max(0) as u64,
            opening: row.get(2)?,
            last_id: row.get(3)?,
            last_activity: row.get(4)?,
        })
    })
    .await
}
