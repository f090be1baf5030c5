//! Messages, threads, inboxes and the channel and thread overviews.

use crate::model::{Channel, Handle, Message, Millis};
use crate::store::{Conversation, NewMessage, RecipientCheck, StoreError, StoreResult};
use rusqlite::{Connection, params};

pub(super) const MESSAGE_COLUMNS: &str =
    "id, thread_id, channel, sender, recipient, type, body, reply_to, created_at, expires_at";

pub(super) fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: row.get(0)?,
        thread_id: row.get(1)?,
        channel: row.get(2)?,
        from: row.get(3)?,
        to: row.get(4)?,
        kind: row.get(5)?,
        body: row.get(6)?,
        reply_to: row.get(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
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

pub(super) fn claim_inbox(
    conn: &Connection,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    // The writer runs one job at a time, and the UPDATE both finds and marks
    // the rows, so no two claims can return the same message.
    let ids: Vec<i64> = conn
        .prepare_cached(
            "UPDATE inbox SET claimed_at = ?2 WHERE recipient = ?1 AND message_id IN ( \
                 SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                 WHERE i.recipient = ?1 AND i.claimed_at IS NULL AND m.expires_at > ?2 \
                 ORDER BY i.message_id LIMIT ?3) \
             RETURNING message_id",
        )?
        .query_map(params![recipient, now, limit], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (SELECT value FROM json_each(?1)) \
         ORDER BY id"
    ))?;
    let list = serde_json::to_string(&ids).expect("ids serialize");
    let messages = statement
        .query_map([list], message_from_row)?
        .collect::<Result<_, _>>()?;
    Ok(messages)
}

pub(super) fn unclaim_inbox(conn: &Connection, recipient: &Handle, ids: &[i64]) -> StoreResult<()> {
    let mut unclaim = conn.prepare_cached(
        "UPDATE inbox SET claimed_at = NULL WHERE recipient = ?1 AND message_id = ?2",
    )?;
    for id in ids {
        unclaim.execute(params![recipient, id])?;
    }
    Ok(())
}

pub(super) fn thread(conn: &Connection, thread_id: i64, now: Millis) -> StoreResult<Vec<Message>> {
    let messages: Vec<Message> = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages \
             WHERE thread_id = ?1 AND expires_at > ?2 ORDER BY id"
        ))?
        .query_map(params![thread_id, now], message_from_row)?
        .collect::<Result<_, _>>()?;
    if messages.is_empty() {
        return Err(StoreError::NotFound(format!(
            "there is no thread {thread_id}"
        )));
    }
    Ok(messages)
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
            "SELECT {MESSAGE_COLUMNS} FROM messages \
             WHERE channel = ?1 AND id > ?2 AND expires_at > ?3 ORDER BY id LIMIT ?4"
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
    let mut messages: Vec<Message> = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages \
             WHERE channel = ?1 AND expires_at > ?2 ORDER BY id DESC LIMIT ?3"
        ))?
        .query_map(params![channel, now, limit], message_from_row)?
        .collect::<Result<_, _>>()?;
    messages.reverse();
    Ok(messages)
}
