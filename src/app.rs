//! The application: shared state, the router with its layers, and serving.
//!
//! [`spawn`] is the one way to start a relay: `crosstalk serve`, the demo,
//! the benchmarks and the tests all run the same thing, on a real socket.

use crate::auth::{self, SessionOwners};
use crate::config::{Config, ConfigError};
use crate::mcp::RelayTools;
use crate::relay::Relay;
use crate::store::{SqliteStore, Store};
use axum::{Json, Router, extract::DefaultBodyLimit, middleware, routing::get, serve::ListenerExt};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::json;
use std::{net::SocketAddr, sync::Arc};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

/// Cloned into every edge.
#[derive(Clone)]
pub struct AppState {
    /// The core: every edge calls it and nothing else.
    pub relay: Arc<Relay>,
    /// Who opened each MCP session.
    pub sessions: Arc<SessionOwners>,
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
        config: Arc::new(config),
    })
}

/// The hosts rmcp accepts in `Host`: the public URL's, and loopback's. When
/// the relay listens beyond loopback and no public URL names it, the host is
/// unknown and rmcp's check is off.
fn allowed_hosts(config: &Config) -> Option<Vec<String>> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let public_host = config
        .public_url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(rest))
        .map(|authority| {
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host)
                .to_owned()
        });
    match public_host {
        Some(authority) => {
            let bare = match authority.rsplit_once(':') {
                Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host.to_owned(),
                _ => authority.clone(),
            };
            hosts.push(authority);
            hosts.push(
                bare.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
            );
            Some(hosts)
        }
        None if config.listen.ip().is_loopback() => Some(hosts),
        None => None,
    }
}

/// The largest request body read: room for a message body of the largest
/// size even when JSON escapes every character (`\u0000` is six bytes for
/// one), plus the rest of the request. The exact limit on the message body
/// itself is the core's, with a clear 413.
fn request_body_limit(max_body_bytes: usize) -> usize {
    max_body_bytes.saturating_mul(6).saturating_add(16 * 1024)
}

/// Every route, with its layers.
pub fn router(state: AppState) -> Router {
    let request_limit = request_body_limit(state.config.settings.max_body_bytes);
    let mut mcp_config = StreamableHttpServerConfig::default()
        .with_cancellation_token(state.relay_shutdown())
        .with_max_request_body_bytes(request_limit);
    mcp_config = match allowed_hosts(&state.config) {
        Some(hosts) => mcp_config.with_allowed_hosts(hosts),
        None => mcp_config.disable_allowed_hosts(),
    };
    let relay = state.relay.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(RelayTools::new(relay.clone())),
        state.sessions.manager(),
        mcp_config,
    );
    // Layers run outside in: the last added runs first. Credentials first,
    // then the session check, which needs the caller.
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
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(json!({ "status": "ok" })) }),
        )
        .merge(mcp_routes)
        .merge(crate::api::routes::router(state.clone()))
        .layer(DefaultBodyLimit::max(request_limit))
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
    pub state: AppState,
    /// Cancel to stop: waits end, connections drain, the task returns.
    pub shutdown: CancellationToken,
    pub task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

/// Builds the relay, binds its listener and serves it in the background.
pub async fn spawn(config: Config) -> Result<Running, StartError> {
    let shutdown = CancellationToken::new();
    let listen = config.listen;
    let state = build(config, shutdown.clone()).await?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: listen,
        source,
    })?;
    tokio::spawn(state.relay.clone().run_maintenance());
    let app = router(state.clone());
    let stop = shutdown.clone();
    // Responses (SSE above all) go out in several writes; without NODELAY,
    // Nagle's algorithm holds the last one back for the client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move { stop.cancelled_owned().await })
        .await
    });
    Ok(Running {
        addr,
        state,
        shutdown,
        task,
    })
}
