//! Host and Origin checks: which names and which browser pages may talk to
//! the relay.
//!
//! - **Host**: when the configuration names the relay (`RELAY_PUBLIC_URL`,
//!   `RELAY_DOMAINS`), a request for any other host is refused, so a
//!   hostile page cannot reach the relay through a DNS name it controls
//!   (DNS rebinding). Loopback names always pass: rebinding cannot forge
//!   them. The metrics listener has a policy of its own
//!   ([`HostPolicy::metrics`]): the address it is bound to.
//! - **Origin**: a browser names the page a request comes from. A present
//!   `Origin` must be the relay's own (same scheme, host and port as the
//!   request) or listed in `RELAY_ALLOWED_ORIGINS`; otherwise 403, even with
//!   a good token. Agents send no `Origin` and pass.

use crate::config::Config;
use crate::host::{self, Origin};
use crate::wire::ApiError;
use axum::{
    extract::{Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

/// What the checks compare requests against, from the configuration.
pub struct HostPolicy {
    /// Host names requests may name; `None` accepts any.
    allowed_hosts: Option<Vec<String>>,
    /// Whether any IP address, as a literal, may be named besides them (a
    /// name could be rebound to the relay, an address cannot).
    any_address: bool,
    /// Browser origins allowed besides the relay's own.
    allowed_origins: Vec<Origin>,
    /// Named in refusals, so a person knows which address to use.
    public_url: String,
    /// The page's origin as published (`RELAY_PUBLIC_URL`'s).
    page_origin: Option<Origin>,
    /// Whether the relay's own pages are `https://`.
    tls: bool,
}

impl HostPolicy {
    pub fn new(config: &Config) -> Arc<HostPolicy> {
        Arc::new(HostPolicy {
            allowed_hosts: config.allowed_hosts.clone(),
            any_address: false,
            allowed_origins: config.allowed_origins.clone(),
            public_url: config.public_url.clone(),
            page_origin: config.page_origin.clone(),
            tls: config.tls.is_on(),
        })
    }

    /// The metrics listener's, bound to `bound`: it answers for its own
    /// address, and on loopback for the loopback names; bound to every
    /// interface, for any address and the relay's own names. Its pages
    /// are no browser's, so no origin is allowed but its own.
    pub fn metrics(bound: SocketAddr, config: &Config) -> Arc<HostPolicy> {
        let ip = bound.ip();
        let mut hosts = vec![ip.to_string()];
        if ip.is_loopback() || ip.is_unspecified() {
            hosts.extend(host::LOOPBACK_HOSTS.map(String::from));
        }
        if !ip.is_loopback() {
            hosts.extend(config.allowed_hosts.iter().flatten().cloned());
        }
        Arc::new(HostPolicy {
            allowed_hosts: Some(hosts),
            any_address: ip.is_unspecified(),
            allowed_origins: Vec::new(),
            public_url: format!("http://{bound}"),
            page_origin: None,
            tls: false,
        })
    }

    /// Whether a request may name `host`.
    fn admits(&self, host: &str) -> bool {
        match &self.allowed_hosts {
            None => true,
            Some(allowed) => {
                allowed.iter().any(|a| a == host)
                    || (self.any_address && host.parse::<IpAddr>().is_ok())
            }
        }
    }
}

/// The authority a request names: the HTTP/2 `:authority` or the HTTP/1.1
/// `Host` header.
fn request_authority(request: &Request) -> Option<&str> {
    request
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| request.headers().get(header::HOST)?.to_str().ok())
}

/// The Host check alone (the metrics listener's).
pub async fn check_host(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match refuse_host(&policy, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// Both checks, the host first, in one layer (each layer boxes and moves
/// the request's future once more).
pub async fn check_host_and_origin(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match refuse_host(&policy, &request).or_else(|| refuse_origin(&policy, &request)) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The refusal of a request that names a host the policy does not admit,
/// or names it malformed.
fn refuse_host(policy: &HostPolicy, request: &Request) -> Option<Response> {
    // One name, well formed: a second Host header, or a port that is not
    // a number, could make two readers of the request disagree.
    if request
        .headers()
        .get_all(header::HOST)
        .iter()
        .nth(1)
        .is_some()
    {
        return Some(ApiError::bad_request("a request has one Host header").into_response());
    }
    let named = request_authority(request);
    if named.is_some_and(|raw| host::authority(raw).is_none()) {
        return Some(
            ApiError::bad_request("the Host header is not a host name and a port").into_response(),
        );
    }
    if policy.allowed_hosts.is_some() {
        let host = named.and_then(host::authority).map(|a| a.host);
        if !host.as_ref().is_some_and(|h| policy.admits(h)) {
            return Some(
                ApiError::forbidden(format!(
                    "this relay does not answer for {:?}; use {}",
                    host.unwrap_or_default(),
                    policy.public_url
                ))
                .into_response(),
            );
        }
    }
    None
}

/// The refusal of a request from a browser page whose origin is neither
/// the relay's own nor allowed; agents send no `Origin` and pass.
fn refuse_origin(policy: &HostPolicy, request: &Request) -> Option<Response> {
    let origin = request.headers().get(header::ORIGIN)?;
    let origin = origin.to_str().unwrap_or("");
    let authority = request_authority(request);
    let allowed = Origin::parse(origin).is_some_and(|presented| {
        presented.is_own(policy.tls, authority, policy.page_origin.as_ref())
            || policy.allowed_origins.contains(&presented)
    });
    (!allowed).then(|| {
        ApiError::forbidden(format!(
            "requests from the page at {origin:?} are not allowed; an operator can add its origin \
             to RELAY_ALLOWED_ORIGINS"
        ))
        .into_response()
    })
}
