//! The message rules' statements (`../rules/`), in SQLite. The writer
//! runs one job at a time inside `BEGIN IMMEDIATE`, so an UPDATE that
//! finds and marks rows is all a claim needs to take them alone.

use super::Sql;
use super::messages::{INBOX_JOIN, MESSAGE_COLUMNS, messages_of};
use crate::model::{Channel, Expects, Handle, Message, MessageId, Millis, Place, ThreadId};
use crate::store::columns::from_row;
use crate::store::columns::{OWED, files_column};
use crate::store::rules::Statements;
use crate::store::summary::Removed;
use crate::store::{Offer, StoreResult};
use rusqlite::{OptionalExtension, ToSql, params};

/// What an inbox row must be for a claim or an offer to take it: unread,
/// its message live, and no stream's lease on it running.
const TAKEABLE: &str = "i.recipient = ?1 AND i.read_at IS NULL AND m.expires_at > ?2 \
     AND (i.lease_until IS NULL OR i.lease_until <= ?2)";

/// A place's column in `messages m`, and its value.
fn column(place: &Place) -> (&'static str, &dyn ToSql) {
    match place {
        Place::Channel(name) => ("m.channel", name),
        Place::Thread(id) => ("m.thread_id", id),
    }
}

/// The JSON path of a person's count in a thread's `people` (handles are
/// lowercase letters, digits, `.`, `_` and `-`: nothing to escape).
fn json_path(handle: &Handle) -> String {
    format!("$.\"{handle}\"")
}

impl Sql<'_> {
    fn exists(&self, sql: &str, params: &[&dyn ToSql]) -> StoreResult<bool> {
        Ok(self.0.prepare_cached(sql)?.exists(params)?)
    }

    /// Runs a statement; how many rows it changed.
    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> StoreResult<usize> {
        Ok(self.0.prepare_cached(sql)?.execute(params)?)
    }

    /// Runs a statement.
    fn exec(&self, sql: &str, params: &[&dyn ToSql]) -> StoreResult<()> {
        self.execute(sql, params).map(drop)
    }

    fn ids(&self, sql: &str, params: &[&dyn ToSql]) -> StoreResult<Vec<MessageId>> {
        Ok(self
            .0
            .prepare_cached(sql)?
            .query_map(params, |row| row.get(0))?
            .collect::<Result<_, _>>()?)
    }
}

impl Statements for Sql<'_> {
    /// The second look only when the first says no and it may matter.
    async fn may_receive(&self, handle: &Handle, or_empty_store: bool) -> StoreResult<bool> {
        let live = self.exists(
            "SELECT 1 FROM people WHERE handle = ?1 AND revoked_at IS NULL",
            params![handle],
        )?;
        Ok(live || (or_empty_store && !crate::store::statements::people::any(self).await?))
    }

    async fn thread_is_live(&self, thread: ThreadId, now: Millis) -> StoreResult<bool> {
        self.exists(
            "SELECT 1 FROM messages WHERE thread_id = ?1 AND expires_at > ?2 LIMIT 1",
            params![thread, now],
        )
    }

    async fn is_live_in(&self, id: MessageId, place: &Place, now: Millis) -> StoreResult<bool> {
        let sql = match place {
            Place::Channel(_) => {
                "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 AND channel = ?3"
            }
            Place::Thread(_) => {
                "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 AND thread_id = ?3"
            }
        };
        self.exists(sql, params![id, now, column(place).1])
    }

    /// As AUTOINCREMENT would choose it: one above both the largest id
    /// recorded in `sqlite_sequence` and the largest in the table. Nobody
    /// else inserts while the write transaction (IMMEDIATE) runs.
    async fn next_message_id(&self) -> StoreResult<MessageId> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0), \
                            coalesce((SELECT max(id) FROM messages), 0)) + 1",
            )?
            .query_row([], |row| row.get(0))?)
    }

    async fn open_thread(
        &self,
        first_id: MessageId,
        people: &str,
        at: Millis,
    ) -> StoreResult<ThreadId> {
        self.exec(
            "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, people) \
             VALUES (?1, 1, ?2, ?2, ?1, ?3)",
            params![at, first_id, people],
        )?;
        Ok(ThreadId(self.0.last_insert_rowid()))
    }

    async fn insert_message(&self, m: &Message) -> StoreResult<()> {
        self.exec(
            "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, \
             reply_to, created_at, expires_at, attachments) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                m.id,
                m.place.thread(),
                m.place.channel(),
                m.from,
                m.to,
                m.kind,
                m.body,
                m.reply_to,
                m.created_at,
                m.expires_at,
                files_column(&m.attachments),
            ],
        )
    }

    async fn insert_attachment(&self, id: MessageId, n: u32, bytes: &[u8]) -> StoreResult<()> {
        self.exec(
            "INSERT INTO attachments (message_id, n, data) VALUES (?1, ?2, ?3)",
            params![id, n, bytes],
        )
    }

    async fn insert_inbox(
        &self,
        recipient: &Handle,
        id: MessageId,
        expects: Expects,
        due_at: Option<Millis>,
    ) -> StoreResult<()> {
        let expects = expects.is_owed().then(|| expects.as_str());
        self.exec(
            "INSERT INTO inbox (recipient, message_id, expects, due_at) VALUES (?1, ?2, ?3, ?4)",
            params![recipient, id, expects, due_at],
        )
    }

    async fn answer_thread(
        &self,
        replier: &Handle,
        thread: ThreadId,
        at: Millis,
    ) -> StoreResult<()> {
        self.exec(
            "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
             WHERE recipient = ?1 AND answered_at IS NULL \
             AND (pushed_at IS NOT NULL OR read_at IS NOT NULL) AND message_id IN \
                 (SELECT id FROM messages WHERE thread_id = ?2)",
            params![replier, thread, at],
        )
    }

    async fn answer_message(&self, replier: &Handle, id: MessageId, at: Millis) -> StoreResult<()> {
        self.exec(
            "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
             WHERE recipient = ?1 AND message_id = ?2 AND answered_at IS NULL",
            params![replier, id, at],
        )
    }

    async fn count_in_channel(
        &self,
        channel: &Channel,
        id: MessageId,
        at: Millis,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
             VALUES (?1, 1, ?2, ?3) ON CONFLICT (channel) DO UPDATE SET \
             message_count = message_count + 1, last_id = ?2, last_activity = ?3",
            params![channel, id, at],
        )
    }

    async fn count_in_thread(
        &self,
        thread: ThreadId,
        id: MessageId,
        sender: &Handle,
        recipient: &Handle,
        at: Millis,
    ) -> StoreResult<()> {
        self.exec(
            "UPDATE threads SET message_count = message_count + 1, last_id = ?2, \
             last_activity = ?3, \
             people = json_set(people, ?4, coalesce(people ->> ?4, 0) + 1, \
                                       ?5, coalesce(people ->> ?5, 0) + 1) \
             WHERE id = ?1",
            params![thread, id, at, json_path(sender), json_path(recipient)],
        )
    }

    async fn take_for_claim(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>> {
        self.ids(
            &format!(
                "UPDATE inbox SET read_at = ?2, lease_until = NULL, via = 'inbox' \
                 WHERE recipient = ?1 AND message_id IN ( \
                     SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                     WHERE {TAKEABLE} ORDER BY i.message_id LIMIT ?3) \
                 RETURNING message_id"
            ),
            params![recipient, now, limit],
        )
    }

    async fn take_for_offer(
        &self,
        recipient: &Handle,
        offer: Offer,
        most: u32,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>> {
        self.ids(
            &format!(
                "UPDATE inbox SET pushed_at = coalesce(pushed_at, ?2), lease_until = ?4, \
                     push_holder = ?5, offers = offers + 1, via = ?7 \
                 WHERE recipient = ?1 AND message_id IN ( \
                     SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                     WHERE {TAKEABLE} AND i.push_holder IS NOT ?5 AND i.offers < ?6 \
                     ORDER BY i.message_id LIMIT ?3) \
                 RETURNING message_id"
            ),
            params![
                recipient,
                offer.now,
                limit,
                offer.until,
                offer.holder,
                most,
                offer.via.as_str()
            ],
        )
    }

    async fn mark_overdue(&self, now: Millis, limit: u32) -> StoreResult<Vec<MessageId>> {
        self.ids(
            &format!(
                "UPDATE inbox SET overdue_at = ?1 WHERE message_id IN ( \
                     SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                     WHERE i.due_at IS NOT NULL AND i.due_at <= ?1 AND i.overdue_at IS NULL \
                     AND {OWED} AND m.expires_at > ?1 ORDER BY i.due_at LIMIT ?2) \
                 RETURNING message_id"
            ),
            params![now, limit],
        )
    }

    async fn messages_by_id(&self, ids: &[MessageId]) -> StoreResult<Vec<Message>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let list = serde_json::to_string(&ids).expect("ids serialize");
        messages_of(
            self.0,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE m.id IN (SELECT value FROM json_each(?1)) ORDER BY m.id"
            ),
            params![list],
        )
    }

    async fn messages_in(
        &self,
        place: &Place,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreResult<Vec<Message>> {
        let (column, value) = column(place);
        messages_of(
            self.0,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE {column} = ?1 AND m.id > ?2 AND m.expires_at > ?3 ORDER BY m.id LIMIT ?4"
            ),
            params![value, since_id, now, limit],
        )
    }

    async fn newest_in(&self, place: &Place, limit: u32, now: Millis) -> StoreResult<Vec<Message>> {
        let (column, value) = column(place);
        messages_of(
            self.0,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE {column} = ?1 AND m.expires_at > ?2 ORDER BY m.id DESC LIMIT ?3"
            ),
            params![value, now, limit],
        )
    }

    async fn raise_read_mark(
        &self,
        reader: &Handle,
        key: &str,
        last_id: MessageId,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO last_read (handle, conversation, last_id) VALUES (?1, ?2, ?3) \
             ON CONFLICT (handle, conversation) DO UPDATE SET last_id = max(last_id, ?3)",
            params![reader, key, last_id],
        )
    }

    /// An index range of the unread messages only, stopped at `cap`, per place.
    async fn unread_after_marks(
        &self,
        reader: &Handle,
        places: &[(Place, String)],
        cap: u64,
        now: Millis,
    ) -> StoreResult<Vec<u64>> {
        let mut mark = self.0.prepare_cached(
            "SELECT last_id FROM last_read WHERE handle = ?1 AND conversation = ?2",
        )?;
        let mut counts = Vec::with_capacity(places.len());
        for (place, key) in places {
            let since: i64 = mark
                .query_row(params![reader, key], |row| row.get(0))
                .optional()?
                .unwrap_or(0);
            let sql = match place {
                Place::Channel(_) => {
                    "SELECT count(*) FROM (SELECT 1 FROM messages WHERE channel = ?1 \
                     AND id > ?2 AND expires_at > ?3 LIMIT ?4)"
                }
                Place::Thread(_) => {
                    "SELECT count(*) FROM (SELECT 1 FROM messages WHERE thread_id = ?1 \
                     AND id > ?2 AND expires_at > ?3 LIMIT ?4)"
                }
            };
            let count: i64 = self
                .0
                .prepare_cached(sql)?
                .query_row(params![column(place).1, since, now, cap], |row| row.get(0))?;
            counts.push(count.max(0) as u64);
        }
        Ok(counts)
    }

    async fn delete_expired(&self, now: Millis, batch: u32) -> StoreResult<Vec<Removed>> {
        Ok(self
            .0
            .prepare_cached(
                "DELETE FROM messages WHERE id IN \
                 (SELECT id FROM messages WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2) \
                 RETURNING id, thread_id, channel, sender, recipient",
            )?
            .query_map(params![now, batch], |row| {
                Ok(from_row!(row.get, Removed: id, thread_id, channel, sender, recipient))
            })?
            .collect::<Result<_, _>>()?)
    }

    /// One lookup each (the recipient is the key's first part), not the
    /// scan a foreign key's cascade would need an index of its own for.
    async fn delete_inbox_rows(&self, removed: &[Removed]) -> StoreResult<()> {
        let mut unaddress = self
            .0
            .prepare_cached("DELETE FROM inbox WHERE recipient = ?1 AND message_id = ?2")?;
        for message in removed {
            if let Some(recipient) = &message.recipient {
                unaddress.execute(params![recipient, message.id])?;
            }
        }
        Ok(())
    }

    async fn subtract_from_channel(&self, channel: &str, gone: i64) -> StoreResult<()> {
        self.exec(
            "UPDATE channel_summaries SET message_count = message_count - ?2 WHERE channel = ?1",
            params![channel, gone],
        )
    }

    async fn drop_channel_if_empty(&self, channel: &str) -> StoreResult<()> {
        self.exec(
            "DELETE FROM channel_summaries WHERE channel = ?1 AND message_count <= 0",
            params![channel],
        )
    }

    async fn refind_channel_newest(&self, channel: &str, newest: MessageId) -> StoreResult<()> {
        self.exec(
            "UPDATE channel_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE channel = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE channel = ?1 AND last_id <= ?2",
            params![channel, newest],
        )
    }

    async fn thread_counts(&self, thread: ThreadId) -> StoreResult<Option<(i64, String)>> {
        Ok(self
            .0
            .prepare_cached("SELECT message_count, people FROM threads WHERE id = ?1")?
            .query_row([thread], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?)
    }

    async fn drop_thread_if_empty(&self, thread: ThreadId) -> StoreResult<bool> {
        let dropped = self.execute(
            "DELETE FROM threads WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1)",
            params![thread],
        )?;
        Ok(dropped == 1)
    }

    async fn set_thread_counts(
        &self,
        thread: ThreadId,
        count: i64,
        people: &str,
    ) -> StoreResult<()> {
        self.exec(
            "UPDATE threads SET message_count = ?2, people = ?3 WHERE id = ?1",
            params![thread, count, people],
        )
    }

    async fn refind_thread_opening(&self, thread: ThreadId, oldest: MessageId) -> StoreResult<()> {
        self.exec(
            "UPDATE threads SET first_id = \
             (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY id LIMIT 1) \
             WHERE id = ?1 AND first_id >= ?2",
            params![thread, oldest],
        )
    }

    async fn refind_thread_newest(&self, thread: ThreadId, newest: MessageId) -> StoreResult<()> {
        self.exec(
            "UPDATE threads SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE thread_id = ?1 ORDER BY id DESC LIMIT 1) \
             WHERE id = ?1 AND last_id <= ?2",
            params![thread, newest],
        )
    }
}
