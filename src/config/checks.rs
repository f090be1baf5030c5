//! The checks that turn flags into parts of a [`super::Config`]: the TLS
//! mode and the identities from the environment. Each refusal names the
//! variable to change.

use super::{
    Acme, ConfigError, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, Tls,
    args::{AddressArgs, TlsArgs},
};
use crate::host;
use crate::model::{Handle, TokenHash};
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
