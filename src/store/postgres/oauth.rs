//! OAuth's rows (`../sqlite/oauth.rs`, in PostgreSQL). Each function that
//! writes more than one row runs in the transaction its caller opened.

use super::Sql;
use super::token_hash;
use super::{Db, row};
use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, LiveGrant, Millis, RegisteredClient,
    TokenHash,
};
use crate::store::StoreResult;
use crate::store::columns::from_row;
use crate::store::rules::GrantStatements;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

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

/// What a rotation writes: the new tokens in place of the grant's.
const ROTATED: &str = "refresh_hash = $3, refresh_expires = $4, access_hash = $5, \
     access_expires = $6, family = $7, generation = generation + 1, used_at = $2";

impl<D: Db> GrantStatements for Sql<'_, D> {
    async fn rotate_current(
        &self,
        presented: TokenHash,
        client_id: &str,
        tokens: &GrantTokens,
        now: Millis,
        retry_until: Millis,
    ) -> StoreResult<Option<(Grant, u64)>> {
        rotate(
            self.0,
            &format!(
                "UPDATE oauth_grants SET previous_hash = $1, previous_until = $9, \
                 sibling_hash = NULL, {ROTATED} \
                 WHERE (refresh_hash = $1 OR sibling_hash = $1) AND refresh_expires > $2 \
                 AND client_id = $8 \
                 RETURNING {GRANT_COLUMNS}, generation"
            ),
            presented,
            client_id,
            tokens,
            now,
            Some(retry_until),
        )
        .await
    }

    async fn rotate_previous(
        &self,
        presented: TokenHash,
        client_id: &str,
        tokens: &GrantTokens,
        now: Millis,
    ) -> StoreResult<Option<(Grant, u64)>> {
        rotate(
            self.0,
            &format!(
                "UPDATE oauth_grants SET sibling_hash = refresh_hash, {ROTATED} \
                 WHERE previous_hash = $1 AND previous_until > $2 AND client_id = $8 \
                 RETURNING {GRANT_COLUMNS}, generation"
            ),
            presented,
            client_id,
            tokens,
            now,
            None,
        )
        .await
    }

    async fn grant_reused(
        &self,
        presented: TokenHash,
        family: TokenHash,
        now: Millis,
    ) -> StoreResult<Option<GrantId>> {
        row(
            self.0,
            "SELECT id FROM oauth_grants WHERE (family = $2 OR previous_hash = $1) \
             AND refresh_hash <> $1 AND (sibling_hash IS NULL OR sibling_hash <> $1) \
             AND NOT (previous_hash IS NOT NULL AND previous_hash = $1 \
             AND previous_until > $3)",
            &[&&presented.as_bytes()[..], &&family.as_bytes()[..], &now],
        )
        .await?
        .map(|row| Ok(row.try_get(0)?))
        .transpose()
    }

    async fn end_grant(&self, grant: GrantId) -> StoreResult<()> {
        end_grant(self.0, grant, None).await.map(drop)
    }

    async fn use_code(&self, code: TokenHash, now: Millis) -> StoreResult<Option<Authorization>> {
        let fresh = row(
            self.0,
            "UPDATE oauth_codes SET used_at = $2 WHERE hash = $1 AND used_at IS NULL \
             AND expires_at > $2 \
             RETURNING handle, client_id, client_name, redirect_uri, challenge, resource, scope",
            &[&&code.as_bytes()[..], &now],
        )
        .await?;
        fresh
            .map(|row| {
                Ok(from_row!(row.try_get, Authorization:
                    handle, client_id, client_name, redirect_uri, challenge, resource, scope
                ))
            })
            .transpose()
    }

    /// The update waits for a grant being made from the code (which holds
    /// its row: `code_awaits_grant`), and then sees that grant.
    async fn void_used_code(&self, code: TokenHash) -> StoreResult<Option<Option<GrantId>>> {
        let voided = row(
            self.0,
            "UPDATE oauth_codes SET expires_at = 0 WHERE hash = $1 AND used_at IS NOT NULL \
             RETURNING grant_id",
            &[&&code.as_bytes()[..]],
        )
        .await?;
        voided.map(|row| Ok(row.try_get(0)?)).transpose()
    }

    /// The code's row locked until the grant is made: a second redemption
    /// voids the code either before this (no grant) or after (it ends the
    /// grant).
    async fn code_awaits_grant(&self, code: TokenHash) -> StoreResult<bool> {
        let live = row(
            self.0,
            "SELECT 1 FROM oauth_codes WHERE hash = $1 AND grant_id IS NULL AND expires_at > 0 \
             FOR UPDATE",
            &[&&code.as_bytes()[..]],
        )
        .await?;
        Ok(live.is_some())
    }

    async fn grants_beyond(&self, handle: &Handle, keep: u32) -> StoreResult<Vec<GrantId>> {
        self.0
            .rows(
                "SELECT id FROM oauth_grants WHERE handle = $1 ORDER BY used_at DESC, id DESC \
                 OFFSET $2",
                &[handle, &i64::from(keep)],
            )
            .await?
            .iter()
            .map(|row| Ok(row.try_get(0)?))
            .collect()
    }

    async fn insert_grant(
        &self,
        a: &Authorization,
        tokens: &GrantTokens,
        now: Millis,
    ) -> StoreResult<GrantId> {
        let id: GrantId = row(
            self.0,
            "INSERT INTO oauth_grants (handle, client_id, client_name, redirect_uri, scope, \
             resource, created_at, used_at, family, generation, refresh_hash, refresh_expires, \
             access_hash, access_expires) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, 0, $9, $10, $11, $12) RETURNING id",
            &[
                &a.handle,
                &a.client_id,
                &a.client_name,
                &a.redirect_uri,
                &a.scope,
                &a.resource,
                &now,
                &&tokens.family.as_bytes()[..],
                &&tokens.refresh.as_bytes()[..],
                &tokens.refresh_expires,
                &&tokens.access.as_bytes()[..],
                &tokens.access_expires,
            ],
        )
        .await?
        .expect("INSERT … RETURNING returns a row")
        .try_get(0)?;
        Ok(id)
    }

    async fn grant_made(
        &self,
        code: TokenHash,
        grant: GrantId,
        client_id: &str,
        now: Millis,
    ) -> StoreResult<()> {
        self.0
            .write(
                "UPDATE oauth_codes SET grant_id = $2 WHERE hash = $1",
                &[&&code.as_bytes()[..], &grant.0],
            )
            .await?;
        self.0
            .write(
                "UPDATE oauth_clients SET used_at = $2 WHERE client_id = $1",
                &[&client_id, &now],
            )
            .await?;
        Ok(())
    }

    async fn credentials_revision(&self) -> StoreResult<u64> {
        super::credentials_revision(self.0).await
    }
}

/// Runs a rotation (`sql`, over [`ROTATED`]'s parameters, the client as
/// `$8` and the end of the grace as `$9` when it sets one).
async fn rotate(
    db: &impl Db,
    sql: &str,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Option<Millis>,
) -> StoreResult<Option<(Grant, u64)>> {
    let (presented, refresh, access, family) = (
        &presented.as_bytes()[..],
        &tokens.refresh.as_bytes()[..],
        &tokens.access.as_bytes()[..],
        &tokens.family.as_bytes()[..],
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &presented,
        &now,
        &refresh,
        &tokens.refresh_expires,
        &access,
        &tokens.access_expires,
        &family,
        &client_id,
    ];
    if let Some(until) = &retry_until {
        params.push(until);
    }
    let Some(rotated) = row(db, sql, &params).await? else {
        return Ok(None);
    };
    let generation: i64 = rotated.try_get(9)?;
    Ok(Some((grant_from_row(&rotated)?, generation as u64)))
}

const GRANT_COLUMNS: &str =
    "id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at";

fn grant_from_row(row: &Row) -> StoreResult<Grant> {
    Ok(from_row!(row.try_get, Grant:
        id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at
    ))
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
    Ok(ended > 0)
}

pub(super) async fn end_grant_holding(db: &impl Db, token: TokenHash) -> StoreResult<bool> {
    let grant = row(
        db,
        "SELECT id FROM oauth_grants \
         WHERE access_hash = $1 OR refresh_hash = $1 OR previous_hash = $1 \
             OR sibling_hash = $1",
        &[&&token.as_bytes()[..]],
    )
    .await?;
    match grant {
        Some(grant) => end_grant(db, grant.try_get(0)?, None).await,
        None => Ok(false),
    }
}

/// Ends every grant of `handle`'s (their token was rotated or revoked).
pub(super) async fn end_grants_of(db: &impl Db, handle: &Handle) -> StoreResult<()> {
    db.write("DELETE FROM oauth_grants WHERE handle = $1", &[handle])
        .await?;
    db.write("DELETE FROM oauth_codes WHERE handle = $1", &[handle])
        .await
}

/// One row a grant: the grants, with their one access token each.
pub(super) async fn live_grants(db: &impl Db, now: Millis) -> StoreResult<Vec<LiveGrant>> {
    let rows = db
        .rows(
            "SELECT id, handle, resource, access_hash, access_expires FROM oauth_grants \
             ORDER BY id",
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| -> StoreResult<LiveGrant> {
            let hash: Option<&[u8]> = row.try_get(3)?;
            let expires: Millis = row.try_get(4)?;
            Ok(LiveGrant {
                id: row.try_get(0)?,
                handle: row.try_get(1)?,
                resource: row.try_get(2)?,
                access: match hash.filter(|_| expires > now) {
                    Some(hash) => Some((token_hash(hash)?, expires)),
                    None => None,
                },
            })
        })
        .collect()
}

pub(super) async fn forget(db: &impl Db, now: Millis, unused_since: Millis) -> StoreResult<()> {
    db.write(
        "DELETE FROM oauth_codes WHERE expires_at < $1::bigint - 600000",
        &[&now],
    )
    .await?;
    db.write(
        "DELETE FROM oauth_grants WHERE refresh_expires < $1",
        &[&now],
    )
    .await?;
    db.write(
        "DELETE FROM oauth_clients WHERE coalesce(used_at, registered_at) < $1 \
         AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
        &[&unused_since],
    )
    .await
}
