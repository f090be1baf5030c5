//! Message rows as every read selects them, and the ledger's writes
//! outside the message rules; the overviews are `summaries.rs`'s.

use crate::model::{
    Ack, AckResult, Attachment, Delivery, Expects, Handle, Message, MessageId, Millis, Place, Via,
};
use crate::store::columns::{
    FILES_AT, INBOX_JOIN, LEDGER_FROM, MESSAGE_COLUMNS, file_with, files_from_column,
};
use crate::store::sql::{Executor, List, Param, Row, in_list};
use crate::store::{StoreError, StoreResult};

/// A message's ledger from its inbox row's columns, [`LEDGER_FROM`] on. A
/// name this build does not know reads as none.
fn delivery_from_row(row: &Row<'_>) -> StoreResult<Delivery> {
    let at = |i: usize| LEDGER_FROM + i;
    let via: Option<String> = row.get(at(5))?;
    let expects: Option<String> = row.get(at(6))?;
    let ack_result: Option<String> = row.get(at(8))?;
    let acked_at: Option<Millis> = row.get(at(10))?;
    let ack = match (ack_result.as_deref().and_then(AckResult::parse), acked_at) {
        (Some(result), Some(when)) => Some(Ack {
            result,
            note: row.get(at(9))?,
            at: when,
        }),
        _ => None,
    };
    Ok(Delivery {
        pushed_at: row.get(at(0))?,
        read_at: row.get(at(1))?,
        answered_at: row.get(at(2))?,
        offers: row
            .get::<Option<i32>>(at(3))?
            .map_or(0, |n| n.max(0) as u32),
        lease_until: row.get(at(4))?,
        via: via.as_deref().and_then(Via::parse),
        expects: expects
            .as_deref()
            .and_then(Expects::parse)
            .unwrap_or_default(),
        due_at: row.get(at(7))?,
        ack,
        overdue_at: row.get(at(11))?,
    })
}

/// A message from a row of [`MESSAGE_COLUMNS`].
pub fn message_from_row(row: &Row<'_>) -> StoreResult<Message> {
    let to: Option<Handle> = row.get(4)?;
    let delivery = match to {
        Some(_) => Some(delivery_from_row(row)?),
        None => None,
    };
    let place = Place::from_columns(row.get(1)?, row.get(2)?).ok_or_else(|| {
        StoreError::backend(
            "a stored message",
            "in no channel and no thread, or in both",
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
        attachments: files_from_column(row.get::<Option<String>>(FILES_AT)?.as_deref()),
    })
}

/// The messages a statement selecting [`MESSAGE_COLUMNS`] returns, in its
/// order.
pub async fn messages(
    db: &impl Executor,
    sql: &str,
    params: &[&dyn Param],
) -> StoreResult<Vec<Message>> {
    db.rows(sql, params, |row| message_from_row(&row)).await
}

pub async fn release_offers(
    db: &impl Executor,
    recipient: &Handle,
    holder: i64,
    ids: &[MessageId],
) -> StoreResult<()> {
    let sql = in_list!(
        db,
        "UPDATE inbox SET lease_until = NULL WHERE recipient = ?1 AND ",
        "message_id",
        "?2",
        " AND push_holder = ?3 AND read_at IS NULL"
    );
    db.write(sql, &[recipient, &List(ids), &holder]).await
}

pub async fn next_lease_end(
    db: &impl Executor,
    recipient: &Handle,
    now: Millis,
) -> StoreResult<Option<Millis>> {
    let end: Option<Option<Millis>> = db
        .value(
            "SELECT min(lease_until) FROM inbox \
             WHERE recipient = ?1 AND read_at IS NULL AND lease_until > ?2",
            &[recipient, &now],
        )
        .await?;
    Ok(end.flatten())
}

/// What [`mark`] marks an inbox row.
pub enum Mark {
    /// Read (and its lease over), if it was not.
    Read,
    /// Brought to its person's notice, if it is still unread, unanswered
    /// and untold.
    Notified,
}

/// Marks those of `recipient`'s inbox rows among `ids` that are still
/// unmarked so at `now`: their ids, in order.
pub async fn mark(
    db: &impl Executor,
    mark: Mark,
    recipient: &Handle,
    ids: &[MessageId],
    now: Millis,
) -> StoreResult<Vec<MessageId>> {
    let sql = match mark {
        Mark::Read => in_list!(
            db,
            "UPDATE inbox SET read_at = ?3, lease_until = NULL WHERE recipient = ?1 AND ",
            "message_id",
            "?2",
            " AND read_at IS NULL RETURNING message_id"
        ),
        Mark::Notified => in_list!(
            db,
            "UPDATE inbox SET notified_at = ?3 WHERE recipient = ?1 AND ",
            "message_id",
            "?2",
            " AND notified_at IS NULL AND read_at IS NULL AND answered_at IS NULL \
             RETURNING message_id"
        ),
    };
    let mut marked: Vec<MessageId> = db.column(sql, &[recipient, &List(ids), &now]).await?;
    marked.sort_unstable();
    Ok(marked)
}

pub async fn message(
    db: &impl Executor,
    id: MessageId,
    now: Millis,
) -> StoreResult<Option<Message>> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
         WHERE m.id = ?1 AND m.expires_at > ?2"
    );
    db.row(&sql, &[&id, &now], |row| message_from_row(&row))
        .await
}

pub async fn attachment(
    db: &impl Executor,
    id: MessageId,
    n: u32,
    now: Millis,
) -> StoreResult<Option<(Attachment, Vec<u8>)>> {
    let found: Option<(Option<String>, Vec<u8>)> = db
        .row(
            "SELECT m.attachments, a.data FROM attachments a JOIN messages m ON m.id = a.message_id \
             WHERE a.message_id = ?1 AND a.n = ?2 AND m.expires_at > ?3",
            &[&id, &attachment_number(n), &now],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .await?;
    Ok(found.and_then(|(listed, bytes)| file_with(listed.as_deref(), n, bytes)))
}

/// A file's number as its `integer` column keeps it.
pub fn attachment_number(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
