//! The checks that turn flags into parts of a [`super::Config`]: the TLS
//! mode, the names the relay answers to, the identities from the
//! environment, the limits and the proxies. Each refusal names the
//! variable to change.

use super::{
    Acme, ConfigError, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, MIN_SHARED_TOKEN_LEN, Tls,
    args::{AddressArgs, LimitArgs, TlsArgs},
};
use crate::host::{self, Cidr, ForwardedHeader, Origin};
use crate::model::{Handle, TokenHash};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Checks the TLS settings: one mode at most, whole, with readable files.
pub(super) fn tls_mode(
    db: &Path,
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
            if let Some(bad) = domains.iter().find(|d| !host::is_dns_name(d)) {
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
                db.parent().unwrap_or(Path::new(".")).join("acme")
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

/// Parses `id:token,id:token`. Ids are handles; a token holds no `,` or `:`.
pub(super) fn parse_participants(list: &str) -> Result<Vec<(Handle, TokenHash)>, ConfigError> {
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

/// The shared token's hash: long enough to act as anyone, or none.
pub(super) fn shared_token(token: Option<&str>) -> Result<Option<TokenHash>, ConfigError> {
    match token.map(str::trim) {
        Some("") => Err(ConfigError("RELAY_TOKEN is set but empty".into())),
        Some(token) if token.chars().count() < MIN_SHARED_TOKEN_LEN => Err(ConfigError(format!(
            "RELAY_TOKEN is shorter than {MIN_SHARED_TOKEN_LEN} characters; it may act as \
             anyone, so make it long and random (for example: openssl rand -hex 32). \
             A personal token from `crosstalk add` belongs in CROSSTALK_TOKEN on the \
             client, not in RELAY_TOKEN"
        ))),
        Some(token) => Ok(Some(TokenHash::of(token))),
        None => Ok(None),
    }
}

/// Whether the relay may run open (no credentials), and the `Host` names
/// it answers to (`None`: any). Open only where nobody else can reach it:
/// on a loopback address, under no name but a loopback one.
pub(super) fn hosts(
    address: &AddressArgs,
    listen: SocketAddr,
) -> Result<(bool, Option<Vec<String>>), ConfigError> {
    let mut named = address.domains();
    if let Some(url) = &address.public_url {
        named.push(host::url_host(url).ok_or_else(|| {
            ConfigError(format!(
                "RELAY_PUBLIC_URL {url:?} is not an http:// or https:// URL with a host"
            ))
        })?);
    }
    let open_when_empty =
        listen.ip().is_loopback() && named.iter().all(|name| is_loopback_name(name));
    let allowed_hosts = if !named.is_empty() {
        Some(loopback_hosts().into_iter().chain(named).collect())
    } else if listen.ip().is_loopback() {
        Some(loopback_hosts())
    } else {
        None
    };
    Ok((open_when_empty, allowed_hosts))
}

/// Every count and duration positive, and the push lease at most a day
/// (a longer one would hold an unconfirmed message from everyone else
/// that long).
pub(super) fn limits(limits: &LimitArgs) -> Result<(), ConfigError> {
    for (name, value) in [
        ("RELAY_MAX_WAITS", limits.max_waits),
        ("RELAY_MAX_WAITS_PER_PERSON", limits.max_waits_per_person),
        (
            "RELAY_MAX_SESSIONS_PER_PERSON",
            limits.max_sessions_per_person,
        ),
        ("RELAY_MAX_CONNECTIONS", limits.max_connections),
        (
            "RELAY_MAX_CONNECTIONS_PER_ADDRESS",
            limits.max_connections_per_address,
        ),
        ("RELAY_MAX_SHARED_SENDERS", limits.max_shared_senders),
        ("RELAY_SESSION_IDLE_SECS", limits.session_idle_secs as usize),
        ("RELAY_PUSH_LEASE_SECS", limits.push_lease_secs as usize),
        (
            "RELAY_IDLE_CONNECTION_SECS",
            limits.idle_connection_secs as usize,
        ),
    ] {
        if value == 0 {
            return Err(ConfigError(format!("{name} must be positive")));
        }
    }
    if limits.push_lease_secs > 86_400 {
        return Err(ConfigError(
            "RELAY_PUSH_LEASE_SECS is at most 86400 (a day)".into(),
        ));
    }
    Ok(())
}

/// The other origins whose pages may call the relay.
pub(super) fn origins(listed: &[String]) -> Result<Vec<Origin>, ConfigError> {
    each_of(listed, Origin::parse, |o| {
        format!(
            "RELAY_ALLOWED_ORIGINS has {o:?}, which is not an origin: use \
             scheme://host[:port], such as https://app.example.com"
        )
    })
}

pub(super) fn forwarded_header(named: &str) -> Result<ForwardedHeader, ConfigError> {
    ForwardedHeader::parse(named).ok_or_else(|| {
        ConfigError(format!(
            "RELAY_FORWARDED_HEADER is {named:?}: use x-forwarded-for or forwarded, the \
             header your proxy appends the client's address to"
        ))
    })
}

pub(super) fn trusted_proxies(listed: &[String]) -> Result<Vec<Cidr>, ConfigError> {
    each_of(listed, Cidr::parse, |c| {
        format!(
            "RELAY_TRUSTED_PROXIES has {c:?}, which is not an address or a CIDR \
             such as 10.0.0.0/8 or 2001:db8::/32"
        )
    })
}

/// Each non-empty item of a listed variable, parsed; the first that does
/// not parse is refused in `refusal`'s words.
fn each_of<T>(
    listed: &[String],
    parse: impl Fn(&str) -> Option<T>,
    refusal: impl Fn(&str) -> String,
) -> Result<Vec<T>, ConfigError> {
    listed
        .iter()
        .map(|item| item.trim())
        .filter(|item| !item.is_empty())
        .map(|item| parse(item).ok_or_else(|| ConfigError(refusal(item))))
        .collect()
}

/// Whether a host name is this machine's own.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The names of this machine's loopback interface, as a `Host` header has them.
fn loopback_hosts() -> Vec<String> {
    host::LOOPBACK_HOSTS.map(String::from).to_vec()
}

/// `RELAY_METRICS_ADDR`: a port, on loopback (so metrics never leave the
/// machine by accident), or an address and port the operator chose.
pub(super) fn metrics_addr(text: &str) -> Result<std::net::SocketAddr, ConfigError> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        ConfigError(format!(
            "RELAY_METRICS_ADDR is {text:?}: give a port (served on 127.0.0.1) or an address \
             and port such as 127.0.0.1:9187"
        ))
    })
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
    fn errors_never_repeat_a_token() {
        let err = parse_participants("Alice:supersecretvalue1234").unwrap_err();
        assert!(!err.0.contains("supersecretvalue1234"));
    }
}
