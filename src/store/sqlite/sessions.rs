//! MCP sessions kept across restarts: saving, binding and reading one
//! (the rest is `../statements/sessions.rs`). One relay serves a SQLite
//! file, so no session is ever held elsewhere.

use crate::model::{Millis, SessionId, TokenHash};
use crate::store::sql::Executor;
use crate::store::{StoreResult, StoredSession};

pub(super) async fn save(
    db: &impl Executor,
    id: &SessionId,
    state: &str,
    now: Millis,
) -> StoreResult<()> {
    db.write(
        "INSERT INTO mcp_sessions (id, state, last_used) VALUES (?1, ?2, ?3) \
         ON CONFLICT (id) DO UPDATE SET state = ?2, last_used = ?3",
        &[id, &state, &now],
    )
    .await
}

pub(super) async fn bind(
    db: &impl Executor,
    id: &SessionId,
    owner: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    let sql = "UPDATE mcp_sessions SET owner = ?2, last_used = ?3 WHERE id = ?1";
    db.write(sql, &[id, &owner, &now]).await
}

pub(super) async fn get(db: &impl Executor, id: &SessionId) -> StoreResult<Option<StoredSession>> {
    let sql = "SELECT owner, state, last_used FROM mcp_sessions WHERE id = ?1";
    db.row(sql, &[id], |row| {
        Ok(StoredSession {
            owner: row.get(0)?,
            state: row.get(1)?,
            last_used: row.get(2)?,
            elsewhere: false,
        })
    })
    .await
}
