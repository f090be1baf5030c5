//! Building a relay from its configuration and serving it on real
//! sockets, with what the commands need of a relay's files (`commands`
//! runs them).
//!
//! [`spawn`] is the one way to start a relay: `crosstalk serve`, the demo,
//! the benchmarks and the tests all run the same thing, on a real socket.
//! This is the one module that puts the pieces together: it opens the
//! store, makes the core, builds the app, binds listeners (with TLS), and
//! starts the relay's background work. Nothing else names the store's
//! implementation.

mod bounds;
pub mod check;
mod connection;
mod database;
mod listen;
mod systemd;

pub use crate::config::HEADER_READ_TIMEOUT;
use database::database_error;
pub use database::{migrate_to_postgres, open_store, open_team};
pub use listen::{FIRST_REQUEST_TIMEOUT, MAX_HEADER_BYTES, SHUTDOWN_GRACE};

use crate::app;
use crate::config::{Config, ConfigError, Connections, Tls};
use crate::layers::{
    self,
    guard::HostPolicy,
    limits::{self, RateLimits},
};
use crate::mcp::McpEdge;
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::relay::Relay;
use crate::state::AppState;
use crate::store::{
    Store, StoreError,
    sqlite::{self, ServingLock},
};
use crate::tls::{self, TlsError};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use bounds::ConnectionBounds;
use connection::Bounded;
use std::{net::SocketAddr, sync::Arc};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database cannot be used: named by its variable, with what to do.
    #[error("cannot use RELAY_DB {} ({hint})", .path.display())]
    Database {
        path: std::path::PathBuf,
        hint: &'static str,
        #[source]
        source: StoreError,
    },
    /// The PostgreSQL database cannot be used (its URL is never shown).
    #[error("cannot use RELAY_DATABASE_URL ({hint})")]
    Postgres {
        hint: &'static str,
        #[source]
        source: StoreError,
    },
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot make the HTTP client notifications go out through")]
    Notifications(#[source] reqwest::Error),
}

/// Opens the store and checks that the configuration is safe to serve.
async fn build(
    config: Config,
    shutdown: CancellationToken,
) -> Result<(AppState, Arc<dyn Store>), StartError> {
    let store = open_store(&config.database(), true).await?;
    let has_people = store
        .has_people()
        .await
        .map_err(|e| match &config.database_url {
            Some(_) => database::postgres_error(e),
            None => database_error(&config.db, e),
        })?;
    config.check_exposure(has_people)?;
    let relay = Arc::new(Relay::new(store.clone(), config.settings.clone(), shutdown));
    relay
        .wake_for_other_relays()
        .await
        .map_err(database::postgres_error)?;
    let metrics = Arc::new(Metrics::new(relay.clone()));
    let state = AppState {
        limits: Arc::new(RateLimits::new(&config.limits, metrics.quotas.clone())),
        metrics,
        relay,
        config: Arc::new(config),
    };
    Ok((state, store))
}

/// A relay running on a real socket.
pub struct Running {
    /// The address it listens on (with the real port when 0 was asked for).
    pub addr: SocketAddr,
    /// The plain listener that redirects to HTTPS, when there is one.
    pub redirect_addr: Option<SocketAddr>,
    /// The metrics listener, when `RELAY_METRICS_ADDR` asks for one.
    pub metrics_addr: Option<SocketAddr>,
    /// Under ACME: turns true once a certificate is deployed.
    pub certificate_ready: Option<watch::Receiver<bool>>,
    pub state: AppState,
    /// The MCP edge: its sessions.
    pub mcp: McpEdge,
    /// Cancel to stop: waits end, connections drain, the task returns.
    pub shutdown: CancellationToken,
    pub task: JoinHandle<std::io::Result<()>>,
    /// The relay's own work; at shutdown it writes what it holds and
    /// checkpoints the database, so stopping waits for it.
    maintenance: JoinHandle<()>,
    /// Writes MCP sessions' use at shutdown, so they can be taken up after.
    sessions: JoinHandle<()>,
    /// Says that this relay serves the database, while it runs.
    _lock: Option<ServingLock>,
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

    /// Waits until someone cancels `shutdown`, the relay has drained, and
    /// the database is checkpointed.
    pub async fn stop_when_cancelled(self) -> std::io::Result<()> {
        let served = self
            .task
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        self.shutdown.cancel();
        let _ = self.sessions.await;
        let _ = self.maintenance.await;
        served
    }
}

/// Files and folders crosstalk creates (the database, its WAL, the ACME
/// account, keys and certificates) are for its own user only, whatever the
/// umask it was started with. The umask is the process's, so this holds for
/// files that libraries create too.
pub fn restrict_new_files() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Builds the relay, binds its listeners and serves it in the background.
pub async fn spawn(config: Config) -> Result<Running, StartError> {
    tls::install_crypto_provider();
    restrict_new_files();
    // One relay per SQLite file; PostgreSQL serves as many as share it.
    let lock = match config.database_url {
        Some(_) => None,
        None => {
            Some(sqlite::lock_for_serving(&config.db).map_err(|e| database_error(&config.db, e))?)
        }
    };
    let shutdown = CancellationToken::new();
    let (server, addr) = listen::listen(config.listen, config.connections.header_read, &shutdown)?;
    let (state, store) = build(config.bound_to(addr), shutdown.clone()).await?;
    let config = state.config.clone();

    let (tls, certificate_ready) = start_tls(&config, &store, &shutdown)?;
    let bounded = Bounded {
        bounds: ConnectionBounds::new(
            config.connections,
            config.trusted_proxies.clone(),
            state.metrics.connections.clone(),
        ),
    };
    let redirect_addr = match config.http_listen {
        Some(http_listen) => Some(serve_redirects(
            &config,
            http_listen,
            addr.port(),
            &shutdown,
        )?),
        None => None,
    };

    let metrics_addr = match config.metrics_listen {
        Some(listen) => Some(serve_metrics(&state, listen, &shutdown)?),
        None => None,
    };

    let maintenance = tokio::spawn(state.relay.clone().run_maintenance());
    tokio::spawn(state.relay.clone().watch_credentials());
    start_notifications(&state, &config, addr, &shutdown)?;
    let mcp = McpEdge::new(&state);
    let counted = mcp.clone();
    state
        .metrics
        .count_sessions(move || counted.open_sessions());
    tokio::spawn(mcp.clone().end_revoked(shutdown.clone()));
    tokio::spawn(prune_limits(state.limits.clone(), shutdown.clone()));
    let sessions = tokio::spawn(mcp.clone().upkeep(shutdown.clone()));

    let app = app::router(state.clone(), &mcp, certificate_ready.clone())
        .into_make_service_with_connect_info::<SocketAddr>();
    let task = match tls {
        None => {
            let server = server.acceptor(bounded);
            tokio::spawn(async move { server.serve(app).await })
        }
        Some(rustls) => {
            let acceptor = RustlsAcceptor::new(rustls)
                .handshake_timeout(FIRST_REQUEST_TIMEOUT)
                .acceptor(bounded);
            let server = server.acceptor(acceptor);
            tokio::spawn(async move { server.serve(app).await })
        }
    };
    Ok(Running {
        addr,
        redirect_addr,
        metrics_addr,
        certificate_ready,
        state,
        mcp,
        shutdown,
        task,
        maintenance,
        sessions,
        _lock: lock,
    })
}

/// Escalation, and the deliveries of what the core tells people. Links
/// point at the public URL; when the port was left to the system (`:0`,
/// which no public URL can name), at the address bound.
fn start_notifications(
    state: &AppState,
    config: &Config,
    addr: SocketAddr,
    shutdown: &CancellationToken,
) -> Result<(), StartError> {
    let Some(notices) = state.relay.take_notices() else {
        return Ok(());
    };
    let public_url = match config.listen.port() {
        0 => {
            let scheme = if config.tls.is_on() { "https" } else { "http" };
            format!("{scheme}://{addr}")
        }
        _ => config.public_url.clone(),
    };
    let notifier = Notifier::new(
        state.relay.clone(),
        &public_url,
        config.settings.notify_allow_private,
    )
    .map_err(StartError::Notifications)?;
    tokio::spawn(notifier.run(notices, shutdown.clone()));
    tokio::spawn(state.relay.clone().run_escalation());
    Ok(())
}

/// The TLS the relay terminates, if any, as its mode says; with ACME,
/// also what says when the first certificate is in place.
fn start_tls(
    config: &Config,
    store: &Arc<dyn Store>,
    shutdown: &CancellationToken,
) -> Result<(Option<RustlsConfig>, Option<watch::Receiver<bool>>), StartError> {
    Ok(match &config.tls {
        Tls::Off => (None, None),
        Tls::Files { cert, key } => {
            let rustls = RustlsConfig::from_config(tls::from_files(cert, key)?);
            tokio::spawn(listen::reload_on_hangup(
                rustls.clone(),
                cert.clone(),
                key.clone(),
                shutdown.clone(),
            ));
            (Some(rustls), None)
        }
        Tls::Acme(acme) => {
            // Relays sharing a PostgreSQL store share its certificate.
            let shared = config.database_url.is_some().then(|| store.clone());
            let (server, ready) = tls::start_acme(acme, shared, shutdown.clone())?;
            (Some(RustlsConfig::from_config(server)), Some(ready))
        }
    })
}

/// Serves `GET /metrics` on a listener of its own, plain HTTP, no
/// credentials: it is the operator's to keep to the machine (loopback by
/// default) or a network of theirs. Bounded like the public listener, by
/// the same acceptor, with a small budget of its own (so connections held
/// open there cannot take the descriptors the public listener needs), the
/// header and idle timeouts, a request timeout, and a Host check against
/// its own address. Where it listens.
fn serve_metrics(
    state: &AppState,
    listen: SocketAddr,
    shutdown: &CancellationToken,
) -> Result<SocketAddr, StartError> {
    let config = &state.config;
    let limits = config.metrics_connections;
    let (server, bound) = listen::listen(listen, limits.header_read, shutdown)?;
    let server = server.acceptor(Bounded {
        // No proxy stands in front of it: every peer is counted.
        // The metrics listener's connections are not the relay's.
        bounds: ConnectionBounds::new(limits, Vec::new(), Arc::default()),
    });
    let metrics = state.metrics.clone();
    let deadline = layers::edge::Deadline {
        timeout: config.request_timeout,
        body_limit: 0,
    };
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            crate::metrics::CONTENT_TYPE,
                        )],
                        metrics.render(),
                    )
                }
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            deadline,
            layers::edge::request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            HostPolicy::metrics(bound, config),
            layers::guard::check_host,
        ))
        .into_make_service();
    tokio::spawn(async move {
        if let Err(error) = server.serve(app).await {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "the metrics listener failed"
            );
        }
    });
    Ok(bound)
}

/// Serves the plain-HTTP listener that sends everyone to HTTPS on
/// `https_port`; where it listens.
fn serve_redirects(
    config: &Config,
    http_listen: SocketAddr,
    https_port: u16,
    shutdown: &CancellationToken,
) -> Result<SocketAddr, StartError> {
    let (server, bound) = listen::listen(http_listen, config.connections.header_read, shutdown)?;
    let server = server.acceptor(Bounded {
        bounds: ConnectionBounds::new(
            Connections::redirector(config.connections.idle),
            config.trusted_proxies.clone(),
            // The redirector's connections are not the relay's.
            Arc::default(),
        ),
    });
    let app = tls::redirect_router(config, https_port).into_make_service();
    tokio::spawn(async move { server.serve(app).await });
    Ok(bound)
}

/// `crosstalk serve`: runs until SIGINT or SIGTERM, then drains.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let running = spawn(config).await?;
    let config = &running.state.config;
    let tls = match &config.tls {
        Tls::Off => "off",
        Tls::Files { .. } => "certificate files",
        Tls::Acme(_) => "ACME",
    };
    // The database by its file, or by its variable (a URL may hold a password).
    let db = match config.database_url {
        Some(_) => "PostgreSQL (RELAY_DATABASE_URL)".to_owned(),
        None => config.db.display().to_string(),
    };
    tracing::info!(
        listen = %running.addr,
        tls,
        redirect = ?running.redirect_addr,
        metrics = ?running.metrics_addr,
        public_url = %config.public_url,
        db,
        "crosstalk is serving"
    );
    // Which kinds of credentials let requests in; never their values.
    let people = running.state.relay.team().people().await?;
    let live = people.iter().filter(|p| p.revoked_at.is_none()).count();
    let settings = &config.settings;
    tracing::info!(
        people = live,
        participants = settings.participants.len(),
        shared_token = settings.shared_token.is_some(),
        open = settings.open_when_empty && people.is_empty() && !config.has_env_credentials(),
        trusted_proxies = config.trusted_proxies.len(),
        "credentials"
    );
    // Listening: a `Type=notify` unit's start is done.
    systemd::ready(running.shutdown.clone());
    let shutdown = running.shutdown.clone();
    tokio::spawn(async move {
        listen::stop_signal().await;
        tracing::info!("shutting down: ending waits and draining connections");
        shutdown.cancel();
    });
    running.stop_when_cancelled().await?;
    tracing::info!("stopped");
    Ok(())
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

/// `crosstalk backup`: copies the SQLite file, consistently, while it may
/// be in use.
pub fn backup(database: &crate::config::Database, path: &std::path::Path) -> anyhow::Result<()> {
    if database.database_url.is_some() {
        anyhow::bail!(BACKUP_IS_SQLITES);
    }
    sqlite::backup(&database.db, path).map_err(|e| database_error(&database.db, e))?;
    Ok(())
}

/// `crosstalk restore`: puts a backup in place of the SQLite file.
pub fn restore(database: &crate::config::Database, path: &std::path::Path) -> anyhow::Result<()> {
    if database.database_url.is_some() {
        anyhow::bail!(BACKUP_IS_SQLITES);
    }
    sqlite::restore(&database.db, path).map_err(|e| database_error(&database.db, e))?;
    Ok(())
}

const BACKUP_IS_SQLITES: &str = "backup and restore copy the SQLite file; with RELAY_DATABASE_URL \
                                 set, use PostgreSQL's own (pg_dump and pg_restore)";
