//! The relay as an OAuth 2.1 authorization server, for the connectors that
//! cannot send a static token (claude.ai, ChatGPT): who may register, what
//! a person's consent makes (a single-use code), what a code and a refresh
//! token are exchanged for, and how a grant ends.
//!
//! Nothing is issued that is not bound: a code to its person, client,
//! redirect URI, PKCE challenge, resource and scope; a grant and each of
//! its tokens to the same. Codes and tokens are stored as SHA-256 hashes
//! only, and shown once. An access token lives an hour, or until the
//! refresh that replaces it; a refresh token is used once (rotated), and
//! one presented again ends its grant, as does a code presented again,
//! but for the one just replaced, again within [`REFRESH_GRACE`]: a retry
//! (a client that sent its refresh twice, or lost the answer), which
//! rotates again. A grant ended, or its person's token rotated or
//! revoked, ends what its tokens hold open, like a revoked token
//! (`credentials.rs`); a grant whose person is no longer on the team (a
//! participant removed from `RELAY_PARTICIPANTS`) is refused at every use
//! and ended at its next refresh. A person holds at most
//! [`GRANTS_PER_PERSON`] grants.
//!
//! The edges fetch what needs the network (a client's metadata document)
//! and speak the protocol's shapes; the rules are here.

use super::{Caller, Identity, RegistrationBudgets, Relay, RelayError, RelayResult};
use crate::model::{
    Authorization, ClientMetadata, ClientPolicy, CodeChallenge, Grant, Millis, RedirectUri,
    RegisteredClient, Token, now_millis,
};
use std::{net::IpAddr, time::Duration};

mod tokens;

/// The one scope: what the person's agent may do on the relay as them.
pub const SCOPE: &str = "crosstalk";
/// How long an access token lives.
pub const ACCESS_LIFETIME: Duration = Duration::from_secs(3600);
/// How long a refresh token lives unused.
pub const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long an authorization code lives.
pub const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// How long a registration no grant was made for is kept.
pub const UNUSED_REGISTRATION: Duration = Duration::from_secs(24 * 3600);
/// How long the refresh token a refresh replaced is taken again as a retry
/// of that refresh (rotated again) rather than as a copy (which ends the
/// grant): long enough for a client's retry after a lost answer or a
/// timeout, short enough that a stolen copy is rarely in time.
pub const REFRESH_GRACE: Duration = Duration::from_secs(30);
/// The most grants one person holds. A new one past it ends their least
/// recently used (made or refreshed longest ago), rather than being
/// refused: connectors sign in again after losing their tokens, leaving
/// the old grant unused behind them, and a person should not have to
/// clear those on the settings page (where all their grants are listed)
/// before signing in.
pub const GRANTS_PER_PERSON: u32 = 20;

fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}

/// A client the relay will show on the consent page: registered (DCR) or
/// described by its metadata document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub id: String,
    /// What it calls itself; the consent page shows the redirect host
    /// beside it, since anyone can call a client anything.
    pub name: String,
    pub redirect_uris: Vec<RedirectUri>,
}

impl Client {
    /// The registered URI `requested` may be answered at.
    pub fn redirect(&self, requested: &RedirectUri) -> Option<&RedirectUri> {
        self.redirect_uris.iter().find(|r| r.admits(requested))
    }
}

/// What the authorization server's settings are.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The resource tokens are for by default (RFC 8707): `{public
    /// URL}/mcp`; beside it, `{public URL}/a2a` ([`Audience`]).
    pub resource: String,
    /// Which clients may register and sign in.
    pub clients: ClientPolicy,
    /// How many clients may register an hour, and from where.
    pub registrations: RegistrationBudgets,
}

/// What an OAuth access token is for (its grant's resource, RFC 8707):
/// the relay's MCP endpoint, or its A2A agents (every person's, at
/// `/a2a/{handle}`). Each edge takes only the tokens for it, so a token a
/// connector holds for MCP is not taken on A2A, nor the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Mcp,
    A2a,
}

impl OAuthSettings {
    /// The resource URL tokens for `audience` are issued for.
    pub fn resource_of(&self, audience: Audience) -> String {
        match audience {
            Audience::Mcp => self.resource.clone(),
            Audience::A2a => format!(
                "{}/a2a",
                self.resource
                    .strip_suffix("/mcp")
                    .unwrap_or(origin_of(&self.resource))
            ),
        }
    }

    /// The `resource` an authorization request names (RFC 8707): none
    /// means the MCP endpoint; a named one, [`OAuthSettings::named_resource`].
    pub fn check_resource(&self, requested: Option<&str>) -> Result<String, String> {
        match requested {
            None => Ok(self.resource_of(Audience::Mcp)),
            Some(named) => self.named_resource(named),
        }
    }

    /// A resource a request names, which must be one of this relay's: its
    /// MCP endpoint (or the origin alone), or its A2A agents (`/a2a`, or one
    /// agent's URL under it, which names them all: a token acts as its
    /// person, whichever agent it asks).
    pub fn named_resource(&self, named: &str) -> Result<String, String> {
        let (mcp, a2a) = (
            self.resource_of(Audience::Mcp),
            self.resource_of(Audience::A2a),
        );
        // The origin alone names this server too (a client that takes the
        // resource from the server's URL without its path).
        if named == mcp || named.trim_end_matches('/') == origin_of(&mcp) {
            return Ok(mcp);
        }
        let one_agent = named
            .strip_prefix(&a2a)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|agent| !agent.is_empty() && !agent.contains(['/', '?', '#']));
        match named == a2a || one_agent {
            true => Ok(a2a),
            false => Err(format!(
                "resource {named:?} is not this server: tokens here are for {mcp:?} or {a2a:?}"
            )),
        }
    }

    /// Which of this relay's resources `resource` is, if any.
    pub fn audience_of(&self, resource: &str) -> Option<Audience> {
        [Audience::Mcp, Audience::A2a]
            .into_iter()
            .find(|audience| self.resource_of(*audience) == resource)
    }
}

/// A token endpoint's refusal (RFC 6749 §5.2): its `error` code and a
/// description the client's developer can act on.
#[derive(Debug, thiserror::Error)]
pub enum TokenRefusal {
    #[error("{1}")]
    Refused(&'static str, String),
    #[error(transparent)]
    Relay(#[from] RelayError),
}

impl From<crate::store::StoreError> for TokenRefusal {
    fn from(error: crate::store::StoreError) -> Self {
        TokenRefusal::Relay(error.into())
    }
}

fn refused<T>(code: &'static str, why: impl Into<String>) -> Result<T, TokenRefusal> {
    Err(TokenRefusal::Refused(code, why.into()))
}

/// Tokens made for a client, in the clear: shown to it once.
#[derive(Debug)]
pub struct Issued {
    pub access_token: Token,
    pub refresh_token: Token,
    pub expires_in: u64,
    pub scope: String,
    pub grant: Grant,
}

/// An authorization request a person answered Allow to, checked.
#[derive(Debug, Clone)]
pub struct Consent {
    pub client: Client,
    pub redirect_uri: RedirectUri,
    pub challenge: CodeChallenge,
    pub resource: String,
    pub scope: String,
}

impl Relay {
    fn oauth(&self) -> &OAuthSettings {
        &self.settings.oauth
    }

    /// The resource tokens are for, and the scopes there are.
    pub fn oauth_resource(&self) -> &str {
        &self.oauth().resource
    }

    /// The resource URL tokens for `audience` are issued for.
    pub fn oauth_resource_of(&self, audience: Audience) -> String {
        self.oauth().resource_of(audience)
    }

    /// The `resource` an authorization request names (RFC 8707), as this
    /// relay keeps it ([`OAuthSettings::check_resource`]).
    pub fn oauth_check_resource(&self, requested: Option<&str>) -> Result<String, String> {
        self.oauth().check_resource(requested)
    }

    /// The `scope` a request names: this relay's one scope (none means it).
    pub fn oauth_check_scope(&self, requested: Option<&str>) -> Result<String, String> {
        match requested.map(str::trim) {
            None | Some("") => Ok(SCOPE.to_owned()),
            Some(named) if named.split(' ').all(|s| s == SCOPE) => Ok(SCOPE.to_owned()),
            Some(named) => Err(format!(
                "scope {named:?} is not offered: this relay has the one scope {SCOPE:?}"
            )),
        }
    }

    /// Registers a public client (RFC 7591) for a request from `from`, if
    /// the operator's policy admits its redirect URIs and the budgets of
    /// registrations have room (`quota.rs`).
    pub async fn register_client(
        &self,
        metadata: ClientMetadata,
        from: IpAddr,
    ) -> RelayResult<Client> {
        if !self.oauth().clients.admits(None, &metadata.redirect_uris) {
            return Err(RelayError::Forbidden(
                "this relay does not let clients with these redirect URIs register: its operator \
                 lists the ones it allows in RELAY_OAUTH_CLIENTS"
                    .into(),
            ));
        }
        self.quotas.registration(from, now_millis())?;
        let client_id = format!("crosstalk-client-{}", &Token::generate().expose()[6..32]);
        let client = RegisteredClient {
            client_id: client_id.clone(),
            name: metadata.name.clone(),
            redirect_uris: metadata
                .redirect_uris
                .iter()
                .map(|u| u.as_str().to_owned())
                .collect(),
            registered_at: now_millis(),
        };
        self.store.register_client(client).await?;
        Ok(Client {
            id: client_id,
            name: metadata.name.unwrap_or_else(|| "an unnamed client".into()),
            redirect_uris: metadata.redirect_uris,
        })
    }

    /// A registered client, if there is one by that id.
    pub async fn registered_client(&self, client_id: &str) -> RelayResult<Option<Client>> {
        let Some(stored) = self.store.registered_client(client_id).await? else {
            return Ok(None);
        };
        let redirect_uris = stored
            .redirect_uris
            .iter()
            .filter_map(|u| RedirectUri::parse(u).ok())
            .collect();
        Ok(Some(Client {
            id: stored.client_id,
            name: stored.name.unwrap_or_else(|| "an unnamed client".into()),
            redirect_uris,
        }))
    }

    /// A client known by its metadata document, fetched from `url` by an
    /// edge: if the operator's policy admits it.
    pub fn document_client(&self, url: &str, metadata: ClientMetadata) -> RelayResult<Client> {
        if !self
            .oauth()
            .clients
            .admits(Some(url), &metadata.redirect_uris)
        {
            return Err(RelayError::Forbidden(format!(
                "this relay does not let the client {url:?} sign in: its operator lists the \
                 clients it allows in RELAY_OAUTH_CLIENTS"
            )));
        }
        Ok(Client {
            id: url.to_owned(),
            name: metadata.name.unwrap_or_else(|| "an unnamed client".into()),
            redirect_uris: metadata.redirect_uris,
        })
    }

    /// A person's Allow: a code for the client, bound to all the request
    /// named. Only a person signed in with their own token may allow.
    pub async fn allow(&self, caller: &Caller, consent: Consent) -> RelayResult<Token> {
        let handle = match (&caller.identity, caller.grant) {
            (Identity::Person(handle), None) => handle.clone(),
            _ => {
                return Err(RelayError::Forbidden(
                    "only a person signed in with their own token may allow a client".into(),
                ));
            }
        };
        let code = Token::generate_for_oauth();
        let authorization = Authorization {
            handle,
            client_id: consent.client.id,
            client_name: consent.client.name,
            redirect_uri: consent.redirect_uri.as_str().to_owned(),
            challenge: consent.challenge.as_str().to_owned(),
            resource: consent.resource,
            scope: consent.scope,
        };
        self.store
            .add_code(
                code.hash(),
                authorization,
                now_millis() + millis(CODE_LIFETIME),
            )
            .await?;
        Ok(code)
    }
}

/// `https://relay.example` of `https://relay.example/mcp`.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => &url[..after_scheme + slash],
        None => url,
    }
}

#[cfg(test)]
mod tests {
    use super::{Audience, OAuthSettings, origin_of};
    use crate::model::ClientPolicy;
    use crate::relay::RegistrationBudgets;

    #[test]
    fn a_resource_is_the_mcp_endpoint_or_the_agents_and_nothing_else() {
        let settings = OAuthSettings {
            resource: "https://relay.example/mcp".into(),
            clients: ClientPolicy::parse("").unwrap(),
            registrations: RegistrationBudgets::default(),
        };
        let (mcp, a2a) = ("https://relay.example/mcp", "https://relay.example/a2a");
        for (named, is) in [
            (None, Some(mcp)),
            (Some(mcp), Some(mcp)),
            (Some("https://relay.example"), Some(mcp)),
            (Some("https://relay.example/"), Some(mcp)),
            (Some(a2a), Some(a2a)),
            (Some("https://relay.example/a2a/bob"), Some(a2a)),
            (Some("https://relay.example/a2a/"), None),
            (Some("https://relay.example/a2a/bob/more"), None),
            (Some("https://relay.example/a2a/bob?x=1"), None),
            (Some("https://relay.example/a2abob"), None),
            (Some("https://other.example/a2a/bob"), None),
            (Some("https://relay.example/api"), None),
        ] {
            assert_eq!(
                settings.check_resource(named).ok().as_deref(),
                is,
                "{named:?}"
            );
        }
        assert_eq!(settings.audience_of(mcp), Some(Audience::Mcp));
        assert_eq!(settings.audience_of(a2a), Some(Audience::A2a));
        assert_eq!(settings.audience_of("https://old.example/mcp"), None);
    }

    #[test]
    fn the_origin_of_a_resource_is_its_scheme_and_authority() {
        assert_eq!(
            origin_of("https://relay.example/mcp"),
            "https://relay.example"
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080/mcp"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin_of("https://relay.example"), "https://relay.example");
    }
}
