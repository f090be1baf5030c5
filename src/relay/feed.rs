//! A channel as a feed of messages, for streams: subscribe, read the
//! backlog, then follow commits, resyncing from the store after a lag.
//!
//! The feed subscribes to the channel's wake-ups first, then reads the
//! backlog after the cursor from the store, then yields each message as it
//! is committed. A feed that falls behind the wake-ups re-reads the store;
//! nothing is lost and nothing is yielded twice. Any edge that streams a
//! channel (SSE today) drives one of these.

use super::{Caller, MAX_PAGE, Relay, RelayResult, WaitSlot, send::parse_channel};
use crate::model::{Channel, Message};
use std::{collections::VecDeque, sync::Arc};
use tokio::sync::broadcast::{self, error::RecvError};

/// The state of one stream of a channel.
pub struct ChannelFeed {
    /// Counts this stream against the caller's and the relay's caps.
    _slot: WaitSlot,
    /// Whose stream it is: it ends when their token is revoked or replaced.
    caller: Caller,
    relay: Arc<Relay>,
    channel: Channel,
    /// The id of the last message yielded (or the cursor asked for).
    cursor: i64,
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
        since_id: Option<i64>,
    ) -> RelayResult<ChannelFeed> {
        let channel = parse_channel(channel)?;
        let slot = self.hold_slot(caller)?;
        Ok(ChannelFeed {
            _slot: slot,
            caller: caller.clone(),
            wake: self.channels.subscribe(channel.as_str()),
            relay: self.clone(),
            channel,
            cursor: since_id.unwrap_or(0),
            backlog: VecDeque::new(),
            behind: true,
        })
    }
}

impl ChannelFeed {
    /// The next message, or `None` when the feed ends: the relay is
    /// shutting down, the caller's token was revoked or replaced, or the
    /// store cannot be read (logged).
    pub async fn next(&mut self) -> Option<Message> {
        loop {
            if !self.relay.is_live(&self.caller) {
                return None;
            }
            if let Some(message) = self.backlog.pop_front() {
                self.cursor = message.id;
                return Some(message);
            }
            if self.behind {
                let page = match self
                    .relay
                    .channel_page(&self.channel, self.cursor, Some(MAX_PAGE))
                    .await
                {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::error!(error = &error as &dyn std::error::Error, channel = %self.channel, "a stream cannot read its channel");
                        return None;
                    }
                };
                self.behind = page.messages.len() as u32 == MAX_PAGE;
                self.backlog.extend(page.messages);
                continue;
            }
            tokio::select! {
                woken = self.wake.recv() => match woken {
                    Ok(message) if message.id > self.cursor => {
                        self.cursor = message.id;
                        return Some(Message::clone(&message));
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
