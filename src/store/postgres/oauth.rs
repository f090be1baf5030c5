//! OAuth's rows (`../sqlite/oauth.rs`, in PostgreSQL). Each function that
//! writes more than one row runs in the transaction its caller opened.

use super::people::token_hash;
use super::{Db, handle, row};
use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, LiveGrant, Millis, Redeemed, Refreshed,
    RegisteredClient, TokenHash,
};
use crate::store::StoreResult;
use tokio_postgres::Row;

pub(super) async fn register_client(db: &impl Db, client: &RegisteredClient) -> StoreResult<()> {
    db.write(
        "INSERT INTO oauth_clients (client_id, name, redirect_uris, registered_at) \
         VALUES ($1, $2, $3, $4)",
        &[
            &client.client_id,
            &client.name,
            &client.redirect_uris.join("\n"),
            &client.registered_at,
        ],
    )
    .await
}

pub(super) async fn registered_client(
    db: &impl Db,
    client_id: &str,
) -> StoreResult<Option<RegisteredClient>> {
    let found = row(
        db,
        "SELECT client_id, name, redirect_uris, registered_at FROM oauth_clients \
         WHERE client_id = $1",
        &[&client_id],
    )
    .await?;
    found
        .map(|row| {
            let uris: String = row.try_get(2)?;
            Ok(RegisteredClient {
                client_id: row.try_get(0)?,
                name: row.try_get(1)?,
                redirect_uris: uris.lines().map(str::to_owned).collect(),
                registered_at: row.try_get(3)?,
            })
        })
        .transpose()
}

pub(super) async fn add_code(
    db: &impl Db,
    code: TokenHash,
    a: &Authorization,
    expires_at: Millis,
) -> StoreResult<()> {
    db.write(
        "INSERT INTO oauth_codes (hash, handle, client_id, client_name, redirect_uri, challenge, \
         resource, scope, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &&code.as_bytes()[..],
            &a.handle,
            &a.client_id,
            &a.client_name,
            &a.redirect_uri,
            &a.challenge,
            &a.resource,
            &a.scope,
            &expires_at,
        ],
    )
    .await
}

pub(super) async fn redeem_code(
    db: &impl Db,
    code: TokenHash,
    now: Millis,
) -> StoreResult<Redeemed> {
    let hash = &code.as_bytes()[..];
    let fresh = row(
        db,
        "UPDATE oauth_codes SET used_at = $2 WHERE hash = $1 AND used_at IS NULL \
         AND expires_at > $2 \
         RETURNING handle, client_id, client_name, redirect_uri, challenge, resource, scope",
        &[&hash, &now],
    )
    .await?;
    if let Some(row) = fresh {
        return Ok(Redeemed::Fresh(Authorization {
            handle: handle(&row, 0)?,
            client_id: row.try_get(1)?,
            client_name: row.try_get(2)?,
            redirect_uri: row.try_get(3)?,
            challenge: row.try_get(4)?,
            resource: row.try_get(5)?,
            scope: row.try_get(6)?,
        }));
    }
    // A code presented again is void from now on; its grant, if one was
    // made, ends. The update waits for a grant being made from it (which
    // holds the row) and then sees that grant.
    let used = row(
        db,
        "UPDATE oauth_codes SET expires_at = 0 WHERE hash = $1 AND used_at IS NOT NULL \
         RETURNING grant_id",
        &[&hash],
    )
    .await?;
    let Some(used) = used else {
        return Ok(Redeemed::Unknown);
    };
    if let Some(grant) = used.try_get::<_, Option<i64>>(0)? {
        end_grant(db, GrantId(grant), None).await?;
    }
    Ok(Redeemed::Reused)
}

async fn insert_tokens(db: &impl Db, grant: GrantId, tokens: &GrantTokens) -> StoreResult<()> {
    db.write(
        "INSERT INTO oauth_tokens (hash, grant_id, refresh, expires_at) \
         VALUES ($1, $3, false, $2), ($4, $3, true, $5)",
        &[
            &&tokens.access.as_bytes()[..],
            &tokens.access_expires,
            &grant.0,
            &&tokens.refresh.as_bytes()[..],
            &tokens.refresh_expires,
        ],
    )
    .await
}

pub(super) async fn open_grant(
    db: &impl Db,
    code: TokenHash,
    a: &Authorization,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<Option<Grant>> {
    // The row locked until the grant is made: a second redemption voids
    // the code either before this (no grant) or after (it ends the grant).
    let live = row(
        db,
        "SELECT 1 FROM oauth_codes WHERE hash = $1 AND grant_id IS NULL AND expires_at > 0 \
         FOR UPDATE",
        &[&&code.as_bytes()[..]],
    )
    .await?;
    if live.is_none() {
        return Ok(None);
    }
    let id: i64 = row(
        db,
        "INSERT INTO oauth_grants (handle, client_id, client_name, redirect_uri, scope, \
         resource, created_at, used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING id",
        &[
            &a.handle,
            &a.client_id,
            &a.client_name,
            &a.redirect_uri,
            &a.scope,
            &a.resource,
            &now,
        ],
    )
    .await?
    .expect("INSERT … RETURNING returns a row")
    .try_get(0)?;
    let grant = GrantId(id);
    insert_tokens(db, grant, tokens).await?;
    db.write(
        "UPDATE oauth_codes SET grant_id = $2 WHERE hash = $1",
        &[&&code.as_bytes()[..], &id],
    )
    .await?;
    db.write(
        "UPDATE oauth_clients SET used_at = $2 WHERE client_id = $1",
        &[&a.client_id, &now],
    )
    .await?;
    Ok(Some(Grant {
        id: grant,
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

pub(super) async fn refresh_grant(
    db: &impl Db,
    refresh: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<Refreshed> {
    let hash = &refresh.as_bytes()[..];
    let taken = row(
        db,
        "UPDATE oauth_tokens SET used_at = $2 WHERE hash = $1 AND refresh \
         AND used_at IS NULL AND expires_at > $2 \
         AND grant_id IN (SELECT id FROM oauth_grants WHERE client_id = $3) \
         RETURNING grant_id",
        &[&hash, &now, &client_id],
    )
    .await?;
    let Some(taken) = taken else {
        let used = row(
            db,
            "SELECT grant_id FROM oauth_tokens WHERE hash = $1 AND refresh \
             AND used_at IS NOT NULL",
            &[&hash],
        )
        .await?;
        return match used {
            Some(used) => {
                end_grant(db, GrantId(used.try_get(0)?), None).await?;
                Ok(Refreshed::Reused)
            }
            None => Ok(Refreshed::Unknown),
        };
    };
    let id: i64 = taken.try_get(0)?;
    insert_tokens(db, GrantId(id), tokens).await?;
    let grant = row(
        db,
        &format!("UPDATE oauth_grants SET used_at = $2 WHERE id = $1 RETURNING {GRANT_COLUMNS}"),
        &[&id, &now],
    )
    .await?
    .expect("the grant of a token is there in the same transaction");
    Ok(Refreshed::Rotated(grant_from_row(&grant)?))
}

const GRANT_COLUMNS: &str =
    "id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at";

fn grant_from_row(row: &Row) -> StoreResult<Grant> {
    Ok(Grant {
        id: GrantId(row.try_get(0)?),
        handle: handle(row, 1)?,
        client_id: row.try_get(2)?,
        client_name: row.try_get(3)?,
        redirect_uri: row.try_get(4)?,
        scope: row.try_get(5)?,
        resource: row.try_get(6)?,
        created_at: row.try_get(7)?,
        used_at: row.try_get(8)?,
    })
}

pub(super) async fn grants(db: &impl Db, handle: &Handle) -> StoreResult<Vec<Grant>> {
    db.rows(
        &format!("SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE handle = $1 ORDER BY id DESC"),
        &[handle],
    )
    .await?
    .iter()
    .map(grant_from_row)
    .collect()
}

pub(super) async fn end_grant(
    db: &impl Db,
    id: GrantId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    let handle = handle.map(Handle::as_str);
    let ended = db
        .exec(
            "DELETE FROM oauth_grants WHERE id = $1 AND ($2::text IS NULL OR handle = $2)",
            &[&id.0, &handle],
        )
        .await?;
    if ended > 0 {
        db.write("DELETE FROM oauth_tokens WHERE grant_id = $1", &[&id.0])
            .await?;
    }
    Ok(ended > 0)
}

pub(super) async fn end_grant_holding(db: &impl Db, token: TokenHash) -> StoreResult<bool> {
    let grant = row(
        db,
        "SELECT grant_id FROM oauth_tokens WHERE hash = $1",
        &[&&token.as_bytes()[..]],
    )
    .await?;
    match grant {
        Some(grant) => end_grant(db, GrantId(grant.try_get(0)?), None).await,
        None => Ok(false),
    }
}

/// Ends every grant of `handle`'s (their token was rotated or revoked).
pub(super) async fn end_grants_of(db: &impl Db, handle: &Handle) -> StoreResult<()> {
    db.write(
        "DELETE FROM oauth_tokens WHERE grant_id IN \
         (SELECT id FROM oauth_grants WHERE handle = $1)",
        &[handle],
    )
    .await?;
    db.write("DELETE FROM oauth_grants WHERE handle = $1", &[handle])
        .await?;
    db.write("DELETE FROM oauth_codes WHERE handle = $1", &[handle])
        .await
}

pub(super) async fn live_grants(db: &impl Db, now: Millis) -> StoreResult<Vec<LiveGrant>> {
    let rows = db
        .rows(
            "SELECT g.id, g.handle, g.resource, t.hash, t.expires_at FROM oauth_grants g \
             LEFT JOIN oauth_tokens t ON t.grant_id = g.id AND NOT t.refresh \
             AND t.expires_at > $1 ORDER BY g.id",
            &[&now],
        )
        .await?;
    let mut grants: Vec<LiveGrant> = Vec::new();
    for row in &rows {
        let id = GrantId(row.try_get(0)?);
        if grants.last().is_none_or(|g| g.id != id) {
            grants.push(LiveGrant {
                id,
                handle: handle(row, 1)?,
                resource: row.try_get(2)?,
                access: Vec::new(),
            });
        }
        let hash: Option<&[u8]> = row.try_get(3)?;
        if let (Some(hash), Some(grant)) = (hash, grants.last_mut()) {
            grant.access.push((token_hash(hash)?, row.try_get(4)?));
        }
    }
    Ok(grants)
}

pub(super) async fn forget(db: &impl Db, now: Millis, unused_since: Millis) -> StoreResult<()> {
    db.write(
        "DELETE FROM oauth_codes WHERE expires_at < $1::bigint - 600000",
        &[&now],
    )
    .await?;
    db.write("DELETE FROM oauth_tokens WHERE expires_at < $1", &[&now])
        .await?;
    db.write(
        "DELETE FROM oauth_grants WHERE id NOT IN \
         (SELECT grant_id FROM oauth_tokens WHERE refresh AND used_at IS NULL)",
        &[],
    )
    .await?;
    db.write(
        "DELETE FROM oauth_clients WHERE coalesce(used_at, registered_at) < $1 \
         AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
        &[&unused_since],
    )
    .await
}
