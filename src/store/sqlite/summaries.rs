//! Channel and thread overviews: a few index lookups whatever the history
//! holds, since the summaries are kept as messages commit and as they are
//! purged (`../rules/`, with this backend's statements).
//!
//! A summary is updated in the same transaction as the message it counts
//! (inside the group commit), and by the purge in the same transaction as
//! the rows it deletes. Between an expiry and the purge that follows (at
//! most a minute), a count may still include the messages that just
//! expired; a conversation whose newest message has expired is never
//! listed.

use crate::model::{ChannelSummary, MessageId, Millis, ThreadSummary};
use crate::store::StoreResult;
use crate::store::summary::handles_of;
use rusqlite::{Connection, params};

/// Channels whose newest message is live, newest first, after the cursor.
pub(super) fn channels(
    conn: &Connection,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ChannelSummary>> {
    Ok(conn
        .prepare_cached(
            "SELECT s.channel, s.message_count, s.last_id, s.last_activity \
             FROM channel_summaries s JOIN messages m ON m.id = s.last_id \
             WHERE m.expires_at > ?1 AND s.last_id < ?2 \
             ORDER BY s.last_id DESC LIMIT ?3",
        )?
        .query_map(
            params![now, before.unwrap_or(MessageId(i64::MAX)), limit],
            |row| {
                Ok(ChannelSummary {
                    name: row.get(0)?,
                    message_count: row.get::<_, i64>(1)?.max(0) as u64,
                    last_id: row.get(2)?,
                    last_activity: row.get(3)?,
                })
            },
        )?
        .collect::<Result<_, _>>()?)
}

/// Threads whose newest message is live, newest first, after the cursor.
pub(super) fn threads(
    conn: &Connection,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ThreadSummary>> {
    let rows: Vec<(ThreadSummary, String)> = conn
        .prepare_cached(
            "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, t.people \
             FROM threads t JOIN messages m ON m.id = t.last_id \
             JOIN messages f ON f.id = t.first_id \
             WHERE m.expires_at > ?1 AND t.last_id < ?2 \
             ORDER BY t.last_id DESC LIMIT ?3",
        )?
        .query_map(
            params![now, before.unwrap_or(MessageId(i64::MAX)), limit],
            |row| {
                let summary = ThreadSummary {
                    id: row.get(0)?,
                    people: Vec::new(),
                    message_count: row.get::<_, i64>(1)?.max(0) as u64,
                    opening: row.get(2)?,
                    last_id: row.get(3)?,
                    last_activity: row.get(4)?,
                };
                Ok((summary, row.get(5)?))
            },
        )?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(mut summary, people)| {
            summary.people = handles_of(&people)?;
            Ok(summary)
        })
        .collect()
}
