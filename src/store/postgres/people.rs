//! People, their token hashes, presence, the relay's keys and what it
//! keeps (`../sqlite/people.rs`, in PostgreSQL).

use super::{Db, row, token_hash};
use crate::model::{Handle, Millis, Person, Presence, TokenHash};
use crate::store::columns::from_row;
use crate::store::{Clash, Missing, StoreError, StoreResult};
use tokio_postgres::Row;

const PERSON_COLUMNS: &str = "p.handle, p.name, p.created_at, s.last_seen_at, p.revoked_at \
     FROM people p LEFT JOIN presence s ON s.handle = p.handle";

fn person_from_row(row: &Row) -> StoreResult<Person> {
    Ok(from_row!(row.try_get, Person: handle, name, created_at, last_seen_at, revoked_at))
}

pub(super) async fn by_token(db: &impl Db, hash: TokenHash) -> StoreResult<Option<Person>> {
    let sql = format!("SELECT {PERSON_COLUMNS} WHERE p.token_hash = $1 AND p.revoked_at IS NULL");
    row(db, &sql, &[&&hash.as_bytes()[..]])
        .await?
        .as_ref()
        .map(person_from_row)
        .transpose()
}

pub(super) async fn live_tokens(db: &impl Db) -> StoreResult<Vec<(TokenHash, Handle)>> {
    db.rows(
        "SELECT token_hash, handle FROM people WHERE revoked_at IS NULL",
        &[],
    )
    .await?
    .iter()
    .map(|row| Ok((token_hash(row.try_get(0)?)?, row.try_get(1)?)))
    .collect()
}

pub(super) async fn any(db: &impl Db) -> StoreResult<bool> {
    Ok(row(db, "SELECT 1 FROM people LIMIT 1", &[])
        .await?
        .is_some())
}

pub(super) async fn all(db: &impl Db) -> StoreResult<Vec<Person>> {
    db.rows(&format!("SELECT {PERSON_COLUMNS} ORDER BY p.id"), &[])
        .await?
        .iter()
        .map(person_from_row)
        .collect()
}

pub(super) async fn add(
    db: &impl Db,
    handle: &Handle,
    name: &str,
    hash: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    let added = db
        .exec(
            "INSERT INTO people (handle, name, token_hash, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (handle) DO NOTHING",
            &[&handle.as_str(), &name, &&hash.as_bytes()[..], &now],
        )
        .await?;
    if added == 0 {
        return Err(StoreError::Conflict(Clash::HandleTaken(handle.clone())));
    }
    Ok(())
}

/// Runs an UPDATE of a live person (`$1` the handle, `$2` the value);
/// `NotFound` when there is none.
async fn update_live(
    db: &impl Db,
    handle: &Handle,
    statement: &str,
    value: &(dyn tokio_postgres::types::ToSql + Sync),
) -> StoreResult<()> {
    if db.exec(statement, &[&handle.as_str(), value]).await? == 0 {
        return Err(StoreError::NotFound(Missing::ActivePerson(handle.clone())));
    }
    Ok(())
}

/// A rotated or revoked token ends the person's OAuth grants too.
pub(super) async fn rotate(db: &impl Db, handle: &Handle, hash: TokenHash) -> StoreResult<()> {
    crate::store::statements::oauth::end_grants_of(&super::Sql(db), handle).await?;
    update_live(
        db,
        handle,
        "UPDATE people SET token_hash = $2 WHERE handle = $1 AND revoked_at IS NULL",
        &&hash.as_bytes()[..],
    )
    .await
}

pub(super) async fn revoke(db: &impl Db, handle: &Handle, now: Millis) -> StoreResult<()> {
    crate::store::statements::oauth::end_grants_of(&super::Sql(db), handle).await?;
    update_live(
        db,
        handle,
        "UPDATE people SET revoked_at = $2 WHERE handle = $1 AND revoked_at IS NULL",
        &now,
    )
    .await
}

pub(super) async fn set_status(
    db: &impl Db,
    handle: &Handle,
    status: &str,
    now: Millis,
) -> StoreResult<()> {
    db.exec(
        "INSERT INTO presence (handle, status, status_at) VALUES ($1, $2, $3) \
         ON CONFLICT (handle) DO UPDATE SET status = $2, status_at = $3",
        &[&handle.as_str(), &status, &now],
    )
    .await?;
    Ok(())
}

pub(super) async fn record_seen(db: &impl Db, seen: Vec<(Handle, Millis)>) -> StoreResult<()> {
    for (handle, at) in seen {
        db.exec(
            "INSERT INTO presence (handle, last_seen_at) VALUES ($1, $2) \
             ON CONFLICT (handle) DO UPDATE \
             SET last_seen_at = greatest(coalesce(presence.last_seen_at, 0), $2)",
            &[&handle.as_str(), &at],
        )
        .await?;
    }
    Ok(())
}

pub(super) async fn presence(db: &impl Db) -> StoreResult<Vec<Presence>> {
    db.rows("SELECT handle, status, last_seen_at FROM presence", &[])
        .await?
        .iter()
        .map(|row| Ok(from_row!(row.try_get, Presence: handle, status, last_seen_at)))
        .collect()
}

/// Forgets the presence of handles that are no person's and have been
/// quiet since `quiet_since`.
pub(super) async fn forget_quiet_presence(db: &impl Db, quiet_since: Millis) -> StoreResult<()> {
    db.exec(
        "DELETE FROM presence WHERE handle NOT IN (SELECT handle FROM people) \
         AND greatest(coalesce(last_seen_at, 0), coalesce(status_at, 0)) < $1",
        &[&quiet_since],
    )
    .await?;
    Ok(())
}

/// The relay's key named `name`, made of `fresh` by whichever instance
/// asks first, and the same for all.
pub(super) async fn key(db: &impl Db, name: &str, fresh: &[u8]) -> StoreResult<Vec<u8>> {
    db.exec(
        "INSERT INTO keys (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        &[&name, &fresh],
    )
    .await?;
    Ok(row(db, "SELECT value FROM keys WHERE name = $1", &[&name])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or_else(|| fresh.to_vec()))
}

pub(super) async fn kept(db: &impl Db, name: &str) -> StoreResult<Option<Vec<u8>>> {
    row(db, "SELECT value FROM kept WHERE name = $1", &[&name])
        .await?
        .map(|row| Ok(row.try_get(0)?))
        .transpose()
}

pub(super) async fn keep(db: &impl Db, name: &str, value: &[u8]) -> StoreResult<()> {
    db.exec(
        "INSERT INTO kept (name, value) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET value = $2",
        &[&name, &value],
    )
    .await?;
    Ok(())
}
