//! The message rules, written once for every backend: what storing a
//! message checks and writes, how a claim and an offer take inbox rows,
//! what a purge batch deletes and how it keeps the summaries true, how a
//! thread is read and how read marks are kept; and, in `grants.rs`, OAuth's: what
//! presenting a code or a refresh token comes to, and how a grant is made
//! ([`redeem_code`], [`open_grant`], [`refresh_grant`]).
//!
//! Each rule runs over the statements of `../statements/`, on the
//! [`Executor`] the backend gives it: a transaction, or a connection. SQLite runs them on its writer
//! thread or a reader connection, where every statement completes at once
//! ([`at_once`]); PostgreSQL awaits them, and pipelines the inserts of a
//! group commit on one transaction.

use super::sql::Executor;
use super::statements::storing::Answered;
use super::statements::{inbox, purge, storing};
use super::summary::{Removed, first_people, losses};
use super::{Conversation, Missing, NewMessage, Offer, RecipientCheck, StoreError, StoreResult};
use crate::model::{Handle, MAX_OFFERS, Message, MessageId, Millis, Place, ThreadId};
use futures::future::join_all;
use std::future::Future;

mod claims;
mod grants;
pub(super) use claims::claim;
pub(super) use grants::{open_grant, redeem_code, refresh_grant};

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
pub(super) async fn insert(db: &impl Executor, new: NewMessage) -> StoreResult<Message> {
    let mut outcomes = insert_all(db, vec![new]).await?;
    outcomes.pop().expect("an outcome for each message")
}

/// Stores the messages of one group commit, each as [`insert`] does, and
/// each kind of write once for them all where it can be: the checks side
/// by side (a backend that awaits its statements pipelines them), the
/// messages' rows in one statement where the backend has one for many
/// ([`storing::insert_messages`]), and each channel's summary counted once
/// for all of its posts (a busy channel's row written once a batch, not
/// once a message). Each message's outcome; `Err` if a write failed,
/// which fails the batch.
pub(super) async fn insert_all(
    db: &impl Executor,
    news: Vec<NewMessage>,
) -> StoreResult<Vec<StoreResult<Message>>> {
    let placed = join_all(news.into_iter().map(|new| place(db, new))).await;
    let stored: Vec<&Placed> = placed.iter().filter_map(|p| p.as_ref().ok()).collect();
    let messages: Vec<&Message> = stored.iter().map(|p| &p.message).collect();
    storing::insert_messages(db, &messages).await?;
    for written in join_all(stored.iter().map(|placed| write_beside(db, placed))).await {
        written?;
    }
    count_in_channels(db, messages).await?;
    Ok(placed
        .into_iter()
        .map(|placed| placed.map(|p| p.message))
        .collect())
}

/// A message checked and placed, to be written.
struct Placed {
    message: Message,
    /// Its files' bytes, in order.
    files: Vec<Vec<u8>>,
    /// It opened its thread, whose row counted it as it was written.
    opened: bool,
}

/// Checks a message and places it: its conversation (a new thread's row
/// written whole, its first message counted), its id, and the message as
/// it will be stored, with its files' bytes.
async fn place(db: &impl Executor, new: NewMessage) -> StoreResult<Placed> {
    if let Some(recipient) = &new.to {
        check_recipient(db, recipient, new.check_to).await?;
    }
    let now = new.created_at;
    let place = match &new.conversation {
        Conversation::NewThread => None,
        &Conversation::Thread(thread) => match storing::thread_is_live(db, thread, now).await? {
            true => Some(Place::Thread(thread)),
            false => return Err(StoreError::NotFound(Missing::Thread(thread))),
        },
        Conversation::Channel(name) => Some(Place::Channel(name.clone())),
    };
    if let Some(reply_to) = new.reply_to {
        // A new thread has nothing to reply to.
        let same_place = match &place {
            Some(place) => storing::is_live_in(db, reply_to, place, now).await?,
            None => false,
        };
        if !same_place {
            return Err(StoreError::NotFound(Missing::ReplyTarget(reply_to)));
        }
    }
    let id = db.next_message_id().await?;
    let opened = place.is_none();
    let place = match place {
        Some(place) => place,
        None => {
            let people = first_people([Some(&new.from), new.to.as_ref()]);
            Place::Thread(storing::open_thread(db, id, &people, now).await?)
        }
    };
    let (message, files) = new.stored(id, &place);
    Ok(Placed {
        message,
        files,
        opened,
    })
}

/// What a stored message writes beside its row: its files, its inbox row,
/// what it answers, and its count in a thread it did not open (a channel's
/// is counted for the batch, [`count_in_channels`]).
async fn write_beside(db: &impl Executor, placed: &Placed) -> StoreResult<()> {
    let message = &placed.message;
    let (id, from, now) = (message.id, &message.from, message.created_at);
    for (attachment, bytes) in message.attachments.iter().zip(&placed.files) {
        storing::insert_attachment(db, id, attachment.n, bytes).await?;
    }
    if let (Some(recipient), Some(delivery)) = (&message.to, &message.delivery) {
        storing::insert_inbox(db, recipient, id, delivery.expects, delivery.due_at).await?;
    }
    match &message.place {
        Place::Thread(_) if placed.opened => {}
        &Place::Thread(thread) => {
            storing::answer(db, from, Answered::Thread(thread), now).await?;
            let recipient = message.to.as_ref().unwrap_or(from);
            storing::count_in_thread(db, thread, id, from, recipient, now).await?;
        }
        Place::Channel(_) => {
            if let Some(reply_to) = message.reply_to {
                storing::answer(db, from, Answered::Message(reply_to), now).await?;
            }
        }
    }
    Ok(())
}

/// Counts channel posts in their channels' summaries, one write a channel.
async fn count_in_channels<'m>(
    db: &impl Executor,
    messages: impl IntoIterator<Item = &'m Message>,
) -> StoreResult<()> {
    let mut counts: Vec<storing::ChannelCount> = Vec::new();
    for message in messages {
        let Place::Channel(channel) = &message.place else {
            continue;
        };
        match counts.iter_mut().find(|count| &count.channel == channel) {
            Some(count) => count.add(message.id, message.created_at),
            None => counts.push(storing::ChannelCount::of(
                channel.clone(),
                message.id,
                message.created_at,
            )),
        }
    }
    for count in &counts {
        storing::count_in_channel(db, count).await?;
    }
    Ok(())
}

async fn check_recipient(
    db: &impl Executor,
    recipient: &Handle,
    check: RecipientCheck,
) -> StoreResult<()> {
    let RecipientCheck::LivePerson { or_empty_store } = check else {
        return Ok(());
    };
    if storing::may_receive(db, recipient, or_empty_store).await? {
        return Ok(());
    }
    Err(StoreError::NotFound(Missing::Recipient(recipient.clone())))
}

/// Claims up to `limit` of `recipient`'s takeable messages (an inbox
/// check), inside a write transaction: no two claims take one message.
pub(super) async fn claim_inbox(
    db: &impl Executor,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = inbox::take_for_claim(db, recipient, now, limit).await?;
    inbox::messages_by_id(db, &ids).await
}

/// Takes up to `limit` messages whose due time passed unanswered, each
/// once (of the relays serving a store, one takes it).
pub(super) async fn take_overdue(
    db: &impl Executor,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = inbox::mark_overdue(db, now, limit).await?;
    inbox::messages_by_id(db, &ids).await
}

/// Offers up to `limit` of the same messages to a stream, leasing each;
/// never one offered [`MAX_OFFERS`] times already: its pushes stopped, and
/// only a claim takes it now.
pub(super) async fn offer_inbox(
    db: &impl Executor,
    recipient: &Handle,
    offer: Offer,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let ids = inbox::take_for_offer(db, recipient, offer, MAX_OFFERS, limit).await?;
    inbox::messages_by_id(db, &ids).await
}

/// Live messages of a thread after `since_id`, oldest first; `NotFound`
/// if the thread has no live message.
pub(super) async fn thread(
    db: &impl Executor,
    thread: ThreadId,
    since_id: MessageId,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages =
        inbox::messages_in(db, &Place::Thread(thread), Some(since_id), limit, now).await?;
    live_thread(db, thread, now, messages).await
}

/// The newest `limit` live messages of `place`, oldest first; for a
/// thread, `NotFound` if it has none.
pub(super) async fn recent(
    db: &impl Executor,
    place: &Place,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let mut messages = inbox::messages_in(db, place, None, limit, now).await?;
    messages.reverse();
    match place {
        &Place::Thread(thread) => live_thread(db, thread, now, messages).await,
        Place::Channel(_) => Ok(messages),
    }
}

/// `messages`, unless there are none and the thread has no live message.
async fn live_thread(
    db: &impl Executor,
    thread: ThreadId,
    now: Millis,
    messages: Vec<Message>,
) -> StoreResult<Vec<Message>> {
    if messages.is_empty() && !storing::thread_is_live(db, thread, now).await? {
        return Err(StoreError::NotFound(Missing::Thread(thread)));
    }
    Ok(messages)
}

/// The key a read mark of `place` is kept under: `c:NAME` or `t:ID`.
fn mark_key(place: &Place) -> String {
    match place {
        Place::Channel(name) => channel_mark_key(name.as_str()),
        Place::Thread(id) => format!("t:{id}"),
    }
}

fn channel_mark_key(channel: &str) -> String {
    format!("c:{channel}")
}

/// Records that `reader` has read `place` up to `last_id` (never backwards).
pub(super) async fn mark_read(
    db: &impl Executor,
    reader: &Handle,
    place: &Place,
    last_id: MessageId,
) -> StoreResult<()> {
    inbox::raise_read_mark(db, reader, &mark_key(place), last_id).await
}

/// For each place, how many live messages came after `reader` last read it.
pub(super) async fn unread(
    db: &impl Executor,
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
    inbox::unread_after_marks(db, reader, &keyed, cap, now).await
}

/// Deletes up to `batch` expired messages, with their inbox rows, inside
/// one write transaction, keeping the summaries true; returns how many went.
pub(super) async fn purge_batch(db: &impl Executor, now: Millis, batch: u32) -> StoreResult<u64> {
    let removed = purge::delete_expired(db, now, batch).await?;
    purge::delete_inbox_rows(db, &removed).await?;
    uncount(db, &removed).await?;
    Ok(removed.len() as u64)
}

/// Takes `removed` messages out of the summaries of the conversations they
/// were in: drops a summary left with none; finds a conversation's newest
/// message again when it went, and a thread's opening when it went. It
/// reads a message only to find a new newest or opening, so its cost
/// follows what was removed, not what is left.
async fn uncount(db: &impl Executor, removed: &[Removed]) -> StoreResult<()> {
    let (channels, threads) = losses(removed);
    // A conversation with no message left is forgotten with what anyone
    // had read of it.
    for (channel, loss) in channels {
        if purge::uncount_channel(db, channel, loss.gone, loss.newest).await? {
            purge::forget_marks(db, &channel_mark_key(channel)).await?;
        }
    }
    for (thread, loss) in threads {
        let Some((count, people)) = purge::thread_counts(db, thread).await? else {
            continue;
        };
        let left = count - loss.gone;
        // Never while a message is left in it, whatever the count says.
        if left <= 0 && purge::drop_thread_if_empty(db, thread).await? {
            purge::forget_marks(db, &mark_key(&Place::Thread(thread))).await?;
            continue;
        }
        // Who is in it: those who sent or received what is left.
        let people = loss.people_after(&people)?;
        purge::recount_thread(db, thread, left, &people, loss.oldest, loss.newest).await?;
    }
    Ok(())
}
