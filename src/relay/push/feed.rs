//! A push stream: what its offering task and the followed channels hand
//! it, delivered in order while its leases run, and given back when it ends.

use super::{Key, Push};
use crate::model::{Handle, Message, MessageId, Millis, now_millis};
use crate::relay::{Relay, WaitSlot};
use futures::{StreamExt, channel::mpsc};
use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};
use tokio_util::sync::WaitForCancellationFutureOwned;

/// A session's push stream: what to deliver, in order. Dropping it (the
/// stream ended) gives back the leases on what it was offered.
pub struct PushFeed {
    pub(super) relay: Arc<Relay>,
    pub(super) key: Key,
    pub(super) number: u64,
    pub(super) person: Option<Handle>,
    pub(super) holder: i64,
    pub(super) offered: mpsc::Receiver<(Box<Message>, Millis)>,
    pub(super) followed: mpsc::Receiver<Arc<Message>>,
    /// What it delivered whose lease may still run: given back when it ends.
    pub(super) leased: VecDeque<(MessageId, Millis)>,
    /// Until its client proves it listens: when to ask again, and when to
    /// stop asking.
    pub(super) probe: Option<Probe>,
    /// Ends its offering task.
    pub(super) stop: tokio_util::sync::CancellationToken,
    /// The wait slot a stream that is not an MCP session's holds.
    pub(super) _slot: Option<WaitSlot>,
    /// Ends the feed when the relay stops.
    pub(super) shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Its follows end with it (an inbox stream's), not with a session.
    pub(super) ephemeral: bool,
}

pub(super) struct Probe {
    pub(super) every: tokio::time::Interval,
    pub(super) until: tokio::time::Instant,
}

impl futures::Stream for PushFeed {
    type Item = Push;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Push>> {
        // Only while probing: once its client listens, a poll takes no lock.
        if self.probe.is_some() {
            let done = self.is_ready()
                || self
                    .probe
                    .as_ref()
                    .is_some_and(|probe| tokio::time::Instant::now() >= probe.until);
            if done {
                self.probe = None;
            } else if let Some(probe) = &mut self.probe
                && probe.every.poll_tick(cx).is_ready()
            {
                return Poll::Ready(Some(Push::Probe));
            }
        }
        loop {
            match self.offered.poll_next_unpin(cx) {
                Poll::Ready(Some((message, until))) => {
                    let now = now_millis();
                    // Too late: someone else may have it by now.
                    if now >= until {
                        continue;
                    }
                    self.leased.retain(|&(_, until)| until > now);
                    self.leased.push_back((message.id, until));
                    return Poll::Ready(Some(Push::Inbox(message)));
                }
                // The offering ended: the relay stops, or the token was revoked.
                Poll::Ready(None) if self.person.is_some() => return Poll::Ready(None),
                _ => break,
            }
        }
        if let Poll::Ready(Some(message)) = self.followed.poll_next_unpin(cx) {
            return Poll::Ready(Some(Push::Followed(message)));
        }
        match self.shutdown.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl PushFeed {
    /// Ends its offering task, and delivers what that task had already
    /// taken for it: a feed read for a while (a hook's lease) never ends
    /// having leased a message it did not deliver.
    pub(super) async fn stop_offering(&mut self) -> Vec<Message> {
        self.stop.cancel();
        let mut rest = Vec::new();
        // The task queues what its offer took, then ends, closing the queue.
        while let Some((message, until)) = self.offered.next().await {
            let now = now_millis();
            if now < until {
                self.leased.push_back((message.id, until));
                rest.push(*message);
            }
        }
        rest
    }

    /// Keeps the leases of what it delivered when it ends: its client took
    /// them away to show (a hook). What it was offered and did not deliver
    /// still goes back.
    pub fn keep_delivered(&mut self) {
        self.leased.clear();
    }

    /// Whether its client has shown it listens.
    fn is_ready(&self) -> bool {
        let pushes = self.relay.pushes.lock();
        pushes
            .get(&self.key)
            .and_then(|follows| follows.stream.as_ref())
            .is_some_and(|stream| stream.number == self.number && stream.is_ready())
    }
}

impl Drop for PushFeed {
    fn drop(&mut self) {
        self.stop.cancel();
        let mut pushes = self.relay.pushes.lock();
        if let Some(follows) = pushes.get_mut(&self.key)
            && follows
                .stream
                .as_ref()
                .is_some_and(|s| s.number == self.number)
        {
            follows.stream = None;
            if follows.channels.is_empty() || self.ephemeral {
                pushes.remove(&self.key);
            }
        }
        drop(pushes);
        // What it was offered and did not deliver, and what it delivered
        // unconfirmed, goes back at once; the offering task gives back what
        // it could not queue once this is closed.
        self.offered.close();
        let mut unsent: Vec<MessageId> = self.leased.drain(..).map(|(id, _)| id).collect();
        while let Ok((message, _)) = self.offered.try_recv() {
            unsent.push(message.id);
        }
        if let (Some(me), false) = (self.person.clone(), unsent.is_empty()) {
            let relay = self.relay.clone();
            let holder = self.holder;
            tokio::spawn(async move { relay.release(&me, holder, unsent).await });
        }
    }
}
