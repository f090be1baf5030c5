//! What the store counts, for the metrics (`crate::metrics` reads it at
//! each scrape): its group commits' sizes and times, and on PostgreSQL the
//! listener's reconnects and lag and the pool. Plain atomics and fixed
//! buckets: counting costs a few increments, and the store names no
//! metrics library.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A distribution over fixed upper bounds, as Prometheus histograms are.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count a bound, and one past the last.
    counts: Box<[AtomicU64]>,
    /// The sum of the values observed, in millionths.
    sum_millionths: AtomicU64,
}

/// A histogram as read: its sum, its count, and each bound with the count
/// of values at or under it and above the bound before (not cumulative);
/// the last bound, `f64::MAX`, stands for +Inf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_millionths: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: f64) {
        let bucket = self
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let millionths = (value.max(0.0) * 1e6) as u64;
        self.sum_millionths.fetch_add(millionths, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, duration: Duration) {
        self.observe(duration.as_secs_f64());
    }

    pub fn read(&self) -> Reading {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .zip(counts.iter().copied())
            .collect();
        buckets.push((f64::MAX, counts[self.bounds.len()]));
        Reading {
            sum: self.sum_millionths.load(Ordering::Relaxed) as f64 / 1e6,
            count: counts.iter().sum(),
            buckets,
        }
    }
}

/// Group commit sizes: from a lone write to the most a batch takes.
const BATCH_SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
/// Seconds, from a commit in the page cache to one behind a slow disk or
/// a network.
const COMMIT_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Seconds from a message's sending to another relay handing it on: a
/// wake-up across relays, to the catch-up after a lost connection.
const LAG_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 600.0,
];

/// The store's counts.
#[derive(Debug)]
pub struct StoreStats {
    /// Writes per group commit.
    pub batch_writes: Histogram,
    /// How long a group commit took, from its first write to its commit.
    pub commit_seconds: Histogram,
    /// Commits that failed (every write in them was refused).
    pub commits_failed: AtomicU64,
    /// PostgreSQL: how often the connection that listens for other relays'
    /// messages listened again after it was lost (not the failed attempts
    /// in between).
    pub listener_reconnects: AtomicU64,
    /// PostgreSQL: from a message's sending on another relay (its
    /// `created_at`, taken before its commit) to this one handing it on;
    /// the relays' clocks count too, and so does a catch-up after a lost
    /// connection.
    pub listener_lag_seconds: Histogram,
}

impl Default for StoreStats {
    fn default() -> StoreStats {
        StoreStats {
            batch_writes: Histogram::new(BATCH_SIZES),
            commit_seconds: Histogram::new(COMMIT_SECONDS),
            commits_failed: AtomicU64::new(0),
            listener_reconnects: AtomicU64::new(0),
            listener_lag_seconds: Histogram::new(LAG_SECONDS),
        }
    }
}

impl StoreStats {
    /// A group commit of `writes` that took `took`, and whether it held.
    pub fn committed(&self, writes: usize, took: Duration, held: bool) {
        self.batch_writes.observe(writes as f64);
        self.commit_seconds.observe_duration(took);
        if !held {
            self.commits_failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A connection pool's state (PostgreSQL's; SQLite has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolState {
    /// Connections open, and the most it opens.
    pub open: u64,
    pub max: u64,
    /// Of those open, the ones idle now.
    pub idle: u64,
    /// Queries waiting for a connection.
    pub waiting: u64,
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn a_histogram_counts_each_value_under_its_first_bound() {
        static BOUNDS: &[f64] = &[1.0, 10.0];
        let histogram = Histogram::new(BOUNDS);
        for value in [0.5, 1.0, 3.0, 10.0, 11.0, 1e9] {
            histogram.observe(value);
        }
        let reading = histogram.read();
        assert_eq!(reading.count, 6);
        assert_eq!(reading.buckets, vec![(1.0, 2), (10.0, 2), (f64::MAX, 2)]);
        assert!((reading.sum - (0.5 + 1.0 + 3.0 + 10.0 + 11.0 + 1e9)).abs() < 1e-3);
    }
}
