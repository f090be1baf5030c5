//! Channel and thread overviews, kept as messages commit and as they are
//! purged, so an overview is a few index lookups whatever the history
//! holds.
//!
//! A summary is updated in the same transaction as the message it counts
//! (inside the group commit), and by the purge in the same transaction as
//! the rows it deletes. Between an expiry and the purge that follows (at
//! most a minute), a count may still include the messages that just
//! expired; a conversation whose newest message has expired is never
//! listed.

use crate::model::{Channel, ChannelSummary, Handle, Millis, ThreadSummary};
use crate::store::StoreResult;
use crate::store::summary::{Removed, first_people, handles_of, losses};
use rusqlite::{Connection, OptionalExtension, params};

/// Opens a thread whose first message will have id `first_id`: its row is
/// written whole, summary and all, so a new thread costs one row.
pub(super) fn open_thread(
    conn: &Connection,
    first_id: i64,
    people: [Option<&Handle>; 2],
    at: Millis,
) -> StoreResult<i64> {
    conn.prepare_cached(
        "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, people) \
         VALUES (?1, 1, ?2, ?2, ?1, ?3)",
    )?
    .execute(params![at, first_id, first_people(people)])?;
    Ok(conn.last_insert_rowid())
}

/// Counts a message in a thread opened before it.
pub(super) fn count_in_thread(
    conn: &Connection,
    thread_id: i64,
    id: i64,
    [sender, recipient]: [Option<&Handle>; 2],
    at: Millis,
) -> StoreResult<()> {
    // Each person counts the thread's messages they sent or received. Both
    // values are computed from the row before the update, so a message
    // with no recipient, or a note to oneself, sets the sender's count
    // twice to the same value: it counts once.
    let sender_path = sender.map(json_path);
    let recipient_path = recipient.map(json_path).or_else(|| sender_path.clone());
    conn.prepare_cached(
        "UPDATE threads SET message_count = message_count + 1, last_id = ?2, last_activity = ?3, \
         people = json_set(people, ?4, coalesce(people ->> ?4, 0) + 1, \
                                   ?5, coalesce(people ->> ?5, 0) + 1) \
         WHERE id = ?1",
    )?
    .execute(params![thread_id, id, at, sender_path, recipient_path])?;
    Ok(())
}

/// Counts a message in its channel's summary.
pub(super) fn count_in_channel(
    conn: &Connection,
    channel: &Channel,
    id: i64,
    at: Millis,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
         VALUES (?1, 1, ?2, ?3) ON CONFLICT (channel) DO UPDATE SET \
         message_count = message_count + 1, last_id = ?2, last_activity = ?3",
    )?
    .execute(params![channel, id, at])?;
    Ok(())
}

/// The JSON path of a person's count in a thread's `people` (handles are
/// lowercase letters, digits, `.`, `_` and `-`: nothing to escape).
fn json_path(handle: &Handle) -> String {
    format!("$.\"{handle}\"")
}

/// Takes `removed` messages out of the summaries of the conversations they
/// were in: drops a summary left with none; finds a conversation's newest
/// message again when it went, and a thread's opening when it went. It
/// reads a message only to find a new newest or opening, so its cost
/// follows what was removed, not what is left.
pub(super) fn uncount(conn: &Connection, removed: &[Removed]) -> StoreResult<()> {
    let (channels, threads) = losses(removed);
    for (channel, loss) in channels {
        conn.prepare_cached(
            "UPDATE channel_summaries SET message_count = message_count - ?2 WHERE channel = ?1",
        )?
        .execute(params![channel, loss.gone])?;
        conn.prepare_cached(
            "DELETE FROM channel_summaries WHERE channel = ?1 AND message_count <= 0",
        )?
        .execute([channel])?;
        conn.prepare_cached(
            "UPDATE channel_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE channel = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE channel = ?1 AND last_id <= ?2",
        )?
        .execute(params![channel, loss.newest])?;
    }
    for (thread_id, loss) in threads {
        let kept: Option<(i64, String)> = conn
            .prepare_cached("SELECT message_count, people FROM threads WHERE id = ?1")?
            .query_row([thread_id], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?;
        let Some((count, people)) = kept else {
            continue;
        };
        let left = count - loss.gone;
        if left <= 0 {
            // Never while a message is left in it, whatever the count says.
            let emptied = conn
                .prepare_cached(
                    "DELETE FROM threads WHERE id = ?1 \
                     AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1)",
                )?
                .execute([thread_id])?;
            if emptied == 1 {
                continue;
            }
        }
        // Who is in it: those who sent or received what is left.
        conn.prepare_cached("UPDATE threads SET message_count = ?2, people = ?3 WHERE id = ?1")?
            .execute(params![thread_id, left, loss.people_after(&people)?])?;
        conn.prepare_cached(
            "UPDATE threads SET first_id = \
             (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY id LIMIT 1) \
             WHERE id = ?1 AND first_id >= ?2",
        )?
        .execute(params![thread_id, loss.oldest])?;
        conn.prepare_cached(
            "UPDATE threads SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE thread_id = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE id = ?1 AND last_id <= ?2",
        )?
        .execute(params![thread_id, loss.newest])?;
    }
    Ok(())
}

/// Channels whose newest message is live, newest first, after the cursor.
pub(super) fn channels(
    conn: &Connection,
    now: Millis,
    before: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<ChannelSummary>> {
    Ok(conn
        .prepare_cached(
            "SELECT s.channel, s.message_count, s.last_id, s.last_activity \
             FROM channel_summaries s JOIN messages m ON m.id = s.last_id \
             WHERE m.expires_at > ?1 AND s.last_id < ?2 \
             ORDER BY s.last_id DESC LIMIT ?3",
        )?
        .query_map(params![now, before.unwrap_or(i64::MAX), limit], |row| {
            Ok(ChannelSummary {
                name: row.get(0)?,
                message_count: row.get::<_, i64>(1)?.max(0) as u64,
                last_id: row.get(2)?,
                last_activity: row.get(3)?,
            })
        })?
        .collect::<Result<_, _>>()?)
}

/// Threads whose newest message is live, newest first, after the cursor.
pub(super) fn threads(
    conn: &Connection,
    now: Millis,
    before: Option<i64>,
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
        .query_map(params![now, before.unwrap_or(i64::MAX), limit], |row| {
            let summary = ThreadSummary {
                id: row.get(0)?,
                people: Vec::new(),
                message_count: row.get::<_, i64>(1)?.max(0) as u64,
                opening: row.get(2)?,
                last_id: row.get(3)?,
                last_activity: row.get(4)?,
            };
            Ok((summary, row.get(5)?))
        })?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(mut summary, people)| {
            summary.people = handles_of(&people)?;
            Ok(summary)
        })
        .collect()
}

/// Deletes up to `batch` expired messages in one transaction, with their
/// inbox rows, keeping the summaries true; returns how many went.
pub(super) fn purge_batch(conn: &Connection, now: Millis, batch: u32) -> StoreResult<u64> {
    let removed: Vec<Removed> = conn
        .prepare_cached(
            "DELETE FROM messages WHERE id IN \
             (SELECT id FROM messages WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2) \
             RETURNING id, thread_id, channel, sender, recipient",
        )?
        .query_map(params![now, batch], |row| {
            Ok(Removed {
                id: row.get(0)?,
                thread_id: row.get(1)?,
                channel: row.get(2)?,
                sender: row.get(3)?,
                recipient: row.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    // A message's inbox row goes with it (the recipient is its key's first
    // part, so this is a lookup, not the scan a foreign key's cascade would
    // need an index of its own for).
    let mut unaddress =
        conn.prepare_cached("DELETE FROM inbox WHERE recipient = ?1 AND message_id = ?2")?;
    for message in &removed {
        if let Some(recipient) = &message.recipient {
            unaddress.execute(params![recipient, message.id])?;
        }
    }
    uncount(conn, &removed)?;
    Ok(removed.len() as u64)
}

pub(super) fn mark_read(
    conn: &Connection,
    reader: &Handle,
    conversation: &str,
    last_id: i64,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO last_read (handle, conversation, last_id) VALUES (?1, ?2, ?3) \
         ON CONFLICT (handle, conversation) DO UPDATE SET last_id = max(last_id, ?3)",
    )?
    .execute(params![reader, conversation, last_id])?;
    Ok(())
}

/// Unread counts from each last-read id: an index range of the unread
/// messages only, stopped at `cap`.
pub(super) fn unread(
    conn: &Connection,
    reader: &Handle,
    conversations: &[String],
    cap: u64,
    now: Millis,
) -> StoreResult<Vec<u64>> {
    let mut read = conn
        .prepare_cached("SELECT last_id FROM last_read WHERE handle = ?1 AND conversation = ?2")?;
    let mut counts = Vec::with_capacity(conversations.len());
    for conversation in conversations {
        let since: i64 = read
            .query_row(params![reader, conversation], |row| row.get(0))
            .optional()?
            .unwrap_or(0);
        let count: i64 = match conversation.split_once(':') {
            Some(("c", channel)) => conn
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM messages WHERE channel = ?1 \
                     AND id > ?2 AND expires_at > ?3 LIMIT ?4)",
                )?
                .query_row(params![channel, since, now, cap], |row| row.get(0))?,
            Some(("t", thread)) => conn
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM messages WHERE thread_id = ?1 \
                     AND id > ?2 AND expires_at > ?3 LIMIT ?4)",
                )?
                .query_row(
                    params![thread.parse::<i64>().unwrap_or(0), since, now, cap],
                    |row| row.get(0),
                )?,
            _ => 0,
        };
        counts.push(count.max(0) as u64);
    }
    Ok(counts)
}
