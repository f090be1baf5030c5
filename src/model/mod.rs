//! The domain's types: what every layer of crosstalk talks about.
//!
//! This module is the leaf of the crate: it imports nothing from it, so the
//! store, the core and every edge can share these types without any of them
//! depending on another. Parse-don't-validate: a [`Handle`] or a [`Channel`]
//! that exists has the documented shape.

/// What a type that holds one text gives back: `as_str`, the `String`,
/// and `Display` as the text.
macro_rules! text_type {
    ($type:ident) => {
        impl $type {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<$type> for String {
            fn from(value: $type) -> String {
                value.0
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// `Display` for ids that are the store's numbers: the number.
macro_rules! number_ids {
    ($($type:ident),+) => {
        $(impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        })+
    };
}

mod attachment;
mod attention;
mod channel;
mod handle;
mod ids;
mod oauth;
mod token;
mod work;

pub use attachment::{
    Attachment, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, image_type_of, is_media_type, is_text_type,
};
pub use attention::{
    Approval, ApprovalId, ApprovalState, Behavior, DEFAULT_NOTIFY_AFTER, Device, DeviceId,
    HTTPS_URL_PATTERN, MAX_NOTIFY_AFTER, MAX_WEBHOOK_LEN, NewApproval, NotifySettings, Preview,
    Webhook, WebhookFormat, WebhookUrl,
};
pub use channel::{CHANNEL_PATTERN, Channel, ChannelError, MAX_CHANNEL_LEN};
pub use handle::{HANDLE_PATTERN, Handle, HandleError, MAX_HANDLE_LEN};
pub use ids::{MessageId, SessionId, ThreadId};
pub use oauth::{
    Authorization, ClientIdUrl, ClientMetadata, ClientPolicy, CodeChallenge, Grant, GrantId,
    GrantTokens, LiveGrant, MAX_CLIENT_NAME_LEN, MAX_REDIRECT_URIS, MAX_URL_LEN, MetadataRefusal,
    OAuthRefusal, Redeemed, RedirectUri, Refreshed, RegisteredClient,
};
pub use token::{
    OAUTH_TOKEN_PREFIX, REFRESH_FAMILY_LEN, TOKEN_BODY_LEN, TOKEN_PREFIX, Token, TokenHash,
    looks_like_a_persons_token, refresh_family,
};

pub use work::{
    Ack, AckResult, Claim, ClaimTarget, Claimed, DEFAULT_CLAIM_TTL, Expects, Glob, MAX_CLAIM_TTL,
    MAX_CLAIM_WHAT, MAX_DUE, NewClaim, normalize_repo,
};

/// Milliseconds since the Unix epoch: the one time type of crosstalk.
pub type Millis = i64;

/// Now, in [`Millis`].
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// Where a message lives: a named channel, or a thread of direct messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    Channel(Channel),
    Thread(ThreadId),
}

impl Place {
    /// From a stored row's two columns, of which the database keeps exactly
    /// one (a CHECK); None for a row that broke that.
    pub fn from_columns(thread: Option<ThreadId>, channel: Option<Channel>) -> Option<Place> {
        match (thread, channel) {
            (None, Some(channel)) => Some(Place::Channel(channel)),
            (Some(thread), None) => Some(Place::Thread(thread)),
            _ => None,
        }
    }

    pub fn channel(&self) -> Option<&Channel> {
        match self {
            Place::Channel(channel) => Some(channel),
            Place::Thread(_) => None,
        }
    }

    pub fn thread(&self) -> Option<ThreadId> {
        match self {
            Place::Thread(thread) => Some(*thread),
            Place::Channel(_) => None,
        }
    }
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: MessageId,
    /// Its channel, or the thread of a direct message.
    pub place: Place,
    pub from: Handle,
    /// Whose inbox it landed in, if anyone's.
    pub to: Option<Handle>,
    /// A free-text label: NOTE, QUESTION, ANSWER, DONE, …
    pub kind: String,
    pub body: String,
    /// The message of the same conversation this answers.
    pub reply_to: Option<MessageId>,
    pub created_at: Millis,
    /// From this moment the message is gone from every read.
    pub expires_at: Millis,
    /// Where it stands with its recipient: present exactly when `to` is.
    pub delivery: Option<Delivery>,
    /// The files it carries, in order.
    pub attachments: Vec<Attachment>,
}

/// How many times a message is offered to its recipient's push streams
/// before the relay stops: a push nobody confirms is not offered again
/// without end (every lease, from stream to stream). Past it the message
/// waits in the inbox for `check_inbox`, which still takes it, and its
/// person is told as soon as the last lease ends (`relay::notify`).
pub const MAX_OFFERS: u32 = 3;

/// The delivery ledger of a message addressed to a person: when it was
/// first offered to one of their listening sessions, read by their agent,
/// and answered, what it expects of them and by when, and their
/// acknowledgement. Each time is set once and never cleared (but an
/// acknowledgement, which the recipient may give again).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delivery {
    /// First written to a listening session (a push): a lease, not yet
    /// confirmed.
    pub pushed_at: Option<Millis>,
    /// Returned by an inbox check, or confirmed by the recipient's agent
    /// acting on it (reading its thread, answering it).
    pub read_at: Option<Millis>,
    /// The recipient replied in its thread (or to it, in a channel).
    pub answered_at: Option<Millis>,
    /// How many times it was offered to a stream; a re-offer is the second
    /// and later.
    pub offers: u32,
    /// When the lease of its latest offer ends (or ended); none once the
    /// stream gave it back, or it was read. Not a time of the ledger: it
    /// says when pushes that stopped have truly ended.
    pub lease_until: Option<Millis>,
    /// The path that last brought it to the recipient's agent.
    pub via: Option<Via>,
    /// What its sender expects of the recipient.
    pub expects: Expects,
    /// When the answer or acknowledgement is due, if its sender said.
    pub due_at: Option<Millis>,
    /// The recipient's acknowledgement, the latest they gave.
    pub ack: Option<Ack>,
    /// When it came back to its sender as overdue.
    pub overdue_at: Option<Millis>,
}

/// A path that brings a message to a person's agent, named in the ledger
/// (`delivery.via`). Each of the first four shows it to a model as it
/// takes it; an inbox check is the agent's own call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A `notifications/claude/channel` notification to a Claude Code
    /// session that shows channels: the bridge's, or an MCP session's.
    Channel,
    /// A Claude Code hook that woke an idle session, or came in between
    /// the steps of a busy one (`crosstalk hook session-start` and `stop`).
    Wake,
    /// A Claude Code hook that added it to a prompt the person sent
    /// (`crosstalk hook user-prompt-submit`).
    Hook,
    /// The REST inbox stream (`GET /api/inbox/stream`) of a client that is
    /// not the bridge.
    Stream,
    /// An inbox check (`check_inbox`, `GET /api/inbox`).
    Inbox,
}

names!(Via {
    Channel => "channel",
    Wake => "wake",
    Hook => "hook",
    Stream => "stream",
    Inbox => "inbox",
});

/// Where a message stands, as its sender and the team see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Nobody has it yet.
    Waiting,
    /// Written to a listening session, not yet confirmed.
    Pushed,
    /// Read by the recipient's agent.
    Read,
    /// The recipient replied.
    Answered,
    /// The recipient acknowledged it (`ack_message`).
    Acked,
}

names!(DeliveryState {
    Waiting => "waiting",
    Pushed => "pushed",
    Read => "read",
    Answered => "answered",
    Acked => "acked",
});

impl Delivery {
    /// Its pushes stopped: offered [`MAX_OFFERS`] times and not confirmed,
    /// so no stream is offered it again and it waits for an inbox check.
    /// Its state stays what it got to (`pushed`): states never go back.
    pub fn pushes_stopped(&self) -> bool {
        self.offers >= MAX_OFFERS && self.read_at.is_none() && self.answered_at.is_none()
    }

    /// Whether the recipient still owes what it expects: neither an answer
    /// nor an acknowledgement yet.
    pub fn is_owed(&self) -> bool {
        self.expects.is_owed() && self.answered_at.is_none() && self.ack.is_none()
    }

    /// Its pushes stopped and the last one's lease has ended by `now`:
    /// nothing will bring it to the recipient's agent but an inbox check.
    pub fn pushes_ended(&self, now: Millis) -> bool {
        self.pushes_stopped() && self.lease_until.is_none_or(|until| until <= now)
    }

    pub fn state(&self) -> DeliveryState {
        if self.ack.is_some() {
            DeliveryState::Acked
        } else if self.answered_at.is_some() {
            DeliveryState::Answered
        } else if self.read_at.is_some() {
            DeliveryState::Read
        } else if self.pushed_at.is_some() {
            DeliveryState::Pushed
        } else {
            DeliveryState::Waiting
        }
    }
}

/// A person as the team knows them, revoked or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub handle: Handle,
    /// The name teammates see.
    pub name: String,
    pub created_at: Millis,
    pub last_seen_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

/// What a handle has said about itself, and when it was last heard from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presence {
    pub handle: Handle,
    pub status: String,
    pub last_seen_at: Option<Millis>,
}

/// A channel as listed: its size and its latest activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSummary {
    pub name: Channel,
    pub message_count: u64,
    pub last_id: MessageId,
    pub last_activity: Millis,
}

/// A thread as listed: who is in it and its latest activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSummary {
    pub id: ThreadId,
    /// Everyone who sent or received a message in it, sorted.
    pub people: Vec<Handle>,
    pub message_count: u64,
    /// The first live message's body: what the thread is about.
    pub opening: String,
    pub last_id: MessageId,
    pub last_activity: Millis,
}

/// A message that a search found, with an excerpt of its body around the
/// terms: alternating runs of text, the matched ones marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub message: Message,
    pub excerpt: Vec<Excerpt>,
}

/// A run of an excerpt's text, and whether it matched a term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    pub text: String,
    pub matched: bool,
}

/// For the tests that hold a pattern published in a schema to the parser
/// it mirrors: asserts that `pattern` matches each of `texts` exactly when
/// `parses` takes it.
#[cfg(test)]
pub(crate) fn assert_pattern_mirrors(pattern: &str, parses: impl Fn(&str) -> bool, texts: &[&str]) {
    let pattern = regex::Regex::new(pattern).expect("the pattern compiles");
    for text in texts {
        assert_eq!(pattern.is_match(text), parses(text), "{text:?}");
    }
}

/// For the same tests: asserts that `pattern` and `parses` both take a
/// text of `longest` characters and both refuse one a character longer.
#[cfg(test)]
pub(crate) fn assert_longest(pattern: &str, parses: impl Fn(&str) -> bool, longest: usize) {
    let pattern = regex::Regex::new(pattern).expect("the pattern compiles");
    for (length, taken) in [(longest, true), (longest + 1, false)] {
        let text = "a".repeat(length);
        assert_eq!(
            (pattern.is_match(&text), parses(&text)),
            (taken, taken),
            "{length} characters: (the pattern matches, the parser takes)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_stop_at_the_last_offer_and_end_with_its_lease() {
        let offered = |offers, lease_until| Delivery {
            pushed_at: Some(1),
            offers,
            lease_until,
            ..Delivery::default()
        };
        assert!(!offered(MAX_OFFERS - 1, None).pushes_stopped());
        let last = offered(MAX_OFFERS, Some(100));
        assert!(last.pushes_stopped());
        assert_eq!(
            last.state(),
            DeliveryState::Pushed,
            "a state never goes back"
        );
        assert!(!last.pushes_ended(99), "its lease still runs");
        assert!(last.pushes_ended(100));
        assert!(offered(MAX_OFFERS, None).pushes_ended(0), "given back");
        let read = Delivery {
            read_at: Some(50),
            ..last
        };
        assert!(!read.pushes_stopped() && !read.pushes_ended(100));
    }
}
