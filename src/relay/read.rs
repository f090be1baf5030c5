//! Reading: threads, channel pages, overviews and the team. The team reads
//! everything; expired messages are never returned.

use super::{MAX_PAGE, Relay, RelayResult, send::parse_channel};
use crate::model::{Channel, ChannelSummary, Handle, Message, Millis, ThreadSummary, now_millis};

/// Messages after a cursor, and the cursor to use next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub messages: Vec<Message>,
    /// The id of the last message returned, or the `since_id` asked for.
    pub last_id: i64,
}

/// A teammate as `list_peers` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub handle: Handle,
    pub name: String,
    pub status: String,
    pub last_seen_at: Option<Millis>,
}

impl Relay {
    /// Every live message of a thread, oldest first.
    pub async fn read_thread(&self, thread_id: i64) -> RelayResult<Vec<Message>> {
        Ok(self.store.thread(thread_id, now_millis()).await?)
    }

    /// Channel messages after `since_id` (default: from the start), oldest
    /// first, at most `limit` (default and most: [`MAX_PAGE`]).
    pub async fn channel_messages(
        &self,
        channel: &str,
        since_id: Option<i64>,
        limit: Option<u32>,
    ) -> RelayResult<Page> {
        let channel = parse_channel(channel)?;
        self.channel_page(&channel, since_id.unwrap_or(0), limit)
            .await
    }

    pub(super) async fn channel_page(
        &self,
        channel: &Channel,
        since_id: i64,
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

    /// Channels with live messages, latest activity first.
    pub async fn channels(&self) -> RelayResult<Vec<ChannelSummary>> {
        Ok(self.store.channels(now_millis()).await?)
    }

    /// The latest threads with live messages, latest activity first.
    pub async fn threads(&self, limit: u32) -> RelayResult<Vec<ThreadSummary>> {
        Ok(self.store.threads(now_millis(), limit).await?)
    }

    /// Everyone on the team: people who are not revoked, and participants
    /// from the environment, with their status and last-seen time.
    pub async fn peers(&self) -> RelayResult<Vec<Peer>> {
        let people = self.store.people().await?;
        let presence = self.store.presence().await?;
        let lookup = |handle: &Handle| presence.iter().find(|p| p.handle == *handle);
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
                    handle,
                    name,
                    last_seen_at,
                }
            })
            .collect())
    }
}
