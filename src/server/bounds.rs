//! Bounds on connections, enforced as they are accepted:
//!
//! - a cap on connections per client (an IPv4 address, an IPv6 /64; a
//!   trusted proxy's are not counted: its clients are many), and one on
//!   all connections;
//! - a budget, well below the cap, for connections no credential has
//!   vouched for yet (TLS unfinished, nothing sent, or only anonymous
//!   requests so far), with a share of it per client. When the budget is
//!   full, an idle such connection is closed to make room (the oldest of
//!   the client holding the most, so a teammate's one new connection among
//!   a stranger's many is the last to go), so idle connections from a few
//!   addresses can never keep the team's new ones out, and the rest of the
//!   cap stays for connections a request authenticated on (`auth::Vouch`);
//! - past a cap, a connection is answered, request by request, with a
//!   clear 429 or 503 in the API's error shape, and closed soon after;
//! - an idle timeout: a connection with no request in flight for
//!   [`Connections::idle`] is closed. It counts requests, not bytes, so an
//!   HTTP/2 connection kept alive by pings but doing nothing is still idle,
//!   and a long-poll or a stream keeps its connection however quiet it is.
//!
//! Here, the counting and each connection's [`Activity`]; `connection.rs`
//! the acceptor and the socket and service that enforce it.

use crate::config::Connections;
use crate::host::{Cidr, client_group};
use crate::layers::auth::Vouch;
use crate::metrics;
use crate::wire::ApiError;
use axum::http::StatusCode;
use futures::task::AtomicWaker;
use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    task::Context,
    time::Duration,
};
use tokio::time::Instant;

/// The connections open, counted against the caps.
pub struct ConnectionBounds {
    pub(super) limits: Connections,
    trusted_proxies: Vec<Cidr>,
    open: Mutex<Open>,
    /// What the metrics show of them.
    counts: Arc<metrics::Connections>,
}

#[derive(Default)]
struct Open {
    total: usize,
    /// Connections closed to make room, ever.
    evicted: u64,
    /// Every connection of each client.
    by_client: HashMap<IpAddr, usize>,
    /// The connections nobody has vouched for, by client (`None`: trusted
    /// proxies'), each client's oldest first.
    unvouched: HashMap<Option<IpAddr>, BTreeMap<u64, Arc<Activity>>>,
    unvouched_total: usize,
    next_id: u64,
}

/// How long a request may be in flight on a connection nobody vouched for
/// before the connection may be closed to make room anyway. A request that
/// authenticates vouches for its connection before it is handled, so what
/// is in flight longer is anonymous: a stranger holding a response unread
/// (an HTTP/2 window of zero) must not make their connections unclosable.
const BUSY_GRACE: Duration = Duration::from_secs(2);

impl Open {
    fn unvouched_of(&self, client: Option<IpAddr>) -> usize {
        self.unvouched.get(&client).map_or(0, BTreeMap::len)
    }

    fn count(&mut self, id: u64, client: Option<IpAddr>, activity: &Arc<Activity>) {
        self.total += 1;
        if let Some(client) = client {
            *self.by_client.entry(client).or_insert(0) += 1;
        }
        self.unvouched
            .entry(client)
            .or_default()
            .insert(id, activity.clone());
        self.unvouched_total += 1;
    }

    /// Stops counting connection `id` among the unvouched, if it was.
    fn vouched(&mut self, id: u64, client: Option<IpAddr>) {
        if let Some(of_client) = self.unvouched.get_mut(&client)
            && of_client.remove(&id).is_some()
        {
            self.unvouched_total -= 1;
            if of_client.is_empty() {
                self.unvouched.remove(&client);
            }
        }
    }

    /// Stops counting connection `id` at all.
    fn uncount(&mut self, id: u64, client: Option<IpAddr>) {
        self.vouched(id, client);
        self.total -= 1;
        if let Some(client) = client
            && let Some(count) = self.by_client.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                self.by_client.remove(&client);
            }
        }
    }

    /// Closes, to make room, the oldest connection of `client`'s that
    /// nobody vouched for and that is idle (or busy past [`BUSY_GRACE`]),
    /// and stops counting it; false if it has none.
    fn evict_from(&mut self, client: Option<IpAddr>) -> bool {
        let now = Instant::now();
        let oldest = self.unvouched.get(&client).and_then(|of_client| {
            of_client
                .iter()
                .find(|(_, activity)| activity.evictable(now))
                .map(|(id, activity)| (*id, activity.clone()))
        });
        let Some((id, activity)) = oldest else {
            return false;
        };
        self.uncount(id, client);
        activity.evict();
        self.evicted += 1;
        true
    }

    /// Makes room in the budget of connections nobody vouched for: closes
    /// one of the client that holds the most of them, so a teammate's new
    /// connection, one among a stranger's many, is the last to go. Between
    /// clients holding as many, the one whose oldest is oldest goes first,
    /// so which one closes never depends on a hash map's order.
    fn evict_from_the_largest(&mut self) -> bool {
        let mut clients: Vec<(usize, u64, Option<IpAddr>)> = self
            .unvouched
            .iter()
            .map(|(client, of_client)| {
                let oldest = of_client.keys().next().copied().unwrap_or(u64::MAX);
                (of_client.len(), oldest, *client)
            })
            .collect();
        clients.sort_unstable_by_key(|(count, oldest, _)| (std::cmp::Reverse(*count), *oldest));
        clients
            .into_iter()
            .any(|(_, _, client)| self.evict_from(client))
    }
}

impl ConnectionBounds {
    pub fn new(
        limits: Connections,
        trusted_proxies: Vec<Cidr>,
        counts: Arc<metrics::Connections>,
    ) -> Arc<ConnectionBounds> {
        Arc::new(ConnectionBounds {
            limits,
            trusted_proxies,
            open: Mutex::default(),
            counts,
        })
    }

    /// Counts a new connection from `peer` as not vouched for, or says why
    /// it is refused. To make room it may close an idle connection nobody
    /// vouched for: the client's own oldest when its share is full, else
    /// the oldest of whichever client holds the most.
    pub(super) fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        activity: &Arc<Activity>,
    ) -> Result<Ticket, ApiError> {
        let limits = &self.limits;
        let trusted = self.trusted_proxies.iter().any(|c| c.contains(peer));
        let client = (!trusted).then(|| client_group(peer));
        let mut open = self.open.lock().expect("connections lock");
        let of_client = client.and_then(|c| open.by_client.get(&c).copied());
        let evicted_before = open.evicted;
        let counted = |open: &Open, refused: Option<metrics::Budget>| {
            for _ in evicted_before..open.evicted {
                self.counts.evicted();
            }
            match refused {
                Some(budget) => self.counts.refused(budget),
                None => self.counts.opened(),
            }
        };
        if of_client.unwrap_or(0) >= limits.per_address && !open.evict_from(client) {
            counted(&open, Some(metrics::Budget::PerAddress));
            return Err(too_many_from_one(format!(
                "this address has {} connections open, the most one client may; close some, or \
                 reuse them",
                limits.per_address
            )));
        }
        if client.is_some()
            && open.unvouched_of(client) >= limits.unauthenticated_per_address
            && !open.evict_from(client)
        {
            counted(&open, Some(metrics::Budget::UnvouchedPerAddress));
            return Err(too_many_from_one(format!(
                "this address has {} connections open on which no valid credential has been \
                 sent yet, all busy, the most one client may; close some",
                limits.unauthenticated_per_address
            )));
        }
        let full = |open: &Open| {
            open.total >= limits.max || open.unvouched_total >= limits.unauthenticated
        };
        // Full: make room by closing a stranger's idle connection, if that
        // is enough (it is not when the team's connections fill the relay).
        if full(&open) && (!open.evict_from_the_largest() || full(&open)) {
            counted(&open, Some(metrics::Budget::Relay));
            return Err(ApiError {
                retry_after: Some(5),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    match open.total >= limits.max {
                        true => format!(
                            "the relay has {} connections open, its limit; try again shortly",
                            limits.max
                        ),
                        false => format!(
                            "the relay has {} connections open on which no valid credential \
                             has been sent yet, its limit for those, and all are busy; try \
                             again shortly",
                            limits.unauthenticated
                        ),
                    },
                )
            });
        }
        counted(&open, None);
        let id = open.next_id;
        open.next_id += 1;
        open.count(id, client, activity);
        Ok(Ticket {
            bounds: self.clone(),
            id,
            client,
            activity: activity.clone(),
        })
    }

    /// Counts connection `id` among those a credential vouched for.
    fn vouch(&self, id: u64, client: Option<IpAddr>) {
        self.open
            .lock()
            .expect("connections lock")
            .vouched(id, client);
    }
}

/// A 429 for a client past its own share.
fn too_many_from_one(message: String) -> ApiError {
    ApiError::rate_limited(message, Duration::from_secs(5))
}

/// A counted connection; dropping it (the connection closing) uncounts it,
/// unless it was closed to make room and uncounted then.
pub(super) struct Ticket {
    bounds: Arc<ConnectionBounds>,
    id: u64,
    client: Option<IpAddr>,
    activity: Arc<Activity>,
}

impl Ticket {
    /// What a credential calls to vouch for the connection: once.
    pub(super) fn vouch(&self) -> Vouch {
        let (bounds, id, client) = (self.bounds.clone(), self.id, self.client);
        let activity = self.activity.clone();
        Vouch::new(move || {
            if !activity.vouched.swap(true, Ordering::AcqRel) {
                bounds.vouch(id, client);
            }
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.bounds.counts.closed();
        let mut open = self.bounds.open.lock().expect("connections lock");
        if !self.activity.evicted.load(Ordering::Acquire) {
            open.uncount(self.id, self.client);
        }
    }
}

/// Requests in flight on one connection, when the last one started and
/// ended, whether a credential vouched for it, and whether it was closed
/// to make room.
pub(super) struct Activity {
    in_flight: AtomicUsize,
    last_started: Mutex<Instant>,
    last_ended: Mutex<Instant>,
    vouched: AtomicBool,
    evicted: AtomicBool,
    /// The connection's task, woken when it is evicted.
    task: AtomicWaker,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last_started: Mutex::new(Instant::now()),
            last_ended: Mutex::new(Instant::now()),
            vouched: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            task: AtomicWaker::new(),
        }
    }
}

impl Activity {
    /// A request on the connection starts.
    pub(super) fn started(&self) {
        *self.last_started.lock().expect("activity lock") = Instant::now();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A request on the connection ended (its response body finished).
    pub(super) fn ended(&self) {
        *self.last_ended.lock().expect("activity lock") = Instant::now();
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether the connection may be closed to make room: nothing in
    /// flight, or its latest request started over [`BUSY_GRACE`] ago.
    fn evictable(&self, now: Instant) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            || *self.last_started.lock().expect("activity lock") + BUSY_GRACE <= now
    }

    /// Closes the connection: its reads end and its writes fail. (A request
    /// that starts in the moment between is cut off with it: only an
    /// anonymous one can, on a connection nobody vouched for.)
    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.task.wake();
    }

    /// Whether a credential vouched for the connection.
    pub(super) fn is_vouched(&self) -> bool {
        self.vouched.load(Ordering::Acquire)
    }

    /// Whether the connection was closed to make room; wakes `cx` when it is.
    pub(super) fn is_evicted(&self, cx: &Context<'_>) -> bool {
        self.task.register(cx.waker());
        self.evicted.load(Ordering::Acquire)
    }

    /// When the connection, if nothing starts meanwhile, becomes idle; `None`
    /// while a request is in flight.
    pub(super) fn idle_at(&self, idle: Duration) -> Option<Instant> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| *self.last_ended.lock().expect("activity lock") + idle)
    }
}

#[cfg(test)]
#[test]
fn the_architecture_states_the_grace_of_a_busy_connection() {
    let doc = include_str!("../../ARCHITECTURE.md");
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let grace = BUSY_GRACE.as_secs();
    assert!(flat.contains(&format!("protects its connection for {grace} s only")));
}
