//! The [`Store`](super::Store) methods that are one query or one rule,
//! written once: each line is a method's documentation, its signature,
//! how it runs, and what it runs.
//!
//! [`store_methods!`] hands the table to a macro that says what a line
//! becomes: [`declare!`] makes the trait's declarations (in `mod.rs`);
//! [`define!`] makes each backend's methods (in `sqlite/plumbing.rs` and
//! `postgres/plumbing.rs`), their bodies as that backend's macro runs a
//! line of that kind (`on_sqlite!`, `on_postgres!`). A line reads
//!
//! ```text
//! /// What it does.
//! KIND name(arg: Type, …) -> What = |db| module::function(db, …);
//! ```
//!
//! where `KIND` says how it runs, the same on every backend:
//! - `read`: on a connection, reading only;
//! - `write`: one statement that writes, or statements each of which
//!   stands alone (`key_or`'s insert-if-missing and read), with nothing
//!   to undo if a later one fails (PostgreSQL commits each alone; SQLite
//!   runs them on its writer, which commits in groups). SQLite runs a
//!   `write` as it runs an `atomic`, so only PostgreSQL would show a
//!   `write` that needed to be `atomic`: when in doubt, `atomic`;
//! - `atomic`: several statements, all or none (a transaction on
//!   PostgreSQL, the writer on SQLite);
//! - `read_indexed`: a read of what an index holds, which sees every
//!   commit before it (SQLite brings its search index up to date first;
//!   PostgreSQL's is kept in the commit).
//!
//! `db` is the backend's [`Executor`](super::sql::Executor), and
//! `module::function` a statement of `statements/` or a rule of `rules/`,
//! written once for both; only `search` is each backend's own. Arguments
//! the caller lends are taken as owned values first ([`IntoOwned`]): the
//! query runs after the call returns, on another thread (SQLite) or task.
//!
//! Why a macro, and not one generic body or an enum of backends: see
//! ARCHITECTURE.md, "The store written once".

/// The methods, handed to `$then!` (see the module documentation).
macro_rules! store_methods {
    ($then:ident $(, $backend:ident)?) => {
        $then! { $($backend;)?
            // People and tokens.
            /// The live (not revoked) person holding this token, if any.
            read person_by_token(hash: TokenHash) -> Option<Person> =
                |db| people::by_token(db, hash);
            /// Whether anyone, revoked or not, was ever added.
            read has_people() -> bool = |db| people::any(db);
            /// Every live person's token hash, for holding in memory.
            read live_tokens() -> Vec<(TokenHash, Handle)> = |db| people::live_tokens(db);
            /// Everyone, revoked or not, oldest first.
            read people() -> Vec<Person> = |db| people::all(db);
            /// Adds a person; `Conflict` if the handle was ever taken.
            atomic add_person(handle: &Handle, name: &str, hash: TokenHash, now: Millis) -> () =
                |db| people::add(db, &handle, &name, hash, now);
            /// Replaces a live person's token; the old one stops working at once.
            atomic rotate_token(handle: &Handle, hash: TokenHash) -> () =
                |db| people::rotate(db, &handle, hash);
            /// Cuts a person off; returns `NotFound` for an unknown or revoked handle.
            atomic revoke_person(handle: &Handle, now: Millis) -> () =
                |db| people::revoke(db, &handle, now);

            // Presence.
            write set_status(handle: &Handle, status: &str, now: Millis) -> () =
                |db| people::set_status(db, &handle, &status, now);
            /// Records last-seen times gathered in memory, keeping the later of two.
            atomic record_seen(seen: Vec<(Handle, Millis)>) -> () =
                |db| people::record_seen(db, seen);
            read presence() -> Vec<Presence> = |db| people::presence(db);

            // The inbox.
            /// Claims up to `limit` of `recipient`'s live messages that are unread
            /// and under no running lease, oldest first, and marks them read at
            /// `now` (an inbox check). Atomic: no message is ever returned by two
            /// claims, nor by a claim and an offer whose lease runs.
            atomic claim_inbox(recipient: &Handle, now: Millis, limit: u32) -> Vec<Message> =
                |db| rules::claim_inbox(db, &recipient, now, limit);
            /// Offers up to `limit` of the same messages to the stream
            /// `offer.holder` (a push), leasing each to it until `offer.until`;
            /// never one whose last offer was to that same stream, nor one offered
            /// [`MAX_OFFERS`](crate::model::MAX_OFFERS) times already (it waits
            /// for a claim). Atomic with claims.
            atomic offer_inbox(recipient: &Handle, offer: Offer, limit: u32) -> Vec<Message> =
                |db| rules::offer_inbox(db, &recipient, offer, limit);
            /// Ends `holder`'s leases on those of `ids` still unread (its stream
            /// ended): they may be offered or claimed again at once.
            write release_offers(recipient: &Handle, holder: i64, ids: Vec<MessageId>) -> () =
                |db| messages::release_offers(db, &recipient, holder, &ids);
            /// The soonest end after `now` of a lease on one of `recipient`'s
            /// unread messages: when one may be offered or claimed again.
            read next_lease_end(recipient: &Handle, now: Millis) -> Option<Millis> =
                |db| messages::next_lease_end(db, &recipient, now);
            /// Marks those of `ids` addressed to `recipient` and not read yet as
            /// read at `now`; returns which were.
            write confirm_read(recipient: &Handle, ids: Vec<MessageId>, now: Millis)
                -> Vec<MessageId> = |db| messages::mark(db, Mark::Read, &recipient, &ids, now);

            // Reading.
            /// One live message, with its ledger.
            read message(id: MessageId, now: Millis) -> Option<Message> =
                |db| messages::message(db, id, now);
            /// File `n` of live message `id`, as its message lists it, with its bytes.
            read attachment(id: MessageId, n: u32, now: Millis) -> Option<(Attachment, Vec<u8>)> =
                |db| messages::attachment(db, id, n, now);
            /// Live messages of a thread with an id above `since_id`, oldest
            /// first, at most `limit`; `NotFound` if the thread has no live message.
            read thread(thread_id: ThreadId, since_id: MessageId, limit: u32, now: Millis)
                -> Vec<Message> = |db| rules::thread(db, thread_id, since_id, limit, now);
            /// The newest `limit` live messages of a thread, oldest first;
            /// `NotFound` if it has none.
            read thread_recent(thread_id: ThreadId, limit: u32, now: Millis) -> Vec<Message> =
                |db| rules::recent(db, &Place::Thread(thread_id), limit, now);
            /// Live messages of a channel with an id above `since_id`, oldest first.
            read channel_messages(channel: &Channel, since_id: MessageId, limit: u32, now: Millis)
                -> Vec<Message> =
                |db| inbox::messages_in(db, &Place::Channel(channel), Some(since_id), limit, now);
            /// The newest `limit` live messages of a channel, oldest first.
            read channel_recent(channel: &Channel, limit: u32, now: Millis) -> Vec<Message> =
                |db| rules::recent(db, &Place::Channel(channel), limit, now);
            /// Channels with live messages, latest activity first: at most `limit`,
            /// with a last id below `before` (the previous page's last). An index
            /// lookup per channel listed, whatever the history holds.
            read channels(now: Millis, before: Option<MessageId>, limit: u32)
                -> Vec<ChannelSummary> = |db| summaries::channels(db, now, before, limit);
            /// Threads with live messages, latest activity first, paged as channels.
            read threads(now: Millis, before: Option<MessageId>, limit: u32)
                -> Vec<ThreadSummary> = |db| summaries::threads(db, now, before, limit);
            /// Records that `reader` has read `place` up to `last_id` (never
            /// backwards).
            write mark_read(reader: &Handle, place: &Place, last_id: MessageId) -> () =
                |db| rules::mark_read(db, &reader, &place, last_id);
            /// For each place, how many live messages came after `reader` last
            /// read it, counting at most `cap`.
            read unread(reader: &Handle, places: Vec<Place>, cap: u64) -> Vec<u64> =
                |db| rules::unread(db, &reader, places, cap, crate::model::now_millis());

            /// Live messages whose body holds every word of `typed` (the last also
            /// as a prefix), newest first: at most `limit`, with ids below `before`.
            /// Every message committed before the search is searched.
            read_indexed search(typed: &str, before: Option<MessageId>, limit: u32, now: Millis)
                -> Vec<Found> = |db| search::search(db, &typed, before, limit, now);

            // The relay's own.
            /// The relay's own key named `name`: `fresh`, kept, when none is kept
            /// yet (the first of processes making one at once wins).
            write key_or(name: &str, fresh: Vec<u8>) -> Vec<u8> =
                |db| people::key(db, &name, &fresh);
            /// Bytes the relay keeps under `name` for all its processes (the ACME
            /// account and certificates, when several relays share the store).
            read kept(name: &str) -> Option<Vec<u8>> = |db| people::kept(db, &name);
            /// Keeps `value` under `name`, replacing what was there.
            write keep(name: &str, value: Vec<u8>) -> () = |db| people::keep(db, &name, &value);

            // MCP sessions.
            /// Records that sessions were used at `now`.
            write touch_sessions(ids: Vec<SessionId>, now: Millis) -> () =
                |db| sessions::touch(db, &ids, now);
            /// Forgets sessions that ended.
            write end_sessions(ids: Vec<SessionId>) -> () = |db| sessions::end(db, &ids);
            /// Forgets sessions not used since `before`.
            write forget_idle_sessions(before: Millis) -> () =
                |db| sessions::forget_idle(db, before);

            // What needs a person's attention.
            /// A person's notification settings; `None` until they choose.
            read notify_settings(handle: &Handle) -> Option<NotifySettings> =
                |db| attention::notify_settings(db, &handle);
            write set_notify_settings(handle: &Handle, settings: NotifySettings) -> () =
                |db| attention::set_notify_settings(db, &handle, &settings);
            /// Live addressed messages with an id above `after` that are unread
            /// (by the recipient's agent, and by the recipient on the page: their
            /// read mark is below them), unanswered and not yet brought to their
            /// person, oldest first, at most `limit`.
            read unnotified(after: MessageId, now: Millis, limit: u32) -> Vec<Message> =
                |db| attention::unnotified(db, after, now, limit);
            /// Marks those of `ids` addressed to `recipient` and still unread,
            /// unanswered and unmarked as brought to them at `now`; returns which
            /// were. Atomic: of the relays serving a store, one takes each.
            write mark_notified(recipient: &Handle, ids: Vec<MessageId>, now: Millis)
                -> Vec<MessageId> = |db| messages::mark(db, Mark::Notified, &recipient, &ids, now);
            /// Keeps a step a person's agent asks them to allow.
            write add_approval(approval: NewApproval) -> Approval =
                |db| attention::add_approval(db, &approval);
            read approval(id: ApprovalId) -> Option<Approval> = |db| attention::approval(db, id);
            /// `handle`'s approvals asked for since `since`, newest first.
            read approvals(handle: &Handle, since: Millis, limit: u32) -> Vec<Approval> =
                |db| attention::approvals(db, &handle, since, limit);
            /// Answers approval `id` if it is `handle`'s, unanswered, and not
            /// expired at `now`; `None` (and nothing changed) otherwise. Atomic:
            /// the first answer wins.
            write answer_approval(id: ApprovalId, handle: &Handle, behavior: Behavior, now: Millis)
                -> Option<Approval> =
                |db| attention::answer_approval(db, id, &handle, behavior, now);
            /// Forgets approvals asked for before `before`; returns how many.
            write forget_approvals(before: Millis) -> u64 =
                |db| attention::forget_approvals(db, before);
            /// Keeps a browser `handle` subscribed (Web Push). An endpoint is one
            /// browser's: subscribed again, it is this person's, with these keys.
            write add_device(device: Device) -> Device = |db| attention::add_device(db, &device);
            /// `handle`'s devices, oldest first.
            read devices(handle: &Handle) -> Vec<Device> = |db| attention::devices(db, &handle);
            /// Forgets device `id` (only if it is `handle`'s, when one is named);
            /// whether there was one.
            write remove_device(id: DeviceId, handle: Option<&Handle>) -> bool =
                |db| attention::remove_device(db, id, handle.as_ref());

            // Coordinating work (relay/work.rs, relay/claims.rs).
            /// Acknowledges message `id` as its recipient `recipient` (it is read
            /// then, if it was not); whether it was theirs. A later
            /// acknowledgement replaces an earlier one.
            write ack_message(recipient: &Handle, id: MessageId, ack: Ack) -> bool =
                |db| work::ack(db, &recipient, id, &ack);
            /// Live messages to `recipient` that expect a reply or an
            /// acknowledgement and have neither, oldest first, at most `limit`.
            read owed_by(recipient: &Handle, now: Millis, limit: u32) -> Vec<Message> =
                |db| work::owed(db, "i.recipient", &recipient, now, limit);
            /// The same, of the messages `sender` sent.
            read owed_to(sender: &Handle, now: Millis, limit: u32) -> Vec<Message> =
                |db| work::owed(db, "m.sender", &sender, now, limit);
            /// Marks up to `limit` live messages due by `now` and still owed as
            /// overdue at `now`, and returns them. Atomic: of the relays serving
            /// a store, one takes each, once.
            atomic take_overdue(now: Millis, limit: u32) -> Vec<Message> =
                |db| rules::take_overdue(db, now, limit);
            /// Makes a claim, or renews its holder's on the same `what`; refused
            /// with the claim in the way when another person's live claim in the
            /// same repository overlaps it. Atomic across relays.
            atomic claim(new: NewClaim, now: Millis) -> Claimed =
                |db| rules::claim(db, &new, now);
            /// Claims live at `now` (in `repo` only, when named), oldest first.
            read claims(repo: Option<&str>, now: Millis) -> Vec<Claim> =
                |db| work::claims(db, repo.as_deref(), now);
            /// One live claim.
            read claim_by_id(id: i64, now: Millis) -> Option<Claim> = |db| work::claim(db, id, now);
            /// Ends claim `id` if `holder` holds it; whether they did.
            write release_claim(id: i64, holder: &Handle) -> bool =
                |db| work::release(db, id, &holder);
            /// Forgets claims that ended by `now`; how many.
            write forget_claims(now: Millis) -> u64 = |db| work::forget_claims(db, now);

            // OAuth (relay/oauth/): clients registered by DCR, authorization
            // codes, grants and their tokens, all tokens and codes as hashes.
            write register_client(client: RegisteredClient) -> () =
                |db| oauth::register_client(db, &client);
            read registered_client(client_id: &str) -> Option<RegisteredClient> =
                |db| oauth::registered_client(db, &client_id);
            /// Keeps an authorization code (its hash) until `expires_at`.
            write add_code(code: TokenHash, authorization: Authorization, expires_at: Millis)
                -> () = |db| oauth::add_code(db, code, &authorization, expires_at);
            /// Uses a code up. A code presented again ends the grant made from it,
            /// or, if none is made yet, voids the code so that none will be.
            atomic redeem_code(code: TokenHash, now: Millis) -> Redeemed =
                |db| rules::redeem_code(db, code, now);
            /// Makes a grant from the code `code` was redeemed as, with its first
            /// tokens; marks its client used. The person keeps at most `most`
            /// grants: their least recently used beyond that are ended first.
            /// `None` if the code was presented again since it was redeemed (void:
            /// no grant is made from it).
            atomic open_grant(
                code: TokenHash,
                authorization: Authorization,
                tokens: GrantTokens,
                now: Millis,
                most: u32
            ) -> Option<Grant> =
                |db| rules::open_grant(db, code, &authorization, &tokens, now, most);
            /// Rotates the refresh token `refresh` of a grant of `client_id`'s
            /// (`rules::refresh_grant`): `tokens` replace the grant's, its access
            /// token too, and `refresh` may come again until `retry_until` as a
            /// retry of the same refresh. Any other refresh token of the grant's
            /// family presented ends the grant. A grant is one row whatever its
            /// history: no used token is kept.
            atomic refresh_grant(
                refresh: TokenHash,
                client_id: &str,
                tokens: GrantTokens,
                now: Millis,
                retry_until: Millis
            ) -> Refreshed =
                |db| rules::refresh_grant(db, refresh, &client_id, &tokens, now, retry_until);
            /// A person's grants, newest first.
            read grants(handle: &Handle) -> Vec<Grant> = |db| oauth::grants(db, &handle);
            /// Ends a grant (`handle`'s only, when given) and every token it
            /// holds; whether there was one.
            atomic end_grant(id: GrantId, handle: Option<&Handle>) -> bool =
                |db| oauth::end_grant(db, id, handle.as_ref());
            /// Ends the grant that holds the access or refresh token `token` (its
            /// current ones, or the refresh token they replaced).
            atomic end_grant_holding(token: TokenHash) -> bool =
                |db| oauth::end_grant_holding(db, token);
            /// Every grant, with its access token if live at `now`: a row a grant.
            read live_grants(now: Millis) -> Vec<LiveGrant> = |db| oauth::live_grants(db, now);
            /// Forgets expired codes, grants whose refresh token expired, and
            /// registrations no grant was ever made for since `unused_since`.
            atomic forget_oauth(now: Millis, unused_since: Millis) -> () =
                |db| oauth::forget(db, now, unused_since);
        }
    };
}

/// The table's lines as the trait's declarations.
macro_rules! declare {
    ($(
        $(#[$doc:meta])*
        $kind:ident $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty = |$db:ident| $call:expr;
    )*) => {$(
        $(#[$doc])*
        fn $name(&self, $($arg: $ty),*) -> StoreFuture<'_, $out>;
    )*};
}

/// The table's lines as methods of a backend's `impl Store`: each takes
/// its arguments as owned values, and `$backend!(@KIND self, |db| call)`
/// makes its body, a [`StoreFuture`](super::StoreFuture), as that backend
/// runs a line of that kind.
macro_rules! define {
    ($backend:ident; $(
        $(#[$doc:meta])*
        $kind:ident $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty = |$db:ident| $call:expr;
    )*) => {$(
        fn $name(&self, $($arg: $ty),*) -> StoreFuture<'_, $out> {
            $(let $arg = IntoOwned::into_owned($arg);)*
            $backend!(@$kind self, |$db| $call)
        }
    )*};
}

/// The types the table's signatures name, for the backends' plumbing.
pub(super) mod signatures {
    pub(in crate::store) use super::IntoOwned;
    pub(in crate::store) use crate::model::{
        Ack, Approval, ApprovalId, Attachment, Authorization, Behavior, Channel, ChannelSummary,
        Claim, Claimed, Device, DeviceId, Found, Grant, GrantId, GrantTokens, Handle, LiveGrant,
        Message, MessageId, Millis, NewApproval, NewClaim, NotifySettings, Person, Place, Presence,
        Redeemed, Refreshed, RegisteredClient, SessionId, ThreadId, ThreadSummary, TokenHash,
    };
    pub(in crate::store) use crate::store::rules;
    pub(in crate::store) use crate::store::{Offer, StoreFuture};
}

/// An argument as the value a query that runs later may hold: what is
/// lent is copied, what is given is kept.
pub(super) trait IntoOwned {
    type Owned: Send + 'static;
    fn into_owned(self) -> Self::Owned;
}

macro_rules! lent {
    ($($lent:ty => $owned:ty),* $(,)?) => {$(
        impl IntoOwned for &$lent {
            type Owned = $owned;
            fn into_owned(self) -> $owned {
                self.to_owned()
            }
        }
    )*};
}

macro_rules! given {
    ($($given:ty),* $(,)?) => {$(
        impl IntoOwned for $given {
            type Owned = $given;
            fn into_owned(self) -> $given {
                self
            }
        }
    )*};
}

use crate::model::{
    Ack, ApprovalId, Authorization, Behavior, Channel, Device, DeviceId, GrantId, GrantTokens,
    Handle, MessageId, NewApproval, NewClaim, NotifySettings, Place, RegisteredClient, ThreadId,
    TokenHash,
};

lent!(Handle => Handle, str => String, Channel => Channel, Place => Place);
given!(
    i64,
    u32,
    u64,
    TokenHash,
    MessageId,
    Option<MessageId>,
    ThreadId,
    super::Offer,
    NotifySettings,
    NewApproval,
    ApprovalId,
    Behavior,
    Device,
    DeviceId,
    RegisteredClient,
    Authorization,
    GrantTokens,
    GrantId,
    Ack,
    NewClaim,
);

impl<T: Send + 'static> IntoOwned for Vec<T> {
    type Owned = Vec<T>;
    fn into_owned(self) -> Vec<T> {
        self
    }
}

impl IntoOwned for Option<&Handle> {
    type Owned = Option<Handle>;
    fn into_owned(self) -> Option<Handle> {
        self.cloned()
    }
}

impl IntoOwned for Option<&str> {
    type Owned = Option<String>;
    fn into_owned(self) -> Option<String> {
        self.map(str::to_owned)
    }
}
