//! The application: shared state, the router with its layers, and serving.
//!
//! [`spawn`] is the one way to start a relay: `crosstalk serve`, the demo,
//! the benchmarks and the tests all run the same thing, on a real socket.

use crate::api::ApiError;
use crate::config::{Config, ConfigError, Tls};
use crate::layers::{
    auth::{self, SessionOwners},
    edge, guard,
    limits::{self, RateLimits},
};
use crate::mcp::RelayTools;
use crate::relay::Relay;
use crate::store::{SqliteStore, Store};
use crate::tls;
use axum::{Json, Router, extract::DefaultBodyLimit, http::StatusCode, middleware, routing::get};
use axum_server::{
    accept::NoDelayAcceptor,
    tls_rustls::{RustlsAcceptor, RustlsConfig},
};
use hyper_util::{rt::TokioExecutor, server::conn::auto::Builder};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::json;
use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

/// Cloned into every edge.
#[derive(Clone)]
pub struct AppState {
    /// The core: every edge calls it and nothing else.
    pub relay: Arc<Relay>,
    /// Who opened each MCP session.
    pub sessions: Arc<SessionOwners>,
    /// Rate limits per credential and per client address.
    pub limits: Arc<RateLimits>,
    /// The checked configuration.
    pub config: Arc<Config>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot open the database: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Tls(String),
}

/// Opens the store and checks that the configuration is safe to serve.
pub async fn build(config: Config, shutdown: CancellationToken) -> Result<AppState, StartError> {
    let store = Arc::new(SqliteStore::open(&config.db)?);
    if !config.listen.ip().is_loopback()
        && !config.has_env_credentials()
        && !store.has_people().await?
    {
        return Err(ConfigError(format!(
            "refusing to serve on {} with no credentials: anyone who reaches it could read and send. \
             Add a person first (crosstalk add HANDLE), or set RELAY_TOKEN or RELAY_PARTICIPANTS, \
             or listen on 127.0.0.1",
            config.listen
        ))
        .into());
    }
    let relay = Arc::new(Relay::new(store, config.settings.clone(), shutdown));
    let sessions = Arc::new(LocalSessionManager::default());
    Ok(AppState {
        relay,
        sessions: Arc::new(SessionOwners::new(sessions)),
        limits: Arc::new(RateLimits::new(&config.limits)),
        config: Arc::new(config),
    })
}

/// The largest request body read: room for a message body of the largest
/// size even when JSON escapes every character (`\u0000` is six bytes for
/// one), plus the rest of the request. The exact limit on the message body
/// itself is the core's, with a clear 413.
fn request_body_limit(max_body_bytes: usize) -> usize {
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
/// 6. per route group, in `api::routes` and below: credentials (Bearer,
///    Basic or `?token=` as the route allows) with the rate limits, then the
///    MCP session binding, then the request timeout on routes that do not
///    wait or stream.
pub fn router(state: AppState) -> Router {
    let request_limit = request_body_limit(state.config.settings.max_body_bytes);
    // rmcp's own Host check is off: `check_host` applies the same rule to
    // every route, so the two can never disagree.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_cancellation_token(state.relay_shutdown())
        .with_max_request_body_bytes(request_limit)
        .disable_allowed_hosts();
    let relay = state.relay.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(RelayTools::new(relay.clone())),
        state.sessions.manager(),
        mcp_config,
    );
    // Within a router, the layer added last runs first.
    let mcp_routes = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::bind_mcp_sessions,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_bearer,
        ));
    let guarded = Router::new()
        .merge(mcp_routes)
        .merge(crate::api::routes::router(state.clone()))
        .merge(crate::web::router(state.clone()))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::check_origin,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::check_host,
        ));
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
            state.clone(),
            edge::security_headers,
        ))
        .layer(middleware::from_fn(edge::access_log))
        .with_state(state)
}

impl AppState {
    fn relay_shutdown(&self) -> CancellationToken {
        self.relay.shutdown_token().child_token()
    }
}

/// A relay running on a real socket.
pub struct Running {
    /// The address it listens on (with the real port when 0 was asked for).
    pub addr: SocketAddr,
    /// The plain listener that redirects to HTTPS, when there is one.
    pub redirect_addr: Option<SocketAddr>,
    /// Under ACME: turns true once a certificate is deployed.
    pub certificate_ready: Option<watch::Receiver<bool>>,
    pub state: AppState,
    /// Cancel to stop: waits end, connections drain, the task returns.
    pub shutdown: CancellationToken,
    pub task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// `http://ADDR`, or `https://ADDR` under TLS.
    pub fn url(&self) -> String {
        let scheme = if self.state.config.tls.is_on() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops the relay and waits until it has drained.
    pub async fn stop(self) -> std::io::Result<()> {
        self.shutdown.cancel();
        self.stop_when_cancelled().await
    }

    /// Waits until someone cancels `shutdown` and the relay has drained.
    pub async fn stop_when_cancelled(self) -> std::io::Result<()> {
        self.task
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// How long a new connection may take to send its first whole request.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of request line and headers read for one request.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// How long connections may take to finish at shutdown before they are cut.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Bounds on what one connection may hold: header size and read time, and
/// HTTP/2 streams.
fn bound_connections(builder: &mut Builder<TokioExecutor>) {
    builder
        .http1()
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .max_concurrent_streams(128);
}

/// Binds `addr` and makes a server on it with the connection bounds, which
/// drains when `shutdown` fires; returns it and the address it got.
fn listen(
    addr: SocketAddr,
    shutdown: &CancellationToken,
) -> Result<(axum_server::Server<SocketAddr>, SocketAddr), StartError> {
    let error = |source| StartError::Listen { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(error)?;
    listener.set_nonblocking(true).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    let mut server = axum_server::from_tcp(listener)
        .map_err(error)?
        .handle(shutdown_handle(shutdown))
        .first_request_timeout(FIRST_REQUEST_TIMEOUT);
    bound_connections(server.http_builder());
    Ok((server, bound))
}

/// Builds the relay, binds its listeners and serves it in the background.
pub async fn spawn(config: Config) -> Result<Running, StartError> {
    crate::tls::install_crypto_provider();
    let shutdown = CancellationToken::new();
    let state = build(config, shutdown.clone()).await?;
    let config = state.config.clone();
    let (server, addr) = listen(config.listen, &shutdown)?;

    let mut certificate_ready = None;
    let tls = match &config.tls {
        Tls::Off => None,
        Tls::Files { cert, key } => {
            let rustls =
                RustlsConfig::from_config(tls::from_files(cert, key).map_err(StartError::Tls)?);
            tokio::spawn(reload_on_hangup(
                rustls.clone(),
                cert.clone(),
                key.clone(),
                shutdown.clone(),
            ));
            Some(rustls)
        }
        Tls::Acme(acme) => {
            let (server, ready) =
                tls::start_acme(acme, shutdown.clone()).map_err(StartError::Tls)?;
            certificate_ready = Some(ready);
            Some(RustlsConfig::from_config(server))
        }
    };
    let redirect_addr = match config.http_listen {
        Some(http_listen) => {
            let (server, bound) = listen(http_listen, &shutdown)?;
            let server = server.acceptor(NoDelayAcceptor::new());
            let app = tls::redirect_router(&config, addr.port()).into_make_service();
            tokio::spawn(async move { server.serve(app).await });
            Some(bound)
        }
        None => None,
    };

    tokio::spawn(state.relay.clone().run_maintenance());
    tokio::spawn(prune_limits(state.limits.clone(), shutdown.clone()));

    // NODELAY: responses (SSE above all) go out in several writes, and
    // Nagle's algorithm would hold the last one for the client's delayed ACK.
    let app = router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let task = match tls {
        None => {
            let server = server.acceptor(NoDelayAcceptor::new());
            tokio::spawn(async move { server.serve(app).await })
        }
        Some(rustls) => {
            let acceptor = RustlsAcceptor::new(rustls)
                .handshake_timeout(FIRST_REQUEST_TIMEOUT)
                .acceptor(NoDelayAcceptor::new());
            let server = server.acceptor(acceptor);
            tokio::spawn(async move { server.serve(app).await })
        }
    };
    Ok(Running {
        addr,
        redirect_addr,
        certificate_ready,
        state,
        shutdown,
        task,
    })
}

/// A server handle that starts a graceful shutdown when `shutdown` fires.
fn shutdown_handle(shutdown: &CancellationToken) -> axum_server::Handle<SocketAddr> {
    let handle = axum_server::Handle::new();
    let stopping = handle.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        stopping.graceful_shutdown(Some(SHUTDOWN_GRACE));
    });
    handle
}

/// Certificate files mode: re-reads the files on SIGHUP. A pair that does not
/// load is logged and the one in use kept.
async fn reload_on_hangup(
    rustls: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    shutdown: CancellationToken,
) {
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGHUP; certificate files will not be reloaded");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = hangups.recv() => match tls::from_files(&cert, &key) {
                Ok(config) => {
                    rustls.reload_from_config(config);
                    tracing::info!(cert = %cert.display(), "reloaded the TLS certificate");
                }
                Err(error) => tracing::error!(%error, "kept the TLS certificate in use"),
            },
            () = shutdown.cancelled() => return,
        }
    }
}

/// Prunes the rate limiters' keyed state until shutdown.
async fn prune_limits(limits: Arc<RateLimits>, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(limits::PRUNE_EVERY);
    loop {
        tokio::select! {
            _ = every.tick() => limits.prune(),
            () = shutdown.cancelled() => return,
        }
    }
}
