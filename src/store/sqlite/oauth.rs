//! OAuth's rows: clients registered by DCR, authorization codes, and
//! grants, each with its tokens in its own row (the codes and tokens as
//! hashes only); the statements of a refresh (`rules::refresh_grant`).

use super::Sql;
use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, LiveGrant, Millis, RegisteredClient,
    TokenHash,
};
use crate::store::StoreResult;
use crate::store::columns::from_row;
use crate::store::rules::GrantStatements;
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn register_client(conn: &Connection, client: &RegisteredClient) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO oauth_clients (client_id, name, redirect_uris, registered_at) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        client.client_id,
        client.name,
        client.redirect_uris.join("\n"),
        client.registered_at
    ])?;
    Ok(())
}

pub(super) fn registered_client(
    conn: &Connection,
    client_id: &str,
) -> StoreResult<Option<RegisteredClient>> {
    Ok(conn
        .prepare_cached(
            "SELECT client_id, name, redirect_uris, registered_at FROM oauth_clients \
             WHERE client_id = ?1",
        )?
        .query_row([client_id], |row| {
            let uris: String = row.get(2)?;
            Ok(RegisteredClient {
                client_id: row.get(0)?,
                name: row.get(1)?,
                redirect_uris: uris.lines().map(str::to_owned).collect(),
                registered_at: row.get(3)?,
            })
        })
        .optional()?)
}

pub(super) fn add_code(
    conn: &Connection,
    code: TokenHash,
    a: &Authorization,
    expires_at: Millis,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO oauth_codes (hash, handle, client_id, client_name, redirect_uri, challenge, \
         resource, scope, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        &code.as_bytes()[..],
        a.handle,
        a.client_id,
        a.client_name,
        a.redirect_uri,
        a.challenge,
        a.resource,
        a.scope,
        expires_at
    ])?;
    Ok(())
}

/// What a rotation writes: the new tokens in place of the grant's.
const ROTATED: &str = "refresh_hash = ?3, refresh_expires = ?4, access_hash = ?5, \
     access_expires = ?6, family = ?7, generation = generation + 1, used_at = ?2";

impl GrantStatements for Sql<'_> {
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
                "UPDATE oauth_grants SET previous_hash = ?1, previous_until = ?9, \
                 sibling_hash = NULL, {ROTATED} \
                 WHERE (refresh_hash = ?1 OR sibling_hash = ?1) AND refresh_expires > ?2 \
                 AND client_id = ?8 \
                 RETURNING {GRANT_COLUMNS}, generation"
            ),
            presented,
            client_id,
            tokens,
            now,
            Some(retry_until),
        )
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
                 WHERE previous_hash = ?1 AND previous_until > ?2 AND client_id = ?8 \
                 RETURNING {GRANT_COLUMNS}, generation"
            ),
            presented,
            client_id,
            tokens,
            now,
            None,
        )
    }

    async fn grant_reused(
        &self,
        presented: TokenHash,
        family: TokenHash,
        now: Millis,
    ) -> StoreResult<Option<GrantId>> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT id FROM oauth_grants WHERE (family = ?2 OR previous_hash = ?1) \
                 AND refresh_hash <> ?1 AND (sibling_hash IS NULL OR sibling_hash <> ?1) \
                 AND NOT (previous_hash IS NOT NULL AND previous_hash = ?1 \
                 AND previous_until > ?3)",
            )?
            .query_row(
                params![&presented.as_bytes()[..], &family.as_bytes()[..], now],
                |row| row.get(0),
            )
            .optional()?
            .map(GrantId))
    }

    async fn end_grant(&self, grant: GrantId) -> StoreResult<()> {
        end_grant(self.0, grant, None).map(drop)
    }

    async fn use_code(&self, code: TokenHash, now: Millis) -> StoreResult<Option<Authorization>> {
        Ok(self
            .0
            .prepare_cached(
                "UPDATE oauth_codes SET used_at = ?2 WHERE hash = ?1 AND used_at IS NULL \
                 AND expires_at > ?2 \
                 RETURNING handle, client_id, client_name, redirect_uri, challenge, resource, scope",
            )?
            .query_row(params![&code.as_bytes()[..], now], |row| {
                Ok(from_row!(row.get, Authorization:
                    handle, client_id, client_name, redirect_uri, challenge, resource, scope
                ))
            })
            .optional()?)
    }

    async fn void_used_code(&self, code: TokenHash) -> StoreResult<Option<Option<GrantId>>> {
        let voided: Option<Option<i64>> = self
            .0
            .prepare_cached(
                "UPDATE oauth_codes SET expires_at = 0 WHERE hash = ?1 AND used_at IS NOT NULL \
                 RETURNING grant_id",
            )?
            .query_row([&code.as_bytes()[..]], |row| row.get(0))
            .optional()?;
        Ok(voided.map(|grant| grant.map(GrantId)))
    }

    async fn code_awaits_grant(&self, code: TokenHash) -> StoreResult<bool> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT 1 FROM oauth_codes WHERE hash = ?1 AND grant_id IS NULL AND expires_at > 0",
            )?
            .exists([&code.as_bytes()[..]])?)
    }

    async fn grants_beyond(&self, handle: &Handle, keep: u32) -> StoreResult<Vec<GrantId>> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT id FROM oauth_grants WHERE handle = ?1 ORDER BY used_at DESC, id DESC \
                 LIMIT -1 OFFSET ?2",
            )?
            .query_map(params![handle, keep], |row| row.get(0).map(GrantId))?
            .collect::<Result<_, _>>()?)
    }

    async fn insert_grant(
        &self,
        a: &Authorization,
        tokens: &GrantTokens,
        now: Millis,
    ) -> StoreResult<GrantId> {
        let id = self
            .0
            .prepare_cached(
                "INSERT INTO oauth_grants (handle, client_id, client_name, redirect_uri, scope, \
                 resource, created_at, used_at, family, generation, refresh_hash, refresh_expires, \
                 access_hash, access_expires) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, 0, ?9, ?10, ?11, ?12) RETURNING id",
            )?
            .query_row(
                params![
                    a.handle,
                    a.client_id,
                    a.client_name,
                    a.redirect_uri,
                    a.scope,
                    a.resource,
                    now,
                    &tokens.family.as_bytes()[..],
                    &tokens.refresh.as_bytes()[..],
                    tokens.refresh_expires,
                    &tokens.access.as_bytes()[..],
                    tokens.access_expires,
                ],
                |row| row.get(0),
            )?;
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
            .prepare_cached("UPDATE oauth_codes SET grant_id = ?2 WHERE hash = ?1")?
            .execute(params![&code.as_bytes()[..], grant.0])?;
        self.0
            .prepare_cached("UPDATE oauth_clients SET used_at = ?2 WHERE client_id = ?1")?
            .execute(params![client_id, now])?;
        Ok(())
    }

    async fn credentials_revision(&self) -> StoreResult<u64> {
        Ok(super::credentials_revision(self.0)?)
    }
}

/// Runs a rotation (`sql`, over [`ROTATED`]'s parameters, the client as
/// `?8` and the end of the grace as `?9` when it sets one).
fn rotate(
    conn: &Connection,
    sql: &str,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Option<Millis>,
) -> StoreResult<Option<(Grant, u64)>> {
    let mut statement = conn.prepare_cached(sql)?;
    let (presented, refresh, access, family) = (
        &presented.as_bytes()[..],
        &tokens.refresh.as_bytes()[..],
        &tokens.access.as_bytes()[..],
        &tokens.family.as_bytes()[..],
    );
    let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<(Grant, u64)> {
        Ok((grant_from_row(row)?, row.get::<_, i64>(9)? as u64))
    };
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![
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
        values.push(until);
    }
    let rotated = statement.query_row(values.as_slice(), read);
    Ok(rotated.optional()?)
}

const GRANT_COLUMNS: &str =
    "id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at";

fn grant_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Grant> {
    Ok(from_row!(row.get, Grant:
        id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at
    ))
}

pub(super) fn grants(conn: &Connection, handle: &Handle) -> StoreResult<Vec<Grant>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE handle = ?1 ORDER BY id DESC"
        ))?
        .query_map([handle], grant_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn end_grant(
    conn: &Connection,
    id: GrantId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    let ended = conn
        .prepare_cached("DELETE FROM oauth_grants WHERE id = ?1 AND (?2 IS NULL OR handle = ?2)")?
        .execute(params![id.0, handle])?;
    Ok(ended > 0)
}

pub(super) fn end_grant_holding(conn: &Connection, token: TokenHash) -> StoreResult<bool> {
    let grant: Option<GrantId> = conn
        .prepare_cached(
            "SELECT id FROM oauth_grants \
             WHERE access_hash = ?1 OR refresh_hash = ?1 OR previous_hash = ?1 \
             OR sibling_hash = ?1",
        )?
        .query_row([&token.as_bytes()[..]], |row| row.get(0))
        .optional()?;
    match grant {
        Some(id) => end_grant(conn, id, None),
        None => Ok(false),
    }
}

/// Ends every grant of `handle`'s (their token was rotated or revoked).
pub(super) fn end_grants_of(conn: &Connection, handle: &Handle) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM oauth_grants WHERE handle = ?1")?
        .execute([handle])?;
    conn.prepare_cached("DELETE FROM oauth_codes WHERE handle = ?1")?
        .execute([handle])?;
    Ok(())
}

/// One row a grant: the grants, with their one access token each.
pub(super) fn live_grants(conn: &Connection, now: Millis) -> StoreResult<Vec<LiveGrant>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, handle, resource, access_hash, access_expires FROM oauth_grants ORDER BY id",
    )?;
    let grants = statement.query_map([], |row| {
        let hash: Option<[u8; 32]> = row.get(3)?;
        let expires: Millis = row.get(4)?;
        Ok(LiveGrant {
            id: row.get(0)?,
            handle: row.get(1)?,
            resource: row.get(2)?,
            access: hash
                .filter(|_| expires > now)
                .map(|hash| (TokenHash::from_bytes(hash), expires)),
        })
    })?;
    Ok(grants.collect::<Result<_, _>>()?)
}

pub(super) fn forget(conn: &Connection, now: Millis, unused_since: Millis) -> StoreResult<()> {
    // A used code is kept until it would have expired, so that presenting
    // it again is known for what it is; then a while longer.
    conn.prepare_cached("DELETE FROM oauth_codes WHERE expires_at < ?1 - 600000")?
        .execute([now])?;
    // A grant whose refresh token expired holds nothing more.
    conn.prepare_cached("DELETE FROM oauth_grants WHERE refresh_expires < ?1")?
        .execute([now])?;
    conn.prepare_cached(
        "DELETE FROM oauth_clients WHERE coalesce(used_at, registered_at) < ?1 \
         AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
    )?
    .execute([unused_since])?;
    Ok(())
}
