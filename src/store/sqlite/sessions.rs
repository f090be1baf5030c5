//! MCP sessions kept across restarts: saving, binding and reading one
//! (the rest is `../statements/sessions.rs`).

use crate::model::{Millis, SessionId, TokenHash};
use crate::store::{StoreResult, StoredSession};
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn save(conn: &Connection, id: &SessionId, state: &str, now: Millis) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO mcp_sessions (id, state, last_used) VALUES (?1, ?2, ?3) \
         ON CONFLICT (id) DO UPDATE SET state = ?2, last_used = ?3",
    )?
    .execute(params![id, state, now])?;
    Ok(())
}

pub(super) fn bind(
    conn: &Connection,
    id: &SessionId,
    owner: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    conn.prepare_cached("UPDATE mcp_sessions SET owner = ?2, last_used = ?3 WHERE id = ?1")?
        .execute(params![id, &owner.as_bytes()[..], now])?;
    Ok(())
}

pub(super) fn get(conn: &Connection, id: &SessionId) -> StoreResult<Option<StoredSession>> {
    Ok(conn
        .prepare_cached("SELECT owner, state, last_used FROM mcp_sessions WHERE id = ?1")?
        .query_row([id], |row| {
            let owner: Option<Vec<u8>> = row.get(0)?;
            Ok(StoredSession {
                owner: owner
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                    .map(TokenHash::from_bytes),
                state: row.get(1)?,
                last_used: row.get(2)?,
                // One relay per SQLite file.
                elsewhere: false,
            })
        })
        .optional()?)
}
