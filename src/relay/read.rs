//! Reading: threads, channel pages, overviews and the team. The team reads
//! everything; expired messages are never returned.

use super::input::{cursor, parse_channel};
use super::{Caller, Identity, MAX_PAGE, Relay, RelayError, RelayResult};
use crate::model::{
    Channel, ChannelSummary, Handle, Message, MessageId, Millis, Place, ThreadId, ThreadSummary,
    now_millis,
};

/// The most conversations an overview lists at once, and by default.
pub const MAX_OVERVIEW_PAGE: u32 = 200;
pub const OVERVIEW_PAGE: u32 = 50;

/// Unread counts stop here ("99+" on the page).
pub const MAX_UNREAD: u64 = 99;

fn overview_limit(limit: Option<u32>) -> u32 {
    limit.unwrap_or(OVERVIEW_PAGE).clamp(1, MAX_OVERVIEW_PAGE)
}

/// A page of an overview, and the cursor for the next page, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    /// Pass as `before` for the next page; `None` on the last.
    pub next_before: Option<MessageId>,
}

impl<T> Listing<T> {
    pub(super) fn of(items: Vec<T>, limit: u32, last_id: impl Fn(&T) -> MessageId) -> Listing<T> {
        let next_before = (items.len() as u32 == limit)
            .then(|| items.last().map(&last_id))
            .flatten();
        Listing { items, next_before }
    }
}

/// Who reads: the caller's agent, whose reading confirms what was pushed
/// to it, or the person themselves (the team page's credentials), whose
/// reading leaves it for their agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Agent,
    Person,
}

/// A page of a thread, and where the next starts when more follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPage {
    pub messages: Vec<Message>,
    /// Pass as `since_id` for the next page; `None` on the last.
    pub next_since_id: Option<MessageId>,
}

/// Messages after a cursor, and the cursor to use next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub messages: Vec<Message>,
    /// The id of the last message returned, or the `since_id` asked for.
    pub last_id: MessageId,
}

/// A teammate as `list_peers` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub handle: Handle,
    pub name: String,
    pub status: String,
    pub last_seen_at: Option<Millis>,
    /// A stream of one of their agent's sessions is open: what is sent to
    /// them is pushed to it now.
    pub reachable: bool,
}

impl Relay {
    /// A thread's live messages after `since_id` (default: from the
    /// start), oldest first, at most `limit` (default and most:
    /// [`MAX_PAGE`]). What in it is addressed to the caller counts as read
    /// when their agent reads it.
    pub async fn read_thread(
        &self,
        caller: &Caller,
        thread_id: ThreadId,
        since_id: Option<MessageId>,
        limit: Option<u32>,
        reader: Reader,
    ) -> RelayResult<ThreadPage> {
        let limit = limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
        let since_id = cursor(since_id);
        let messages = self
            .store
            .thread(thread_id, since_id, limit, now_millis())
            .await?;
        let next_since_id = (messages.len() as u32 == limit)
            .then(|| messages.last().map(|m| m.id))
            .flatten();
        let messages = self.read_by(caller, reader, messages).await?;
        Ok(ThreadPage {
            messages,
            next_since_id,
        })
    }

    /// The newest live messages of a thread (at most [`MAX_PAGE`]), oldest
    /// first, as the team page shows it (a person reading).
    pub async fn thread_for_page(&self, thread_id: ThreadId) -> RelayResult<Vec<Message>> {
        Ok(self
            .store
            .thread_recent(thread_id, MAX_PAGE, now_millis())
            .await?)
    }

    /// A thread's live messages after `after`, oldest first (at most
    /// [`MAX_PAGE`]), as the team page adds them once it has shown the
    /// rest: only the new rows are read. A person reading marks nothing.
    pub async fn thread_after(
        &self,
        thread_id: ThreadId,
        after: Option<MessageId>,
    ) -> RelayResult<Vec<Message>> {
        Ok(self
            .store
            .thread(thread_id, cursor(after), MAX_PAGE, now_millis())
            .await?)
    }

    /// One live message, with where it stands; read, if it is addressed to
    /// the caller and their agent reads it.
    pub async fn message(
        &self,
        caller: &Caller,
        id: MessageId,
        reader: Reader,
    ) -> RelayResult<Message> {
        let message = self
            .store
            .message(id, now_millis())
            .await?
            .ok_or_else(|| RelayError::NotFound(format!("there is no message {id}")))?;
        Ok(self.read_by(caller, reader, vec![message]).await?.remove(0))
    }

    /// Marks as read those of `messages` addressed to the caller and not
    /// read yet, when their agent reads them, and returns them so.
    async fn read_by(
        &self,
        caller: &Caller,
        reader: Reader,
        messages: Vec<Message>,
    ) -> RelayResult<Vec<Message>> {
        match (&caller.identity, reader) {
            (Identity::Person(me), Reader::Agent) => self.confirm_read(me, messages).await,
            _ => Ok(messages),
        }
    }

    /// Marks those of `messages` addressed to `reader` and unread as read
    /// now, and returns the messages with their ledgers so.
    pub(super) async fn confirm_read(
        &self,
        reader: &Handle,
        mut messages: Vec<Message>,
    ) -> RelayResult<Vec<Message>> {
        let unread: Vec<MessageId> = messages
            .iter()
            .filter(|m| m.to.as_ref() == Some(reader))
            .filter(|m| m.delivery.as_ref().is_some_and(|d| d.read_at.is_none()))
            .map(|m| m.id)
            .collect();
        if unread.is_empty() {
            return Ok(messages);
        }
        let now = now_millis();
        let confirmed = self.store.confirm_read(reader, unread, now).await?;
        self.stats.read(confirmed.len());
        for message in &mut messages {
            if let Some(delivery) = &mut message.delivery
                && confirmed.contains(&message.id)
            {
                delivery.read_at = Some(now);
                delivery.lease_until = None;
                self.delivery_changed(std::slice::from_ref(message));
            }
        }
        Ok(messages)
    }

    /// Channel messages after `since_id` (default: from the start), oldest
    /// first, at most `limit` (default and most: [`MAX_PAGE`]).
    pub async fn channel_messages(
        &self,
        channel: &str,
        since_id: Option<MessageId>,
        limit: Option<u32>,
    ) -> RelayResult<Page> {
        let channel = parse_channel(channel)?;
        self.channel_page(&channel, cursor(since_id), limit).await
    }

    pub(super) async fn channel_page(
        &self,
        channel: &Channel,
        since_id: MessageId,
        limit: Option<u32>,
    ) -> RelayResult<Page> {
        let limit = limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
        let messages = self
            .store
            .channel_messages(channel, since_id, limit, now_millis())
            .await?;
        let last_id = messages.last().map_or(since_id, |m| m.id);
        Ok(Page { messages, last_id })
    }

    /// The newest live messages of a channel (at most [`MAX_PAGE`]), oldest
    /// first; `NotFound` when it has none.
    pub async fn channel_recent(&self, channel: &str) -> RelayResult<Vec<Message>> {
        let channel = parse_channel(channel)?;
        let messages = self
            .store
            .channel_recent(&channel, MAX_PAGE, now_millis())
            .await?;
        if messages.is_empty() {
            return Err(RelayError::NotFound(format!(
                "#{channel} has no live messages"
            )));
        }
        Ok(messages)
    }

    /// Channels with live messages, latest activity first: a page of at
    /// most `limit` (default [`OVERVIEW_PAGE`], at most [`MAX_OVERVIEW_PAGE`])
    /// after the cursor `before`.
    pub async fn channels(
        &self,
        before: Option<MessageId>,
        limit: Option<u32>,
    ) -> RelayResult<Listing<ChannelSummary>> {
        let limit = overview_limit(limit);
        let items = self.store.channels(now_millis(), before, limit).await?;
        Ok(Listing::of(items, limit, |c| c.last_id))
    }

    /// Threads with live messages, latest activity first, paged as channels.
    pub async fn threads(
        &self,
        before: Option<MessageId>,
        limit: Option<u32>,
    ) -> RelayResult<Listing<ThreadSummary>> {
        let limit = overview_limit(limit);
        let items = self.store.threads(now_millis(), before, limit).await?;
        Ok(Listing::of(items, limit, |t| t.last_id))
    }

    /// Marks `place` read by `reader` up to `last_id`.
    pub async fn mark_read(
        &self,
        reader: &Caller,
        place: &Place,
        last_id: MessageId,
    ) -> RelayResult<()> {
        if let Identity::Person(handle) = reader.identity() {
            self.store.mark_read(handle, place, last_id).await?;
        }
        Ok(())
    }

    /// How many messages of each place `reader` has not read (up to
    /// [`MAX_UNREAD`]), in the order given: counted from their last-read id,
    /// so the cost is the unread messages', never the history's.
    pub async fn unread(&self, reader: &Caller, places: Vec<Place>) -> RelayResult<Vec<u64>> {
        let Identity::Person(handle) = reader.identity() else {
            return Ok(vec![0; places.len()]);
        };
        Ok(self.store.unread(handle, places, MAX_UNREAD).await?)
    }

    /// Everyone on the team: people who are not revoked, and participants
    /// from the environment, with their status and last-seen time.
    pub async fn peers(&self) -> RelayResult<Vec<Peer>> {
        let people = self.store.people().await?;
        let presence = self.store.presence().await?;
        let lookup = |handle: &Handle| presence.iter().find(|p| p.handle == *handle);
        let reachable = self.reachable();
        let listed = people
            .into_iter()
            .filter(|p| p.revoked_at.is_none())
            .map(|p| (p.handle, p.name))
            .chain(
                self.settings
                    .participants
                    .iter()
                    .map(|(h, _)| (h.clone(), h.to_string())),
            );
        Ok(listed
            .map(|(handle, name)| {
                let stored = lookup(&handle);
                let last_seen_at = match (
                    stored.and_then(|p| p.last_seen_at),
                    self.presence.recent(&handle),
                ) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                Peer {
                    status: stored.map(|p| p.status.clone()).unwrap_or_default(),
                    reachable: reachable.contains(&handle),
                    handle,
                    name,
                    last_seen_at,
                }
            })
            .collect())
    }
}
