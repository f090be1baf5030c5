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

/// Where the relay listens and the address people are told to use.
#[derive(Debug, Clone, Args)]
pub struct AddressArgs {
    /// Address to listen on.
    #[arg(long, env = "RELAY_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// Port to listen on.
    #[arg(long, env = "RELAY_PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The address agents use to reach the relay, printed by `add` and
    /// `rotate` (default: http://HOST:PORT).
    #[arg(long, env = "RELAY_PUBLIC_URL")]
    pub public_url: Option<String>,
}

impl AddressArgs {
    /// The public URL, without a trailing slash.
    pub fn public_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{}", SocketAddr::new(self.host, self.port)),
        }
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
    /// Whether the relay serves HTTPS (its own origin's scheme; HSTS).
    pub tls: bool,
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
            tls: false,
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
        let listen = SocketAddr::new(args.address.host, args.address.port);
        let allowed_hosts = match &args.address.public_url {
            Some(url) => {
                let host = url_host(url).ok_or_else(|| {
                    ConfigError(format!(
                        "RELAY_PUBLIC_URL {url:?} is not an http:// or https:// URL with a host"
                    ))
                })?;
                let mut hosts = loopback_hosts();
                hosts.push(host);
                Some(hosts)
            }
            None if listen.ip().is_loopback() => Some(loopback_hosts()),
            None => None,
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
            tls: false,
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
