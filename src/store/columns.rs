//! A message's columns as every read selects them, and the join to its
//! inbox row; `../statements/messages.rs` reads a row of them. Any row
//! whose columns are a struct's fields in order is read with
//! [`from_row!`].

use crate::model::{Attachment, is_media_type};
use serde_json::{Value, json};

/// A `$type` whose fields are a row's columns in the order named, each
/// read with the backend's `$row.$get(index)?`:
/// `from_row!(row.get, Person: handle, name)` is
/// `Person { handle: row.get(0)?, name: row.get(1)? }`.
macro_rules! from_row {
    ($row:ident . $get:ident, $type:ident: $($field:ident),+ $(,)?) => {{
        let mut column = 0_usize;
        $type { $($field: { column += 1; $row.$get(column - 1)? }),+ }
    }};
}
pub(in crate::store) use from_row;

/// A message's columns, with its delivery ledger: select them from
/// `messages m` [`INBOX_JOIN`].
pub(in crate::store) const MESSAGE_COLUMNS: &str = "m.id, m.thread_id, m.channel, m.sender, m.recipient, \
     m.type, m.body, m.reply_to, m.created_at, m.expires_at, \
     i.pushed_at, i.read_at, i.answered_at, i.offers, i.lease_until, i.via, \
     i.expects, i.due_at, i.ack_result, i.ack_note, i.acked_at, i.overdue_at, m.attachments";

/// How many [`MESSAGE_COLUMNS`] there are: the index of a column selected
/// after them.
pub(in crate::store) const MESSAGE_COLUMNS_LEN: usize = 23;

/// The index of `m.attachments`: the files' list, as [`files_column`] writes it.
pub(in crate::store) const FILES_AT: usize = 22;

/// The index of the first of the ledger's columns (`i.pushed_at`).
pub(in crate::store) const LEDGER_FROM: usize = 10;

/// What an inbox row (as `i`) is while its recipient owes what its message
/// expects: neither an answer nor an acknowledgement yet.
pub(in crate::store) const OWED: &str =
    "i.expects IS NOT NULL AND i.answered_at IS NULL AND i.acked_at IS NULL";

/// Joins a message (as `m`) to its recipient's inbox row (as `i`), if any.
pub(in crate::store) const INBOX_JOIN: &str =
    "LEFT JOIN inbox i ON i.recipient = m.recipient AND i.message_id = m.id";

/// A message's files as its `attachments` column keeps them: a JSON list of
/// `{n, name, content_type, size}`; none for no file.
pub(in crate::store) fn files_column(files: &[Attachment]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let listed: Vec<Value> = files
        .iter()
        .map(
            |f| json!({ "n": f.n, "name": f.name, "content_type": f.content_type, "size": f.size }),
        )
        .collect();
    Some(Value::Array(listed).to_string())
}

/// The files an `attachments` column lists (a list this build cannot read
/// is none). A type kept before types were checked that is no media type
/// (it could not be a download's header) reads as
/// `application/octet-stream`.
pub(in crate::store) fn files_from_column(column: Option<&str>) -> Vec<Attachment> {
    let Some(listed) = column.and_then(|c| serde_json::from_str::<Vec<Value>>(c).ok()) else {
        return Vec::new();
    };
    listed
        .iter()
        .filter_map(|f| {
            Some(Attachment {
                n: u32::try_from(f["n"].as_u64()?).ok()?,
                name: f["name"].as_str()?.to_owned(),
                content_type: Some(f["content_type"].as_str()?)
                    .filter(|kept| is_media_type(kept))
                    .unwrap_or("application/octet-stream")
                    .to_owned(),
                size: f["size"].as_u64()?,
            })
        })
        .collect()
}

/// File `n` of an `attachments` column, with the `bytes` read beside it.
pub(in crate::store) fn file_with(
    column: Option<&str>,
    n: u32,
    bytes: Vec<u8>,
) -> Option<(Attachment, Vec<u8>)> {
    let listed = files_from_column(column).into_iter().find(|f| f.n == n)?;
    Some((listed, bytes))
}
