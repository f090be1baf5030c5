//! Metrics in the Prometheus (OpenMetrics) text format, served on a
//! listener of their own (`RELAY_METRICS_ADDR`, off by default), never on
//! the public one.
//!
//! Requests are counted as they are answered (`layers::edge::access_log`),
//! connections as they are admitted (`server/bounds.rs`); the core's
//! counts are read at each scrape (`Relay::stats`). Every label value is
//! the relay's own word: a route group, a status code, a reason, a kind
//! of secret from the pattern table, a connection budget. None carries a
//! handle, a token, a channel, a path or anything a person typed.

use crate::relay::{Reading, Relay, Snapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    group: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: &'static str,
}

/// Where a request went, as a route group: never the path itself.
pub fn group(path: &str) -> &'static str {
    match path {
        "/mcp" => "mcp",
        "/healthz" | "/readyz" => "health",
        "/favicon.ico" | "/sw.js" | "/manifest.webmanifest" => "assets",
        _ if path.starts_with("/mcp/") => "mcp",
        _ if path.starts_with("/api/") && path.ends_with("/stream") => "api_stream",
        _ if path.starts_with("/api/") => "api",
        _ if path.starts_with("/oauth/") || path.starts_with("/.well-known/") => "oauth",
        _ if path.starts_with("/static/") => "assets",
        _ => "page",
    }
}

/// Connections, as the acceptor counts them.
#[derive(Debug, Default)]
pub struct Connections {
    open: AtomicU64,
    refused_per_address: AtomicU64,
    refused_unvouched_per_address: AtomicU64,
    refused_relay_full: AtomicU64,
    evicted: AtomicU64,
}

/// Which budget refused a connection.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// The client address's share.
    PerAddress,
    /// The address's share of connections nobody vouched for.
    UnvouchedPerAddress,
    /// The relay's, in total or of connections nobody vouched for.
    Relay,
}

impl Connections {
    pub fn opened(&self) {
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn refused(&self, budget: Budget) {
        let counter = match budget {
            Budget::PerAddress => &self.refused_per_address,
            Budget::UnvouchedPerAddress => &self.refused_unvouched_per_address,
            Budget::Relay => &self.refused_relay_full,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// An idle connection closed to make room for a new one.
    pub fn evicted(&self) {
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }
}

/// Requests refused by a quota, as the layers count them.
#[derive(Debug, Default)]
pub struct QuotaRefusals {
    credential: AtomicU64,
    address: AtomicU64,
    registration: AtomicU64,
}

/// Which quota refused a request.
#[derive(Debug, Clone, Copy)]
pub enum Quota {
    /// A credential's (a person, a participant, the shared token).
    Credential,
    /// An address's, for requests without valid credentials.
    Address,
    /// An address's budget of OAuth client registrations.
    Registration,
}

impl QuotaRefusals {
    pub fn refused(&self, quota: Quota) {
        let counter = match quota {
            Quota::Credential => &self.credential,
            Quota::Address => &self.address,
            Quota::Registration => &self.registration,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything the exposition shows.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<GroupLabels, Histogram>,
    pub connections: Arc<Connections>,
    /// Where the rate limits count what they refuse.
    pub quotas: Arc<QuotaRefusals>,
    sessions: Arc<OnceLock<SessionCount>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Request durations' buckets, in seconds: from a cached read to a wait
/// held its 50 s.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0,
];

/// Counts the MCP sessions open, as the MCP edge holds them.
type SessionCount = Box<dyn Fn() -> usize + Send + Sync>;

impl Metrics {
    pub fn new(relay: Arc<Relay>) -> Metrics {
        let mut registry = Registry::with_prefix("crosstalk");
        let requests = Family::<RequestLabels, Counter>::default();
        let durations = Family::<GroupLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "http_requests",
            "Requests answered, by route group and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "How long requests took to answer (waits and streams included), by route group",
            durations.clone(),
        );
        let connections = Arc::new(Connections::default());
        let quotas = Arc::new(QuotaRefusals::default());
        let sessions = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(Core {
            relay,
            quotas: quotas.clone(),
            connections: connections.clone(),
            sessions: sessions.clone(),
        }));
        Metrics {
            registry,
            requests,
            durations,
            connections,
            quotas,
            sessions,
        }
    }

    /// Where the MCP sessions open are counted: the server says, once, as
    /// it makes the MCP edge.
    pub fn count_sessions(&self, open: impl Fn() -> usize + Send + Sync + 'static) {
        let _ = self.sessions.set(Box::new(open));
    }

    /// A request to the route group `group` answered with `status`, its
    /// body ended after `seconds`.
    pub fn request(&self, group: &'static str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels { group, status })
            .inc();
        self.durations
            .get_or_create(&GroupLabels { group })
            .observe(seconds);
    }

    /// The exposition, as a scrape reads it.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What the core, the store, the quotas, the MCP edge and the acceptor
/// counted, read at each scrape.
struct Core {
    relay: Arc<Relay>,
    quotas: Arc<QuotaRefusals>,
    connections: Arc<Connections>,
    sessions: Arc<OnceLock<SessionCount>>,
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
            &[
                ("credential", self.quotas.credential.load(Ordering::Relaxed)),
                ("address", self.quotas.address.load(Ordering::Relaxed)),
                (
                    "registration",
                    self.quotas.registration.load(Ordering::Relaxed),
                ),
            ],
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
            &[
                ("per_address", c.refused_per_address.load(Ordering::Relaxed)),
                (
                    "unvouched_per_address",
                    c.refused_unvouched_per_address.load(Ordering::Relaxed),
                ),
                ("relay", c.refused_relay_full.load(Ordering::Relaxed)),
            ],
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

#[cfg(test)]
mod tests {
    use crate::metrics::group;

    #[test]
    fn a_path_is_counted_by_its_group_never_by_itself() {
        for (path, expected) in [
            ("/mcp", "mcp"),
            ("/api/messages", "api"),
            ("/api/threads/7/stream", "api_stream"),
            ("/oauth/token", "oauth"),
            ("/.well-known/oauth-authorization-server", "oauth"),
            ("/static/app.1234.css", "assets"),
            ("/channels/secret-project", "page"),
            ("/healthz", "health"),
        ] {
            assert_eq!(group(path), expected, "{path}");
        }
    }
}
