//! The state every edge shares: one [`AppState`], cloned into each.

use crate::config::Config;
use crate::layers::limits::RateLimits;
use crate::metrics::Metrics;
use crate::relay::Relay;
use std::sync::Arc;

/// Cloned into every edge and layer that needs more than its own state.
#[derive(Clone)]
pub struct AppState {
    /// The core: every edge calls it, and only it, to do anything.
    pub relay: Arc<Relay>,
    /// Rate limits per credential and per client address; pruned by the
    /// server on a timer.
    pub limits: Arc<RateLimits>,
    /// The checked configuration: the edges read the body limit and the
    /// public URL from it, the layers their policies.
    pub config: Arc<Config>,
    /// What the metrics listener shows; the access log counts requests
    /// into it.
    pub metrics: Arc<Metrics>,
}
