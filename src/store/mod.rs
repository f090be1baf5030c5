//! The store: everything crosstalk keeps, behind one interface.
//!
//! The relay core talks only to [`Store`]; [`sqlite::SqliteStore`] is the one
//! implementation. The rules that the core relies on are rules of this
//! interface, whatever database stands behind it:
//! - message ids increase strictly across the whole relay and are never reused;
//! - [`Store::claim_inbox`] is atomic: a message is handed to one claim only;
//! - reads never return a message whose `expires_at` has passed;
//! - a write's future resolves only after the write is durable (committed).

pub mod sqlite;

use crate::relay::token::TokenHash;
use std::{future::Future, pin::Pin};

pub use sqlite::SqliteStore;

/// Milliseconds since the Unix epoch: the one time type of the store.
pub type Millis = i64;

pub type StoreResult<T> = Result<T, StoreError>;
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = StoreResult<T>> + Send + 'a>>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing named does not exist (or is not live any more).
    #[error("{0}")]
    NotFound(String),
    /// The write would break a uniqueness rule (a handle taken twice).
    #[error("{0}")]
    Conflict(String),
    /// The database failed; the text is for the log, never for a client.
    #[error("database error: {0}")]
    Backend(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::Backend(error.to_string())
    }
}

/// A person as the store knows them, revoked or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonRecord {
    pub handle: String,
    pub name: String,
    pub created_at: Millis,
    pub last_seen_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

/// What a handle has said about itself, and when it was last heard from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presence {
    pub handle: String,
    pub status: String,
    pub last_seen_at: Option<Millis>,
}

/// Where a message lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// A direct message that starts a thread of its own.
    NewThread,
    /// A direct message in an existing thread.
    Thread(i64),
    /// A post in a named, open channel.
    Channel(String),
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

/// A message about to be stored; the store gives it an id (and a thread).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub conversation: Conversation,
    pub from: String,
    /// Lands the message in this person's inbox.
    pub to: Option<String>,
    /// How to check `to`; a failed check is `NotFound` and stores nothing.
    pub check_to: RecipientCheck,
    pub kind: String,
    pub body: String,
    pub reply_to: Option<i64>,
    pub created_at: Millis,
    pub expires_at: Millis,
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: i64,
    pub thread_id: Option<i64>,
    pub channel: Option<String>,
    pub from: String,
    pub to: Option<String>,
    pub kind: String,
    pub body: String,
    pub reply_to: Option<i64>,
    pub created_at: Millis,
    pub expires_at: Millis,
}

/// A channel as listed: its size and its latest activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSummary {
    pub name: String,
    pub message_count: u64,
    pub last_id: i64,
    pub last_activity: Millis,
}

/// A thread as listed: who is in it and its latest activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSummary {
    pub id: i64,
    /// Everyone who sent or received a message in it, sorted.
    pub people: Vec<String>,
    pub message_count: u64,
    /// The first live message's body: what the thread is about.
    pub opening: String,
    pub last_id: i64,
    pub last_activity: Millis,
}

/// Everything crosstalk keeps. See the module documentation for the rules.
pub trait Store: Send + Sync + 'static {
    // People and tokens.
    /// The live (not revoked) person holding this token, if any.
    fn person_by_token(&self, hash: TokenHash) -> StoreFuture<'_, Option<PersonRecord>>;
    /// Whether anyone, revoked or not, was ever added.
    fn has_people(&self) -> StoreFuture<'_, bool>;
    /// Everyone, revoked or not, oldest first.
    fn people(&self) -> StoreFuture<'_, Vec<PersonRecord>>;
    fn add_person(
        &self,
        handle: &str,
        name: &str,
        hash: TokenHash,
        now: Millis,
    ) -> StoreFuture<'_, ()>;
    /// Replaces a live person's token; the old one stops working at once.
    fn rotate_token(&self, handle: &str, hash: TokenHash) -> StoreFuture<'_, ()>;
    /// Cuts a person off; returns `NotFound` for an unknown or revoked handle.
    fn revoke_person(&self, handle: &str, now: Millis) -> StoreFuture<'_, ()>;

    // Presence.
    fn set_status(&self, handle: &str, status: &str, now: Millis) -> StoreFuture<'_, ()>;
    /// Records last-seen times gathered in memory, keeping the later of two.
    fn record_seen(&self, seen: Vec<(String, Millis)>) -> StoreFuture<'_, ()>;
    fn presence(&self) -> StoreFuture<'_, Vec<Presence>>;

    // Messages.
    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message>;
    /// Claims up to `limit` unread live messages addressed to `recipient`,
    /// oldest first. Atomic: no message is ever returned by two claims.
    fn claim_inbox(
        &self,
        recipient: &str,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Every live message of a thread, oldest first; `NotFound` if none.
    fn thread(&self, thread_id: i64, now: Millis) -> StoreFuture<'_, Vec<Message>>;
    /// Live messages of a channel with an id above `since_id`, oldest first.
    fn channel_messages(
        &self,
        channel: &str,
        since_id: i64,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>>;
    fn channels(&self, now: Millis) -> StoreFuture<'_, Vec<ChannelSummary>>;
    /// Threads with live messages, latest activity first.
    fn threads(&self, now: Millis, limit: u32) -> StoreFuture<'_, Vec<ThreadSummary>>;
    /// Deletes expired messages (and threads left empty); returns how many.
    fn purge_expired(&self, now: Millis) -> StoreFuture<'_, u64>;
}
