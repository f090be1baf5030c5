//! People, their token hashes, presence, the relay's keys and what it
//! keeps.

use super::oauth;
use crate::model::{Handle, Millis, Person, Presence, TokenHash};
use crate::store::columns::from_row;
use crate::store::sql::{Executor, Param, Row};
use crate::store::{Clash, Missing, StoreError, StoreResult};

/// A person's columns, in [`Person`]'s order, and where they come from.
macro_rules! person_columns {
    () => {
        "SELECT p.handle, p.name, p.created_at, s.last_seen_at, p.revoked_at \
         FROM people p LEFT JOIN presence s ON s.handle = p.handle"
    };
}

fn person_from_row(row: Row<'_>) -> StoreResult<Person> {
    Ok(from_row!(row.get, Person: handle, name, created_at, last_seen_at, revoked_at))
}

pub async fn by_token(db: &impl Executor, hash: TokenHash) -> StoreResult<Option<Person>> {
    let sql = concat!(
        person_columns!(),
        " WHERE p.token_hash = ?1 AND p.revoked_at IS NULL"
    );
    db.row(sql, &[&hash], person_from_row).await
}

/// The token hashes of everyone live, with whose they are.
pub async fn live_tokens(db: &impl Executor) -> StoreResult<Vec<(TokenHash, Handle)>> {
    db.rows(
        "SELECT token_hash, handle FROM people WHERE revoked_at IS NULL",
        &[],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .await
}

/// Whether anyone, revoked or not, was ever added.
pub async fn any(db: &impl Executor) -> StoreResult<bool> {
    db.exists("SELECT 1 FROM people LIMIT 1", &[]).await
}

pub async fn all(db: &impl Executor) -> StoreResult<Vec<Person>> {
    let sql = concat!(person_columns!(), " ORDER BY p.id");
    db.rows(sql, &[], person_from_row).await
}

pub async fn add(
    db: &impl Executor,
    handle: &Handle,
    name: &str,
    hash: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    let added = db
        .exec(
            "INSERT INTO people (handle, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (handle) DO NOTHING",
            &[handle, &name, &hash, &now],
        )
        .await?;
    if added == 0 {
        return Err(StoreError::Conflict(Clash::HandleTaken(handle.clone())));
    }
    Ok(())
}

/// Runs an UPDATE of a live person (`?1` the handle, `?2` the value);
/// `NotFound` when there is none.
async fn update_live(
    db: &impl Executor,
    handle: &Handle,
    statement: &str,
    value: &dyn Param,
) -> StoreResult<()> {
    if db.exec(statement, &[handle, value]).await? == 0 {
        return Err(StoreError::NotFound(Missing::ActivePerson(handle.clone())));
    }
    Ok(())
}

/// A rotated or revoked token ends the person's OAuth grants too.
pub async fn rotate(db: &impl Executor, handle: &Handle, hash: TokenHash) -> StoreResult<()> {
    oauth::end_grants_of(db, handle).await?;
    let sql = "UPDATE people SET token_hash = ?2 WHERE handle = ?1 AND revoked_at IS NULL";
    update_live(db, handle, sql, &hash).await
}

pub async fn revoke(db: &impl Executor, handle: &Handle, now: Millis) -> StoreResult<()> {
    oauth::end_grants_of(db, handle).await?;
    let sql = "UPDATE people SET revoked_at = ?2 WHERE handle = ?1 AND revoked_at IS NULL";
    update_live(db, handle, sql, &now).await
}

pub async fn set_status(
    db: &impl Executor,
    handle: &Handle,
    status: &str,
    now: Millis,
) -> StoreResult<()> {
    db.write(
        "INSERT INTO presence (handle, status, status_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (handle) DO UPDATE SET status = ?2, status_at = ?3",
        &[handle, &status, &now],
    )
    .await
}

/// Records last-seen times, keeping the later of two.
pub async fn record_seen(db: &impl Executor, seen: Vec<(Handle, Millis)>) -> StoreResult<()> {
    let sql = db.pick(
        "INSERT INTO presence (handle, last_seen_at) VALUES (?1, ?2) ON CONFLICT (handle) \
         DO UPDATE SET last_seen_at = max(coalesce(last_seen_at, 0), ?2)",
        "INSERT INTO presence (handle, last_seen_at) VALUES (?1, ?2) ON CONFLICT (handle) \
         DO UPDATE SET last_seen_at = greatest(coalesce(presence.last_seen_at, 0), ?2)",
    );
    for (handle, at) in seen {
        db.exec(sql, &[&handle, &at]).await?;
    }
    Ok(())
}

pub async fn presence(db: &impl Executor) -> StoreResult<Vec<Presence>> {
    db.rows(
        "SELECT handle, status, last_seen_at FROM presence",
        &[],
        |row| Ok(from_row!(row.get, Presence: handle, status, last_seen_at)),
    )
    .await
}

/// Forgets the presence of handles that are no person's and have been
/// quiet since `quiet_since`.
pub async fn forget_quiet_presence(db: &impl Executor, quiet_since: Millis) -> StoreResult<()> {
    let sql = db.pick(
        "DELETE FROM presence WHERE handle NOT IN (SELECT handle FROM people) \
         AND max(coalesce(last_seen_at, 0), coalesce(status_at, 0)) < ?1",
        "DELETE FROM presence WHERE handle NOT IN (SELECT handle FROM people) \
         AND greatest(coalesce(last_seen_at, 0), coalesce(status_at, 0)) < ?1",
    );
    db.write(sql, &[&quiet_since]).await
}

/// The relay's key named `name`, made of `fresh` by whichever relay asks
/// first, and the same for all.
pub async fn key(db: &impl Executor, name: &str, fresh: &[u8]) -> StoreResult<Vec<u8>> {
    db.exec(
        "INSERT INTO keys (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
        &[&name, &fresh],
    )
    .await?;
    let value = db
        .value("SELECT value FROM keys WHERE name = ?1", &[&name])
        .await?;
    Ok(value.unwrap_or_else(|| fresh.to_vec()))
}

pub async fn kept(db: &impl Executor, name: &str) -> StoreResult<Option<Vec<u8>>> {
    db.value("SELECT value FROM kept WHERE name = ?1", &[&name])
        .await
}

pub async fn keep(db: &impl Executor, name: &str, value: &[u8]) -> StoreResult<()> {
    db.write(
        "INSERT INTO kept (name, value) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET value = ?2",
        &[&name, &value],
    )
    .await
}
