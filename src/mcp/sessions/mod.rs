//! MCP sessions, the relay's own: opened at a client's `initialize`,
//! bound to the caller that opened it, capped per person, kept across
//! restarts, with their standalone streams and pushes.
//!
//! rmcp serves every call statelessly, as it serves revision 2026-07-28:
//! one handler per call, in the call's own task. A session is therefore no
//! more than this module's record of it (who opened it, when it was last
//! used, what its client declared), not a running service with its own
//! tasks and channels: rmcp's session manager cost four task hops a call
//! and about 70 KiB a session (`docs/rmcp-session-memory.md`), and the
//! relay sends nothing on a session that a record cannot (pushes are its
//! own, written into the standalone stream here).
//!
//! - **Opening**: an `initialize` that rmcp answers opens a session; its
//!   id goes back in `Mcp-Session-Id`.
//! - **Owners**: a request on a session with another person's token gets
//!   403; on a session that is neither open nor kept, 404, which tells the
//!   client to start anew.
//! - **A cap per person**: past [`Sessions::max_per_person`] sessions,
//!   opening one more ends that person's least recently used session. A
//!   429 would lock out a person whose crashed clients left sessions behind
//!   until they expired; ending the stalest one costs at most a client that
//!   was not using it a re-initialise.
//! - **Idle expiry**: a session unused for [`Sessions::idle`], with no
//!   stream open, is ended.
//! - **Standalone streams** (`GET /mcp`) carry the pushes of a client that
//!   asked for them, and hold one of the person's wait slots while open,
//!   like every other stream. `DELETE /mcp` ends a session.
//! - **Revocation**: [`end_revoked`] ends the sessions of a token that was
//!   revoked or replaced, with their streams, within a second.
//! - **Restarts**: sessions are kept in the store, bound to the token that
//!   opened them. After a restart, a request on a kept session from that
//!   token takes it up again; from another token it gets 403; an idle or
//!   unknown one gets 404. [`upkeep`] records which sessions were used and
//!   forgets idle ones.
//!
//! Here, the sessions kept; `layer.rs`, the layer that serves them.

mod layer;

pub use layer::layer;

use crate::config::Sessions;
use crate::model::SessionId;
use crate::protocol;
use crate::relay::{Caller, KeptSession, Relay};
use crate::wire::ApiError;
use axum::{
    http::{HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use rmcp::model::InitializeRequestParams;
use rmcp::transport::streamable_http_server::session::SessionState;
use serde_json::Value;
use std::{
    collections::{HashMap, hash_map::Entry},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

/// How long a revoked session's calls in flight have to deliver their
/// refusal before the session is ended.
const ANSWER_GRACE: Duration = Duration::from_millis(200);

/// How long a cancel that came before its call is kept for that call, and
/// how many a session keeps: a client sends the call and its cancel on two
/// connections, and the relay may read the cancel first.
const EARLY_CANCEL_KEPT: Duration = Duration::from_secs(5);
const EARLY_CANCELS: usize = 16;

/// The MCP session a request comes in on, verified to be its caller's: put
/// on the request by [`layer`] for the tools.
#[derive(Debug, Clone)]
pub(super) struct HeldSession {
    pub(super) id: SessionId,
    /// Its client said at `initialize` that it renders MCP Apps.
    pub(super) renders_apps: bool,
}

/// Who opened each live MCP session, and when it was last used.
pub struct SessionOwners {
    owners: Mutex<HashMap<HeaderValue, Owned>>,
    relay: Arc<Relay>,
    policy: Sessions,
    /// The next call's serial: a client may use one JSON-RPC id twice.
    calls: AtomicU64,
}

struct Owned {
    caller: Caller,
    last_used: Instant,
    /// Used since its use was last written to the store.
    touched: bool,
    /// Standalone streams open on it: a session streaming is in use.
    streams: usize,
    renders_apps: bool,
    /// Cancelled when the session ends (and at shutdown): its streams end.
    ended: CancellationToken,
    /// Its calls under way: a serial of the layer's, the JSON-RPC id, and
    /// what ends the call (the session's end, or its client cancelling it).
    calls: Vec<(u64, Value, CancellationToken)>,
    /// Cancels that named no call under way, and when they came: a call
    /// by that id that starts within [`EARLY_CANCEL_KEPT`] starts
    /// cancelled.
    early_cancels: Vec<(Value, Instant)>,
}

impl Owned {
    /// Keeps the cancel of a call `id` not under way, for that call.
    fn keep_early_cancel(&mut self, id: &Value) {
        self.early_cancels
            .retain(|(_, at)| at.elapsed() < EARLY_CANCEL_KEPT);
        if self.early_cancels.len() < EARLY_CANCELS {
            self.early_cancels.push((id.clone(), Instant::now()));
        }
    }

    /// Whether a cancel kept for a call `id` came within
    /// [`EARLY_CANCEL_KEPT`]; taken if so.
    fn cancelled_early(&mut self, id: &Value) -> bool {
        let kept = self
            .early_cancels
            .iter()
            .position(|(call, at)| call == id && at.elapsed() < EARLY_CANCEL_KEPT);
        kept.map(|at| self.early_cancels.swap_remove(at)).is_some()
    }
}

impl SessionOwners {
    pub(super) fn new(relay: Arc<Relay>, policy: Sessions) -> SessionOwners {
        SessionOwners {
            owners: Mutex::default(),
            relay,
            policy,
            calls: AtomicU64::new(0),
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<HeaderValue, Owned>> {
        self.owners.lock().expect("session owners lock")
    }

    /// A session just opened or taken up by `caller`.
    fn owned(&self, caller: Caller, renders_apps: bool) -> Owned {
        Owned {
            caller,
            last_used: Instant::now(),
            touched: false,
            streams: 0,
            renders_apps,
            ended: self.relay.shutdown_token().child_token(),
            calls: Vec::new(),
            early_cancels: Vec::new(),
        }
    }

    /// The session `caller` holds, open here and theirs, or kept from
    /// before a restart and taken up now; `None`: neither open nor kept.
    /// Someone else's session is refused.
    async fn holder(
        &self,
        session: &HeaderValue,
        caller: &Caller,
    ) -> Result<Option<HeldSession>, Response> {
        let open = {
            let mut owners = self.owners();
            owners.get_mut(session).map(|owned| {
                owned.last_used = Instant::now();
                owned.touched = true;
                (
                    owned.caller.identity() == caller.identity(),
                    owned.renders_apps,
                )
            })
        };
        let held = |renders_apps| HeldSession {
            id: SessionId::new(session.to_str().unwrap_or_default()),
            renders_apps,
        };
        match open {
            Some((false, _)) => Err(theirs().into_response()),
            Some((true, renders_apps)) => Ok(Some(held(renders_apps))),
            None => self
                .take_up(session, caller)
                .await
                .map(|taken| taken.map(held))
                .map_err(IntoResponse::into_response),
        }
    }

    /// Opens a session for `caller`, whose `initialize` declared
    /// `declared`: kept in the store, bound to the caller's token; its id.
    async fn open(&self, caller: Caller, declared: InitializeRequestParams) -> HeaderValue {
        let id = SessionId::random();
        let renders_apps = protocol::renders_apps(Some(&declared.capabilities));
        let kept = async {
            let state = serde_json::to_string(&SessionState::new(declared))
                .map_err(|error| crate::relay::RelayError::Internal(Box::new(error)))?;
            self.relay.keep_session(&id, &state).await?;
            self.relay.bind_session(&id, &caller).await
        };
        if let Err(error) = kept.await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "keeping an MCP session failed"
            );
        }
        let session = HeaderValue::from_str(id.as_str()).expect("base32 is a header value");
        self.record(session.clone(), self.owned(caller, renders_apps))
            .await;
        session
    }

    /// Records a new session, then ends what the policy says must end:
    /// sessions idle too long, and the owner's least recently used ones past
    /// the cap.
    async fn record(&self, session: HeaderValue, owned: Owned) {
        let account = owned.caller.account();
        let ending: Vec<HeaderValue> = {
            let mut owners = self.owners();
            owners.insert(session.clone(), owned);
            let mut ending = idle(&owners, self.policy.idle);
            let mut mine: Vec<(&HeaderValue, &Owned)> = owners
                .iter()
                .filter(|(id, o)| o.caller.account() == account && !ending.contains(id))
                .collect();
            if mine.len() > self.policy.max_per_person {
                // Streaming sessions last, then least recently used first.
                mine.sort_by_key(|(_, o)| (o.streams > 0, o.last_used));
                let excess = mine.len() - self.policy.max_per_person;
                ending.extend(
                    mine.into_iter()
                        .filter(|(id, _)| **id != session)
                        .take(excess)
                        .map(|(id, _)| id.clone()),
                );
            }
            ending
        };
        self.end(ending).await;
    }

    /// Ends sessions, with their streams, and in the store.
    async fn end(&self, ending: Vec<HeaderValue>) {
        let mut ended = Vec::with_capacity(ending.len());
        for id in ending {
            if let Some(owned) = self.owners().remove(&id) {
                owned.ended.cancel();
            }
            if let Ok(id) = id.to_str() {
                ended.push(SessionId::new(id));
            }
        }
        if let Err(error) = self.relay.end_sessions(ended).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "forgetting ended MCP sessions failed"
            );
        }
    }

    /// Takes up a session kept from before a restart, if it is `caller`'s;
    /// whether its client renders apps, if it did.
    async fn take_up(
        &self,
        session: &HeaderValue,
        caller: &Caller,
    ) -> Result<Option<bool>, ApiError> {
        let Ok(id) = session.to_str().map(SessionId::new) else {
            return Ok(None);
        };
        match self
            .relay
            .kept_session(&id, caller, self.policy.idle)
            .await?
        {
            KeptSession::Yours(state) => {
                // Taken up here: this process holds it now (several relays
                // on one store answer it as lost elsewhere).
                self.relay.bind_session(&id, caller).await?;
                let renders_apps = serde_json::from_str::<SessionState>(&state).is_ok_and(|kept| {
                    protocol::renders_apps(Some(&kept.initialize_params.capabilities))
                });
                let mut owned = self.owned(caller.clone(), renders_apps);
                owned.touched = true;
                // A call that came at the same time may have taken it up first.
                let renders_apps = match self.owners().entry(session.clone()) {
                    Entry::Occupied(open) => open.get().renders_apps,
                    Entry::Vacant(vacant) => vacant.insert(owned).renders_apps,
                };
                // Revoked while it was read: [`end_revoked`] looked before
                // it was here, so it is ended here (the store's row went
                // with the token).
                if !self.relay.is_live(caller) {
                    self.end(vec![session.clone()]).await;
                    return Ok(None);
                }
                Ok(Some(renders_apps))
            }
            KeptSession::Theirs => Err(theirs()),
            KeptSession::Unknown => Ok(None),
        }
    }

    /// A call `id` starts on `session`: its serial; what ends it when the
    /// session ends or its client cancels it (already cancelled if the
    /// session has just ended, or its cancel came first); and what ends
    /// the session, which tells the two apart.
    fn calling(
        &self,
        session: &HeaderValue,
        id: Value,
    ) -> (u64, CancellationToken, CancellationToken) {
        let serial = self.calls.fetch_add(1, Ordering::Relaxed);
        let (ends, session_ends) = match self.owners().get_mut(session) {
            Some(owned) => {
                let ends = owned.ended.child_token();
                if owned.cancelled_early(&id) {
                    ends.cancel();
                }
                owned.calls.push((serial, id, ends.clone()));
                (ends, owned.ended.clone())
            }
            None => {
                let ended = CancellationToken::new();
                ended.cancel();
                (ended.clone(), ended)
            }
        };
        (serial, ends, session_ends)
    }

    /// The client cancelled its call `id` on `session` (each call by that
    /// id, should it have sent two); one not under way yet is kept for a
    /// while, for the call to start cancelled.
    fn cancel(&self, session: &HeaderValue, id: &Value) {
        let mut owners = self.owners();
        let Some(owned) = owners.get_mut(session) else {
            return;
        };
        let mut found = false;
        for (_, _, ends) in owned.calls.iter().filter(|(_, call, _)| call == id) {
            ends.cancel();
            found = true;
        }
        if !found {
            owned.keep_early_cancel(id);
        }
    }

    /// The call `serial` on `session` ended.
    fn called(&self, session: &HeaderValue, serial: u64) {
        if let Some(owned) = self.owners().get_mut(session)
            && let Some(at) = owned.calls.iter().position(|(call, _, _)| *call == serial)
        {
            owned.calls.swap_remove(at);
        }
    }

    /// A standalone stream opens on `session` (`Some`: when it ends,
    /// cancelled with the session), or closes (`None`).
    fn streaming(&self, session: &HeaderValue, opens: bool) -> Option<CancellationToken> {
        let mut owners = self.owners();
        let owned = owners.get_mut(session)?;
        owned.last_used = Instant::now();
        if opens {
            owned.streams += 1;
            Some(owned.ended.clone())
        } else {
            owned.streams = owned.streams.saturating_sub(1);
            None
        }
    }

    /// Writes which sessions were used since the last time, ends the ones
    /// gone idle here, and forgets the kept ones gone idle in the store.
    async fn write_use(&self) {
        let (used, idle): (Vec<SessionId>, Vec<HeaderValue>) = {
            let mut owners = self.owners();
            let used = owners
                .iter_mut()
                .filter_map(|(id, o)| {
                    let used = std::mem::take(&mut o.touched) || o.streams > 0;
                    used.then(|| id.to_str().ok().map(SessionId::new)).flatten()
                })
                .collect();
            (used, idle(&owners, self.policy.idle))
        };
        self.end(idle).await;
        let written = async {
            self.relay.touch_sessions(used).await?;
            self.relay.forget_idle_sessions(self.policy.idle).await
        };
        if let Err(error) = written.await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "recording MCP sessions' use failed"
            );
        }
    }

    /// Sessions open now, for tests and metrics.
    pub(super) fn open_now(&self) -> usize {
        self.owners().len()
    }

    /// Whether the relay is stopping, which ends every session's token but
    /// not the sessions: they are kept for the next start.
    fn stopping(&self) -> bool {
        self.relay.shutdown_token().is_cancelled()
    }
}

/// The sessions unused for `idle` with no stream open.
fn idle(owners: &HashMap<HeaderValue, Owned>, idle: Duration) -> Vec<HeaderValue> {
    let now = Instant::now();
    owners
        .iter()
        .filter(|(_, o)| o.streams == 0 && now - o.last_used > idle)
        .map(|(id, _)| id.clone())
        .collect()
}

fn theirs() -> ApiError {
    ApiError::forbidden("this MCP session belongs to someone else")
}

fn not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "this MCP session does not exist: it ended or went idle; start a new one",
    )
    .into_response()
}

/// Ends the sessions whose credential was revoked or replaced, whenever
/// the team's credentials change, until `shutdown`.
pub(super) async fn end_revoked(owners: Arc<SessionOwners>, shutdown: CancellationToken) {
    let mut changes = owners.relay.credential_changes();
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = shutdown.cancelled() => return,
        }
        let revoked: Vec<HeaderValue> = owners
            .owners()
            .iter()
            .filter(|(_, o)| !owners.relay.is_live(&o.caller))
            .map(|(id, _)| id.clone())
            .collect();
        if !revoked.is_empty() {
            // Calls in flight end at the same news with the relay's own
            // refusal; let it reach the client before its session goes.
            tokio::time::sleep(ANSWER_GRACE).await;
            tracing::info!(
                sessions = revoked.len(),
                "ending MCP sessions of a revoked or replaced token"
            );
            owners.end(revoked).await;
        }
    }
}

/// How often which sessions were used is written to the store.
const WRITE_USE_EVERY: Duration = Duration::from_secs(60);

/// Writes sessions' use to the store every minute and at shutdown, and
/// forgets idle kept sessions, until `shutdown`.
pub(super) async fn upkeep(owners: Arc<SessionOwners>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(WRITE_USE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => owners.write_use().await,
            () = shutdown.cancelled() => break,
        }
    }
    owners.write_use().await;
}
