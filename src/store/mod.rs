//! The store: everything crosstalk keeps, behind one interface.
//!
//! The relay core talks only to [`Store`]; [`sqlite::SqliteStore`] and
//! [`postgres::PostgresStore`] implement it. This module knows the domain's types ([`crate::model`])
//! and nothing else of the crate. The rules the core relies on are rules of
//! this interface, whatever database stands behind it:
//! - message ids increase strictly across the whole relay and are never reused;
//! - [`Store::claim_inbox`] and [`Store::offer_inbox`] are atomic: a message
//!   is handed to one claim only, and offered to one stream at a time;
//! - reads never return a message whose `expires_at` has passed;
//! - a write's future resolves only after the write is committed, so a
//!   reader that starts afterwards sees it.
//!
//! How it is written once for both backends: `sql.rs` runs a statement on
//! either, `statements/` holds every statement, `rules/` the rules that
//! take several, and `methods.rs` the table that makes the trait and each
//! backend's methods; each backend keeps its connections, writer, schema
//! and search.
//!
//! What survives a crash is the backend's to say; for SQLite see
//! `sqlite/schema.rs`: a process crash loses no acknowledged write, a power loss may
//! lose the last moments of them but never leaves the file inconsistent.

mod columns;
mod error;
#[macro_use]
mod methods;
pub mod migrate;
pub mod postgres;
mod rules;
mod sql;
pub mod sqlite;
mod statements;
mod stats;
mod summary;
mod text;

use crate::model::{
    Ack, Approval, ApprovalId, Attachment, Authorization, Behavior, Channel, ChannelSummary, Claim,
    Claimed, Delivery, Device, DeviceId, Expects, Found, Grant, GrantId, GrantTokens, Handle,
    LiveGrant, Message, MessageId, Millis, NewApproval, NewClaim, NotifySettings, Person, Place,
    Presence, Redeemed, Refreshed, RegisteredClient, SessionId, ThreadId, ThreadSummary, TokenHash,
    Via, Webhook, WebhookFormat, WebhookUrl,
};

pub use error::{BackendError, Clash, Missing, StoreError, StoreFuture, StoreResult};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
pub use stats::{Histogram, PoolState, Reading, StoreStats};

/// The most expired messages one purge transaction deletes, on every
/// backend: the write lock is held for a few milliseconds at a time, and
/// other writes go between.
pub const PURGE_BATCH: u32 = 200;

/// Where a message lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// A direct message that starts a thread of its own.
    NewThread,
    /// A direct message in an existing thread.
    Thread(ThreadId),
    /// A post in a named, open channel.
    Channel(Channel),
}

/// Who may receive a message, checked in the same transaction that stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipientCheck {
    /// The caller already knows the recipient is valid.
    None,
    /// The recipient must be a live (not revoked) person in the store…
    LivePerson {
        /// …unless nobody was ever added to the store.
        or_empty_store: bool,
    },
}

/// A push's lease: the stream it goes to, and until when no one else may
/// take the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The stream, unique across the relay processes on the store.
    pub holder: i64,
    pub now: Millis,
    pub until: Millis,
    /// The path the stream shows what it is offered on.
    pub via: Via,
}

/// An MCP session as kept across restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The hash of the token that opened it; `None` until the relay has
    /// bound it, and then only that token may use it.
    pub owner: Option<TokenHash>,
    /// What the protocol library needs to take it up again, as it wrote it.
    pub state: String,
    pub last_used: Millis,
    /// Another relay process on the same store holds it and is alive
    /// (PostgreSQL): this one answers it as a lost session, so the client
    /// starts anew. A session whose process has left or stopped beating is
    /// not elsewhere: any relay may take it up.
    pub elsewhere: bool,
}

/// A message about to be stored; the store gives it an id (and a thread).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub conversation: Conversation,
    pub from: Handle,
    /// Lands the message in this person's inbox.
    pub to: Option<Handle>,
    /// How to check `to`; a failed check is `NotFound` and stores nothing.
    pub check_to: RecipientCheck,
    pub kind: String,
    pub body: String,
    pub reply_to: Option<MessageId>,
    pub created_at: Millis,
    pub expires_at: Millis,
    /// What it expects of its recipient (`to`), and by when.
    pub expects: Expects,
    pub due_at: Option<Millis>,
    /// The files it carries, each with its bytes.
    pub attachments: Vec<(Attachment, Vec<u8>)>,
}

impl NewMessage {
    /// The message as stored in `place`, with the id the store gave it,
    /// and its files' bytes in order.
    pub(crate) fn stored(self, id: MessageId, place: &Place) -> (Message, Vec<Vec<u8>>) {
        let (attachments, bytes) = self.attachments.into_iter().unzip();
        let message = Message {
            id,
            place: place.clone(),
            from: self.from,
            kind: self.kind,
            body: self.body,
            reply_to: self.reply_to,
            created_at: self.created_at,
            expires_at: self.expires_at,
            delivery: self.to.is_some().then(|| Delivery {
                expects: self.expects,
                due_at: self.due_at,
                ..Delivery::default()
            }),
            to: self.to,
            attachments,
        };
        (message, bytes)
    }
}

/// When a SQLite store's writer syncs its WAL to the disk: a setting of
/// the configuration, named here so that `config` names no backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// At every commit (`synchronous=FULL`): an acknowledged message
    /// survives a power cut or an operating-system crash too. Under group
    /// commit that is one sync per batch, not per message.
    #[default]
    Full,
    /// At checkpoints only (`synchronous=NORMAL`): a power cut or an
    /// operating-system crash may lose the last moments of acknowledged
    /// writes.
    Normal,
}

/// Everything crosstalk keeps. See the module documentation for the rules.
///
/// Most methods are one query or one rule, declared in `methods.rs`'s
/// table; those written here are more than that on some backend.
pub trait Store: Send + Sync + 'static {
    store_methods!(declare);

    /// What the store counted: its commits, and on PostgreSQL its listener.
    fn stats(&self) -> &StoreStats;
    /// The connection pool's state, where there is one (PostgreSQL).
    fn pool(&self) -> Option<PoolState> {
        None
    }

    /// A number that changes whenever anyone is added, rotated or revoked,
    /// by any process writing to the store. Cheap: servers read it often.
    fn credentials_revision(&self) -> StoreFuture<'_, u64>;

    /// Stores a message. A reply also answers, in the same transaction,
    /// what it replies to (see [`Delivery`]).
    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message>;
    /// The relay's own secret named `name` (32 random bytes, made on first
    /// use and kept): the same for every process serving this store.
    fn key(&self, name: &str) -> StoreFuture<'_, Vec<u8>> {
        let mut fresh = vec![0u8; 32];
        match getrandom::fill(&mut fresh) {
            Ok(()) => self.key_or(name, fresh),
            Err(e) => {
                Box::pin(async move { Err(StoreError::backend("making a key", e.to_string())) })
            }
        }
    }

    /// Keeps an MCP session's state (a new session, not yet bound).
    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()>;
    /// Binds a kept session to the token that opened it.
    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()>;
    /// A kept session. Revoking or replacing its owner's token deletes it.
    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>>;

    /// Daily and at shutdown: refreshes the query planner's statistics and
    /// checkpoints the write-ahead log into the main file.
    fn tidy(&self) -> StoreFuture<'_, ()>;
    /// Deletes expired messages (and threads left empty), and the presence
    /// of handles that are nobody's (a participant's, or a name the shared
    /// token used) not heard from since `quiet_since`; returns how many
    /// messages. In batches: no other write waits behind the whole purge.
    /// Also brings the search index up to date.
    fn purge_expired(&self, now: Millis, quiet_since: Millis) -> StoreFuture<'_, u64>;

    // Several processes on one store.
    /// This process stops serving: what it held (MCP sessions) may be
    /// taken up at once by another process on the store. Nothing to do
    /// where one process is all (SQLite).
    fn leave(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    /// Messages other processes commit to this store from now on, each
    /// once, in id order, as they commit, so this process can wake its own
    /// waiters for them. `None` where only this process adds messages (one
    /// relay per SQLite file), or when they were taken already.
    fn foreign_commits(&self) -> StoreFuture<'_, Option<tokio::sync::mpsc::Receiver<Message>>> {
        Box::pin(async { Ok(None) })
    }
}

/// Settings as both backends keep them.
fn settings_from_columns(
    after: Option<Millis>,
    at_once_when_away: bool,
    webhook: Option<String>,
    format: &str,
) -> StoreResult<NotifySettings> {
    let broken = |what: &str| StoreError::backend("stored notification settings", what.to_owned());
    let webhook = match webhook {
        Some(url) => Some(Webhook {
            url: WebhookUrl::parse(&url).map_err(|e| broken(&e))?,
            format: WebhookFormat::parse(format).ok_or_else(|| broken("an unknown format"))?,
        }),
        None => None,
    };
    Ok(NotifySettings {
        after,
        at_once_when_away,
        webhook,
    })
}
