//! Bringing a person what their agent has not read: each person's
//! settings, and the escalation that turns unread messages into
//! [`Notice`]s. The core only decides who is told of what; the notices go
//! out through a bounded queue to whatever delivers them (`crate::notify`,
//! which knows HTTP), so a slow or dead endpoint never holds up a send.
//!
//! The rules:
//! - a message addressed to a person that is still unread (not by their
//!   agent, not by them on the page), unanswered, `after` their chosen
//!   time since it was sent, is claimed in the store (each once, by one
//!   relay of those sharing a store) and brought to them;
//! - with `at_once_when_away`, it is brought at once when none of their
//!   agents listens here and none has been offered it anywhere;
//! - one whose pushes stopped ([`MAX_OFFERS`](crate::model::MAX_OFFERS)
//!   offers, none confirmed) is brought at once when its last lease ends,
//!   whatever `after` says: nothing will show it to their agent again but
//!   an inbox check, and their agent was shown it and did nothing;
//! - one notice per conversation per [`QUIET_PERIOD`]: what else comes due
//!   in that conversation meanwhile is claimed without another notice (the
//!   period is kept in this process's memory: relays sharing a store each
//!   keep their own);
//! - a person who chose never has their messages claimed without a notice,
//!   so they do not wait in the scan.

use super::{Caller, Identity, Relay, RelayError, RelayResult};
use crate::model::{
    ApprovalId, Handle, MAX_NOTIFY_AFTER, Message, MessageId, Millis, NotifySettings, Place,
    WebhookUrl, now_millis,
};
use std::collections::HashMap;
use std::time::Duration;

/// How often the escalation looks for messages that came due.
pub const ESCALATE_EVERY: Duration = Duration::from_secs(1);

/// After a notice about a conversation, how long what else comes due in it
/// is folded into that one.
pub const QUIET_PERIOD: Millis = 10 * 60 * 1000;

/// The most notices waiting to go out; beyond it new ones are dropped
/// (and logged), never waited for.
pub const NOTICE_QUEUE: usize = 1024;

/// The most unread messages one scan reads, in pages.
const SCAN_PAGE: u32 = 500;
const SCAN_PAGES: usize = 20;

/// The longest first line a notice carries.
const FIRST_LINE_CHARS: usize = 120;

/// Something to tell a person (what delivers it looks up where they
/// asked to be told: their webhook, their browsers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub to: Handle,
    pub about: About,
}

/// What a notice is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum About {
    /// Messages of one conversation their agent has not read.
    Unread {
        from: Handle,
        place: Place,
        /// The first of them.
        message: MessageId,
        /// Its first line, shortened.
        first_line: String,
        /// How many came due together.
        count: usize,
        /// It expected an answer by a time that passed: its sender waits.
        overdue: bool,
    },
    /// Their agent asks them to allow a step.
    Approval {
        id: ApprovalId,
        tool_name: String,
        description: String,
    },
}

/// The first line of `text`, at most [`FIRST_LINE_CHARS`] characters.
pub fn first_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(FIRST_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// The rules for settings, wherever they are changed: a delay within a
/// day, and a webhook over https (plain http only where private
/// destinations are allowed).
pub(super) fn check_settings(settings: &NotifySettings, allow_private: bool) -> RelayResult<()> {
    if let Some(after) = settings.after
        && !(0..=MAX_NOTIFY_AFTER).contains(&after)
    {
        return Err(RelayError::BadInput(format!(
            "after_seconds: from 0 to {} (a day), or null for never",
            MAX_NOTIFY_AFTER / 1000
        )));
    }
    match &settings.webhook {
        Some(webhook) => check_destination(&webhook.url, allow_private)
            .map_err(|e| RelayError::bad_field("webhook", e)),
        None => Ok(()),
    }
}

/// Whether notifications may go to `url`, by the rule every request to it
/// is held to before it is made (`host::destination`): told when the
/// address is given, not found out at the first notice. A name is checked
/// again each time it is posted to, once resolved.
pub(super) fn check_destination(url: &WebhookUrl, allow_private: bool) -> Result<(), String> {
    use crate::host::{Refused, destination};
    match destination(url.as_str(), allow_private) {
        Ok(_) => Ok(()),
        Err(Refused::NotHttps(_)) => Err(
            "must be an https:// URL (plain http is posted to only on a relay that allows \
             private destinations, RELAY_NOTIFY_ALLOW_PRIVATE=1)"
                .into(),
        ),
        Err(Refused::Private(host) | Refused::ResolvesPrivate(host)) => Err(format!(
            "{host} is a private, loopback or link-local address, which this relay does not \
             post to (RELAY_NOTIFY_ALLOW_PRIVATE=1 allows it)"
        )),
        Err(Refused::Credentials(_)) => {
            Err("must not carry a user name or password before the host".into())
        }
        Err(refused) => Err(refused.to_string()),
    }
}

impl Relay {
    /// The person a call about their own settings acts as: the shared
    /// token speaks for nobody in particular.
    pub(super) fn person<'c>(&self, caller: &'c Caller) -> RelayResult<&'c Handle> {
        match caller.identity() {
            Identity::Person(me) => Ok(me),
            Identity::Unbound => Err(RelayError::Forbidden(
                "this is a person's own: use their token, not a shared one".into(),
            )),
        }
    }

    /// The caller's notification settings (the defaults until they choose).
    pub async fn notify_settings(&self, caller: &Caller) -> RelayResult<NotifySettings> {
        let me = self.person(caller)?;
        self.settings_of(me).await
    }

    /// A person's notification settings, or the defaults.
    pub async fn settings_of(&self, handle: &Handle) -> RelayResult<NotifySettings> {
        Ok(self
            .store
            .notify_settings(handle)
            .await?
            .unwrap_or_default())
    }

    /// Replaces the caller's notification settings.
    pub async fn set_notify_settings(
        &self,
        caller: &Caller,
        settings: NotifySettings,
    ) -> RelayResult<NotifySettings> {
        let me = self.person(caller)?.clone();
        self.set_settings_of(&me, settings).await
    }

    /// Replaces a person's notification settings, after the rules every
    /// edge shares.
    pub async fn set_settings_of(
        &self,
        handle: &Handle,
        settings: NotifySettings,
    ) -> RelayResult<NotifySettings> {
        check_settings(&settings, self.settings.notify_allow_private)?;
        self.store
            .set_notify_settings(handle, settings.clone())
            .await?;
        Ok(settings)
    }

    /// Hands a notice to whatever delivers them, never waiting: with the
    /// queue full, it is dropped and logged.
    pub(super) fn tell(&self, notice: Notice) {
        let sent = self.notices.try_send(notice);
        self.stats.notice(sent.is_ok());
        if let Err(error) = sent {
            tracing::warn!(
                to = %match &error {
                    tokio::sync::mpsc::error::TrySendError::Full(n)
                    | tokio::sync::mpsc::error::TrySendError::Closed(n) => &n.to,
                },
                "a notification was dropped: {NOTICE_QUEUE} are waiting to go out already, \
                 or nothing delivers them"
            );
        }
    }

    /// The notices to deliver, once: for the server to hand to what posts
    /// them. `None` when they were taken already.
    pub fn take_notices(&self) -> Option<tokio::sync::mpsc::Receiver<Notice>> {
        self.notices_out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Looks for unread messages that came due every [`ESCALATE_EVERY`],
    /// until shutdown.
    pub async fn run_escalation(self: std::sync::Arc<Self>) {
        let mut every = tokio::time::interval(ESCALATE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut quiet = Quiet::default();
        loop {
            tokio::select! {
                _ = every.tick() => {
                    if let Err(error) = self.return_overdue(now_millis()).await {
                        tracing::error!(
                            error = &error as &dyn std::error::Error,
                            "returning overdue messages to their senders failed"
                        );
                    }
                    if let Err(error) = self.escalate(now_millis(), &mut quiet).await {
                        tracing::error!(
                            error = &error as &dyn std::error::Error,
                            "looking for unread messages to bring to people failed"
                        );
                    }
                }
                () = self.shutdown.cancelled() => return,
            }
        }
    }

    /// One scan: claims what came due and tells its people.
    async fn escalate(&self, now: Millis, quiet: &mut Quiet) -> RelayResult<()> {
        quiet.forget_before(now - QUIET_PERIOD);
        let reachable = self.reachable();
        let mut settings: HashMap<Handle, NotifySettings> = HashMap::new();
        // Due messages by person and conversation, oldest first.
        let mut due: HashMap<(Handle, Place), Vec<Message>> = HashMap::new();
        let mut after = MessageId::default();
        for _ in 0..SCAN_PAGES {
            let page = self.store.unnotified(after, now, SCAN_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = last.id;
            let full = page.len() == SCAN_PAGE as usize;
            for message in page {
                let Some(to) = message.to.clone() else {
                    continue;
                };
                if !settings.contains_key(&to) {
                    settings.insert(to.clone(), self.settings_of(&to).await?);
                }
                let chosen = &settings[&to];
                let away = !reachable.contains(&to)
                    && message
                        .delivery
                        .as_ref()
                        .is_none_or(|d| d.pushed_at.is_none());
                let pushes_ended = message
                    .delivery
                    .as_ref()
                    .is_some_and(|d| d.pushes_ended(now));
                let came_due = match chosen.after {
                    None => true, // claimed without a notice, below
                    Some(after) => {
                        now - message.created_at >= after
                            || (chosen.at_once_when_away && away)
                            || pushes_ended
                    }
                };
                if came_due {
                    due.entry((to, message.place.clone()))
                        .or_default()
                        .push(message);
                }
            }
            if !full {
                break;
            }
        }
        let mut due: Vec<_> = due.into_iter().collect();
        due.sort_by_key(|(_, messages)| messages[0].id);
        for ((to, place), messages) in due {
            let ids = messages.iter().map(|m| m.id).collect();
            let claimed = self.store.mark_notified(&to, ids, now).await?;
            let Some(first) = messages.iter().find(|m| claimed.contains(&m.id)) else {
                continue; // another relay took them
            };
            let chosen = &settings[&to];
            if chosen.after.is_none() || !quiet.begin(&to, &place, now) {
                continue;
            }
            tracing::info!(%to, count = claimed.len(), "bringing unread messages to their person");
            self.tell(Notice {
                to: to.clone(),
                about: About::Unread {
                    from: first.from.clone(),
                    place,
                    message: first.id,
                    first_line: first_line(&first.body),
                    count: claimed.len(),
                    overdue: false,
                },
            });
        }
        Ok(())
    }
}

/// When each conversation was last brought to each person, in this
/// process.
#[derive(Default)]
struct Quiet(HashMap<(Handle, Place), Millis>);

impl Quiet {
    /// Whether a notice about `place` may go to `to` now; if so, its quiet
    /// period starts.
    fn begin(&mut self, to: &Handle, place: &Place, now: Millis) -> bool {
        let key = (to.clone(), place.clone());
        match self.0.get(&key) {
            Some(&since) if now - since < QUIET_PERIOD => false,
            _ => {
                self.0.insert(key, now);
                true
            }
        }
    }

    fn forget_before(&mut self, before: Millis) {
        self.0.retain(|_, since| *since >= before);
    }
}

/// The messages addressed to a person, as they commit: what their open
/// team page shows as a browser notification. Nothing is claimed or
/// leased: the agent's inbox is untouched.
pub struct Arrivals {
    _slot: super::WaitSlot,
    receiver: tokio::sync::broadcast::Receiver<std::sync::Arc<Message>>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Arrivals {
    /// The next message; `None` when the relay stops. One missed while
    /// the reader lagged is not shown (the page shows it when opened).
    pub async fn next(&mut self) -> Option<std::sync::Arc<Message>> {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            tokio::select! {
                received = self.receiver.recv() => match received {
                    Ok(message) => return Some(message),
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                },
                () = self.shutdown.cancelled() => return None,
            }
        }
    }
}

impl Relay {
    /// What arrives for the caller from now on (see [`Arrivals`]); holds
    /// one of their wait slots while open.
    pub fn arrivals(&self, caller: &Caller) -> RelayResult<Arrivals> {
        let me = self.person(caller)?;
        let slot = self.hold_slot(caller)?;
        Ok(Arrivals {
            _slot: slot,
            receiver: self.arrivals.subscribe(me),
            shutdown: self.shutdown.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_line_is_the_first_line_shortened() {
        assert_eq!(
            first_line("  Which port?\nIt is for the API."),
            "Which port?"
        );
        let long = "x".repeat(200);
        assert_eq!(first_line(&long).chars().count(), FIRST_LINE_CHARS + 1);
        assert_eq!(
            first_line(&"é".repeat(130)),
            format!("{}…", "é".repeat(120))
        );
    }

    #[test]
    fn a_conversation_is_brought_once_per_quiet_period() {
        let mut quiet = Quiet::default();
        let bob = Handle::parse("bob").unwrap();
        let place = Place::Thread(crate::model::ThreadId(1));
        let other = Place::Thread(crate::model::ThreadId(2));
        assert!(quiet.begin(&bob, &place, 0));
        assert!(!quiet.begin(&bob, &place, QUIET_PERIOD - 1));
        assert!(quiet.begin(&bob, &other, 1));
        assert!(quiet.begin(&bob, &place, QUIET_PERIOD));
    }
}
