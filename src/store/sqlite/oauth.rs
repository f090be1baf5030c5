//! OAuth's rows: clients registered by DCR, authorization codes, grants
//! and their tokens (the codes and tokens as hashes only).

use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, LiveGrant, Millis, Redeemed, Refreshed,
    RegisteredClient, TokenHash,
};
use crate::store::StoreResult;
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

pub(super) fn redeem_code(
    conn: &Connection,
    code: TokenHash,
    now: Millis,
) -> StoreResult<Redeemed> {
    let hash = &code.as_bytes()[..];
    let fresh = conn
        .prepare_cached(
            "UPDATE oauth_codes SET used_at = ?2 WHERE hash = ?1 AND used_at IS NULL \
             AND expires_at > ?2 \
             RETURNING handle, client_id, client_name, redirect_uri, challenge, resource, scope",
        )?
        .query_row(params![hash, now], |row| {
            Ok(Authorization {
                handle: row.get(0)?,
                client_id: row.get(1)?,
                client_name: row.get(2)?,
                redirect_uri: row.get(3)?,
                challenge: row.get(4)?,
                resource: row.get(5)?,
                scope: row.get(6)?,
            })
        })
        .optional()?;
    if let Some(authorization) = fresh {
        return Ok(Redeemed::Fresh(authorization));
    }
    // A code presented again is void from now on; its grant, if one was
    // made, ends (and if none was yet, none will be: `open_grant`).
    let used: Option<Option<i64>> = conn
        .prepare_cached(
            "UPDATE oauth_codes SET expires_at = 0 WHERE hash = ?1 AND used_at IS NOT NULL \
             RETURNING grant_id",
        )?
        .query_row([hash], |row| row.get(0))
        .optional()?;
    match used {
        None => Ok(Redeemed::Unknown),
        Some(grant) => {
            if let Some(grant) = grant {
                end_grant(conn, GrantId(grant), None)?;
            }
            Ok(Redeemed::Reused)
        }
    }
}

fn insert_tokens(conn: &Connection, grant: GrantId, tokens: &GrantTokens) -> StoreResult<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO oauth_tokens (hash, grant_id, refresh, expires_at) VALUES (?1, ?2, ?3, ?4)",
    )?;
    insert.execute(params![
        &tokens.access.as_bytes()[..],
        grant.0,
        false,
        tokens.access_expires
    ])?;
    insert.execute(params![
        &tokens.refresh.as_bytes()[..],
        grant.0,
        true,
        tokens.refresh_expires
    ])?;
    Ok(())
}

pub(super) fn open_grant(
    conn: &Connection,
    code: TokenHash,
    a: &Authorization,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<Option<Grant>> {
    let live = conn
        .prepare_cached(
            "SELECT 1 FROM oauth_codes WHERE hash = ?1 AND grant_id IS NULL AND expires_at > 0",
        )?
        .exists([&code.as_bytes()[..]])?;
    if !live {
        return Ok(None);
    }
    let id: i64 = conn
        .prepare_cached(
            "INSERT INTO oauth_grants (handle, client_id, client_name, redirect_uri, scope, \
             resource, created_at, used_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) RETURNING id",
        )?
        .query_row(
            params![
                a.handle,
                a.client_id,
                a.client_name,
                a.redirect_uri,
                a.scope,
                a.resource,
                now
            ],
            |row| row.get(0),
        )?;
    let grant = GrantId(id);
    insert_tokens(conn, grant, tokens)?;
    conn.prepare_cached("UPDATE oauth_codes SET grant_id = ?2 WHERE hash = ?1")?
        .execute(params![&code.as_bytes()[..], id])?;
    conn.prepare_cached("UPDATE oauth_clients SET used_at = ?2 WHERE client_id = ?1")?
        .execute(params![a.client_id, now])?;
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

pub(super) fn refresh_grant(
    conn: &Connection,
    refresh: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<Refreshed> {
    let hash = &refresh.as_bytes()[..];
    let taken: Option<i64> = conn
        .prepare_cached(
            "UPDATE oauth_tokens SET used_at = ?2 WHERE hash = ?1 AND refresh \
             AND used_at IS NULL AND expires_at > ?2 \
             AND grant_id IN (SELECT id FROM oauth_grants WHERE client_id = ?3) \
             RETURNING grant_id",
        )?
        .query_row(params![hash, now, client_id], |row| row.get(0))
        .optional()?;
    let Some(id) = taken else {
        let used: Option<i64> = conn
            .prepare_cached(
                "SELECT grant_id FROM oauth_tokens WHERE hash = ?1 AND refresh \
                 AND used_at IS NOT NULL",
            )?
            .query_row([hash], |row| row.get(0))
            .optional()?;
        return match used {
            Some(grant) => {
                end_grant(conn, GrantId(grant), None)?;
                Ok(Refreshed::Reused)
            }
            None => Ok(Refreshed::Unknown),
        };
    };
    let grant = GrantId(id);
    insert_tokens(conn, grant, tokens)?;
    conn.prepare_cached("UPDATE oauth_grants SET used_at = ?2 WHERE id = ?1")?
        .execute(params![id, now])?;
    let grant = conn
        .prepare_cached(&format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE id = ?1"
        ))?
        .query_row([id], grant_from_row)?;
    Ok(Refreshed::Rotated(grant))
}

const GRANT_COLUMNS: &str =
    "id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at";

fn grant_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Grant> {
    Ok(Grant {
        id: GrantId(row.get(0)?),
        handle: row.get(1)?,
        client_id: row.get(2)?,
        client_name: row.get(3)?,
        redirect_uri: row.get(4)?,
        scope: row.get(5)?,
        resource: row.get(6)?,
        created_at: row.get(7)?,
        used_at: row.get(8)?,
    })
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
    if ended > 0 {
        conn.prepare_cached("DELETE FROM oauth_tokens WHERE grant_id = ?1")?
            .execute([id.0])?;
    }
    Ok(ended > 0)
}

pub(super) fn end_grant_holding(conn: &Connection, token: TokenHash) -> StoreResult<bool> {
    let grant: Option<i64> = conn
        .prepare_cached("SELECT grant_id FROM oauth_tokens WHERE hash = ?1")?
        .query_row([&token.as_bytes()[..]], |row| row.get(0))
        .optional()?;
    match grant {
        Some(id) => end_grant(conn, GrantId(id), None),
        None => Ok(false),
    }
}

/// Ends every grant of `handle`'s (their token was rotated or revoked).
pub(super) fn end_grants_of(conn: &Connection, handle: &Handle) -> StoreResult<()> {
    conn.prepare_cached(
        "DELETE FROM oauth_tokens WHERE grant_id IN (SELECT id FROM oauth_grants WHERE handle = ?1)",
    )?
    .execute([handle])?;
    conn.prepare_cached("DELETE FROM oauth_grants WHERE handle = ?1")?
        .execute([handle])?;
    conn.prepare_cached("DELETE FROM oauth_codes WHERE handle = ?1")?
        .execute([handle])?;
    Ok(())
}

pub(super) fn live_grants(conn: &Connection, now: Millis) -> StoreResult<Vec<LiveGrant>> {
    let mut statement = conn.prepare_cached(
        "SELECT g.id, g.handle, g.resource, t.hash, t.expires_at FROM oauth_grants g \
         LEFT JOIN oauth_tokens t ON t.grant_id = g.id AND NOT t.refresh AND t.expires_at > ?1 \
         ORDER BY g.id",
    )?;
    let mut rows = statement.query([now])?;
    let mut grants: Vec<LiveGrant> = Vec::new();
    while let Some(row) = rows.next()? {
        let id = GrantId(row.get(0)?);
        if grants.last().is_none_or(|g| g.id != id) {
            grants.push(LiveGrant {
                id,
                handle: row.get(1)?,
                resource: row.get(2)?,
                access: Vec::new(),
            });
        }
        let hash: Option<[u8; 32]> = row.get(3)?;
        if let (Some(hash), Some(grant)) = (hash, grants.last_mut()) {
            grant
                .access
                .push((TokenHash::from_bytes(hash), row.get(4)?));
        }
    }
    Ok(grants)
}

pub(super) fn forget(conn: &Connection, now: Millis, unused_since: Millis) -> StoreResult<()> {
    // A used code is kept until it would have expired, so that presenting
    // it again is known for what it is; then a while longer.
    conn.prepare_cached("DELETE FROM oauth_codes WHERE expires_at < ?1 - 600000")?
        .execute([now])?;
    conn.prepare_cached("DELETE FROM oauth_tokens WHERE expires_at < ?1")?
        .execute([now])?;
    // A grant whose refresh tokens have all expired or been used holds
    // nothing more.
    conn.prepare_cached(
        "DELETE FROM oauth_grants WHERE id NOT IN \
         (SELECT grant_id FROM oauth_tokens WHERE refresh AND used_at IS NULL)",
    )?
    .execute([])?;
    conn.prepare_cached(
        "DELETE FROM oauth_clients WHERE coalesce(used_at, registered_at) < ?1 \
         AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
    )?
    .execute([unused_since])?;
    Ok(())
}
