//! The message rules' statements (`../rules/`), in PostgreSQL: each
//! awaited on the caller's transaction (or pooled connection), so the
//! inserts of one group commit pipeline theirs on one connection, and
//! their writes wait to go together (`writer.rs`). A summary's newest
//! message is the one with the highest id, whichever write comes first.

use super::Sql;
use super::messages::{INBOX_JOIN, MESSAGE_COLUMNS, ids_of, message_from_row};
use super::{Db, row};
use crate::model::{Channel, Expects, Handle, Message, MessageId, Millis, Place, ThreadId};
use crate::store::columns::from_row;
use crate::store::columns::{OWED, files_column};
use crate::store::rules::Statements;
use crate::store::summary::Removed;
use crate::store::{Offer, StoreResult};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// What an inbox row must be for a claim or an offer to take it: unread,
/// its message live, and no stream's lease on it running. The rows are
/// locked as they are chosen, and rows another claim holds are skipped, so
/// no two claims (on any instance) take the same message.
const TAKEABLE: &str = "SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
     WHERE i.recipient = $1 AND i.read_at IS NULL AND m.expires_at > $2 \
     AND (i.lease_until IS NULL OR i.lease_until <= $2)";

/// The row's own part of [`TAKEABLE`], checked again as the row is
/// updated: what a concurrent claim changed after the rows were chosen is
/// never taken twice. The rows are chosen once, in a CTE (an `IN` subquery
/// with a `LIMIT` may be run again per row).
const STILL_TAKEABLE: &str =
    "inbox.read_at IS NULL AND (inbox.lease_until IS NULL OR inbox.lease_until <= $2)";

/// A place's column in `messages m`, and its value.
fn column(place: &Place) -> (&'static str, &(dyn ToSql + Sync)) {
    match place {
        Place::Channel(name) => ("m.channel", name),
        Place::Thread(id) => ("m.thread_id", id),
    }
}

fn messages_of(rows: &[Row]) -> StoreResult<Vec<Message>> {
    rows.iter().map(message_from_row).collect()
}

impl<D: Db> Sql<'_, D> {
    async fn exists(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<bool> {
        Ok(row(self.0, sql, params).await?.is_some())
    }

    async fn write(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<()> {
        self.0.write(sql, params).await
    }
}

impl<D: Db> Statements for Sql<'_, D> {
    /// One round trip, whatever the answer.
    async fn may_receive(&self, handle: &Handle, or_empty_store: bool) -> StoreResult<bool> {
        let row = row(
            self.0,
            "SELECT EXISTS (SELECT 1 FROM people WHERE handle = $1 AND revoked_at IS NULL) \
                 OR ($2 AND NOT EXISTS (SELECT 1 FROM people))",
            &[handle, &or_empty_store],
        )
        .await?
        .expect("SELECT without FROM returns a row");
        Ok(row.try_get(0)?)
    }

    async fn thread_is_live(&self, thread: ThreadId, now: Millis) -> StoreResult<bool> {
        self.exists(
            "SELECT 1 FROM messages WHERE thread_id = $1 AND expires_at > $2 LIMIT 1",
            &[&thread, &now],
        )
        .await
    }

    async fn is_live_in(&self, id: MessageId, place: &Place, now: Millis) -> StoreResult<bool> {
        let sql = match place {
            Place::Channel(_) => {
                "SELECT 1 FROM messages WHERE id = $1 AND expires_at > $2 AND channel = $3"
            }
            Place::Thread(_) => {
                "SELECT 1 FROM messages WHERE id = $1 AND expires_at > $2 AND thread_id = $3"
            }
        };
        self.exists(sql, &[&id, &now, column(place).1]).await
    }

    async fn next_message_id(&self) -> StoreResult<MessageId> {
        self.0.next_message_id().await
    }

    async fn open_thread(
        &self,
        first_id: MessageId,
        people: &str,
        at: Millis,
    ) -> StoreResult<ThreadId> {
        let row = row(
            self.0,
            "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, \
             people) VALUES ($1, 1, $2, $2, $1, ($3::text)::jsonb) RETURNING id",
            &[&at, &first_id, &people],
        )
        .await?
        .expect("INSERT … RETURNING returns a row");
        Ok(row.try_get(0)?)
    }

    async fn insert_message(&self, m: &Message) -> StoreResult<()> {
        self.write(
            "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, \
             reply_to, created_at, expires_at, attachments) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &m.id,
                &m.place.thread(),
                &m.place.channel().map(Channel::as_str),
                &m.from.as_str(),
                &m.to.as_ref().map(Handle::as_str),
                &m.kind,
                &m.body,
                &m.reply_to,
                &m.created_at,
                &m.expires_at,
                &files_column(&m.attachments),
            ],
        )
        .await
    }

    async fn insert_attachment(&self, id: MessageId, n: u32, bytes: &[u8]) -> StoreResult<()> {
        self.write(
            "INSERT INTO attachments (message_id, n, data) VALUES ($1, $2, $3)",
            &[&id, &(n as i32), &bytes],
        )
        .await
    }

    async fn insert_inbox(
        &self,
        recipient: &Handle,
        id: MessageId,
        expects: Expects,
        due_at: Option<Millis>,
    ) -> StoreResult<()> {
        let expects = expects.is_owed().then(|| expects.as_str());
        self.write(
            "INSERT INTO inbox (recipient, message_id, expects, due_at) VALUES ($1, $2, $3, $4)",
            &[&recipient.as_str(), &id, &expects, &due_at],
        )
        .await
    }

    async fn answer_thread(
        &self,
        replier: &Handle,
        thread: ThreadId,
        at: Millis,
    ) -> StoreResult<()> {
        self.write(
            "UPDATE inbox SET answered_at = $3, read_at = coalesce(read_at, $3) \
             WHERE recipient = $1 AND answered_at IS NULL \
             AND (pushed_at IS NOT NULL OR read_at IS NOT NULL) AND message_id IN \
                 (SELECT id FROM messages WHERE thread_id = $2)",
            &[&replier.as_str(), &thread, &at],
        )
        .await
    }

    async fn answer_message(&self, replier: &Handle, id: MessageId, at: Millis) -> StoreResult<()> {
        self.write(
            "UPDATE inbox SET answered_at = $3, read_at = coalesce(read_at, $3) \
             WHERE recipient = $1 AND message_id = $2 AND answered_at IS NULL",
            &[&replier.as_str(), &id, &at],
        )
        .await
    }

    async fn count_in_channel(
        &self,
        channel: &Channel,
        id: MessageId,
        at: Millis,
    ) -> StoreResult<()> {
        self.write(
            "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
             VALUES ($1, 1, $2, $3) ON CONFLICT (channel) DO UPDATE SET \
             message_count = channel_summaries.message_count + 1, \
             last_id = greatest(channel_summaries.last_id, $2), \
             last_activity = CASE WHEN $2 > channel_summaries.last_id THEN $3 \
                 ELSE channel_summaries.last_activity END",
            &[&channel.as_str(), &id, &at],
        )
        .await
    }

    async fn count_in_thread(
        &self,
        thread: ThreadId,
        id: MessageId,
        sender: &Handle,
        recipient: &Handle,
        at: Millis,
    ) -> StoreResult<()> {
        self.write(
            "UPDATE threads SET message_count = message_count + 1, \
             last_id = greatest(last_id, $2), \
             last_activity = CASE WHEN $2 > last_id THEN $3 ELSE last_activity END, \
             people = people \
                 || jsonb_build_object($4::text, coalesce((people ->> $4::text)::bigint, 0) + 1) \
                 || jsonb_build_object($5::text, coalesce((people ->> $5::text)::bigint, 0) + 1) \
             WHERE id = $1",
            &[&thread, &id, &at, &sender.as_str(), &recipient.as_str()],
        )
        .await
    }

    async fn take_for_claim(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>> {
        let claimed = self
            .0
            .rows(
                &format!(
                    "WITH taken AS ({TAKEABLE} ORDER BY i.message_id LIMIT $3 \
                         FOR UPDATE OF i SKIP LOCKED) \
                     UPDATE inbox SET read_at = $2, lease_until = NULL, via = 'inbox' FROM taken \
                     WHERE inbox.recipient = $1 AND inbox.message_id = taken.message_id \
                     AND {STILL_TAKEABLE} \
                     RETURNING inbox.message_id"
                ),
                &[&recipient.as_str(), &now, &i64::from(limit)],
            )
            .await?;
        ids_of(&claimed)
    }

    async fn take_for_offer(
        &self,
        recipient: &Handle,
        offer: Offer,
        most: u32,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>> {
        // `offers` is an integer column.
        let most = i32::try_from(most).unwrap_or(i32::MAX);
        let offered = self
            .0
            .rows(
                &format!(
                    "WITH taken AS ({TAKEABLE} AND i.push_holder IS DISTINCT FROM $5 \
                         AND i.offers < $6 \
                         ORDER BY i.message_id LIMIT $3 FOR UPDATE OF i SKIP LOCKED) \
                     UPDATE inbox SET pushed_at = coalesce(pushed_at, $2), lease_until = $4, \
                         push_holder = $5, offers = offers + 1, via = $7 FROM taken \
                     WHERE inbox.recipient = $1 AND inbox.message_id = taken.message_id \
                     AND {STILL_TAKEABLE} \
                     RETURNING inbox.message_id"
                ),
                &[
                    &recipient.as_str(),
                    &offer.now,
                    &i64::from(limit),
                    &offer.until,
                    &offer.holder,
                    &most,
                    &offer.via.as_str(),
                ],
            )
            .await?;
        ids_of(&offered)
    }

    /// Rows another relay is marking are skipped, and each is checked
    /// again as it is marked.
    async fn mark_overdue(&self, now: Millis, limit: u32) -> StoreResult<Vec<MessageId>> {
        let marked = self
            .0
            .rows(
                &format!(
                    "WITH due AS (SELECT i.recipient, i.message_id FROM inbox i \
                         JOIN messages m ON m.id = i.message_id \
                         WHERE i.due_at IS NOT NULL AND i.due_at <= $1 AND i.overdue_at IS NULL \
                         AND {OWED} AND m.expires_at > $1 ORDER BY i.due_at LIMIT $2 \
                         FOR UPDATE OF i SKIP LOCKED) \
                     UPDATE inbox SET overdue_at = $1 FROM due \
                     WHERE inbox.recipient = due.recipient AND inbox.message_id = due.message_id \
                     AND inbox.overdue_at IS NULL AND inbox.answered_at IS NULL \
                     AND inbox.acked_at IS NULL \
                     RETURNING inbox.message_id"
                ),
                &[&now, &i64::from(limit)],
            )
            .await?;
        ids_of(&marked)
    }

    async fn messages_by_id(&self, ids: &[MessageId]) -> StoreResult<Vec<Message>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .0
            .rows(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                     WHERE m.id = ANY($1) ORDER BY m.id"
                ),
                &[&ids],
            )
            .await?;
        messages_of(&rows)
    }

    async fn messages_in(
        &self,
        place: &Place,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreResult<Vec<Message>> {
        let (column, value) = column(place);
        let rows = self
            .0
            .rows(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                     WHERE {column} = $1 AND m.id > $2 AND m.expires_at > $3 \
                     ORDER BY m.id LIMIT $4"
                ),
                &[value, &since_id, &now, &i64::from(limit)],
            )
            .await?;
        messages_of(&rows)
    }

    async fn newest_in(&self, place: &Place, limit: u32, now: Millis) -> StoreResult<Vec<Message>> {
        let (column, value) = column(place);
        let rows = self
            .0
            .rows(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                     WHERE {column} = $1 AND m.expires_at > $2 ORDER BY m.id DESC LIMIT $3"
                ),
                &[value, &now, &i64::from(limit)],
            )
            .await?;
        messages_of(&rows)
    }

    async fn raise_read_mark(
        &self,
        reader: &Handle,
        key: &str,
        last_id: MessageId,
    ) -> StoreResult<()> {
        self.write(
            "INSERT INTO last_read (handle, conversation, last_id) VALUES ($1, $2, $3) \
             ON CONFLICT (handle, conversation) DO UPDATE \
             SET last_id = greatest(last_read.last_id, $3)",
            &[&reader.as_str(), &key, &last_id],
        )
        .await
    }

    /// Every place in one statement (a page asks for dozens), each counted
    /// from its read mark.
    async fn unread_after_marks(
        &self,
        reader: &Handle,
        places: &[(Place, String)],
        cap: u64,
        now: Millis,
    ) -> StoreResult<Vec<u64>> {
        let keys: Vec<&str> = places.iter().map(|(_, key)| key.as_str()).collect();
        let (channels, threads): (Vec<Option<&str>>, Vec<Option<ThreadId>>) = places
            .iter()
            .map(|(place, _)| match place {
                Place::Channel(name) => (Some(name.as_str()), None),
                &Place::Thread(id) => (None, Some(id)),
            })
            .unzip();
        let cap = cap.min(i64::MAX as u64) as i64;
        self.0
            .rows(
                "SELECT CASE \
                     WHEN a.channel IS NOT NULL THEN (SELECT count(*) FROM (SELECT 1 FROM messages m \
                         WHERE m.channel = a.channel AND m.id > coalesce(r.last_id, 0) \
                         AND m.expires_at > $5 LIMIT $6) unread) \
                     ELSE (SELECT count(*) FROM (SELECT 1 FROM messages m \
                         WHERE m.thread_id = a.thread AND m.id > coalesce(r.last_id, 0) \
                         AND m.expires_at > $5 LIMIT $6) unread) \
                     END \
                 FROM unnest($2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY \
                     AS a(conversation, channel, thread, n) \
                 LEFT JOIN last_read r ON r.handle = $1 AND r.conversation = a.conversation \
                 ORDER BY a.n",
                &[&reader.as_str(), &keys, &channels, &threads, &now, &cap],
            )
            .await?
            .iter()
            .map(|row| Ok(row.try_get::<_, i64>(0)?.max(0) as u64))
            .collect()
    }

    async fn delete_expired(&self, now: Millis, batch: u32) -> StoreResult<Vec<Removed>> {
        self.0
            .rows(
                "DELETE FROM messages WHERE id IN \
                 (SELECT id FROM messages WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2) \
                 RETURNING id, thread_id, channel, sender, recipient",
                &[&now, &i64::from(batch)],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(from_row!(row.try_get, Removed: id, thread_id, channel, sender, recipient))
            })
            .collect()
    }

    async fn delete_inbox_rows(&self, removed: &[Removed]) -> StoreResult<()> {
        let (recipients, ids): (Vec<&str>, Vec<MessageId>) = removed
            .iter()
            .filter_map(|m| Some((m.recipient.as_deref()?, m.id)))
            .unzip();
        self.write(
            "DELETE FROM inbox WHERE (recipient, message_id) IN \
             (SELECT * FROM unnest($1::text[], $2::bigint[]))",
            &[&recipients, &ids],
        )
        .await
    }

    async fn subtract_from_channel(&self, channel: &str, gone: i64) -> StoreResult<()> {
        self.write(
            "UPDATE channel_summaries SET message_count = message_count - $2 WHERE channel = $1",
            &[&channel, &gone],
        )
        .await
    }

    async fn drop_channel_if_empty(&self, channel: &str) -> StoreResult<()> {
        self.write(
            "DELETE FROM channel_summaries WHERE channel = $1 AND message_count <= 0",
            &[&channel],
        )
        .await
    }

    async fn refind_channel_newest(&self, channel: &str, newest: MessageId) -> StoreResult<()> {
        self.write(
            "UPDATE channel_summaries SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE channel = $1 ORDER BY id DESC LIMIT 1) \
             WHERE channel = $1 AND last_id <= $2",
            &[&channel, &newest],
        )
        .await
    }

    async fn thread_counts(&self, thread: ThreadId) -> StoreResult<Option<(i64, String)>> {
        row(
            self.0,
            "SELECT message_count, people::text FROM threads WHERE id = $1",
            &[&thread],
        )
        .await?
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .transpose()
    }

    async fn drop_thread_if_empty(&self, thread: ThreadId) -> StoreResult<bool> {
        let dropped = self
            .0
            .exec(
                "DELETE FROM threads WHERE id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1)",
                &[&thread],
            )
            .await?;
        Ok(dropped == 1)
    }

    async fn set_thread_counts(
        &self,
        thread: ThreadId,
        count: i64,
        people: &str,
    ) -> StoreResult<()> {
        self.write(
            "UPDATE threads SET message_count = $2, people = ($3::text)::jsonb WHERE id = $1",
            &[&thread, &count, &people],
        )
        .await
    }

    async fn refind_thread_opening(&self, thread: ThreadId, oldest: MessageId) -> StoreResult<()> {
        self.write(
            "UPDATE threads SET first_id = \
             (SELECT id FROM messages WHERE thread_id = $1 ORDER BY id LIMIT 1) \
             WHERE id = $1 AND first_id >= $2",
            &[&thread, &oldest],
        )
        .await
    }

    async fn refind_thread_newest(&self, thread: ThreadId, newest: MessageId) -> StoreResult<()> {
        self.write(
            "UPDATE threads SET (last_id, last_activity) = \
             (SELECT id, created_at FROM messages WHERE thread_id = $1 ORDER BY id DESC LIMIT 1) \
             WHERE id = $1 AND last_id <= $2",
            &[&thread, &newest],
        )
        .await
    }
}
