//! Pushes: what lands in a person's inbox, offered on its own to an open
//! stream of one of their sessions, and new posts in the channels a
//! session follows.
//!
//! A push is a lease, never a hand-over: nothing acknowledges what a
//! client does with a notification (Claude Code's channels have no
//! acknowledgement, and bytes written to a socket may sit in its buffers
//! forever). So a stream's task *offers* the person's waiting messages to
//! it (`Store::offer_inbox`): each is marked pushed and leased to that
//! stream for the relay's push lease. Until the lease ends, nobody else
//! takes it; once it ends, unless the recipient's agent confirmed it, it is
//! taken again by whoever asks first — another live stream of the person,
//! an inbox check, or the next stream that opens — but never offered twice
//! in a row to the same stream. What confirms a push is the recipient's
//! agent acting on it: reading it (`check_inbox` returns only what no lease
//! holds; `read_thread` and `GET /api/messages/{id}` by the recipient's
//! agent mark it read, not the person with the page's credentials) or
//! answering it (a reply in its thread, or to it in a channel).
//! A stream that ends (its client went away) gives its leases back at once,
//! and a stream that stops reading holds what it was offered only until the
//! leases end: whatever sits in its queue past its lease is dropped, not
//! written. A re-offer says so (`Delivery::offers` > 1).
//!
//! Re-offers end: a message is offered at most
//! [`MAX_OFFERS`](crate::model::MAX_OFFERS) times. One that many offers
//! left unconfirmed is offered to no stream again (a model that saw it so
//! often and did nothing will not act on one more); it stays in the inbox,
//! where `check_inbox` still takes it, its ledger says its pushes stopped,
//! and its person is told once its last lease ends (`notify`).
//!
//! Nothing is offered before the stream's client is ready to show it:
//! Claude Code drops what comes before its handler is in place, and tells
//! nobody when it is. An MCP session's stream therefore first asks its
//! client, every [`PROBE_EVERY`], to prove it listens ([`Push::Probe`],
//! which the edge sends as `notifications/tools/list_changed`); the edge
//! reports each `tools/list` of the session ([`Relay::tools_listed`]), and
//! the second since the stream opened is the proof (Claude Code installs
//! that handler right after its channel handler, and the first list may be
//! its own). A client that never proves it is never pushed to, and what
//! waits stays for `check_inbox`. An inbox stream is ready at once.
//!
//! Follows are notifications only: a followed channel's new post is copied
//! to the following session's stream, never leased, and the follows of a
//! session end with it. Follows are keyed by the MCP session the edge
//! verified the caller holds, and an inbox stream's by its own number, so
//! nobody can name another's.

mod feed;

use feed::Probe;
pub use feed::PushFeed;

use super::input::{parse_channel, parse_wait};
use super::{Caller, Identity, MAX_WAIT, Relay, RelayError, RelayResult, WaitSlot};
use crate::model::{Channel, Handle, Message, MessageId, Millis, SessionId, Via};
use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};
// The futures crate's channels, not tokio's: they allocate as items come,
// where a tokio channel sets out room for 32 items and cache-padded state
// from the start (1.1 KiB for `offered`, 0.8 for `followed`, 0.3 for a
// `watch` of readiness, against 0.4 KiB for all three here), on every open
// stream (bench/README.md, "A push stream's queues").
use futures::channel::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Offered messages queued for a stream beyond the one it is writing: a
/// stream that stops reading holds few.
const QUEUED: usize = 8;

/// Followed posts queued for a stream that is not reading: past this, it
/// misses copies (the channel keeps the posts).
const FOLLOWED_QUEUED: usize = 64;

/// How many of a person's waiting messages one offer takes for a stream.
const OFFER_BATCH: u32 = 16;
/// How long a lease waits, as it ends, for the offer its feed was making.
const STOP_OFFERING_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a push stream whose store failed waits before it offers again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The most channels one session or stream follows.
pub const MAX_FOLLOWS: usize = 64;

/// How often, and for how long, a stream asks its client to prove it
/// listens.
const PROBE_EVERY: Duration = Duration::from_millis(25);
const PROBE_FOR: Duration = Duration::from_secs(30);

/// The `tools/list` since a session's stream opened that proves its client
/// listens.
const LISTS_TO_PROVE: u32 = 2;

/// What a stream delivers.
#[derive(Debug, Clone)]
pub enum Push {
    /// A message of the person's inbox, offered to this stream: leased to
    /// it, not handed over (see the module's notes).
    Inbox(Box<Message>),
    /// A new post in a channel the session follows: a copy, not leased.
    Followed(Arc<Message>),
    /// A request that the client prove it can show pushes (see the
    /// module's notes).
    Probe,
}

impl Push {
    /// The message pushed; none for a probe.
    pub fn message(&self) -> Option<&Message> {
        match self {
            Push::Inbox(message) => Some(message),
            Push::Followed(message) => Some(message),
            Push::Probe => None,
        }
    }
}

/// Whose follows a stream carries, and the name they are kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// An MCP session's, which outlive its stream (`follow_channel`). Only
    /// a session the caller was verified to hold is ever named.
    Session(SessionId),
    /// An inbox stream's own, given when it opened, which end with it.
    Stream(u64),
}

/// Sessions' follows and open streams.
#[derive(Default)]
pub struct Pushes {
    feeds: Mutex<HashMap<Key, Subscriber>>,
    /// Numbers streams, so a session's second stream is not closed by the
    /// end of its first.
    streams: AtomicU64,
}

/// What a session or an inbox stream follows, and its stream.
#[derive(Default)]
struct Subscriber {
    channels: HashSet<Channel>,
    /// The latest stream opened, while it is open.
    stream: Option<OpenStream>,
}

struct OpenStream {
    number: u64,
    /// Whose it is: nobody's for an unbound caller.
    person: Option<Handle>,
    /// Until its client proves it can show what it is sent (see the
    /// module's notes), what tells its offering task that it did; `None`
    /// once it is ready (an inbox stream's from the start).
    proven: Option<oneshot::Sender<()>>,
    /// The session's `tools/list` since the stream opened.
    lists: u32,
    /// Where followed posts go.
    followed: mpsc::Sender<Arc<Message>>,
}

impl OpenStream {
    /// Its client can show what it is sent.
    fn is_ready(&self) -> bool {
        self.proven.is_none()
    }
}

impl Pushes {
    /// How many streams are open that take pushes.
    pub(super) fn listening(&self) -> usize {
        self.lock().values().filter(|s| s.stream.is_some()).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Subscriber>> {
        self.feeds.lock().expect("pushes lock")
    }

    /// Copies a channel post to the ready streams of the sessions that
    /// follow its channel, except its sender's and its recipient's (who is
    /// offered it from their inbox).
    fn post(&self, message: &Arc<Message>) {
        let Some(channel) = message.place.channel() else {
            return;
        };
        for follows in self.lock().values_mut() {
            if let Some(stream) = &mut follows.stream
                && follows.channels.contains(channel)
                && stream.is_ready()
                && stream.person.as_ref() != Some(&message.from)
                && (stream.person.is_none() || message.to != stream.person)
            {
                // A copy: a stream too far behind misses it, and the
                // channel still has it.
                let _ = stream.followed.try_send(message.clone());
            }
        }
    }

    /// People with a stream open now whose client is ready.
    fn reachable(&self) -> HashSet<Handle> {
        self.lock()
            .values()
            .filter_map(|f| f.stream.as_ref())
            .filter(|stream| stream.is_ready())
            .filter_map(|stream| stream.person.clone())
            .collect()
    }
}

impl Relay {
    /// Opens the push stream of the MCP `session` (one the caller holds),
    /// for `caller`: their inbox, and the posts of the channels the session
    /// follows, once its client proves it listens. An unbound caller (the
    /// shared token, an open relay) is nobody in particular: only follows
    /// reach its stream.
    pub fn push_feed(self: &Arc<Self>, caller: &Caller, session: &SessionId) -> PushFeed {
        let person = match &caller.identity {
            Identity::Person(me) => Some(me.clone()),
            Identity::Unbound => None,
        };
        self.open_feed(caller, person, Some(session), None, None, Via::Channel)
    }

    /// A stream of `caller`'s inbox (as `sender`, for the shared token),
    /// and of the new posts of the channels it `follows`, holding one of
    /// their wait slots while it lasts, whose client shows what it is
    /// offered `via` that path. Its client is ready from the start.
    pub fn inbox_feed(
        self: &Arc<Self>,
        caller: &Caller,
        sender: Option<&str>,
        follows: &[String],
        via: Via,
    ) -> RelayResult<PushFeed> {
        let me = self.acting_as(caller, sender)?;
        let follows: HashSet<Channel> = follows
            .iter()
            .map(|c| parse_channel(c))
            .collect::<RelayResult<_>>()?;
        if follows.len() > MAX_FOLLOWS {
            return Err(too_many_follows());
        }
        let slot = self.hold_slot(caller)?;
        Ok(self.open_feed(caller, Some(me), None, Some(follows), Some(slot), via))
    }

    /// Leases the caller's waiting messages to a hook that shows them to a
    /// model `via` its path, waiting up to `timeout` for one: what one
    /// offer of an inbox stream takes, and what arrives with it. While it
    /// waits its person counts as reachable by push. The leases outlive
    /// the call (the hook has shown them once it has them); unconfirmed,
    /// they end as a stream's do and the messages are offered again.
    pub async fn lease_inbox(
        self: &Arc<Self>,
        caller: &Caller,
        via: Via,
        timeout_s: Option<f64>,
    ) -> RelayResult<Vec<Message>> {
        use futures::StreamExt;
        let timeout = parse_wait(timeout_s, super::waits::INBOX_WAIT)?;
        let mut feed = self.inbox_feed(caller, None, &[], via)?;
        let mut leased = Vec::new();
        if let Ok(Some(push)) = tokio::time::timeout(timeout, feed.next()).await {
            leased.extend(push.message().cloned());
        }
        // With the rest its offer took, and what it took as the wait ended
        // (with no wait at all, what waited): a lease nobody is handed
        // would say `pushed` of a message no model was shown.
        // Within a bound: with the database away, the offering task's store
        // call may hang; what it takes after that is offered again when
        // its lease ends, as any lease nobody acted on.
        if let Ok(rest) = tokio::time::timeout(STOP_OFFERING_WITHIN, feed.stop_offering()).await {
            leased.extend(rest);
        }
        feed.keep_delivered();
        Ok(leased)
    }

    /// A stream of `session`'s follows, or (without one) of its `own`.
    fn open_feed(
        self: &Arc<Self>,
        caller: &Caller,
        person: Option<Handle>,
        session: Option<&SessionId>,
        own: Option<HashSet<Channel>>,
        slot: Option<WaitSlot>,
        via: Via,
    ) -> PushFeed {
        // A futures channel holds one item more than its buffer for each
        // sender, and each of these has one.
        let (offered_tx, offered) = mpsc::channel(QUEUED - 1);
        let (followed_tx, followed) = mpsc::channel(FOLLOWED_QUEUED - 1);
        let stop = CancellationToken::new();
        let number = self.pushes.streams.fetch_add(1, Ordering::Relaxed);
        let key = match session {
            Some(id) => Key::Session(id.clone()),
            None => Key::Stream(number),
        };
        // An inbox stream's client is ready at once; a session's proves it.
        let (proven, is_proven) = session.map(|_| oneshot::channel()).unzip();
        let probing = proven.is_some();
        {
            let mut pushes = self.pushes.lock();
            let entry = pushes.entry(key.clone()).or_default();
            if let Some(channels) = own {
                entry.channels = channels;
            }
            entry.stream = Some(OpenStream {
                number,
                person: person.clone(),
                proven,
                lists: 0,
                followed: followed_tx,
            });
        }
        // Unique across the relay processes on one store, and never one
        // stream's twice.
        let holder = random_holder();
        let relay = self.clone();
        let (caller, me, task_stop) = (caller.clone(), person.clone(), stop.clone());
        tokio::spawn(async move {
            // A feed stopped at once still offers once when it is ready
            // (`lease_inbox` with no wait: what waits now). A stream ended
            // or replaced before its client proved it drops `proven`.
            if let Some(is_proven) = is_proven {
                tokio::select! {
                    biased;
                    proven = is_proven => if proven.is_err() { return },
                    () = task_stop.cancelled() => return,
                }
            }
            if let Some(me) = me {
                relay
                    .offer_for(caller, me, (holder, via), offered_tx, task_stop)
                    .await;
            }
        });
        PushFeed {
            relay: self.clone(),
            ephemeral: matches!(key, Key::Stream(_)),
            key,
            number,
            person,
            holder,
            offered,
            followed,
            leased: VecDeque::new(),
            probe: probing.then(|| Probe {
                every: tokio::time::interval(PROBE_EVERY),
                until: tokio::time::Instant::now() + PROBE_FOR,
            }),
            stop,
            _slot: slot,
            shutdown: Box::pin(self.shutdown.clone().cancelled_owned()),
        }
    }

    /// Offers `me`'s messages to the stream `holder` as they arrive (and as
    /// leases elsewhere end), queueing each with the end of its lease as
    /// the store holds it, until the stream ends; gives back what it could
    /// not queue. A store that fails (a database away) is tried again after
    /// a pause: the stream stays and its pushes resume.
    async fn offer_for(
        self: Arc<Self>,
        caller: Caller,
        me: Handle,
        (holder, via): (i64, Via),
        mut queue: mpsc::Sender<(Box<Message>, Millis)>,
        stop: CancellationToken,
    ) {
        loop {
            // Never cut off mid-offer (this is its own task): what an offer
            // takes is queued or given back. Only the wait ends at `stop`.
            let offered = self
                .offer_waiting(
                    &caller,
                    &me,
                    (holder, via),
                    OFFER_BATCH,
                    MAX_WAIT,
                    stop.cancelled(),
                )
                .await;
            let (offered, until) = match offered {
                Ok(offered) => offered,
                // Revoked: its sessions are being ended.
                Err(RelayError::Unauthorized(_)) => return,
                Err(error) => {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "a push stream cannot offer its inbox; trying again"
                    );
                    tokio::select! {
                        () = tokio::time::sleep(RETRY_AFTER) => continue,
                        () = stop.cancelled() => return,
                    }
                }
            };
            self.delivery_changed(&offered);
            let mut offered = offered.into_iter();
            while let Some(message) = offered.next() {
                if let Err((message, _)) = enqueue(&mut queue, (Box::new(message), until)).await {
                    let unsent = std::iter::once(message.id)
                        .chain(offered.map(|m| m.id))
                        .collect();
                    self.release(&me, holder, unsent).await;
                    return;
                }
            }
            if stop.is_cancelled() || self.shutdown.is_cancelled() {
                return;
            }
        }
    }

    /// Ends `holder`'s leases on `ids`, and wakes whoever waits for them.
    async fn release(&self, me: &Handle, holder: i64, ids: Vec<MessageId>) {
        if ids.is_empty() {
            return;
        }
        match self.store.release_offers(me, holder, ids).await {
            Ok(()) => self.wake_inbox(me),
            Err(error) => tracing::error!(
                error = &error as &dyn std::error::Error,
                "cannot give back the leases of a push stream that ended"
            ),
        }
    }

    /// The client of the MCP `session` listed its tools: the second time
    /// since its stream opened, it proves it shows what it is pushed.
    pub fn tools_listed(&self, session: &SessionId) {
        let mut pushes = self.pushes.lock();
        if let Some(stream) = pushes
            .get_mut(&Key::Session(session.clone()))
            .and_then(|follows| follows.stream.as_mut())
        {
            stream.lists += 1;
            if stream.lists >= LISTS_TO_PROVE
                && let Some(proven) = stream.proven.take()
            {
                let _ = proven.send(());
            }
        }
    }

    /// New posts in `channel` reach the stream of `session`, an MCP
    /// session the caller holds.
    pub fn follow_channel(&self, session: &SessionId, channel: &str) -> RelayResult<Channel> {
        let channel = parse_channel(channel)?;
        let mut pushes = self.pushes.lock();
        let follows = pushes.entry(Key::Session(session.clone())).or_default();
        if follows.channels.len() >= MAX_FOLLOWS && !follows.channels.contains(&channel) {
            return Err(too_many_follows());
        }
        follows.channels.insert(channel.clone());
        Ok(channel)
    }

    /// Stops following `channel`; says whether the session followed it.
    pub fn unfollow_channel(&self, session: &SessionId, channel: &str) -> RelayResult<bool> {
        let channel = parse_channel(channel)?;
        let key = Key::Session(session.clone());
        let mut pushes = self.pushes.lock();
        let Some(follows) = pushes.get_mut(&key) else {
            return Ok(false);
        };
        let followed = follows.channels.remove(&channel);
        if follows.channels.is_empty() && follows.stream.is_none() {
            pushes.remove(&key);
        }
        Ok(followed)
    }

    /// Copies a channel post to the streams that follow its channel.
    pub(super) fn push_post(&self, message: &Arc<Message>) {
        self.pushes.post(message);
    }

    /// Forgets what ended sessions followed.
    pub(super) fn forget_pushes(&self, sessions: &[SessionId]) {
        let mut pushes = self.pushes.lock();
        for id in sessions {
            pushes.remove(&Key::Session(id.clone()));
        }
    }

    /// People who can be reached by push right now: a stream of theirs is
    /// open and its client is ready to show what it is sent.
    pub fn reachable(&self) -> HashSet<Handle> {
        self.pushes.reachable()
    }

    /// Sessions and streams whose follows are kept, for tests and metrics.
    pub fn follow_entries(&self) -> usize {
        self.pushes.lock().len()
    }
}

fn too_many_follows() -> RelayError {
    RelayError::BadInput(format!(
        "a session follows at most {MAX_FOLLOWS} channels: unfollow one first"
    ))
}

/// Queues `item` once there is room; gives it back if the feed is gone.
async fn enqueue<T>(queue: &mut mpsc::Sender<T>, item: T) -> Result<(), T> {
    if futures::future::poll_fn(|cx| queue.poll_ready(cx))
        .await
        .is_err()
    {
        return Err(item);
    }
    queue.try_send(item).map_err(mpsc::TrySendError::into_inner)
}

/// A stream's lease holder: random, positive, and for practical purposes
/// never the same twice across every relay process on a store.
fn random_holder() -> i64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    (u64::from_le_bytes(bytes) >> 1) as i64
}
