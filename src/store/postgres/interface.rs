//! [`Store`] over PostgreSQL's queries: each method says where its query runs
//! (and, for the message rules, runs `../rules.rs` there).

use super::statements::Sql;
use super::{
    GONE_AFTER, Listener, PURGE_LOCK, PostgresStore, attention, listen, messages, oauth, people,
    search, sessions, summaries,
};
use crate::model::{
    Approval, ApprovalId, Authorization, Behavior, Channel, ChannelSummary, Device, DeviceId,
    Found, Grant, GrantId, GrantTokens, Handle, LiveGrant, Message, MessageId, Millis, NewApproval,
    NotifySettings, Person, Place, Presence, Redeemed, Refreshed, RegisteredClient, SessionId,
    ThreadId, ThreadSummary, TokenHash,
};
use crate::store::rules::{self, Statements};
use crate::store::{
    NewMessage, Offer, PoolState, Store, StoreError, StoreFuture, StoreStats, StoredSession,
};
use tokio::sync::mpsc;

impl Store for PostgresStore {
    fn stats(&self) -> &StoreStats {
        &self.stats
    }

    fn pool(&self) -> Option<PoolState> {
        let status = self.pool.status();
        Some(PoolState {
            open: status.size as u64,
            max: status.max_size as u64,
            idle: status.available as u64,
            waiting: status.waiting as u64,
        })
    }

    fn person_by_token(&self, hash: TokenHash) -> StoreFuture<'_, Option<Person>> {
        Box::pin(async move { people::by_token(&*self.client().await?, hash).await })
    }

    fn has_people(&self) -> StoreFuture<'_, bool> {
        Box::pin(async move { people::any(&*self.client().await?).await })
    }

    fn live_tokens(&self) -> StoreFuture<'_, Vec<(TokenHash, Handle)>> {
        Box::pin(async move { people::live_tokens(&*self.client().await?).await })
    }

    fn credentials_revision(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { super::credentials_revision(&*self.client().await?).await })
    }

    fn people(&self) -> StoreFuture<'_, Vec<Person>> {
        Box::pin(async move { people::all(&*self.client().await?).await })
    }

    fn add_person(
        &self,
        handle: &Handle,
        name: &str,
        hash: TokenHash,
        now: Millis,
    ) -> StoreFuture<'_, ()> {
        let (handle, name) = (handle.clone(), name.to_owned());
        Box::pin(async move {
            transaction!(self, |tx| people::add(&tx, &handle, &name, hash, now)
                .await?)
        })
    }

    fn rotate_token(&self, handle: &Handle, hash: TokenHash) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        Box::pin(async move { transaction!(self, |tx| people::rotate(&tx, &handle, hash).await?) })
    }

    fn revoke_person(&self, handle: &Handle, now: Millis) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        Box::pin(async move { transaction!(self, |tx| people::revoke(&tx, &handle, now).await?) })
    }

    fn set_status(&self, handle: &Handle, status: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (handle, status) = (handle.clone(), status.to_owned());
        Box::pin(
            async move { people::set_status(&*self.client().await?, &handle, &status, now).await },
        )
    }

    fn record_seen(&self, seen: Vec<(Handle, Millis)>) -> StoreFuture<'_, ()> {
        Box::pin(async move { transaction!(self, |tx| people::record_seen(&tx, seen).await?) })
    }

    fn presence(&self) -> StoreFuture<'_, Vec<Presence>> {
        Box::pin(async move { people::presence(&*self.client().await?).await })
    }

    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message> {
        Box::pin(async move {
            let lost = || {
                StoreError::backend(
                    "the write was not committed",
                    "the database writer has stopped",
                )
            };
            let (reply, answer) = tokio::sync::oneshot::channel();
            self.inserts
                .send((message, reply))
                .await
                .map_err(|_| lost())?;
            answer.await.map_err(|_| lost())?
        })
    }

    fn foreign_commits(&self) -> StoreFuture<'_, Option<mpsc::Receiver<Message>>> {
        Box::pin(async move {
            let from: MessageId = self
                .client()
                .await?
                .query_one("SELECT coalesce(max(id), 0) FROM messages", &[])
                .await?
                .get(0);
            let mut listener = self.listener.lock().expect("listener lock");
            let (commits, taken) = mpsc::channel(1024);
            let own = self.own.clone();
            let stats = self.stats.clone();
            let task = match &*listener {
                Listener::Running(_) => return Ok(None),
                Listener::Unopened { config, tls: None } => tokio::spawn(listen::run(
                    (**config).clone(),
                    tokio_postgres::NoTls,
                    from,
                    own,
                    commits,
                    stats,
                )),
                Listener::Unopened {
                    config,
                    tls: Some(tls),
                } => tokio::spawn(listen::run(
                    (**config).clone(),
                    tls.clone(),
                    from,
                    own,
                    commits,
                    stats,
                )),
            };
            *listener = Listener::Running(task);
            Ok(Some(taken))
        })
    }

    fn claim_inbox(
        &self,
        recipient: &Handle,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        let recipient = recipient.clone();
        Box::pin(async move {
            transaction!(self, |tx| rules::claim_inbox(
                &Sql(&tx),
                &recipient,
                now,
                limit
            )
            .await?)
        })
    }

    fn offer_inbox(
        &self,
        recipient: &Handle,
        offer: Offer,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        let recipient = recipient.clone();
        Box::pin(async move {
            transaction!(self, |tx| rules::offer_inbox(
                &Sql(&tx),
                &recipient,
                offer,
                limit
            )
            .await?)
        })
    }

    fn release_offers(
        &self,
        recipient: &Handle,
        holder: i64,
        ids: Vec<MessageId>,
    ) -> StoreFuture<'_, ()> {
        let recipient = recipient.clone();
        Box::pin(async move {
            messages::release_offers(&*self.client().await?, &recipient, holder, &ids).await
        })
    }

    fn next_lease_end(&self, recipient: &Handle, now: Millis) -> StoreFuture<'_, Option<Millis>> {
        let recipient = recipient.clone();
        Box::pin(
            async move { messages::next_lease_end(&*self.client().await?, &recipient, now).await },
        )
    }

    fn confirm_read(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>> {
        let recipient = recipient.clone();
        Box::pin(async move {
            messages::confirm_read(&*self.client().await?, &recipient, &ids, now).await
        })
    }

    fn message(&self, id: MessageId, now: Millis) -> StoreFuture<'_, Option<Message>> {
        Box::pin(async move { messages::message(&*self.client().await?, id, now).await })
    }

    fn thread(
        &self,
        thread_id: ThreadId,
        since_id: MessageId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        Box::pin(async move {
            let client = self.client().await?;
            rules::thread(&Sql(&*client), thread_id, since_id, limit, now).await
        })
    }

    fn thread_recent(
        &self,
        thread_id: ThreadId,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        Box::pin(async move {
            let client = self.client().await?;
            rules::recent(&Sql(&*client), &Place::Thread(thread_id), limit, now).await
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
        Box::pin(async move {
            let client = self.client().await?;
            Sql(&*client)
                .messages_in(&place, since_id, limit, now)
                .await
        })
    }

    fn channel_recent(
        &self,
        channel: &Channel,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        let place = Place::Channel(channel.clone());
        Box::pin(async move {
            let client = self.client().await?;
            rules::recent(&Sql(&*client), &place, limit, now).await
        })
    }

    fn channels(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ChannelSummary>> {
        Box::pin(
            async move { summaries::channels(&*self.client().await?, now, before, limit).await },
        )
    }

    fn threads(
        &self,
        now: Millis,
        before: Option<MessageId>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ThreadSummary>> {
        Box::pin(
            async move { summaries::threads(&*self.client().await?, now, before, limit).await },
        )
    }

    fn mark_read(&self, reader: &Handle, place: &Place, last_id: MessageId) -> StoreFuture<'_, ()> {
        let (reader, place) = (reader.clone(), place.clone());
        Box::pin(async move {
            let client = self.client().await?;
            rules::mark_read(&Sql(&*client), &reader, &place, last_id).await
        })
    }

    fn unread(&self, reader: &Handle, places: Vec<Place>, cap: u64) -> StoreFuture<'_, Vec<u64>> {
        let reader = reader.clone();
        let now = crate::model::now_millis();
        Box::pin(async move {
            let client = self.client().await?;
            rules::unread(&Sql(&*client), &reader, places, cap, now).await
        })
    }

    fn search(
        &self,
        typed: &str,
        before: Option<MessageId>,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Found>> {
        let typed = typed.to_owned();
        Box::pin(
            async move { search::search(&*self.client().await?, &typed, before, limit, now).await },
        )
    }

    fn key(&self, name: &str) -> StoreFuture<'_, Vec<u8>> {
        let name = name.to_owned();
        let mut fresh = [0u8; 32];
        let made = getrandom::fill(&mut fresh);
        Box::pin(async move {
            made.map_err(|e| StoreError::backend("making a key", e.to_string()))?;
            people::key(&*self.client().await?, &name, &fresh).await
        })
    }

    fn key_or(&self, name: &str, fresh: Vec<u8>) -> StoreFuture<'_, Vec<u8>> {
        let name = name.to_owned();
        Box::pin(async move { people::key(&*self.client().await?, &name, &fresh).await })
    }

    fn notify_settings(&self, handle: &Handle) -> StoreFuture<'_, Option<NotifySettings>> {
        let handle = handle.clone();
        Box::pin(async move { attention::notify_settings(&*self.client().await?, &handle).await })
    }

    fn set_notify_settings(
        &self,
        handle: &Handle,
        settings: NotifySettings,
    ) -> StoreFuture<'_, ()> {
        let handle = handle.clone();
        Box::pin(async move {
            attention::set_notify_settings(&*self.client().await?, &handle, &settings).await
        })
    }

    fn unnotified(
        &self,
        after: MessageId,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        Box::pin(
            async move { attention::unnotified(&*self.client().await?, after, now, limit).await },
        )
    }

    fn mark_notified(
        &self,
        recipient: &Handle,
        ids: Vec<MessageId>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<MessageId>> {
        let recipient = recipient.clone();
        Box::pin(async move {
            attention::mark_notified(&*self.client().await?, &recipient, &ids, now).await
        })
    }

    fn add_approval(&self, approval: NewApproval) -> StoreFuture<'_, Approval> {
        Box::pin(async move { attention::add_approval(&*self.client().await?, &approval).await })
    }

    fn approval(&self, id: ApprovalId) -> StoreFuture<'_, Option<Approval>> {
        Box::pin(async move { attention::approval(&*self.client().await?, id).await })
    }

    fn approvals(
        &self,
        handle: &Handle,
        since: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Approval>> {
        let handle = handle.clone();
        Box::pin(async move {
            attention::approvals(&*self.client().await?, &handle, since, limit).await
        })
    }

    fn answer_approval(
        &self,
        id: ApprovalId,
        handle: &Handle,
        behavior: Behavior,
        now: Millis,
    ) -> StoreFuture<'_, Option<Approval>> {
        let handle = handle.clone();
        Box::pin(async move {
            attention::answer_approval(&*self.client().await?, id, &handle, behavior, now).await
        })
    }

    fn forget_approvals(&self, before: Millis) -> StoreFuture<'_, u64> {
        Box::pin(async move { attention::forget_approvals(&*self.client().await?, before).await })
    }

    fn add_device(&self, device: Device) -> StoreFuture<'_, Device> {
        Box::pin(async move { attention::add_device(&*self.client().await?, &device).await })
    }

    fn devices(&self, handle: &Handle) -> StoreFuture<'_, Vec<Device>> {
        let handle = handle.clone();
        Box::pin(async move { attention::devices(&*self.client().await?, &handle).await })
    }

    fn remove_device(&self, id: DeviceId, handle: Option<&Handle>) -> StoreFuture<'_, bool> {
        let handle = handle.cloned();
        Box::pin(async move {
            attention::remove_device(&*self.client().await?, id, handle.as_ref()).await
        })
    }

    fn register_client(&self, client: RegisteredClient) -> StoreFuture<'_, ()> {
        Box::pin(async move { oauth::register_client(&*self.client().await?, &client).await })
    }

    fn registered_client(&self, client_id: &str) -> StoreFuture<'_, Option<RegisteredClient>> {
        let client_id = client_id.to_owned();
        Box::pin(async move { oauth::registered_client(&*self.client().await?, &client_id).await })
    }

    fn add_code(
        &self,
        code: TokenHash,
        authorization: Authorization,
        expires_at: Millis,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            oauth::add_code(&*self.client().await?, code, &authorization, expires_at).await
        })
    }

    fn redeem_code(&self, code: TokenHash, now: Millis) -> StoreFuture<'_, Redeemed> {
        Box::pin(
            async move { transaction!(self, |tx| rules::redeem_code(&Sql(&tx), code, now).await?) },
        )
    }

    fn open_grant(
        &self,
        code: TokenHash,
        authorization: Authorization,
        tokens: GrantTokens,
        now: Millis,
        most: u32,
    ) -> StoreFuture<'_, Option<Grant>> {
        Box::pin(async move {
            transaction!(self, |tx| rules::open_grant(
                &Sql(&tx),
                code,
                &authorization,
                &tokens,
                now,
                most
            )
            .await?)
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
        Box::pin(async move {
            transaction!(self, |tx| rules::refresh_grant(
                &Sql(&tx),
                refresh,
                &client_id,
                &tokens,
                now,
                retry_until
            )
            .await?)
        })
    }

    fn grants(&self, handle: &Handle) -> StoreFuture<'_, Vec<Grant>> {
        let handle = handle.clone();
        Box::pin(async move { oauth::grants(&*self.client().await?, &handle).await })
    }

    fn end_grant(&self, id: GrantId, handle: Option<&Handle>) -> StoreFuture<'_, bool> {
        let handle = handle.cloned();
        Box::pin(async move {
            transaction!(self, |tx| oauth::end_grant(&tx, id, handle.as_ref())
                .await?)
        })
    }

    fn end_grant_holding(&self, token: TokenHash) -> StoreFuture<'_, bool> {
        Box::pin(
            async move { transaction!(self, |tx| oauth::end_grant_holding(&tx, token).await?) },
        )
    }

    fn live_grants(&self, now: Millis) -> StoreFuture<'_, Vec<LiveGrant>> {
        Box::pin(async move { oauth::live_grants(&*self.client().await?, now).await })
    }

    fn forget_oauth(&self, now: Millis, unused_since: Millis) -> StoreFuture<'_, ()> {
        Box::pin(
            async move { transaction!(self, |tx| oauth::forget(&tx, now, unused_since).await?) },
        )
    }

    fn kept(&self, name: &str) -> StoreFuture<'_, Option<Vec<u8>>> {
        let name = name.to_owned();
        Box::pin(async move { people::kept(&*self.client().await?, &name).await })
    }

    fn keep(&self, name: &str, value: Vec<u8>) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        Box::pin(async move { people::keep(&*self.client().await?, &name, &value).await })
    }

    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (id, state) = (id.clone(), state.to_owned());
        Box::pin(async move {
            self.hold_sessions().await?;
            sessions::save(&*self.client().await?, &self.instance, &id, &state, now).await
        })
    }

    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()> {
        let id = id.clone();
        Box::pin(async move {
            self.hold_sessions().await?;
            sessions::bind(&*self.client().await?, &self.instance, &id, owner, now).await
        })
    }

    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>> {
        let id = id.clone();
        Box::pin(async move {
            let alive_since = crate::model::now_millis() - GONE_AFTER;
            sessions::get(&*self.client().await?, &self.instance, &id, alive_since).await
        })
    }

    fn touch_sessions(&self, ids: Vec<SessionId>, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(async move { sessions::touch(&*self.client().await?, &ids, now).await })
    }

    fn end_sessions(&self, ids: Vec<SessionId>) -> StoreFuture<'_, ()> {
        Box::pin(async move { sessions::end(&*self.client().await?, &ids).await })
    }

    fn forget_idle_sessions(&self, before: Millis) -> StoreFuture<'_, ()> {
        Box::pin(async move { sessions::forget_idle(&*self.client().await?, before).await })
    }

    fn leave(&self) -> StoreFuture<'_, ()> {
        if let Some(beating) = self.beating.lock().expect("beating lock").take() {
            beating.abort();
        }
        let gone = crate::model::now_millis() - 86_400_000;
        Box::pin(async move {
            sessions::forget_relays(&*self.client().await?, &self.instance, gone).await
        })
    }

    fn tidy(&self) -> StoreFuture<'_, ()> {
        // PostgreSQL's autovacuum keeps statistics and space; nothing to do.
        Box::pin(async { Ok(()) })
    }

    fn purge_expired(&self, now: Millis, quiet_since: Millis) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            people::forget_quiet_presence(&*client, quiet_since).await?;
            // One instance purges at a time: the lock is this connection's
            // until the end (or until the instance dies, with its session).
            let purging: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&PURGE_LOCK])
                .await?
                .get(0);
            if !purging {
                return Ok(0);
            }
            let purged = summaries::purge(&mut client, now).await;
            client
                .execute("SELECT pg_advisory_unlock($1)", &[&PURGE_LOCK])
                .await?;
            purged
        })
    }
}
