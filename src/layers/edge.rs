//! The outermost layers: the access log, response headers, and the request
//! timeout.

use crate::wire::ApiError;
use axum::{
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::time::{Duration, Instant};

/// How long a request that is not a wait or a stream may take to answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The team page's policy, sent on every response: nothing but this origin's
/// own scripts, styles, images and connections; no framing, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; \
frame-ancestors 'none'; base-uri 'none'";

/// Logs each request: method, path (never the query, which may carry a
/// token), status and duration. Failures at info and above, the rest at debug.
pub async fn access_log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::error!(%method, %path, status, ms, "request");
    } else if status >= 400 {
        tracing::info!(%method, %path, status, ms, "request");
    } else {
        tracing::debug!(%method, %path, status, ms, "request");
    }
    response
}

/// Whether responses carry `Strict-Transport-Security`: only under TLS, as
/// it binds every port of the host.
#[derive(Debug, Clone, Copy)]
pub struct Hsts(pub bool);

/// Security headers on every response.
pub async fn security_headers(
    State(Hsts(hsts)): State<Hsts>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// Answers 503 when a handler takes longer than [`REQUEST_TIMEOUT`]. Not
/// on waits and streams, which have their own bounds.
pub async fn request_timeout(request: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the relay took too long to answer; try again",
        )
        .into_response(),
    }
}
