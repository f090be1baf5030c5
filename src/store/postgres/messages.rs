//! Message rows and the ledger's writes outside the message rules
//! (`../sqlite/messages.rs`, in PostgreSQL).

use super::{Db, row};
use crate::model::{Attachment, Delivery, Handle, Message, MessageId, Millis, Place};
use crate::store::{StoreError, StoreResult};
use tokio_postgres::Row;

use crate::store::columns::{FILES_AT, LEDGER_FROM, Ledger, file_with, files_from_column};
pub(super) use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS, MESSAGE_COLUMNS_LEN};

pub(super) fn message_from_row(row: &Row) -> StoreResult<Message> {
    let to = row.try_get(4)?;
    let delivery = match to {
        Some(_) => {
            let at = |i: usize| LEDGER_FROM + i;
            Some(Delivery::from(Ledger {
                pushed_at: row.try_get(at(0))?,
                read_at: row.try_get(at(1))?,
                answered_at: row.try_get(at(2))?,
                offers: row
                    .try_get::<_, Option<i32>>(at(3))?
                    .map_or(0, |n| n.max(0) as u32),
                lease_until: row.try_get(at(4))?,
                via: row.try_get(at(5))?,
                expects: row.try_get(at(6))?,
                due_at: row.try_get(at(7))?,
                ack_result: row.try_get(at(8))?,
                ack_note: row.try_get(at(9))?,
                acked_at: row.try_get(at(10))?,
                overdue_at: row.try_get(at(11))?,
            }))
        }
        None => None,
    };
    let place = Place::from_columns(row.try_get(1)?, row.try_get(2)?).ok_or_else(|| {
        StoreError::backend(
            "a stored message",
            "in no channel and no thread, or in both",
        )
    })?;
    Ok(Message {
        id: row.try_get(0)?,
        place,
        from: row.try_get(3)?,
        to,
        kind: row.try_get(5)?,
        body: row.try_get(6)?,
        reply_to: row.try_get(7)?,
        created_at: row.try_get(8)?,
        expires_at: row.try_get(9)?,
        delivery,
        attachments: files_from_column(row.try_get::<_, Option<String>>(FILES_AT)?.as_deref()),
    })
}

/// The first column of each row, as ids.
pub(super) fn ids_of(rows: &[Row]) -> StoreResult<Vec<MessageId>> {
    Ok(rows
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?)
}

pub(super) async fn release_offers(
    db: &impl Db,
    recipient: &Handle,
    holder: i64,
    ids: &[MessageId],
) -> StoreResult<()> {
    db.exec(
        "UPDATE inbox SET lease_until = NULL \
         WHERE recipient = $1 AND message_id = ANY($2) AND push_holder = $3 AND read_at IS NULL",
        &[&recipient.as_str(), &ids, &holder],
    )
    .await?;
    Ok(())
}

pub(super) async fn next_lease_end(
    db: &impl Db,
    recipient: &Handle,
    now: Millis,
) -> StoreResult<Option<Millis>> {
    Ok(row(
        db,
        "SELECT min(lease_until) FROM inbox \
         WHERE recipient = $1 AND read_at IS NULL AND lease_until > $2",
        &[&recipient.as_str(), &now],
    )
    .await?
    .map(|row| row.try_get(0))
    .transpose()?
    .flatten())
}

pub(super) async fn confirm_read(
    db: &impl Db,
    recipient: &Handle,
    ids: &[MessageId],
    now: Millis,
) -> StoreResult<Vec<MessageId>> {
    let confirmed = db
        .rows(
            "UPDATE inbox SET read_at = $3, lease_until = NULL \
             WHERE recipient = $1 AND message_id = ANY($2) AND read_at IS NULL \
             RETURNING message_id",
            &[&recipient.as_str(), &ids, &now],
        )
        .await?;
    ids_of(&confirmed)
}

pub(super) async fn message(
    db: &impl Db,
    id: MessageId,
    now: Millis,
) -> StoreResult<Option<Message>> {
    db.rows(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE m.id = $1 AND m.expires_at > $2"
        ),
        &[&id, &now],
    )
    .await?
    .first()
    .map(message_from_row)
    .transpose()
}

pub(super) async fn attachment(
    db: &impl Db,
    id: MessageId,
    n: u32,
    now: Millis,
) -> StoreResult<Option<(Attachment, Vec<u8>)>> {
    let Some(row) = row(
        db,
        "SELECT m.attachments, a.data FROM attachments a JOIN messages m ON m.id = a.message_id \
         WHERE a.message_id = $1 AND a.n = $2 AND m.expires_at > $3",
        &[&id, &(n as i32), &now],
    )
    .await?
    else {
        return Ok(None);
    };
    let listed: Option<String> = row.try_get(0)?;
    Ok(file_with(listed.as_deref(), n, row.try_get(1)?))
}
