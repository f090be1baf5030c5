//! [`Store`] over SQLite's queries: each method says where its query runs
//! (and, for the message rules, runs `../rules.rs` there).

use super::statements::Sql;
use super::{SqliteStore, attention, messages, oauth, people, search, sessions, summaries};
use crate::model::{
    Approval, ApprovalId, Authorization, Behavior, Channel, ChannelSummary, Device, DeviceId,
    Found, Grant, GrantId, GrantTokens, Handle, LiveGrant, Message, MessageId, Millis, NewApproval,
    NotifySettings, Person, Place, Presence, Redeemed, Refreshed, RegisteredClient, SessionId,
    ThreadId, ThreadSummary, TokenHash,
};
use crate::store::rules::{self, Statements};
use crate::store::{
    NewMessage, Offer, PURGE_BATCH, Store, StoreError, StoreFuture, StoreStats, StoredSession,
};

impl Store for SqliteStore {
    fn stats(&self) -> &StoreStats {
        &self.stats
    }

    fn person_by_token(&self, hash: TokenHash) -> StoreFuture<'_, Option<Person>> {
        self.read(move |conn| people::by_token(conn, hash))
    }

    fn has_people(&self) -> StoreFuture<'_, bool> {
        self.read(people::any)
    }

    fn live_tokens(&self) -> StoreFuture<'_, Vec<(TokenHash, Handle)>> {
        self.read(people::live_tokens)
    }

    fn credentials_revision(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            match self.read_now(people::credentials_revision) {
                Some(read) => read,
                None => self.read(|c| Ok(people::credentials_revision(c)?)).await,
            }
        })
    }

    fn people(&self) -> StoreFuture<'_, Vec<Person>> {
        self.read(people::all)
    }

    fn add_person(
        &self,
        handle: &Handle,
        name: &str,
        hash: TokenHash,
        now: Millis,
    ) -> StoreFuture<'_, ()> {
        let (handle, name) = (handle.clone(), name.to_owned());
        self.write(move |conn| people::add(conn, &handle, &name, hash, now))
    }

    fn rotate_token(&self, handle: &Handle, hash: TokenHash) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        self.write(move |conn| people::rotate(conn, &handle, hash))
    }

    fn revoke_person(&self, handle: &Handle, now: Millis) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        self.write(move |conn| people::revoke(conn, &handle, now))
    }

    fn set_status(&self, handle: &Handle, status: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (handle, status) = (handle.clone(), status.to_owned());
        self.write(move |conn| people::set_status(conn, &handle, &status, now))
    }

    fn record_seen(&self, seen: Vec<(Handle, Millis)>) -> StoreFuture<'_, ()> {
        self.write(move |conn| people::record_seen(conn, seen))
    }

    fn presence(&self) -> StoreFuture<'_, Vec<Presence>> {
        self.read(people::presence)
    }

    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message> {
        self.write(move |conn| rules::at_once(rules::insert(&Sql(conn), message)))
    }

    fn claim_inbox(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        let recipient = recipient.clone();
        self.write(move |conn| {
            rules::at_once(rules::claim_inbox(&Sql(conn), &recipient, now, limit))
        })
    }

    fn offer_inbox(
        &self,
        recipient: &Handle,
        offer: Offer,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        let recipient = recipient.clone();
        self.write(move |conn| {
            rules::at_once(rules::offer_inbox(&Sql(conn), &recipient, offer, limit))
        })
    }

    fn release_offers(
        &self,
        recipient: &Handle,
        holder: i64,
        ids: Vec<MessageId>,
    ) -> StoreFuture<'_, ()> {
        let recipient = recipient.clone();
        self.write(move |conn| messages::release_offers(conn, &recipient, holder, &ids))
    }

    fn next_lease_end(&self, recipient: &Handle, now: Millis) -> StoreFuture<'_, Option<Millis>> {
        let recipient = recipient.clone();
        self.read(move |conn| messages::next_lease_end(conn, &recipient, now))
    }

    fn confirm_read(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>> {
        let recipient = recipient.clone();
        self.write(move |conn| messages::confirm_read(conn, &recipient, &ids, now))
    }

    fn message(&self, id: MessageId, now: Millis) -> StoreFuture<'_, Option<Message>> {
        self.read(move |conn| messages::message(conn, id, now))
    }

    fn thread(
        &self,
        thread_id: ThreadId,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        self.read(move |conn| {
            rules::at_once(rules::thread(&Sql(conn), thread_id, since_id, limit, now))
        })
    }

    fn thread_recent(
        &self,
        thread_id: ThreadId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        self.read(move |conn| {
            rules::at_once(rules::recent(
                &Sql(conn),
                &Place::Thread(thread_id),
                limit,
                now,
            ))
        })
    }

    fn channel_messages(
        &self,
        channel: &Channel,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        let place = Place::Channel(channel.clone());
        self.read(move |conn| rules::at_once(Sql(conn).messages_in(&place, since_id, limit, now)))
    }

    fn channel_recent(
        &self,
        channel: &Channel,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        let place = Place::Channel(channel.clone());
        self.read(move |conn| rules::at_once(rules::recent(&Sql(conn), &place, limit, now)))
    }

    fn channels(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ChannelSummary>> {
        self.read(move |conn| summaries::channels(conn, now, before, limit))
    }

    fn threads(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ThreadSummary>> {
        self.read(move |conn| summaries::threads(conn, now, before, limit))
    }

    fn mark_read(&self, reader: &Handle, place: &Place, last_id: MessageId) -> StoreFuture<'_, ()> {
        let (reader, place) = (reader.clone(), place.clone());
        self.write(move |conn| {
            rules::at_once(rules::mark_read(&Sql(conn), &reader, &place, last_id))
        })
    }

    fn unread(&self, reader: &Handle, places: Vec<Place>, cap: u64) -> StoreFuture<'_, Vec<u64>> {
        let reader = reader.clone();
        let now = crate::model::now_millis();
        self.read(move |conn| rules::at_once(rules::unread(&Sql(conn), &reader, places, cap, now)))
    }

    fn search(
        &self,
        typed: &str,
        before: Option<MessageId>,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Found>> {
        let typed = typed.to_owned();
        Box::pin(async move {
            // What committed before the search is found by it.
            self.index_pending().await?;
            self.read(move |conn| search::search(conn, &typed, before, limit, now))
                .await
        })
    }

    fn key(&self, name: &str) -> StoreFuture<'_, Vec<u8>> {
        let name = name.to_owned();
        let mut fresh = [0u8; 32];
        let made = getrandom::fill(&mut fresh);
        Box::pin(async move {
            made.map_err(|e| StoreError::backend("making a key", e.to_string()))?;
            self.write(move |conn| people::key(conn, &name, &fresh))
                .await
        })
    }

    fn key_or(&self, name: &str, fresh: Vec<u8>) -> StoreFuture<'_, Vec<u8>> {
        let name = name.to_owned();
        self.write(move |conn| people::key(conn, &name, &fresh))
    }

    fn notify_settings(&self, handle: &Handle) -> StoreFuture<'_, Option<NotifySettings>> {
        let handle = handle.clone();
        self.read(move |conn| attention::notify_settings(conn, &handle))
    }

    fn set_notify_settings(
        &self,
        handle: &Handle,
        settings: NotifySettings,
    ) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        self.write(move |conn| attention::set_notify_settings(conn, &handle, &settings))
    }

    fn unnotified(
        &self,
        after: MessageId,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        self.read(move |conn| attention::unnotified(conn, after, now, limit))
    }

    fn mark_notified(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>> {
        let recipient = recipient.clone();
        self.write(move |conn| attention::mark_notified(conn, &recipient, &ids, now))
    }

    fn add_approval(&self, approval: NewApproval) -> StoreFuture<'_, Approval> {
        self.write(move |conn| attention::add_approval(conn, &approval))
    }

    fn approval(&self, id: ApprovalId) -> StoreFuture<'_, Option<Approval>> {
        self.read(move |conn| attention::approval(conn, id))
    }

    fn approvals(
        &self,
        handle: &Handle,
        since: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Approval>> {
        let handle = handle.clone();
        self.read(move |conn| attention::approvals(conn, &handle, since, limit))
    }

    fn answer_approval(
        &self,
        id: ApprovalId,
        handle: &Handle,
        behavior: Behavior,
        now: Millis,
    ) -> StoreFuture<'_, Option<Approval>> {
        let handle = handle.clone();
        self.write(move |conn| attention::answer_approval(conn, id, &handle, behavior, now))
    }

    fn forget_approvals(&self, before: Millis) -> StoreFuture<'_, u64> {
        self.write(move |conn| attention::forget_approvals(conn, before))
    }

    fn add_device(&self, device: Device) -> StoreFuture<'_, Device> {
        self.write(move |conn| attention::add_device(conn, &device))
    }

    fn devices(&self, handle: &Handle) -> StoreFuture<'_, Vec<Device>> {
        let handle = handle.clone();
        self.read(move |conn| attention::devices(conn, &handle))
    }

    fn remove_device(&self, id: DeviceId, handle: Option<&Handle>) -> StoreFuture<'_, bool> {
        let handle = handle.cloned();
        self.write(move |conn| attention::remove_device(conn, id, handle.as_ref()))
    }

    fn register_client(&self, client: RegisteredClient) -> StoreFuture<'_, ()> {
        self.write(move |conn| oauth::register_client(conn, &client))
    }

    fn registered_client(&self, client_id: &str) -> StoreFuture<'_, Option<RegisteredClient>> {
        let client_id = client_id.to_owned();
        self.read(move |conn| oauth::registered_client(conn, &client_id))
    }

    fn add_code(
        &self,
        code: TokenHash,
        authorization: Authorization,
        expires_at: Millis,
    ) -> StoreFuture<'_, ()> {
        self.write(move |conn| oauth::add_code(conn, code, &authorization, expires_at))
    }

    fn redeem_code(&self, code: TokenHash, now: Millis) -> StoreFuture<'_, Redeemed> {
        self.write(move |conn| rules::at_once(rules::redeem_code(&Sql(conn), code, now)))
    }

    fn open_grant(
        &self,
        code: TokenHash,
        authorization: Authorization,
        tokens: GrantTokens,
        now: Millis,
        most: u32,
    ) -> StoreFuture<'_, Option<Grant>> {
        self.write(move |conn| {
            rules::at_once(rules::open_grant(
                &Sql(conn),
                code,
                &authorization,
                &tokens,
                now,
                most,
            ))
        })
    }

    fn refresh_grant(
        &self,
        refresh: TokenHash,
        client_id: &str,
        tokens: GrantTokens,
        now: Millis,
        retry_until: Millis,
    ) -> StoreFuture<'_, Refreshed> {
        let client_id = client_id.to_owned();
        self.write(move |conn| {
            rules::at_once(rules::refresh_grant(
                &Sql(conn),
                refresh,
                &client_id,
                &tokens,
                now,
                retry_until,
            ))
        })
    }

    fn grants(&self, handle: &Handle) -> StoreFuture<'_, Vec<Grant>> {
        let handle = handle.clone();
        self.read(move |conn| oauth::grants(conn, &handle))
    }

    fn end_grant(&self, id: GrantId, handle: Option<&Handle>) -> StoreFuture<'_, bool> {
        let handle = handle.cloned();
        self.write(move |conn| oauth::end_grant(conn, id, handle.as_ref()))
    }

    fn end_grant_holding(&self, token: TokenHash) -> StoreFuture<'_, bool> {
        self.write(move |conn| oauth::end_grant_holding(conn, token))
    }

    fn live_grants(&self, now: Millis) -> StoreFuture<'_, Vec<LiveGrant>> {
        self.read(move |conn| oauth::live_grants(conn, now))
    }

    fn forget_oauth(&self, now: Millis, unused_since: Millis) -> StoreFuture<'_, ()> {
        self.write(move |conn| oauth::forget(conn, now, unused_since))
    }

    fn kept(&self, name: &str) -> StoreFuture<'_, Option<Vec<u8>>> {
        let name = name.to_owned();
        self.read(move |conn| people::kept(conn, &name))
    }

    fn keep(&self, name: &str, value: Vec<u8>) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        self.write(move |conn| people::keep(conn, &name, &value))
    }

    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (id, state) = (id.clone(), state.to_owned());
        self.write(move |conn| sessions::save(conn, &id, &state, now))
    }

    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()> {
        let id = id.clone();
        self.write(move |conn| sessions::bind(conn, &id, owner, now))
    }

    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>> {
        let id = id.clone();
        self.read(move |conn| sessions::get(conn, &id))
    }

    fn touch_sessions(&self, ids: Vec<SessionId>, now: Millis) -> StoreFuture<'_, ()> {
        self.write(move |conn| sessions::touch(conn, &ids, now))
    }

    fn end_sessions(&self, ids: Vec<SessionId>) -> StoreFuture<'_, ()> {
        self.write(move |conn| sessions::end(conn, &ids))
    }

    fn forget_idle_sessions(&self, before: Millis) -> StoreFuture<'_, ()> {
        self.write(move |conn| sessions::forget_idle(conn, before))
    }

    fn tidy(&self) -> StoreFuture<'_, ()> {
        // Outside the writer's transactions: a checkpoint cannot run inside one.
        self.read(|conn| {
            conn.execute_batch("PRAGMA optimize; PRAGMA wal_checkpoint(TRUNCATE);")?;
            Ok(())
        })
    }

    fn purge_expired(&self, now: Millis, quiet_since: Millis) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            self.write(move |conn| people::forget_quiet_presence(conn, quiet_since))
                .await?;
            // In batches, each its own write: other writes wait for one
            // batch at most, never for the whole purge.
            let mut total = 0;
            loop {
                let gone = self
                    .write(move |conn| {
                        rules::at_once(rules::purge_batch(&Sql(conn), now, PURGE_BATCH))
                    })
                    .await?;
                total += gone;
                if gone < u64::from(PURGE_BATCH) {
                    break;
                }
            }
            // The search index, kept close behind even when nobody searches,
            // and rid of the generations the purge emptied, one per write.
            self.index_pending().await?;
            while self.write(search::drop_emptied_generation).await? {}
            if total > 0 {
                // Give the freed pages back to the file system (a database
                // made by this version vacuums incrementally); outside the
                // writer's transactions, as the pragma needs.
                self.read(|conn| Ok(conn.execute_batch("PRAGMA incremental_vacuum(4096)")?))
                    .await?;
            }
            Ok(total)
        })
    }
}
