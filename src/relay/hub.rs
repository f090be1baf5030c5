//! Wake-ups: a broadcast topic per inbox, and per place (a channel or a
//! thread).
//!
//! The core publishes a message on its topic after the store has committed
//! it; waiters subscribe *before* they look in the store, so a message
//! committed between the look and the wait still wakes them. No polling.

use crate::model::{Message, Place};
use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex},
};
use tokio::sync::broadcast;

/// Messages a slow subscriber may fall behind by before it must re-read the
/// store (it is told it lagged; nothing is lost, the store has everything).
const TOPIC_CAPACITY: usize = 64;
/// Past this many topics, topics nobody listens to are dropped on subscribe.
const PRUNE_ABOVE: usize = 1024;

/// A set of topics named by `K`, each carrying `T`: the committed message
/// for places, news that something changed for inboxes (by handle).
pub struct Hub<K = Place, T = Arc<Message>> {
    topics: Mutex<HashMap<K, broadcast::Sender<T>>>,
}

impl<K, T> Default for Hub<K, T> {
    fn default() -> Self {
        Hub {
            topics: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, T: Clone> Hub<K, T> {
    pub fn subscribe(&self, topic: &K) -> broadcast::Receiver<T> {
        let mut topics = self.topics.lock().expect("hub lock");
        if topics.len() > PRUNE_ABOVE {
            topics.retain(|_, sender| sender.receiver_count() > 0);
        }
        topics
            .entry(topic.clone())
            .or_insert_with(|| broadcast::channel(TOPIC_CAPACITY).0)
            .subscribe()
    }

    /// Whether anyone listens to `topic` now.
    pub fn has_subscribers(&self, topic: &K) -> bool {
        let topics = self.topics.lock().expect("hub lock");
        topics
            .get(topic)
            .is_some_and(|sender| sender.receiver_count() > 0)
    }

    /// Wakes everyone subscribed to `topic`; a topic nobody listens to is dropped.
    pub fn publish(&self, topic: &K, message: T) {
        let mut topics = self.topics.lock().expect("hub lock");
        if let Some(sender) = topics.get(topic)
            && sender.send(message).is_err()
        {
            topics.remove(topic);
        }
    }
}
