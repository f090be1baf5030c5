//! People, their token hashes, and presence.

use crate::model::{Handle, Millis, Person, Presence, TokenHash};
use crate::store::columns::from_row;
use crate::store::{Clash, Missing, StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, params};

const PERSON_COLUMNS: &str = "p.handle, p.name, p.created_at, s.last_seen_at, p.revoked_at \
     FROM people p LEFT JOIN presence s ON s.handle = p.handle";

fn person_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Person> {
    Ok(from_row!(row.get, Person: handle, name, created_at, last_seen_at, revoked_at))
}

pub(super) fn by_token(conn: &Connection, hash: TokenHash) -> StoreResult<Option<Person>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PERSON_COLUMNS} WHERE p.token_hash = ?1 AND p.revoked_at IS NULL"
        ))?
        .query_row([&hash.as_bytes()[..]], person_from_row)
        .optional()?)
}

/// The token hashes of everyone live, with whose they are.
pub(super) fn live_tokens(conn: &Connection) -> StoreResult<Vec<(TokenHash, Handle)>> {
    Ok(conn
        .prepare_cached("SELECT token_hash, handle FROM people WHERE revoked_at IS NULL")?
        .query_map([], |row| {
            let hash: [u8; 32] = row.get(0)?;
            Ok((TokenHash::from_bytes(hash), row.get(1)?))
        })?
        .collect::<Result<_, _>>()?)
}

pub(super) fn any(conn: &Connection) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM people LIMIT 1")?
        .exists([])?)
}

pub(super) fn all(conn: &Connection) -> StoreResult<Vec<Person>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {PERSON_COLUMNS} ORDER BY p.id"))?
        .query_map([], person_from_row)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn add(
    conn: &Connection,
    handle: &Handle,
    name: &str,
    hash: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    let taken = conn
        .prepare_cached("SELECT 1 FROM people WHERE handle = ?1")?
        .exists([handle])?;
    if taken {
        return Err(StoreError::Conflict(Clash::HandleTaken(handle.clone())));
    }
    conn.prepare_cached(
        "INSERT INTO people (handle, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![handle, name, &hash.as_bytes()[..], now])?;
    Ok(())
}

/// Runs an UPDATE of a live person (`?1` the handle, `?2` the value);
/// `NotFound` when there is none.
fn update_live(
    conn: &Connection,
    handle: &Handle,
    statement: &str,
    value: &dyn rusqlite::ToSql,
) -> StoreResult<()> {
    let changed = conn
        .prepare_cached(statement)?
        .execute(params![handle, value])?;
    if changed == 0 {
        return Err(StoreError::NotFound(Missing::ActivePerson(handle.clone())));
    }
    Ok(())
}

/// A rotated or revoked token ends the person's OAuth grants too.
pub(super) fn rotate(conn: &Connection, handle: &Handle, hash: TokenHash) -> StoreResult<()> {
    crate::store::rules::at_once(crate::store::statements::oauth::end_grants_of(
        &super::Sql(conn),
        handle,
    ))?;
    update_live(
        conn,
        handle,
        "UPDATE people SET token_hash = ?2 WHERE handle = ?1 AND revoked_at IS NULL",
        &&hash.as_bytes()[..],
    )
}

pub(super) fn revoke(conn: &Connection, handle: &Handle, now: Millis) -> StoreResult<()> {
    crate::store::rules::at_once(crate::store::statements::oauth::end_grants_of(
        &super::Sql(conn),
        handle,
    ))?;
    update_live(
        conn,
        handle,
        "UPDATE people SET revoked_at = ?2 WHERE handle = ?1 AND revoked_at IS NULL",
        &now,
    )
}

pub(super) fn set_status(
    conn: &Connection,
    handle: &Handle,
    status: &str,
    now: Millis,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO presence (handle, status, status_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (handle) DO UPDATE SET status = ?2, status_at = ?3",
    )?
    .execute(params![handle, status, now])?;
    Ok(())
}

pub(super) fn record_seen(conn: &Connection, seen: Vec<(Handle, Millis)>) -> StoreResult<()> {
    let mut statement = conn.prepare_cached(
        "INSERT INTO presence (handle, last_seen_at) VALUES (?1, ?2) \
         ON CONFLICT (handle) DO UPDATE SET last_seen_at = max(coalesce(last_seen_at, 0), ?2)",
    )?;
    for (handle, at) in seen {
        statement.execute(params![handle, at])?;
    }
    Ok(())
}

pub(super) fn presence(conn: &Connection) -> StoreResult<Vec<Presence>> {
    Ok(conn
        .prepare_cached("SELECT handle, status, last_seen_at FROM presence")?
        .query_map([], |row| {
            Ok(from_row!(row.get, Presence: handle, status, last_seen_at))
        })?
        .collect::<Result<_, _>>()?)
}

/// Forgets the presence of handles that are no person's and have been
/// quiet since `quiet_since`.
pub(super) fn forget_quiet_presence(conn: &Connection, quiet_since: Millis) -> StoreResult<()> {
    conn.prepare_cached(
        "DELETE FROM presence WHERE handle NOT IN (SELECT handle FROM people) \
         AND max(coalesce(last_seen_at, 0), coalesce(status_at, 0)) < ?1",
    )?
    .execute([quiet_since])?;
    Ok(())
}

/// The relay's key named `name`, made of `fresh` the first time.
pub(super) fn key(conn: &Connection, name: &str, fresh: &[u8]) -> StoreResult<Vec<u8>> {
    conn.prepare_cached("INSERT OR IGNORE INTO keys (name, value) VALUES (?1, ?2)")?
        .execute(params![name, fresh])?;
    let value: Option<Vec<u8>> = conn
        .prepare_cached("SELECT value FROM keys WHERE name = ?1")?
        .query_row([name], |row| row.get(0))
        .optional()?;
    Ok(value.unwrap_or_else(|| fresh.to_vec()))
}

pub(super) fn kept(conn: &Connection, name: &str) -> StoreResult<Option<Vec<u8>>> {
    Ok(conn
        .prepare_cached("SELECT value FROM kept WHERE name = ?1")?
        .query_row([name], |row| row.get(0))
        .optional()?)
}

pub(super) fn keep(conn: &Connection, name: &str, value: &[u8]) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO kept (name, value) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET value = ?2",
    )?
    .execute(params![name, value])?;
    Ok(())
}
