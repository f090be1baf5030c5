//! What the conversation summaries are, whatever the backend: a thread's
//! people as a JSON object of how many of its messages each sent or
//! received, and what a purge batch takes out of each conversation.
//! Each backend keeps the rows; the arithmetic is here, once.

use super::{StoreError, StoreResult};
use crate::model::{Handle, MessageId, ThreadId};
use std::collections::{BTreeMap, HashMap};

/// A sender and a recipient, each once.
pub(crate) fn distinct<T: PartialEq>(
    [sender, recipient]: [Option<T>; 2],
) -> impl Iterator<Item = T> {
    let recipient = recipient.filter(|r| sender.as_ref() != Some(r));
    sender.into_iter().chain(recipient)
}

/// A new thread's people: its first message's sender and recipient, once
/// each, as stored.
pub(crate) fn first_people(people: [Option<&Handle>; 2]) -> String {
    let people: BTreeMap<&str, i64> = distinct(people).map(|h| (h.as_str(), 1)).collect();
    to_json(&people)
}

pub(crate) fn to_json<K: serde::Serialize + Ord>(people: &BTreeMap<K, i64>) -> String {
    serde_json::to_string(people).expect("a map of strings to numbers serializes")
}

/// A thread's `people`, as stored: each handle with its count.
pub(crate) fn people_of(json: &str) -> StoreResult<BTreeMap<String, i64>> {
    serde_json::from_str(json).map_err(|e| StoreError::backend("a thread's people are not JSON", e))
}

/// A thread's people as handles, in order.
pub(crate) fn handles_of(json: &str) -> StoreResult<Vec<Handle>> {
    people_of(json)?
        .into_keys()
        .map(|handle| Handle::parse(&handle))
        .collect::<Result<_, _>>()
        .map_err(|e| StoreError::backend("a thread's people are not handles", e))
}

/// What the purge needs to know of a message it deleted.
pub(crate) struct Removed {
    pub id: MessageId,
    pub thread_id: Option<ThreadId>,
    pub channel: Option<String>,
    pub sender: String,
    pub recipient: Option<String>,
}

/// How many messages of a channel went, and the newest of them.
pub(crate) struct ChannelLoss {
    pub gone: i64,
    pub newest: MessageId,
}

/// How many messages of a thread went, the newest and oldest of them, and
/// how many each person sent or received.
pub(crate) struct ThreadLoss<'a> {
    pub gone: i64,
    pub newest: MessageId,
    pub oldest: MessageId,
    people: HashMap<&'a str, i64>,
}

impl ThreadLoss<'_> {
    /// The thread's people (as stored) once this loss is taken out: those
    /// left with a message they sent or received.
    pub(crate) fn people_after(&self, stored: &str) -> StoreResult<String> {
        let mut people = people_of(stored)?;
        for (handle, gone) in &self.people {
            if let Some(count) = people.get_mut(*handle) {
                *count -= gone;
            }
        }
        people.retain(|_, count| *count > 0);
        Ok(to_json(&people))
    }
}

/// Per conversation, what the `removed` messages took out of it.
pub(crate) fn losses(
    removed: &[Removed],
) -> (
    HashMap<&str, ChannelLoss>,
    HashMap<ThreadId, ThreadLoss<'_>>,
) {
    let mut channels: HashMap<&str, ChannelLoss> = HashMap::new();
    let mut threads: HashMap<ThreadId, ThreadLoss> = HashMap::new();
    for message in removed {
        if let Some(channel) = &message.channel {
            let loss = channels.entry(channel).or_insert(ChannelLoss {
                gone: 0,
                newest: MessageId(i64::MIN),
            });
            loss.gone += 1;
            loss.newest = loss.newest.max(message.id);
        }
        if let Some(thread_id) = message.thread_id {
            let loss = threads.entry(thread_id).or_insert_with(|| ThreadLoss {
                gone: 0,
                newest: MessageId(i64::MIN),
                oldest: MessageId(i64::MAX),
                people: HashMap::new(),
            });
            loss.gone += 1;
            loss.newest = loss.newest.max(message.id);
            loss.oldest = loss.oldest.min(message.id);
            let people = [Some(message.sender.as_str()), message.recipient.as_deref()];
            for handle in distinct(people) {
                *loss.people.entry(handle).or_default() += 1;
            }
        }
    }
    (channels, threads)
}
