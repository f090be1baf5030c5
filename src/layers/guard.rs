//! Host and Origin checks: which names and which browser pages may talk to
//! the relay.
//!
//! - **Host**: when the configuration names the relay (`RELAY_PUBLIC_URL`,
//!   `RELAY_DOMAINS`), a request for any other host is refused, so a
//!   hostile page cannot reach the relay through a DNS name it controls
//!   (DNS rebinding). Loopback names always pass: rebinding cannot forge
//!   them.
//! - **Origin**: a browser names the page a request comes from. A present
//!   `Origin` must be the relay's own (same scheme, host and port as the
//!   request) or listed in `RELAY_ALLOWED_ORIGINS`; otherwise 403, even with
//!   a good token. Agents send no `Origin` and pass.

use crate::api::ApiError;
use crate::app::AppState;
use axum::{
    extract::{Request, State},
    http::{HeaderMap, Uri, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// The host a request names, lowercase, without port: the HTTP/2
/// `:authority` or the HTTP/1.1 `Host` header.
fn request_authority(uri: &Uri, headers: &HeaderMap) -> Option<String> {
    uri.authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| headers.get(header::HOST)?.to_str().ok().map(str::to_owned))
}

/// Splits `host[:port]` (or `[v6]:port`) into a lowercase host and a port.
fn split_authority(authority: &str) -> (String, Option<u16>) {
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
        return (host.to_ascii_lowercase(), port);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => {
            (host.to_ascii_lowercase(), port.parse().ok())
        }
        _ => (authority.to_ascii_lowercase(), None),
    }
}

/// `scheme://host:port` with the scheme's default port made explicit.
fn normalize_origin(origin: &str) -> Option<(String, String, u16)> {
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let (host, port) = split_authority(rest.trim_end_matches('/'));
    Some((scheme, host, port.unwrap_or(default_port)))
}

pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(allowed) = &state.config.allowed_hosts {
        let named = request_authority(request.uri(), request.headers());
        let host = named.as_deref().map(|a| split_authority(a).0);
        if !host.as_ref().is_some_and(|h| allowed.contains(h)) {
            return ApiError::forbidden(format!(
                "this relay does not answer for {:?}; use {}",
                host.unwrap_or_default(),
                state.config.public_url
            ))
            .into_response();
        }
    }
    next.run(request).await
}

pub async fn check_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(origin) = request.headers().get(header::ORIGIN) else {
        return next.run(request).await;
    };
    let origin = origin.to_str().unwrap_or("");
    let scheme = if state.config.tls.is_on() {
        "https"
    } else {
        "http"
    };
    let own = request_authority(request.uri(), request.headers())
        .and_then(|authority| normalize_origin(&format!("{scheme}://{authority}")));
    let presented = normalize_origin(origin);
    let allowed = presented.is_some()
        && (presented == own
            || state
                .config
                .allowed_origins
                .iter()
                .any(|o| normalize_origin(o) == presented));
    if allowed {
        next.run(request).await
    } else {
        ApiError::forbidden(format!(
            "requests from the page at {origin:?} are not allowed; an operator can add its origin \
             to RELAY_ALLOWED_ORIGINS"
        ))
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_with_default_ports() {
        assert_eq!(
            normalize_origin("https://Relay.Example.com"),
            normalize_origin("https://relay.example.com:443")
        );
        assert_ne!(
            normalize_origin("http://relay.example.com"),
            normalize_origin("https://relay.example.com")
        );
        assert_eq!(
            normalize_origin("http://[::1]:8787"),
            Some(("http".into(), "::1".into(), 8787))
        );
        assert_eq!(normalize_origin("null"), None);
        assert_eq!(normalize_origin("file://x"), None);
    }
}
