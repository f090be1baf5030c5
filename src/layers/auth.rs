//! Credentials: from a request's `Authorization` header to a [`Caller`].
//!
//! [`require_bearer`] is the layer in front of `/mcp` (and the JSON API): it
//! accepts `Authorization: Bearer TOKEN` only — Basic credentials, which a
//! browser attaches on its own, are refused there — asks the core who the
//! token belongs to on every request (so a revoke or rotate from the CLI
//! counts at once), and puts the caller on the request.
//!
//! [`bind_mcp_sessions`] binds an MCP session to the caller that opened it:
//! rmcp checks credentials per request, not per session, so without this a
//! person could send requests on someone else's `Mcp-Session-Id`.

use crate::api::ApiError;
use crate::app::AppState;
use crate::relay::{Caller, RelayError};
use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderValue, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::{
    collections::{HashMap, HashSet},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
};

const SESSION_HEADER: &str = "mcp-session-id";

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
}

/// The token a request presents, if any, in a form the route accepts.
pub fn presented_token(request: &Request, accept: Accept) -> Result<Option<String>, ApiError> {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| ApiError::unauthorized("the Authorization header is not readable text"))?;
        let (scheme, credentials) = value.split_once(' ').unwrap_or((value, ""));
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") && !credentials.is_empty() {
            return Ok(Some(credentials.to_owned()));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            if accept == Accept::Bearer {
                return Err(ApiError::unauthorized(
                    "Basic credentials are only for reading; send Authorization: Bearer TOKEN",
                ));
            }
            return basic_password(credentials).map(Some);
        }
        return Err(ApiError::unauthorized("send Authorization: Bearer TOKEN"));
    }
    if accept == Accept::Stream
        && let Some(token) = query_token(request.uri().query().unwrap_or(""))
    {
        return Ok(Some(token));
    }
    Ok(None)
}

/// The password of HTTP Basic credentials; the user name is ignored.
fn basic_password(encoded: &str) -> Result<String, ApiError> {
    use base64::Engine as _;
    let malformed = || ApiError::unauthorized("malformed Basic credentials");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (_, password) = decoded.split_once(':').ok_or_else(malformed)?;
    Ok(password.to_owned())
}

/// The `token` parameter of a query string.
fn query_token(query: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .map(|(_, value)| percent_decode(value))
        .filter(|token| !token.is_empty())
}

/// Decodes `%XX` escapes and `+`; anything malformed is kept as it is.
fn percent_decode(value: &str) -> String {
    fn hex(byte: u8) -> Option<u8> {
        (byte as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', high, low]) => hex(*high).zip(hex(*low)).map(|(h, l)| (h << 4) | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, byte) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Authenticates with the credentials `accept` allows and puts the
/// [`Caller`] on the request.
pub async fn require_credentials(
    State((state, accept)): State<(AppState, Accept)>,
    request: Request,
    next: Next,
) -> Response {
    authenticate_then(state, accept, request, next).await
}

/// Authenticates `/mcp` requests: Bearer only.
pub async fn require_bearer(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    authenticate_then(state, Accept::Bearer, request, next).await
}

async fn authenticate_then(
    state: AppState,
    accept: Accept,
    mut request: Request,
    next: Next,
) -> Response {
    let address = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    let presented = presented_token(&request, accept);
    match authenticate(&state, presented, address).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

/// Finds the caller, counting the request against the right quota: its
/// credential's when valid, its address's otherwise.
async fn authenticate(
    state: &AppState,
    presented: Result<Option<String>, ApiError>,
    address: IpAddr,
) -> Result<Caller, ApiError> {
    let limits = &state.limits;
    let token = match presented {
        Ok(Some(token)) => token,
        Ok(None) => {
            limits.anonymous(address)?;
            return Ok(state.relay.authenticate(None).await?);
        }
        Err(refused) => {
            limits.anonymous(address)?;
            return Err(refused);
        }
    };
    limits.not_blocked(address)?;
    match state.relay.authenticate(Some(&token)).await {
        Ok(caller) => {
            limits.credential(&caller.account())?;
            Ok(caller)
        }
        Err(error @ RelayError::Unauthorized(_)) => {
            limits.anonymous(address)?;
            Err(error.into())
        }
        Err(error) => Err(error.into()),
    }
}

/// Who opened each live MCP session.
pub struct SessionOwners {
    owners: Mutex<Owners>,
    /// rmcp's sessions, to forget owners of sessions that have ended.
    sessions: Arc<LocalSessionManager>,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<HeaderValue, Caller>,
    /// How many owners were left by the last pruning; the next comes when
    /// the map has doubled, so pruning costs O(1) per session opened.
    after_pruning: usize,
}

/// The smallest map that is pruned.
const PRUNE_FROM: usize = 64;

impl SessionOwners {
    pub fn new(sessions: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: Mutex::default(),
            sessions,
        }
    }

    /// rmcp's session manager, which the MCP service must share with this.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.sessions.clone()
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners.lock().expect("session owners lock")
    }

    fn owner(&self, session: &HeaderValue) -> Option<Caller> {
        self.owners().by_session.get(session).cloned()
    }

    async fn record(&self, session: HeaderValue, caller: Caller) {
        let due = {
            let mut owners = self.owners();
            owners.by_session.insert(session, caller);
            owners.by_session.len() > owners.after_pruning.max(PRUNE_FROM) * 2
        };
        if due {
            let live: HashSet<HeaderValue> = {
                let sessions = self.sessions.sessions.read().await;
                sessions
                    .keys()
                    .filter_map(|id| HeaderValue::from_str(id).ok())
                    .collect()
            };
            let mut owners = self.owners();
            owners.by_session.retain(|id, _| live.contains(id));
            owners.after_pruning = owners.by_session.len();
        }
    }

    fn forget(&self, session: &HeaderValue) {
        self.owners().by_session.remove(session);
    }
}

/// Refuses a request on an MCP session that another caller opened; records
/// the owner of every session opened.
pub async fn bind_mcp_sessions(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let session = request.headers().get(SESSION_HEADER).cloned();
    let deleting = request.method() == axum::http::Method::DELETE;
    if let (Some(session), Some(caller)) = (&session, &caller) {
        // A session we never saw opened is unknown to rmcp as well (it answers
        // 404); owners are forgotten only after rmcp has dropped the session.
        if let Some(owner) = state.sessions.owner(session)
            && &owner != caller
        {
            return ApiError::forbidden("this MCP session belongs to someone else").into_response();
        }
    }
    let mut response = next.run(request).await;
    match (session, response.headers().get(SESSION_HEADER), caller) {
        (None, Some(opened), Some(caller)) if response.status().is_success() => {
            state.sessions.record(opened.clone(), caller).await;
        }
        (Some(session), _, _) if deleting && response.status().is_success() => {
            state.sessions.forget(&session);
            // rmcp answers a session's end with 202; clients (the Python SDK
            // among them) expect 200 or 204, and warn otherwise.
            *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
        }
        _ => {}
    }
    response
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
}
