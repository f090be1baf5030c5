//! OAuth 2.1, for the connectors that cannot send a static token
//! (claude.ai, ChatGPT): the checks the authorization server rests on, as
//! types parsed once.
//!
//! - [`CodeChallenge`]: PKCE with S256 only (RFC 7636; OAuth 2.1 §4.1.1),
//!   a verifier checked against it in constant time.
//! - [`RedirectUri`]: `https`, or `http` on a loopback address (RFC 8252
//!   §7.3), never with a fragment or credentials; matched exactly, except
//!   that a loopback URI's port may differ (a native client picks a free
//!   port at each sign-in).
//! - [`ClientIdUrl`]: a Client ID Metadata Document's URL: `https`, with a
//!   path, nothing a parser would rewrite.
//! - [`ClientMetadata`]: what a client registers (RFC 7591), or what its
//!   metadata document says: public clients only (`none`), the
//!   authorization-code and refresh grants only, a name free of invisible
//!   characters.
//! - [`ClientPolicy`]: which clients the operator lets in, by their
//!   metadata document's URL or by the callbacks they name.
//!
//!
//! The first three are here; the metadata and the policy in `client.rs`;
//! the grants' types, as the store keeps them, in `grant.rs`. Nothing here
//! reaches the network or the store: the fetch of a metadata document and
//! the grants' rules live elsewhere.

use base64::Engine;
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;
use url::Url;

/// The most redirect URIs a client may register.
pub const MAX_REDIRECT_URIS: usize = 10;
/// The longest redirect URI or client id URL taken.
pub const MAX_URL_LEN: usize = 2000;
/// The longest client name taken (it is shown on the consent page).
pub const MAX_CLIENT_NAME_LEN: usize = 100;

/// Why a part of an OAuth request was refused, in words its client's
/// developer can act on. The authorization server maps it to the error
/// code its endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthRefusal(pub String);

impl fmt::Display for OAuthRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OAuthRefusal {}

fn refuse<T>(why: impl Into<String>) -> Result<T, OAuthRefusal> {
    Err(OAuthRefusal(why.into()))
}

/// A PKCE code challenge, S256: the base64url SHA-256 of the client's
/// verifier (43 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChallenge(String);

impl CodeChallenge {
    /// The challenge and its method, as an authorization request carries
    /// them. `plain`, or no method, is refused: it protects nothing from
    /// someone who saw the request.
    pub fn parse(challenge: &str, method: Option<&str>) -> Result<CodeChallenge, OAuthRefusal> {
        match method {
            Some("S256") => {}
            Some(other) => {
                return refuse(format!(
                    "code_challenge_method {other:?} is not supported: use S256"
                ));
            }
            None => return refuse("code_challenge_method is required: use S256"),
        }
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(challenge);
        match decoded {
            Ok(hash) if hash.len() == 32 && challenge.len() == 43 => {
                Ok(CodeChallenge(challenge.to_owned()))
            }
            _ => refuse(
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
            ),
        }
    }

    /// Its text, to keep with the code.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `verifier` is the one this challenge was made from: 43 to
    /// 128 unreserved characters whose SHA-256 is the challenge. Compared
    /// in constant time.
    pub fn verifies(&self, verifier: &str) -> bool {
        let shaped = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        if !shaped {
            return false;
        }
        let hash = Sha256::digest(verifier.as_bytes());
        let made = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash);
        made.len() == self.0.len()
            && made
                .bytes()
                .zip(self.0.bytes())
                .fold(0u8, |differ, (a, b)| differ | (a ^ b))
                == 0
    }
}

/// Where an authorization answer may be sent: registered by a client, and
/// named again in each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectUri(Url);

impl RedirectUri {
    /// `https://…`, or `http://` on 127.0.0.1, `[::1]` or `localhost`; no
    /// fragment (RFC 6749 §3.1.2), no user name or password, nothing a
    /// parser would rewrite (so what is matched is what was registered).
    pub fn parse(text: &str) -> Result<RedirectUri, OAuthRefusal> {
        let url = exact_url(text, "redirect_uri")?;
        if url.fragment().is_some() {
            return refuse(format!("redirect_uri {text:?} must not have a fragment"));
        }
        match url.scheme() {
            "https" => {}
            "http" if is_loopback(&url) => {}
            "http" => {
                return refuse(format!(
                    "redirect_uri {text:?} must be https://, or http:// on a loopback address"
                ));
            }
            other => {
                return refuse(format!(
                    "redirect_uri {text:?}: the {other}: scheme is not accepted; use https:// \
                     or http:// on a loopback address"
                ));
            }
        }
        Ok(RedirectUri(url))
    }

    /// Its text, exactly as registered.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The host it sends the person to.
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }

    /// Its text in three parts, for the consent page to show it whole with
    /// the host set apart: the scheme, the host, and what follows the host
    /// (a port, the path, a query).
    pub fn parts(&self) -> (&str, &str, &str) {
        let text = self.0.as_str();
        let (scheme, host) = (self.0.scheme(), self.host());
        let rest = text
            .strip_prefix(scheme)
            .and_then(|t| t.strip_prefix("://"))
            .and_then(|t| t.strip_prefix(host));
        match rest {
            Some(rest) => (scheme, host, rest),
            // A parsed URI always reads so; shown whole if not.
            None => ("", "", text),
        }
    }

    /// Whether `requested` may be answered at this registered URI: the
    /// same text, or, for a loopback URI, the same but for its port.
    pub fn admits(&self, requested: &RedirectUri) -> bool {
        if self.0 == requested.0 {
            return true;
        }
        if !(self.0.scheme() == "http" && is_loopback(&self.0)) {
            return false;
        }
        let mut other_port = requested.0.clone();
        other_port.set_port(self.0.port()).is_ok() && other_port == self.0
    }
}

impl fmt::Display for RedirectUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client id that is the URL of its metadata document (Client ID
/// Metadata Documents): `https`, a host that is a name or a public
/// address, a path, no fragment, credentials or dot segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdUrl(Url);

impl ClientIdUrl {
    pub fn parse(text: &str) -> Result<ClientIdUrl, OAuthRefusal> {
        ClientIdUrl::parse_with(text, false)
    }

    /// As [`ClientIdUrl::parse`], but with `plain_loopback` also
    /// `http://` on a loopback address: only where the operator let
    /// metadata be fetched from private addresses (a test's own server).
    pub fn parse_with(text: &str, plain_loopback: bool) -> Result<ClientIdUrl, OAuthRefusal> {
        let url = exact_url(text, "client_id")?;
        let plain_allowed = plain_loopback && url.scheme() == "http" && is_loopback(&url);
        if url.scheme() != "https" && !plain_allowed {
            return refuse(format!("client_id {text:?} must be an https:// URL"));
        }
        if url.fragment().is_some() {
            return refuse(format!("client_id {text:?} must not have a fragment"));
        }
        if url.path() == "/" {
            return refuse(format!("client_id {text:?} must have a path"));
        }
        Ok(ClientIdUrl(url))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The host, to check against the operator's list and to resolve.
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }

    pub fn url(&self) -> &Url {
        &self.0
    }
}

/// Parses `text` as an absolute URL that a parser leaves as written: one
/// with dot segments, odd case, a default port or a missing path would
/// serialize differently, and is refused rather than matched loosely.
fn exact_url(text: &str, field: &str) -> Result<Url, OAuthRefusal> {
    if text.len() > MAX_URL_LEN {
        return refuse(format!("{field} is longer than {MAX_URL_LEN} characters"));
    }
    let Ok(url) = Url::parse(text) else {
        return refuse(format!("{field} {text:?} is not an absolute URL"));
    };
    if url.host_str().is_none_or(str::is_empty) {
        return refuse(format!("{field} {text:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refuse(format!(
            "{field} {text:?} must not carry a user name or password"
        ));
    }
    if url.as_str() != text {
        return refuse(format!(
            "{field} {text:?} is not in its plain form (it reads as {:?}): send it as written there",
            url.as_str()
        ));
    }
    Ok(url)
}

/// Whether `url`'s host is a loopback address, or `localhost`.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

mod client;
mod grant;
#[cfg(test)]
mod tests;

pub use client::{ClientMetadata, ClientPolicy, MetadataRefusal};
pub use grant::{
    Authorization, Grant, GrantId, GrantTokens, LiveGrant, Redeemed, Refreshed, RegisteredClient,
};
