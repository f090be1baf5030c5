//! Channel and thread overviews (`../sqlite/summaries.rs`, in
//! PostgreSQL), and the purge's batches, each its own transaction under
//! the write lock. The summaries are kept by `../rules/`, in the
//! transaction of each message and of each purge batch.

use super::Sql;
use super::{Db, WRITE_LOCK};
use crate::model::{ChannelSummary, MessageId, Millis, ThreadSummary};
use crate::store::summary::handles_of;
use crate::store::{PURGE_BATCH, StoreResult, rules};

/// Channels whose newest message is live, newest first, after the cursor.
pub(super) async fn channels(
    db: &impl Db,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ChannelSummary>> {
    let before = before.unwrap_or(MessageId(i64::MAX));
    db.rows(
        "SELECT s.channel, s.message_count, s.last_id, s.last_activity \
         FROM channel_summaries s JOIN messages m ON m.id = s.last_id \
         WHERE m.expires_at > $1 AND s.last_id < $2 \
         ORDER BY s.last_id DESC LIMIT $3",
        &[&now, &before, &i64::from(limit)],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(ChannelSummary {
            name: row.try_get(0)?,
            message_count: row.try_get::<_, i64>(1)?.max(0) as u64,
            last_id: row.try_get(2)?,
            last_activity: row.try_get(3)?,
        })
    })
    .collect()
}

/// Threads whose newest message is live, newest first, after the cursor.
pub(super) async fn threads(
    db: &impl Db,
    now: Millis,
    before: Option<MessageId>,
    limit: u32,
) -> StoreResult<Vec<ThreadSummary>> {
    let before = before.unwrap_or(MessageId(i64::MAX));
    db.rows(
        "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, t.people::text \
         FROM threads t JOIN messages m ON m.id = t.last_id \
         JOIN messages f ON f.id = t.first_id \
         WHERE m.expires_at > $1 AND t.last_id < $2 \
         ORDER BY t.last_id DESC LIMIT $3",
        &[&now, &before, &i64::from(limit)],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(ThreadSummary {
            id: row.try_get(0)?,
            people: handles_of(row.try_get(5)?)?,
            message_count: row.try_get::<_, i64>(1)?.max(0) as u64,
            opening: row.try_get(2)?,
            last_id: row.try_get(3)?,
            last_activity: row.try_get(4)?,
        })
    })
    .collect()
}

/// Deletes expired messages in batches, each its own transaction under the
/// write lock, with their inbox rows, keeping the summaries true; returns
/// how many went. The caller holds the purge lock.
pub(super) async fn purge(client: &mut deadpool_postgres::Client, now: Millis) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let tx = client.transaction().await?;
        tx.exec("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
            .await?;
        let gone = rules::purge_batch(&Sql(&tx), now, PURGE_BATCH).await?;
        tx.commit().await?;
        total += gone;
        if gone < u64::from(PURGE_BATCH) {
            return Ok(total);
        }
    }
}
