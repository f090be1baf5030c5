//! What needs a person's attention: their notification settings, the
//! unread messages not yet brought to them, their agents' approvals, and
//! their devices for push notifications.

use super::messages::messages;
use crate::model::{
    Approval, ApprovalId, Behavior, Device, DeviceId, Handle, Message, MessageId, Millis,
    NewApproval, NotifySettings, Preview, WebhookFormat,
};
use crate::store::columns::{MESSAGE_COLUMNS, from_row};
use crate::store::sql::{Executor, Param, Row};
use crate::store::{StoreResult, settings_from_columns};

pub async fn notify_settings(
    db: &impl Executor,
    handle: &Handle,
) -> StoreResult<Option<NotifySettings>> {
    let columns: Option<(Option<Millis>, bool, Option<String>, String)> = db
        .row(
            "SELECT after_ms, at_once_when_away, webhook, webhook_format \
             FROM notify_settings WHERE handle = ?1",
            &[handle],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .await?;
    columns
        .map(|(after, at_once_when_away, webhook, format)| {
            settings_from_columns(after, at_once_when_away, webhook, &format)
        })
        .transpose()
}

pub async fn set_notify_settings(
    db: &impl Executor,
    handle: &Handle,
    settings: &NotifySettings,
) -> StoreResult<()> {
    let webhook = settings.webhook.as_ref();
    let url = webhook.map(|w| w.url.as_str());
    let format = webhook
        .map_or(WebhookFormat::default(), |w| w.format)
        .as_str();
    db.write(
        "INSERT INTO notify_settings (handle, after_ms, at_once_when_away, webhook, webhook_format) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (handle) DO UPDATE SET after_ms = ?2, at_once_when_away = ?3, \
         webhook = ?4, webhook_format = ?5",
        &[
            handle,
            &settings.after,
            &settings.at_once_when_away,
            &url,
            &format,
        ],
    )
    .await
}

/// Messages after `after` that nobody has read, answered or been told of
/// yet, in no conversation read past them, oldest first.
pub async fn unnotified(
    db: &impl Executor,
    after: MessageId,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
         WHERE i.read_at IS NULL AND i.answered_at IS NULL AND i.notified_at IS NULL \
         AND i.message_id > ?1 AND m.expires_at > ?2 \
         AND NOT EXISTS (SELECT 1 FROM last_read r WHERE r.handle = i.recipient \
             AND r.conversation = CASE WHEN m.thread_id IS NOT NULL \
                 THEN 't:' || m.thread_id ELSE 'c:' || m.channel END \
             AND r.last_id >= m.id) \
         ORDER BY i.message_id LIMIT ?3"
    );
    messages(db, &sql, &[&after, &now, &i64::from(limit)]).await
}

/// An approval's columns, as [`approval_from_row`] reads them.
macro_rules! approval_columns {
    () => {
        "id, handle, request_id, tool_name, description, input_preview, withheld, created_at, \
         expires_at, behavior, answered_at"
    };
}

fn approval_from_row(row: Row<'_>) -> StoreResult<Approval> {
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

pub async fn add_approval(db: &impl Executor, new: &NewApproval) -> StoreResult<Approval> {
    let (preview, withheld) = new.preview.to_columns();
    let sql = concat!(
        "INSERT INTO approvals (handle, request_id, tool_name, description, input_preview, \
         withheld, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING ",
        approval_columns!()
    );
    let params: [&dyn Param; 8] = [
        &new.handle,
        &new.request_id,
        &new.tool_name,
        &new.description,
        &preview,
        &withheld,
        &new.created_at,
        &new.expires_at,
    ];
    db.one(sql, &params, approval_from_row).await
}

pub async fn approval(db: &impl Executor, id: ApprovalId) -> StoreResult<Option<Approval>> {
    let sql = concat!(
        "SELECT ",
        approval_columns!(),
        " FROM approvals WHERE id = ?1"
    );
    db.row(sql, &[&id], approval_from_row).await
}

pub async fn approvals(
    db: &impl Executor,
    handle: &Handle,
    since: Millis,
    limit: u32,
) -> StoreResult<Vec<Approval>> {
    let sql = concat!(
        "SELECT ",
        approval_columns!(),
        " FROM approvals WHERE handle = ?1 AND created_at >= ?2 ORDER BY id DESC LIMIT ?3"
    );
    db.rows(sql, &[handle, &since, &i64::from(limit)], approval_from_row)
        .await
}

pub async fn answer_approval(
    db: &impl Executor,
    id: ApprovalId,
    handle: &Handle,
    behavior: Behavior,
    now: Millis,
) -> StoreResult<Option<Approval>> {
    let sql = concat!(
        "UPDATE approvals SET behavior = ?3, answered_at = ?4 \
         WHERE id = ?1 AND handle = ?2 AND behavior IS NULL AND expires_at > ?4 RETURNING ",
        approval_columns!()
    );
    let params: [&dyn Param; 4] = [&id, handle, &behavior.as_str(), &now];
    db.row(sql, &params, approval_from_row).await
}

pub async fn forget_approvals(db: &impl Executor, before: Millis) -> StoreResult<u64> {
    db.exec("DELETE FROM approvals WHERE created_at < ?1", &[&before])
        .await
}

/// A device's columns, in [`Device`]'s order.
macro_rules! device_columns {
    () => {
        "id, handle, endpoint, p256dh, auth, created_at"
    };
}

fn device_from_row(row: Row<'_>) -> StoreResult<Device> {
    Ok(from_row!(row.get, Device: id, handle, endpoint, p256dh, auth, created_at))
}

pub async fn add_device(db: &impl Executor, device: &Device) -> StoreResult<Device> {
    let sql = concat!(
        "INSERT INTO push_devices (handle, endpoint, p256dh, auth, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (endpoint) DO UPDATE SET handle = ?1, p256dh = ?3, auth = ?4, \
         created_at = ?5 RETURNING ",
        device_columns!()
    );
    let params: [&dyn Param; 5] = [
        &device.handle,
        &device.endpoint,
        &device.p256dh,
        &device.auth,
        &device.created_at,
    ];
    db.one(sql, &params, device_from_row).await
}

pub async fn devices(db: &impl Executor, handle: &Handle) -> StoreResult<Vec<Device>> {
    let sql = concat!(
        "SELECT ",
        device_columns!(),
        " FROM push_devices WHERE handle = ?1 ORDER BY id"
    );
    db.rows(sql, &[handle], device_from_row).await
}

pub async fn remove_device(
    db: &impl Executor,
    id: DeviceId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    let removed = db
        .exec(
            "DELETE FROM push_devices WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR handle = ?2)",
            &[&id, &handle],
        )
        .await?;
    Ok(removed > 0)
}
