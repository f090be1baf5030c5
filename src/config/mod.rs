//! Configuration: every flag with its environment variable (`args.rs`),
//! parsed and checked once (`checks.rs`) into a typed [`Config`]. The
//! variable names are shared with the two relays crosstalk replaces, so
//! their users' settings keep working.

mod args;
mod checks;

pub use args::{AddressArgs, LimitArgs, ServeArgs, TlsArgs};

use crate::host::{self, Origin};
use crate::model::TokenHash;
use crate::relay::Settings;
use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

/// The port used when none is given and TLS is off.
pub const DEFAULT_PORT: u16 = 8787;
/// The port used when none is given and TLS is on.
pub const DEFAULT_TLS_PORT: u16 = 443;
/// The redirecting plain listener's port when none is given and TLS is on.
pub const DEFAULT_HTTP_PORT: u16 = 80;

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

/// The relay's configuration, checked. Tokens appear only as hashes.
#[derive(Clone)]
pub struct Config {
    /// The SQLite file.
    pub db: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// How agents reach the relay (printed by `add`; names the allowed host).
    pub public_url: String,
    /// Browser origins allowed on /mcp and /api, besides the relay's own.
    pub allowed_origins: Vec<Origin>,
    /// Host names (without ports) requests may name; `None` accepts any,
    /// when nothing says which name the relay has.
    pub allowed_hosts: Option<Vec<String>>,
    /// Whether and how the relay serves HTTPS.
    pub tls: Tls,
    /// The plain listener that redirects to HTTPS; `None` when off.
    pub http_listen: Option<SocketAddr>,
    /// Rate limits.
    pub limits: Limits,
    /// The core's rules.
    pub settings: Settings,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Settings holds only token hashes, whose Debug hides them too.
        f.debug_struct("Config")
            .field("db", &self.db)
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("tls", &self.tls)
            .field("http_listen", &self.http_listen)
            .field("limits", &self.limits)
            .field("settings", &self.settings)
            .finish()
    }
}

impl Config {
    /// A loopback relay on a spare port with every default of
    /// `crosstalk serve`: for tests, the demo and benchmarks, which then
    /// adjust the public fields.
    pub fn local(db: PathBuf) -> Config {
        let mut config = Config::from_args(db, &ServeArgs::defaults())
            .expect("the defaults are a valid configuration");
        config.listen.set_port(0);
        config
    }

    pub fn from_args(db: PathBuf, args: &ServeArgs) -> Result<Config, ConfigError> {
        if args.retention_days <= 0 {
            return Err(ConfigError(format!(
                "RELAY_RETENTION_DAYS is {}; it must be a positive number of days",
                args.retention_days
            )));
        }
        if args.max_body_bytes == 0 {
            return Err(ConfigError("RELAY_MAX_BODY_BYTES must be positive".into()));
        }
        let shared_token = match args.token.as_deref().map(str::trim) {
            Some("") => return Err(ConfigError("RELAY_TOKEN is set but empty".into())),
            Some(token) => Some(TokenHash::of(token)),
            None => None,
        };
        let participants = match &args.participants {
            Some(list) => checks::parse_participants(list)?,
            None => Vec::new(),
        };
        let listen = SocketAddr::new(args.address.host, args.address.port());
        let tls = checks::tls_mode(&db, &args.address, &args.tls)?;
        let domains = args.address.domains();
        let mut named = domains.clone();
        if let Some(url) = &args.address.public_url {
            named.push(host::url_host(url).ok_or_else(|| {
                ConfigError(format!(
                    "RELAY_PUBLIC_URL {url:?} is not an http:// or https:// URL with a host"
                ))
            })?);
        }
        let allowed_hosts = if !named.is_empty() {
            Some(loopback_hosts().into_iter().chain(named).collect())
        } else if listen.ip().is_loopback() {
            Some(loopback_hosts())
        } else {
            None
        };
        let http_port = args::http_port(tls.is_on(), args.tls.http_port);
        if args.limits.max_waits == 0 || args.limits.max_waits_per_person == 0 {
            return Err(ConfigError(
                "RELAY_MAX_WAITS and RELAY_MAX_WAITS_PER_PERSON must be positive".into(),
            ));
        }
        let allowed_origins = args
            .allowed_origins
            .iter()
            .map(|o| o.trim())
            .filter(|o| !o.is_empty())
            .filter_map(Origin::parse)
            .collect();
        Ok(Config {
            db,
            listen,
            public_url: args.address.public_url(),
            allowed_origins,
            allowed_hosts,
            tls,
            http_listen: http_port.map(|port| SocketAddr::new(listen.ip(), port)),
            limits: Limits {
                per_credential: Rate::new(
                    args.limits.rate_per_credential,
                    args.limits.burst_per_credential,
                ),
                per_address: Rate::new(args.limits.rate_per_address, args.limits.burst_per_address),
            },
            settings: Settings {
                retention: Duration::from_secs(args.retention_days as u64 * 86_400),
                max_body_bytes: args.max_body_bytes,
                shared_token,
                participants,
                open_when_empty: listen.ip().is_loopback(),
                max_waits_per_person: args.limits.max_waits_per_person,
                max_waits: args.limits.max_waits,
            },
        })
    }

    /// Whether any credential is configured outside the database.
    pub fn has_env_credentials(&self) -> bool {
        self.settings.shared_token.is_some() || !self.settings.participants.is_empty()
    }
}

/// The names of this machine's loopback interface, as a `Host` header has them.
fn loopback_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}
