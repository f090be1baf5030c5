//! How big a list of messages is as JSON, so that its answer is written
//! into one buffer of that size (`api::SizedJson`).

use super::{MessagePage, MessageView, Messages, ThreadMessages};
use crate::relay::NOTICE;

/// About how many bytes a value's JSON takes, a little more rather than
/// less.
pub trait JsonSize {
    fn json_size(&self) -> usize;
}

impl JsonSize for MessageView {
    fn json_size(&self) -> usize {
        // The keys, the id and the other time take about 110 bytes (150
        // leaves room for longer ids); then each key only some messages
        // have, with its number or name; a whole ledger about 360 bytes
        // (400 allowed); a file under 150 besides its name and type; and
        // an eighth of the body more for what JSON escapes in it (quotes,
        // new lines).
        let number = |n: Option<i64>| n.map_or(0, |_| 35);
        let name = |s: &Option<String>| s.as_ref().map_or(0, |s| 15 + s.len());
        let delivery = self.delivery.as_ref().map_or(0, |d| {
            400 + d
                .ack
                .as_ref()
                .and_then(|a| a.note.as_ref())
                .map_or(0, String::len)
        });
        let files = self
            .attachments
            .iter()
            .map(|a| 150 + a.name.len() + a.content_type.len())
            .sum::<usize>();
        150 + self.from.len()
            + self.kind.len()
            + self.created_at.len()
            + self.body.len()
            + self.body.len() / 8
            + number(self.thread_id)
            + number(self.reply_to)
            + name(&self.channel)
            + name(&self.to)
            + delivery
            + files
    }
}

/// A list of messages and the reminder.
fn listed(messages: &[MessageView]) -> usize {
    NOTICE.len() + 100 + messages.iter().map(JsonSize::json_size).sum::<usize>()
}

impl JsonSize for Messages {
    fn json_size(&self) -> usize {
        listed(&self.messages)
    }
}

impl JsonSize for ThreadMessages {
    fn json_size(&self) -> usize {
        listed(&self.messages)
    }
}

impl JsonSize for MessagePage {
    fn json_size(&self) -> usize {
        listed(&self.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Ack, AckResult, Attachment, Channel, Delivery, Expects, Handle, Message, MessageId, Place,
        ThreadId, Via,
    };

    /// The size a message's answer is written with holds it whole, and is
    /// not more than twice it: for a bare channel post; for a direct
    /// message with every time of its ledger, an acknowledgement, quotes
    /// and new lines, and a file; and for one with long ids and no file.
    #[test]
    fn a_page_is_sized_for_what_it_holds() {
        let post = Message {
            id: MessageId(12),
            place: Place::Channel(Channel::parse("ops").unwrap()),
            from: Handle::parse("alice").unwrap(),
            to: None,
            kind: "NOTE".into(),
            body: "the deploy is done".into(),
            reply_to: None,
            created_at: 1_765_000_000_000,
            expires_at: 1_766_000_000_000,
            delivery: None,
            attachments: Vec::new(),
        };
        let direct = Message {
            id: MessageId(1_234_567),
            place: Place::Thread(ThreadId(1_234_500)),
            to: Some(Handle::parse("bob-the-reviewer").unwrap()),
            kind: "QUESTION".into(),
            body: "which port does \"staging\" use?\n\tand why?".into(),
            reply_to: Some(MessageId(1_234_499)),
            delivery: Some(Delivery {
                pushed_at: Some(1_765_000_000_001),
                read_at: Some(1_765_000_000_002),
                answered_at: Some(1_765_000_000_003),
                offers: 3,
                lease_until: Some(1_765_000_000_004),
                via: Some(Via::Wake),
                expects: Expects::Reply,
                due_at: Some(1_765_000_000_005),
                ack: Some(Ack {
                    result: AckResult::Blocked,
                    note: Some("waiting on the database team".into()),
                    at: 1_765_000_000_006,
                }),
                overdue_at: Some(1_765_000_000_007),
            }),
            attachments: vec![Attachment {
                n: 1,
                name: "staging-ports.txt".into(),
                content_type: "text/plain".into(),
                size: 1_234_567,
            }],
            ..post.clone()
        };
        let long_ago = Message {
            id: MessageId(9_000_000_000_000),
            place: Place::Thread(ThreadId(8_999_999_999_999)),
            reply_to: Some(MessageId(8_999_999_999_998)),
            attachments: Vec::new(),
            ..direct.clone()
        };
        for message in [post, direct, long_ago] {
            let page = Messages::new(vec![message.clone(); 100]);
            let written = serde_json::to_vec(&page).unwrap().len();
            let size = page.json_size();
            assert!(
                written <= size && size < 2 * written,
                "{written} in {size}: {message:?}"
            );
        }
    }
}
