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

use crate::relay::Relay;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Everything the exposition shows.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<GroupLabels, Histogram>,
    pub connections: Arc<Connections>,
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
        registry.register_collector(Box::new(Core {
            relay,
            connections: connections.clone(),
        }));
        Metrics {
            registry,
            requests,
            durations,
            connections,
        }
    }

    /// A request to `path` answered with `status` after `seconds`.
    pub fn request(&self, path: &str, status: u16, seconds: f64) {
        let group = group(path);
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

/// What the core and the acceptor counted, read at each scrape.
struct Core {
    relay: Arc<Relay>,
    connections: Arc<Connections>,
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

/// A counter with one label, one sample per value.
fn labelled(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&'static str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Counter,
    )?;
    for (value, count) in values {
        let labels = [(label, *value)];
        ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Core {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.relay.stats();
        let e = &mut encoder;
        labelled(
            e,
            "messages_sent",
            "Messages stored, to a person (direct) or in a channel",
            "to",
            &[("direct", s.sent_direct), ("channel", s.sent_channel)],
        )?;
        let refused: Vec<_> = s.refused.into_iter().collect();
        labelled(
            e,
            "messages_refused",
            "Messages refused, by reason (secret, too_large, quota, bad_input, …)",
            "reason",
            &refused,
        )?;
        let secrets: Vec<_> = s.refused_secrets.into_iter().collect();
        labelled(
            e,
            "messages_refused_secrets",
            "Messages refused as carrying a likely secret, by the kind it looked like",
            "kind",
            &secrets,
        )?;
        counter(
            e,
            "messages_purged",
            "Expired messages the purge deleted",
            s.purged,
        )?;
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
