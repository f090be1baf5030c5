//! OAuth's rules: what presenting a code or a refresh token comes to, and
//! how a grant is made, over [`GrantStatements`].

use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, Millis, Redeemed, Refreshed, TokenHash,
};
use crate::store::StoreResult;

/// The statements of a refresh ([`refresh_grant`]), over the grant's one
/// row: its current refresh token, the one that token replaced (with the
/// end of its grace), the family all its refresh tokens share, a
/// generation counted at each rotation, and its one access token.
pub(in crate::store) trait GrantStatements {
    /// Rotates `client_id`'s grant whose current (or sibling), unexpired
    /// refresh token is `presented`: `tokens` replace its tokens, the
    /// sibling is forgotten, and `presented` becomes the previous one,
    /// taken again as a retry until `retry_until`. The grant and its
    /// generation after.
    async fn rotate_current(
        &self,
        presented: TokenHash,
        client_id: &str,
        tokens: &GrantTokens,
        now: Millis,
        retry_until: Millis,
    ) -> StoreResult<Option<(Grant, u64)>>;
    /// Rotates `client_id`'s grant whose previous refresh token is
    /// `presented`, within its grace: `tokens` replace the ones issued for
    /// it moments ago, whose refresh token becomes the sibling (good until
    /// it or the new one is used), and `presented` stays the previous one.
    async fn rotate_previous(
        &self,
        presented: TokenHash,
        client_id: &str,
        tokens: &GrantTokens,
        now: Millis,
    ) -> StoreResult<Option<(Grant, u64)>>;
    /// The grant `presented` was a refresh token of and is no more: its
    /// previous one past the grace, or another of `family`'s (never its
    /// current one, nor its previous one within the grace, which another
    /// client presented: those are unknown to it).
    async fn grant_reused(
        &self,
        presented: TokenHash,
        family: TokenHash,
        now: Millis,
    ) -> StoreResult<Option<GrantId>>;
    /// Ends a grant and its tokens.
    async fn end_grant(&self, grant: GrantId) -> StoreResult<()>;
    /// The credentials revision, as this transaction sees it.
    async fn credentials_revision(&self) -> StoreResult<u64>;

    // Codes ([`redeem_code`], [`open_grant`]).
    /// Marks `code`, unused and unexpired, used at `now`: what it
    /// authorized; none for any other code.
    async fn use_code(&self, code: TokenHash, now: Millis) -> StoreResult<Option<Authorization>>;
    /// Voids the used `code` from now on: the grant made from it, if one
    /// was (`None` when no used code is `code`). Where the backend locks,
    /// it waits for a grant being made from the code.
    async fn void_used_code(&self, code: TokenHash) -> StoreResult<Option<Option<GrantId>>>;
    /// Whether `code` still awaits its grant (used, not voided, none made
    /// yet); where the backend locks, held until the transaction ends.
    async fn code_awaits_grant(&self, code: TokenHash) -> StoreResult<bool>;
    /// `handle`'s grants beyond their `keep` most recently used.
    async fn grants_beyond(&self, handle: &Handle, keep: u32) -> StoreResult<Vec<GrantId>>;
    /// Writes a new grant of `a` with `tokens`, made and used `now`.
    async fn insert_grant(
        &self,
        a: &Authorization,
        tokens: &GrantTokens,
        now: Millis,
    ) -> StoreResult<GrantId>;
    /// Notes that `grant` was made from `code`, and that its client was
    /// used `now`.
    async fn grant_made(
        &self,
        code: TokenHash,
        grant: GrantId,
        client_id: &str,
        now: Millis,
    ) -> StoreResult<()>;
}

/// What presenting an authorization code comes to: an unused, unexpired
/// one is used now, and what it authorized returned; one presented again
/// is void from then on and its grant, if one was made, ends (if none was
/// yet, none will be: [`open_grant`]).
pub(in crate::store) async fn redeem_code(
    s: &impl GrantStatements,
    code: TokenHash,
    now: Millis,
) -> StoreResult<Redeemed> {
    if let Some(authorization) = s.use_code(code, now).await? {
        return Ok(Redeemed::Fresh(authorization));
    }
    match s.void_used_code(code).await? {
        None => Ok(Redeemed::Unknown),
        Some(grant) => {
            if let Some(grant) = grant {
                s.end_grant(grant).await?;
            }
            Ok(Redeemed::Reused)
        }
    }
}

/// Makes the grant a redeemed code authorized, unless the code was
/// presented again meanwhile (none); the person keeps at most `most`
/// grants: their least recently used beyond it end.
pub(in crate::store) async fn open_grant(
    s: &impl GrantStatements,
    code: TokenHash,
    a: &Authorization,
    tokens: &GrantTokens,
    now: Millis,
    most: u32,
) -> StoreResult<Option<Grant>> {
    if !s.code_awaits_grant(code).await? {
        return Ok(None);
    }
    for crowded in s.grants_beyond(&a.handle, most.saturating_sub(1)).await? {
        s.end_grant(crowded).await?;
    }
    let id = s.insert_grant(a, tokens, now).await?;
    s.grant_made(code, id, &a.client_id, now).await?;
    Ok(Some(Grant {
        id,
        handle: a.handle.clone(),
        client_id: a.client_id.clone(),
        client_name: a.client_name.clone(),
        redirect_uri: a.redirect_uri.clone(),
        scope: a.scope.clone(),
        resource: a.resource.clone(),
        created_at: now,
        used_at: now,
    }))
}

/// What presenting a refresh token comes to, inside one write
/// transaction: the grant's current one rotates; the one it replaced,
/// again within the grace, is a retry (a client that sent the same
/// refresh twice, or lost the answer) and rotates again, the refresh
/// token issued moments ago kept as a sibling that rotates too, until
/// either is used (the client keeps whichever answer came last), its
/// access token superseded; any other of the grant's refresh tokens means
/// someone holds a copy, and ends the grant. No used token is kept: a
/// grant is one row, however often it is refreshed.
pub(in crate::store) async fn refresh_grant(
    s: &impl GrantStatements,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Millis,
) -> StoreResult<Refreshed> {
    let rotated = match s
        .rotate_current(presented, client_id, tokens, now, retry_until)
        .await?
    {
        Some(rotated) => Some(rotated),
        None => s.rotate_previous(presented, client_id, tokens, now).await?,
    };
    if let Some((grant, generation)) = rotated {
        let revision = s.credentials_revision().await?;
        return Ok(Refreshed::Rotated {
            grant,
            generation,
            revision,
        });
    }
    match s.grant_reused(presented, tokens.family, now).await? {
        Some(grant) => {
            s.end_grant(grant).await?;
            Ok(Refreshed::Reused)
        }
        None => Ok(Refreshed::Unknown),
    }
}
