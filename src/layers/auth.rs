//! Credentials: from a request's `Authorization` header (or a stream's
//! `?token=`) to a [`Caller`] on the request, counted against the right
//! quota.
//!
//! Each route group accepts one kind of credential ([`Accept`]): Bearer
//! only on `/mcp` and every route that changes something (Basic
//! credentials, which a browser attaches on its own, are refused there),
//! Basic too on reads for the team page, `?token=` too on streams. The core
//! is asked who the token belongs to on every request, so a revoke or rotate
//! from the CLI counts at once.

use super::{
    client,
    limits::{Limited, RateLimits},
};
use crate::host::{Cidr, ClientAddress, ForwardedHeader};
pub use crate::relay::Audience;
use crate::relay::{Caller, Relay, RelayError};
use crate::wire::ApiError;
use crate::wire::challenge::{Challenge, Presented};
use axum::{
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::{net::IpAddr, sync::Arc};

/// Which credentials a route accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// `Authorization: Bearer` only: `/mcp` and every route that changes
    /// something. A browser never attaches a Bearer token by itself.
    Bearer,
    /// Bearer, or Basic with the token as the password (the team page).
    BearerOrBasic,
    /// As `BearerOrBasic`, or `?token=` for stream clients that cannot set
    /// headers (browser `EventSource`, older relays' clients).
    Stream,
    /// The OAuth consent page: Basic (the person signs in as on the team
    /// page) or Bearer, and Basic also on a top-level navigation from
    /// another site, since a connector (claude.ai) opens it from its own.
    /// Only reads: the answer is a form, same-origin and token-guarded.
    Consent,
}

/// How a token was presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Bearer,
    Basic,
    Query,
}

/// Why a request was refused before it reached an edge.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The credential is malformed or of a kind the route does not take.
    #[error("{0}")]
    Credential(&'static str),
    /// An OAuth access token where it is not taken: anywhere but the
    /// resource it was issued for (`/mcp`, or `/a2a/…`), or outside the
    /// `Authorization: Bearer` header.
    #[error(
        "an OAuth access token is taken only on the resource it was issued for (/mcp, or the \
         A2A agents under /a2a/), and only in Authorization: Bearer"
    )]
    OAuthElsewhere,
    /// A browser sent the page's Basic credentials from another site.
    #[error(
        "a request from another site may not use the team page's credentials; \
         an API client sends Authorization: Bearer"
    )]
    CrossSite,
    /// A quota ran out.
    #[error(transparent)]
    Limited(#[from] Limited),
    /// The core refused: an unknown or revoked token, or a failure.
    #[error(transparent)]
    Relay(#[from] RelayError),
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        match refused {
            Refused::Credential(message) => ApiError::unauthorized(message),
            Refused::OAuthElsewhere => ApiError::unauthorized(refused.to_string()),
            Refused::CrossSite => ApiError::forbidden(refused.to_string()),
            Refused::Limited(limited) => {
                ApiError::rate_limited(limited.message, limited.retry_after)
            }
            Refused::Relay(error) => error.into(),
        }
    }
}

/// The token a request presents, if any, in a form the route accepts.
pub fn presented_token(
    request: &Request,
    accept: Accept,
) -> Result<Option<(String, Via)>, Refused> {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| Refused::Credential("the Authorization header is not readable text"))?;
        let (scheme, credentials) = value.split_once(' ').unwrap_or((value, ""));
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") && !credentials.is_empty() {
            return Ok(Some((credentials.to_owned(), Via::Bearer)));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            // A browser attaches Basic credentials to any request for this
            // site, whichever page starts it (CSRF): take them only from the
            // relay's own pages, but for the consent page opened by another
            // site (it only shows; its answer is guarded as every form).
            if fetched_from_elsewhere(request)
                && !(accept == Accept::Consent && top_level_read(request))
            {
                return Err(Refused::CrossSite);
            }
            if accept == Accept::Bearer {
                return Err(Refused::Credential(
                    "Basic credentials are only for reading; send Authorization: Bearer TOKEN",
                ));
            }
            return basic_password(credentials).map(|p| Some((p, Via::Basic)));
        }
        return Err(Refused::Credential("send Authorization: Bearer TOKEN"));
    }
    if accept == Accept::Stream
        && let Some(token) = query_token(request.uri().query().unwrap_or(""))
    {
        return Ok(Some((token, Via::Query)));
    }
    // No credential: only an open relay takes such a request, and another
    // site's page must not make a visitor's browser take it there (an
    // `<img>` that empties an inbox). The consent page is only shown: it
    // asks for credentials.
    if fetched_from_elsewhere(request) && !(accept == Accept::Consent && top_level_read(request)) {
        return Err(Refused::CrossSite);
    }
    Ok(None)
}

/// Whether the request is a top-level navigation that only reads: a GET
/// (or HEAD) of a document, which another site may start by a link.
fn top_level_read(request: &Request) -> bool {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    matches!(*request.method(), Method::GET | Method::HEAD)
        && header("sec-fetch-mode") == "navigate"
        && header("sec-fetch-dest") == "document"
}

/// Whether a browser says another site's page started the request.
fn fetched_from_elsewhere(request: &Request) -> bool {
    let fetched_from = request
        .headers()
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok());
    matches!(fetched_from, Some("cross-site" | "same-site"))
}

/// The password of HTTP Basic credentials; the user name is ignored.
fn basic_password(encoded: &str) -> Result<String, Refused> {
    use base64::Engine as _;
    let malformed = || Refused::Credential("malformed Basic credentials");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (_, password) = decoded.split_once(':').ok_or_else(malformed)?;
    Ok(password.to_owned())
}

/// The `token` parameter of a query string, percent-decoded.
fn query_token(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .filter(|token| !token.is_empty())
}

/// The state of the credentials layer: whom to ask, which quotas to count,
/// where client addresses come from, and what the route group accepts.
#[derive(Clone)]
pub struct Credentials {
    pub relay: Arc<Relay>,
    pub limits: Arc<RateLimits>,
    pub trusted_proxies: Arc<[Cidr]>,
    pub forwarded_header: ForwardedHeader,
    pub accept: Accept,
    /// On an OAuth resource only: which one it is. OAuth access tokens are
    /// taken only where this is theirs.
    pub oauth: Option<Audience>,
    /// On the MCP resource: what a 401 says, which may start a client's
    /// OAuth discovery.
    pub challenge: Option<Challenge>,
}

/// Authenticates with the credentials the group accepts and puts the
/// [`Caller`] on the request. What a signed-in request gets back is not
/// to be cached anywhere (`Cache-Control: no-store`).
pub async fn require(
    State(credentials): State<Credentials>,
    mut request: Request,
    next: Next,
) -> Response {
    let address = client::address(
        &request,
        &credentials.trusted_proxies,
        credentials.forwarded_header,
    );
    let presented = presented_token(&request, credentials.accept);
    let via = presented
        .as_ref()
        .ok()
        .and_then(|p| p.as_ref().map(|(_, via)| *via));
    let shape = Presented::bearer(match &presented {
        Ok(Some((token, Via::Bearer))) => Some(token.as_str()),
        _ => None,
    });
    let authenticated = match authenticate(&credentials, presented, address).await {
        Ok(caller)
            if caller.audience().is_some()
                && (caller.audience() != credentials.oauth || via != Some(Via::Bearer)) =>
        {
            Err(Refused::OAuthElsewhere)
        }
        other => other,
    };
    match authenticated {
        Ok(caller) => {
            if let Some(connection) = request.extensions().get::<Vouch>() {
                connection.vouch();
            }
            request.extensions_mut().insert(caller);
            let mut response = next.run(request).await;
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(refused) => {
            let mut response = ApiError::from(refused).into_response();
            if let Some(challenge) = &credentials.challenge
                && response.status() == StatusCode::UNAUTHORIZED
            {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    challenge.for_presented(shape).clone(),
                );
            }
            response
        }
    }
}

/// The connection a request came on, which a credential that
/// authenticates vouches for: from then on the connection bounds count it
/// among the team's, not among those nobody has vouched for. The server's
/// acceptor puts one on every request.
#[derive(Clone)]
pub struct Vouch(Arc<dyn Fn() + Send + Sync>);

impl Vouch {
    pub fn new(vouch: impl Fn() + Send + Sync + 'static) -> Vouch {
        Vouch(Arc::new(vouch))
    }

    fn vouch(&self) {
        (self.0)()
    }
}

/// The state of [`count_address`]: a budget of the client address's, and
/// how to find the address.
#[derive(Clone)]
pub struct AddressQuota {
    pub limits: Arc<RateLimits>,
    pub trusted_proxies: Arc<[Cidr]>,
    pub forwarded_header: ForwardedHeader,
    pub check: AddressBudget,
}

/// A budget of a client address's: [`RateLimits::anonymous`] for the
/// routes that take no credentials (the health checks, OAuth's, the API's
/// document, the A2A cards), like any other anonymous request;
/// [`RateLimits::registration`] for an OAuth client registration, besides
/// the anonymous quota around it (the relay's own budget, for
/// registrations it stores, is the core's).
pub type AddressBudget = fn(&RateLimits, IpAddr) -> Result<(), Limited>;

/// Runs the request if its quota's budget lets its client address
/// through, with the address beside it for the handler
/// ([`ClientAddress`]: OAuth's registration budgets are the core's, by
/// network).
pub async fn count_address(
    State(quota): State<AddressQuota>,
    mut request: Request,
    next: Next,
) -> Response {
    let address = client::address(&request, &quota.trusted_proxies, quota.forwarded_header);
    match (quota.check)(&quota.limits, address) {
        Ok(()) => {
            request.extensions_mut().insert(ClientAddress(address));
            next.run(request).await
        }
        Err(limited) => ApiError::from(Refused::from(limited)).into_response(),
    }
}

/// Finds the caller, counting the request against the right quota.
///
/// A token the relay knows (from memory, no query) counts against its own
/// quota only: a valid credential is never refused because its address
/// spent the anonymous quota. Anything else (no token, a malformed one, one
/// memory does not know) counts against the client address, and an address
/// that ran out is refused before any lookup.
async fn authenticate(
    credentials: &Credentials,
    presented: Result<Option<(String, Via)>, Refused>,
    address: IpAddr,
) -> Result<Caller, Refused> {
    let limits = &credentials.limits;
    let relay = &credentials.relay;
    let token = match presented {
        Ok(Some((token, _))) => token,
        Ok(None) => {
            limits.anonymous(address)?;
            return Ok(relay.authenticate(None).await?);
        }
        Err(refused) => {
            limits.anonymous(address)?;
            return Err(refused);
        }
    };
    if relay.knows(&token) {
        return match relay.authenticate(Some(&token)).await {
            Ok(caller) => {
                limits.credential(&caller.account())?;
                Ok(caller)
            }
            // Revoked a moment ago: from now on, an unknown token.
            Err(error @ RelayError::Unauthorized(_)) => {
                limits.anonymous(address)?;
                Err(error.into())
            }
            Err(error) => Err(error.into()),
        };
    }
    limits.not_blocked(address)?;
    limits.anonymous(address)?;
    // Perhaps someone added a moment ago, by another process.
    let caller = relay.authenticate(Some(&token)).await?;
    limits.credential(&caller.account())?;
    Ok(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tokens_are_found_and_decoded() {
        assert_eq!(
            query_token("since_id=4&token=xtalk_abc"),
            Some("xtalk_abc".into())
        );
        assert_eq!(query_token("token=a%2Bb+c"), Some("a+b c".into()));
        assert_eq!(query_token("token=%zz%"), Some("%zz%".into()));
        assert_eq!(query_token("token=%C3%A9"), Some("é".into()));
        assert_eq!(query_token("tokens=x&token="), None);
    }

    #[test]
    fn basic_credentials_yield_the_password() {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode("anyone:xtalk_secret:part");
        assert_eq!(basic_password(&encoded).unwrap(), "xtalk_secret:part");
        assert!(basic_password("not base64!").is_err());
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever a client puts in a query string or a Basic header,
            /// parsing it never panics.
            #[test]
            fn credentials_parse_without_panic(query in "\\PC{0,300}", basic in "\\PC{0,300}") {
                let _ = query_token(&query);
                let _ = basic_password(&basic);
            }

            /// A token survives the round trip through a query string.
            #[test]
            fn query_tokens_round_trip(token in "[A-Za-z0-9_-]{1,80}") {
                prop_assert_eq!(query_token(&format!("since_id=3&token={token}")), Some(token));
            }
        }
    }
}
