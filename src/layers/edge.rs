//! The outermost layer ([`outermost`]: the access log, the JSON shape of
//! plain errors, the security headers), and the request timeouts.

use crate::wire::ApiError;
use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::time::{Duration, Instant};

/// The team page's policy, sent on every response: nothing but this origin's
/// own scripts, styles, images and connections; no framing, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; connect-src 'self'; img-src 'self'; manifest-src 'self'; \
worker-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the outermost layer needs: where requests are counted, and whether
/// responses carry `Strict-Transport-Security` (only under TLS, as it binds
/// every port of the host).
#[derive(Clone)]
pub struct Edge {
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    pub hsts: bool,
}

/// The outermost layer, in front of every route; one layer, not three, as
/// each layer boxes and moves the request's future once more. From the
/// inside out:
/// - an error that a library answered in plain text (axum's 405, a body
///   too large) gets the JSON error shape ([`json_errors`]);
/// - the security headers go on every response ([`security_headers`]);
/// - each request is logged: method, path (never the query, which may
///   carry a token), status and the time to the response's head; failures
///   at info and above, the rest at debug. It is counted for the metrics
///   once its body has ended (or its client left): a stream or a wait is
///   timed whole.
pub async fn outermost(State(edge): State<Edge>, request: Request, next: Next) -> Response {
    let Edge { metrics, hsts } = edge;
    let method = request.method().clone();
    // A clone of the URI shares its bytes: no allocation per request.
    let uri = request.uri().clone();
    let started = Instant::now();
    // Counted when dropped: with the response's status once its body has
    // been sent, or as 499 if the client leaves before the response
    // (a long-poll given up).
    let mut counted = Counted {
        metrics,
        group: crate::metrics::group(uri.path()),
        status: CLIENT_LEFT,
        started,
    };
    let mut response = json_errors(next.run(request).await).await;
    security_headers(response.headers_mut(), hsts);
    let status = response.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let path = uri.path();
    counted.status = status;
    let response = response.map(|body| {
        Body::new(Timed {
            body,
            _counted: counted,
        })
    });
    let in_band = response
        .extensions()
        .get::<crate::wire::AnsweredInBand>()
        .is_some();
    if status >= 500 {
        tracing::error!(%method, %path, status, ms, "request");
    } else if status >= 400 && !in_band {
        tracing::info!(%method, %path, status, ms, "request");
    } else {
        tracing::debug!(%method, %path, status, ms, "request");
    }
    response
}

/// The status a request is counted with when its client left before the
/// response (nginx's word for it; never sent).
const CLIENT_LEFT: u16 = 499;

/// A response body that counts its request for the metrics when it is
/// dropped: once it has been sent whole, or its client has gone.
struct Timed {
    body: Body,
    /// Held only to be dropped with the body.
    _counted: Counted,
}

struct Counted {
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    group: &'static str,
    status: u16,
    started: Instant,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        self.metrics.request(self.group, self.status, seconds);
    }
}

impl http_body::Body for Timed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The security headers every response carries.
fn security_headers(headers: &mut axum::http::HeaderMap, hsts: bool) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser
    // sends `Origin: null` with a plain form's POST (a navigation), and
    // the origin check refuses it; no other site is ever sent a referrer.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    // A page that needs its own (the OAuth consent page: its form leads
    // to the client's redirect origin, and a connector's window opens it)
    // sets it; every other response gets these.
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry("cross-origin-opener-policy")
        .or_insert(HeaderValue::from_static("same-origin"));
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
}

/// How long a request that is not a wait or a stream may take to answer
/// (`RELAY_REQUEST_TIMEOUT_SECS`), and the most bytes of body it may send.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub timeout: Duration,
    pub body_limit: usize,
}

/// Answers 503 when a handler takes longer than the deadline. Not on waits
/// and streams, which have their own bounds.
pub async fn request_timeout(
    State(deadline): State<Deadline>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(deadline.timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the relay took too long to answer; try again",
        )
        .into_response(),
    }
}

/// Reads a request's whole body within the deadline (and at most its
/// limit) before the handler sees it: for `/mcp`, whose handler may wait up
/// to 50 s and so has no request timeout, but whose body must arrive as
/// promptly as anywhere else. A body sent as JSON that is not JSON is
/// refused here with 400 and the parser's words (rmcp would answer 415, as
/// if the media type were wrong); no body at all is not a body, whatever
/// the request says its type is (the Python SDK 2.3 says JSON on the GET
/// of a session's stream and on its DELETE).
pub async fn read_body_in_time(
    State(deadline): State<Deadline>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, deadline.body_limit);
    match tokio::time::timeout(deadline.timeout, read).await {
        Ok(Ok(bytes)) => {
            let says_json = parts
                .headers
                .get(header::CONTENT_TYPE)
                .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
            if says_json
                && !bytes.is_empty()
                && let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
            {
                return ApiError::bad_request(format!("the body is not valid JSON: {error}"))
                    .into_response();
            }
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the request body is larger than this relay accepts",
        )
        .into_response(),
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request body did not arrive in time; send it again",
        )
        .into_response(),
    }
}

/// Gives an error that a library answered in plain text (a wrong method,
/// malformed JSON, a body too large) the API's JSON shape, with its status
/// and its words. (`/mcp`'s own, rmcp's, are shaped in `mcp`'s words
/// before they reach this.)
async fn json_errors(response: Response) -> Response {
    if !ApiError::is_plain_refusal(&response) {
        return response;
    }
    let (parts, said) = ApiError::plain_words(response).await;
    let status = parts.status;
    let (code, default) = match status {
        StatusCode::BAD_REQUEST => ("bad_request", "the request is malformed"),
        StatusCode::NOT_FOUND => ("not_found", "there is nothing at this address"),
        StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "this method is not allowed here"),
        StatusCode::NOT_ACCEPTABLE => (
            "not_acceptable",
            "the relay cannot answer in a type this request accepts",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "send Content-Type: application/json",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ("too_large", "the request body is too large"),
        s if s.is_server_error() => ("internal", "the relay failed; the details are in its log"),
        _ => ("refused", "the request was refused"),
    };
    let message = match (status, said.is_empty()) {
        (StatusCode::NOT_FOUND, _) | (_, true) => default.to_owned(),
        (s, false) if s.is_server_error() => default.to_owned(),
        (_, false) => said,
    };
    ApiError::new(status, code, message).replacing(&parts)
}
