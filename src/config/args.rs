//! Every flag of the commands, with its environment variable and its
//! default, written here once: [`ServeArgs::defaults`] reads these same
//! defaults for the relays that tests, the demo and the benchmarks start.

use super::{ConfigError, DEFAULT_HTTP_PORT, DEFAULT_PORT, DEFAULT_TLS_PORT, DatabaseUrl};
use crate::store::Durability;
use clap::{Args, Command, FromArgMatches};
use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
};

/// The database every command but `demo` works on.
#[derive(Debug, Clone, Args)]
pub struct Database {
    /// The SQLite file. A relative path is relative to the working
    /// directory (the service's configuration gives an absolute one).
    #[arg(long, env = "RELAY_DB", default_value = "data/relay.db")]
    pub db: PathBuf,
    /// A PostgreSQL database (postgres://…) instead of the SQLite file, for
    /// several relays on one database. Never printed: it may hold a password.
    #[arg(
        long,
        value_name = "URL",
        env = "RELAY_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<DatabaseUrl>,
    /// When the SQLite file's commits are synced to the disk: `full` at
    /// every commit (one sync per batch of messages), so what the relay
    /// acknowledged survives a power cut; `normal` at checkpoints only,
    /// which may lose the last moments of acknowledged messages to a power
    /// cut or an operating-system crash (never to a crash of the relay).
    #[arg(long, env = "RELAY_SQLITE_SYNC", value_name = "full|normal", default_value = "full",
          value_parser = parse_durability)]
    pub sqlite_sync: Durability,
}

fn parse_durability(said: &str) -> Result<Durability, String> {
    match said.to_ascii_lowercase().as_str() {
        "full" => Ok(Durability::Full),
        "normal" => Ok(Durability::Normal),
        _ => Err("RELAY_SQLITE_SYNC is full or normal".to_owned()),
    }
}

/// Where the relay listens and the address people are told to use. `add`
/// and `rotate` take these too, to print the right address.
#[derive(Debug, Clone, Args)]
pub struct AddressArgs {
    /// The address the relay listens on; with the port, the address printed
    /// for agents when RELAY_PUBLIC_URL and RELAY_DOMAINS are unset.
    #[arg(long, env = "RELAY_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// The port the relay listens on (default 8787, or 443 with TLS).
    #[arg(long, env = "RELAY_PORT")]
    pub port: Option<u16>,
    /// The address agents use to reach the relay, printed by `add` and
    /// `rotate` (default: https://FIRST_DOMAIN with ACME, else http(s)://HOST:PORT).
    #[arg(long, env = "RELAY_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Comma-separated DNS names of this relay: turns on ACME (TLS-ALPN-01).
    #[arg(long, env = "RELAY_DOMAINS", value_delimiter = ',')]
    pub domains: Vec<String>,
    /// PEM certificate chain: TLS without ACME (with RELAY_TLS_KEY).
    #[arg(long, env = "RELAY_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
}

impl AddressArgs {
    pub(super) fn domains(&self) -> Vec<String> {
        self.domains
            .iter()
            .map(|d| d.trim().to_ascii_lowercase())
            .filter(|d| !d.is_empty())
            .collect()
    }

    pub(super) fn tls(&self) -> bool {
        !self.domains().is_empty() || self.tls_cert.is_some()
    }

    /// The listening port: the one given, or the default for the mode.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(if self.tls() {
            DEFAULT_TLS_PORT
        } else {
            DEFAULT_PORT
        })
    }

    /// The public URL, without a trailing slash.
    pub fn public_url(&self) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        let port = self.port();
        match self.domains().first() {
            Some(domain) if port == DEFAULT_TLS_PORT => format!("https://{domain}"),
            Some(domain) => format!("https://{domain}:{port}"),
            None if self.tls() => format!("https://{}", SocketAddr::new(self.host, port)),
            None => format!("http://{}", SocketAddr::new(self.host, port)),
        }
    }

    /// Whether nothing names the relay's address (no public URL, domains,
    /// certificate or port): the URL printed is then only the default.
    pub fn is_default(&self) -> bool {
        self.public_url.is_none()
            && self.domains().is_empty()
            && self.tls_cert.is_none()
            && self.port.is_none()
    }

    /// The URL agents are told to use, refused when they could not use it:
    /// one that names no host, or the address that means "every address"
    /// (`0.0.0.0`). A token is shown once; the lines printed with it must work.
    pub fn agent_url(&self) -> Result<String, ConfigError> {
        let url = self.public_url();
        let reachable = crate::host::url_host(&url).is_some_and(|host| {
            host.parse::<IpAddr>()
                .map_or(true, |ip| !ip.is_unspecified())
        });
        if reachable {
            Ok(url)
        } else {
            Err(ConfigError(format!(
                "{url:?} is no address an agent can reach: set RELAY_PUBLIC_URL (or \
                 RELAY_DOMAINS) to the address people use, such as https://relay.example.com"
            )))
        }
    }
}

/// TLS: certificate files or ACME. Everything `crosstalk serve` takes for it.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// PEM private key for RELAY_TLS_CERT.
    #[arg(long, env = "RELAY_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// ACME account contact (an email address).
    #[arg(long, env = "RELAY_ACME_EMAIL")]
    pub acme_email: Option<String>,
    /// `letsencrypt`, `letsencrypt-staging`, or a directory URL.
    #[arg(long, env = "RELAY_ACME_DIRECTORY", default_value = "letsencrypt")]
    pub acme_directory: String,
    /// PEM file of extra roots to trust for the ACME directory.
    #[arg(long, env = "RELAY_ACME_CA")]
    pub acme_ca: Option<PathBuf>,
    /// ACME account and certificates (default: beside the database).
    #[arg(long, env = "RELAY_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Plain listener that redirects to HTTPS (default 80 with TLS; 0: off).
    #[arg(long, env = "RELAY_HTTP_PORT")]
    pub http_port: Option<u16>,
}

/// Everything `crosstalk serve` takes.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: Database,
    #[command(flatten)]
    pub address: AddressArgs,
    /// Days until a message expires.
    #[arg(
        long,
        env = "RELAY_RETENTION_DAYS",
        default_value_t = 30,
        allow_negative_numbers = true
    )]
    pub retention_days: i64,
    /// Comma-separated browser origins allowed to call /mcp and /api.
    #[arg(long, env = "RELAY_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// A shared token not bound to anyone: may send as any sender (for services).
    #[arg(long, env = "RELAY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Identities from the environment: `id:token,id:token`.
    #[arg(long, env = "RELAY_PARTICIPANTS", hide_env_values = true)]
    pub participants: Option<String>,
    /// The largest message body, in bytes.
    #[arg(long, env = "RELAY_MAX_BODY_BYTES", default_value_t = 65536)]
    pub max_body_bytes: usize,
    /// Comma-separated CIDRs of reverse proxies whose `X-Forwarded-For` or
    /// `Forwarded` header names the client's address.
    #[arg(long, env = "RELAY_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// The header those proxies append the client's address to:
    /// `x-forwarded-for` (nginx, Caddy, Traefik, HAProxy's `option
    /// forwardfor`) or `forwarded` (RFC 7239: HAProxy's `option forwarded`).
    /// Only that one is read: the other passes through from the client.
    #[arg(
        long,
        env = "RELAY_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    pub forwarded_header: String,
    /// Serve plain HTTP on a non-loopback address (`1`): only for a private
    /// network behind a proxy that terminates TLS.
    #[arg(long, env = "RELAY_ALLOW_PLAIN_HTTP", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_plain_http: bool,
    /// Post notifications (webhooks, Web Push) to private, loopback and
    /// link-local addresses too, and to plain `http://` ones there (`1`):
    /// for tests and a private network's own ntfy.
    #[arg(long, env = "RELAY_NOTIFY_ALLOW_PRIVATE", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub notify_allow_private: bool,
    /// Serve metrics (Prometheus text) on a listener of their own: a port
    /// (on 127.0.0.1) or an address and port. Off when unset.
    #[arg(long, env = "RELAY_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Which OAuth clients may register and sign in: client id URLs
    /// (metadata documents), callbacks (`host/path`, or `host/path/*` for
    /// one path segment more), host names (any path on them), `loopback`,
    /// or `any`, comma-separated.
    #[arg(long, env = "RELAY_OAUTH_CLIENTS", default_value = crate::model::ClientPolicy::DEFAULT)]
    pub oauth_clients: String,
    /// Fetch OAuth clients' metadata documents from private, loopback and
    /// link-local addresses too, and from plain `http://` on loopback
    /// (`1`): for tests only.
    #[arg(long, env = "RELAY_OAUTH_ALLOW_PRIVATE", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub oauth_allow_private: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Rate limits and caps. The defaults never bother a normal team: an agent
/// that waits calls a few times a minute, one that works a few times a second.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Requests a second each credential may make, sustained (0: no limit).
    #[arg(long, env = "RELAY_RATE_PER_CREDENTIAL", default_value_t = 20)]
    pub rate_per_credential: u32,
    /// Requests a credential may make at once before the sustained rate applies.
    #[arg(long, env = "RELAY_BURST_PER_CREDENTIAL", default_value_t = 200)]
    pub burst_per_credential: u32,
    /// Requests a second from one client address without valid credentials
    /// (anonymous requests and failed authentication) (0: no limit).
    #[arg(long, env = "RELAY_RATE_PER_ADDRESS", default_value_t = 5)]
    pub rate_per_address: u32,
    /// Such requests one address may make at once.
    #[arg(long, env = "RELAY_BURST_PER_ADDRESS", default_value_t = 50)]
    pub burst_per_address: u32,
    /// Waits and streams one person may have open at once.
    #[arg(long, env = "RELAY_MAX_WAITS_PER_PERSON", default_value_t = 16)]
    pub max_waits_per_person: usize,
    /// Waits and streams open at once on the whole relay.
    #[arg(long, env = "RELAY_MAX_WAITS", default_value_t = 4096)]
    pub max_waits: usize,
    /// MCP sessions one person may hold; past it, their least recently used
    /// session is ended.
    #[arg(long, env = "RELAY_MAX_SESSIONS_PER_PERSON", default_value_t = 32)]
    pub max_sessions_per_person: usize,
    /// Seconds an MCP session may sit unused before it is ended.
    #[arg(long, env = "RELAY_SESSION_IDLE_SECS", default_value_t = 300)]
    pub session_idle_secs: u64,
    /// Seconds a pushed message is leased to the stream it was written to:
    /// unconfirmed by then (not read nor answered by the recipient's
    /// agent), it is offered again, to another stream or an inbox check.
    #[arg(long, env = "RELAY_PUSH_LEASE_SECS", default_value_t = 60)]
    pub push_lease_secs: u64,
    /// Connections one client address may hold open.
    #[arg(long, env = "RELAY_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 512)]
    pub max_connections_per_address: usize,
    /// Connections open at once on the whole relay.
    #[arg(long, env = "RELAY_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Seconds a connection may pass with no request in flight before it
    /// is closed (a wait or a stream is a request in flight however quiet).
    #[arg(long, env = "RELAY_IDLE_CONNECTION_SECS", default_value_t = 75)]
    pub idle_connection_secs: u64,
    /// Seconds a request that does not wait or stream may take to answer,
    /// and any request to send its body.
    #[arg(long, env = "RELAY_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,
    /// Bytes one person may have the relay keep a day: of messages (bodies,
    /// files with their names and types), and apart, of approvals (0: no limit).
    #[arg(long, env = "RELAY_MAX_BYTES_PER_DAY", default_value_t = 64 * 1024 * 1024)]
    pub max_bytes_per_day: u64,
    /// Distinct senders the shared token may name.
    #[arg(long, env = "RELAY_MAX_SHARED_SENDERS", default_value_t = 64)]
    pub max_shared_senders: usize,
}

impl ServeArgs {
    /// `crosstalk serve` with no flags and no environment: every default, as
    /// clap would fill it in.
    pub fn defaults() -> ServeArgs {
        let command =
            ServeArgs::augment_args(Command::new("serve")).mut_args(|arg| arg.env(None::<&str>));
        let matches = command
            .try_get_matches_from(["serve"])
            .expect("the defaults parse");
        ServeArgs::from_arg_matches(&matches).expect("the defaults fit ServeArgs")
    }
}

/// The port of the plain listener that redirects to HTTPS: none without
/// TLS or when turned off with 0, else the one given or the default.
pub(super) fn http_port(tls: bool, given: Option<u16>) -> Option<u16> {
    match (tls, given) {
        (false, _) | (true, Some(0)) => None,
        (true, port) => Some(port.unwrap_or(DEFAULT_HTTP_PORT)),
    }
}
