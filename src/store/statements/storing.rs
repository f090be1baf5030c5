//! What storing a message checks and writes (`rules::insert`): its row,
//! its files, its inbox row, the answers it gives, and its count in the
//! summaries. On PostgreSQL these run side by side in a group commit,
//! their writes queued to go together, so a summary's newest message is
//! the one with the highest id, whichever write comes first; SQLite's
//! writer runs them in id order.

use crate::model::{Channel, Expects, Handle, Message, MessageId, Millis, Place, ThreadId};
use crate::store::StoreResult;
use crate::store::columns::files_column;
use crate::store::sql::{Dialect, Executor, List, Param};
use std::borrow::Cow;

/// A place's column in `messages m`, and its value.
pub fn column(place: &Place) -> (&'static str, &dyn Param) {
    match place {
        Place::Channel(name) => ("m.channel", name),
        Place::Thread(id) => ("m.thread_id", id),
    }
}

/// Whether `handle` is a live person, or, with `or_empty_store`, nobody
/// was ever added. One statement, whatever the answer.
pub async fn may_receive(
    db: &impl Executor,
    handle: &Handle,
    or_empty_store: bool,
) -> StoreResult<bool> {
    db.one(
        "SELECT EXISTS (SELECT 1 FROM people WHERE handle = ?1 AND revoked_at IS NULL) \
         OR (?2 AND NOT EXISTS (SELECT 1 FROM people))",
        &[handle, &or_empty_store],
        |row| row.get(0),
    )
    .await
}

/// Whether the thread has a live message.
pub async fn thread_is_live(
    db: &impl Executor,
    thread: ThreadId,
    now: Millis,
) -> StoreResult<bool> {
    db.exists(
        "SELECT 1 FROM messages WHERE thread_id = ?1 AND expires_at > ?2 LIMIT 1",
        &[&thread, &now],
    )
    .await
}

/// Whether message `id` is live and lives in `place`.
pub async fn is_live_in(
    db: &impl Executor,
    id: MessageId,
    place: &Place,
    now: Millis,
) -> StoreResult<bool> {
    let sql = match place {
        Place::Channel(_) => {
            "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 AND channel = ?3"
        }
        Place::Thread(_) => {
            "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 AND thread_id = ?3"
        }
    };
    db.exists(sql, &[&id, &now, column(place).1]).await
}

/// Writes a new thread's row whole, summary and all, for its first
/// message `first_id`; returns the thread's id.
pub async fn open_thread(
    db: &impl Executor,
    first_id: MessageId,
    people: &str,
    at: Millis,
) -> StoreResult<ThreadId> {
    let sql = db.pick(
        "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, \
         people) VALUES (?1, 1, ?2, ?2, ?1, ?3) RETURNING id",
        "INSERT INTO threads (created_at, message_count, first_id, last_id, last_activity, \
         people) VALUES (?1, 1, ?2, ?2, ?1, CAST(?3 AS TEXT)::jsonb) RETURNING id",
    );
    db.one(sql, &[&at, &first_id, &people], |row| row.get(0))
        .await
}

/// Writes the message's row, its files listed (`messages.attachments`).
pub async fn insert_message(db: &impl Executor, m: &Message) -> StoreResult<()> {
    let params: [&dyn Param; 11] = [
        &m.id,
        &m.place.thread(),
        &m.place.channel(),
        &m.from,
        &m.to,
        &m.kind,
        &m.body,
        &m.reply_to,
        &m.created_at,
        &m.expires_at,
        &files_column(&m.attachments),
    ];
    db.write(
        "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, \
         reply_to, created_at, expires_at, attachments) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        &params,
    )
    .await
}

/// Writes messages' rows: on PostgreSQL in one statement, each column a
/// list (a group commit's batch writes all of its messages at once); on
/// SQLite, whose statements cost no round trip, one [`insert_message`]
/// each.
pub async fn insert_messages(db: &impl Executor, messages: &[&Message]) -> StoreResult<()> {
    if db.dialect() == Dialect::Sqlite || messages.len() < 2 {
        for message in messages {
            insert_message(db, message).await?;
        }
        return Ok(());
    }
    fn column<'m, T>(messages: &[&'m Message], of: impl Fn(&'m Message) -> T) -> Vec<T> {
        messages.iter().map(|m| of(m)).collect()
    }
    let ids = column(messages, |m| m.id);
    let threads = column(messages, |m| m.place.thread());
    let channels = column(messages, |m| m.place.channel());
    let senders = column(messages, |m| &m.from);
    let recipients = column(messages, |m| m.to.as_ref());
    let kinds = column(messages, |m| m.kind.as_str());
    let bodies = column(messages, |m| m.body.as_str());
    let replies_to = column(messages, |m| m.reply_to);
    let created = column(messages, |m| m.created_at);
    let expires = column(messages, |m| m.expires_at);
    let files = column(messages, |m| files_column(&m.attachments));
    let params: [&dyn Param; 11] = [
        &List(&ids),
        &List(&threads),
        &List(&channels),
        &List(&senders),
        &List(&recipients),
        &List(&kinds),
        &List(&bodies),
        &List(&replies_to),
        &List(&created),
        &List(&expires),
        &List(&files),
    ];
    db.write(
        "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, \
         reply_to, created_at, expires_at, attachments) \
         SELECT * FROM unnest(?1::bigint[], ?2::bigint[], ?3::text[], ?4::text[], \
         ?5::text[], ?6::text[], ?7::text[], ?8::bigint[], ?9::bigint[], ?10::bigint[], \
         ?11::text[])",
        &params,
    )
    .await
}

/// Keeps the bytes of a message's file `n`.
pub async fn insert_attachment(
    db: &impl Executor,
    id: MessageId,
    n: u32,
    bytes: &[u8],
) -> StoreResult<()> {
    db.write(
        "INSERT INTO attachments (message_id, n, data) VALUES (?1, ?2, ?3)",
        &[&id, &super::messages::attachment_number(n), &bytes],
    )
    .await
}

/// The message's inbox row, with what it expects of its recipient.
pub async fn insert_inbox(
    db: &impl Executor,
    recipient: &Handle,
    id: MessageId,
    expects: Expects,
    due_at: Option<Millis>,
) -> StoreResult<()> {
    let expects = expects.is_owed().then(|| expects.as_str());
    db.write(
        "INSERT INTO inbox (recipient, message_id, expects, due_at) VALUES (?1, ?2, ?3, ?4)",
        &[recipient, &id, &expects, &due_at],
    )
    .await
}

/// What a reply answers: every message of its thread to the replier that
/// was pushed or read, or the one message it replies to in a channel.
pub enum Answered {
    Thread(ThreadId),
    Message(MessageId),
}

/// Marks what `replier` answered, if not answered yet, as answered at
/// `at` (and read).
pub async fn answer(
    db: &impl Executor,
    replier: &Handle,
    answered: Answered,
    at: Millis,
) -> StoreResult<()> {
    let (sql, id): (_, &dyn Param) = match &answered {
        Answered::Thread(thread) => (
            "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
             WHERE recipient = ?1 AND answered_at IS NULL \
             AND (pushed_at IS NOT NULL OR read_at IS NOT NULL) \
             AND message_id IN (SELECT id FROM messages WHERE thread_id = ?2)",
            thread,
        ),
        Answered::Message(id) => (
            "UPDATE inbox SET answered_at = ?3, read_at = coalesce(read_at, ?3) \
             WHERE recipient = ?1 AND answered_at IS NULL AND message_id = ?2",
            id,
        ),
    };
    db.write(sql, &[replier, id, &at]).await
}

/// New posts of a channel, to count in its summary at once.
pub struct ChannelCount {
    pub channel: Channel,
    pub messages: i64,
    /// The latest of them, and when it was sent.
    pub last_id: MessageId,
    pub last_at: Millis,
}

impl ChannelCount {
    pub fn of(channel: Channel, id: MessageId, at: Millis) -> ChannelCount {
        ChannelCount {
            channel,
            messages: 1,
            last_id: id,
            last_at: at,
        }
    }

    pub fn add(&mut self, id: MessageId, at: Millis) {
        self.messages += 1;
        if id > self.last_id {
            (self.last_id, self.last_at) = (id, at);
        }
    }
}

/// Counts new posts in their channel's summary, creating it.
pub async fn count_in_channel(db: &impl Executor, count: &ChannelCount) -> StoreResult<()> {
    let sql = db.pick(
        "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
         VALUES (?1, ?4, ?2, ?3) ON CONFLICT (channel) DO UPDATE SET \
         message_count = message_count + ?4, last_id = ?2, last_activity = ?3",
        "INSERT INTO channel_summaries (channel, message_count, last_id, last_activity) \
         VALUES (?1, ?4, ?2, ?3) ON CONFLICT (channel) DO UPDATE SET \
         message_count = channel_summaries.message_count + ?4, \
         last_id = greatest(channel_summaries.last_id, ?2), \
         last_activity = CASE WHEN ?2 > channel_summaries.last_id THEN ?3 \
             ELSE channel_summaries.last_activity END",
    );
    let params: [&dyn Param; 4] = [
        &count.channel,
        &count.last_id,
        &count.last_at,
        &count.messages,
    ];
    db.write(sql, &params).await
}

/// Counts message `id` in a thread opened before it: one more message,
/// one more for its sender and for its recipient (the sender again when
/// there is none), both counted from the row before the update.
pub async fn count_in_thread(
    db: &impl Executor,
    thread: ThreadId,
    id: MessageId,
    sender: &Handle,
    recipient: &Handle,
    at: Millis,
) -> StoreResult<()> {
    let (sql, sender, recipient) = match db.dialect() {
        // A person's count in `people` by its JSON path (handles are
        // lowercase letters, digits, `.`, `_` and `-`: nothing to escape).
        Dialect::Sqlite => (
            "UPDATE threads SET message_count = message_count + 1, last_id = ?2, \
             last_activity = ?3, \
             people = json_set(people, ?4, coalesce(people ->> ?4, 0) + 1, \
                                       ?5, coalesce(people ->> ?5, 0) + 1) \
             WHERE id = ?1",
            Cow::Owned(format!("$.\"{sender}\"")),
            Cow::Owned(format!("$.\"{recipient}\"")),
        ),
        Dialect::Postgres => (
            "UPDATE threads SET message_count = message_count + 1, \
             last_id = greatest(last_id, ?2), \
             last_activity = CASE WHEN ?2 > last_id THEN ?3 ELSE last_activity END, \
             people = people \
                 || jsonb_build_object(?4::text, coalesce((people ->> ?4::text)::bigint, 0) + 1) \
                 || jsonb_build_object(?5::text, coalesce((people ->> ?5::text)::bigint, 0) + 1) \
             WHERE id = ?1",
            Cow::Borrowed(sender.as_str()),
            Cow::Borrowed(recipient.as_str()),
        ),
    };
    let params: [&dyn Param; 5] = [&thread, &id, &at, &sender, &recipient];
    db.write(sql, &params).await
}
