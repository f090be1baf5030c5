//! Configuration: every flag with its environment variable, parsed and
//! checked once into a typed [`Config`]. The variable names are shared with
//! the two relays crosstalk replaces, so their users' settings keep working.

use crate::relay::{Settings, handle::Handle, token::TokenHash};
use clap::Args;
use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

/// The port used when none is given and TLS is off.
pub const DEFAULT_PORT: u16 = 8787;
/// The port used when none is given and TLS is on.
pub const DEFAULT_TLS_PORT: u16 = 443;
/// The redirecting plain listener's port when none is given and TLS is on.
pub const DEFAULT_HTTP_PORT: u16 = 80;

/// Where the relay listens and the address people are told to use. `add`
/// and `rotate` take these too, to print the right address.
#[derive(Debug, Clone, Args)]
pub struct AddressArgs {
    /// Address to listen on.
    #[arg(long, env = "RELAY_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// Port to listen on (default 8787, or 443 with TLS).
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
    fn domains(&self) -> Vec<String> {
        self.domains
            .iter()
            .map(|d| d.trim().to_ascii_lowercase())
            .filter(|d| !d.is_empty())
            .collect()
    }

    fn tls(&self) -> bool {
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
}

/// Where Let's Encrypt's directories are, by the names `RELAY_ACME_DIRECTORY` takes.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

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

/// Everything `crosstalk serve` takes.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
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
    pub allowed_origins: Vec<String>,
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
    /// A loopback relay on a spare port with default rules: for tests, the
    /// demo and benchmarks, which then adjust the public fields.
    pub fn local(db: PathBuf) -> Config {
        Config {
            db,
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            public_url: "http://127.0.0.1".into(),
            allowed_origins: Vec::new(),
            allowed_hosts: Some(loopback_hosts()),
            tls: Tls::Off,
            http_listen: None,
            limits: Limits {
                per_credential: Rate::new(20, 200),
                per_address: Rate::new(5, 50),
            },
            settings: Settings {
                retention: Duration::from_secs(30 * 86_400),
                max_body_bytes: 65_536,
                shared_token: None,
                participants: Vec::new(),
                open_when_empty: true,
                max_waits_per_person: 16,
                max_waits: 4096,
            },
        }
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
            Some(list) => parse_participants(list)?,
            None => Vec::new(),
        };
        let listen = SocketAddr::new(args.address.host, args.address.port());
        let tls = tls_mode(&db, &args.address, &args.tls)?;
        let domains = args.address.domains();
        let mut named = domains.clone();
        if let Some(url) = &args.address.public_url {
            named.push(url_host(url).ok_or_else(|| {
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
        let http_port = match (tls.is_on(), args.tls.http_port) {
            (false, _) | (true, Some(0)) => None,
            (true, port) => Some(port.unwrap_or(DEFAULT_HTTP_PORT)),
        };
        if args.limits.max_waits == 0 || args.limits.max_waits_per_person == 0 {
            return Err(ConfigError(
                "RELAY_MAX_WAITS and RELAY_MAX_WAITS_PER_PERSON must be positive".into(),
            ));
        }
        Ok(Config {
            db,
            listen,
            public_url: args.address.public_url(),
            allowed_origins: args
                .allowed_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
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

/// Checks the TLS settings: one mode at most, whole, with readable files.
fn tls_mode(
    db: &std::path::Path,
    address: &AddressArgs,
    args: &TlsArgs,
) -> Result<Tls, ConfigError> {
    let domains = address.domains();
    let readable = |name: &str, path: &PathBuf| {
        std::fs::File::open(path)
            .map(|_| ())
            .map_err(|e| ConfigError(format!("{name} {} cannot be read: {e}", path.display())))
    };
    match (&address.tls_cert, &args.tls_key) {
        (Some(_), _) | (_, Some(_)) if !domains.is_empty() => Err(ConfigError(
            "RELAY_DOMAINS (ACME) and RELAY_TLS_CERT/RELAY_TLS_KEY (certificate files) are both set; \
             choose one"
                .into(),
        )),
        (Some(cert), Some(key)) => {
            readable("RELAY_TLS_CERT", cert)?;
            readable("RELAY_TLS_KEY", key)?;
            Ok(Tls::Files { cert: cert.clone(), key: key.clone() })
        }
        (Some(_), None) => Err(ConfigError("RELAY_TLS_CERT is set without RELAY_TLS_KEY".into())),
        (None, Some(_)) => Err(ConfigError("RELAY_TLS_KEY is set without RELAY_TLS_CERT".into())),
        (None, None) if domains.is_empty() => Ok(Tls::Off),
        (None, None) => {
            if let Some(bad) = domains.iter().find(|d| url_host(&format!("https://{d}")).as_deref() != Some(d)) {
                return Err(ConfigError(format!("RELAY_DOMAINS has {bad:?}, which is not a DNS name")));
            }
            let directory = match args.acme_directory.trim() {
                "letsencrypt" => LETS_ENCRYPT.to_owned(),
                "letsencrypt-staging" => LETS_ENCRYPT_STAGING.to_owned(),
                url if url.starts_with("https://") => url.to_owned(),
                other => {
                    return Err(ConfigError(format!(
                        "RELAY_ACME_DIRECTORY is {other:?}; use letsencrypt, letsencrypt-staging, \
                         or an https:// directory URL"
                    )));
                }
            };
            if let Some(ca) = &args.acme_ca {
                readable("RELAY_ACME_CA", ca)?;
            }
            let cache_dir = args.cache_dir.clone().unwrap_or_else(|| {
                db.parent().unwrap_or(std::path::Path::new(".")).join("acme")
            });
            Ok(Tls::Acme(Acme {
                domains,
                email: args.acme_email.clone().filter(|e| !e.trim().is_empty()),
                directory,
                ca: args.acme_ca.clone(),
                cache_dir,
            }))
        }
    }
}

/// The names of this machine's loopback interface, as a `Host` header has them.
fn loopback_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

/// The host of an `http://` or `https://` URL, lowercase, without port or brackets.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Parses `id:token,id:token`. Ids are handles; a token holds no `,` or `:`.
fn parse_participants(list: &str) -> Result<Vec<(Handle, TokenHash)>, ConfigError> {
    let mut participants: Vec<(Handle, TokenHash)> = Vec::new();
    for (index, entry) in list.split(',').map(str::trim).enumerate() {
        let position = index + 1;
        let Some((id, token)) = entry.split_once(':') else {
            return Err(ConfigError(format!(
                "RELAY_PARTICIPANTS entry {position} is not id:token (ids and tokens may not contain ',' or ':')"
            )));
        };
        if token.contains(':') {
            return Err(ConfigError(format!(
                "RELAY_PARTICIPANTS entry {position} has more than one ':' (tokens may not contain ':' or ',')"
            )));
        }
        let id = Handle::parse(id.trim())
            .map_err(|e| ConfigError(format!("RELAY_PARTICIPANTS entry {position}: {e}")))?;
        let token = token.trim();
        if token.len() < 16 {
            return Err(ConfigError(format!(
                "RELAY_PARTICIPANTS entry {position} ({id}): the token is shorter than 16 characters"
            )));
        }
        let hash = TokenHash::of(token);
        if participants
            .iter()
            .any(|(other, h)| *other == id || h.matches(&hash))
        {
            return Err(ConfigError(format!(
                "RELAY_PARTICIPANTS entry {position} ({id}) repeats an id or a token"
            )));
        }
        participants.push((id, hash));
    }
    Ok(participants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participants_parse_and_refuse_malformed_lists() {
        let ok = parse_participants("alice:0123456789abcdef,bob:fedcba9876543210").unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].0.as_str(), "alice");
        for bad in [
            "alice",
            "alice:short",
            "alice:0123456789abcdef:x",
            "Alice:0123456789abcdef",
            "alice:0123456789abcdef,alice:fedcba9876543210",
            "alice:0123456789abcdef,",
        ] {
            assert!(parse_participants(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://Relay.Example.com/"),
            Some("relay.example.com".into())
        );
        assert_eq!(
            url_host("http://relay.example.com:8787"),
            Some("relay.example.com".into())
        );
        assert_eq!(url_host("http://[::1]:8787/x"), Some("::1".into()));
        assert_eq!(url_host("relay.example.com"), None);
        assert_eq!(url_host("https://"), None);
    }

    #[test]
    fn errors_never_repeat_a_token() {
        let err = parse_participants("Alice:supersecretvalue1234").unwrap_err();
        assert!(!err.0.contains("supersecretvalue1234"));
    }
}
