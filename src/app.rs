//! The application: every route and, in one function, the whole stack of
//! layers in front of them. Serving it on sockets is [`crate::server`]'s.

use crate::layers::{
    auth::{self, Accept, Credentials},
    edge,
    guard::{self, HostPolicy},
    sessions,
};
use crate::state::AppState;
use crate::wire::ApiError;
use crate::{api, mcp, web};
use axum::{Json, Router, extract::DefaultBodyLimit, http::StatusCode, middleware, routing::get};
use serde_json::json;

/// The largest request body read: room for a message body of the largest
/// size even when JSON escapes every character (`\u0000` is six bytes for
/// one), plus the rest of the request. The exact limit on the message body
/// itself is the core's, with a clear 413.
pub fn request_body_limit(max_body_bytes: usize) -> usize {
    max_body_bytes.saturating_mul(6).saturating_add(16 * 1024)
}

/// Every route, and the layers in front of them, outermost first:
///
/// 1. `access_log`: method, path, status, time; never a query string.
/// 2. `security_headers`: CSP, nosniff, no-referrer, HSTS under TLS.
/// 3. the body limit: bodies past it are refused with 413 as they are read.
/// 4. `check_host` (all but `/healthz`): only the relay's own names.
/// 5. `check_origin` (all but `/healthz`): only the relay's own page and
///    the allowed origins; before credentials, so a foreign page gets 403
///    even with a good token, and causes no token lookup.
/// 6. per route group, as the table below sets it:
///    - the page's Basic challenge (pages only), so a browser asks for
///      credentials;
///    - credentials (Bearer, Basic or `?token=`, as the group accepts) with
///      the rate limits;
///    - the MCP session binding (`/mcp` only);
///    - the request timeout, on groups that answer at once. Waits and
///      streams have their own bounds (at most 50 s, or until the client
///      leaves, the caller's slots, shutdown).
pub fn router(state: AppState) -> Router {
    let request_limit = request_body_limit(state.config.settings.max_body_bytes);
    let credentials = |accept| {
        middleware::from_fn_with_state(
            Credentials {
                relay: state.relay.clone(),
                limits: state.limits.clone(),
                accept,
            },
            auth::require,
        )
    };
    let at_once = || middleware::from_fn(edge::request_timeout);
    let hosts = HostPolicy::new(&state.config);

    // Within a router, the layer added last runs first.
    let mcp = Router::new()
        .nest_service("/mcp", mcp::service(&state, request_limit))
        .layer(middleware::from_fn_with_state(
            state.sessions.clone(),
            sessions::bind,
        ))
        .layer(credentials(Accept::Bearer));
    // | group          | credentials              | timeout |
    // |----------------|--------------------------|---------|
    // | /mcp           | Bearer                   | (rmcp)  |
    // | api reads      | Bearer or Basic          | yes     |
    // | api waits      | Bearer or Basic          | no      |
    // | api writes     | Bearer                   | yes     |
    // | api inbox      | Bearer (claims change)   | no      |
    // | api streams    | Bearer, Basic, ?token=   | no      |
    // | pages          | Bearer or Basic          | yes     |
    // | static assets  | none                     | no      |
    let guarded = Router::new()
        .merge(mcp)
        .merge(
            api::reads()
                .route_layer(at_once())
                .route_layer(credentials(Accept::BearerOrBasic)),
        )
        .merge(api::waits().route_layer(credentials(Accept::BearerOrBasic)))
        .merge(
            api::writes()
                .route_layer(at_once())
                .route_layer(credentials(Accept::Bearer)),
        )
        .merge(api::inbox().route_layer(credentials(Accept::Bearer)))
        .merge(api::streams().route_layer(credentials(Accept::Stream)))
        .merge(
            web::pages()
                .route_layer(at_once())
                .route_layer(credentials(Accept::BearerOrBasic))
                .route_layer(middleware::from_fn(web::basic_challenge)),
        )
        .merge(web::assets())
        .layer(middleware::from_fn_with_state(
            hosts.clone(),
            guard::check_origin,
        ))
        .layer(middleware::from_fn_with_state(hosts, guard::check_host));
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(json!({ "status": "ok" })) }),
        )
        .merge(guarded)
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "there is no such route")
        })
        .layer(DefaultBodyLimit::max(request_limit))
        .layer(middleware::from_fn_with_state(
            edge::Hsts(state.config.tls.is_on()),
            edge::security_headers,
        ))
        .layer(middleware::from_fn(edge::access_log))
        .with_state(state)
}
