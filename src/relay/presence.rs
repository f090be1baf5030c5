//! Last-seen times, kept in memory and written to the store in batches.
//!
//! Every authenticated request touches its person; writing each touch would
//! put a write on every read. Touches land in a map, and [`Presence::drain`]
//! hands them to the store every [`FLUSH_EVERY`] and at shutdown.

use crate::model::{Handle, Millis};
use std::{collections::HashMap, sync::Mutex, time::Duration};

/// How often gathered last-seen times are written to the store.
pub const FLUSH_EVERY: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Presence {
    /// Last-seen times not yet written to the store, by handle.
    pending: Mutex<HashMap<Handle, Millis>>,
    /// Every last-seen time this process has seen, by handle, so peers see a
    /// fresh time before the next flush.
    recent: Mutex<HashMap<Handle, Millis>>,
    /// Held from a drain until its times are written, so a flush that
    /// returns has seen every earlier drain reach the store (the timer's
    /// flush and one at shutdown or in a test never interleave).
    pub(super) writing: tokio::sync::Mutex<()>,
}

impl Presence {
    pub fn touch(&self, handle: &Handle, now: Millis) {
        for map in [&self.pending, &self.recent] {
            let mut map = map.lock().expect("presence lock");
            match map.get_mut(handle) {
                Some(at) => *at = (*at).max(now),
                None => {
                    map.insert(handle.clone(), now);
                }
            }
        }
    }

    /// The freshest last-seen time this process knows for `handle`.
    pub fn recent(&self, handle: &Handle) -> Option<Millis> {
        self.recent
            .lock()
            .expect("presence lock")
            .get(handle)
            .copied()
    }

    /// Takes the touches gathered since the last drain.
    pub fn drain(&self) -> Vec<(Handle, Millis)> {
        std::mem::take(&mut *self.pending.lock().expect("presence lock"))
            .into_iter()
            .collect()
    }
}
