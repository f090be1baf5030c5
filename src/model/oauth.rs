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
//! Nothing here reaches the network or the store: the fetch of a metadata
//! document and the grants live elsewhere.

use super::{Handle, Millis, TokenHash};
use base64::Engine;
use regex::Regex;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::IpAddr;
use std::sync::LazyLock;
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
    /// Shown on the consent page; the redirect URI is shown beside it,
    /// since anyone can call a client anything. It holds no invisible or
    /// control character (Unicode's Cc, Cf, Zl and Zp).
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
    if let Some(hidden) = submitted.client_name.as_deref().and_then(hidden_character) {
        return metadata_refusal(format!(
            "client_name must not hold invisible or control characters (bidirectional \
             controls, zero-width characters, other format characters, line breaks): it holds \
             U+{:04X}, which could make the name on the consent page read as something it \
             is not",
            u32::from(hidden)
        ));
    }
    let name = match submitted.client_name {
        Some(name) if name.chars().count() > MAX_CLIENT_NAME_LEN => {
            return metadata_refusal(format!(
                "client_name is longer than {MAX_CLIENT_NAME_LEN} characters"
            ));
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

/// Characters a client's name must not hold: controls (Unicode's Cc),
/// format characters (Cf: the bidirectional controls U+202A–U+202E and
/// U+2066–U+2069, the marks U+200E, U+200F and U+061C, the zero-width
/// U+200B–U+200D, the word joiner U+2060, the byte-order mark U+FEFF, and
/// the rest of the class) and the line and paragraph separators (Zl, Zp).
/// Each changes what a name looks like without being seen: `Claude\u{202E}…`
/// can show another app's name. Broader than the one-line rule of the
/// core's short texts, which keeps a list the API's schemas can spell.
static HIDDEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]").expect("a valid character class"));

/// The first character of `text` a client's name must not hold, if any.
fn hidden_character(text: &str) -> Option<char> {
    HIDDEN.find(text)?.as_str().chars().next()
}

/// Which clients may register or sign in (`RELAY_OAUTH_CLIENTS`): client
/// id URLs (metadata documents), callbacks (exact `https://` redirect URIs,
/// written without their scheme), host names, `loopback` for native
/// clients on this machine, `any` for everyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPolicy {
    any: bool,
    loopback: bool,
    client_ids: Vec<String>,
    callbacks: Vec<Callback>,
}

/// One `https://` redirect URI entry of the policy, kept as the plain text
/// a [`RedirectUri`] has (so matching is comparing text), at the default
/// port unless the entry names one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Callback {
    /// `host`: any path there (`https://host/` begins every one).
    Host(String),
    /// `host/path`: that URI, exactly.
    Exact(String),
    /// `host/path/*`: that prefix and one path segment more (ChatGPT's
    /// callbacks name their connector there).
    Segment(String),
}

impl Callback {
    /// The entry `host`, `host/path` or `host/path/*` (the host may carry
    /// a port), or why it is none.
    fn parse(entry: &str) -> Result<Callback, String> {
        let refused = || {
            format!(
                "{entry:?} is neither a client id URL (https://…), a callback (host/path, or \
                 host/path/* for one path segment more), a host name, \"loopback\" nor \"any\""
            )
        };
        let (named, segment) = match entry.strip_suffix("/*") {
            Some(prefix) => (format!("{prefix}/"), true),
            None => (entry.to_owned(), false),
        };
        let (authority, path) = named.split_at(named.find('/').unwrap_or(named.len()));
        if authority.is_empty() || named.contains('*') {
            return Err(refused());
        }
        let text = format!(
            "https://{}{}",
            authority.to_ascii_lowercase(),
            if path.is_empty() { "/" } else { path }
        );
        let url = Url::parse(&text).map_err(|_| refused())?;
        let plain = url.as_str() == text
            && url.username().is_empty()
            && url.password().is_none()
            && url.fragment().is_none()
            && !(segment && url.query().is_some());
        if !plain {
            return Err(format!(
                "{entry:?} is not a callback in its plain form (as a URL it reads as {:?}): \
                 write it without a default port, credentials, a fragment or dot segments",
                url.as_str()
            ));
        }
        Ok(match (path.is_empty(), segment) {
            (true, _) => Callback::Host(text),
            (false, false) => Callback::Exact(text),
            (false, true) => Callback::Segment(text),
        })
    }

    /// Whether `uri`, a redirect URI in its plain form, is this callback.
    fn admits(&self, uri: &str) -> bool {
        match self {
            Callback::Host(prefix) => uri.starts_with(prefix.as_str()),
            Callback::Exact(exact) => uri == exact,
            Callback::Segment(prefix) => uri.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
            }),
        }
    }
}

impl ClientPolicy {
    /// What the relay allows unless told otherwise: Claude Code's metadata
    /// document; claude.ai's connectors (and through them Claude Desktop
    /// and the mobile apps), by their callback on claude.ai and on
    /// claude.com; ChatGPT's connectors, by their callback and their
    /// per-connector callbacks; and clients on the person's own machine.
    pub const DEFAULT: &str = "https://claude.ai/oauth/claude-code-client-metadata,\
                               claude.ai/api/mcp/auth_callback,\
                               claude.com/api/mcp/auth_callback,\
                               chatgpt.com/connector_platform_oauth_redirect,\
                               chatgpt.com/connector/oauth/*,loopback";

    /// A comma-separated list of client id URLs (`https://…` with a path),
    /// callbacks (`host/path`, or `host/path/*`), host names (any path on
    /// them), `loopback` and `any`.
    pub fn parse(text: &str) -> Result<ClientPolicy, String> {
        let mut policy = ClientPolicy {
            any: false,
            loopback: false,
            client_ids: Vec::new(),
            callbacks: Vec::new(),
        };
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry {
                "any" => policy.any = true,
                "loopback" => policy.loopback = true,
                url if url.contains("://") => {
                    let url = ClientIdUrl::parse(url).map_err(|e| e.to_string())?;
                    policy.client_ids.push(url.as_str().to_owned());
                }
                callback => policy.callbacks.push(Callback::parse(callback)?),
            }
        }
        Ok(policy)
    }

    /// Whether a client may register or sign in: anyone under `any`; a
    /// client whose id URL is listed; or one whose every redirect URI is a
    /// listed callback, or on a listed host (or on loopback, when
    /// `loopback` is listed).
    pub fn admits(&self, client_id: Option<&str>, redirect_uris: &[RedirectUri]) -> bool {
        if self.any || client_id.is_some_and(|id| self.client_ids.iter().any(|c| c == id)) {
            return true;
        }
        !redirect_uris.is_empty()
            && redirect_uris.iter().all(|uri| {
                (self.loopback && uri.0.scheme() == "http" && is_loopback(&uri.0))
                    || self.callbacks.iter().any(|c| c.admits(uri.as_str()))
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
        // Shown whole on the consent page, the host set apart.
        for (uri, parts) in [
            (
                "https://claude.ai/api/mcp/auth_callback",
                ("https", "claude.ai", "/api/mcp/auth_callback"),
            ),
            (
                "http://[::1]:8080/cb?a=1&b=2",
                ("http", "[::1]", ":8080/cb?a=1&b=2"),
            ),
        ] {
            assert_eq!(RedirectUri::parse(uri).unwrap().parts(), parts, "{uri}");
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
            "https://chatgpt.com/connector/oauth/eaQ3VyiNzLuI",
            "http://127.0.0.1:33418/callback",
            "http://localhost:8080/cb",
        ] {
            assert!(default.admits(None, &uris(&[admitted])), "{admitted}");
        }
        for refused in [
            "https://evil.example/cb",
            "https://claude.ai.evil.example/cb",
            "https://evilclaude.ai/cb",
            // The default names callbacks, not hosts: another path, a port,
            // a query or a longer path on the same hosts is not one.
            "https://claude.ai/cb",
            "https://claude.ai/api/mcp/auth_callback/",
            "https://claude.ai/api/mcp/auth_callback?next=evil",
            "https://claude.ai/api/mcp/auth_callback2",
            "https://claude.ai:8443/api/mcp/auth_callback",
            "https://claude.com/oauth/callback",
            "https://chatgpt.com/",
            "https://chatgpt.com/connector/oauth/",
            "https://chatgpt.com/connector/oauth/a/b",
            "https://chatgpt.com/connector/oauth/a?b=c",
            "https://chatgpt.com/connector/oauth/a%20b",
            "https://chatgpt.com:8443/connector_platform_oauth_redirect",
            "https://chat.openai.com/aip/g-123/oauth/callback",
            "https://chatgpt.com/aip/g-123/oauth/callback",
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

        // An operator's own list: only what it names. A host name still
        // means any path on it (at its default port, or the one named).
        let own = ClientPolicy::parse(
            " apps.example.org , https://tools.example/client.json, Cb.Example/oauth/done, \
             tools.example:8443, many.example/c/*",
        )
        .unwrap();
        for admitted in [
            "https://apps.example.org/cb",
            "https://apps.example.org/any/path?at=all",
            "https://cb.example/oauth/done",
            "https://tools.example:8443/cb",
            "https://many.example/c/one",
        ] {
            assert!(own.admits(None, &uris(&[admitted])), "{admitted}");
        }
        for refused in [
            "https://apps.example.org:8443/cb",
            "https://cb.example/oauth/done/",
            "https://cb.example/oauth",
            "https://tools.example/cb",
            "https://many.example/c/",
            "https://many.example/d/one",
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:4567/callback",
        ] {
            assert!(!own.admits(None, &uris(&[refused])), "{refused}");
        }
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

        for (junk, says) in [
            ("not a host!", "is neither"),
            ("*", "is neither"),
            ("*.example.org", "is neither"),
            ("apps.example/*/cb", "is neither"),
            ("/cb", "is neither"),
            ("apps.example:443/cb", "plain form"),
            ("apps.example/a/../cb", "plain form"),
            ("user@apps.example/cb", "plain form"),
            ("apps.example/cb#x", "plain form"),
            ("apps.example/c?x=1/*", "plain form"),
            ("http://tools.example/client.json", "https://"),
            ("https://tools.example", "plain form"),
        ] {
            let refused = ClientPolicy::parse(junk).unwrap_err();
            assert!(refused.contains(says), "{junk}: {refused}");
        }
    }

    #[test]
    fn a_client_name_holds_nothing_invisible() {
        let named = |name: &str| {
            let body = serde_json::json!({
                "client_name": name,
                "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
            });
            ClientMetadata::registration(body.to_string().as_bytes())
        };
        assert_eq!(named(" Claude ").unwrap().name.as_deref(), Some("Claude"));
        assert_eq!(
            named("Clau\u{301}de — 日本").unwrap().name.as_deref(),
            Some("Clau\u{301}de — 日本"),
            "combining marks and other scripts are letters, not hidden"
        );
        for (class, hidden) in [
            ("bidirectional embedding and override", '\u{202A}'),
            ("bidirectional override", '\u{202E}'),
            ("bidirectional isolate", '\u{2066}'),
            ("bidirectional isolate end", '\u{2069}'),
            ("left-to-right mark", '\u{200E}'),
            ("right-to-left mark", '\u{200F}'),
            ("Arabic letter mark", '\u{061C}'),
            ("zero-width space", '\u{200B}'),
            ("zero-width non-joiner", '\u{200C}'),
            ("zero-width joiner", '\u{200D}'),
            ("word joiner", '\u{2060}'),
            ("byte-order mark", '\u{FEFF}'),
            ("other format: soft hyphen", '\u{00AD}'),
            ("other format: tag character", '\u{E0041}'),
            ("other format: interlinear annotation", '\u{FFF9}'),
            ("control", '\u{0007}'),
            ("control: C1", '\u{0085}'),
            ("line separator", '\u{2028}'),
        ] {
            let refused = named(&format!("Claude{hidden}Desktop")).unwrap_err();
            assert_eq!(refused.code(), "invalid_client_metadata", "{class}");
            let code_point = format!("U+{:04X}", u32::from(hidden));
            assert!(
                refused.description().contains(&code_point)
                    && refused
                        .description()
                        .contains("must not hold invisible or control characters"),
                "{class}: {refused:?}"
            );
            // A metadata document's name is held to the same rule.
            let url = ClientIdUrl::parse("https://c.example/client.json").unwrap();
            let document = serde_json::json!({
                "client_id": url.as_str(),
                "client_name": format!("Claude{hidden}"),
                "redirect_uris": ["https://c.example/cb"],
            });
            let refused =
                ClientMetadata::document(&url, document.to_string().as_bytes()).unwrap_err();
            assert!(refused.description().contains(&code_point), "{class}");
        }
    }
}
