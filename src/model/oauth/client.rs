//! Which clients may come: what a client registers or its metadata
//! document says, checked ([`ClientMetadata`]), and the operator's policy
//! ([`ClientPolicy`]).

use super::{
    ClientIdUrl, MAX_CLIENT_NAME_LEN, MAX_REDIRECT_URIS, OAuthRefusal, RedirectUri, is_loopback,
};
use regex::Regex;
use serde::Deserialize;
use std::sync::LazyLock;
use url::Url;

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
