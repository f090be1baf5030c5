//! Messages, threads and inboxes; the overviews are `summaries.rs`'s.

use crate::model::{Channel, Delivery, Handle, Message, Millis};
use crate::store::{Conversation, NewMessage, Offer, RecipientCheck, StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, params};

/// A message's columns, with its delivery ledger: select them from
/// `messages m` [`INBOX_JOIN`].
pub(super) const MESSAGE_COLUMNS: &str = "m.id, m.thread_id, m.channel, m.sender, m.recipient, \
     m.type, m.body, m.reply_to, m.created_at, m.expires_at, \
     i.pushed_at, i.read_at, i.answered_at, i.offers";

/// Joins a message (as `m`) to its recipient's inbox row (as `i`), if any.
pub(super) const INBOX_JOIN: &str =
    "LEFT JOIN inbox i ON i.recipient = m.recipient AND i.message_id = m.id";

pub(super) fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    let to: Option<Handle> = row.get(4)?;
    let delivery = match to {
        Some(_) => Some(Delivery {
            pushed_at: row.get(10)?,
            read_at: row.get(11)?,
            answered_at: row.get(12)?,
            offers: row.get::<_, Option<u32>>(13)?.unwrap_or(0),
        }),
        None => None,
    };
    Ok(Message {
        id: row.get(0)?,
        thread_id: row.get(1)?,
        channel: row.get(2)?,
        from: row.get(3)?,
        to,
        kind: row.get(5)?,
        body: row.get(6)?,
        reply_to: row.get(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
        delivery,
    })
}

fn check_recipient(
    conn: &Connection,
    recipient: &Handle,
    check: RecipientCheck,
) -> StoreResult<()> {
    let RecipientCheck::LivePerson { or_empty_store } = check else {
        return Ok(());
    };
    let live = conn
        .prepare_cached("SELECT 1 FROM people WHERE handle = ?1 AND revoked_at IS NULL")?
        .exists([recipient])?;
    if live || (or_empty_store && !super::people::any(conn)?) {
        return Ok(());
    }
    Err(StoreError::NotFound(format!(
        "there is nobody called {recipient} on this relay"
    )))
}

/// The id the next message gets, as AUTOINCREMENT would choose it: one
/// above both the largest id recorded in `sqlite_sequence` and the largest
/// in the table. Nobody else inserts while this write transaction
/// (IMMEDIATE) runs. Knowing it first lets a new thread's row be written
/// whole, with its first message's id, before the message.
fn next_message_id(conn: &Connection) -> StoreResult<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0), \
                        coalesce((SELECT max(id) FROM messages), 0)) + 1",
        )?
        .query_row([], |row| row.get(0))?)
}

pub(super) fn insert(conn: &Connection, new: NewMessage) -> StoreResult<Message> {
    if let Some(recipient) = &new.to {
        check_recipient(conn, recipient, new.check_to)?;
    }
    let id = next_message_id(conn)?;
    let people = [Some(&new.from), new.to.as_ref()];
    let opened = matches!(new.conversation, Conversation::NewThread);
    let (thread_id, channel) = match &new.conversation {
        Conversation::NewThread => (
            Some(super::summaries::open_thread(
                conn,
                id,
                people,
                new.created_at,
            )?),
            None,
        ),
        &Conversation::Thread(id) => {
            let exists = conn
                .prepare_cached(
                    "SELECT 1 FROM messages WHERE thread_id = ?1 AND expires_at > ?2 LIMIT 1",
                )?
                .exists(params![id, new.created_at])?;
            if !exists {
                return Err(StoreError::NotFound(format!("there is no thread {id}")));
            }
            (Some(id), None)
        }
        Conversation::Channel(name) => (None, Some(name.clone())),
    };
    if let Some(reply_to) = new.reply_to {
        let same_place = conn
            .prepare_cached(
                "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 \
                 AND thread_id IS ?3 AND channel IS ?4",
            )?
            .exists(params![reply_to, new.created_at, thread_id, channel])?;
        if !same_place {
            return Err(StoreError::NotFound(format!(
                "reply_to {reply_to} is not a live message of this conversation"
            )));
        }
    }
    conn.prepare_cached(
        "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, reply_to, \
         created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        id,
        thread_id,
        channel,
        new.from,
        new.to,
        new.kind,
        new.body,
        new.reply_to,
        new.created_at,
        new.expires_at
    ])?;
    if let Some(recipient) = &new.to {
        conn.prepare_cached("INSERT INTO inbox (recipient, message_id) VALUES (?1, ?2)")?
            .execute(params![recipient, id])?;
    }
    answer(conn, &new, thread_id)?;
    match (&channel, thread_id) {
        (Some(channel), _) => {
            super::summaries::count_in_channel(conn, channel, id, new.created_at)?
        }
        (None, Some(thread_id)) if !opened => {
            super::summaries::count_in_thread(conn, thread_id, id, people, new.created_at)?
        }
        _ => {}
    }
    Ok(new.stored(id, thread_id, channel))
}

/// A reply marks what it answers: in a thread, every message of it to the
/// replier that was pushed to their agent or read (one still waiting may have
/// come a moment before the reply, unseen: it goes on waiting); in a
/// channel, the message it replies to, if it was to them.
fn answer(conn: &Connection, new: &NewMessage, thread_id: Option<i64>) -> StoreResult<()> {
    let now = new.created_at;
    match (thread_id, new.reply_to, &new.conversation) {
        (_, _, Conversation::NewThread) => {}
        (Some(thread_id), _, _) => {
            conn.prepare_cached(
                "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
                 WHERE recipient = ?1 AND answered_at IS NULL \
                 AND (pushed_at IS NOT NULL OR read_at IS NOT NULL) AND message_id IN \
                     (SELECT id FROM messages WHERE thread_id = ?2)",
            )?
            .execute(params![new.from, thread_id, now])?;
        }
        (None, Some(reply_to), _) => {
            conn.prepare_cached(
                "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
                 WHERE recipient = ?1 AND message_id = ?2 AND answered_at IS NULL",
            )?
            .execute(params![new.from, reply_to, now])?;
        }
        (None, None, _) => {}
    }
    Ok(())
}

/// What an inbox row must be for a claim or an offer to take it: unread,
/// its message live, and no stream's lease on it running.
const TAKEABLE: &str = "i.recipient = ?1 AND i.read_at IS NULL AND m.expires_at > ?2 \
     AND (i.lease_until IS NULL OR i.lease_until <= ?2)";

pub(super) fn claim_inbox(
    conn: &Connection,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    // The writer runs one job at a time, and the UPDATE both finds and marks
    // the rows, so no two claims can return the same message.
    let ids: Vec<i64> = conn
        .prepare_cached(&format!(
            "UPDATE inbox SET read_at = ?2, lease_until = NULL \
             WHERE recipient = ?1 AND message_id IN ( \
                 SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                 WHERE {TAKEABLE} ORDER BY i.message_id LIMIT ?3) \
             RETURNING message_id"
        ))?
        .query_map(params![recipient, now, limit], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    by_ids(conn, &ids)
}

pub(super) fn offer_inbox(
    conn: &Connection,
    recipient: &Handle,
    offer: Offer,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids: Vec<i64> = conn
        .prepare_cached(&format!(
            "UPDATE inbox SET pushed_at = coalesce(pushed_at, ?2), lease_until = ?4, \
                 push_holder = ?5, offers = offers + 1 \
             WHERE recipient = ?1 AND message_id IN ( \
                 SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                 WHERE {TAKEABLE} AND i.push_holder IS NOT ?5 \
                 ORDER BY i.message_id LIMIT ?3) \
             RETURNING message_id"
        ))?
        .query_map(
            params![recipient, offer.now, limit, offer.until, offer.holder],
            |row| row.get(0),
        )?
        .collect::<Result<_, _>>()?;
    by_ids(conn, &ids)
}

pub(super) fn release_offers(
    conn: &Connection,
    recipient: &Handle,
    holder: i64,
    ids: &[i64],
) -> StoreResult<()> {
    let mut release = conn.prepare_cached(
        "UPDATE inbox SET lease_until = NULL \
         WHERE recipient = ?1 AND message_id = ?2 AND push_holder = ?3 AND read_at IS NULL",
    )?;
    for id in ids {
        release.execute(params![recipient, id, holder])?;
    }
    Ok(())
}

pub(super) fn next_lease_end(
    conn: &Connection,
    recipient: &Handle,
    now: Millis,
) -> StoreResult<Option<Millis>> {
    Ok(conn
        .prepare_cached(
            "SELECT min(lease_until) FROM inbox \
             WHERE recipient = ?1 AND read_at IS NULL AND lease_until > ?2",
        )?
        .query_row(params![recipient, now], |row| row.get(0))?)
}

pub(super) fn confirm_read(
    conn: &Connection,
    recipient: &Handle,
    ids: &[i64],
    now: Millis,
) -> StoreResult<Vec<i64>> {
    let mut confirm = conn.prepare_cached(
        "UPDATE inbox SET read_at = ?3, lease_until = NULL \
         WHERE recipient = ?1 AND message_id = ?2 AND read_at IS NULL",
    )?;
    let mut confirmed = Vec::new();
    for &id in ids {
        if confirm.execute(params![recipient, id, now])? > 0 {
            confirmed.push(id);
        }
    }
    Ok(confirmed)
}

/// Messages by id, oldest first, with their ledgers as they are now.
fn by_ids(conn: &Connection, ids: &[i64]) -> StoreResult<Vec<Message>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
         WHERE m.id IN (SELECT value FROM json_each(?1)) ORDER BY m.id"
    ))?;
    let list = serde_json::to_string(ids).expect("ids serialize");
    let messages = statement
        .query_map([list], message_from_row)?
        .collect::<Result<_, _>>()?;
    Ok(messages)
}

pub(super) fn message(conn: &Connection, id: i64, now: Millis) -> StoreResult<Option<Message>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} WHERE m.id = ?1 AND m.expires_at > ?2"
        ))?
        .query_row(params![id, now], message_from_row)
        .optional()?)
}

pub(super) fn thread(
    conn: &Connection,
    thread_id: i64,
    since_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages: Vec<Message> = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE m.thread_id = ?1 AND m.id > ?2 AND m.expires_at > ?3 ORDER BY m.id LIMIT ?4"
        ))?
        .query_map(params![thread_id, since_id, now, limit], message_from_row)?
        .collect::<Result<_, _>>()?;
    if messages.is_empty() {
        thread_exists(conn, thread_id, now)?;
    }
    Ok(messages)
}

pub(super) fn thread_recent(
    conn: &Connection,
    thread_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages = newest(conn, "m.thread_id", &thread_id, limit, now)?;
    if messages.is_empty() {
        thread_exists(conn, thread_id, now)?;
    }
    Ok(messages)
}

/// The newest `limit` live messages whose `column` is `place`, oldest first.
fn newest(
    conn: &Connection,
    column: &str,
    place: &dyn rusqlite::ToSql,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let mut messages: Vec<Message> = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE {column} = ?1 AND m.expires_at > ?2 ORDER BY m.id DESC LIMIT ?3"
        ))?
        .query_map(params![place, now, limit], message_from_row)?
        .collect::<Result<_, _>>()?;
    messages.reverse();
    Ok(messages)
}

/// `NotFound` unless the thread has a live message.
fn thread_exists(conn: &Connection, thread_id: i64, now: Millis) -> StoreResult<()> {
    let live = conn
        .prepare_cached("SELECT 1 FROM messages WHERE thread_id = ?1 AND expires_at > ?2 LIMIT 1")?
        .exists(params![thread_id, now])?;
    match live {
        true => Ok(()),
        false => Err(StoreError::NotFound(format!(
            "there is no thread {thread_id}"
        ))),
    }
}

pub(super) fn in_channel(
    conn: &Connection,
    channel: &Channel,
    since_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE m.channel = ?1 AND m.id > ?2 AND m.expires_at > ?3 ORDER BY m.id LIMIT ?4"
        ))?
        .query_map(params![channel, since_id, now, limit], message_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn recent_in_channel(
    conn: &Connection,
    channel: &Channel,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    newest(conn, "m.channel", channel, limit, now)
}
