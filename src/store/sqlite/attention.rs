//! What needs a person's attention: their notification settings, the
//! unread messages not yet brought to them, and their agents' approvals.

use super::messages::{MESSAGE_COLUMNS, messages_of};
use crate::model::{
    Approval, ApprovalId, Behavior, Device, DeviceId, Handle, Message, MessageId, Millis,
    NewApproval, NotifySettings, Preview, WebhookFormat,
};
use crate::store::columns::from_row;
use crate::store::{StoreResult, settings_from_columns};
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn notify_settings(
    conn: &Connection,
    handle: &Handle,
) -> StoreResult<Option<NotifySettings>> {
    let row = conn
        .prepare_cached(
            "SELECT after_ms, at_once_when_away, webhook, webhook_format \
             FROM notify_settings WHERE handle = ?1",
        )?
        .query_row([handle], |row| {
            Ok((
                row.get::<_, Option<Millis>>(0)?,
                row.get::<_, bool>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .optional()?;
    row.map(|(after, at_once_when_away, webhook, format)| {
        settings_from_columns(after, at_once_when_away, webhook, &format)
    })
    .transpose()
}

pub(super) fn set_notify_settings(
    conn: &Connection,
    handle: &Handle,
    settings: &NotifySettings,
) -> StoreResult<()> {
    let webhook = settings.webhook.as_ref();
    conn.prepare_cached(
        "INSERT INTO notify_settings (handle, after_ms, at_once_when_away, webhook, webhook_format) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (handle) DO UPDATE SET after_ms = ?2, at_once_when_away = ?3, \
         webhook = ?4, webhook_format = ?5",
    )?
    .execute(params![
        handle,
        settings.after,
        settings.at_once_when_away,
        webhook.map(|w| w.url.as_str()),
        webhook.map_or(WebhookFormat::default(), |w| w.format).as_str(),
    ])?;
    Ok(())
}

pub(super) fn unnotified(
    conn: &Connection,
    after: MessageId,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    messages_of(
        conn,
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
             WHERE i.read_at IS NULL AND i.answered_at IS NULL AND i.notified_at IS NULL \
             AND i.message_id > ?1 AND m.expires_at > ?2 \
             AND NOT EXISTS (SELECT 1 FROM last_read r WHERE r.handle = i.recipient \
                 AND r.conversation = CASE WHEN m.thread_id IS NOT NULL \
                     THEN 't:' || m.thread_id ELSE 'c:' || m.channel END \
                 AND r.last_id >= m.id) \
             ORDER BY i.message_id LIMIT ?3"
        ),
        params![after, now, limit],
    )
}

pub(super) fn mark_notified(
    conn: &Connection,
    recipient: &Handle,
    ids: &[MessageId],
    now: Millis,
) -> StoreResult<Vec<MessageId>> {
    let mut mark = conn.prepare_cached(
        "UPDATE inbox SET notified_at = ?3 WHERE recipient = ?1 AND message_id = ?2 \
         AND notified_at IS NULL AND read_at IS NULL AND answered_at IS NULL",
    )?;
    let mut marked = Vec::new();
    for &id in ids {
        if mark.execute(params![recipient, id, now])? > 0 {
            marked.push(id);
        }
    }
    Ok(marked)
}

const APPROVAL_COLUMNS: &str = "id, handle, request_id, tool_name, description, input_preview, \
     withheld, created_at, expires_at, behavior, answered_at";

fn approval_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Approval> {
    let withheld: Option<String> = row.get(6)?;
    let behavior: Option<String> = row.get(9)?;
    let answered_at: Option<Millis> = row.get(10)?;
    Ok(Approval {
        id: row.get(0)?,
        handle: row.get(1)?,
        request_id: row.get(2)?,
        tool_name: row.get(3)?,
        description: row.get(4)?,
        preview: Preview::from_columns(row.get(5)?, withheld),
        created_at: row.get(7)?,
        expires_at: row.get(8)?,
        answer: behavior
            .as_deref()
            .and_then(Behavior::parse)
            .zip(answered_at),
    })
}

pub(super) fn add_approval(conn: &Connection, new: &NewApproval) -> StoreResult<Approval> {
    let (preview, withheld) = new.preview.to_columns();
    Ok(conn
        .prepare_cached(&format!(
            "INSERT INTO approvals (handle, request_id, tool_name, description, input_preview, \
             withheld, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             RETURNING {APPROVAL_COLUMNS}"
        ))?
        .query_row(
            params![
                new.handle,
                new.request_id,
                new.tool_name,
                new.description,
                preview,
                withheld,
                new.created_at,
                new.expires_at,
            ],
            approval_from_row,
        )?)
}

pub(super) fn approval(conn: &Connection, id: ApprovalId) -> StoreResult<Option<Approval>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"
        ))?
        .query_row([id.0], approval_from_row)
        .optional()?)
}

pub(super) fn approvals(
    conn: &Connection,
    handle: &Handle,
    since: Millis,
    limit: u32,
) -> StoreResult<Vec<Approval>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE handle = ?1 AND created_at >= ?2 \
             ORDER BY id DESC LIMIT ?3"
        ))?
        .query_map(params![handle, since, limit], approval_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn answer_approval(
    conn: &Connection,
    id: ApprovalId,
    handle: &Handle,
    behavior: Behavior,
    now: Millis,
) -> StoreResult<Option<Approval>> {
    Ok(conn
        .prepare_cached(&format!(
            "UPDATE approvals SET behavior = ?3, answered_at = ?4 \
             WHERE id = ?1 AND handle = ?2 AND behavior IS NULL AND expires_at > ?4 \
             RETURNING {APPROVAL_COLUMNS}"
        ))?
        .query_row(
            params![id.0, handle, behavior.as_str(), now],
            approval_from_row,
        )
        .optional()?)
}

pub(super) fn forget_approvals(conn: &Connection, before: Millis) -> StoreResult<u64> {
    Ok(conn
        .prepare_cached("DELETE FROM approvals WHERE created_at < ?1")?
        .execute([before])? as u64)
}

const DEVICE_COLUMNS: &str = "id, handle, endpoint, p256dh, auth, created_at";

fn device_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Device> {
    Ok(from_row!(row.get, Device: id, handle, endpoint, p256dh, auth, created_at))
}

pub(super) fn add_device(conn: &Connection, device: &Device) -> StoreResult<Device> {
    Ok(conn
        .prepare_cached(&format!(
            "INSERT INTO push_devices (handle, endpoint, p256dh, auth, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (endpoint) DO UPDATE SET handle = ?1, p256dh = ?3, auth = ?4, \
             created_at = ?5 RETURNING {DEVICE_COLUMNS}"
        ))?
        .query_row(
            params![
                device.handle,
                device.endpoint,
                device.p256dh,
                device.auth,
                device.created_at
            ],
            device_from_row,
        )?)
}

pub(super) fn devices(conn: &Connection, handle: &Handle) -> StoreResult<Vec<Device>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {DEVICE_COLUMNS} FROM push_devices WHERE handle = ?1 ORDER BY id"
        ))?
        .query_map([handle], device_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn remove_device(
    conn: &Connection,
    id: DeviceId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM push_devices WHERE id = ?1 AND (?2 IS NULL OR handle = ?2)")?
        .execute(params![id.0, handle])?
        > 0)
}
