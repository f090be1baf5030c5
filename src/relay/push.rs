//! Pushes: what lands in a person's inbox, delivered on its own to an open
//! stream of one of their MCP sessions, and new posts in the channels a
//! session follows.
//!
//! A session's stream drives a [`PushFeed`]. Its task waits on the person's
//! inbox like `check_inbox` does and claims with the same atomic claim, so
//! a message is handed out once, whether to a stream or to a call, and two
//! streams of one person never both get it. A claimed message goes into a
//! small queue the stream reads; whatever the stream had not taken when it
//! ends (the client went away) is unclaimed, so it waits in the inbox again
//! and nothing is lost. When no stream is open nothing is claimed, and when
//! one opens, what waits is pushed, oldest first.
//!
//! Follows are notifications only: a followed channel's new post is copied
//! to the following session's stream, never claimed, and the follows of a
//! session end with it.

use super::{Caller, Identity, MAX_WAIT, Relay, RelayResult, WaitSlot, send::parse_channel};
use crate::model::{Channel, Handle, Message};
use std::{
    collections::{HashMap, HashSet},
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Claimed messages queued for a stream beyond the one it is writing: a
/// stream that stops reading holds few claimed.
const QUEUED: usize = 8;

/// Followed posts queued for a stream that is not reading: past this, it
/// misses copies (the channel keeps the posts).
const FOLLOWED_QUEUED: usize = 64;

/// How many of a person's waiting messages one claim takes for a stream.
const CLAIM_BATCH: u32 = 16;

/// What a stream delivers.
#[derive(Debug, Clone)]
pub enum Push {
    /// A message claimed from the person's inbox: theirs now.
    Inbox(Message),
    /// A new post in a channel the session follows: a copy, not claimed.
    Followed(Arc<Message>),
}

impl Push {
    pub fn message(&self) -> &Message {
        match self {
            Push::Inbox(message) => message,
            Push::Followed(message) => message,
        }
    }
}

/// Whose follows a stream carries.
enum Follows {
    /// Its MCP session's, which outlive the stream (`follow_channel`).
    Session(String),
    /// Its own, given when it opened, which end with it (an inbox stream).
    Own(HashSet<Channel>),
}

/// Sessions' follows and open streams.
#[derive(Default)]
pub struct Pushes {
    sessions: Mutex<HashMap<String, SessionPushes>>,
    /// Numbers streams, so a session's second stream is not closed by the
    /// end of its first.
    streams: AtomicU64,
}

#[derive(Default)]
struct SessionPushes {
    follows: HashSet<Channel>,
    /// The latest stream opened, while it is open.
    stream: Option<OpenStream>,
}

struct OpenStream {
    number: u64,
    /// Whose it is: nobody's for an unbound caller.
    person: Option<Handle>,
    /// Where followed posts go.
    followed: mpsc::Sender<Arc<Message>>,
}

impl Pushes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionPushes>> {
        self.sessions.lock().expect("pushes lock")
    }

    /// Copies a channel post to the streams of the sessions that follow its
    /// channel, except its sender's and its recipient's (who gets it from
    /// their inbox).
    fn post(&self, message: &Arc<Message>) {
        let Some(channel) = &message.channel else {
            return;
        };
        for session in self.lock().values() {
            if let Some(stream) = &session.stream
                && session.follows.contains(channel)
                && stream.person.as_ref() != Some(&message.from)
                && (stream.person.is_none() || message.to != stream.person)
            {
                // A copy: a stream too far behind misses it, and the
                // channel still has it.
                let _ = stream.followed.try_send(message.clone());
            }
        }
    }

    /// People with a stream open now.
    fn reachable(&self) -> HashSet<Handle> {
        self.lock()
            .values()
            .filter_map(|s| s.stream.as_ref().and_then(|stream| stream.person.clone()))
            .collect()
    }
}

impl Relay {
    /// Opens the push stream of `session`, for `caller`: their inbox, and
    /// the posts of the channels the session follows. An unbound caller (the
    /// shared token, an open relay) is nobody in particular: only follows
    /// reach its stream.
    pub fn push_feed(self: &Arc<Self>, caller: &Caller, session: &str) -> PushFeed {
        let person = match &caller.identity {
            Identity::Person(me) => Some(me.clone()),
            Identity::Unbound => None,
        };
        self.open_feed(caller, person, Follows::Session(session.to_owned()), None)
    }

    /// A stream of `caller`'s inbox (as `sender`, for the shared token),
    /// and of the new posts of the channels it `follows`, holding one of
    /// their wait slots while it lasts.
    pub fn inbox_feed(
        self: &Arc<Self>,
        caller: &Caller,
        sender: Option<&str>,
        follows: &[String],
    ) -> RelayResult<PushFeed> {
        let me = self.acting_as(caller, sender)?;
        let follows: HashSet<Channel> = follows
            .iter()
            .map(|c| parse_channel(c))
            .collect::<RelayResult<_>>()?;
        let slot = self.hold_slot(caller)?;
        Ok(self.open_feed(caller, Some(me), Follows::Own(follows), Some(slot)))
    }

    fn open_feed(
        self: &Arc<Self>,
        caller: &Caller,
        person: Option<Handle>,
        follows: Follows,
        slot: Option<WaitSlot>,
    ) -> PushFeed {
        let (claimed_tx, claimed) = mpsc::channel(QUEUED);
        let (followed_tx, followed) = mpsc::channel(FOLLOWED_QUEUED);
        let stop = CancellationToken::new();
        let number = self.pushes.streams.fetch_add(1, Ordering::Relaxed);
        let (session, own) = match follows {
            Follows::Session(id) => (id, None),
            Follows::Own(channels) => (format!("stream {number}"), Some(channels)),
        };
        let ephemeral = own.is_some();
        {
            let mut pushes = self.pushes.lock();
            let entry = pushes.entry(session.clone()).or_default();
            if let Some(channels) = own {
                entry.follows = channels;
            }
            entry.stream = Some(OpenStream {
                number,
                person: person.clone(),
                followed: followed_tx,
            });
        }
        if let Some(me) = &person {
            let relay = self.clone();
            let (caller, me, stop) = (caller.clone(), me.clone(), stop.clone());
            tokio::spawn(async move { relay.claim_for(caller, me, claimed_tx, stop).await });
        }
        PushFeed {
            relay: self.clone(),
            session,
            number,
            person,
            claimed,
            followed,
            _stop: stop.drop_guard(),
            _slot: slot,
            shutdown: Box::pin(self.shutdown.clone().cancelled_owned()),
            ephemeral,
        }
    }

    /// Claims `me`'s messages as they arrive and queues them for the
    /// stream, until it ends; unclaims what it could not queue.
    async fn claim_for(
        self: Arc<Self>,
        caller: Caller,
        me: Handle,
        queue: mpsc::Sender<Message>,
        stop: CancellationToken,
    ) {
        loop {
            // Never cut off mid-claim (this is its own task): what a claim
            // takes is queued or unclaimed. Only the wait ends at `stop`.
            let claimed = self
                .claim_waiting(&caller, &me, CLAIM_BATCH, MAX_WAIT, stop.cancelled())
                .await;
            let Ok(claimed) = claimed else {
                return; // revoked: its sessions are being ended
            };
            let mut claimed = claimed.into_iter();
            while let Some(message) = claimed.next() {
                if let Err(mpsc::error::SendError(message)) = queue.send(message).await {
                    let unsent = std::iter::once(message).chain(claimed).collect();
                    self.unclaim(&me, unsent).await;
                    return;
                }
            }
            if stop.is_cancelled() || self.shutdown.is_cancelled() {
                return;
            }
        }
    }

    /// Puts claimed messages back in `me`'s inbox, and wakes whoever waits.
    async fn unclaim(&self, me: &Handle, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
        match self.store.unclaim_inbox(me, ids).await {
            Ok(()) => {
                for message in messages {
                    self.inboxes.publish(me.as_str(), Arc::new(message));
                }
            }
            Err(error) => tracing::error!(
                error = &error as &dyn std::error::Error,
                "cannot put undelivered pushes back in an inbox"
            ),
        }
    }

    /// New posts in `channel` reach this session's stream.
    pub fn follow_channel(&self, session: &str, channel: &str) -> RelayResult<Channel> {
        let channel = parse_channel(channel)?;
        self.pushes
            .lock()
            .entry(session.to_owned())
            .or_default()
            .follows
            .insert(channel.clone());
        Ok(channel)
    }

    /// Stops following `channel`; says whether the session followed it.
    pub fn unfollow_channel(&self, session: &str, channel: &str) -> RelayResult<bool> {
        let channel = parse_channel(channel)?;
        Ok(self
            .pushes
            .lock()
            .get_mut(session)
            .is_some_and(|s| s.follows.remove(&channel)))
    }

    /// Copies a channel post to the streams that follow its channel.
    pub(super) fn push_post(&self, message: &Arc<Message>) {
        self.pushes.post(message);
    }

    /// Forgets what ended sessions followed.
    pub(super) fn forget_pushes(&self, sessions: &[String]) {
        let mut pushes = self.pushes.lock();
        for id in sessions {
            pushes.remove(id);
        }
    }

    /// People who can be reached by push right now.
    pub fn reachable(&self) -> HashSet<Handle> {
        self.pushes.reachable()
    }

    /// Push streams open now, for tests and metrics.
    pub fn push_streams(&self) -> usize {
        self.pushes
            .lock()
            .values()
            .filter(|s| s.stream.is_some())
            .count()
    }
}

/// A session's push stream: what to deliver, in order. Dropping it (the
/// stream ended) puts what it had not delivered back in the inbox.
pub struct PushFeed {
    relay: Arc<Relay>,
    session: String,
    number: u64,
    person: Option<Handle>,
    claimed: mpsc::Receiver<Message>,
    followed: mpsc::Receiver<Arc<Message>>,
    _stop: tokio_util::sync::DropGuard,
    /// The wait slot a stream that is not an MCP session's holds.
    _slot: Option<WaitSlot>,
    /// Ends the feed when the relay stops.
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Its follows end with it (an inbox stream's), not with a session.
    ephemeral: bool,
}

impl futures::Stream for PushFeed {
    type Item = Push;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Push>> {
        match self.claimed.poll_recv(cx) {
            Poll::Ready(Some(message)) => return Poll::Ready(Some(Push::Inbox(message))),
            // The claiming ended: the relay stops, or the token was revoked.
            Poll::Ready(None) if self.person.is_some() => return Poll::Ready(None),
            _ => {}
        }
        if let Poll::Ready(Some(message)) = self.followed.poll_recv(cx) {
            return Poll::Ready(Some(Push::Followed(message)));
        }
        match self.shutdown.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for PushFeed {
    fn drop(&mut self) {
        let mut pushes = self.relay.pushes.lock();
        if let Some(session) = pushes.get_mut(&self.session)
            && session
                .stream
                .as_ref()
                .is_some_and(|s| s.number == self.number)
        {
            session.stream = None;
            if session.follows.is_empty() || self.ephemeral {
                pushes.remove(&self.session);
            }
        }
        drop(pushes);
        // Whatever was claimed and not taken goes back; the claiming task
        // unclaims what it could not queue once this is closed.
        self.claimed.close();
        let mut unsent = Vec::new();
        while let Ok(message) = self.claimed.try_recv() {
            unsent.push(message);
        }
        if let (Some(me), false) = (self.person.clone(), unsent.is_empty()) {
            let relay = self.relay.clone();
            tokio::spawn(async move { relay.unclaim(&me, unsent).await });
        }
    }
}
