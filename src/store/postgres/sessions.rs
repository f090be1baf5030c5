//! MCP sessions kept across restarts as PostgreSQL keeps them (the rest
//! is `../statements/sessions.rs`), and the relay processes that hold
//! them: a session held by a process that is alive is answered elsewhere
//! as lost.

use crate::model::{Millis, SessionId, TokenHash};
use crate::store::sql::{Executor, Param};
use crate::store::{StoreResult, StoredSession};

pub(super) async fn save(
    db: &impl Executor,
    holder: &str,
    id: &SessionId,
    state: &str,
    now: Millis,
) -> StoreResult<()> {
    db.write(
        "INSERT INTO mcp_sessions (id, state, last_used, holder) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (id) DO UPDATE SET state = ?2, last_used = ?3, holder = ?4",
        &[id, &state, &now, &holder],
    )
    .await
}

pub(super) async fn bind(
    db: &impl Executor,
    holder: &str,
    id: &SessionId,
    owner: TokenHash,
    now: Millis,
) -> StoreResult<()> {
    db.write(
        "UPDATE mcp_sessions SET owner = ?2, last_used = ?3, holder = ?4 WHERE id = ?1",
        &[id, &owner, &now, &holder],
    )
    .await
}

/// A kept session; `elsewhere` when a process other than `holder` holds
/// it and was seen at or after `alive_since`.
pub(super) async fn get(
    db: &impl Executor,
    holder: &str,
    id: &SessionId,
    alive_since: Millis,
) -> StoreResult<Option<StoredSession>> {
    let params: [&dyn Param; 3] = [id, &holder, &alive_since];
    db.row(
        "SELECT owner, state, last_used, holder IS NOT NULL AND holder <> ?2 AND EXISTS \
             (SELECT 1 FROM relays WHERE instance = holder AND seen_at >= ?3) \
         FROM mcp_sessions WHERE id = ?1",
        &params,
        |row| {
            Ok(StoredSession {
                owner: row.get(0)?,
                state: row.get(1)?,
                last_used: row.get(2)?,
                elsewhere: row.get(3)?,
            })
        },
    )
    .await
}

/// Says that relay process `instance` is alive at `now`.
pub(super) async fn beat(db: &impl Executor, instance: &str, now: Millis) -> StoreResult<()> {
    db.write(
        "INSERT INTO relays (instance, seen_at) VALUES (?1, ?2) \
         ON CONFLICT (instance) DO UPDATE SET seen_at = ?2",
        &[&instance, &now],
    )
    .await
}

/// Forgets relay process `instance` (it stopped), and any not seen since
/// `before` (they stopped without saying so).
pub(super) async fn forget_relays(
    db: &impl Executor,
    instance: &str,
    before: Millis,
) -> StoreResult<()> {
    let sql = "DELETE FROM relays WHERE instance = ?1 OR seen_at < ?2";
    db.write(sql, &[&instance, &before]).await
}
