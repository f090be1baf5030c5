//! Configuration: every flag with its environment variable (`args.rs`),
//! parsed and checked once (`checks.rs`) into a typed [`Config`]. The
//! variable names are shared with the two relays crosstalk replaces, so
//! their users' settings keep working.

mod args;
mod checks;

pub use args::{AddressArgs, Database, LimitArgs, ServeArgs, TlsArgs};

use crate::host::{Cidr, ForwardedHeader, Origin};
use crate::model::ClientPolicy;
use crate::relay::{OAuthSettings, RegistrationBudgets, Settings};
use crate::store::Durability;
use std::{net::SocketAddr, path::PathBuf, time::Duration};

/// The port used when none is given and TLS is off.
pub const DEFAULT_PORT: u16 = 8787;
/// The port used when none is given and TLS is on.
pub const DEFAULT_TLS_PORT: u16 = 443;
/// The redirecting plain listener's port when none is given and TLS is on.
pub const DEFAULT_HTTP_PORT: u16 = 80;

/// How long the OAuth consent page must have been shown before its Allow
/// is taken: a click meant for another page, landing on this one as it
/// opens (a pop-up timed to a double-click), allows nothing.
pub const CONSENT_DELAY: Duration = Duration::from_secs(1);

/// Where Let's Encrypt's directories are, by the names `RELAY_ACME_DIRECTORY` takes.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// How the relay serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// Plain HTTP: for loopback, development, or behind a proxy that terminates TLS.
    Off,
    /// A certificate chain and key from files, re-read on SIGHUP.
    Files { cert: PathBuf, key: PathBuf },
    /// Certificates from an ACME directory.
    Acme(Acme),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acme {
    pub domains: Vec<String>,
    pub email: Option<String>,
    pub directory: String,
    /// Extra roots (PEM) trusted for the directory's own HTTPS.
    pub ca: Option<PathBuf>,
    /// Where the account and certificates are kept across restarts.
    pub cache_dir: PathBuf,
}

impl Tls {
    pub fn is_on(&self) -> bool {
        *self != Tls::Off
    }
}

/// A sustained rate and a burst, both positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: std::num::NonZeroU32,
    pub burst: std::num::NonZeroU32,
}

impl Rate {
    /// `None` (no limit) for a rate of zero; a burst of zero means the rate.
    pub fn new(per_second: u32, burst: u32) -> Option<Rate> {
        let per_second = std::num::NonZeroU32::new(per_second)?;
        let burst = std::num::NonZeroU32::new(burst).unwrap_or(per_second);
        Some(Rate { per_second, burst })
    }
}

/// The limits, checked.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Per credential (person, participant, or the shared token).
    pub per_credential: Option<Rate>,
    /// Per client address, for requests without valid credentials.
    pub per_address: Option<Rate>,
}

/// A configuration that would run carelessly, refused at start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Bounds on connections, enforced as they are accepted.
#[derive(Debug, Clone, Copy)]
pub struct Connections {
    /// Open at once on the whole relay.
    pub max: usize,
    /// Open at once from one client address (an IPv6 /64; not counted for
    /// trusted proxies).
    pub per_address: usize,
    /// Of `max`, how many may be open that no credential has vouched for
    /// yet (no request authenticated on them: TLS unfinished, nothing sent,
    /// or only anonymous requests). The rest is room kept for the team.
    pub unauthenticated: usize,
    /// Of those, how many one client address may hold.
    pub unauthenticated_per_address: usize,
    /// A connection with no request in flight for this long is closed.
    pub idle: Duration,
    /// How long a client may take to send a request's line and headers.
    pub header_read: Duration,
}

/// How long a client may take to send a request's line and headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the metrics listener holds open at once: a scraper needs
/// one or two, and the rest of the process's file descriptors stay the
/// public listener's.
pub const METRICS_CONNECTIONS: usize = 16;

impl Connections {
    /// The caps, with the budgets of connections not yet vouched for taken
    /// from them: a quarter of all, and an eighth of one address's. Eight
    /// addresses that open all they may and send nothing hold half of that
    /// quarter; what is left of it takes the team's new connections, and
    /// three quarters stay for connections a credential vouched for.
    pub fn new(max: usize, per_address: usize, idle: Duration) -> Connections {
        Connections {
            max,
            per_address,
            unauthenticated: (max / 4).max(1),
            unauthenticated_per_address: (per_address / 8).max(1),
            idle,
            header_read: HEADER_READ_TIMEOUT,
        }
    }

    /// The port-80 redirector's own small budget: it takes no credential
    /// (nothing there is ever vouched for) and answers each connection with
    /// a redirect, so it needs little, and never takes the relay's room.
    pub fn redirector(idle: Duration) -> Connections {
        Connections {
            max: 256,
            per_address: 16,
            unauthenticated: 256,
            unauthenticated_per_address: 16,
            idle,
            header_read: HEADER_READ_TIMEOUT,
        }
    }

    /// The metrics listener's own small budget: it takes no credential
    /// (nothing there is vouched for), so a full one closes its oldest
    /// idle connection for a newcomer; a scraper, whose connection is busy
    /// only for a moment, always gets in, and whoever holds connections
    /// open there holds at most [`METRICS_CONNECTIONS`] descriptors.
    pub fn metrics(idle: Duration) -> Connections {
        Connections {
            max: METRICS_CONNECTIONS,
            per_address: METRICS_CONNECTIONS,
            unauthenticated: METRICS_CONNECTIONS,
            unauthenticated_per_address: METRICS_CONNECTIONS,
            idle,
            header_read: HEADER_READ_TIMEOUT,
        }
    }
}

/// Bounds on MCP sessions.
#[derive(Debug, Clone, Copy)]
pub struct Sessions {
    /// Sessions one person may hold; past it their least recently used ends.
    pub max_per_person: usize,
    /// A session unused for this long is ended.
    pub idle: Duration,
}

/// The shortest shared `RELAY_TOKEN` accepted: it may act as anyone.
pub const MIN_SHARED_TOKEN_LEN: usize = 32;

/// A PostgreSQL database's URL (`RELAY_DATABASE_URL`). Its `Debug` hides
/// it: it may hold a password, and it is never printed or logged.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL itself, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DatabaseUrl(postgres://…)")
    }
}

impl std::str::FromStr for DatabaseUrl {
    type Err = ConfigError;

    fn from_str(url: &str) -> Result<DatabaseUrl, ConfigError> {
        let url = url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(ConfigError(
                "RELAY_DATABASE_URL must be a postgres:// or postgresql:// URL \
                 (unset it to use the SQLite file RELAY_DB)"
                    .into(),
            ));
        }
        Ok(DatabaseUrl(url.to_owned()))
    }
}

/// The relay's configuration, checked. Tokens appear only as hashes, whose
/// `Debug` hides them.
#[derive(Debug, Clone)]
pub struct Config {
    /// The SQLite file.
    pub db: PathBuf,
    /// PostgreSQL instead of the SQLite file, when set.
    pub database_url: Option<DatabaseUrl>,
    /// When the SQLite file's commits reach the disk.
    pub durability: Durability,
    /// Where to listen.
    pub listen: SocketAddr,
    /// How agents reach the relay (printed by `add`; names the allowed host).
    pub public_url: String,
    /// The origin of the team page as people reach it: `public_url`'s.
    pub page_origin: Option<Origin>,
    /// Where the metrics are served (`RELAY_METRICS_ADDR`); off when `None`.
    pub metrics_listen: Option<SocketAddr>,
    /// The metrics listener's connection bounds, its own.
    pub metrics_connections: Connections,
    /// OAuth clients' metadata documents may be fetched from private
    /// addresses and plain `http://` on loopback (`RELAY_OAUTH_ALLOW_PRIVATE`).
    pub oauth_allow_private: bool,
    /// How long the consent page is shown before its Allow is taken:
    /// [`CONSENT_DELAY`], which no variable changes; tests that answer the
    /// page as fast as they run set it to zero.
    pub consent_delay: Duration,
    /// Browser origins allowed on /mcp and /api, besides the relay's own.
    pub allowed_origins: Vec<Origin>,
    /// Host names (without ports) requests may name; `None` accepts any,
    /// which only a loopback relay with no name does not need.
    pub allowed_hosts: Option<Vec<String>>,
    /// Whether and how the relay serves HTTPS.
    pub tls: Tls,
    /// Plain HTTP on a non-loopback address was allowed in so many words.
    pub allow_plain_http: bool,
    /// The plain listener that redirects to HTTPS; `None` when off.
    pub http_listen: Option<SocketAddr>,
    /// Proxies whose forwarding headers name the client's address.
    pub trusted_proxies: Vec<Cidr>,
    /// The one forwarding header those proxies append to.
    pub forwarded_header: ForwardedHeader,
    /// Rate limits.
    pub limits: Limits,
    /// How long a request that does not wait or stream may take.
    pub request_timeout: Duration,
    /// Connection bounds.
    pub connections: Connections,
    /// MCP session bounds.
    pub sessions: Sessions,
    /// The core's rules.
    pub settings: Settings,
}

impl Config {
    /// The database the relay works on, as the commands name it.
    pub fn database(&self) -> Database {
        Database {
            db: self.db.clone(),
            database_url: self.database_url.clone(),
            sqlite_sync: self.durability,
        }
    }

    /// A loopback relay on a spare port with every default of
    /// `crosstalk serve`: for tests, the demo and benchmarks, which then
    /// adjust the public fields.
    pub fn local(db: PathBuf) -> Config {
        let mut args = ServeArgs::defaults();
        args.database.db = db;
        let mut config = Config::from_args(&args).expect("the defaults are a valid configuration");
        config.listen.set_port(0);
        config
    }

    pub fn from_args(args: &ServeArgs) -> Result<Config, ConfigError> {
        let db = args.database.db.clone();
        if args.retention_days <= 0 {
            return Err(ConfigError(format!(
                "RELAY_RETENTION_DAYS is {}; it must be a positive number of days",
                args.retention_days
            )));
        }
        if args.max_body_bytes == 0 {
            return Err(ConfigError("RELAY_MAX_BODY_BYTES must be positive".into()));
        }
        let shared_token = checks::shared_token(args.token.as_deref())?;
        let participants = match &args.participants {
            Some(list) => checks::parse_participants(list)?,
            None => Vec::new(),
        };
        let listen = SocketAddr::new(args.address.host, args.address.port());
        let tls = checks::tls_mode(&db, &args.address, &args.tls)?;
        let (open_when_empty, allowed_hosts) = checks::hosts(&args.address, listen)?;
        let http_port = args::http_port(tls.is_on(), args.tls.http_port);
        let limits = &args.limits;
        checks::limits(limits)?;
        let allowed_origins = checks::origins(&args.allowed_origins)?;
        let forwarded_header = checks::forwarded_header(&args.forwarded_header)?;
        let trusted_proxies = checks::trusted_proxies(&args.trusted_proxies)?;
        Ok(Config {
            db,
            database_url: args.database.database_url.clone(),
            durability: args.database.sqlite_sync,
            listen,
            page_origin: Origin::parse(&args.address.public_url()),
            public_url: args.address.public_url(),
            allowed_origins,
            allowed_hosts,
            tls,
            allow_plain_http: args.allow_plain_http,
            http_listen: http_port.map(|port| SocketAddr::new(listen.ip(), port)),
            trusted_proxies,
            forwarded_header,
            limits: Limits {
                per_credential: Rate::new(limits.rate_per_credential, limits.burst_per_credential),
                per_address: Rate::new(limits.rate_per_address, limits.burst_per_address),
            },
            request_timeout: Duration::from_secs(limits.request_timeout_secs),
            connections: Connections::new(
                limits.max_connections,
                limits.max_connections_per_address,
                Duration::from_secs(limits.idle_connection_secs),
            ),
            sessions: Sessions {
                max_per_person: limits.max_sessions_per_person,
                idle: Duration::from_secs(limits.session_idle_secs),
            },
            settings: Settings {
                retention: Duration::from_secs(args.retention_days as u64 * 86_400),
                max_body_bytes: args.max_body_bytes,
                shared_token,
                participants,
                open_when_empty,
                max_waits_per_person: limits.max_waits_per_person,
                max_waits: limits.max_waits,
                max_bytes_per_day: limits.max_bytes_per_day,
                max_shared_senders: limits.max_shared_senders,
                push_lease: Duration::from_secs(limits.push_lease_secs),
                notify_allow_private: args.notify_allow_private,
                oauth: OAuthSettings {
                    resource: format!("{}/mcp", args.address.public_url().trim_end_matches('/')),
                    clients: ClientPolicy::parse(&args.oauth_clients)
                        .map_err(|why| ConfigError(format!("RELAY_OAUTH_CLIENTS: {why}")))?,
                    registrations: RegistrationBudgets::default(),
                },
            },
            oauth_allow_private: args.oauth_allow_private,
            consent_delay: CONSENT_DELAY,
            metrics_connections: Connections::metrics(Duration::from_secs(
                limits.idle_connection_secs,
            )),
            metrics_listen: args
                .metrics_addr
                .as_deref()
                .map(checks::metrics_addr)
                .transpose()?,
        })
    }

    /// The configuration of a relay listening at `bound`: when its port
    /// was left to the system (`:0`, which no public URL can name) and
    /// the public URL names the listening address itself, the public URL
    /// and the OAuth resource name the address bound.
    pub fn bound_to(mut self, bound: SocketAddr) -> Config {
        let names_listener = crate::host::url_host(&self.public_url)
            .is_some_and(|host| host.trim_matches(['[', ']']) == self.listen.ip().to_string());
        if self.listen.port() == 0 && names_listener {
            let scheme = if self.tls.is_on() { "https" } else { "http" };
            self.public_url = format!("{scheme}://{bound}");
            self.settings.oauth.resource = format!("{}/mcp", self.public_url);
        }
        self
    }

    /// Whether any credential is configured outside the database.
    pub fn has_env_credentials(&self) -> bool {
        self.settings.shared_token.is_some() || !self.settings.participants.is_empty()
    }

    /// Refuses a configuration that would expose the relay carelessly, now
    /// that it is known whether anyone was added (`has_people`):
    /// - no credentials at all, unless only this machine can reach it;
    /// - a non-loopback address with no public name, which would leave the
    ///   Host check (against DNS rebinding) off;
    /// - plain HTTP on a non-loopback address, unless allowed in so many
    ///   words.
    pub fn check_exposure(&self, has_people: bool) -> Result<(), ConfigError> {
        let reachable = !self.listen.ip().is_loopback() || !self.settings.open_when_empty;
        if reachable && !has_people && !self.has_env_credentials() {
            let place = if self.listen.ip().is_loopback() {
                format!("{} (published as {})", self.listen, self.public_url)
            } else {
                self.listen.to_string()
            };
            return Err(ConfigError(format!(
                "refusing to serve on {place} with no credentials: anyone who reaches it could \
                 read and send. Add a person first (crosstalk add HANDLE), or set RELAY_TOKEN or \
                 RELAY_PARTICIPANTS, or listen on 127.0.0.1 with no public name"
            )));
        }
        if self.allowed_hosts.is_none() {
            return Err(ConfigError(format!(
                "RELAY_HOST is {}, which is not loopback, and nothing names the relay: set \
                 RELAY_PUBLIC_URL (or RELAY_DOMAINS) to the address people use, so requests for \
                 any other name are refused",
                self.listen.ip()
            )));
        }
        if !self.listen.ip().is_loopback() && !self.tls.is_on() && !self.allow_plain_http {
            return Err(ConfigError(format!(
                "refusing to serve plain HTTP on {}: tokens would cross the network in the \
                 clear. Turn on TLS (RELAY_DOMAINS, or RELAY_TLS_CERT and RELAY_TLS_KEY), or, \
                 on a private network behind a proxy that terminates TLS, set \
                 RELAY_ALLOW_PLAIN_HTTP=1",
                self.listen
            )));
        }
        Ok(())
    }
}
