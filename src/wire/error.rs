//! `ApiError`: how a failure looks on the wire, on every edge.
//!
//! The error policy, in one place:
//! - the store fails with `StoreError`, the core with [`RelayError`] (which
//!   keeps a store failure as its source), a layer with its own small type
//!   (a rate limit's "retry after N s", a refused credential);
//! - every edge and layer turns those into an `ApiError`, which becomes
//!   `{"error":{"code":…,"message":…}}` with the matching HTTP status on
//!   REST and the page's API, and the same JSON in a tool error on MCP;
//! - an internal failure is logged here, with its whole chain of causes, and
//!   answered with no detail;
//! - `anyhow` appears only in the commands (`cli`, `demo`, `commands`, `server`).

use crate::relay::RelayError;
use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable, machine-readable name for the failure.
    pub code: &'static str,
    /// A sentence for a person (or a model) saying what to change.
    pub message: String,
    /// Seconds to wait before trying again (429 and 503), sent as `Retry-After`.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// A 429: too many requests; `retry_after` is rounded up to whole seconds,
    /// at least one.
    pub fn rate_limited(message: impl Into<String>, retry_after: std::time::Duration) -> ApiError {
        let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        ApiError {
            retry_after: Some(seconds.max(1)),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
        }
    }

    /// A 500 for a failure of the relay itself: the failure and its causes
    /// go to the log, and nothing of them to the client.
    pub fn internal(failure: &(dyn std::error::Error + 'static)) -> ApiError {
        tracing::error!(error = failure, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the relay failed; the details are in its log",
        )
    }

    /// The error body, the same on every edge.
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }

    /// Whether `response` is a refusal a library answered in plain text
    /// (or with no body type), which the API's shape should replace.
    pub fn is_plain_refusal(response: &Response) -> bool {
        let status = response.status();
        let typed = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
        (status.is_client_error() || status.is_server_error()) && !typed
    }

    /// A plain refusal taken apart: its head, and what its body said
    /// (trimmed, at most 4 KiB read), for [`ApiError::replacing`].
    pub async fn plain_words(response: Response) -> (axum::http::response::Parts, String) {
        let (parts, body) = response.into_parts();
        let said = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
        (parts, String::from_utf8_lossy(&said).trim().to_owned())
    }

    /// This error in place of `replaced`, keeping its headers (an `Allow`,
    /// a `WWW-Authenticate`) but not its body's type and length.
    pub fn replacing(self, replaced: &axum::http::response::Parts) -> Response {
        let mut answer = self.into_response();
        for (name, value) in replaced.headers.iter() {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                answer.headers_mut().insert(name.clone(), value.clone());
            }
        }
        answer
    }
}

impl From<RelayError> for ApiError {
    fn from(error: RelayError) -> ApiError {
        let (status, code) = match &error {
            RelayError::BadInput(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            RelayError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            RelayError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            RelayError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            RelayError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            RelayError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            RelayError::SecretRefused(_) => (StatusCode::UNPROCESSABLE_ENTITY, "secret_refused"),
            RelayError::Quota {
                message,
                retry_after,
            } => return ApiError::rate_limited(message.clone(), *retry_after),
            RelayError::TooManyWaits(message) => {
                return ApiError::rate_limited(message.clone(), std::time::Duration::from_secs(1));
            }
            RelayError::Overloaded(message) => {
                return ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "overloaded",
                        message.clone(),
                    )
                };
            }
            RelayError::Internal(source) => return ApiError::internal(source.as_ref()),
            RelayError::Unavailable(source) => {
                tracing::warn!(
                    error = source.as_ref() as &dyn std::error::Error,
                    "the database is away"
                );
                return ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "unavailable",
                        error.to_string(),
                    )
                };
            }
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"crosstalk\""),
            );
        }
        response
    }
}

/// Marks a response whose refusal is the protocol's own answer in its
/// body, as designed: MCP's "method not found" for a method the relay
/// does not offer (rmcp sends it as 404), such as the `server/discover`
/// a client that asks for pushes is refused. The access log counts it as
/// normal (debug), not as a failure.
#[derive(Debug, Clone, Copy)]
pub struct AnsweredInBand;
