//! Coordinating work: acknowledging what a message expects, what is owed
//! on both sides, and the messages that come back to their senders when
//! what they expected is overdue. Claims are `claims.rs`'s.

use super::notify::{About, Notice, first_line};
use super::{Caller, MAX_PAGE, Relay, RelayError, RelayResult};
use crate::model::{
    Ack, AckResult, Expects, Handle, Message, MessageId, Millis, Place, now_millis,
};
use crate::store::{Conversation, NewMessage, RecipientCheck};
use std::sync::Arc;

/// The longest note an acknowledgement carries, in characters.
pub const MAX_ACK_NOTE_CHARS: usize = 500;

/// The type of the item an overdue message's sender finds in their inbox.
pub const OVERDUE: &str = "OVERDUE";

/// The most overdue messages one look returns to their senders.
const OVERDUE_BATCH: u32 = 100;

/// What is owed, on both sides of a person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Open {
    /// Messages to them that expect a reply or an acknowledgement and have
    /// neither, oldest first.
    pub owed_by_me: Vec<Message>,
    /// Theirs to others, likewise.
    pub owed_to_me: Vec<Message>,
}

impl Relay {
    /// Acknowledges message `id` as its recipient: `done`, `blocked` or
    /// `rejected`, with an optional note teammates see. Nobody else may;
    /// a later acknowledgement replaces an earlier one. The message as it
    /// stands now.
    pub async fn ack_message(
        &self,
        caller: &Caller,
        sender: Option<&str>,
        id: MessageId,
        result: AckResult,
        note: Option<String>,
    ) -> RelayResult<Message> {
        let me = self.acting_as(caller, sender)?;
        let note = super::claims::optional_line(note, "note", MAX_ACK_NOTE_CHARS)?;
        let now = now_millis();
        let message = self
            .store
            .message(id, now)
            .await?
            .ok_or_else(|| RelayError::NotFound(format!("no message {id}")))?;
        if message.to.as_ref() != Some(&me) {
            return Err(RelayError::Forbidden(format!(
                "only the recipient of message {id} may acknowledge it"
            )));
        }
        let ack = Ack {
            result,
            note,
            at: now,
        };
        if !self.store.ack_message(&me, id, ack).await? {
            return Err(RelayError::NotFound(format!("no message {id}")));
        }
        let acked = self
            .store
            .message(id, now)
            .await?
            .ok_or_else(|| RelayError::NotFound(format!("no message {id}")))?;
        self.delivery_changed(std::slice::from_ref(&acked));
        Ok(acked)
    }

    /// What the caller owes and is owed: messages that expect a reply or
    /// an acknowledgement and have neither.
    pub async fn open_questions(&self, caller: &Caller, sender: Option<&str>) -> RelayResult<Open> {
        let me = self.acting_as(caller, sender)?;
        self.open_of(&me).await
    }

    /// What `person` owes and is owed (the page's, for the signed-in person).
    pub async fn open_of(&self, person: &Handle) -> RelayResult<Open> {
        let now = now_millis();
        Ok(Open {
            owed_by_me: self.store.owed_by(person, now, MAX_PAGE).await?,
            owed_to_me: self.store.owed_to(person, now, MAX_PAGE).await?,
        })
    }

    /// Returns what came due unanswered to its senders: each message once
    /// (of the relays sharing a store, one takes it), as an `OVERDUE` item
    /// in the sender's inbox, delivered like any message; and tells the
    /// recipient's person, as for an unread message, unless they chose
    /// never to be told. Run with the escalation, every second.
    pub(super) async fn return_overdue(&self, now: Millis) -> RelayResult<()> {
        loop {
            let overdue = self.store.take_overdue(now, OVERDUE_BATCH).await?;
            let whole = overdue.len() == OVERDUE_BATCH as usize;
            for question in overdue {
                let Some(recipient) = question.to.clone() else {
                    continue;
                };
                // Marked, so never returned twice; stored after, so a crash
                // between loses the item (the question stays in open_questions).
                let item = self
                    .store
                    .insert_message(NewMessage {
                        conversation: Conversation::NewThread,
                        from: question.from.clone(),
                        to: Some(question.from.clone()),
                        check_to: RecipientCheck::None,
                        kind: OVERDUE.to_owned(),
                        body: overdue_body(&question, &recipient),
                        reply_to: None,
                        created_at: now,
                        expires_at: question.expires_at.max(now + 1),
                        expects: Expects::Nothing,
                        due_at: None,
                        attachments: Vec::new(),
                    })
                    .await?;
                self.wake(Arc::new(item));
                self.delivery_changed(std::slice::from_ref(&question));
                if self.settings_of(&recipient).await?.after.is_some() {
                    self.tell(Notice {
                        to: recipient,
                        about: About::Unread {
                            from: question.from.clone(),
                            place: question.place.clone(),
                            message: question.id,
                            first_line: first_line(&question.body),
                            count: 1,
                            overdue: true,
                        },
                    });
                }
            }
            if !whole {
                return Ok(());
            }
        }
    }
}

/// What an `OVERDUE` item says: which message, where, to whom, and how to
/// follow it up.
fn overdue_body(question: &Message, recipient: &Handle) -> String {
    let expected = match question.delivery.as_ref().map(|d| d.expects) {
        Some(Expects::Ack) => "an acknowledgement",
        _ => "a reply",
    };
    let place = match &question.place {
        Place::Thread(thread) => format!("thread {thread} (read_thread {thread})"),
        Place::Channel(channel) => format!("channel {channel}"),
    };
    format!(
        "{recipient} has not given {expected} to your message {id} in {place}, and it is \
         overdue: \"{line}\". Follow it up with {recipient}, or with someone else.",
        id = question.id,
        line = first_line(&question.body),
    )
}
