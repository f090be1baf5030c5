//! MCP sessions: bound to the caller that opened them, capped per person,
//! and ended when their credential is revoked or replaced.
//!
//! rmcp checks credentials per request, not per session, so without this a
//! person could send requests on someone else's `Mcp-Session-Id`. The layer
//! sits behind the credentials layer, which put the [`Caller`] on the
//! request.
//!
//! - **Owners**: every session opened is recorded with its caller; a
//!   request on it with another person's token gets 403.
//! - **A cap per person**: past [`Sessions::max_per_person`] sessions,
//!   opening one more ends that person's least recently used session. A
//!   429 would lock out a person whose crashed clients left sessions behind
//!   until they expired; ending the stalest one costs at most a client that
//!   was not using it a re-initialise (it gets 404, which MCP clients answer
//!   by opening a new session).
//! - **Idle expiry**: a session unused for [`Sessions::idle`] is ended
//!   (rmcp's own keep-alive is set to the same).
//! - **Standalone streams** (`GET /mcp`) hold one of the person's wait
//!   slots while open, like every other stream.
//! - **Revocation**: [`end_revoked`] ends the sessions of a token that was
//!   revoked or replaced, with their streams, within a second.
//! - **Restarts**: sessions are kept in the store (rmcp's `SessionStore`
//!   over the core, [`SessionOwners::kept`]), bound to the token that
//!   opened them. After a restart, a request on a kept session from that
//!   token takes it up again (rmcp replays the handshake); from another
//!   token it gets 403; an idle or unknown one gets rmcp's 404, which tells
//!   the client to start anew. [`upkeep`] records which sessions were used
//!   and forgets idle ones.

use crate::config::Sessions;
use crate::model::SessionId;
use crate::protocol::{HeldSession, SESSION_HEADER, wants_pushes};
use crate::relay::{Caller, KeptSession, PushFeed, Relay, WaitSlot};
use crate::wire::{self, ApiError};
use axum::body::Bytes;
use axum::{
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::{
    SessionManager, SessionState, SessionStore, SessionStoreError, local::LocalSessionManager,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

/// How long a revoked session's calls in flight have to deliver their
/// refusal before the session is ended.
const ANSWER_GRACE: Duration = Duration::from_millis(200);

/// Who opened each live MCP session, and when it was last used.
pub struct SessionOwners {
    owners: Mutex<HashMap<HeaderValue, Owned>>,
    /// rmcp's sessions, to end the ones this layer ends.
    sessions: Arc<LocalSessionManager>,
    relay: Arc<Relay>,
    policy: Sessions,
}

struct Owned {
    caller: Caller,
    last_used: Instant,
    /// Used since its use was last written to the store.
    touched: bool,
    /// Standalone streams open on it: a session streaming is in use.
    streams: usize,
}

impl Owned {
    /// A session just opened or taken up by `caller`.
    fn new(caller: Caller) -> Owned {
        Owned {
            caller,
            last_used: Instant::now(),
            touched: false,
            streams: 0,
        }
    }
}

impl SessionOwners {
    pub(super) fn new(relay: Arc<Relay>, policy: Sessions) -> SessionOwners {
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(policy.idle);
        SessionOwners {
            owners: Mutex::default(),
            sessions: Arc::new(sessions),
            relay,
            policy,
        }
    }

    /// rmcp's session manager, which the MCP service must share with this.
    pub(super) fn manager(&self) -> Arc<LocalSessionManager> {
        self.sessions.clone()
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<HeaderValue, Owned>> {
        self.owners.lock().expect("session owners lock")
    }

    /// Whether `caller` holds `session` here: open here and theirs, or kept
    /// from before a restart and taken up now (`false`: neither open nor
    /// kept, so unknown to rmcp as well, which answers 404). Owners are
    /// forgotten only after rmcp has dropped the session. Someone else's
    /// session is refused.
    async fn check_holder(&self, session: &HeaderValue, caller: &Caller) -> Result<bool, Response> {
        match self.use_session(session) {
            Some(owner) if owner.identity() != caller.identity() => {
                Err(ApiError::forbidden("this MCP session belongs to someone else").into_response())
            }
            Some(_) => Ok(true),
            None => self
                .take_up(session, caller)
                .await
                .map_err(IntoResponse::into_response),
        }
    }

    /// The owner of `session`, marking it used.
    fn use_session(&self, session: &HeaderValue) -> Option<Caller> {
        let mut owners = self.owners();
        let owned = owners.get_mut(session)?;
        owned.last_used = Instant::now();
        owned.touched = true;
        Some(owned.caller.clone())
    }

    fn streaming(&self, session: &HeaderValue, delta: isize) {
        if let Some(owned) = self.owners().get_mut(session) {
            owned.streams = owned.streams.saturating_add_signed(delta);
            owned.last_used = Instant::now();
        }
    }

    /// Records a new session, then ends what the policy says must end:
    /// sessions idle too long, and the owner's least recently used ones past
    /// the cap.
    async fn record(&self, session: HeaderValue, caller: Caller) {
        let account = caller.account();
        let ending: Vec<HeaderValue> = {
            let mut owners = self.owners();
            owners.insert(session.clone(), Owned::new(caller));
            let now = Instant::now();
            let mut ending: Vec<HeaderValue> = owners
                .iter()
                .filter(|(_, o)| o.streams == 0 && now - o.last_used > self.policy.idle)
                .map(|(id, _)| id.clone())
                .collect();
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

    /// Ends sessions, in rmcp too (their streams close), and in the store.
    async fn end(&self, ending: Vec<HeaderValue>) {
        let mut ended = Vec::with_capacity(ending.len());
        for id in ending {
            self.owners().remove(&id);
            let Ok(id) = id.to_str() else { continue };
            if let Err(error) = self.sessions.close_session(&Arc::from(id)).await {
                tracing::warn!(%error, "ending an MCP session failed");
            }
            ended.push(SessionId::new(id));
        }
        if let Err(error) = self.relay.end_sessions(ended).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "forgetting ended MCP sessions failed"
            );
        }
    }

    /// Takes up a session kept from before a restart, if it is `caller`'s;
    /// says whether it did.
    async fn take_up(&self, session: &HeaderValue, caller: &Caller) -> Result<bool, ApiError> {
        let Ok(id) = session.to_str().map(SessionId::new) else {
            return Ok(false);
        };
        match self
            .relay
            .kept_session(&id, caller, self.policy.idle)
            .await?
        {
            KeptSession::Yours => {
                // Taken up here: this process holds it now (several relays
                // on one store answer it as lost elsewhere).
                self.relay.bind_session(&id, caller).await?;
                let mut owned = Owned::new(caller.clone());
                owned.touched = true;
                self.owners().insert(session.clone(), owned);
                Ok(true)
            }
            KeptSession::Theirs => Err(ApiError::forbidden(
                "this MCP session belongs to someone else",
            )),
            // rmcp answers 404: the client starts a new session.
            KeptSession::Unknown => Ok(false),
        }
    }

    /// Writes which sessions were used since the last time, and forgets the
    /// kept sessions that went idle.
    async fn write_use(&self) {
        let used: Vec<SessionId> = self
            .owners()
            .iter_mut()
            .filter_map(|(id, o)| {
                let used = std::mem::take(&mut o.touched) || o.streams > 0;
                used.then(|| id.to_str().ok().map(SessionId::new)).flatten()
            })
            .collect();
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

    /// The store rmcp keeps sessions in, to share with the MCP service.
    pub(super) fn kept(&self) -> Arc<dyn SessionStore> {
        Arc::new(KeptSessions {
            relay: self.relay.clone(),
            idle: self.policy.idle,
        })
    }

    fn forget(&self, session: &HeaderValue) {
        self.owners().remove(session);
    }

    /// Sessions open now, for tests and metrics.
    pub(super) fn open(&self) -> usize {
        self.owners().len()
    }
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

/// rmcp's `SessionStore`, over the core: what rmcp needs to take a session
/// up again after a restart. Which token may is [`bind`]'s to check, before
/// rmcp looks here.
struct KeptSessions {
    relay: Arc<Relay>,
    idle: Duration,
}

#[async_trait::async_trait]
impl SessionStore for KeptSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(state) = self
            .relay
            .kept_session_state(&SessionId::new(session_id), self.idle)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_str(&state)?))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let state = serde_json::to_string(state)?;
        Ok(self
            .relay
            .keep_session(&SessionId::new(session_id), &state)
            .await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self
            .relay
            .end_sessions(vec![SessionId::new(session_id)])
            .await?)
    }
}

/// Refuses a request on an MCP session that another caller opened; records
/// the owner of every session opened; counts standalone streams as waits.
pub async fn bind(
    State(owners): State<Arc<SessionOwners>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let session = request.headers().get(SESSION_HEADER).cloned();
    let method = request.method().clone();
    let pushes_wanted = wants_pushes(request.uri());
    if let (Some(session), Some(caller)) = (&session, &caller) {
        match owners.check_holder(session, caller).await {
            // Only a session the caller was verified to hold is named to
            // the tools (follows are kept under it); a header naming any
            // other is just a header.
            Ok(true) => {
                if let Ok(id) = session.to_str() {
                    request.extensions_mut().insert(HeldSession(id.to_owned()));
                }
            }
            Ok(false) => {}
            Err(refused) => return refused,
        }
    }
    // A standalone stream holds a wait slot for as long as it is open.
    let slot = match (&method, &caller, &session) {
        (&Method::GET, Some(caller), Some(_)) => match owners.relay.hold_slot(caller) {
            Ok(slot) => Some(slot),
            Err(error) => return ApiError::from(error).into_response(),
        },
        _ => None,
    };
    let mut response = next.run(request).await;
    match (
        session,
        response.headers().get(SESSION_HEADER),
        caller,
        slot,
    ) {
        (None, Some(opened), Some(caller), _) if response.status().is_success() => {
            if let Ok(id) = opened.to_str()
                && let Err(error) = owners
                    .relay
                    .bind_session(&SessionId::new(id), &caller)
                    .await
            {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "keeping an MCP session failed"
                );
            }
            owners.record(opened.clone(), caller).await;
        }
        (Some(session), _, _, _) if method == Method::DELETE && response.status().is_success() => {
            owners.forget(&session);
            // rmcp answers a session's end with 202; clients (the Python SDK
            // among them) expect 200 or 204, and warn otherwise.
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        (Some(session), _, Some(caller), Some(slot)) if response.status().is_success() => {
            owners.streaming(&session, 1);
            let pushes = match session.to_str() {
                Ok(id) if pushes_wanted => {
                    Some(owners.relay.push_feed(&caller, &SessionId::new(id)))
                }
                _ => None,
            };
            let guard = StreamGuard {
                owners: owners.clone(),
                session,
                _slot: slot,
            };
            response = with_pushes(response, pushes, guard);
        }
        _ => {}
    }
    response
}

/// A client that asked for pushes gets them (its person's inbox, the
/// channels the session follows) on its standalone stream, between rmcp's
/// own events, for as long as rmcp's stream lasts; `guard` lives as long.
fn with_pushes(response: Response, pushes: Option<PushFeed>, guard: StreamGuard) -> Response {
    let pushes = futures::stream::iter(pushes)
        .flatten()
        .map(|push| Some(Ok(Bytes::from(wire::push::channel_event(&push)))));
    let (parts, body) = response.into_parts();
    let own = body
        .into_data_stream()
        .map(move |chunk| {
            let _held = &guard;
            Some(chunk)
        })
        .chain(futures::stream::once(async { None }));
    let body = futures::stream::select(own, pushes)
        .take_while(|chunk| std::future::ready(chunk.is_some()))
        .filter_map(std::future::ready);
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// Held by a standalone stream's body: frees its wait slot and marks the
/// session idle again when the stream ends.
struct StreamGuard {
    owners: Arc<SessionOwners>,
    session: HeaderValue,
    _slot: WaitSlot,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.owners.streaming(&self.session, -1);
    }
}
