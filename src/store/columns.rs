//! SQL both backends write alike: a message's columns as every read
//! selects them, and the join to its inbox row. Each backend maps a row of
//! them in its own `messages.rs`.

/// A message's columns, with its delivery ledger: select them from
/// `messages m` [`INBOX_JOIN`].
pub(in crate::store) const MESSAGE_COLUMNS: &str = "m.id, m.thread_id, m.channel, m.sender, m.recipient, \
     m.type, m.body, m.reply_to, m.created_at, m.expires_at, \
     i.pushed_at, i.read_at, i.answered_at, i.offers, i.lease_until, i.via";

/// How many [`MESSAGE_COLUMNS`] there are: the index of a column selected
/// after them.
pub(in crate::store) const MESSAGE_COLUMNS_LEN: usize = 16;

/// Joins a message (as `m`) to its recipient's inbox row (as `i`), if any.
pub(in crate::store) const INBOX_JOIN: &str =
    "LEFT JOIN inbox i ON i.recipient = m.recipient AND i.message_id = m.id";
