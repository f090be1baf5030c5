//! The process: building a relay from its configuration, serving it on
//! real sockets, and running each command with what it needs.
//!
//! [`spawn`] is the one way to start a relay: `crosstalk serve`, the demo,
//! the benchmarks and the tests all run the same thing, on a real socket.
//! This is the one module that puts the pieces together: it opens the
//! store, makes the core, builds the app, binds listeners (with TLS), and
//! starts the relay's background work. Nothing else names the store's
//! implementation.

mod bounds;
pub mod check;
mod database;
mod listen;

use database::database_error;
pub use database::{open_store, open_team};
pub use listen::{FIRST_REQUEST_TIMEOUT, HEADER_READ_TIMEOUT, MAX_HEADER_BYTES, SHUTDOWN_GRACE};

use crate::cli::{Cli, Command};
use crate::config::{Config, ConfigError, Connections, Tls};
use crate::layers::limits::{self, RateLimits};
use crate::mcp::{ClientMistakes, McpEdge};
use crate::relay::Relay;
use crate::state::AppState;
use crate::store::{
    Store, StoreError,
    sqlite::{self, ServingLock},
};
use crate::tls::{self, TlsError};
use crate::{app, cli, demo};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use bounds::{Bounded, ConnectionBounds};
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
}

/// Runs a command of the `crosstalk` binary.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    restrict_new_files();
    match cli.command {
        Command::Serve(args) => serve(Config::from_args(&args)?).await,
        Command::Check(args) => {
            let findings = check::check(&args).await;
            for finding in &findings {
                println!("{finding}");
            }
            let failed = findings
                .iter()
                .filter(|f| f.level == check::Level::Fail)
                .count();
            match failed {
                0 => Ok(()),
                n => anyhow::bail!("{n} problem(s) would stop `crosstalk serve`; see FAIL above"),
            }
        }
        Command::Admin(command) => {
            let team = open_team(command.database(), !command.reads_only()).await?;
            cli::admin(&team, command).await
        }
        Command::Backup { database, .. } | Command::Restore { database, .. }
            if database.database_url.is_some() =>
        {
            anyhow::bail!(
                "backup and restore copy the SQLite file; with RELAY_DATABASE_URL set, \
                 use PostgreSQL's own (pg_dump and pg_restore)"
            )
        }
        Command::Backup { database, path } => {
            sqlite::backup(&database.db, &path).map_err(|e| database_error(&database.db, e))?;
            println!("Copied {} to {}.", database.db.display(), path.display());
            Ok(())
        }
        Command::Restore { database, path } => {
            sqlite::restore(&database.db, &path).map_err(|e| database_error(&database.db, e))?;
            println!(
                "Restored {} from {}; start the relay again.",
                database.db.display(),
                path.display()
            );
            Ok(())
        }
        Command::MigrateToPostgres { database } => database::migrate_to_postgres(&database).await,
        Command::Bridge { url, token } => {
            // The bridge reaches the relay over HTTPS.
            crate::tls::install_crypto_provider();
            crate::bridge::run(url, token).await
        }
        Command::Demo => {
            let dir = tempfile::tempdir()?;
            let running = spawn(Config::local(dir.path().join("relay.db"))).await?;
            let url = running.url();
            let relay = running.state.relay.clone();
            demo::run(&url, relay.team(), async move { running.stop().await }).await
        }
    }
}

/// The log filter when `RUST_LOG` says nothing.
/// (ACME's own progress shows too: `rustls_acme` is held at info, below.)
pub const DEFAULT_LOG: &str = "crosstalk=info,warn";

/// Libraries that log what passes through them (message bodies, headers,
/// a statement's parameters: bodies, token hashes, keys, the ACME account)
/// at their debug and trace levels; they are held at info whatever
/// `RUST_LOG` asks, so no body, credential or key reaches the log at any
/// level.
const CAPPED_LOGS: &[&str] = &[
    "rmcp",
    "h2",
    "hyper",
    "hyper_util",
    "reqwest",
    "tower_http",
    "tokio_postgres",
    "postgres_protocol",
    "deadpool_postgres",
    "rustls_acme",
];

/// The log filter for what `RUST_LOG` asked for: its directives for the
/// capped libraries are dropped, and theirs capped at info.
pub fn log_filter(requested: Option<&str>) -> String {
    let requested = requested
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or(DEFAULT_LOG);
    let mut directives: Vec<String> = requested
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let target = d.split(['=', '[']).next().unwrap_or("");
            !CAPPED_LOGS
                .iter()
                .any(|capped| target == *capped || target.starts_with(&format!("{capped}::")))
        })
        .map(str::to_owned)
        .collect();
    directives.extend(CAPPED_LOGS.iter().map(|capped| format!("{capped}=info")));
    directives.join(",")
}

/// Starts logging to stderr: `requested` (RUST_LOG) through
/// [`log_filter`], and without the warnings that are a client's mistake
/// ([`ClientMistakes`], rmcp's).
pub fn start_logging(requested: Option<&str>) {
    use tracing_subscriber::{
        EnvFilter, Layer, filter::FilterExt, layer::SubscriberExt, util::SubscriberInitExt,
    };
    let filter = EnvFilter::try_new(log_filter(requested))
        .unwrap_or_else(|_| EnvFilter::new(log_filter(None)));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter.and(ClientMistakes));
    tracing_subscriber::registry().with(output).init();
}

/// Files and folders crosstalk creates (the database, its WAL, the ACME
/// account, keys and certificates) are for its own user only, whatever the
/// umask it was started with. The umask is the process's, so this holds for
/// files that libraries create too.
pub fn restrict_new_files() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Opens the store and checks that the configuration is safe to serve.
async fn build(
    config: Config,
    shutdown: CancellationToken,
) -> Result<(AppState, Arc<dyn Store>), StartError> {
    let store = open_store(&config.db, config.database_url.as_ref(), true).await?;
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
    let state = AppState {
        relay,
        limits: Arc::new(RateLimits::new(&config.limits)),
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
    let (state, store) = build(config, shutdown.clone()).await?;
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
            // Relays sharing a PostgreSQL store share its certificate.
            let shared = config.database_url.is_some().then(|| store.clone());
            let (server, ready) = tls::start_acme(acme, shared, shutdown.clone())?;
            certificate_ready = Some(ready);
            Some(RustlsConfig::from_config(server))
        }
    };
    let bounded = Bounded {
        bounds: ConnectionBounds::new(config.connections, config.trusted_proxies.clone()),
    };
    let redirect_addr = match config.http_listen {
        Some(http_listen) => {
            let (server, bound) = listen::listen(http_listen, &shutdown)?;
            let server = server.acceptor(Bounded {
                bounds: ConnectionBounds::new(
                    Connections::redirector(config.connections.idle),
                    config.trusted_proxies.clone(),
                ),
            });
            let app = tls::redirect_router(&config, addr.port()).into_make_service();
            tokio::spawn(async move { server.serve(app).await });
            Some(bound)
        }
        None => None,
    };

    let maintenance = tokio::spawn(state.relay.clone().run_maintenance());
    tokio::spawn(state.relay.clone().watch_credentials());
    let mcp = McpEdge::new(&state);
    tokio::spawn(mcp.clone().end_revoked(shutdown.clone()));
    tokio::spawn(prune_limits(state.limits.clone(), shutdown.clone()));
    let sessions = tokio::spawn(mcp.clone().upkeep(shutdown.clone()));

    let app = app::router(state.clone(), &mcp).into_make_service_with_connect_info::<SocketAddr>();
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

/// `crosstalk serve`: runs until SIGINT or SIGTERM, then drains.
async fn serve(config: Config) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_filter_caps_libraries_that_log_bodies() {
        assert_eq!(
            log_filter(Some("trace")),
            "trace,rmcp=info,h2=info,hyper=info,hyper_util=info,reqwest=info,tower_http=info,\
             tokio_postgres=info,postgres_protocol=info,deadpool_postgres=info,rustls_acme=info"
        );
        assert!(
            log_filter(Some("debug,tokio_postgres=trace")).contains("tokio_postgres=info"),
            "statements' parameters are bodies and keys"
        );
        assert!(!log_filter(Some("debug,rmcp=trace,rmcp::transport=debug")).contains("trace"));
        assert!(log_filter(None).starts_with(DEFAULT_LOG));
    }
}
