//! OAuth's rows: clients registered by DCR, authorization codes, and
//! grants, each with its tokens in its own row (the codes and tokens as
//! hashes only). What presenting a code or a refresh token comes to is
//! decided in `../rules/grants.rs`, over the statements here.

use crate::model::{
    Authorization, Grant, GrantId, GrantTokens, Handle, LiveGrant, Millis, RegisteredClient,
    TokenHash,
};
use crate::store::StoreResult;
use crate::store::columns::from_row;
use crate::store::sql::{Executor, Param, Row};

/// What a rotation writes: the new tokens in place of the grant's.
macro_rules! rotated {
    () => {
        "refresh_hash = ?3, refresh_expires = ?4, access_hash = ?5, access_expires = ?6, \
         family = ?7, generation = generation + 1, used_at = ?2"
    };
}

/// A used code that awaits its grant.
macro_rules! awaiting_grant {
    () => {
        "SELECT 1 FROM oauth_codes WHERE hash = ?1 AND grant_id IS NULL AND expires_at > 0"
    };
}

/// A grant's columns, in [`Grant`]'s order.
macro_rules! grant_columns {
    () => {
        "id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at"
    };
}

pub async fn register_client(db: &impl Executor, client: &RegisteredClient) -> StoreResult<()> {
    let uris = client.redirect_uris.join("\n");
    db.write(
        "INSERT INTO oauth_clients (client_id, name, redirect_uris, registered_at) \
         VALUES (?1, ?2, ?3, ?4)",
        &[
            &client.client_id,
            &client.name,
            &uris,
            &client.registered_at,
        ],
    )
    .await
}

pub async fn registered_client(
    db: &impl Executor,
    client_id: &str,
) -> StoreResult<Option<RegisteredClient>> {
    db.row(
        "SELECT client_id, name, redirect_uris, registered_at FROM oauth_clients \
         WHERE client_id = ?1",
        &[&client_id],
        |row| {
            let uris: String = row.get(2)?;
            Ok(RegisteredClient {
                client_id: row.get(0)?,
                name: row.get(1)?,
                redirect_uris: uris.lines().map(str::to_owned).collect(),
                registered_at: row.get(3)?,
            })
        },
    )
    .await
}

pub async fn add_code(
    db: &impl Executor,
    code: TokenHash,
    a: &Authorization,
    expires_at: Millis,
) -> StoreResult<()> {
    db.write(
        "INSERT INTO oauth_codes (hash, handle, client_id, client_name, redirect_uri, challenge, \
         resource, scope, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        &[
            &code,
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

// A refresh (`rules::refresh_grant`) works on the grant's one row: its
// current refresh token, the one that token replaced (with the end of its
// grace), the family all its refresh tokens share, a generation counted
// at each rotation, and its one access token.

/// Rotates `client_id`'s grant whose current (or sibling), unexpired
/// refresh token is `presented`: `tokens` replace its tokens, the sibling
/// is forgotten, and `presented` becomes the previous one, taken again as
/// a retry until `retry_until`. The grant and its generation after.
pub async fn rotate_current(
    db: &impl Executor,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Millis,
) -> StoreResult<Option<(Grant, u64)>> {
    let sql = concat!(
        "UPDATE oauth_grants SET previous_hash = ?1, previous_until = ?9, sibling_hash = NULL, ",
        rotated!(),
        " WHERE (refresh_hash = ?1 OR sibling_hash = ?1) AND refresh_expires > ?2 \
         AND client_id = ?8 RETURNING ",
        grant_columns!(),
        ", generation"
    );
    rotate(
        db,
        sql,
        presented,
        client_id,
        tokens,
        now,
        Some(&retry_until),
    )
    .await
}

/// Rotates `client_id`'s grant whose previous refresh token is
/// `presented`, within its grace: `tokens` replace the ones issued for it
/// moments ago, whose refresh token becomes the sibling (good until it or
/// the new one is used), and `presented` stays the previous one.
pub async fn rotate_previous(
    db: &impl Executor,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<Option<(Grant, u64)>> {
    let sql = concat!(
        "UPDATE oauth_grants SET sibling_hash = refresh_hash, ",
        rotated!(),
        " WHERE previous_hash = ?1 AND previous_until > ?2 AND client_id = ?8 RETURNING ",
        grant_columns!(),
        ", generation"
    );
    rotate(db, sql, presented, client_id, tokens, now, None).await
}

/// Runs a rotation (`sql`, over [`rotated!`]'s parameters, the client as
/// `?8` and the end of the grace as `?9` when it sets one).
async fn rotate(
    db: &impl Executor,
    sql: &str,
    presented: TokenHash,
    client_id: &str,
    tokens: &GrantTokens,
    now: Millis,
    retry_until: Option<&Millis>,
) -> StoreResult<Option<(Grant, u64)>> {
    let mut params: Vec<&dyn Param> = vec![
        &presented,
        &now,
        &tokens.refresh,
        &tokens.refresh_expires,
        &tokens.access,
        &tokens.access_expires,
        &tokens.family,
        &client_id,
    ];
    params.extend(retry_until.map(|until| until as &dyn Param));
    db.row(sql, &params, |row| {
        Ok((grant_from_row(&row)?, row.get::<i64>(9)? as u64))
    })
    .await
}

/// The grant `presented` was a refresh token of and is no more: its
/// previous one past the grace, or another of `family`'s (never its
/// current one, nor its previous one within the grace, which another
/// client presented: those are unknown to it).
pub async fn grant_reused(
    db: &impl Executor,
    presented: TokenHash,
    family: TokenHash,
    now: Millis,
) -> StoreResult<Option<GrantId>> {
    db.value(
        "SELECT id FROM oauth_grants WHERE (family = ?2 OR previous_hash = ?1) \
         AND refresh_hash <> ?1 AND (sibling_hash IS NULL OR sibling_hash <> ?1) \
         AND NOT (previous_hash IS NOT NULL AND previous_hash = ?1 AND previous_until > ?3)",
        &[&presented, &family, &now],
    )
    .await
}

/// Marks `code`, unused and unexpired, used at `now`: what it authorized;
/// none for any other code.
pub async fn use_code(
    db: &impl Executor,
    code: TokenHash,
    now: Millis,
) -> StoreResult<Option<Authorization>> {
    db.row(
        "UPDATE oauth_codes SET used_at = ?2 WHERE hash = ?1 AND used_at IS NULL \
         AND expires_at > ?2 \
         RETURNING handle, client_id, client_name, redirect_uri, challenge, resource, scope",
        &[&code, &now],
        |row| {
            Ok(from_row!(row.get, Authorization:
                handle, client_id, client_name, redirect_uri, challenge, resource, scope
            ))
        },
    )
    .await
}

/// Voids the used `code` from now on: the grant made from it, if one was
/// (`None` when no used code is `code`). On PostgreSQL the update waits
/// for a grant being made from the code (which holds its row:
/// [`code_awaits_grant`]), and then sees that grant.
pub async fn void_used_code(
    db: &impl Executor,
    code: TokenHash,
) -> StoreResult<Option<Option<GrantId>>> {
    db.value(
        "UPDATE oauth_codes SET expires_at = 0 WHERE hash = ?1 AND used_at IS NOT NULL \
         RETURNING grant_id",
        &[&code],
    )
    .await
}

/// Whether `code` still awaits its grant (used, not voided, none made
/// yet). On PostgreSQL the code's row is locked until the transaction
/// ends: a second redemption voids the code either before this (no
/// grant) or after (it ends the grant).
pub async fn code_awaits_grant(db: &impl Executor, code: TokenHash) -> StoreResult<bool> {
    let sql = db.pick(awaiting_grant!(), concat!(awaiting_grant!(), " FOR UPDATE"));
    db.exists(sql, &[&code]).await
}

/// `handle`'s grants beyond their `keep` most recently used.
pub async fn grants_beyond(
    db: &impl Executor,
    handle: &Handle,
    keep: u32,
) -> StoreResult<Vec<GrantId>> {
    // No dialect reads an offset alone the same way: a limit nothing reaches.
    let sql = "SELECT id FROM oauth_grants WHERE handle = ?1 ORDER BY used_at DESC, id DESC \
               LIMIT ?3 OFFSET ?2";
    db.column(sql, &[handle, &i64::from(keep), &i64::MAX]).await
}

/// Writes a new grant of `a` with `tokens`, made and used `now`.
pub async fn insert_grant(
    db: &impl Executor,
    a: &Authorization,
    tokens: &GrantTokens,
    now: Millis,
) -> StoreResult<GrantId> {
    db.one(
        "INSERT INTO oauth_grants (handle, client_id, client_name, redirect_uri, scope, \
             resource, created_at, used_at, family, generation, refresh_hash, refresh_expires, \
             access_hash, access_expires) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, 0, ?9, ?10, ?11, ?12) RETURNING id",
        &[
            &a.handle,
            &a.client_id,
            &a.client_name,
            &a.redirect_uri,
            &a.scope,
            &a.resource,
            &now,
            &tokens.family,
            &tokens.refresh,
            &tokens.refresh_expires,
            &tokens.access,
            &tokens.access_expires,
        ],
        |row| row.get(0),
    )
    .await
}

/// Notes that `grant` was made from `code`, and that its client was used
/// `now`.
pub async fn grant_made(
    db: &impl Executor,
    code: TokenHash,
    grant: GrantId,
    client_id: &str,
    now: Millis,
) -> StoreResult<()> {
    let made = "UPDATE oauth_codes SET grant_id = ?2 WHERE hash = ?1";
    db.write(made, &[&code, &grant]).await?;
    let used = "UPDATE oauth_clients SET used_at = ?2 WHERE client_id = ?1";
    db.write(used, &[&client_id, &now]).await
}

fn grant_from_row(row: &Row<'_>) -> StoreResult<Grant> {
    Ok(from_row!(row.get, Grant:
        id, handle, client_id, client_name, redirect_uri, scope, resource, created_at, used_at
    ))
}

pub async fn grants(db: &impl Executor, handle: &Handle) -> StoreResult<Vec<Grant>> {
    let sql = concat!(
        "SELECT ",
        grant_columns!(),
        " FROM oauth_grants WHERE handle = ?1 ORDER BY id DESC"
    );
    db.rows(sql, &[handle], |row| grant_from_row(&row)).await
}

/// Ends a grant and its tokens (only `handle`'s, if named): whether one
/// ended.
pub async fn end_grant(
    db: &impl Executor,
    id: GrantId,
    handle: Option<&Handle>,
) -> StoreResult<bool> {
    let ended = db
        .exec(
            "DELETE FROM oauth_grants WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR handle = ?2)",
            &[&id, &handle],
        )
        .await?;
    Ok(ended > 0)
}

pub async fn end_grant_holding(db: &impl Executor, token: TokenHash) -> StoreResult<bool> {
    let grant: Option<GrantId> = db
        .value(
            "SELECT id FROM oauth_grants \
             WHERE access_hash = ?1 OR refresh_hash = ?1 OR previous_hash = ?1 \
             OR sibling_hash = ?1",
            &[&token],
        )
        .await?;
    match grant {
        Some(id) => end_grant(db, id, None).await,
        None => Ok(false),
    }
}

/// Ends every grant of `handle`'s (their token was rotated or revoked).
pub async fn end_grants_of(db: &impl Executor, handle: &Handle) -> StoreResult<()> {
    db.write("DELETE FROM oauth_grants WHERE handle = ?1", &[handle])
        .await?;
    db.write("DELETE FROM oauth_codes WHERE handle = ?1", &[handle])
        .await
}

/// One row a grant: the grants, with their one access token each.
pub async fn live_grants(db: &impl Executor, now: Millis) -> StoreResult<Vec<LiveGrant>> {
    db.rows(
        "SELECT id, handle, resource, access_hash, access_expires FROM oauth_grants ORDER BY id",
        &[],
        |row| {
            let hash: Option<TokenHash> = row.get(3)?;
            let expires: Millis = row.get(4)?;
            Ok(LiveGrant {
                id: row.get(0)?,
                handle: row.get(1)?,
                resource: row.get(2)?,
                access: hash.filter(|_| expires > now).map(|hash| (hash, expires)),
            })
        },
    )
    .await
}

pub async fn forget(db: &impl Executor, now: Millis, unused_since: Millis) -> StoreResult<()> {
    // A used code is kept until it would have expired, so that presenting
    // it again is known for what it is; then a while longer.
    db.write(
        "DELETE FROM oauth_codes WHERE expires_at < CAST(?1 AS BIGINT) - 600000",
        &[&now],
    )
    .await?;
    // A grant whose refresh token expired holds nothing more.
    db.write(
        "DELETE FROM oauth_grants WHERE refresh_expires < ?1",
        &[&now],
    )
    .await?;
    db.write(
        "DELETE FROM oauth_clients WHERE coalesce(used_at, registered_at) < ?1 \
         AND client_id NOT IN (SELECT client_id FROM oauth_grants)",
        &[&unused_since],
    )
    .await
}

/// The credentials revision, as this transaction (or connection) sees it.
pub async fn credentials_revision(db: &impl Executor) -> StoreResult<u64> {
    let value: Option<i64> = db
        .value(
            "SELECT value FROM revisions WHERE name = 'credentials'",
            &[],
        )
        .await?;
    Ok(value.unwrap_or(0) as u64)
}
