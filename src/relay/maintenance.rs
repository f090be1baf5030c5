//! Work the relay does on its own: deleting expired rows and writing
//! last-seen times, at start, on a timer and at shutdown.

use super::{Relay, RelayResult, presence::FLUSH_EVERY};
use crate::model::{Millis, now_millis};
use std::{sync::Arc, time::Duration};

/// How often expired rows are deleted (they are invisible from the moment
/// they expire; this reclaims the space, and keeps the overviews' counts
/// within a minute of the truth). Each purge goes in small batches.
pub const PURGE_EVERY: Duration = Duration::from_secs(60);
/// How often the database is tidied (statistics, checkpoint).
pub const TIDY_EVERY: Duration = Duration::from_secs(86_400);

impl Relay {
    /// Writes gathered last-seen times to the store.
    pub async fn flush_presence(&self) -> RelayResult<()> {
        let _writing = self.presence.writing.lock().await;
        let seen = self.presence.drain();
        if !seen.is_empty() {
            self.store.record_seen(seen).await?;
        }
        Ok(())
    }

    /// Deletes expired messages, and presence rows of handles that are
    /// nobody's and were quiet for as long as messages live; returns how
    /// many messages.
    pub async fn purge_expired(&self) -> RelayResult<u64> {
        let now = now_millis();
        let quiet_since = now.saturating_sub(self.settings.retention.as_millis() as Millis);
        let started = std::time::Instant::now();
        let purged = self.store.purge_expired(now, quiet_since).await?;
        self.stats.purged(purged, started.elapsed());
        Ok(purged)
    }

    /// Purges at start and every `PURGE_EVERY`, flushes presence every
    /// `FLUSH_EVERY`, until shutdown; then flushes one last time.
    pub async fn run_maintenance(self: Arc<Self>) {
        let mut purge = tokio::time::interval(PURGE_EVERY);
        let mut flush = tokio::time::interval(FLUSH_EVERY);
        let mut tidy =
            tokio::time::interval_at(tokio::time::Instant::now() + TIDY_EVERY, TIDY_EVERY);
        loop {
            tokio::select! {
                _ = purge.tick() => {
                    match self.purge_expired().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(deleted = n, "purged expired messages"),
                        Err(error) => tracing::error!(error = &error as &dyn std::error::Error, "purge failed"),
                    }
                    if let Err(error) = self.forget_old_approvals().await {
                        tracing::error!(error = &error as &dyn std::error::Error, "forgetting old approvals failed");
                    }
                    if let Err(error) = self.store.forget_claims(now_millis()).await {
                        tracing::error!(error = &error as &dyn std::error::Error, "forgetting ended claims failed");
                    }
                    if let Err(error) = self.forget_oauth().await {
                        tracing::error!(error = &error as &dyn std::error::Error, "forgetting expired OAuth codes and tokens failed");
                    }
                }
                _ = flush.tick() => {
                    if let Err(error) = self.flush_presence().await {
                        tracing::error!(error = &error as &dyn std::error::Error, "writing last-seen times failed");
                    }
                }
                _ = tidy.tick() => {
                    if let Err(error) = self.store.tidy().await {
                        tracing::error!(error = &error as &dyn std::error::Error, "tidying the database failed");
                    }
                }
                () = self.shutdown.cancelled() => break,
            }
        }
        if let Err(error) = self.flush_presence().await {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "writing last-seen times at shutdown failed"
            );
        }
        // Other relays on the store may take up this one's sessions now.
        if let Err(error) = self.store.leave().await {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "telling the database this relay stops failed"
            );
        }
        match self.store.tidy().await {
            Ok(()) => tracing::info!("the database is checkpointed"),
            Err(error) => tracing::error!(
                error = &error as &dyn std::error::Error,
                "closing the database failed"
            ),
        }
    }
}
