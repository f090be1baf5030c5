//! Storing messages: direct messages in threads, and channel posts. Every
//! body passes the same checks, and every commit wakes its waiters.

use super::files::{self, Upload};
use super::input::parse_channel;
use super::quota::Pool;
use super::waits::News;
use super::{Caller, Relay, RelayError, RelayResult, secrets, text};
use crate::model::{
    Expects, Handle, MAX_DUE, Message, MessageId, Millis, Place, ThreadId, now_millis,
};
use crate::store::{Conversation, NewMessage, RecipientCheck, StoreResult};
use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

/// Bodies up to this size are scanned for secrets in place (well under a
/// tenth of a millisecond); longer ones on the blocking pool.
const SCAN_INLINE_BYTES: usize = 4096;

/// The longest message type label, in characters.
pub const MAX_KIND_CHARS: usize = 32;

/// What a message carries, however it is sent.
#[derive(Debug, Clone, Default)]
pub struct Content {
    pub body: String,
    /// The type label; `None` is NOTE.
    pub kind: Option<String>,
    /// What it expects of the recipient; `None` is the type's default.
    pub expects: Option<Expects>,
    /// Seconds the recipient has to answer or acknowledge it.
    pub due_seconds: Option<f64>,
    /// Files it carries.
    pub attachments: Vec<Upload>,
}

impl Content {
    /// A body of a type, expecting what the type does, with no files.
    pub fn text(body: String, kind: Option<String>) -> Content {
        Content {
            body,
            kind,
            ..Content::default()
        }
    }
}

/// A direct message to send.
#[derive(Debug, Clone, Default)]
pub struct DirectMessage {
    /// Only for an unbound caller: who sends it.
    pub sender: Option<String>,
    pub to: String,
    /// Reply in this thread; `None` starts one.
    pub thread_id: Option<ThreadId>,
    /// Wait this many seconds for the recipient's reply (default: none).
    pub wait_for_reply_seconds: Option<f64>,
    /// What it carries.
    pub content: Content,
}

/// A post to a channel.
#[derive(Debug, Clone, Default)]
pub struct ChannelPost {
    /// Only for an unbound caller: who sends it.
    pub sender: Option<String>,
    pub channel: String,
    /// Also lands the post in this person's inbox.
    pub recipient: Option<String>,
    /// The channel message this answers.
    pub reply_to: Option<MessageId>,
    /// What it carries.
    pub content: Content,
}

/// A message on its way to the store, from any of the calls that send one.
struct Outgoing {
    conversation: Conversation,
    from: Handle,
    to: Option<(Handle, RecipientCheck)>,
    reply_to: Option<MessageId>,
    content: Content,
}

impl Relay {
    /// Sends a direct message, starting a thread unless one is named.
    pub async fn send_direct(
        &self,
        caller: &Caller,
        message: DirectMessage,
    ) -> RelayResult<Message> {
        let from = self.acting_as(caller, message.sender.as_deref())?;
        let to = self.recipient(&message.to, "to")?;
        let conversation = match message.thread_id {
            Some(id) => Conversation::Thread(id),
            None => Conversation::NewThread,
        };
        self.store_message(Outgoing {
            conversation,
            from,
            to: Some(to),
            reply_to: None,
            content: message.content,
        })
        .await
    }

    /// Sends a direct message and, when it asks to, waits up to
    /// `wait_for_reply_seconds` for the recipient's reply in its thread:
    /// the message, and the reply if it came in time. A reply returned here
    /// is read by the asker's agent (it is not handed out again by their
    /// inbox). Returns early, without a reply, when `cancelled` resolves.
    pub async fn ask(
        &self,
        caller: &Caller,
        message: DirectMessage,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> RelayResult<(Message, Option<Message>)> {
        let timeout = super::input::parse_wait(message.wait_for_reply_seconds, Duration::ZERO)?;
        let slot = self.wait_slot(caller, timeout)?;
        let sent = self.send_direct(caller, message).await?;
        let (Some(thread_id), Some(to), Some(_slot)) = (sent.place.thread(), sent.to.clone(), slot)
        else {
            return Ok((sent, None));
        };
        // The thread's news is its messages as they commit. Only the
        // recipient's, sent after the question (not an earlier message's
        // delivery published again), may be the reply: anyone else's says
        // so without a look in the store. A look reads what is new since
        // the last, page by page, in the store's order (news may come out
        // of it: each sender publishes after its own commit).
        let news = News::only(
            self.places.subscribe(&Place::Thread(thread_id)),
            |news: &Arc<Message>| news.id > sent.id && news.from == to,
        );
        let seen = AtomicI64::new(sent.id.0);
        let look = || async {
            let after = MessageId(seen.load(Ordering::Relaxed));
            let (reply, looked) = self.first_from(thread_id, after, &to).await?;
            seen.store(looked.0, Ordering::Relaxed);
            Ok((reply, None))
        };
        let reply = self
            .wait_for(caller, news, timeout, cancelled, look, Option::is_none)
            .await?;
        let reply = match reply {
            Some(reply) => Some(self.confirm_read(&sent.from, vec![reply]).await?.remove(0)),
            None => None,
        };
        Ok((sent, reply))
    }

    /// A direct message the caller sent, with its ledger. Only its sender
    /// finds it: anyone else (and a message that is not a direct one) is
    /// told there is no such message, so nothing says whether it exists.
    pub async fn sent_by(&self, caller: &Caller, id: MessageId) -> RelayResult<Message> {
        let sender = self.acting_as(caller, None)?;
        self.store
            .message(id, now_millis())
            .await?
            .filter(|m| m.from == sender && m.to.is_some() && m.place.thread().is_some())
            .ok_or_else(|| RelayError::NotFound(format!("you sent no message {id}")))
    }

    /// Where a direct message the caller sent stands ([`Relay::sent_by`]),
    /// and its recipient's first reply in its thread after it, if one came.
    /// A reply returned here is read by the caller's agent, as one
    /// [`Relay::ask`] returns.
    pub async fn sent_and_answer(
        &self,
        caller: &Caller,
        id: MessageId,
    ) -> RelayResult<(Message, Option<Message>)> {
        let sent = self.sent_by(caller, id).await?;
        let (Some(thread_id), Some(to)) = (sent.place.thread(), sent.to.clone()) else {
            return Ok((sent, None));
        };
        let answer = match self.first_from(thread_id, sent.id, &to).await?.0 {
            Some(answer) => Some(self.confirm_read(&sent.from, vec![answer]).await?.remove(0)),
            None => None,
        };
        Ok((sent, answer))
    }

    /// `from`'s first live message in a thread after `after` (a reply to
    /// what `after` asked), read page by page in the store's order; and the
    /// id of the last message looked at, where a later look starts.
    async fn first_from(
        &self,
        thread_id: ThreadId,
        mut after: MessageId,
        from: &Handle,
    ) -> RelayResult<(Option<Message>, MessageId)> {
        loop {
            let read = self
                .store
                .thread(thread_id, after, super::MAX_PAGE, now_millis())
                .await?;
            let whole_page = read.len() >= super::MAX_PAGE as usize;
            if let Some(last) = read.last() {
                after = last.id;
            }
            let found = read.into_iter().find(|m| &m.from == from);
            if found.is_some() || !whole_page {
                return Ok((found, after));
            }
        }
    }

    /// Posts to a channel; a named recipient also finds it in their inbox.
    pub async fn post(&self, caller: &Caller, post: ChannelPost) -> RelayResult<Message> {
        let from = self.acting_as(caller, post.sender.as_deref())?;
        let channel = parse_channel(&post.channel)?;
        let recipient = match post.recipient.as_deref() {
            Some(name) => Some(self.recipient(name, "recipient")?),
            None => None,
        };
        self.store_message(Outgoing {
            conversation: Conversation::Channel(channel),
            from,
            to: recipient,
            reply_to: post.reply_to,
            content: post.content,
        })
        .await
    }

    /// Stores a message, counting it or its refusal.
    async fn store_message(&self, outgoing: Outgoing) -> RelayResult<Message> {
        let to_a_person = outgoing.to.is_some();
        let stored = self.store_checked(outgoing).await;
        match &stored {
            Ok(_) => self.stats.sent(to_a_person),
            Err(error) => self.stats.refused(error),
        }
        stored
    }

    async fn store_checked(&self, outgoing: Outgoing) -> RelayResult<Message> {
        let content = outgoing.content;
        let kind = parse_kind(content.kind.as_deref())?;
        let now = now_millis();
        let (expects, due_at) = expectation(
            &kind,
            outgoing.to.is_some(),
            content.expects,
            content.due_seconds,
            now,
        )?;
        let body = self.check_body(content.body).await?;
        let attachments = files::check_files(content.attachments).await?;
        let from = outgoing.from;
        // What the message keeps: its body, and each file with its name
        // and type.
        let size = body.len()
            + attachments
                .iter()
                .map(|(file, bytes)| bytes.len() + file.name.len() + file.content_type.len())
                .sum::<usize>();
        self.quotas.check_bytes(&from, Pool::Messages, size, now)?;
        let (to, check_to) = match outgoing.to {
            Some((handle, check)) => (Some(handle), check),
            None => (None, RecipientCheck::None),
        };
        let stored = self
            .store
            .insert_message(NewMessage {
                conversation: outgoing.conversation,
                from,
                to,
                check_to,
                kind,
                body,
                reply_to: outgoing.reply_to,
                created_at: now,
                expires_at: now.saturating_add(self.settings.retention.as_millis() as Millis),
                expects,
                due_at,
                attachments,
            })
            .await?;
        self.quotas.spend(&stored.from, Pool::Messages, size, now);
        // Committed: now wake whoever waits for it.
        self.wake(Arc::new(stored.clone()));
        self.show_answered(&stored).await;
        Ok(stored)
    }

    /// Tells those who watch a conversation that `reply` answered what was
    /// sent to its sender there (the store marked them with the reply).
    async fn show_answered(&self, reply: &Message) {
        let Some(thread_id) = reply.place.thread() else {
            return; // in a channel, the page shows what reply_to names
        };
        if !self.places.has_subscribers(&Place::Thread(thread_id)) {
            return;
        }
        let recent = self
            .store
            .thread_recent(thread_id, super::MAX_PAGE, now_millis())
            .await;
        let Ok(thread) = recent else {
            return; // only what a page shows live; the next read is right
        };
        let answered: Vec<Message> = thread
            .into_iter()
            .filter(|m| m.to.as_ref() == Some(&reply.from))
            .filter(|m| {
                m.delivery
                    .as_ref()
                    .is_some_and(|d| d.answered_at == Some(reply.created_at))
            })
            .collect();
        self.delivery_changed(&answered);
    }

    /// Tells those who watch their conversations that where `messages`
    /// stand changed: their feeds yield them again, as updates.
    pub(super) fn delivery_changed(&self, messages: &[Message]) {
        for message in messages {
            self.places
                .publish(&message.place, Arc::new(message.clone()));
        }
    }

    /// Wakes whoever waits for a committed message: its recipient's
    /// waiters, push streams and open pages, its channel's or thread's
    /// feeds, and the sessions that follow its channel.
    pub(super) fn wake(&self, message: Arc<Message>) {
        if let Some(to) = &message.to {
            self.wake_inbox(to);
            self.arrivals.publish(to, message.clone());
        }
        let place = &message.place;
        self.places.publish(place, message.clone());
        if let Place::Channel(_) = place {
            self.push_post(&message);
        }
    }

    /// Wakes whoever waits on `person`'s inbox: something may be there for
    /// them to take.
    pub(super) fn wake_inbox(&self, person: &Handle) {
        self.inboxes.publish(person, ());
    }

    /// Wakes this relay's waiters for the messages other relays commit to
    /// the same store (PostgreSQL), as they commit, until shutdown.
    pub async fn wake_for_other_relays(self: &Arc<Self>) -> StoreResult<()> {
        let Some(mut commits) = self.store.foreign_commits().await? else {
            return Ok(());
        };
        let relay = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = relay.shutdown.cancelled() => return,
                    commit = commits.recv() => match commit {
                        Some(message) => relay.wake(Arc::new(message)),
                        None => return,
                    },
                }
            }
        });
        Ok(())
    }

    /// Refuses an empty or oversized body, or one that carries a likely
    /// secret. A long body is scanned on the blocking pool: the scan is
    /// linear, but a 64 KiB one takes a millisecond or two that the async
    /// workers (every other request's) should not spend.
    async fn check_body(&self, body: String) -> RelayResult<String> {
        if body.trim().is_empty() {
            return Err(RelayError::BadInput("the body is empty".into()));
        }
        if body.contains('\0') {
            return Err(RelayError::BadInput(
                "the body holds a NUL character, which no message may".into(),
            ));
        }
        if body.len() > self.settings.max_body_bytes {
            return Err(RelayError::TooLarge {
                size: body.len(),
                max: self.settings.max_body_bytes,
            });
        }
        let (body, found) = if body.len() <= SCAN_INLINE_BYTES {
            let found = secrets::find_secret(&body);
            (body, found)
        } else {
            tokio::task::spawn_blocking(move || {
                let found = secrets::find_secret(&body);
                (body, found)
            })
            .await
            .map_err(|e| RelayError::Internal(Box::new(e)))?
        };
        match found {
            Some(kind) => Err(RelayError::SecretRefused(kind)),
            None => Ok(body),
        }
    }

    /// A recipient must be someone on the team: a participant from the
    /// environment, or a live person in the store (checked as the message is
    /// stored). A relay with neither accepts any well-formed handle.
    fn recipient(&self, name: &str, field: &str) -> RelayResult<(Handle, RecipientCheck)> {
        let handle = Handle::parse(name).map_err(|e| RelayError::bad_field(field, e))?;
        let participants = &self.settings.participants;
        let check = if participants.iter().any(|(h, _)| *h == handle) {
            RecipientCheck::None
        } else {
            RecipientCheck::LivePerson {
                or_empty_store: participants.is_empty(),
            }
        };
        Ok((handle, check))
    }
}

/// What a message expects of its recipient, and when it is due: a
/// question a reply unless it says otherwise, anything else nothing; only
/// a message to someone may expect anything, and only what expects
/// something may be due, from a second to [`MAX_DUE`] after it is sent.
fn expectation(
    kind: &str,
    to_someone: bool,
    expects: Option<Expects>,
    due_seconds: Option<f64>,
    now: Millis,
) -> RelayResult<(Expects, Option<Millis>)> {
    let expects = match (expects, to_someone) {
        (Some(expects), false) if expects.is_owed() => {
            return Err(RelayError::BadInput(
                "expects: only a message to someone (to, or a channel post's recipient) \
                 may expect an answer"
                    .into(),
            ));
        }
        (_, false) => Expects::Nothing,
        (Some(expects), true) => expects,
        (None, true) => Expects::default_for(kind),
    };
    let Some(seconds) = due_seconds else {
        return Ok((expects, None));
    };
    let most = (MAX_DUE / 1000) as f64;
    if !(1.0..=most).contains(&seconds) {
        return Err(RelayError::BadInput(format!(
            "due_seconds: from 1 to {most} (a week); got {seconds}"
        )));
    }
    if !expects.is_owed() {
        return Err(RelayError::BadInput(
            "due_seconds: this message expects nothing, so nothing is due (say expects: \
             reply or ack, to someone)"
                .into(),
        ));
    }
    Ok((
        expects,
        Some(now.saturating_add((seconds * 1000.0) as Millis)),
    ))
}

/// A message type is free text (QUESTION, ANSWER, DONE, …): one short line.
fn parse_kind(kind: Option<&str>) -> RelayResult<String> {
    let kind = kind
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .unwrap_or("NOTE");
    text::one_line(kind, MAX_KIND_CHARS, || {
        format!("type is one line of at most {MAX_KIND_CHARS} characters")
    })?;
    Ok(kind.to_owned())
}
