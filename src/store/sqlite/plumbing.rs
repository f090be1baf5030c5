//! How the table's methods (`../methods.rs`) run on SQLite: reads on a
//! reader thread's connection, writes (every kind of them) on
//! the writer thread, which commits them in groups; their statements all
//! complete at once there ([`rules::at_once`]). Then the methods that are
//! more than one query here.

use super::Sql;
use super::{SqliteStore, search};
use crate::store::methods::signatures::*;
use crate::store::statements::messages::Mark;
use crate::store::statements::{
    attention, inbox, messages, oauth, people, sessions, summaries, work,
};
use crate::store::{NewMessage, PURGE_BATCH, Store, StoreStats, StoredSession};

/// How each kind of the table's lines runs on [`SqliteStore`] (see
/// `define!` in `../methods.rs`).
macro_rules! on_sqlite {
    (@read $store:ident, |$db:ident| $call:expr) => {
        $store.read(move |conn| {
            let $db = &Sql(conn);
            rules::at_once($call)
        })
    };
    (@write $store:ident, |$db:ident| $call:expr) => {
        $store.write(move |conn| {
            let $db = &Sql(conn);
            rules::at_once($call)
        })
    };
    (@atomic $store:ident, |$db:ident| $call:expr) => { on_sqlite!(@write $store, |$db| $call) };
    (@read_indexed $store:ident, |$db:ident| $call:expr) => {
        Box::pin(async move {
            // What committed before the read is in the index it reads.
            $store.index_pending().await?;
            on_sqlite!(@read $store, |$db| $call).await
        })
    };
}

impl Store for SqliteStore {
    store_methods!(define, on_sqlite);

    fn stats(&self) -> &StoreStats {
        &self.stats
    }

    fn credentials_revision(&self) -> StoreFuture<'_, u64> {
        // Past `read_now`, in line with the other reads.
        Box::pin(async move {
            match self.read_now(super::credentials_revision) {
                Some(read) => read,
                None => self.read(|c| Ok(super::credentials_revision(c)?)).await,
            }
        })
    }

    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message> {
        self.write(move |conn| rules::at_once(rules::insert(&Sql(conn), message)))
    }

    fn save_session(&self, id: &SessionId, state: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (id, state) = (id.clone(), state.to_owned());
        self.write(move |conn| rules::at_once(super::sessions::save(&Sql(conn), &id, &state, now)))
    }

    fn bind_session(&self, id: &SessionId, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()> {
        let id = id.clone();
        self.write(move |conn| rules::at_once(super::sessions::bind(&Sql(conn), &id, owner, now)))
    }

    fn session(&self, id: &SessionId) -> StoreFuture<'_, Option<StoredSession>> {
        let id = id.clone();
        self.read(move |conn| rules::at_once(super::sessions::get(&Sql(conn), &id)))
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
            self.write(move |conn| {
                rules::at_once(people::forget_quiet_presence(&Sql(conn), quiet_since))
            })
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
