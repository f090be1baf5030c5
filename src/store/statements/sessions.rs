//! MCP sessions kept across restarts: what both backends do alike. Saving,
//! binding and reading one is each backend's own (`../*/sessions.rs`):
//! PostgreSQL keeps which relay process holds it.

use crate::model::{Millis, SessionId};
use crate::store::StoreResult;
use crate::store::sql::{Executor, List};

pub(in crate::store) async fn touch(
    db: &impl Executor,
    ids: &[SessionId],
    now: Millis,
) -> StoreResult<()> {
    let sql = db.pick(
        "UPDATE mcp_sessions SET last_used = ?2 WHERE id IN (SELECT value FROM json_each(?1))",
        "UPDATE mcp_sessions SET last_used = ?2 WHERE id = ANY(?1)",
    );
    db.write(sql, &[&List(ids.to_vec()), &now]).await
}

pub(in crate::store) async fn end(db: &impl Executor, ids: &[SessionId]) -> StoreResult<()> {
    let sql = db.pick(
        "DELETE FROM mcp_sessions WHERE id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM mcp_sessions WHERE id = ANY(?1)",
    );
    db.write(sql, &[&List(ids.to_vec())]).await
}

pub(in crate::store) async fn forget_idle(db: &impl Executor, before: Millis) -> StoreResult<()> {
    db.write("DELETE FROM mcp_sessions WHERE last_used < ?1", &[&before])
        .await
}
