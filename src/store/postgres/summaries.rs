//! Channel and thread overviews, read marks and the purge
//! (`../sqlite/summaries.rs`, in PostgreSQL): kept in the transaction of
//! each message and of each purge batch, with the arithmetic shared
//! (`store/summary.rs`).

use super::{Db, WRITE_LOCK, row};
use crate::model::{Channel, ChannelSummary, Handle, Millis, ThreadSummary};
use crate::store::summary::{Removed, first_people, handles_of, losses};
use crate::store::{PURGE_BATCH, StoreResult};

/// Opens a thread whose first message will have id `first_id`.
pub(super) async fn open_thread(
    db: &impl Db,
    first_id: i64,
    people: [Option<&Handle>; 2],
    at: Millis,
) -> StoreResult<i64> {
    let row = row(
        db,
        "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, people) \
         VALUES ($1, 1, $2, $2, $1, ($3::text)::jsonb) RETURNING id",
        &[&at, &first_id, &first_people(people)],
    )
    .await?
    .expect("INSERT … RETURNING returns a row");
    Ok(row.try_get(0)?)
}

/// Counts a message in a thread opened before it: both counts computed from
/// the row before the update, so a note to oneself counts once.
pub(super) async fn count_in_thread(
    db: &impl Db,
    thread_id: i64,
    id: i64,
    [sender, recipient]: [Option<&Handle>; 2],
    at: Millis,
) -> StoreResult<()> {
    let sender = sender.map(Handle::as_str);
    let recipient = recipient.map(Handle::as_str).or(sender);
    db.exec(
        "UPDATE threads SET message_count = message_count + 1, last_id = $2, last_activity = $3, \
         people = people \
             || jsonb_build_object($4::text, coalesce((people ->> $4::text)::bigint, 0) + 1) \
             || jsonb_build_object($5::text, coalesce((people ->> $5::text)::bigint, 0) + 1) \
         WHERE id = $1",
        &[&thread_id, &id, &at, &sender, &recipient],
    )
    .await?;
    Ok(())
}

pub(super) async fn count_in_channel(
    db: &impl Db,
    channel: &str,
    id: i64,
    at: Millis,
) -> StoreResult<()> {
    db.exec(
        "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
         VALUES ($1, 1, $2, $3) ON CONFLICT (channel) DO UPDATE SET \
         message_count = channel_summaries.message_count + 1, last_id = $2, last_activity = $3",
        &[&channel, &id, &at],
    )
    .await?;
    Ok(())
}

/// Takes `removed` messages out of their conversations' summaries, reading
/// a message only to find a new newest or opening.
async fn uncount(db: &impl Db, removed: &[Removed]) -> StoreResult<()> {
    let (channels, threads) = losses(removed);
    for (channel, loss) in channels {
        db.exec(
            "UPDATE channel_summaries SET message_count = message_count - $2 WHERE channel = $1",
            &[&channel, &loss.gone],
        )
        .await?;
        db.exec(
            "DELETE FROM channel_summaries WHERE channel = $1 AND message_count <= 0",
            &[&channel],
        )
        .await?;
        db.exec(
            "UPDATE channel_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE channel = $1 ORDER BY id DESC LIMIT 1) \
             WHERE channel = $1 AND last_id <= $2",
            &[&channel, &loss.newest],
        )
        .await?;
    }
    for (thread_id, loss) in threads {
        let Some(kept) = row(
            db,
            "SELECT message_count, people::text FROM threads WHERE id = $1",
            &[&thread_id],
        )
        .await?
        else {
            continue;
        };
        let (count, people): (i64, &str) = (kept.try_get(0)?, kept.try_get(1)?);
        let left = count - loss.gone;
        if left <= 0 {
            let emptied = db
                .exec(
                    "DELETE FROM threads WHERE id = $1 \
                     AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1)",
                    &[&thread_id],
                )
                .await?;
            if emptied == 1 {
                continue;
            }
        }
        db.exec(
            "UPDATE threads SET message_count = $2, people = ($3::text)::jsonb WHERE id = $1",
            &[&thread_id, &left, &loss.people_after(people)?],
        )
        .await?;
        db.exec(
            "UPDATE threads SET first_id = \
             (SELECT id FROM messages WHERE thread_id = $1 ORDER BY id LIMIT 1) \
             WHERE id = $1 AND first_id >= $2",
            &[&thread_id, &loss.oldest],
        )
        .await?;
        db.exec(
            "UPDATE threads SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE thread_id = $1 ORDER BY id DESC LIMIT 1) \
             WHERE id = $1 AND last_id <= $2",
            &[&thread_id, &loss.newest],
        )
        .await?;
    }
    Ok(())
}

/// Channels whose newest message is live, newest first, after the cursor.
pub(super) async fn channels(
    db: &impl Db,
    now: Millis,
    before: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<ChannelSummary>> {
    db.rows(
        "SELECT s.channel, s.message_count, s.last_id, s.last_activity \
         FROM channel_summaries s JOIN messages m ON m.id = s.last_id \
         WHERE m.expires_at > $1 AND s.last_id < $2 \
         ORDER BY s.last_id DESC LIMIT $3",
        &[&now, &before.unwrap_or(i64::MAX), &i64::from(limit)],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(ChannelSummary {
            name: Channel::parse(row.try_get(0)?)
                .map_err(|e| crate::store::StoreError::backend("a stored channel", e))?,
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
    before: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<ThreadSummary>> {
    db.rows(
        "SELECT t.id, t.message_count, f.body, t.last_id, t.last_activity, t.people::text \
         FROM threads t JOIN messages m ON m.id = t.last_id \
         JOIN messages f ON f.id = t.first_id \
         WHERE m.expires_at > $1 AND t.last_id < $2 \
         ORDER BY t.last_id DESC LIMIT $3",
        &[&now, &before.unwrap_or(i64::MAX), &i64::from(limit)],
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
        let removed: Vec<Removed> = tx
            .rows(
                "DELETE FROM messages WHERE id IN \
                 (SELECT id FROM messages WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2) \
                 RETURNING id, thread_id, channel, sender, recipient",
                &[&now, &i64::from(PURGE_BATCH)],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(Removed {
                    id: row.try_get(0)?,
                    thread_id: row.try_get(1)?,
                    channel: row.try_get(2)?,
                    sender: row.try_get(3)?,
                    recipient: row.try_get(4)?,
                })
            })
            .collect::<StoreResult<_>>()?;
        let (recipients, ids): (Vec<&str>, Vec<i64>) = removed
            .iter()
            .filter_map(|m| Some((m.recipient.as_deref()?, m.id)))
            .unzip();
        tx.exec(
            "DELETE FROM inbox WHERE (recipient, message_id) IN \
             (SELECT * FROM unnest($1::text[], $2::bigint[]))",
            &[&recipients, &ids],
        )
        .await?;
        uncount(&tx, &removed).await?;
        tx.commit().await?;
        total += removed.len() as u64;
        if removed.len() < PURGE_BATCH as usize {
            return Ok(total);
        }
    }
}

pub(super) async fn mark_read(
    db: &impl Db,
    reader: &Handle,
    conversation: &str,
    last_id: i64,
) -> StoreResult<()> {
    db.exec(
        "INSERT INTO last_read (handle, conversation, last_id) VALUES ($1, $2, $3) \
         ON CONFLICT (handle, conversation) DO UPDATE \
         SET last_id = greatest(last_read.last_id, $3)",
        &[&reader.as_str(), &conversation, &last_id],
    )
    .await?;
    Ok(())
}

/// Unread counts from each last-read id, each stopped at `cap`.
pub(super) async fn unread(
    db: &impl Db,
    reader: &Handle,
    conversations: &[String],
    cap: u64,
    now: Millis,
) -> StoreResult<Vec<u64>> {
    // Every conversation in one statement (a page asks for dozens): each
    // as a channel, a thread, or neither, counted from its read mark.
    let (channels, threads): (Vec<Option<&str>>, Vec<Option<i64>>) = conversations
        .iter()
        .map(|conversation| match conversation.split_once(':') {
            Some(("c", channel)) => (Some(channel), None),
            Some(("t", thread)) => (None, Some(thread.parse::<i64>().unwrap_or(0))),
            _ => (None, None),
        })
        .unzip();
    let cap = cap.min(i64::MAX as u64) as i64;
    db.rows(
        "SELECT CASE \
             WHEN a.channel IS NOT NULL THEN (SELECT count(*) FROM (SELECT 1 FROM messages m \
                 WHERE m.channel = a.channel AND m.id > coalesce(r.last_id, 0) \
                 AND m.expires_at > $5 LIMIT $6) unread) \
             WHEN a.thread IS NOT NULL THEN (SELECT count(*) FROM (SELECT 1 FROM messages m \
                 WHERE m.thread_id = a.thread AND m.id > coalesce(r.last_id, 0) \
                 AND m.expires_at > $5 LIMIT $6) unread) \
             ELSE 0 END \
         FROM unnest($2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY \
             AS a(conversation, channel, thread, n) \
         LEFT JOIN last_read r ON r.handle = $1 AND r.conversation = a.conversation \
         ORDER BY a.n",
        &[
            &reader.as_str(),
            &conversations,
            &channels,
            &threads,
            &now,
            &cap,
        ],
    )
    .await?
    .iter()
    .map(|row| Ok(row.try_get::<_, i64>(0)?.max(0) as u64))
    .collect()
}
