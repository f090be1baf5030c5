//! The message rules, written once for every backend: what storing a
//! message checks and writes, how a claim and an offer take inbox rows,
//! what a purge batch deletes and how it keeps the summaries true, how a
//! thread is read and how read marks are kept; and, in `grants.rs`, OAuth's: what
//! presenting a code or a refresh token comes to, and how a grant is made
//! ([`redeem_code`], [`open_grant`], [`refresh_grant`]).
//!
//! Each rule runs over [`Statements`] (or [`GrantStatements`]): one
//! backend's SQL, one statement a method, inside the transaction (or on
//! the connection) the backend gives it. SQLite runs them on its writer
//! thread or a reader connection, where every statement completes at once
//! ([`at_once`]); PostgreSQL awaits them, and pipelines the inserts of a
//! group commit on one transaction.

use super::summary::{Removed, first_people, losses};
use super::{Conversation, Missing, NewMessage, Offer, RecipientCheck, StoreError, StoreResult};
use crate::model::{
    Channel, Expects, Handle, MAX_OFFERS, Message, MessageId, Millis, Place, ThreadId,
};
use std::future::Future;

mod claims;
mod grants;
pub(super) use claims::{ClaimStatements, claim};
pub(super) use grants::{open_grant, redeem_code, refresh_grant};

/// One backend's statements. Each method is one SQL statement (a few
/// run one or two for each item of a short list), and decides nothing:
/// the rules below decide.
pub(super) trait Statements {
    // Checks, made before anything is written.
    /// Whether `handle` is a live person, or, with `or_empty_store`,
    /// nobody was ever added.
    async fn may_receive(&self, handle: &Handle, or_empty_store: bool) -> StoreResult<bool>;
    /// Whether the thread has a live message.
    async fn thread_is_live(&self, thread: ThreadId, now: Millis) -> StoreResult<bool>;
    /// Whether message `id` is live and lives in `place`.
    async fn is_live_in(&self, id: MessageId, place: &Place, now: Millis) -> StoreResult<bool>;

    // Storing a message.
    /// The id the next message gets, above every id ever given.
    async fn next_message_id(&self) -> StoreResult<MessageId>;
    /// Writes a new thread's row whole, summary and all, for its first
    /// message `first_id`; returns the thread's id.
    async fn open_thread(
        &self,
        first_id: MessageId,
        people: &str,
        at: Millis,
    ) -> StoreResult<ThreadId>;
    /// Writes the message's row, its files listed (`messages.attachments`).
    async fn insert_message(&self, message: &Message) -> StoreResult<()>;
    /// Keeps the bytes of a message's file `n`.
    async fn insert_attachment(&self, id: MessageId, n: u32, bytes: &[u8]) -> StoreResult<()>;
    /// The message's inbox row, with what it expects of its recipient.
    async fn insert_inbox(
        &self,
        recipient: &Handle,
        id: MessageId,
        expects: Expects,
        due_at: Option<Millis>,
    ) -> StoreResult<()>;
    /// Marks every message of `thread` to `replier` that was pushed or
    /// read, and not answered yet, as answered at `at` (and read).
    async fn answer_thread(
        &self,
        replier: &Handle,
        thread: ThreadId,
        at: Millis,
    ) -> StoreResult<()>;
    /// Marks message `id`, if it was to `replier` and is not answered yet,
    /// as answered at `at` (and read).
    async fn answer_message(&self, replier: &Handle, id: MessageId, at: Millis) -> StoreResult<()>;
    /// Counts message `id` in its channel's summary, creating it.
    async fn count_in_channel(
        &self,
        channel: &Channel,
        id: MessageId,
        at: Millis,
    ) -> StoreResult<()>;
    /// Counts message `id` in a thread opened before it: one more message,
    /// one more for its sender and for its recipient (the sender again when
    /// there is none), both counted from the row before the update.
    async fn count_in_thread(
        &self,
        thread: ThreadId,
        id: MessageId,
        sender: &Handle,
        recipient: &Handle,
        at: Millis,
    ) -> StoreResult<()>;

    // The inbox.
    /// Marks up to `limit` of `recipient`'s takeable rows (unread, live,
    /// under no running lease) read at `now`, oldest first; their ids.
    async fn take_for_claim(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>>;
    /// Leases up to `limit` of the same rows, never one last offered to
    /// `offer.holder` nor one offered `most` times already, to that
    /// holder; their ids.
    async fn take_for_offer(
        &self,
        recipient: &Handle,
        offer: Offer,
        most: u32,
        limit: u32,
    ) -> StoreResult<Vec<MessageId>>;
    /// Marks up to `limit` rows due by `now` and still owed, of live
    /// messages, overdue at `now`, soonest due first; their ids. A row
    /// another writer marks first is not marked again.
    async fn mark_overdue(&self, now: Millis, limit: u32) -> StoreResult<Vec<MessageId>>;
    /// Messages by id, oldest first, with their ledgers as they are now.
    async fn messages_by_id(&self, ids: &[MessageId]) -> StoreResult<Vec<Message>>;

    // Reading.
    /// Live messages of `place` with an id above `since_id`, oldest first.
    async fn messages_in(
        &self,
        place: &Place,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreResult<Vec<Message>>;
    /// The newest `limit` live messages of `place`, newest first.
    async fn newest_in(&self, place: &Place, limit: u32, now: Millis) -> StoreResult<Vec<Message>>;

    // Read marks, kept under [`mark_key`].
    async fn raise_read_mark(
        &self,
        reader: &Handle,
        key: &str,
        last_id: MessageId,
    ) -> StoreResult<()>;
    /// For each place with its mark's key, how many live messages came
    /// after `reader`'s mark (all, without one), counting at most `cap`.
    async fn unread_after_marks(
        &self,
        reader: &Handle,
        places: &[(Place, String)],
        cap: u64,
        now: Millis,
    ) -> StoreResult<Vec<u64>>;

    // The purge.
    /// Deletes up to `batch` messages expired at `now`, soonest expired first.
    async fn delete_expired(&self, now: Millis, batch: u32) -> StoreResult<Vec<Removed>>;
    /// Deletes the inbox rows of `removed`.
    async fn delete_inbox_rows(&self, removed: &[Removed]) -> StoreResult<()>;
    async fn subtract_from_channel(&self, channel: &str, gone: i64) -> StoreResult<()>;
    async fn drop_channel_if_empty(&self, channel: &str) -> StoreResult<()>;
    /// Finds the channel's newest message again, if the one it named
    /// (`newest` or below) went.
    async fn refind_channel_newest(&self, channel: &str, newest: MessageId) -> StoreResult<()>;
    /// A thread's message count and people, as stored.
    async fn thread_counts(&self, thread: ThreadId) -> StoreResult<Option<(i64, String)>>;
    /// Deletes the thread's row if no message is left in it; whether it did.
    async fn drop_thread_if_empty(&self, thread: ThreadId) -> StoreResult<bool>;
    async fn set_thread_counts(
        &self,
        thread: ThreadId,
        count: i64,
        people: &str,
    ) -> StoreResult<()>;
    /// Finds the thread's opening again, if the one it named (`oldest` or
    /// above) went.
    async fn refind_thread_opening(&self, thread: ThreadId, oldest: MessageId) -> StoreResult<()>;
    /// Finds the thread's newest message again, if the one it named
    /// (`newest` or below) went.
    async fn refind_thread_newest(&self, thread: ThreadId, newest: MessageId) -> StoreResult<()>;
}

/// Runs a rule whose statements complete at once (SQLite's, on a
/// connection of its own): polled once, it is done.
pub(super) fn at_once<T>(rule: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    use futures::FutureExt;
    rule.now_or_never().unwrap_or_else(|| {
        Err(StoreError::backend(
            "running a store rule",
            "a statement did not complete at once",
        ))
    })
}

/// Stores a message. Every check comes before the first write, so a
/// message refused (`NotFound`) has written nothing. A reply answers, in
/// the same transaction, what it replies to.
pub(super) async fn insert(s: &impl Statements, new: NewMessage) -> StoreResult<Message> {
    if let Some(recipient) = &new.to {
        check_recipient(s, recipient, new.check_to).await?;
    }
    let now = new.created_at;
    let place = match &new.conversation {
        Conversation::NewThread => None,
        &Conversation::Thread(thread) => match s.thread_is_live(thread, now).await? {
            true => Some(Place::Thread(thread)),
            false => return Err(StoreError::NotFound(Missing::Thread(thread))),
        },
        Conversation::Channel(name) => Some(Place::Channel(name.clone())),
    };
    if let Some(reply_to) = new.reply_to {
        // A new thread has nothing to reply to.
        let same_place = match &place {
            Some(place) => s.is_live_in(reply_to, place, now).await?,
            None => false,
        };
        if !same_place {
            return Err(StoreError::NotFound(Missing::ReplyTarget(reply_to)));
        }
    }
    let id = s.next_message_id().await?;
    // A new thread's row is written whole, its first message counted.
    let opened = place.is_none();
    let place = match place {
        Some(place) => place,
        None => {
            let people = first_people([Some(&new.from), new.to.as_ref()]);
            Place::Thread(s.open_thread(id, &people, now).await?)
        }
    };
    let (message, files) = new.stored(id, &place);
    s.insert_message(&message).await?;
    for (attachment, bytes) in message.attachments.iter().zip(&files) {
        s.insert_attachment(id, attachment.n, bytes).await?;
    }
    if let (Some(recipient), Some(delivery)) = (&message.to, &message.delivery) {
        s.insert_inbox(recipient, id, delivery.expects, delivery.due_at)
            .await?;
    }
    let from = &message.from;
    match (&place, opened) {
        (Place::Thread(_), true) => {}
        (&Place::Thread(thread), false) => {
            s.answer_thread(from, thread, now).await?;
            let recipient = message.to.as_ref().unwrap_or(from);
            s.count_in_thread(thread, id, from, recipient, now).await?;
        }
        (Place::Channel(name), _) => {
            if let Some(reply_to) = message.reply_to {
                s.answer_message(from, reply_to, now).await?;
            }
            s.count_in_channel(name, id, now).await?;
        }
    }
    Ok(message)
}

async fn check_recipient(
    s: &impl Statements,
    recipient: &Handle,
    check: RecipientCheck,
) -> StoreResult<()> {
    let RecipientCheck::LivePerson { or_empty_store } = check else {
        return Ok(());
    };
    if s.may_receive(recipient, or_empty_store).await? {
        return Ok(());
    }
    Err(StoreError::NotFound(Missing::Recipient(recipient.clone())))
}

/// Claims up to `limit` of `recipient`'s takeable messages (an inbox
/// check), inside a write transaction: no two claims take one message.
pub(super) async fn claim_inbox(
    s: &impl Statements,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = s.take_for_claim(recipient, now, limit).await?;
    s.messages_by_id(&ids).await
}

/// Takes up to `limit` messages whose due time passed unanswered, each
/// once (of the relays serving a store, one takes it).
pub(super) async fn take_overdue(
    s: &impl Statements,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = s.mark_overdue(now, limit).await?;
    s.messages_by_id(&ids).await
}

/// Offers up to `limit` of the same messages to a stream, leasing each;
/// never one offered [`MAX_OFFERS`] times already: its pushes stopped, and
/// only a claim takes it now.
pub(super) async fn offer_inbox(
    s: &impl Statements,
    recipient: &Handle,
    offer: Offer,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = s
        .take_for_offer(recipient, offer, MAX_OFFERS, limit)
        .await?;
    s.messages_by_id(&ids).await
}

/// Live messages of a thread after `since_id`, oldest first; `NotFound`
/// if the thread has no live message.
pub(super) async fn thread(
    s: &impl Statements,
    thread: ThreadId,
    since_id: MessageId,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages = s
        .messages_in(&Place::Thread(thread), since_id, limit, now)
        .await?;
    live_thread(s, thread, now, messages).await
}

/// The newest `limit` live messages of `place`, oldest first; for a
/// thread, `NotFound` if it has none.
pub(super) async fn recent(
    s: &impl Statements,
    place: &Place,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let mut messages = s.newest_in(place, limit, now).await?;
    messages.reverse();
    match place {
        &Place::Thread(thread) => live_thread(s, thread, now, messages).await,
        Place::Channel(_) => Ok(messages),
    }
}

/// `messages`, unless there are none and the thread has no live message.
async fn live_thread(
    s: &impl Statements,
    thread: ThreadId,
    now: Millis,
    messages: Vec<Message>,
) -> StoreResult<Vec<Message>> {
    if messages.is_empty() && !s.thread_is_live(thread, now).await? {
        return Err(StoreError::NotFound(Missing::Thread(thread)));
    }
    Ok(messages)
}

/// The key a read mark of `place` is kept under: `c:NAME` or `t:ID`.
fn mark_key(place: &Place) -> String {
    match place {
        Place::Channel(name) => format!("c:{name}"),
        Place::Thread(id) => format!("t:{id}"),
    }
}

/// Records that `reader` has read `place` up to `last_id` (never backwards).
pub(super) async fn mark_read(
    s: &impl Statements,
    reader: &Handle,
    place: &Place,
    last_id: MessageId,
) -> StoreResult<()> {
    s.raise_read_mark(reader, &mark_key(place), last_id).await
}

/// For each place, how many live messages came after `reader` last read it.
pub(super) async fn unread(
    s: &impl Statements,
    reader: &Handle,
    places: Vec<Place>,
    cap: u64,
    now: Millis,
) -> StoreResult<Vec<u64>> {
    let keyed: Vec<(Place, String)> = places
        .into_iter()
        .map(|place| {
            let key = mark_key(&place);
            (place, key)
        })
        .collect();
    s.unread_after_marks(reader, &keyed, cap, now).await
}

/// Deletes up to `batch` expired messages, with their inbox rows, inside
/// one write transaction, keeping the summaries true; returns how many went.
pub(super) async fn purge_batch(s: &impl Statements, now: Millis, batch: u32) -> StoreResult<u64> {
    let removed = s.delete_expired(now, batch).await?;
    s.delete_inbox_rows(&removed).await?;
    uncount(s, &removed).await?;
    Ok(removed.len() as u64)
}

/// Takes `removed` messages out of the summaries of the conversations they
/// were in: drops a summary left with none; finds a conversation's newest
/// message again when it went, and a thread's opening when it went. It
/// reads a message only to find a new newest or opening, so its cost
/// follows what was removed, not what is left.
async fn uncount(s: &impl Statements, removed: &[Removed]) -> StoreResult<()> {
    let (channels, threads) = losses(removed);
    for (channel, loss) in channels {
        s.subtract_from_channel(channel, loss.gone).await?;
        s.drop_channel_if_empty(channel).await?;
        s.refind_channel_newest(channel, loss.newest).await?;
    }
    for (thread, loss) in threads {
        let Some((count, people)) = s.thread_counts(thread).await? else {
            continue;
        };
        let left = count - loss.gone;
        // Never while a message is left in it, whatever the count says.
        if left <= 0 && s.drop_thread_if_empty(thread).await? {
            continue;
        }
        // Who is in it: those who sent or received what is left.
        s.set_thread_counts(thread, left, &loss.people_after(&people)?)
            .await?;
        s.refind_thread_opening(thread, loss.oldest).await?;
        s.refind_thread_newest(thread, loss.newest).await?;
    }
    Ok(())
}
