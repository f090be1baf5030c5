//! Metrics in the Prometheus (OpenMetrics) text format, served on a
//! listener of their own (`RELAY_METRICS_ADDR`, off by default), never on
//! the public one.
//!
//! Requests are counted as they are answered (`layers::edge::outermost`),
//! connections as they are admitted (`server/bounds.rs`); the core's
//! counts are read at each scrape (`Relay::stats`, in `scrape.rs`). Every label value is
//! the relay's own word: a route group, a status code, a reason, a kind
//! of secret from the pattern table, a connection budget. None carries a
//! handle, a token, a channel, a path or anything a person typed.

mod scrape;

use crate::relay::Relay;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use scrape::Core;
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
        _ if path.starts_with("/a2a/") => "a2a",
        _ if path.starts_with("/oauth/") || path.starts_with("/.well-known/") => "oauth",
        _ if path.starts_with("/static/") => "assets",
        _ => "page",
    }
}

/// Connections, as the acceptor counts them.
#[derive(Debug, Default)]
pub struct Connections {
    open: AtomicU64,
    /// By [`Budget`], in its order.
    refused: [AtomicU64; Budget::ALL.len()],
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

// Its `budget` label in the exposition.
names!(Budget {
    PerAddress => "per_address",
    UnvouchedPerAddress => "unvouched_per_address",
    Relay => "relay",
});

impl Connections {
    pub fn opened(&self) {
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn refused(&self, budget: Budget) {
        self.refused[budget as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// An idle connection closed to make room for a new one.
    pub fn evicted(&self) {
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }
}

/// Requests refused by a quota, as the layers count them.
#[derive(Debug, Default)]
pub struct QuotaRefusals {
    /// By [`Quota`], in its order.
    refused: [AtomicU64; Quota::ALL.len()],
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

// Its `quota` label in the exposition.
names!(Quota {
    Credential => "credential",
    Address => "address",
    Registration => "registration",
});

impl QuotaRefusals {
    pub fn refused(&self, quota: Quota) {
        self.refused[quota as usize].fetch_add(1, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use crate::metrics::group;

    #[test]
    fn a_path_is_counted_by_its_group_never_by_itself() {
        for (path, expected) in [
            ("/mcp", "mcp"),
            ("/api/messages", "api"),
            ("/api/threads/7/stream", "api_stream"),
            ("/a2a/bob", "a2a"),
            ("/a2a/bob/.well-known/agent-card.json", "a2a"),
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
