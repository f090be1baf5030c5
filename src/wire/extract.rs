//! Extractors whose refusals speak the API's error shape.
//!
//! axum's own `Json`, `Query` and `Path` answer bad input with plain text;
//! these wrap them so that every failure a client can cause is
//! `{"error":{"code","message"}}` with the right status.
//!
//! [`Body`] and [`Query`] also take the route's path parameters as fields,
//! so a REST route reads the same argument type as its MCP twin:
//! `POST /api/channels/ops/messages {"body":…}` is `post_message` with
//! `{"channel":"ops","body":…}`. A path parameter wins over a field of the
//! same name.

use super::ApiError;
use axum::{
    extract::{FromRequest, FromRequestParts, RawPathParams, Request},
    http::{StatusCode, Uri, request::Parts},
};
use serde::de::DeserializeOwned;

/// The route's path parameters, by name; none when the route has none.
async fn path_params(parts: &mut Parts) -> Result<Vec<(String, String)>, ApiError> {
    match RawPathParams::from_request_parts(parts, &()).await {
        Ok(params) => Ok(params
            .iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()),
        Err(axum::extract::rejection::RawPathParamsRejection::MissingPathParams(_)) => {
            Ok(Vec::new())
        }
        Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
    }
}

/// A JSON request body, with the route's path parameters as fields. The
/// `Content-Type` is not insisted on, so that `curl -d '{…}'` works: every
/// route that takes a body needs a Bearer token, which no cross-site form
/// can attach.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let params = path_params(&mut parts).await?;
        let request = Request::from_parts(parts, body);
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
        let parsed = if params.is_empty() {
            serde_json::from_slice(&bytes)
        } else {
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&bytes).and_then(
                |mut fields| {
                    for (name, value) in params {
                        fields.insert(name, value.into());
                    }
                    serde_json::from_value(fields.into())
                },
            )
        };
        parsed.map(Body).map_err(|error| {
            let what = match error.classify() {
                serde_json::error::Category::Data => "the JSON body does not fit this route",
                _ => "the body is not valid JSON",
            };
            ApiError::bad_request(format!("{what}: {error}"))
        })
    }
}

/// Query-string parameters, with the route's path parameters as fields.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let params = path_params(parts).await?;
        let mut query: Vec<String> = params
            .iter()
            .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
            .collect();
        query.extend(
            parts
                .uri
                .query()
                .unwrap_or("")
                .split('&')
                .filter(|pair| {
                    let name = pair.split('=').next().unwrap_or("");
                    !name.is_empty() && !params.iter().any(|(param, _)| param == name)
                })
                .map(str::to_owned),
        );
        let uri: Uri = format!("/?{}", query.join("&"))
            .parse()
            .map_err(|_| ApiError::bad_request("the query string is malformed"))?;
        axum::extract::Query::<T>::try_from_uri(&uri)
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))
    }
}

/// Percent-encodes a value for a query string.
pub(crate) fn form_encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
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
