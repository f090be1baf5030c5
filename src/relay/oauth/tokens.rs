//! What a code and a refresh token are exchanged for, and how a grant
//! ends: the token endpoint's rules, and a person's grants.

use super::{
    ACCESS_LIFETIME, GRANTS_PER_PERSON, Issued, REFRESH_GRACE, REFRESH_LIFETIME, TokenRefusal,
    UNUSED_REGISTRATION, millis, refused,
};
use crate::model::{
    CodeChallenge, Grant, GrantId, GrantTokens, Millis, Redeemed, Refreshed, Token, TokenHash,
    now_millis, refresh_family,
};
use crate::relay::stats::Event;
use crate::relay::{Caller, Relay, RelayError, RelayResult};
use std::net::IpAddr;

impl Relay {
    /// New tokens, the refresh token in `family` (that of the one it
    /// replaces, or a new grant's).
    fn new_tokens(now: Millis, family: &str) -> (Token, Token, GrantTokens) {
        let (access, refresh) = (Token::generate_for_oauth(), Token::generate_refresh(family));
        let hashes = GrantTokens {
            access: access.hash(),
            access_expires: now + millis(ACCESS_LIFETIME),
            refresh: refresh.hash(),
            refresh_expires: now + millis(REFRESH_LIFETIME),
            family: TokenHash::of(family),
        };
        (access, refresh, hashes)
    }

    fn issued(access: Token, refresh: Token, grant: Grant) -> Issued {
        Issued {
            access_token: access,
            refresh_token: refresh,
            expires_in: ACCESS_LIFETIME.as_secs(),
            scope: grant.scope.clone(),
            grant,
        }
    }

    /// The authorization-code grant: the code, once, by the client it was
    /// made for, at the redirect URI it was sent to, with the verifier of
    /// its challenge, for the resource it was made for. The network it
    /// came `from` is then known to registration's budgets.
    pub async fn exchange_code(
        &self,
        code: &str,
        client_id: &str,
        redirect_uri: &str,
        verifier: &str,
        resource: Option<&str>,
        from: IpAddr,
    ) -> Result<Issued, TokenRefusal> {
        let hash = TokenHash::of(code);
        let now = now_millis();
        let authorization = match self.store.redeem_code(hash, now).await? {
            Redeemed::Fresh(authorization) => authorization,
            Redeemed::Reused => {
                self.credentials.refresh().await?;
                return refused(
                    "invalid_grant",
                    "this code was used before: it is void, and so is what it gave",
                );
            }
            Redeemed::Unknown => return refused("invalid_grant", "unknown or expired code"),
        };
        if authorization.client_id != client_id {
            return refused("invalid_grant", "this code was issued to another client");
        }
        if authorization.redirect_uri != redirect_uri {
            return refused(
                "invalid_grant",
                "redirect_uri differs from the one the code was sent to",
            );
        }
        let challenge = CodeChallenge::parse(&authorization.challenge, Some("S256"))
            .map_err(|e| RelayError::Internal(Box::new(e)))?;
        if !challenge.verifies(verifier) {
            return refused(
                "invalid_grant",
                "code_verifier does not match the code_challenge",
            );
        }
        // None names the code's own resource, as at a refresh.
        match resource.map(|named| self.oauth().named_resource(named)) {
            None => {}
            Some(Ok(named)) if named == authorization.resource => {}
            Some(_) => {
                return refused(
                    "invalid_target",
                    format!(
                        "resource must be the one the code was made for, {:?}",
                        authorization.resource
                    ),
                );
            }
        }
        if !self.credentials.on_team(&authorization.handle).await? {
            return refused(
                "invalid_grant",
                "the person this code was made for is no longer on this relay's team",
            );
        }
        let (access, refresh, tokens) = Relay::new_tokens(now, &Token::new_refresh_family());
        let Some(grant) = self
            .store
            .open_grant(hash, authorization, tokens, now, GRANTS_PER_PERSON)
            .await?
        else {
            return refused(
                "invalid_grant",
                "this code was presented again while it was being exchanged: it is void",
            );
        };
        self.stats.count(Event::GrantOpened);
        self.quotas.granted(from, now);
        // Bring this relay's memory up to the new token before the client
        // can present it.
        self.credentials.refresh().await?;
        Ok(Relay::issued(access, refresh, grant))
    }

    /// The refresh-token grant: a new access token and a new refresh token
    /// for the presented one, which is used up, and the access token they
    /// replace stops working; one presented again ends its grant (someone
    /// holds a copy), unless it is the one just replaced, again within
    /// [`REFRESH_GRACE`] (a retry: rotated again, the pair issued for it
    /// moments ago superseded). The grant's person must still be on the
    /// team. (A refresh makes no network known to registration's budgets:
    /// a client may refresh from anywhere, and only a person's Allow
    /// should vouch for a network.)
    pub async fn refresh_grant(
        &self,
        refresh_token: &str,
        client_id: &str,
        resource: Option<&str>,
    ) -> Result<Issued, TokenRefusal> {
        // None names the grant's own resource (RFC 8707 lets a refresh
        // leave it out): a grant for the A2A agents is refreshed as one.
        let resource = match resource.map(|named| self.oauth().named_resource(named)) {
            None => None,
            Some(Ok(resource)) => Some(resource),
            Some(Err(why)) => return refused("invalid_target", why),
        };
        let Some(family) = refresh_family(refresh_token) else {
            return refused("invalid_grant", "unknown, expired or revoked refresh token");
        };
        let now = now_millis();
        let (access, refresh, tokens) = Relay::new_tokens(now, family);
        let grant = match self
            .store
            .refresh_grant(
                TokenHash::of(refresh_token),
                client_id,
                tokens,
                now,
                now + millis(REFRESH_GRACE),
            )
            .await?
        {
            Refreshed::Rotated {
                grant, revision, ..
            } => {
                self.stats.count(Event::GrantRefreshed);
                self.credentials
                    .refreshed(&grant, tokens.access, tokens.access_expires, revision)
                    .await?;
                grant
            }
            Refreshed::Reused => {
                self.stats.count(Event::GrantReused);
                self.credentials.refresh().await?;
                return refused(
                    "invalid_grant",
                    "this refresh token was used before: the grant has ended; sign in again",
                );
            }
            Refreshed::Unknown => {
                return refused("invalid_grant", "unknown, expired or revoked refresh token");
            }
        };
        if resource.is_some_and(|named| named != grant.resource) {
            return refused("invalid_target", "the grant is for another resource");
        }
        if !self.credentials.on_team(&grant.handle).await? {
            if self.store.end_grant(grant.id, None).await? {
                self.credentials.refresh().await?;
            }
            return refused(
                "invalid_grant",
                "the person this grant is for is no longer on this relay's team: it has ended",
            );
        }
        Ok(Relay::issued(access, refresh, grant))
    }

    /// Revokes the grant that holds `token` (RFC 7009): whatever it holds
    /// open ends. Unknown tokens are no error.
    pub async fn revoke_token(&self, token: &str) -> RelayResult<()> {
        if self.store.end_grant_holding(TokenHash::of(token)).await? {
            self.credentials.refresh().await?;
        }
        Ok(())
    }

    /// The caller's grants, newest first.
    pub async fn grants(&self, caller: &Caller) -> RelayResult<Vec<Grant>> {
        let handle = self.acting_as(caller, None)?;
        Ok(self.store.grants(&handle).await?)
    }

    /// Ends one of the caller's grants, and what it holds open.
    pub async fn end_grant(&self, caller: &Caller, id: GrantId) -> RelayResult<()> {
        let handle = self.acting_as(caller, None)?;
        if !self.store.end_grant(id, Some(&handle)).await? {
            return Err(RelayError::NotFound(format!("you hold no grant {id}")));
        }
        self.credentials.refresh().await?;
        Ok(())
    }

    /// Forgets what has expired, and registrations left unused.
    pub(in crate::relay) async fn forget_oauth(&self) -> RelayResult<()> {
        let now = now_millis();
        Ok(self
            .store
            .forget_oauth(now, now - millis(UNUSED_REGISTRATION))
            .await?)
    }
}
