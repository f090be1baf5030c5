//! Who holds which token, kept in memory and kept true.
//!
//! Every live person's token hash is held in a map, so telling a good token
//! from a bad one costs a lookup, never a query: a flood of bad tokens
//! costs the server nothing. The map follows the store's credentials
//! revision, which moves whenever anyone is added, rotated or revoked by
//! any process (the CLI writes while a server runs):
//! - [`super::Relay::watch_credentials`] checks it every [`CHECK_EVERY`] and, when it
//!   moved, reloads the map and tells every holder (waits, streams, MCP
//!   sessions), which end if their token is no longer live;
//! - every authentication reads the revision first (one row), so a person
//!   added a moment ago is let in, and one revoked a moment ago refused, on
//!   their very next request; a token memory does not know is counted
//!   against its address's quota before that read, so a flood of bad tokens
//!   is refused without any.
//!
//! Requests that come together share a read ([`RevisionReads`]): each
//! waits for one begun after it came, which sees all it must. Under load
//! that is one read for many requests, not one each; on PostgreSQL those
//! reads were the most of the database's work.
//!
//! OAuth grants are held beside people's tokens, one access token each: a
//! reload reads a row a grant, however often it was refreshed, and a
//! refresh this relay made changes memory in place
//! ([`Credentials::refreshed`]).
//! A grant is live only while its person is on the team (a live person,
//! or a participant this relay is configured with): one of anyone else's
//! (a participant removed from `RELAY_PARTICIPANTS`) is not held at all.

use super::{Audience, Caller, Identity, RelayResult, Settings};
use crate::model::{Grant, GrantId, Handle, LiveGrant, Millis, TokenHash, now_millis};
use crate::store::{Store, StoreError, StoreResult};
use futures::future::{BoxFuture, FutureExt};
use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};
use tokio::sync::watch;

/// How often the store's credentials revision is checked: a revoke or a
/// rotate ends what the old token holds within about this long.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// The tokens held in memory, as of one revision of the store.
#[derive(Default)]
struct Snapshot {
    revision: Option<u64>,
    people: HashMap<TokenHash, Handle>,
    /// OAuth access tokens not expired when read, with their grant.
    access: HashMap<TokenHash, Access>,
    /// The grants standing whose person is on the team.
    grants: HashMap<GrantId, Held>,
    /// Anyone, revoked or not, was ever added.
    anyone_added: bool,
}

/// An OAuth access token, as held in memory.
struct Access {
    grant: GrantId,
    expires_at: Millis,
    /// Which of this relay's resources it is for; none for another (the
    /// relay's public URL changed since), which is never taken.
    audience: Option<Audience>,
}

/// A grant, as held in memory.
struct Held {
    /// Whose it is.
    handle: Handle,
    /// The hash of its one access token, for a refresh to replace.
    access: Option<TokenHash>,
}

/// The key a grant's callers hold instead of a token's hash: the same for
/// every access token of the grant. No presented token hashes to it in
/// any map (lookups go by the access token's own hash), so it opens
/// nothing by itself.
fn grant_key(grant: GrantId) -> TokenHash {
    TokenHash::of(&format!("crosstalk oauth grant {grant}"))
}

pub(super) struct Credentials {
    store: Arc<dyn Store>,
    revisions: RevisionReads,
    settings: Settings,
    snapshot: RwLock<Snapshot>,
    /// The revision of the snapshot; holders wait on its changes.
    changes: watch::Sender<u64>,
    /// Held while the tokens are reloaded: the requests that see a new
    /// revision together reload once.
    reloading: tokio::sync::Mutex<()>,
}

impl Credentials {
    pub(super) fn new(store: Arc<dyn Store>, settings: Settings) -> Credentials {
        Credentials {
            revisions: RevisionReads::new({
                let store = store.clone();
                move || {
                    let store = store.clone();
                    async move { store.credentials_revision().await }.boxed()
                }
            }),
            store,
            settings,
            snapshot: RwLock::default(),
            changes: watch::Sender::new(0),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// Who a token belongs to, from memory alone.
    pub(super) fn known(&self, presented: &str) -> Option<Caller> {
        let hash = TokenHash::of(presented);
        let identity = if self
            .settings
            .shared_token
            .is_some_and(|shared| shared.matches(&hash))
        {
            Identity::Unbound
        } else if let Some((handle, _)) = self
            .settings
            .participants
            .iter()
            .find(|(_, token)| token.matches(&hash))
        {
            Identity::Person(handle.clone())
        } else {
            let snapshot = self.snapshot.read().expect("credentials lock");
            if let Some(handle) = snapshot.people.get(&hash) {
                Identity::Person(handle.clone())
            } else {
                let access = snapshot.access.get(&hash)?;
                let audience = access.audience?;
                if access.expires_at <= now_millis() {
                    return None;
                }
                let held = snapshot.grants.get(&access.grant)?;
                return Some(Caller {
                    identity: Identity::Person(held.handle.clone()),
                    token: Some(grant_key(access.grant)),
                    grant: Some((access.grant, audience)),
                });
            }
        };
        Some(Caller {
            identity,
            token: Some(hash),
            grant: None,
        })
    }

    /// Who a token belongs to, as of the store's latest revision: a cheap
    /// read of the revision begun after this call, shared with the calls
    /// that come meanwhile (the tokens are reloaded only when it moved), so
    /// a token revoked by another process a moment ago is refused on its
    /// very next request.
    pub(super) async fn find(&self, presented: &str) -> RelayResult<Option<Caller>> {
        self.refresh().await?;
        Ok(self.known(presented))
    }

    /// Whether nobody holds any credential yet (an open relay may serve).
    pub(super) async fn none_at_all(&self) -> RelayResult<bool> {
        if self.settings.shared_token.is_some() || !self.settings.participants.is_empty() {
            return Ok(false);
        }
        // Revoked people count as someone: their handles stay taken.
        Ok(!self.store.has_people().await?)
    }

    /// Whether the shared token may speak as `handle`: someone on the team
    /// (a live person or a participant), or anyone while the team has
    /// nobody at all (a relay run on the shared token alone, as the channel
    /// relay was).
    pub(super) fn may_be_named(&self, handle: &Handle) -> bool {
        if self.settings.participants.iter().any(|(h, _)| h == handle) {
            return true;
        }
        let snapshot = self.snapshot.read().expect("credentials lock");
        (!snapshot.anyone_added && self.settings.participants.is_empty())
            || snapshot.people.values().any(|h| h == handle)
    }

    /// Whether `handle` may hold a grant, as of the store's latest
    /// revision: a live person, or a participant this relay is configured
    /// with.
    pub(super) async fn on_team(&self, handle: &Handle) -> RelayResult<bool> {
        self.refresh().await?;
        let snapshot = self.snapshot.read().expect("credentials lock");
        Ok(self.participant(handle) || snapshot.people.values().any(|h| h == handle))
    }

    fn participant(&self, handle: &Handle) -> bool {
        self.settings.participants.iter().any(|(h, _)| h == handle)
    }

    /// Whether the credential `caller` was let in with still holds.
    pub(super) fn is_live(&self, caller: &Caller) -> bool {
        let snapshot = self.snapshot.read().expect("credentials lock");
        if let Some(grant) = caller.grant() {
            return snapshot.grants.contains_key(&grant);
        }
        let Some(hash) = &caller.token else {
            // Let in without a token, on an open relay: until someone is added.
            return snapshot.people.is_empty();
        };
        let env = self.settings.shared_token.is_some_and(|s| s.matches(hash))
            || self
                .settings
                .participants
                .iter()
                .any(|(_, t)| t.matches(hash));
        env || snapshot.people.contains_key(hash)
    }

    /// Reloads the tokens if the store's revision moved; says whether it did.
    pub(super) async fn refresh(&self) -> RelayResult<bool> {
        let revision = self.revisions.latest().await?;
        let current = || self.snapshot.read().expect("credentials lock").revision == Some(revision);
        if current() {
            return Ok(false);
        }
        let _reloading = self.reloading.lock().await;
        if current() {
            return Ok(false);
        }
        let people: HashMap<TokenHash, Handle> =
            self.store.live_tokens().await?.into_iter().collect();
        let anyone_added = !people.is_empty() || self.store.has_people().await?;
        let live = self.store.live_grants(now_millis()).await?;
        let (access, grants) = self.held_grants(live, &people);
        {
            let mut snapshot = self.snapshot.write().expect("credentials lock");
            snapshot.people = people;
            snapshot.access = access;
            snapshot.grants = grants;
            snapshot.anyone_added = anyone_added;
            snapshot.revision = Some(revision);
        }
        self.changes.send_replace(revision);
        Ok(true)
    }

    /// The grants' access tokens and people, as memory holds them: only
    /// the grants of people on the team (`people`, and the participants).
    fn held_grants(
        &self,
        live: Vec<LiveGrant>,
        people: &HashMap<TokenHash, Handle>,
    ) -> (HashMap<TokenHash, Access>, HashMap<GrantId, Held>) {
        let team: HashSet<&Handle> = people
            .values()
            .chain(self.settings.participants.iter().map(|(h, _)| h))
            .collect();
        let mut access = HashMap::new();
        let mut grants = HashMap::new();
        for grant in live {
            if !team.contains(&grant.handle) {
                continue;
            }
            if let Some((hash, expires_at)) = grant.access {
                access.insert(hash, self.access(grant.id, &grant.resource, expires_at));
            }
            let held = Held {
                handle: grant.handle,
                access: grant.access.map(|(hash, _)| hash),
            };
            grants.insert(grant.id, held);
        }
        (access, grants)
    }

    fn access(&self, grant: GrantId, resource: &str, expires_at: Millis) -> Access {
        Access {
            grant,
            expires_at,
            audience: self.settings.oauth.audience_of(resource),
        }
    }

    /// Brings memory up to a refresh this relay made, which moved the
    /// store's revision to `revision`: the grant's new access token in,
    /// the one it replaced out (refused from now on). In place when memory
    /// was at the revision just before (nothing else changed since);
    /// otherwise by reading the store again, which still reads only a row
    /// a grant.
    pub(super) async fn refreshed(
        &self,
        grant: &Grant,
        access: TokenHash,
        expires_at: Millis,
        revision: u64,
    ) -> RelayResult<()> {
        let in_place = {
            let _reloading = self.reloading.lock().await;
            self.replace_access(grant, access, expires_at, revision)
        };
        if in_place {
            self.changes.send_replace(revision);
            return Ok(());
        }
        self.refresh().await.map(drop)
    }

    /// [`Credentials::refreshed`]'s change in place, if memory holds the
    /// grant at the revision before `revision`; whether it made it.
    fn replace_access(
        &self,
        grant: &Grant,
        access: TokenHash,
        expires_at: Millis,
        revision: u64,
    ) -> bool {
        let mut guard = self.snapshot.write().expect("credentials lock");
        let snapshot = &mut *guard;
        if revision == 0 || snapshot.revision != Some(revision - 1) {
            return false;
        }
        let Some(held) = snapshot.grants.get_mut(&grant.id) else {
            return false;
        };
        if let Some(old) = held.access.replace(access) {
            snapshot.access.remove(&old);
        }
        snapshot
            .access
            .insert(access, self.access(grant.id, &grant.resource, expires_at));
        snapshot.revision = Some(revision);
        true
    }

    /// Resolves when `caller`'s credential stops being live.
    pub(super) async fn revoked(&self, caller: &Caller) {
        let mut changes = self.changes.subscribe();
        while self.is_live(caller) {
            if changes.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Changes of the credentials, for holders outside the core.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// Reads of the store's credentials revision, shared. A caller waits for a
/// read begun after it asked, so it sees every change committed before it
/// came; one read runs at a time, and answers everyone who asked before it
/// began. A caller dropped mid-read (its client gone) leaves nothing
/// behind: the next caller reads for itself.
struct RevisionReads {
    read: Box<ReadRevision>,
    /// How many have asked.
    asked: AtomicU64,
    /// The last read's answer, for everyone up to the `asked` count it
    /// began at.
    last: tokio::sync::Mutex<(u64, Result<u64, Arc<StoreError>>)>,
}

type ReadRevision = dyn Fn() -> BoxFuture<'static, StoreResult<u64>> + Send + Sync;

impl RevisionReads {
    fn new(
        read: impl Fn() -> BoxFuture<'static, StoreResult<u64>> + Send + Sync + 'static,
    ) -> RevisionReads {
        RevisionReads {
            read: Box::new(read),
            asked: AtomicU64::new(0),
            last: tokio::sync::Mutex::new((0, Ok(0))),
        }
    }

    /// The revision, as of a read begun after this was called.
    async fn latest(&self) -> StoreResult<u64> {
        let ticket = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let mut last = self.last.lock().await;
        if last.0 < ticket {
            let covers = self.asked.load(Ordering::SeqCst);
            let answer = (self.read)().await.map_err(Arc::new);
            *last = (covers, answer);
        }
        last.1
            .clone()
            .map_err(|failure| StoreError::shared(&failure, "reading the credentials revision"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::Semaphore;

    /// Reads that count themselves and wait for a permit each to answer.
    fn gated() -> (RevisionReads, Arc<AtomicU64>, Arc<Semaphore>) {
        let (begun, gate) = (Arc::new(AtomicU64::new(0)), Arc::new(Semaphore::new(0)));
        let reads = RevisionReads::new({
            let (begun, gate) = (begun.clone(), gate.clone());
            move || {
                let revision = begun.fetch_add(1, Ordering::SeqCst) + 1;
                let gate = gate.clone();
                async move {
                    gate.acquire().await.expect("gate open").forget();
                    Ok(revision)
                }
                .boxed()
            }
        });
        (reads, begun, gate)
    }

    /// A caller in a task of its own, once its read has begun.
    async fn reading(
        reads: &Arc<RevisionReads>,
        begun: &AtomicU64,
    ) -> tokio::task::JoinHandle<StoreResult<u64>> {
        let caller = tokio::spawn({
            let reads = reads.clone();
            async move { reads.latest().await }
        });
        while begun.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        caller
    }

    #[tokio::test]
    async fn a_caller_waits_for_a_read_begun_after_it_and_callers_meanwhile_share_one() {
        let (reads, begun, gate) = gated();
        let reads = Arc::new(reads);
        let first = reading(&reads, &begun).await;
        // Two come while the first read runs: it began before them.
        let later: Vec<_> = (0..2)
            .map(|_| {
                let reads = reads.clone();
                tokio::spawn(async move { reads.latest().await.unwrap() })
            })
            .collect();
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            begun.load(Ordering::SeqCst),
            1,
            "the next read waits for the first"
        );
        gate.add_permits(2);
        assert_eq!(first.await.unwrap().unwrap(), 1);
        for caller in later {
            assert_eq!(caller.await.unwrap(), 2, "a read begun after they came");
        }
        assert_eq!(begun.load(Ordering::SeqCst), 2, "the two shared one read");
        // Nothing running: the next caller begins a read of its own.
        gate.add_permits(1);
        assert_eq!(reads.latest().await.unwrap(), 3);
    }

    #[tokio::test]
    async fn a_caller_dropped_mid_read_leaves_the_next_to_read_for_itself() {
        let (reads, begun, gate) = gated();
        let reads = Arc::new(reads);
        let dropped = reading(&reads, &begun).await;
        dropped.abort();
        assert!(dropped.await.unwrap_err().is_cancelled());
        gate.add_permits(1);
        assert_eq!(reads.latest().await.unwrap(), 2, "a read of its own");
    }
}
