//! Messages, threads and inboxes; the overviews are `summaries.rs`'s.

use crate::model::{Attachment, Delivery, Handle, Message, MessageId, Millis, Place};
use crate::store::StoreResult;
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::columns::{FILES_AT, LEDGER_FROM, Ledger, file_with, files_from_column};
pub(super) use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS, MESSAGE_COLUMNS_LEN};

/// The messages a query's rows hold, in its order.
pub(super) fn messages_of(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> StoreResult<Vec<Message>> {
    Ok(conn
        .prepare_cached(sql)?
        .query_map(params, message_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    let to: Option<Handle> = row.get(4)?;
    let delivery = match to {
        Some(_) => {
            let at = |i: usize| LEDGER_FROM + i;
            Some(Delivery::from(Ledger {
                pushed_at: row.get(at(0))?,
                read_at: row.get(at(1))?,
                answered_at: row.get(at(2))?,
                offers: row.get::<_, Option<u32>>(at(3))?.unwrap_or(0),
                lease_until: row.get(at(4))?,
                via: row.get(at(5))?,
                expects: row.get(at(6))?,
                due_at: row.get(at(7))?,
                ack_result: row.get(at(8))?,
                ack_note: row.get(at(9))?,
                acked_at: row.get(at(10))?,
                overdue_at: row.get(at(11))?,
            }))
        }
        None => None,
    };
    let place = Place::from_columns(row.get(1)?, row.get(2)?).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Null,
            "a stored message in no channel and no thread, or in both".into(),
        )
    })?;
    Ok(Message {
        id: row.get(0)?,
        place,
        from: row.get(3)?,
        to,
        kind: row.get(5)?,
        body: row.get(6)?,
        reply_to: row.get(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
        delivery,
        attachments: files_from_column(row.get::<_, Option<String>>(FILES_AT)?.as_deref()),
    })
}

pub(super) fn release_offers(
    conn: &Connection,
    recipient: &Handle,
    holder: i64,
    ids: &[MessageId],
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
    ids: &[MessageId],
    now: Millis,
) -> StoreResult<Vec<MessageId>> {
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

pub(super) fn message(
    conn: &Connection,
    id: MessageId,
    now: Millis,
) -> StoreResult<Option<Message>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} WHERE m.id = ?1 AND m.expires_at > ?2"
        ))?
        .query_row(params![id, now], message_from_row)
        .optional()?)
}

pub(super) fn attachment(
    conn: &Connection,
    id: MessageId,
    n: u32,
    now: Millis,
) -> StoreResult<Option<(Attachment, Vec<u8>)>> {
    let found: Option<(Option<String>, Vec<u8>)> = conn
        .prepare_cached(
            "SELECT m.attachments, a.data FROM attachments a JOIN messages m ON m.id = a.message_id \
             WHERE a.message_id = ?1 AND a.n = ?2 AND m.expires_at > ?3",
        )?
        .query_row(params![id, n, now], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(found.and_then(|(listed, bytes)| file_with(listed.as_deref(), n, bytes)))
}
