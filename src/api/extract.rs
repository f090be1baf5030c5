//! Extractors whose rejections speak the API's error shape.
//!
//! axum's own `Json`, `Query` and `Path` answer bad input with plain text;
//! these wrap them so that every failure a client can cause is
//! `{"error":{"code","message"}}` with the right status.

use super::ApiError;
use axum::{
    extract::{FromRequest, FromRequestParts, Request},
    http::{StatusCode, request::Parts},
};
use serde::de::DeserializeOwned;

/// A JSON request body. The `Content-Type` is not insisted on, so that
/// `curl -d '{…}'` works: every route that takes a body needs a Bearer token,
/// which no cross-site form can attach.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "too_large",
                        "the request body is larger than this relay accepts",
                    )
                } else {
                    ApiError::bad_request(rejection.body_text())
                }
            })?;
        serde_json::from_slice(&bytes).map(Body).map_err(|error| {
            let what = match error.classify() {
                serde_json::error::Category::Data => "the JSON body does not fit this route",
                _ => "the body is not valid JSON",
            };
            ApiError::bad_request(format!("{what}: {error}"))
        })
    }
}

/// Query-string parameters.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))
    }
}

/// Path parameters.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))
    }
}
