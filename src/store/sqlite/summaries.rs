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
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;

/// Counts a stored message in its conversation's summary.
pub(super) fn count(
    conn: &Connection,
    id: i64,
    thread_id: Option<i64>,
    channel: Option<&Channel>,
    people: [Option<&Handle>; 2],
    body: &str,
    at: Millis,
) -> StoreResult<()> {
    if let Some(channel) = channel {
        conn.prepare_cached(
            "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
             VALUES (?1, 1, ?2, ?3) ON CONFLICT (channel) DO UPDATE SET \
             message_count = message_count + 1, last_id = ?2, last_activity = ?3",
        )?
        .execute(params![channel, id, at])?;
    }
    if let Some(thread_id) = thread_id {
        conn.prepare_cached(
            "INSERT INTO thread_summaries \
             (thread_id, message_count, first_id, opening, last_id, last_activity) \
             VALUES (?1, 1, ?2, ?3, ?2, ?4) ON CONFLICT (thread_id) DO UPDATE SET \
             message_count = message_count + 1, last_id = ?2, last_activity = ?4",
        )?
        .execute(params![thread_id, id, body, at])?;
        // Each person counts the thread's messages they sent or received
        // (a note to oneself once), so the purge can tell when they leave.
        // One statement for both (the recipient's row is skipped when none).
        let mut people = distinct(people);
        let (sender, recipient) = (people.next(), people.next());
        conn.prepare_cached(
            "INSERT INTO thread_people (thread_id, handle, message_count) \
             SELECT ?1, value, 1 FROM (SELECT ?2 AS value UNION ALL SELECT ?3) \
             WHERE value IS NOT NULL \
             ON CONFLICT (thread_id, handle) DO UPDATE SET message_count = message_count + 1",
        )?
        .execute(params![thread_id, sender, recipient])?;
    }
    Ok(())
}

/// A sender and a recipient, each once.
fn distinct<T: PartialEq>([sender, recipient]: [Option<T>; 2]) -> impl Iterator<Item = T> {
    let recipient = recipient.filter(|r| sender.as_ref() != Some(r));
    sender.into_iter().chain(recipient)
}

/// What the purge needs to know of a message it deleted.
pub(super) struct Removed {
    id: i64,
    thread_id: Option<i64>,
    channel: Option<String>,
    sender: String,
    recipient: Option<String>,
}

/// How many messages of a thread went, the newest and oldest of them, and
/// how many each person sent or received.
struct ThreadLoss<'a> {
    gone: i64,
    newest: i64,
    oldest: i64,
    people: HashMap<&'a str, i64>,
}

/// Takes `removed` messages out of the summaries of the conversations they
/// were in: drops a summary left with none; finds a conversation's newest
/// message again when it went, and a thread's opening when it went. It
/// reads a message only to find a new newest or opening, so its cost
/// follows what was removed, not what is left.
pub(super) fn uncount(conn: &Connection, removed: &[Removed]) -> StoreResult<()> {
    // Per conversation: how many went, and the newest (and oldest) that did.
    let mut channels: HashMap<&str, (i64, i64)> = HashMap::new();
    let mut threads: HashMap<i64, ThreadLoss> = HashMap::new();
    for message in removed {
        if let Some(channel) = &message.channel {
            let entry = channels.entry(channel).or_insert((0, i64::MIN));
            entry.0 += 1;
            entry.1 = entry.1.max(message.id);
        }
        if let Some(thread_id) = message.thread_id {
            let loss = threads.entry(thread_id).or_insert_with(|| ThreadLoss {
                gone: 0,
                newest: i64::MIN,
                oldest: i64::MAX,
                people: HashMap::new(),
            });
            loss.gone += 1;
            loss.newest = loss.newest.max(message.id);
            loss.oldest = loss.oldest.min(message.id);
            let people = [Some(message.sender.as_str()), message.recipient.as_deref()];
            for handle in distinct(people) {
                *loss.people.entry(handle).or_default() += 1;
            }
        }
    }
    for (channel, (gone, newest_gone)) in channels {
        conn.prepare_cached(
            "UPDATE channel_summaries SET message_count = message_count - ?2 WHERE channel = ?1",
        )?
        .execute(params![channel, gone])?;
        conn.prepare_cached(
            "DELETE FROM channel_summaries WHERE channel = ?1 AND message_count <= 0",
        )?
        .execute([channel])?;
        conn.prepare_cached(
            "UPDATE channel_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE channel = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE channel = ?1 AND last_id <= ?2",
        )?
        .execute(params![channel, newest_gone])?;
    }
    for (thread_id, loss) in threads {
        let left: Option<i64> = conn
            .prepare_cached(
                "UPDATE thread_summaries SET message_count = message_count - ?2 \
                 WHERE thread_id = ?1 RETURNING message_count",
            )?
            .query_row(params![thread_id, loss.gone], |row| row.get(0))
            .optional()?;
        if left.is_none_or(|count| count <= 0) {
            // The thread's rows go with it (thread_summaries, thread_people);
            // never while a message is left in it, whatever the count says.
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
        conn.prepare_cached(
            "UPDATE thread_summaries SET (first_id, opening) = \
             (SELECT id, body FROM messages WHERE thread_id = ?1 ORDER BY id LIMIT 1) \
             WHERE thread_id = ?1 AND first_id >= ?2",
        )?
        .execute(params![thread_id, loss.oldest])?;
        conn.prepare_cached(
            "UPDATE thread_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE thread_id = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE thread_id = ?1 AND last_id <= ?2",
        )?
        .execute(params![thread_id, loss.newest])?;
        // Who is in it: those who sent or received what is left.
        let mut leave = conn.prepare_cached(
            "UPDATE thread_people SET message_count = message_count - ?3 \
             WHERE thread_id = ?1 AND handle = ?2",
        )?;
        for (handle, gone) in loss.people {
            leave.execute(params![thread_id, handle, gone])?;
        }
        conn.prepare_cached(
            "DELETE FROM thread_people WHERE thread_id = ?1 AND message_count <= 0",
        )?
        .execute([thread_id])?;
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
    let mut summaries: Vec<ThreadSummary> = conn
        .prepare_cached(
            "SELECT s.thread_id, s.message_count, s.opening, s.last_id, s.last_activity \
             FROM thread_summaries s JOIN messages m ON m.id = s.last_id \
             WHERE m.expires_at > ?1 AND s.last_id < ?2 \
             ORDER BY s.last_id DESC LIMIT ?3",
        )?
        .query_map(params![now, before.unwrap_or(i64::MAX), limit], |row| {
            Ok(ThreadSummary {
                id: row.get(0)?,
                people: Vec::new(),
                message_count: row.get::<_, i64>(1)?.max(0) as u64,
                opening: row.get(2)?,
                last_id: row.get(3)?,
                last_activity: row.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut people = conn
        .prepare_cached("SELECT handle FROM thread_people WHERE thread_id = ?1 ORDER BY handle")?;
    for summary in &mut summaries {
        summary.people = people
            .query_map([summary.id], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
    }
    Ok(summaries)
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
    uncount(conn, &removed)?;
    Ok(removed.len() as u64)
}

/// Threads with no summary and no message left, deleted (a database from
/// before the summaries may hold some); never one with a message in it.
pub(super) fn drop_empty_threads(conn: &Connection) -> StoreResult<()> {
    conn.prepare_cached(
        "DELETE FROM threads WHERE id NOT IN (SELECT thread_id FROM thread_summaries) \
         AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = threads.id)",
    )?
    .execute([])?;
    Ok(())
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
