//! The application: every route and the whole stack of layers in front of
//! them, listed outermost first in [`router`]'s documentation. Serving it
//! on sockets is [`crate::server`]'s.

use crate::host::Origin;
use crate::layers::{
    auth::{self, Accept, AddressBudget, AddressQuota, Audience, Credentials},
    edge,
    guard::{self, HostPolicy},
    limits::RateLimits,
};
use crate::state::AppState;
use crate::wire::ApiError;
use crate::{a2a, api, mcp, web};
use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, State},
    http::{HeaderName, HeaderValue, Method, StatusCode, header},
    middleware,
    routing::get,
};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The largest request body read: room for a message body of the largest
/// size even when JSON escapes every character (`\u0000` is six bytes for
/// one), plus the rest of the request. The exact limit on the message body
/// itself is the core's, with a clear 413.
pub fn request_body_limit(max_body_bytes: usize) -> usize {
    max_body_bytes.saturating_mul(6).saturating_add(16 * 1024)
}

/// The largest body of a request that sends a message (`/mcp`, `POST
/// /api/messages`, and the writes, a channel post among them): room for the
/// most files a message carries, base64, beside the rest. Their exact
/// limits are the core's, each with a clear refusal.
pub fn message_body_limit(max_body_bytes: usize) -> usize {
    request_body_limit(max_body_bytes).saturating_add(crate::wire::args::MAX_FILES_IN_BODY)
}

/// With ACME, whether a certificate is deployed yet (`/readyz` waits for
/// it); `None` when the relay serves plain HTTP or certificate files,
/// which are loaded before it listens.
pub type Certificate = Option<tokio::sync::watch::Receiver<bool>>;

/// `/readyz`: 200 when the relay can serve: its store answers and, with
/// ACME, a certificate is deployed; else 503 with the reason (`/healthz`
/// says only that the process is up). For a load balancer and systemd.
async fn readyz(
    state: AppState,
    certificate: Certificate,
) -> Result<Json<serde_json::Value>, ApiError> {
    let not_ready =
        |reason: &str| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", reason);
    if certificate.is_some_and(|deployed| !*deployed.borrow()) {
        return Err(not_ready(
            "no TLS certificate is deployed yet (ACME is ordering one)",
        ));
    }
    if let Err(error) = state.relay.store_answers().await {
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "not ready: the store does not answer"
        );
        return Err(not_ready("the store does not answer"));
    }
    Ok(Json(json!({ "status": "ready" })))
}

/// CORS for `RELAY_ALLOWED_ORIGINS`; none when there are none.
fn cors(allowed: &[Origin]) -> Option<CorsLayer> {
    if allowed.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = allowed
        .iter()
        .filter_map(|origin| HeaderValue::from_str(&origin.serialized()).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("last-event-id"),
                HeaderName::from_static(mcp::SESSION_HEADER),
                HeaderName::from_static("mcp-protocol-version"),
            ])
            .expose_headers([
                header::RETRY_AFTER,
                HeaderName::from_static(mcp::SESSION_HEADER),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// Every route, and the layers in front of them, outermost first:
///
/// 0. (before any of these, as connections are accepted: the caps on
///    connections and the idle timeout, in `server`.)
/// 1. `edge::outermost`, one layer: the access log (method, path, status,
///    time; never a query string) and the request counted in the metrics,
///    by route group; the security headers (CSP, nosniff, a same-origin
///    referrer policy, HSTS under TLS); and the JSON error shape for an
///    error that a library answered in plain text (axum's 405, a body too
///    large). (On `/mcp`, `mcp::shape_answers`, right in front of the
///    service, shapes rmcp's first.)
/// 2. the body limit: bodies past it are refused with 413 as they are read.
/// 3. `guard::check_host_and_origin` (all but `/healthz` and `/readyz`,
///    which count against their address's quota instead), one layer: only
///    the relay's own names; then only the relay's own page and the allowed
///    origins, before credentials, so a foreign page gets 403 even with a
///    good token, and causes no token lookup.
/// 4. CORS (when `RELAY_ALLOWED_ORIGINS` names any): an allowed origin's
///    preflights answered here, without credentials.
/// 5. per route group, as the table below sets it:
///    - (pages only) failures as HTML pages, and the Basic challenge on a
///      401, so a browser asks for credentials;
///    - credentials (Bearer, Basic or `?token=`, as the group accepts) with
///      the rate limits;
///    - (pages and the API groups that take Basic) a credential this
///      browser signed out with is refused;
///    - reading the body within the request timeout (`/mcp` and `POST
///      /api/messages`: their calls may wait), then (`/mcp` only) the MCP
///      sessions, which open, bind and stream them;
///    - the request timeout, on groups that answer at once. Waits and
///      streams have their own bounds (at most 50 s, or until the client
///      leaves, the caller's slots, shutdown).
pub fn router(state: AppState, mcp: &mcp::McpEdge, certificate: Certificate) -> Router {
    let guarded = route_groups(&state, mcp);
    // CORS, for browser apps at the allowed origins: answers their
    // preflights before any credentials are asked for, and lets them read
    // the answers. Credentials only by Bearer, which a page must send
    // itself: no cookies or Basic credentials cross origins.
    let guarded = match cors(&state.config.allowed_origins) {
        Some(cors) => guarded.layer(cors),
        None => guarded,
    };
    let guarded = guarded.layer(middleware::from_fn_with_state(
        HostPolicy::new(&state.config),
        guard::check_host_and_origin,
    ));
    Router::new()
        .merge(health(&state, certificate))
        .merge(guarded)
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "there is no such route")
        })
        .layer(DefaultBodyLimit::max(request_body_limit(
            state.config.settings.max_body_bytes,
        )))
        .layer(middleware::from_fn_with_state(
            edge::Edge {
                metrics: state.metrics.clone(),
                hsts: state.config.tls.is_on(),
            },
            edge::outermost,
        ))
        .with_state(state)
}

/// The client address's quota, for the routes that take no credentials.
fn address_quota(state: &AppState, check: AddressBudget) -> AddressQuota {
    AddressQuota {
        limits: state.limits.clone(),
        trusted_proxies: state.config.trusted_proxies.clone().into(),
        forwarded_header: state.config.forwarded_header,
        check,
    }
}

/// `/healthz` and `/readyz`: no credentials, but the client address's
/// quota, so they are no free target for a flood.
fn health(state: &AppState, certificate: Certificate) -> Router<AppState> {
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(json!({ "status": "ok" })) }),
        )
        .route(
            "/readyz",
            get(move |State(state): State<AppState>| readyz(state, certificate.clone())),
        )
        .route_layer(middleware::from_fn_with_state(
            address_quota(state, RateLimits::anonymous),
            auth::count_address,
        ))
}

/// Every route but the health checks, each group behind the layers the
/// table below sets for it (the order within a group: the layer added
/// last runs first).
fn route_groups(state: &AppState, mcp: &mcp::McpEdge) -> Router<AppState> {
    let message_limit = message_body_limit(state.config.settings.max_body_bytes);
    let trusted_proxies: std::sync::Arc<[_]> = state.config.trusted_proxies.clone().into();
    let credentials_with = |accept, oauth, challenge| {
        middleware::from_fn_with_state(
            Credentials {
                relay: state.relay.clone(),
                limits: state.limits.clone(),
                trusted_proxies: trusted_proxies.clone(),
                forwarded_header: state.config.forwarded_header,
                accept,
                oauth,
                challenge,
            },
            auth::require,
        )
    };
    let credentials = |accept| credentials_with(accept, None, None);
    let deadline = edge::Deadline {
        timeout: state.config.request_timeout,
        body_limit: message_limit,
    };
    let at_once = || middleware::from_fn_with_state(deadline, edge::request_timeout);
    // A credential a browser signed out with is refused wherever Basic is
    // taken, not on the pages alone.
    let signed_out = || middleware::from_fn_with_state(state.clone(), web::signed_out);
    // A body of a message's size at the most, read within the deadline
    // (the handler itself may then wait).
    let body_in_time = |group: Router<AppState>| {
        group
            .route_layer(DefaultBodyLimit::max(message_limit))
            .route_layer(middleware::from_fn_with_state(
                deadline,
                edge::read_body_in_time,
            ))
    };
    // A page answers its errors as a page.
    let page = |group: Router<AppState>, accept| {
        group
            .route_layer(signed_out())
            .route_layer(at_once())
            .route_layer(credentials(accept))
            .route_layer(middleware::from_fn_with_state(
                state.clone(),
                web::page_errors,
            ))
    };

    // Within a router, the layer added last runs first.
    let mcp = Router::new()
        .nest_service("/mcp", mcp.service(state, message_limit))
        .layer(middleware::from_fn(mcp::shape_answers))
        .layer(middleware::from_fn_with_state(
            mcp.sessions(),
            mcp::sessions::layer,
        ))
        .layer(middleware::from_fn_with_state(
            deadline,
            edge::read_body_in_time,
        ))
        .layer(credentials_with(
            Accept::Bearer,
            Some(Audience::Mcp),
            Some(api::oauth::challenge(&state.config.public_url)),
        ));
    // | group          | credentials              | timeout |
    // |----------------|--------------------------|---------|
    // | /mcp           | Bearer, OAuth's for /mcp | body    |
    // | A2A            | Bearer, OAuth's for /a2a | body    |
    // | api reads      | Bearer or Basic          | yes     |
    // | api waits      | Bearer or Basic          | no      |
    // | api writes     | Bearer                   | yes     |
    // | api asks       | Bearer                   | body    |
    // | api inbox      | Bearer (claims change)   | no      |
    // | api streams    | Bearer, Basic, ?token=   | no      |
    // | pages          | Bearer or Basic          | yes     |
    // | OAuth consent  | Basic, also cross-site   | yes     |
    // | OAuth (others), the API's document, A2A cards | none: the address quota | yes |
    // | OAuth registration | none: the address quota and the registrations' budget | yes |
    // | static assets  | none                     | no      |
    Router::new()
        .merge(mcp)
        .merge(
            api::reads()
                .route_layer(signed_out())
                .route_layer(at_once())
                .route_layer(credentials(Accept::BearerOrBasic)),
        )
        .merge(
            api::waits()
                .route_layer(signed_out())
                .route_layer(credentials(Accept::BearerOrBasic)),
        )
        .merge(
            api::writes()
                .route_layer(DefaultBodyLimit::max(message_limit))
                .route_layer(at_once())
                .route_layer(credentials(Accept::Bearer)),
        )
        .merge(body_in_time(api::asks()).route_layer(credentials(Accept::Bearer)))
        .merge(body_in_time(a2a::endpoint()).route_layer(credentials_with(
            Accept::Bearer,
            Some(Audience::A2a),
            None,
        )))
        .merge(api::inbox().route_layer(credentials(Accept::Bearer)))
        .merge(
            api::streams()
                .route_layer(signed_out())
                .route_layer(credentials(Accept::Stream)),
        )
        .merge(page(web::pages(), Accept::BearerOrBasic))
        .merge(page(web::consent(state), Accept::Consent))
        .merge(
            api::oauth::routes()
                .merge(
                    api::oauth::registration().route_layer(middleware::from_fn_with_state(
                        address_quota(state, RateLimits::registration),
                        auth::count_address,
                    )),
                )
                .merge(api::public())
                .merge(a2a::cards())
                .route_layer(at_once())
                .route_layer(middleware::from_fn_with_state(
                    address_quota(state, RateLimits::anonymous),
                    auth::count_address,
                )),
        )
        .merge(web::assets())
}
