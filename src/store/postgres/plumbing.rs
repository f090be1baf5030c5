//! How the table's methods (`../methods.rs`) run on PostgreSQL: reads and
//! one-statement writes on a pooled connection, atomic ones in a
//! transaction on one; a rule's statements are awaited there. Then the
//! methods that are more than one query here.

use super::Sql;
use super::WRITE_LOCK;
use super::{GONE_AFTER, Listener, PURGE_LOCK, PostgresStore, listen, search};
use crate::store::methods::signatures::*;
use crate::store::statements::messages::Mark;
use crate::store::statements::{
    attention, inbox, messages, oauth, people, sessions, summaries, work,
};
use crate::store::{
    NewMessage, PURGE_BATCH, PoolState, Store, StoreError, StoreResult, StoreStats, StoredSession,
};
use tokio::sync::mpsc;

/// How each kind of the table's lines runs on [`PostgresStore`] (see
/// `define!` in `../methods.rs`): each a future of its own.
macro_rules! on_postgres {
    (@read $store:ident, |$db:ident| $call:expr) => {
        Box::pin(async move {
            let client = $store.client().await?;
            let $db = &Sql(&*client);
            $call.await
        })
    };
    (@write $store:ident, |$db:ident| $call:expr) => { on_postgres!(@read $store, |$db| $call) };
    (@read_indexed $store:ident, |$db:ident| $call:expr) => {
        on_postgres!(@read $store, |$db| $call)
    };
    (@atomic $store:ident, |$db:ident| $call:expr) => {
        Box::pin(async move {
            transaction!($store, |tx| {
                let $db = &Sql(&tx);
                $call.await?
            })
        })
    };
}

impl Store for PostgresStore {
    store_methods!(define, on_postgres);

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

    fn credentials_revision(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { oauth::credentials_revision(&Sql(&*self.client().await?)).await })
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

    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (id, state) = (id.clone(), state.to_owned());
        Box::pin(async move {
            self.hold_sessions().await?;
            super::sessions::save(
                &Sql(&*self.client().await?),
                &self.instance,
                &id,
                &state,
                now,
            )
            .await
        })
    }

    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()> {
        let id = id.clone();
        Box::pin(async move {
            self.hold_sessions().await?;
            super::sessions::bind(
                &Sql(&*self.client().await?),
                &self.instance,
                &id,
                owner,
                now,
            )
            .await
        })
    }

    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>> {
        let id = id.clone();
        Box::pin(async move {
            let alive_since = crate::model::now_millis() - GONE_AFTER;
            super::sessions::get(
                &Sql(&*self.client().await?),
                &self.instance,
                &id,
                alive_since,
            )
            .await
        })
    }

    fn leave(&self) -> StoreFuture<'_, ()> {
        if let Some(beating) = self.beating.lock().expect("beating lock").take() {
            beating.abort();
        }
        let gone = crate::model::now_millis() - 86_400_000;
        Box::pin(async move {
            super::sessions::forget_relays(&Sql(&*self.client().await?), &self.instance, gone).await
        })
    }

    fn tidy(&self) -> StoreFuture<'_, ()> {
        // PostgreSQL's autovacuum keeps statistics and space; nothing to do.
        Box::pin(async { Ok(()) })
    }

    fn purge_expired(&self, now: Millis, quiet_since: Millis) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            people::forget_quiet_presence(&Sql(&*client), quiet_since).await?;
            // One instance purges at a time: the lock is this connection's
            // until the end (or until the instance dies, with its session).
            let purging: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&PURGE_LOCK])
                .await?
                .get(0);
            if !purging {
                return Ok(0);
            }
            let purged = purge(&mut client, now).await;
            client
                .execute("SELECT pg_advisory_unlock($1)", &[&PURGE_LOCK])
                .await?;
            purged
        })
    }
}

/// Deletes expired messages in batches, each its own transaction under the
/// write lock, with their inbox rows, keeping the summaries true; returns
/// how many went. The caller holds the purge lock.
async fn purge(client: &mut deadpool_postgres::Client, now: Millis) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
            .await?;
        let gone = rules::purge_batch(&Sql(&tx), now, PURGE_BATCH).await?;
        tx.commit().await?;
        total += gone;
        if gone < u64::from(PURGE_BATCH) {
            return Ok(total);
        }
    }
}
