//! What needs a person's attention (`../sqlite/attention.rs`, in
//! PostgreSQL).

use super::messages::{MESSAGE_COLUMNS, ids_of, message_from_row};
use super::{Db, row};
use crate::model::{
    Approval, ApprovalId, Behavior, Device, DeviceId, Handle, Message, MessageId, Millis,
    NewApproval, NotifySettings, Preview, WebhookFormat,
};
use crate::store::columns::from_row;
use crate::store::{StoreResult, settings_from_columns};
use tokio_postgres::Row;

pub(super) async fn notify_settings(
    db: &impl Db,
    handle: &Handle,
) -> StoreResult<Option<NotifySettings>> {
    let Some(row) = row(
        db,
        "SELECT after_ms, at_once_when_away, webhook, webhook_format \
         FROM notify_settings WHERE handle = $1",
        &[&handle.as_str()],
    )
    .await?
    else {
        return Ok(None);
    };
    settings_from_columns(
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    )
    .map(Some)
}

pub(super) async fn set_notify_settings(
    db: &impl Db,
    handle: &Handle,
    settings: &NotifySettings,
) -> StoreResult<()> {
    let webhook = settings.webhook.as_ref();
    let url = webhook.map(|w| w.url.as_str());
    let format = webhook
        .map_or(WebhookFormat::default(), |w| w.format)
        .as_str();
    db.exec(
        "INSERT INTO notify_settings (handle, after_ms, at_once_when_away, webhook, webhook_format) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (handle) DO UPDATE SET after_ms = $2, at_once_when_away = $3, \
         webhook = $4, webhook_format = $5",
        &[
            &handle.as_str(),
            &settings.after,
            &settings.at_once_when_away,
            &url,
            &format,
        ],
    )
    .await?;
    Ok(())
}

pub(super) async fn unnotified(
    db: &impl Db,
    after: MessageId,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    db.rows(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM inbox i JOIN messages m ON m.id = i.message_id \
             WHERE i.read_at IS NULL AND i.answered_at IS NULL AND i.notified_at IS NULL \
             AND i.message_id > $1 AND m.expires_at > $2 \
             AND NOT EXISTS (SELECT 1 FROM last_read r WHERE r.handle = i.recipient \
                 AND r.conversation = CASE WHEN m.thread_id IS NOT NULL \
                     THEN 't:' || m.thread_id ELSE 'c:' || m.channel END \
                 AND r.last_id >= m.id) \
             ORDER BY i.message_id LIMIT $3"
        ),
        &[&after, &now, &i64::from(limit)],
    )
    .await?
    .iter()
    .map(message_from_row)
    .collect()
}

pub(super) async fn mark_notified(
    db: &impl Db,
    recipient: &Handle,
    ids: &[MessageId],
    now: Millis,
) -> StoreResult<Vec<MessageId>> {
    let marked = db
        .rows(
            "UPDATE inbox SET notified_at = $3 \
             WHERE recipient = $1 AND message_id = ANY($2) AND notified_at IS NULL \
             AND read_at IS NULL AND answered_at IS NULL RETURNING message_id",
            &[&recipient.as_str(), &ids, &now],
        )
        .await?;
    ids_of(&marked)
}

const APPROVAL_COLUMNS: &str = "id, handle, request_id, tool_name, description, input_preview, \
     withheld, created_at, expires_at, behavior, answered_at";

fn approval_from_row(row: &Row) -> StoreResult<Approval> {
    let withheld: Option<String> = row.try_get(6)?;
    let behavior: Option<&str> = row.try_get(9)?;
    let answered_at: Option<Millis> = row.try_get(10)?;
    Ok(Approval {
        id: row.try_get(0)?,
        handle: row.try_get(1)?,
        request_id: row.try_get(2)?,
        tool_name: row.try_get(3)?,
        description: row.try_get(4)?,
        preview: Preview::from_columns(row.try_get(5)?, withheld),
        created_at: row.try_get(7)?,
        expires_at: row.try_get(8)?,
        answer: behavior.and_then(Behavior::parse).zip(answered_at),
    })
}

fn one_approval(rows: &[Row]) -> StoreResult<Option<Approval>> {
    rows.first().map(approval_from_row).transpose()
}

pub(super) async fn add_approval(db: &impl Db, new: &NewApproval) -> StoreResult<Approval> {
    let (preview, withheld) = new.preview.to_columns();
    let rows = db
        .rows(
            &format!(
                "INSERT INTO approvals (handle, request_id, tool_name, description, \
                 input_preview, withheld, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {APPROVAL_COLUMNS}"
            ),
            &[
                &new.handle.as_str(),
                &new.request_id,
                &new.tool_name,
                &new.description,
                &preview,
                &withheld,
                &new.created_at,
                &new.expires_at,
            ],
        )
        .await?;
    Ok(one_approval(&rows)?.expect("INSERT … RETURNING returns the row"))
}

pub(super) async fn approval(db: &impl Db, id: ApprovalId) -> StoreResult<Option<Approval>> {
    let rows = db
        .rows(
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1"),
            &[&id.0],
        )
        .await?;
    one_approval(&rows)
}

pub(super) async fn approvals(
    db: &impl Db,
    handle: &Handle,
    since: Millis,
    limit: u32,
) -> StoreResult<Vec<Approval>> {
    db.rows(
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE handle = $1 AND created_at >= $2 \
             ORDER BY id DESC LIMIT $3"
        ),
        &[&handle.as_str(), &since, &i64::from(limit)],
    )
    .await?
    .iter()
    .map(approval_from_row)
    .collect()
}

pub(super) async fn answer_approval(
    db: &impl Db,
    id: ApprovalId,
    handle: &Handle,
    behavior: Behavior,
    now: Millis,
) -> StoreResult<Option<Approval>> {
    let rows = db
        .rows(
            &format!(
                "UPDATE approvals SET behavior = $3, answered_at = $4 \
                 WHERE id = $1 AND handle = $2 AND behavior IS NULL AND expires_at > $4 \
                 RETURNING {APPROVAL_COLUMNS}"
            ),
            &[&id.0, &handle.as_str(), &behavior.as_str(), &now],
        )
        .await?;
    one_approval(&rows)
}

pub(super) async fn forget_approvals(db: &impl Db, before: Millis) -> StoreResult<u64> {
    db.exec("DELETE FROM approvals WHERE created_at < $1", &[&before])
        .await
}

const DEVICE_COLUMNS: &str = "id, handle, endpoint, p256dh, auth, created_at";

fn device_from_row(row: &Row) -> StoreResult<Device> {
    Ok(from_row!(row.try_get, Device: id, handle, endpoint, p256dh, auth, created_at))
}

pub(super) async fn add_device(db: &impl Db, device: &Device) -> StoreResult<Device> {
    let rows = db
        .rows(
            &format!(
                "INSERT INTO push_devices (handle, endpoint, p256dh, auth, created_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (endpoint) DO UPDATE SET handle = $1, p256dh = $3, auth = $4, \
                 created_at = $5 RETURNING {DEVICE_COLUMNS}"
            ),
            &[
                &device.handle.as_str(),
                &device.endpoint,
                &device.p256dh,
                &device.auth,
                &device.created_at,
            ],
        )
        .await?;
    device_from_row(rows.first().expect("INSERT … RETURNING returns the row"))
}

pub(super) async fn devices(db: &impl Db, handle: &Handle) -> StoreResult<Vec<Device>> {
    db.rows(
        &format!("SELECT {DEVICE_COLUMNS} FROM push_devices WHERE handle = $1 ORDER BY id"),
        &[&handle.as_str()],
    )
    .await?
    .iter()
    .map(device_from_row)
    .collect()
}

pub(super) async fn remove_device(
    db: &impl Db,
    id: DeviceId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    let handle = handle.map(Handle::as_str);
    Ok(db
        .exec(
            "DELETE FROM push_devices WHERE id = $1 AND ($2::text IS NULL OR handle = $2)",
            &[&id.0, &handle],
        )
        .await?
        > 0)
}
