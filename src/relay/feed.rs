//! A channel or a thread as a feed of messages, for streams: subscribe,
//! read the backlog, then follow commits, resyncing from the store after a
//! lag.
//!
//! The feed subscribes to the conversation's wake-ups first, then reads the
//! backlog after the cursor from the store, then yields each message as it
//! is committed. A feed that falls behind the wake-ups re-reads the store;
//! nothing is lost and nothing is yielded twice. Any edge that streams a
//! conversation (SSE today) drives one of these.

use super::input::{cursor, parse_channel};
use super::{Caller, MAX_PAGE, Relay, RelayResult, WaitSlot};
use crate::model::{Message, MessageId, Place, ThreadId, now_millis};
use std::{collections::VecDeque, sync::Arc};
use tokio::sync::broadcast::{self, error::RecvError};

/// What a feed yields.
#[derive(Debug, Clone)]
pub enum Update {
    /// A message it had not yielded yet.
    New(Message),
    /// Where a message it yielded before stands now (its `delivery`).
    Delivery(Message),
}

/// The state of one stream of a channel or a thread.
pub struct Feed {
    /// Counts this stream against the caller's and the relay's caps.
    _slot: WaitSlot,
    /// Whose stream it is: it ends when their token is revoked or replaced.
    caller: Caller,
    relay: Arc<Relay>,
    followed: Place,
    /// The id of the last message yielded (or the cursor asked for).
    cursor: MessageId,
    /// Wake-ups for the channel, taken before the first read of the store.
    wake: broadcast::Receiver<Arc<Message>>,
    /// Messages read from the store and not yet yielded.
    backlog: VecDeque<Message>,
    /// The store may hold messages after `cursor` that are not in `backlog`.
    behind: bool,
}

impl Relay {
    /// Follows `channel` from after `since_id` (default: from the start),
    /// holding one of the caller's wait slots while the feed lives.
    pub fn channel_feed(
        self: &Arc<Self>,
        caller: &Caller,
        channel: &str,
        since_id: Option<MessageId>,
    ) -> RelayResult<Feed> {
        let place = Place::Channel(parse_channel(channel)?);
        let wake = self.places.subscribe(&place);
        self.feed(caller, place, wake, since_id)
    }

    /// Follows a thread with live messages from after `since_id`.
    pub async fn thread_feed(
        self: &Arc<Self>,
        caller: &Caller,
        thread_id: ThreadId,
        since_id: Option<MessageId>,
    ) -> RelayResult<Feed> {
        let place = Place::Thread(thread_id);
        let wake = self.places.subscribe(&place);
        let mut feed = self.feed(caller, place, wake, since_id)?;
        // NotFound when it has no live message; else its first page.
        let (backlog, more) = self.after(&feed.followed, feed.cursor).await?;
        feed.backlog = backlog.into();
        feed.behind = more;
        Ok(feed)
    }

    fn feed(
        self: &Arc<Self>,
        caller: &Caller,
        followed: Place,
        wake: broadcast::Receiver<Arc<Message>>,
        since_id: Option<MessageId>,
    ) -> RelayResult<Feed> {
        Ok(Feed {
            _slot: self.hold_slot(caller)?,
            caller: caller.clone(),
            wake,
            relay: self.clone(),
            followed,
            cursor: cursor(since_id),
            backlog: VecDeque::new(),
            behind: true,
        })
    }

    /// Messages of what a feed follows after `cursor`, and whether more
    /// may be left after them.
    async fn after(
        &self,
        followed: &Place,
        cursor: MessageId,
    ) -> RelayResult<(Vec<Message>, bool)> {
        Ok(match followed {
            Place::Channel(channel) => {
                let page = self.channel_page(channel, cursor, Some(MAX_PAGE)).await?;
                let more = page.messages.len() as u32 == MAX_PAGE;
                (page.messages, more)
            }
            Place::Thread(id) => {
                let messages = self
                    .store
                    .thread(*id, cursor, MAX_PAGE, now_millis())
                    .await?;
                let more = messages.len() as u32 == MAX_PAGE;
                (messages, more)
            }
        })
    }
}

impl Feed {
    /// The next message or update, or `None` when the feed ends: the relay
    /// is shutting down, the caller's token was revoked or replaced, or the
    /// store cannot be read (logged).
    pub async fn next(&mut self) -> Option<Update> {
        loop {
            if !self.relay.is_live(&self.caller) {
                return None;
            }
            if let Some(message) = self.backlog.pop_front() {
                self.cursor = message.id;
                return Some(Update::New(message));
            }
            if self.behind {
                let (messages, more) = match self.relay.after(&self.followed, self.cursor).await {
                    Ok(read) => read,
                    Err(error) => {
                        tracing::error!(
                            error = &error as &dyn std::error::Error,
                            "a stream cannot read what it follows"
                        );
                        return None;
                    }
                };
                self.behind = more;
                self.backlog.extend(messages);
                continue;
            }
            tokio::select! {
                woken = self.wake.recv() => match woken {
                    Ok(message) if message.id > self.cursor => {
                        self.cursor = message.id;
                        return Some(Update::New(Message::clone(&message)));
                    }
                    // Published again: where it stands changed.
                    Ok(message) if message.delivery.is_some() => {
                        return Some(Update::Delivery(Message::clone(&message)));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.behind = true,
                    Err(RecvError::Closed) => return None,
                },
                () = self.relay.shutdown.cancelled() => return None,
                () = self.relay.revoked(&self.caller) => return None,
            }
        }
    }
}
