//! OAuth's rules: what presenting a code or a refresh token comes to, and
//! how a grant is made, over OAuth's statements (`../statements/oauth.rs`).

use crate::model::{Authorization, Grant, GrantTokens, Millis, Redeemed, Refreshed, TokenHash};
use crate::store::StoreResult;
use crate::store::sql::Executor;
use crate::store::statements::oauth;

/// What presenting an authorization code comes to: an unused, unexpired
/// one is used now, and what it authorized returned; one presented again
/// is void from then on and its grant, if one was made, ends (if none was
/// yet, none will be: [`open_grant`]).
pub(in crate::store) async fn redeem_code(
    db: &impl Executor,
    code: TokenHash,
    now: Millis,
) -> StoreResult<Redeemed> {
    if let Some(authorization) = oauth::use_code(db, code, now).await? {
        return Ok(Redeemed::Fresh(authorization));
    }
    match oauth::void_used_code(db, code).await? {
        None => Ok(Redeemed::Unknown),
        Some(grant) => {
            if let Some(grant) = grant {
                oauth::end_grant(db, grant, None).await?;
            }
            Ok(Redeemed::Reused)
        }
    }
}

/// Makes the grant a redeemed code authorized, unless the code was
/// presented again meanwhile (none); the person keeps at most `most`
/// grants: their least recently used beyond it end.
pub(in crate::store) async fn open_grant(
    db: &impl Executor,
    code: TokenHash,
    a: &Authorization,
    tokens: &GrantTokens,
    now: Millis,
    most: u32,
) -> StoreResult<Option<Grant>> {
    if !oauth::code_awaits_grant(db, code).await? {
        return Ok(None);
    }
    for crowded in oauth::grants_beyond(db, &a.handle, most.saturating_sub(1)).await? {
        oauth::end_grant(db, crowded, None).await?;
    }
    let id = oauth::insert_grant(db, a, tokens, now).await?;
    oauth::grant_made(db, code, id, &a.client_id, now).await?;
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
    db: &impl Executor,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Millis,
) -> StoreResult<Refreshed> {
    let rotated =
        match oauth::rotate_current(db, presented, client_id, tokens, now, retry_until).await? {
            Some(rotated) => Some(rotated),
            None => oauth::rotate_previous(db, presented, client_id, tokens, now).await?,
        };
    if let Some((grant, generation)) = rotated {
        let revision = oauth::credentials_revision(db).await?;
        return Ok(Refreshed::Rotated {
            grant,
            generation,
            revision,
        });
    }
    match oauth::grant_reused(db, presented, tokens.family, now).await? {
        Some(grant) => {
            oauth::end_grant(db, grant, None).await?;
            Ok(Refreshed::Reused)
        }
        None => Ok(Refreshed::Unknown),
    }
}
