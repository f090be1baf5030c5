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
//! What survives a crash is the backend's to say; for SQLite see
//! `sqlite/schema.rs`: a process crash loses no acknowledged write, a power loss may
//! lose the last moments of them but never leaves the file inconsistent.

mod error;
pub mod migrate;
pub mod postgres;
mod rules;
pub mod sqlite;
mod stats;
mod summary;
mod text;

use crate::model::{
    Approval, ApprovalId, Authorization, Behavior, Channel, ChannelSummary, Delivery, Device,
    DeviceId, Found, Grant, GrantId, GrantTokens, Handle, LiveGrant, Message, MessageId, Millis,
    NewApproval, NotifySettings, Person, Place, Presence, Redeemed, Refreshed, RegisteredClient,
    SessionId, ThreadId, ThreadSummary, TokenHash, Via, Webhook, WebhookFormat, WebhookUrl,
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
}

impl NewMessage {
    /// The message as stored in `place`, with the id the store gave it.
    pub(crate) fn stored(self, id: MessageId, place: &Place) -> Message {
        Message {
            id,
            place: place.clone(),
            from: self.from,
            kind: self.kind,
            body: self.body,
            reply_to: self.reply_to,
            created_at: self.created_at,
            expires_at: self.expires_at,
            delivery: self.to.is_some().then(Delivery::default),
            to: self.to,
        }
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
pub trait Store: Send + Sync + 'static {
    /// What the store counted: its commits, and on PostgreSQL its listener.
    fn stats(&self) -> &StoreStats;
    /// The connection pool's state, where there is one (PostgreSQL).
    fn pool(&self) -> Option<PoolState> {
        None
    }

    // People and tokens.
    /// The live (not revoked) person holding this token, if any.
    fn person_by_token(&self, hash: TokenHash) -> StoreFuture<'_, Option<Person>>;
    /// Whether anyone, revoked or not, was ever added.
    fn has_people(&self) -> StoreFuture<'_, bool>;
    /// Every live person's token hash, for holding in memory.
    fn live_tokens(&self) -> StoreFuture<'_, Vec<(TokenHash, Handle)>>;
    /// A number that changes whenever anyone is added, rotated or revoked,
    /// by any process writing to the store. Cheap: servers read it often.
    fn credentials_revision(&self) -> StoreFuture<'_, u64>;
    /// Everyone, revoked or not, oldest first.
    fn people(&self) -> StoreFuture<'_, Vec<Person>>;
    /// Adds a person; `Conflict` if the handle was ever taken.
    fn add_person(
        &self,
        handle: &Handle,
        name: &str,
        hash: TokenHash,
        now: Millis,
    ) -> StoreFuture<'_, ()>;
    /// Replaces a live person's token; the old one stops working at once.
    fn rotate_token(&self, handle: &Handle, hash: TokenHash) -> StoreFuture<'_, ()>;
    /// Cuts a person off; returns `NotFound` for an unknown or revoked handle.
    fn revoke_person(&self, handle: &Handle, now: Millis) -> StoreFuture<'_, ()>;

    // Presence.
    fn set_status(&self, handle: &Handle, status: &str, now: Millis) -> StoreFuture<'_, ()>;
    /// Records last-seen times gathered in memory, keeping the later of two.
    fn record_seen(&self, seen: Vec<(Handle, Millis)>) -> StoreFuture<'_, ()>;
    fn presence(&self) -> StoreFuture<'_, Vec<Presence>>;

    // Messages.
    /// Stores a message. A reply also answers, in the same transaction,
    /// what it replies to (see [`Delivery`]).
    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message>;
    /// Claims up to `limit` of `recipient`'s live messages that are unread
    /// and under no running lease, oldest first, and marks them read at
    /// `now` (an inbox check). Atomic: no message is ever returned by two
    /// claims, nor by a claim and an offer whose lease runs.
    fn claim_inbox(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Offers up to `limit` of the same messages to the stream
    /// `offer.holder` (a push), leasing each to it until `offer.until`;
    /// never one whose last offer was to that same stream, nor one offered
    /// [`MAX_OFFERS`](crate::model::MAX_OFFERS) times already (it waits
    /// for a claim). Atomic with claims.
    fn offer_inbox(
        &self,
        recipient: &Handle,
        offer: Offer,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Ends `holder`'s leases on those of `ids` still unread (its stream
    /// ended): they may be offered or claimed again at once.
    fn release_offers(
        &self,
        recipient: &Handle,
        holder: i64,
        ids: Vec<MessageId>,
    ) -> StoreFuture<'_, ()>;
    /// The soonest end after `now` of a lease on one of `recipient`'s
    /// unread messages: when one may be offered or claimed again.
    fn next_lease_end(&self, recipient: &Handle, now: Millis) -> StoreFuture<'_, Option<Millis>>;
    /// Marks those of `ids` addressed to `recipient` and not read yet as
    /// read at `now`; returns which were.
    fn confirm_read(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>>;
    /// One live message, with its ledger.
    fn message(&self, id: MessageId, now: Millis) -> StoreFuture<'_, Option<Message>>;
    /// Live messages of a thread with an id above `since_id`, oldest
    /// first, at most `limit`; `NotFound` if the thread has no live message.
    fn thread(
        &self,
        thread_id: ThreadId,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// The newest `limit` live messages of a thread, oldest first;
    /// `NotFound` if it has none.
    fn thread_recent(
        &self,
        thread_id: ThreadId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Live messages of a channel with an id above `since_id`, oldest first.
    fn channel_messages(
        &self,
        channel: &Channel,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// The newest `limit` live messages of a channel, oldest first.
    fn channel_recent(
        &self,
        channel: &Channel,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Channels with live messages, latest activity first: at most `limit`,
    /// with a last id below `before` (the previous page's last). An index
    /// lookup per channel listed, whatever the history holds.
    fn channels(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ChannelSummary>>;
    /// Threads with live messages, latest activity first, paged as channels.
    fn threads(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ThreadSummary>>;
    /// Records that `reader` has read `place` up to `last_id` (never
    /// backwards).
    fn mark_read(&self, reader: &Handle, place: &Place, last_id: MessageId) -> StoreFuture<'_, ()>;
    /// For each place, how many live messages came after `reader` last
    /// read it, counting at most `cap`.
    fn unread(&self, reader: &Handle, places: Vec<Place>, cap: u64) -> StoreFuture<'_, Vec<u64>>;
    /// Live messages whose body holds every word of `typed` (the last also
    /// as a prefix), newest first: at most `limit`, with ids below `before`.
    /// Every message committed before the search is searched.
    fn search(
        &self,
        typed: &str,
        before: Option<MessageId>,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Found>>;
    /// The relay's own secret named `name` (32 random bytes, made on first
    /// use and kept): the same for every process serving this store.
    fn key(&self, name: &str) -> StoreFuture<'_, Vec<u8>>;
    /// The relay's own key named `name`: `fresh`, kept, when none is kept
    /// yet (the first of processes making one at once wins).
    fn key_or(&self, name: &str, fresh: Vec<u8>) -> StoreFuture<'_, Vec<u8>>;
    /// Keeps an MCP session's state (a new session, not yet bound).
    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()>;
    /// Binds a kept session to the token that opened it.
    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()>;
    /// A kept session. Revoking or replacing its owner's token deletes it.
    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>>;
    /// Records that sessions were used at `now`.
    fn touch_sessions(&self, ids: Vec<SessionId>, now: Millis) -> StoreFuture<'_, ()>;
    /// Forgets sessions that ended.
    fn end_sessions(&self, ids: Vec<SessionId>) -> StoreFuture<'_, ()>;
    /// Forgets sessions not used since `before`.
    fn forget_idle_sessions(&self, before: Millis) -> StoreFuture<'_, ()>;
    /// Daily and at shutdown: refreshes the query planner's statistics and
    /// checkpoints the write-ahead log into the main file.
    fn tidy(&self) -> StoreFuture<'_, ()>;
    /// Deletes expired messages (and threads left empty), and the presence
    /// of handles that are nobody's (a participant's, or a name the shared
    /// token used) not heard from since `quiet_since`; returns how many
    /// messages. In batches: no other write waits behind the whole purge.
    /// Also brings the search index up to date.
    fn purge_expired(&self, now: Millis, quiet_since: Millis) -> StoreFuture<'_, u64>;

    // What needs a person's attention.
    /// A person's notification settings; `None` until they choose.
    fn notify_settings(&self, handle: &Handle) -> StoreFuture<'_, Option<NotifySettings>>;
    fn set_notify_settings(&self, handle: &Handle, settings: NotifySettings)
    -> StoreFuture<'_, ()>;
    /// Live addressed messages with an id above `after` that are unread
    /// (by the recipient's agent, and by the recipient on the page: their
    /// read mark is below them), unanswered and not yet brought to their
    /// person, oldest first, at most `limit`.
    fn unnotified(
        &self,
        after: MessageId,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>>;
    /// Marks those of `ids` addressed to `recipient` and still unread,
    /// unanswered and unmarked as brought to them at `now`; returns which
    /// were. Atomic: of the relays serving a store, one takes each.
    fn mark_notified(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>>;
    /// Keeps a step a person's agent asks them to allow.
    fn add_approval(&self, approval: NewApproval) -> StoreFuture<'_, Approval>;
    fn approval(&self, id: ApprovalId) -> StoreFuture<'_, Option<Approval>>;
    /// `handle`'s approvals asked for since `since`, newest first.
    fn approvals(
        &self,
        handle: &Handle,
        since: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Approval>>;
    /// Answers approval `id` if it is `handle`'s, unanswered, and not
    /// expired at `now`; `None` (and nothing changed) otherwise. Atomic:
    /// the first answer wins.
    fn answer_approval(
        &self,
        id: ApprovalId,
        handle: &Handle,
        behavior: Behavior,
        now: Millis,
    ) -> StoreFuture<'_, Option<Approval>>;
    /// Forgets approvals asked for before `before`; returns how many.
    fn forget_approvals(&self, before: Millis) -> StoreFuture<'_, u64>;
    /// Keeps a browser `handle` subscribed (Web Push). An endpoint is one
    /// browser's: subscribed again, it is this person's, with these keys.
    fn add_device(&self, device: Device) -> StoreFuture<'_, Device>;
    /// `handle`'s devices, oldest first.
    fn devices(&self, handle: &Handle) -> StoreFuture<'_, Vec<Device>>;
    /// Forgets device `id` (only if it is `handle`'s, when one is named);
    /// whether there was one.
    fn remove_device(&self, id: DeviceId, handle: Option<&Handle>) -> StoreFuture<'_, bool>;

    /// Bytes the relay keeps under `name` for all its processes (the ACME
    /// account and certificates, when several relays share the store).
    // OAuth (relay/oauth.rs): clients registered by DCR, authorization
    // codes, grants and their tokens, all tokens and codes as hashes.
    fn register_client(&self, client: RegisteredClient) -> StoreFuture<'_, ()>;
    fn registered_client(&self, client_id: &str) -> StoreFuture<'_, Option<RegisteredClient>>;
    /// Keeps an authorization code (its hash) until `expires_at`.
    fn add_code(
        &self,
        code: TokenHash,
        authorization: Authorization,
        expires_at: Millis,
    ) -> StoreFuture<'_, ()>;
    /// Uses a code up. A code presented again ends the grant made from it,
    /// or, if none is made yet, voids the code so that none will be.
    fn redeem_code(&self, code: TokenHash, now: Millis) -> StoreFuture<'_, Redeemed>;
    /// Makes a grant from the code `code` was redeemed as, with its first
    /// tokens; marks its client used. The person keeps at most `most`
    /// grants: their least recently used beyond that are ended first.
    /// `None` if the code was presented again since it was redeemed (void:
    /// no grant is made from it).
    fn open_grant(
        &self,
        code: TokenHash,
        authorization: Authorization,
        tokens: GrantTokens,
        now: Millis,
        most: u32,
    ) -> StoreFuture<'_, Option<Grant>>;
    /// Rotates the refresh token `refresh` of a grant of `client_id`'s
    /// (`rules::refresh_grant`): `tokens` replace the grant's, its access
    /// token too, and `refresh` may come again until `retry_until` as a
    /// retry of the same refresh. Any other refresh token of the grant's
    /// family presented ends the grant. A grant is one row whatever its
    /// history: no used token is kept.
    fn refresh_grant(
        &self,
        refresh: TokenHash,
        client_id: &str,
        tokens: GrantTokens,
        now: Millis,
        retry_until: Millis,
    ) -> StoreFuture<'_, Refreshed>;
    /// A person's grants, newest first.
    fn grants(&self, handle: &Handle) -> StoreFuture<'_, Vec<Grant>>;
    /// Ends a grant (`handle`'s only, when given) and every token it
    /// holds; whether there was one.
    fn end_grant(&self, id: GrantId, handle: Option<&Handle>) -> StoreFuture<'_, bool>;
    /// Ends the grant that holds the access or refresh token `token` (its
    /// current ones, or the refresh token they replaced).
    fn end_grant_holding(&self, token: TokenHash) -> StoreFuture<'_, bool>;
    /// Every grant, with its access token if live at `now`: a row a grant.
    fn live_grants(&self, now: Millis) -> StoreFuture<'_, Vec<LiveGrant>>;
    /// Forgets expired codes, grants whose refresh token expired, and
    /// registrations no grant was ever made for since `unused_since`.
    fn forget_oauth(&self, now: Millis, unused_since: Millis) -> StoreFuture<'_, ()>;

    fn kept(&self, name: &str) -> StoreFuture<'_, Option<Vec<u8>>>;
    /// Keeps `value` under `name`, replacing what was there.
    fn keep(&self, name: &str, value: Vec<u8>) -> StoreFuture<'_, ()>;

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
