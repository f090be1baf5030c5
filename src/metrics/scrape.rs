//! The families read at each scrape: what the core, the store, the
//! quotas, the MCP edge and the acceptor counted.

use super::{Budget, Connections, Quota, QuotaRefusals, SessionCount};
use crate::relay::{Reading, Relay, Snapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// What the core, the store, the quotas, the MCP edge and the acceptor
/// counted, read at each scrape.
pub(super) struct Core {
    pub(super) relay: Arc<Relay>,
    pub(super) quotas: Arc<QuotaRefusals>,
    pub(super) connections: Arc<Connections>,
    pub(super) sessions: Arc<OnceLock<SessionCount>>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Core")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A histogram the core or the store kept.
fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    reading: &Reading,
) -> Result<(), std::fmt::Error> {
    encoder
        .encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            reading.sum,
            reading.count,
            &reading.buckets,
            None,
        )
}

/// A counter with one label, one sample per value.
fn labelled(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&'static str, u64)],
) -> Result<(), std::fmt::Error> {
    family(encoder, name, help, MetricType::Counter, label, values)
}

/// A family of one label, one sample per value, of counters or gauges.
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    label: &'static str,
    values: &[(&'static str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (value, count) in values {
        let labels = [(label, *value)];
        let sample = family.encode_family(&labels)?;
        match kind {
            MetricType::Gauge => {
                ConstGauge::new(i64::try_from(*count).unwrap_or(i64::MAX)).encode(sample)?
            }
            _ => ConstCounter::new(*count).encode(sample)?,
        }
    }
    Ok(())
}

impl Collector for Core {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // One snapshot for every family, so that they agree.
        let stats = self.relay.stats();
        encode_messages(&mut encoder, &stats)?;
        encode_delivery(&mut encoder, &stats)?;
        self.encode_store(&mut encoder)?;
        self.encode_edge(&mut encoder)
    }
}

impl Core {
    /// The store's group commits, and on PostgreSQL its listener and pool.
    fn encode_store(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (store, pool) = self.relay.store_stats();
        histogram(
            e,
            "store_commit_writes",
            "Writes per group commit of the store",
            &store.batch_writes.read(),
        )?;
        histogram(
            e,
            "store_commit_duration_seconds",
            "How long a group commit took, from its first write to its commit",
            &store.commit_seconds.read(),
        )?;
        counter(
            e,
            "store_commits_failed",
            "Group commits that failed: every write in them was refused",
            store.commits_failed.load(Ordering::Relaxed),
        )?;
        if let Some(pool) = pool {
            counter(
                e,
                "postgres_listener_reconnects",
                "Times the connection that listens for other relays' messages listened again \
                 after it was lost",
                store.listener_reconnects.load(Ordering::Relaxed),
            )?;
            histogram(
                e,
                "postgres_listener_lag_seconds",
                "From a message's sending on another relay to this relay handing it on",
                &store.listener_lag_seconds.read(),
            )?;
            family(
                e,
                "postgres_pool_connections",
                "The pool's open connections, busy and idle",
                MetricType::Gauge,
                "state",
                &[
                    ("busy", pool.open.saturating_sub(pool.idle)),
                    ("idle", pool.idle),
                ],
            )?;
            gauge(
                e,
                "postgres_pool_max_connections",
                "The most connections the pool opens",
                pool.max,
            )?;
            gauge(
                e,
                "postgres_pool_waiting",
                "Queries waiting for a connection of the pool",
                pool.waiting,
            )?;
        }
        Ok(())
    }

    /// What the edge holds and refused: MCP sessions, quotas, connections.
    fn encode_edge(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        gauge(
            e,
            "mcp_sessions_open",
            "MCP sessions this relay holds now",
            self.sessions.get().map_or(0, |open| open()) as u64,
        )?;
        labelled(
            e,
            "rate_limited",
            "Requests refused by a quota: a credential's, an address's without valid \
             credentials, or the client registrations' budget",
            "quota",
            &Quota::ALL.map(|q| {
                (
                    q.as_str(),
                    self.quotas.refused[q as usize].load(Ordering::Relaxed),
                )
            }),
        )?;
        let c = &self.connections;
        gauge(
            e,
            "connections_open",
            "Connections open now",
            c.open.load(Ordering::Relaxed),
        )?;
        labelled(
            e,
            "connections_refused",
            "Connections refused, by the budget that was full",
            "budget",
            &Budget::ALL.map(|b| (b.as_str(), c.refused[b as usize].load(Ordering::Relaxed))),
        )?;
        counter(
            e,
            "connections_evicted",
            "Idle connections nobody vouched for, closed to make room for a new one",
            c.evicted.load(Ordering::Relaxed),
        )?;
        Ok(())
    }
}

/// Messages stored, refused, read and purged.
fn encode_messages(e: &mut DescriptorEncoder<'_>, s: &Snapshot) -> Result<(), std::fmt::Error> {
    labelled(
        e,
        "messages_sent",
        "Messages stored, to a person (direct) or in a channel",
        "to",
        &[("direct", s.sent_direct), ("channel", s.sent_channel)],
    )?;
    let refused: Vec<_> = s.refused.iter().map(|(k, v)| (*k, *v)).collect();
    labelled(
        e,
        "messages_refused",
        "Messages refused, by reason (secret, too_large, quota, bad_input, …)",
        "reason",
        &refused,
    )?;
    let secrets: Vec<_> = s.refused_secrets.iter().map(|(k, v)| (*k, *v)).collect();
    labelled(
        e,
        "messages_refused_secrets",
        "Messages refused as carrying a likely secret, by the kind it looked like",
        "kind",
        &secrets,
    )?;
    counter(
        e,
        "messages_read",
        "Messages to a person their agent confirmed it read (claimed from the inbox, or \
         read after a push)",
        s.read,
    )?;
    counter(
        e,
        "messages_purged",
        "Expired messages the purge deleted",
        s.purged,
    )?;
    histogram(
        e,
        "purge_duration_seconds",
        "How long each purge of expired rows took",
        &s.purge_seconds,
    )?;
    Ok(())
}

/// How messages reached people and their agents: pushes, waits,
/// notices; and approvals and grants.
fn encode_delivery(e: &mut DescriptorEncoder<'_>, s: &Snapshot) -> Result<(), std::fmt::Error> {
    labelled(
        e,
        "pushes",
        "Messages offered to a listening agent's stream: the first offer, or again after \
         a lease ended unconfirmed",
        "offer",
        &[
            ("first", s.pushed - s.pushed_again.min(s.pushed)),
            ("again", s.pushed_again),
        ],
    )?;
    counter(
        e,
        "waits_parked",
        "Waits that found nothing and parked until a wake-up",
        s.waits_parked,
    )?;
    counter(
        e,
        "wait_looks",
        "Looks in the store by waits: as each begins, and at each wake-up that may have \
         brought what it waits for",
        s.wait_looks,
    )?;
    gauge(e, "waits_open", "Waits and streams open now", s.waits_open)?;
    gauge(
        e,
        "listening_streams",
        "Streams open now that take pushes (MCP sessions' and inbox streams)",
        s.listening,
    )?;
    labelled(
        e,
        "notices",
        "Notices for people (webhooks, Web Push) handed to delivery, or dropped with its \
         queue full",
        "outcome",
        &[("queued", s.notices), ("dropped", s.notices_dropped)],
    )?;
    labelled(
        e,
        "approvals",
        "Agents' permission prompts asked of their people, and answered",
        "event",
        &[
            ("asked", s.approvals_asked),
            ("answered", s.approvals_answered),
        ],
    )?;
    labelled(
        e,
        "oauth_grants",
        "OAuth grants made, refreshed, and ended by a refresh token presented twice",
        "event",
        &[
            ("opened", s.grants_opened),
            ("refreshed", s.grants_refreshed),
            ("reused", s.grants_reused),
        ],
    )?;
    Ok(())
}
