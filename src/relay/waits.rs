//! Waiting for messages: the one waiting loop, its defaults and caps, and
//! the slots that count open waits and streams.
//!
//! A wait subscribes to its topic *before* it looks in the store, so a
//! message committed between the look and the wait still wakes it; it is
//! woken by the commit, never by polling. Each long-poll, waiting tool call
//! and stream holds a [`WaitSlot`] while it is open, so one caller cannot
//! tie up the relay with thousands of them.

use super::input::{MAX_WAIT, cursor, parse_channel, parse_wait};
use super::stats::Event;
use super::{Caller, INBOX_BATCH, Page, Relay, RelayError, RelayResult};
use crate::model::{Handle, Message, MessageId, Millis, Place, Via, now_millis};
use crate::store::{Offer, StoreFuture};
use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long an inbox check waits when no timeout is given: not at all.
pub const INBOX_WAIT: Duration = Duration::ZERO;
/// How long a channel wait waits when no timeout is given.
pub const CHANNEL_WAIT: Duration = Duration::from_secs(30);

/// A wait for a channel's next messages ([`Relay::wait_channel`]).
#[derive(Debug)]
pub struct ChannelWait {
    pub channel: String,
    /// Messages after this one (default: any).
    pub since_id: Option<MessageId>,
    /// Seconds to wait (default [`CHANNEL_WAIT`]).
    pub timeout_s: Option<f64>,
}

/// A check of an inbox ([`Relay::check_inbox`]).
#[derive(Debug)]
pub struct InboxCheck {
    /// Only for an unbound caller: whose inbox.
    pub sender: Option<String>,
    /// Seconds to wait for a message when none is waiting (default
    /// [`INBOX_WAIT`]).
    pub timeout_s: Option<f64>,
}

impl Relay {
    /// Claims the caller's unread messages, waiting up to `timeout_s`
    /// (default [`INBOX_WAIT`]) for one. Returns early (empty) when
    /// `cancelled` resolves or the relay stops.
    pub async fn check_inbox(
        &self,
        caller: &Caller,
        check: InboxCheck,
        cancelled: impl Future<Output = ()>,
    ) -> RelayResult<Vec<Message>> {
        let timeout = parse_wait(check.timeout_s, INBOX_WAIT)?;
        let me = self.acting_as(caller, check.sender.as_deref())?;
        let _slot = self.wait_slot(caller, timeout)?;
        let claimed = self
            .claim_waiting(caller, &me, INBOX_BATCH, timeout, cancelled)
            .await?;
        self.delivery_changed(&claimed);
        Ok(claimed)
    }

    /// Claims up to `limit` of `me`'s unread messages, waiting up to
    /// `timeout` for one: `check_inbox`.
    async fn claim_waiting(
        &self,
        caller: &Caller,
        me: &Handle,
        limit: u32,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
    ) -> RelayResult<Vec<Message>> {
        let take = |now| self.store.claim_inbox(me, now, limit);
        let claimed = self
            .take_waiting(caller, me, timeout, cancelled, take)
            .await?;
        // A claim is a read: the store marks them so as it hands them out.
        self.stats.read(claimed.len());
        Ok(claimed)
    }

    /// Offers up to `limit` of `me`'s unread messages to the push stream
    /// `holder`, leased for the relay's push lease, waiting up to `timeout`
    /// for one; with when their lease ends, as the store holds it.
    pub(super) async fn offer_waiting(
        &self,
        caller: &Caller,
        me: &Handle,
        (holder, via): (i64, Via),
        limit: u32,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
    ) -> RelayResult<(Vec<Message>, Millis)> {
        let until = std::sync::atomic::AtomicI64::new(0);
        let take = |now: Millis| {
            let offer = Offer {
                holder,
                now,
                until: now.saturating_add(self.settings.push_lease_millis()),
                via,
            };
            until.store(offer.until, std::sync::atomic::Ordering::Relaxed);
            self.store.offer_inbox(me, offer, limit)
        };
        let offered = self
            .take_waiting(caller, me, timeout, cancelled, take)
            .await?;
        if !offered.is_empty() {
            // The person's other streams may have looked just as the last
            // lease ended, before this one took it again: they must learn
            // when this lease ends, or none of them looks again then.
            self.wake_inbox(me);
        }
        self.stats.pushed(
            offered
                .iter()
                .map(|m| m.delivery.as_ref().map_or(1, |d| d.offers)),
        );
        Ok((offered, until.into_inner()))
    }

    /// Takes from `me`'s inbox with `take` (given the time it takes at)
    /// until it takes something, waking when a message lands there or is
    /// given back, and when a lease on one of them ends (possibly on another
    /// relay process: the store says when). A lease that ends after the
    /// take is found by the same `now`, so none is missed in between.
    async fn take_waiting<'a>(
        &'a self,
        caller: &Caller,
        me: &'a Handle,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
        take: impl Fn(Millis) -> StoreFuture<'a, Vec<Message>>,
    ) -> RelayResult<Vec<Message>> {
        let news = News::all(self.inboxes.subscribe(me));
        let look = || async {
            let now = now_millis();
            let taken = take(now).await?;
            let again = match taken.is_empty() {
                true => self.store.next_lease_end(me, now).await?,
                false => None,
            };
            Ok((taken, again))
        };
        self.wait_for(caller, news, timeout, cancelled, look, Vec::is_empty)
            .await
    }

    /// As [`Relay::channel_messages`], waiting up to `timeout_s` (default
    /// [`CHANNEL_WAIT`]) for a first message after `since_id`.
    pub async fn wait_channel(
        &self,
        caller: &Caller,
        wait: ChannelWait,
        cancelled: impl Future<Output = ()>,
    ) -> RelayResult<Page> {
        let timeout = parse_wait(wait.timeout_s, CHANNEL_WAIT)?;
        let name = parse_channel(&wait.channel)?;
        let since_id = cursor(wait.since_id);
        let _slot = self.wait_slot(caller, timeout)?;
        let news = News::all(self.places.subscribe(&Place::Channel(name.clone())));
        let look = || async { Ok((self.channel_page(&name, since_id, None).await?, None)) };
        let empty = |page: &Page| page.messages.is_empty();
        self.wait_for(caller, news, timeout, cancelled, look, empty)
            .await
    }

    /// Calls `look` until what it finds is not `empty`, waking when `news`
    /// says something relevant was committed (or lagged behind, or at the
    /// time `look` names to look again), and returns what it last found
    /// when `timeout` passes, `cancelled` resolves, or the relay stops.
    /// News that is not relevant costs no look. Ends with 401 when
    /// `caller`'s token is revoked or replaced meanwhile: nothing committed
    /// after that reaches the old token.
    pub(super) async fn wait_for<T, W: Clone, F: Fn(&W) -> bool, Look, Found>(
        &self,
        caller: &Caller,
        mut news: News<W, F>,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
        mut look: Look,
        empty: impl Fn(&T) -> bool,
    ) -> RelayResult<T>
    where
        Look: FnMut() -> Found,
        Found: Future<Output = RelayResult<(T, Option<Millis>)>>,
    {
        let deadline = tokio::time::Instant::now() + timeout.min(MAX_WAIT);
        tokio::pin!(cancelled);
        loop {
            self.stats.count(Event::WaitLooked);
            let (found, again) = look().await?;
            if !empty(&found) || tokio::time::Instant::now() >= deadline {
                return Ok(found);
            }
            let look_again = again.map_or(deadline, |at| {
                let wait = Duration::from_millis(at.saturating_sub(now_millis()).max(0) as u64);
                deadline.min(tokio::time::Instant::now() + wait)
            });
            self.parked.send_modify(|n| *n += 1);
            tokio::select! {
                // Relevant news (or news that we lagged behind): look again.
                open = news.next() => if !open {
                    return Ok(found);
                },
                () = tokio::time::sleep_until(look_again) => {}
                () = &mut cancelled => return Ok(found),
                () = self.shutdown.cancelled() => return Ok(found),
                () = self.revoked(caller) => return Err(RelayError::Unauthorized(
                    "this token was revoked or replaced while the call waited",
                )),
            }
        }
    }

    /// A slot for a call that may wait; a call that will not wait needs none.
    pub(super) fn wait_slot(
        &self,
        caller: &Caller,
        timeout: Duration,
    ) -> RelayResult<Option<WaitSlot>> {
        if timeout.is_zero() {
            return Ok(None);
        }
        self.waits.acquire(&caller.account()).map(Some)
    }

    /// A slot for a stream, held while it is open: past the caller's or the
    /// relay's cap, a refusal.
    pub fn hold_slot(&self, caller: &Caller) -> RelayResult<WaitSlot> {
        self.waits.acquire(&caller.account())
    }

    /// Waits and streams open now.
    pub fn open_waits(&self) -> usize {
        self.waits.open()
    }
}

/// A topic a wait is subscribed to, and which of its news may bring what
/// the wait waits for.
pub(super) struct News<W, F = fn(&W) -> bool> {
    topic: tokio::sync::broadcast::Receiver<W>,
    relevant: F,
}

impl<W: Clone> News<W> {
    /// All of `topic`'s news.
    pub(super) fn all(topic: tokio::sync::broadcast::Receiver<W>) -> Self {
        News {
            topic,
            relevant: |_| true,
        }
    }
}

impl<W: Clone, F: Fn(&W) -> bool> News<W, F> {
    /// Only the news of `topic` that is `relevant`.
    pub(super) fn only(topic: tokio::sync::broadcast::Receiver<W>, relevant: F) -> Self {
        News { topic, relevant }
    }

    /// Waits until the topic carries relevant news or lagged behind what
    /// it carried (true), or is closed (false).
    async fn next(&mut self) -> bool {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match self.topic.recv().await {
                Ok(news) if !(self.relevant)(&news) => {}
                Ok(_) | Err(RecvError::Lagged(_)) => return true,
                Err(RecvError::Closed) => return false,
            }
        }
    }
}

pub struct WaitSlots {
    per_caller: usize,
    total: usize,
    /// Open slots in total, and by caller.
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// An open wait or stream; closing it (dropping) frees the slot.
pub struct WaitSlot {
    slots: Arc<WaitSlots>,
    key: String,
}

impl WaitSlots {
    pub fn new(per_caller: usize, total: usize) -> Arc<WaitSlots> {
        Arc::new(WaitSlots {
            per_caller,
            total,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// Takes a slot for `key`, or says why there is none.
    pub fn acquire(self: &Arc<Self>, key: &str) -> RelayResult<WaitSlot> {
        let mut open = self.open.lock().expect("wait slots lock");
        let (total, by_caller) = &mut *open;
        if by_caller.get(key).copied().unwrap_or(0) >= self.per_caller {
            return Err(RelayError::TooManyWaits(format!(
                "{key} already has {} waits and streams open, the most one caller may; \
                 close one before opening another",
                self.per_caller
            )));
        }
        if *total >= self.total {
            return Err(RelayError::Overloaded(format!(
                "the relay has {} waits and streams open, its limit; try again shortly",
                self.total
            )));
        }
        *by_caller.entry(key.to_owned()).or_insert(0) += 1;
        *total += 1;
        Ok(WaitSlot {
            slots: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Waits and streams open now.
    pub fn open(&self) -> usize {
        self.open.lock().expect("wait slots lock").0
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().expect("wait slots lock");
        let (total, by_caller) = &mut *open;
        *total -= 1;
        if let Some(mine) = by_caller.get_mut(&self.key) {
            *mine -= 1;
            if *mine == 0 {
                by_caller.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_per_caller_and_in_total_and_freed_on_drop() {
        let slots = WaitSlots::new(2, 3);
        let a1 = slots.acquire("alice").unwrap();
        let _a2 = slots.acquire("alice").unwrap();
        assert!(matches!(
            slots.acquire("alice"),
            Err(RelayError::TooManyWaits(_))
        ));
        let _b1 = slots.acquire("bob").unwrap();
        assert!(matches!(
            slots.acquire("carol"),
            Err(RelayError::Overloaded(_))
        ));
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _c1 = slots.acquire("carol").unwrap();
    }
}
