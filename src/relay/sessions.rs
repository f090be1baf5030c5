//! MCP sessions kept in the store, so a client's session outlives a restart
//! of the relay. The edge keeps what the protocol library needs (opaque to
//! the core); the core keeps whose session it is: only the token that
//! opened a session may take it up again, and only while it is fresh. A
//! revoked or replaced token's sessions are deleted with it, by the store.

use super::{Caller, Relay, RelayResult};
use crate::model::{Millis, SessionId, now_millis};
use std::time::Duration;

/// A kept session, as a caller presenting its id may see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptSession {
    /// No such session is kept (or it went idle): the client must start
    /// a new one.
    Unknown,
    /// The caller's own: it may be taken up. What the edge kept of it.
    Yours(String),
    /// Another credential's.
    Theirs,
}

fn fresh_since(idle: Duration) -> Millis {
    now_millis().saturating_sub(idle.as_millis() as Millis)
}

impl Relay {
    /// Keeps a new session's state; it is bound to its opener next.
    pub async fn keep_session(&self, id: &SessionId, state: &str) -> RelayResult<()> {
        Ok(self.store.save_session(id, state, now_millis()).await?)
    }

    /// Binds a kept session to the credential that opened it. On an open
    /// relay there is no token to bind to, and no session is taken up.
    pub async fn bind_session(&self, id: &SessionId, caller: &Caller) -> RelayResult<()> {
        if let Some(owner) = caller.token() {
            self.store.bind_session(id, *owner, now_millis()).await?;
        }
        Ok(())
    }

    /// Whether `caller` may take up the kept session `id`, used within `idle`.
    pub async fn kept_session(
        &self,
        id: &SessionId,
        caller: &Caller,
        idle: Duration,
    ) -> RelayResult<KeptSession> {
        let Some(kept) = self.store.session(id).await? else {
            return Ok(KeptSession::Unknown);
        };
        Ok(match kept.owner {
            // Another relay on the store holds it: lost, as far as this one
            // can tell (a load balancer routes by session, or the client
            // starts a new one).
            _ if kept.elsewhere => KeptSession::Unknown,
            None => KeptSession::Unknown,
            Some(_) if kept.last_used < fresh_since(idle) => KeptSession::Unknown,
            Some(owner) if caller.token() == Some(&owner) => KeptSession::Yours(kept.state),
            Some(_) => KeptSession::Theirs,
        })
    }

    /// Records that sessions were used just now.
    pub async fn touch_sessions(&self, ids: Vec<SessionId>) -> RelayResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        Ok(self.store.touch_sessions(ids, now_millis()).await?)
    }

    /// Forgets sessions that ended.
    pub async fn end_sessions(&self, ids: Vec<SessionId>) -> RelayResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // What they followed ends with them.
        self.forget_pushes(&ids);
        Ok(self.store.end_sessions(ids).await?)
    }

    /// Forgets kept sessions not used within `idle`.
    pub async fn forget_idle_sessions(&self, idle: Duration) -> RelayResult<()> {
        Ok(self.store.forget_idle_sessions(fresh_since(idle)).await?)
    }
}
