//! MCP sessions kept across restarts: what both backends do alike. Saving,
//! binding and reading one is each backend's own (`../*/sessions.rs`):
//! PostgreSQL keeps which relay process holds it.

use crate::model::{Millis, SessionId};
use crate::store::StoreResult;
use crate::store::sql::{Executor, List, in_list};

pub async fn touch(db: &impl Executor, ids: &[SessionId], now: Millis) -> StoreResult<()> {
    let sql = in_list!(
        db,
        "UPDATE mcp_sessions SET last_used = ?2 WHERE ",
        "id",
        "?1",
        ""
    );
    db.write(sql, &[&List(ids), &now]).await
}

pub async fn end(db: &impl Executor, ids: &[SessionId]) -> StoreResult<()> {
    let sql = in_list!(db, "DELETE FROM mcp_sessions WHERE ", "id", "?1", "");
    db.write(sql, &[&List(ids)]).await
}

pub async fn forget_idle(db: &impl Executor, before: Millis) -> StoreResult<()> {
    db.write("DELETE FROM mcp_sessions WHERE last_used < ?1", &[&before])
        .await
}
