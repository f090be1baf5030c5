//! The process: building a relay from its configuration, serving it on
//! real sockets, and running each command with what it needs.
//!
//! [`spawn`] is the one way to start a relay: `crosstalk serve`, the demo,
//! the benchmarks and the tests all run the same thing, on a real socket.
//! This is the one module that puts the pieces together: it opens the
//! store, makes the core, builds the app, binds listeners (with TLS), and
//! starts the relay's background work. Nothing else names the store's
//! implementation.

mod listen;

pub use listen::{FIRST_REQUEST_TIMEOUT, HEADER_READ_TIMEOUT, MAX_HEADER_BYTES, SHUTDOWN_GRACE};

use crate::cli::{Cli, Command};
use crate::config::{Config, ConfigError, Tls};
use crate::layers::{
    limits::{self, RateLimits},
    sessions::SessionOwners,
};
use crate::relay::{Relay, Team};
use crate::state::AppState;
use crate::store::{SqliteStore, Store, StoreError};
use crate::tls::{self, TlsError};
use crate::{app, cli, demo};
use axum_server::{
    accept::NoDelayAcceptor,
    tls_rustls::{RustlsAcceptor, RustlsConfig},
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::{net::SocketAddr, path::Path, sync::Arc};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Runs a command of the `crosstalk` binary.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(Config::from_args(cli.db, &args)?).await,
        Command::Admin(command) => cli::admin(&open_team(&cli.db)?, command).await,
        Command::Demo => {
            let dir = tempfile::tempdir()?;
            let running = spawn(Config::local(dir.path().join("relay.db"))).await?;
            let url = running.url();
            let relay = running.state.relay.clone();
            demo::run(&url, relay.team(), async move { running.stop().await }).await
        }
    }
}

/// The team in the database at `db`, for the commands that change it while
/// a relay may be serving the same file.
pub fn open_team(db: &Path) -> Result<Team, StoreError> {
    Ok(Team::new(Arc::new(SqliteStore::open(db)?)))
}

/// Opens the store and checks that the configuration is safe to serve.
async fn build(config: Config, shutdown: CancellationToken) -> Result<AppState, StartError> {
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
    Ok(AppState {
        relay,
        sessions: Arc::new(SessionOwners::new(Arc::new(LocalSessionManager::default()))),
        limits: Arc::new(RateLimits::new(&config.limits)),
        config: Arc::new(config),
    })
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

/// Builds the relay, binds its listeners and serves it in the background.
pub async fn spawn(config: Config) -> Result<Running, StartError> {
    tls::install_crypto_provider();
    let shutdown = CancellationToken::new();
    let state = build(config, shutdown.clone()).await?;
    let config = state.config.clone();
    let (server, addr) = listen::listen(config.listen, &shutdown)?;

    let mut certificate_ready = None;
    let tls = match &config.tls {
        Tls::Off => None,
        Tls::Files { cert, key } => {
            let rustls = RustlsConfig::from_config(tls::from_files(cert, key)?);
            tokio::spawn(listen::reload_on_hangup(
                rustls.clone(),
                cert.clone(),
                key.clone(),
                shutdown.clone(),
            ));
            Some(rustls)
        }
        Tls::Acme(acme) => {
            let (server, ready) = tls::start_acme(acme, shutdown.clone())?;
            certificate_ready = Some(ready);
            Some(RustlsConfig::from_config(server))
        }
    };
    let redirect_addr = match config.http_listen {
        Some(http_listen) => {
            let (server, bound) = listen::listen(http_listen, &shutdown)?;
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
    let app = app::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
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

/// `crosstalk serve`: runs until SIGINT or SIGTERM, then drains.
async fn serve(config: Config) -> anyhow::Result<()> {
    let running = spawn(config).await?;
    let config = &running.state.config;
    let tls = match &config.tls {
        Tls::Off => "off",
        Tls::Files { .. } => "certificate files",
        Tls::Acme(_) => "ACME",
    };
    tracing::info!(
        listen = %running.addr,
        tls,
        redirect = ?running.redirect_addr,
        public_url = %config.public_url,
        db = %config.db.display(),
        "crosstalk is serving"
    );
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
