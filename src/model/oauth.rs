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
//!   authorization-code and refresh grants only.
//!
//! Nothing here reaches the network or the store: the fetch of a metadata
//! document and the grants live elsewhere.

use super::{Handle, Millis, TokenHash};
use base64::Engine;
use serde::Deserialize;
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

    /// The host it sends the person to, shown in full on the consent page.
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
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

/// What a client registers (RFC 7591 §2), or what its metadata document
/// says; fields crosstalk does not use are ignored.
#[derive(Debug, Deserialize)]
struct Submitted {
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    redirect_uris: Option<Vec<String>>,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
    #[serde(default)]
    client_secret: Option<serde_json::Value>,
}

/// A public client's metadata, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadata {
    /// Shown on the consent page; the redirect host is shown beside it,
    /// since anyone can call a client anything.
    pub name: Option<String>,
    pub redirect_uris: Vec<RedirectUri>,
    /// Whether it asked for refresh tokens.
    pub refreshes: bool,
}

/// Why metadata was refused, with the error code RFC 7591 §3.2.2 names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRefusal {
    /// `invalid_redirect_uri`
    RedirectUri(OAuthRefusal),
    /// `invalid_client_metadata`
    Metadata(OAuthRefusal),
}

impl MetadataRefusal {
    /// The `error` code of the answer.
    pub fn code(&self) -> &'static str {
        match self {
            MetadataRefusal::RedirectUri(_) => "invalid_redirect_uri",
            MetadataRefusal::Metadata(_) => "invalid_client_metadata",
        }
    }

    pub fn description(&self) -> &str {
        match self {
            MetadataRefusal::RedirectUri(why) | MetadataRefusal::Metadata(why) => &why.0,
        }
    }
}

impl ClientMetadata {
    /// A Dynamic Client Registration request's body.
    ///
    /// A client that asks to be confidential (`client_secret_post` or
    /// `client_secret_basic`; claude.ai's connectors are reported to ask for
    /// the first) is registered as the public client it can be here, and
    /// the response says `none`: RFC 7591 §3.2.1 lets the server replace
    /// what a client asks for.
    pub fn registration(body: &[u8]) -> Result<ClientMetadata, MetadataRefusal> {
        let mut submitted = parse_submitted(body)?;
        if submitted.client_id.is_some() {
            return metadata_refusal("client_id is assigned by the server, not registered");
        }
        if matches!(
            submitted.token_endpoint_auth_method.as_deref(),
            Some("client_secret_post" | "client_secret_basic")
        ) {
            submitted.token_endpoint_auth_method = None;
        }
        check(submitted)
    }

    /// A Client ID Metadata Document fetched from `url`: its `client_id`
    /// must be that URL, exactly.
    pub fn document(url: &ClientIdUrl, body: &[u8]) -> Result<ClientMetadata, MetadataRefusal> {
        let submitted = parse_submitted(body)?;
        match submitted.client_id.as_deref() {
            Some(id) if id == url.as_str() => check(submitted),
            Some(id) => metadata_refusal(format!(
                "the document's client_id {id:?} is not its URL {:?}",
                url.as_str()
            )),
            None => metadata_refusal("the document has no client_id"),
        }
    }
}

fn metadata_refusal<T>(why: impl Into<String>) -> Result<T, MetadataRefusal> {
    Err(MetadataRefusal::Metadata(OAuthRefusal(why.into())))
}

fn parse_submitted(body: &[u8]) -> Result<Submitted, MetadataRefusal> {
    serde_json::from_slice(body).or_else(|e| {
        metadata_refusal(format!(
            "the metadata is not a JSON object of the RFC 7591 fields: {e}"
        ))
    })
}

fn check(submitted: Submitted) -> Result<ClientMetadata, MetadataRefusal> {
    // Public clients only: a secret would sit on a person's machine or in a
    // browser, and PKCE already binds the code to whoever started.
    match submitted.token_endpoint_auth_method.as_deref() {
        None | Some("none") => {}
        Some(other) => {
            return metadata_refusal(format!(
                "token_endpoint_auth_method {other:?} is not supported: this server takes public \
                 clients (\"none\") with PKCE"
            ));
        }
    }
    if submitted.client_secret.is_some() {
        return metadata_refusal("a public client has no client_secret");
    }
    let grants = submitted
        .grant_types
        .unwrap_or_else(|| vec!["authorization_code".to_owned()]);
    if let Some(other) = grants
        .iter()
        .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return metadata_refusal(format!(
            "grant_types {other:?} is not supported: authorization_code and refresh_token are"
        ));
    }
    if !grants.iter().any(|g| g == "authorization_code") {
        return metadata_refusal("grant_types must include authorization_code");
    }
    let responses = submitted
        .response_types
        .unwrap_or_else(|| vec!["code".to_owned()]);
    if responses != ["code"] {
        return metadata_refusal("response_types must be [\"code\"]");
    }
    let name = match submitted.client_name {
        Some(name) if name.chars().count() > MAX_CLIENT_NAME_LEN => {
            return metadata_refusal(format!(
                "client_name is longer than {MAX_CLIENT_NAME_LEN} characters"
            ));
        }
        Some(name) if name.chars().any(char::is_control) => {
            return metadata_refusal("client_name must not hold control characters");
        }
        Some(name) if !name.trim().is_empty() => Some(name.trim().to_owned()),
        _ => None,
    };
    let uris = submitted.redirect_uris.unwrap_or_default();
    if uris.is_empty() {
        return Err(MetadataRefusal::RedirectUri(OAuthRefusal(
            "redirect_uris must name at least one URI".into(),
        )));
    }
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(MetadataRefusal::RedirectUri(OAuthRefusal(format!(
            "redirect_uris may name at most {MAX_REDIRECT_URIS} URIs"
        ))));
    }
    let redirect_uris = uris
        .iter()
        .map(|uri| RedirectUri::parse(uri))
        .collect::<Result<Vec<_>, _>>()
        .map_err(MetadataRefusal::RedirectUri)?;
    Ok(ClientMetadata {
        name,
        redirect_uris,
        refreshes: grants.iter().any(|g| g == "refresh_token"),
    })
}

/// Which clients may register or sign in (`RELAY_OAUTH_CLIENTS`): client
/// id URLs (metadata documents) and redirect hosts, `loopback` for native
/// clients on this machine, `any` for everyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPolicy {
    any: bool,
    loopback: bool,
    client_ids: Vec<String>,
    hosts: Vec<String>,
}

impl ClientPolicy {
    /// What the relay allows unless told otherwise: claude.ai (and through
    /// it Claude Desktop and the mobile apps), Claude Code's metadata
    /// document, ChatGPT, and clients on the person's own machine.
    pub const DEFAULT: &str = "https://claude.ai/oauth/claude-code-client-metadata,claude.ai,\
                               claude.com,chatgpt.com,chat.openai.com,loopback";

    /// A comma-separated list of client id URLs (`https://…` with a path),
    /// redirect host names, `loopback` and `any`.
    pub fn parse(text: &str) -> Result<ClientPolicy, String> {
        let mut policy = ClientPolicy {
            any: false,
            loopback: false,
            client_ids: Vec::new(),
            hosts: Vec::new(),
        };
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry {
                "any" => policy.any = true,
                "loopback" => policy.loopback = true,
                url if url.contains("://") => {
                    let url = ClientIdUrl::parse(url).map_err(|e| e.to_string())?;
                    policy.client_ids.push(url.as_str().to_owned());
                }
                host => {
                    let valid = host.len() <= 253
                        && host
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
                    if !valid {
                        return Err(format!(
                            "{host:?} is neither a client id URL (https://…), a host name, \
                             \"loopback\" nor \"any\""
                        ));
                    }
                    policy.hosts.push(host.to_ascii_lowercase());
                }
            }
        }
        Ok(policy)
    }

    /// Whether a client may register or sign in: anyone under `any`; a
    /// client whose id URL is listed; or one whose every redirect URI goes
    /// to a listed host (or to loopback, when `loopback` is listed).
    pub fn admits(&self, client_id: Option<&str>, redirect_uris: &[RedirectUri]) -> bool {
        if self.any || client_id.is_some_and(|id| self.client_ids.iter().any(|c| c == id)) {
            return true;
        }
        !redirect_uris.is_empty()
            && redirect_uris.iter().all(|uri| {
                (self.loopback && uri.0.scheme() == "http" && is_loopback(&uri.0))
                    || (uri.0.scheme() == "https" && self.hosts.iter().any(|h| h == uri.host()))
            })
    }
}

/// A grant's id: the store's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrantId(pub i64);

impl fmt::Display for GrantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A client registered by Dynamic Client Registration, as stored. (A
/// client known by its metadata document is fetched, never stored.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    pub client_id: String,
    pub name: Option<String>,
    /// Each as registered, checked by [`RedirectUri::parse`].
    pub redirect_uris: Vec<String>,
    pub registered_at: Millis,
}

/// What a person allowed on the consent page: what an authorization code
/// stands for, and then what the grant made from it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub handle: Handle,
    pub client_id: String,
    /// Shown on the page's list of grants.
    pub client_name: String,
    /// The redirect URI the code was sent to, exactly.
    pub redirect_uri: String,
    /// The PKCE challenge (S256) the code's verifier must match.
    pub challenge: String,
    /// The resource (RFC 8707) every token of the grant is for.
    pub resource: String,
    pub scope: String,
}

/// A person's standing permission for one client, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: GrantId,
    pub handle: Handle,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub scope: String,
    pub resource: String,
    pub created_at: Millis,
    /// When its tokens were last refreshed (its creation at first).
    pub used_at: Millis,
}

/// The hashes of a new access and refresh token, with when each ends: a
/// grant's tokens, which replace the ones before them whole.
#[derive(Debug, Clone, Copy)]
pub struct GrantTokens {
    pub access: TokenHash,
    pub access_expires: Millis,
    pub refresh: TokenHash,
    pub refresh_expires: Millis,
    /// The hash of the refresh token's family (`model::refresh_family`),
    /// which every refresh token of the grant shares: a refresh token of
    /// the grant's presented after it was replaced is known by it.
    pub family: TokenHash,
}

/// A grant still standing, with its access token if not yet expired: what
/// the core holds in memory to tell who an access token belongs to. One
/// per grant, however often it was refreshed.
#[derive(Debug, Clone)]
pub struct LiveGrant {
    pub id: GrantId,
    pub handle: Handle,
    pub resource: String,
    pub access: Option<(TokenHash, Millis)>,
}

/// What presenting an authorization code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// First use, before it expired: what it stands for.
    Fresh(Authorization),
    /// Used before: the grant made from it, if any, has been ended.
    Reused,
    /// Unknown or expired.
    Unknown,
}

/// What presenting a refresh token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// Rotated: the new tokens replace the grant's (its access token stops
    /// working at once). The presented one was its current refresh token,
    /// or the one that replaced it, again within the grace (a retry).
    Rotated {
        grant: Grant,
        /// How many times the grant has been refreshed, this one included.
        generation: u64,
        /// The store's credentials revision just after the rotation (which
        /// moved it by one), so the relay that refreshed can bring its
        /// memory up to it without reading everything again.
        revision: u64,
    },
    /// A refresh token of the grant's used before (replaced, and past the
    /// grace): someone holds a copy, so the whole grant has ended.
    Reused,
    /// Unknown, expired, or another client's.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 appendix B's example.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn pkce_takes_s256_and_the_right_verifier_only() {
        let challenge = CodeChallenge::parse(CHALLENGE, Some("S256")).unwrap();
        assert!(challenge.verifies(VERIFIER));
        assert!(!challenge.verifies(&VERIFIER.replace('d', "e")));
        assert!(
            !challenge.verifies(CHALLENGE),
            "the challenge is no verifier"
        );
        assert!(!challenge.verifies(""));
        assert!(!challenge.verifies(&format!("{VERIFIER} ")));
        for (method, says) in [
            (Some("plain"), "\"plain\" is not supported"),
            (None, "is required"),
        ] {
            let refused = CodeChallenge::parse(CHALLENGE, method).unwrap_err();
            assert!(refused.0.contains(says), "{refused}");
        }
        for bad in [
            "",
            "short",
            &format!("{CHALLENGE}A"),
            &CHALLENGE.replace('-', "+"),
        ] {
            assert!(CodeChallenge::parse(bad, Some("S256")).is_err(), "{bad}");
        }
    }

    #[test]
    fn redirect_uris_are_https_or_loopback_and_matched_exactly() {
        for good in [
            "https://claude.ai/api/mcp/auth_callback",
            "https://chatgpt.com/connector_platform_oauth_redirect",
            "http://127.0.0.1:33418/callback",
            "http://localhost:5173/oauth/callback?x=1",
            "http://[::1]:8080/cb",
        ] {
            assert_eq!(RedirectUri::parse(good).unwrap().as_str(), good);
        }
        for (bad, says) in [
            (
                "http://example.com/cb",
                "must be https://, or http:// on a loopback",
            ),
            ("https://claude.ai/cb#frag", "must not have a fragment"),
            ("https://user:pw@claude.ai/cb", "user name or password"),
            ("https://claude.ai/a/../cb", "plain form"),
            ("https://Claude.AI/cb", "plain form"),
            ("https://claude.ai:443/cb", "plain form"),
            ("javascript:alert(1)", "no host"),
            ("cursor://anysphere/cb", "scheme is not accepted"),
            ("/cb", "not an absolute URL"),
        ] {
            let refused = RedirectUri::parse(bad).unwrap_err();
            assert!(refused.0.contains(says), "{bad}: {refused}");
        }
        let registered = RedirectUri::parse("https://claude.ai/api/mcp/auth_callback").unwrap();
        let asked = |uri: &str| registered.admits(&RedirectUri::parse(uri).unwrap());
        assert!(asked("https://claude.ai/api/mcp/auth_callback"));
        assert!(!asked("https://claude.ai/api/mcp/auth_callback/"));
        assert!(!asked("https://claude.ai/api/mcp/auth_callback?next=evil"));
        assert!(!asked("https://claude.ai:8443/api/mcp/auth_callback"));
        assert!(!asked("https://claude.ai.evil.com/api/mcp/auth_callback"));
        let loopback = RedirectUri::parse("http://127.0.0.1:33418/callback").unwrap();
        let asked = |uri: &str| loopback.admits(&RedirectUri::parse(uri).unwrap());
        assert!(
            asked("http://127.0.0.1:40001/callback"),
            "any port on loopback"
        );
        assert!(!asked("http://127.0.0.1:40001/other"));
        assert!(
            !asked("http://localhost:33418/callback"),
            "the host as registered"
        );
    }

    #[test]
    fn a_registration_is_a_public_client_with_checked_redirects() {
        let taken = ClientMetadata::registration(
            br#"{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],
                 "grant_types":["authorization_code","refresh_token"],"response_types":["code"],
                 "token_endpoint_auth_method":"none","logo_uri":"https://claude.ai/logo.png"}"#,
        )
        .unwrap();
        assert_eq!(taken.name.as_deref(), Some("Claude"));
        assert!(taken.refreshes);
        assert_eq!(taken.redirect_uris[0].host(), "claude.ai");
        // Asking to be confidential, as claude.ai's connectors are reported to:
        // taken as a public client.
        for method in ["client_secret_post", "client_secret_basic"] {
            let body = format!(
                r#"{{"redirect_uris":["https://claude.ai/api/mcp/auth_callback"],
                     "token_endpoint_auth_method":"{method}"}}"#
            );
            assert!(
                ClientMetadata::registration(body.as_bytes()).is_ok(),
                "{method}"
            );
            let document = ClientIdUrl::parse("https://c.example/client.json").unwrap();
            let body = format!(
                r#"{{"client_id":"https://c.example/client.json",
                     "redirect_uris":["https://c.example/cb"],
                     "token_endpoint_auth_method":"{method}"}}"#
            );
            assert!(
                ClientMetadata::document(&document, body.as_bytes()).is_err(),
                "a metadata document has no secret to keep: {method}"
            );
        }
        for (body, code, says) in [
            (
                r#"{"redirect_uris":["http://evil.example/cb"]}"#,
                "invalid_redirect_uri",
                "loopback",
            ),
            (
                r#"{"redirect_uris":[]}"#,
                "invalid_redirect_uri",
                "at least one",
            ),
            (r#"{}"#, "invalid_redirect_uri", "at least one"),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}"#,
                "invalid_client_metadata",
                "public clients",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}"#,
                "invalid_client_metadata",
                "\"client_credentials\" is not supported",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}"#,
                "invalid_client_metadata",
                "response_types",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"client_id":"mine"}"#,
                "invalid_client_metadata",
                "assigned by the server",
            ),
            (
                r#"{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0007b"}"#,
                "invalid_client_metadata",
                "control characters",
            ),
            (
                r#"["not", "an object"]"#,
                "invalid_client_metadata",
                "JSON object",
            ),
        ] {
            let refused = ClientMetadata::registration(body.as_bytes()).unwrap_err();
            assert_eq!(refused.code(), code, "{body}");
            assert!(refused.description().contains(says), "{body}: {refused:?}");
        }
    }

    #[test]
    fn a_metadata_document_names_its_own_url() {
        let url =
            ClientIdUrl::parse("https://claude.ai/oauth/claude-code-client-metadata").unwrap();
        let document = |id: &str| {
            format!(
                r#"{{"client_id":"{id}","client_name":"Claude Code","redirect_uris":["http://localhost:5173/callback"]}}"#
            )
        };
        let taken = ClientMetadata::document(&url, document(url.as_str()).as_bytes()).unwrap();
        assert_eq!(taken.name.as_deref(), Some("Claude Code"));
        let refused = ClientMetadata::document(
            &url,
            document("https://evil.example/oauth/claude-code-client-metadata").as_bytes(),
        )
        .unwrap_err();
        assert!(
            refused.description().contains("is not its URL"),
            "{refused:?}"
        );
        for (bad, says) in [
            ("http://claude.ai/meta", "https://"),
            ("https://claude.ai/", "must have a path"),
            ("https://claude.ai", "plain form"),
            ("https://claude.ai/meta#x", "fragment"),
            ("https://claude.ai/a/./meta", "plain form"),
        ] {
            let refused = ClientIdUrl::parse(bad).unwrap_err();
            assert!(refused.0.contains(says), "{bad}: {refused}");
        }
    }

    #[test]
    fn the_client_policy_admits_whom_it_lists_and_no_one_else() {
        let uris = |list: &[&str]| -> Vec<RedirectUri> {
            list.iter()
                .map(|u| RedirectUri::parse(u).unwrap())
                .collect()
        };
        let default = ClientPolicy::parse(ClientPolicy::DEFAULT).unwrap();
        for admitted in [
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.com/api/mcp/auth_callback",
            "https://chatgpt.com/connector_platform_oauth_redirect",
            "http://127.0.0.1:33418/callback",
            "http://localhost:8080/cb",
        ] {
            assert!(default.admits(None, &uris(&[admitted])), "{admitted}");
        }
        for refused in [
            "https://evil.example/cb",
            "https://claude.ai.evil.example/cb",
            "https://evilclaude.ai/cb",
        ] {
            assert!(!default.admits(None, &uris(&[refused])), "{refused}");
        }
        // Every redirect URI must be admitted, and a client with none is not.
        assert!(!default.admits(
            None,
            &uris(&[
                "https://claude.ai/api/mcp/auth_callback",
                "https://evil.example/cb"
            ])
        ));
        assert!(!default.admits(None, &[]));
        // A listed metadata document is admitted whatever its redirects.
        let claude_code = "https://claude.ai/oauth/claude-code-client-metadata";
        assert!(default.admits(Some(claude_code), &uris(&["https://evil.example/cb"])));
        assert!(!default.admits(
            Some("https://evil.example/client.json"),
            &uris(&["https://evil.example/cb"])
        ));

        // An operator's own list: only what it names.
        let own =
            ClientPolicy::parse(" apps.example.org , https://tools.example/client.json").unwrap();
        assert!(own.admits(None, &uris(&["https://apps.example.org/cb"])));
        assert!(!own.admits(None, &uris(&["https://claude.ai/api/mcp/auth_callback"])));
        assert!(!own.admits(None, &uris(&["http://127.0.0.1:4567/callback"])));
        assert!(own.admits(
            Some("https://tools.example/client.json"),
            &uris(&["https://elsewhere.example/cb"])
        ));
        assert!(
            !ClientPolicy::parse("")
                .unwrap()
                .admits(None, &uris(&["http://127.0.0.1:1/cb"]))
        );
        assert!(
            ClientPolicy::parse("any")
                .unwrap()
                .admits(None, &uris(&["https://evil.example/cb"]))
        );

        for junk in [
            "not a host!",
            "http://tools.example/client.json",
            "https://tools.example",
        ] {
            assert!(ClientPolicy::parse(junk).is_err(), "{junk}");
        }
    }
}
