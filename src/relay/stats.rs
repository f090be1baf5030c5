//! What the core counts, for the metrics (`crate::metrics` reads a
//! [`Snapshot`] at each scrape). Plain atomics: counting costs an
//! increment, and the core names no metrics library.
//!
//! No count is kept by anything a caller chose: by the kind of message
//! (direct or channel), the reason of a refusal, the kind of secret (the
//! pattern table's own names), never by handle, channel, token or text.

use super::RelayError;
use crate::store::Histogram;
pub use crate::store::{PoolState, Reading, StoreStats};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How long a purge takes, in seconds: a few batches to a backlog.
const PURGE_SECONDS: &[f64] = &[0.001, 0.01, 0.1, 1.0, 10.0, 60.0];

#[derive(Debug, Default)]
pub(super) struct Stats {
    purge_seconds: PurgeSeconds,
    read: AtomicU64,
    sent_direct: AtomicU64,
    sent_channel: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
    refused_secrets: Mutex<BTreeMap<&'static str, u64>>,
    purged: AtomicU64,
    pushed: AtomicU64,
    pushed_again: AtomicU64,
    notices: AtomicU64,
    notices_dropped: AtomicU64,
    approvals_asked: AtomicU64,
    approvals_answered: AtomicU64,
    grants_opened: AtomicU64,
    grants_refreshed: AtomicU64,
    grants_reused: AtomicU64,
    wait_looks: AtomicU64,
}

/// What the core counts one at a time.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    ApprovalAsked,
    ApprovalAnswered,
    GrantOpened,
    GrantRefreshed,
    /// A refresh token presented again, which ends its grant.
    GrantReused,
    /// A look in the store by a wait: as it begins, and at each wake.
    WaitLooked,
}

/// How long purges take.
#[derive(Debug)]
struct PurgeSeconds(Histogram);

impl Default for PurgeSeconds {
    fn default() -> PurgeSeconds {
        PurgeSeconds(Histogram::new(PURGE_SECONDS))
    }
}

/// The counts at one moment, and the gauges read with them.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Messages to a person their agent confirmed it read (claimed from
    /// the inbox, or read after a push).
    pub read: u64,
    /// How long purges took.
    pub purge_seconds: Reading,
    /// Messages stored, to a person and in a channel.
    pub sent_direct: u64,
    pub sent_channel: u64,
    /// Messages refused, by reason (`secret`, `too_large`, `quota`, …).
    pub refused: BTreeMap<&'static str, u64>,
    /// Messages refused as carrying a secret, by the kind it looked like.
    pub refused_secrets: BTreeMap<&'static str, u64>,
    /// Expired messages the purge deleted.
    pub purged: u64,
    /// Messages offered to a listening stream, and of those the re-offers.
    pub pushed: u64,
    pub pushed_again: u64,
    /// Waits that found nothing and parked until a wake-up.
    pub waits_parked: u64,
    /// Looks in the store by waits: one as each begins, and one for each
    /// wake-up that may have brought what it waits for.
    pub wait_looks: u64,
    /// Notices handed to delivery (webhooks, Web Push), and those dropped
    /// with the queue full.
    pub notices: u64,
    pub notices_dropped: u64,
    pub approvals_asked: u64,
    pub approvals_answered: u64,
    /// OAuth: grants made, refreshes, and refresh tokens presented twice.
    pub grants_opened: u64,
    pub grants_refreshed: u64,
    pub grants_reused: u64,
    /// Waits and streams open now.
    pub waits_open: u64,
    /// Streams that take pushes (MCP sessions' and inbox streams) now.
    pub listening: u64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Stats {
    pub(super) fn sent(&self, to_a_person: bool) {
        add(match to_a_person {
            true => &self.sent_direct,
            false => &self.sent_channel,
        });
    }

    /// A message refused: by the reason's name; a secret by its kind too.
    pub(super) fn refused(&self, error: &RelayError) {
        *self
            .refused
            .lock()
            .expect("stats lock")
            .entry(error.reason())
            .or_default() += 1;
        if let RelayError::SecretRefused(kind) = error {
            *self
                .refused_secrets
                .lock()
                .expect("stats lock")
                .entry(kind)
                .or_default() += 1;
        }
    }

    /// A purge that deleted `messages` in `took`.
    pub(super) fn purged(&self, messages: u64, took: std::time::Duration) {
        self.purged.fetch_add(messages, Ordering::Relaxed);
        self.purge_seconds.0.observe_duration(took);
    }

    /// Messages their recipient's agent confirmed it read.
    pub(super) fn read(&self, messages: usize) {
        self.read.fetch_add(messages as u64, Ordering::Relaxed);
    }

    pub(super) fn pushed(&self, offers: impl Iterator<Item = u32>) {
        for offer in offers {
            add(&self.pushed);
            if offer > 1 {
                add(&self.pushed_again);
            }
        }
    }

    pub(super) fn notice(&self, delivered: bool) {
        add(match delivered {
            true => &self.notices,
            false => &self.notices_dropped,
        });
    }

    pub(super) fn count(&self, event: Event) {
        add(match event {
            Event::ApprovalAsked => &self.approvals_asked,
            Event::ApprovalAnswered => &self.approvals_answered,
            Event::GrantOpened => &self.grants_opened,
            Event::GrantRefreshed => &self.grants_refreshed,
            Event::GrantReused => &self.grants_reused,
            Event::WaitLooked => &self.wait_looks,
        });
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            sent_direct: read(&self.sent_direct),
            sent_channel: read(&self.sent_channel),
            refused: self.refused.lock().expect("stats lock").clone(),
            refused_secrets: self.refused_secrets.lock().expect("stats lock").clone(),
            purged: read(&self.purged),
            pushed: read(&self.pushed),
            pushed_again: read(&self.pushed_again),
            notices: read(&self.notices),
            notices_dropped: read(&self.notices_dropped),
            approvals_asked: read(&self.approvals_asked),
            approvals_answered: read(&self.approvals_answered),
            grants_opened: read(&self.grants_opened),
            grants_refreshed: read(&self.grants_refreshed),
            grants_reused: read(&self.grants_reused),
            wait_looks: read(&self.wait_looks),
            read: read(&self.read),
            purge_seconds: self.purge_seconds.0.read(),
            ..Snapshot::default()
        }
    }
}
