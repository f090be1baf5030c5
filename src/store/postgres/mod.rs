//! The PostgreSQL store, for several relays on one database
//! (`RELAY_DATABASE_URL=postgres://…`). A pool of connections
//! (`deadpool-postgres`), TLS to the database with rustls over TCP as the
//! URL's `sslmode` says, and the schema brought up to date at start under
//! an advisory lock (`schema.rs`).
//!
//! Writes that add or remove messages take one advisory lock for the whole
//! database ([`WRITE_LOCK`], held to the commit): inserts in groups, one
//! transaction per group (`writer.rs`), and the purge a batch at a time.
//! Message ids come from a sequence read under it, so ids are handed out
//! in commit order across every relay, and a reader that has seen id N
//! never later finds a new message below N. It is what SQLite's single
//! writer gives, and like it, it bounds how many messages a second the
//! relays together can take (see the README's figures). Every other write
//! is its own transaction and does not take it; claims lock the rows they
//! take. Other relays' commits arrive through `listen.rs`.
//!
//! What survives a crash is PostgreSQL's: a write is acknowledged after
//! its commit, durable as the server's `synchronous_commit` says.

mod import;
mod listen;
mod messages;
mod people;
mod schema;
mod statements;
mod summaries;
mod writer;

pub use import::{Copied, import};
pub use schema::MIGRATIONS;

use super::rules::{self, Statements};
use super::{NewMessage, Offer, StoreError, StoreFuture, StoreResult, StoredSession};
use crate::model::{
    Channel, ChannelSummary, Found, Handle, Message, Millis, Person, Place, Presence,
    ThreadSummary, TokenHash,
};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Transaction};
use statements::Sql;
use std::{
    future::Future,
    sync::{Arc, Mutex},
};
use tokio::sync::mpsc;
use tokio_postgres::{Row, types::ToSql};

/// Advisory lock keys, the same in every instance ("crosstalk" and a role).
const MIGRATE_LOCK: i64 = 0x6372_6f73_7374_0001;
/// Held by every write that adds or removes messages, to its commit.
const WRITE_LOCK: i64 = 0x6372_6f73_7374_0002;
/// Held by the instance that purges, for the whole purge.
const PURGE_LOCK: i64 = 0x6372_6f73_7374_0003;

/// How often a relay process says it is alive, and how long after its
/// last word another may take up what it held.
const BEAT: std::time::Duration = std::time::Duration::from_secs(5);
const GONE_AFTER: Millis = 3 * 5_000;

/// Connections kept per instance.
const POOL_SIZE: usize = 16;

/// The PostgreSQL implementation of [`super::Store`].
pub struct PostgresStore {
    pool: Pool,
    /// How to open the connection that listens for other instances'
    /// commits, until [`super::Store::foreign_commits`] opens it.
    listener: Mutex<Listener>,
    /// Ids this process inserted that the listener has not yet passed.
    own: listen::Own,
    /// This process, among the relays on the database: the MCP sessions it
    /// holds are marked with it.
    instance: String,
    /// The queue of the insert writer (group commit); it ends when this is
    /// dropped.
    inserts: mpsc::Sender<writer::Job>,
    /// Says every [`BEAT`] that this process is alive, from the first
    /// session it holds until it leaves.
    beating: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

enum Listener {
    Unopened {
        config: Box<tokio_postgres::Config>,
        tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    },
    Running(tokio::task::JoinHandle<()>),
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Listener::Running(task) = &*self.listener.lock().expect("listener lock") {
            task.abort();
        }
        if let Some(beating) = &*self.beating.lock().expect("beating lock") {
            beating.abort();
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        // A closed connection, a connection failure (class 08) or a server
        // shutting down or starting (57P01–57P03): the database is away.
        let away = error.is_closed()
            || error.code().is_some_and(|code| {
                let code = code.code();
                code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
            });
        if away {
            StoreError::Unavailable {
                doing: "a database query failed".into(),
                source: error.into(),
            }
        } else {
            StoreError::backend("a database query failed", error)
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        StoreError::Unavailable {
            doing: "connecting to the database".into(),
            source: error.into(),
        }
    }
}

/// Where a query runs: a pooled connection or a transaction, its
/// statements prepared once per connection.
pub(super) trait Db: Sync {
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = StoreResult<Vec<Row>>> + Send + 'a;
    fn exec<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = StoreResult<u64>> + Send + 'a;
}

/// The same two methods for a pooled connection and a transaction.
macro_rules! db_over {
    ($($client:ty),*) => {$(
        impl Db for $client {
            async fn rows(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Vec<Row>> {
                let statement = self.prepare_cached(sql).await?;
                Ok(self.query(&statement, params).await?)
            }
            async fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
                let statement = self.prepare_cached(sql).await?;
                Ok(self.execute(&statement, params).await?)
            }
        }
    )*};
}
db_over!(deadpool_postgres::ClientWrapper, Transaction<'_>);

/// The first row of a query, if any.
async fn row(db: &impl Db, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Option<Row>> {
    Ok(db.rows(sql, params).await?.into_iter().next())
}

/// A column as a handle: a row that does not hold one is an error.
fn handle(row: &Row, column: usize) -> StoreResult<Handle> {
    Handle::parse(row.try_get(column)?).map_err(|e| StoreError::backend("a stored handle", e))
}

fn maybe_handle(row: &Row, column: usize) -> StoreResult<Option<Handle>> {
    row.try_get::<_, Option<&str>>(column)?
        .map(|h| Handle::parse(h).map_err(|e| StoreError::backend("a stored handle", e)))
        .transpose()
}

fn maybe_channel(row: &Row, column: usize) -> StoreResult<Option<Channel>> {
    row.try_get::<_, Option<&str>>(column)?
        .map(|c| Channel::parse(c).map_err(|e| StoreError::backend("a stored channel", e)))
        .transpose()
}

// Handles and channel names go in as the text they are (and are parsed on
// the way out, above).
macro_rules! text_to_sql {
    ($($text:ty),*) => {$(
        impl ToSql for $text {
            fn to_sql(
                &self,
                ty: &tokio_postgres::types::Type,
                out: &mut bytes::BytesMut,
            ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
                self.as_str().to_sql(ty, out)
            }

            fn accepts(ty: &tokio_postgres::types::Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }

            tokio_postgres::types::to_sql_checked!();
        }
    )*};
}
text_to_sql!(Handle, Channel);

/// Runs `$body` in a transaction on a pooled connection, as `$tx`, and
/// commits; an error rolls it back (the transaction is dropped).
macro_rules! transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut client = $store.pool.get().await?;
        let $tx = client.transaction().await?;
        let value = $body;
        $tx.commit().await?;
        Ok(value)
    }};
}

impl PostgresStore {
    /// Connects to the database at `url`, and brings its schema up to date.
    /// The URL is never logged (it may hold a password).
    pub async fn connect(url: &str) -> StoreResult<PostgresStore> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::backend("RELAY_DATABASE_URL is not a PostgreSQL URL", e))?;
        let recycling = || ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        // TLS over TCP as `sslmode` says (`prefer` by default); a Unix
        // socket has no name to check a certificate against, and no need.
        let local = config
            .get_hosts()
            .iter()
            .all(|host| matches!(host, tokio_postgres::config::Host::Unix(_)));
        let tls = if local || config.get_ssl_mode() == tokio_postgres::config::SslMode::Disable {
            None
        } else {
            Some(tls()?)
        };
        let manager = match &tls {
            None => Manager::from_config(config.clone(), tokio_postgres::NoTls, recycling()),
            Some(tls) => Manager::from_config(config.clone(), tls.clone(), recycling()),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::backend("cannot set up the database pool", e))?;
        let mut client = pool.get().await?;
        schema::migrate(&mut client).await?;
        drop(client);
        let own = listen::Own::default();
        let (inserts, jobs) = mpsc::channel(4 * 1024);
        tokio::spawn(writer::run(pool.clone(), own.clone(), jobs));
        Ok(PostgresStore {
            pool,
            inserts,
            listener: Mutex::new(Listener::Unopened {
                config: Box::new(config),
                tls,
            }),
            own,
            instance: instance_id()?,
            beating: Mutex::new(None),
        })
    }

    /// Marks this process alive before it first names itself as a
    /// session's holder, and from then on every [`BEAT`] until it leaves:
    /// only a process that holds sessions says it is alive (the team
    /// commands, `check` and `migrate-to-postgres` never do).
    async fn hold_sessions(&self) -> StoreResult<()> {
        if self.beating.lock().expect("beating lock").is_some() {
            return Ok(());
        }
        people::beat(
            &*self.client().await?,
            &self.instance,
            crate::model::now_millis(),
        )
        .await?;
        let mut beating = self.beating.lock().expect("beating lock");
        if beating.is_none() {
            let (pool, instance) = (self.pool.clone(), self.instance.clone());
            *beating = Some(tokio::spawn(async move {
                let mut every = tokio::time::interval(BEAT);
                every.tick().await; // the first tick is now: beaten already
                loop {
                    every.tick().await;
                    let beat = async {
                        people::beat(&*pool.get().await?, &instance, crate::model::now_millis())
                            .await
                    };
                    if let Err(error) = beat.await {
                        tracing::warn!(
                            error = &error as &dyn std::error::Error,
                            "cannot tell the database this relay is alive"
                        );
                    }
                }
            }));
        }
        Ok(())
    }

    async fn client(&self) -> StoreResult<deadpool_postgres::Client> {
        Ok(self.pool.get().await?)
    }
}

/// A random name for this process.
fn instance_id() -> StoreResult<String> {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::backend("naming this relay process", e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// TLS to the database, used when the URL's `sslmode` asks for it: the
/// system's usual roots (webpki), ring as the provider.
fn tls() -> StoreResult<tokio_postgres_rustls::MakeRustlsConnect> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| StoreError::backend("setting up TLS to the database", e))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

impl super::Store for PostgresStore {
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
        Box::pin(async move { people::credentials_revision(&*self.client().await?).await })
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
            let from: i64 = self
                .client()
                .await?
                .query_one("SELECT coalesce(max(id), 0) FROM messages", &[])
                .await?
                .get(0);
            let mut listener = self.listener.lock().expect("listener lock");
            let (commits, taken) = mpsc::channel(1024);
            let own = self.own.clone();
            let task = match &*listener {
                Listener::Running(_) => return Ok(None),
                Listener::Unopened { config, tls: None } => tokio::spawn(listen::run(
                    (**config).clone(),
                    tokio_postgres::NoTls,
                    from,
                    own,
                    commits,
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
        ids: Vec<i64>,
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
        ids: Vec<i64>,
        now: Millis,
    ) -> StoreFuture<'_, Vec<i64>> {
        let recipient = recipient.clone();
        Box::pin(async move {
            messages::confirm_read(&*self.client().await?, &recipient, &ids, now).await
        })
    }

    fn message(&self, id: i64, now: Millis) -> StoreFuture<'_, Option<Message>> {
        Box::pin(async move { messages::message(&*self.client().await?, id, now).await })
    }

    fn thread(
        &self,
        thread_id: i64,
        since_id: i64,
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
        thread_id: i64,
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
        since_id: i64,
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
        before: Option<i64>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ChannelSummary>> {
        Box::pin(
            async move { summaries::channels(&*self.client().await?, now, before, limit).await },
        )
    }

    fn threads(
        &self,
        now: Millis,
        before: Option<i64>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ThreadSummary>> {
        Box::pin(
            async move { summaries::threads(&*self.client().await?, now, before, limit).await },
        )
    }

    fn mark_read(&self, reader: &Handle, place: &Place, last_id: i64) -> StoreFuture<'_, ()> {
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
        before: Option<i64>,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Found>> {
        let typed = typed.to_owned();
        Box::pin(async move {
            messages::search(&*self.client().await?, &typed, before, limit, now).await
        })
    }

    fn key(&self, name: &str) -> StoreFuture<'_, Vec<u8>> {
        let name = name.to_owned();
        let mut fresh = [0u8; 32];
        let made = getrandom::fill(&mut fresh);
        Box::pin(async move {
            made.map_err(|e| StoreError::backend("making a key", e.to_string()))?;
            people::key(&*self.client().await?, &name, fresh).await
        })
    }

    fn kept(&self, name: &str) -> StoreFuture<'_, Option<Vec<u8>>> {
        let name = name.to_owned();
        Box::pin(async move { people::kept(&*self.client().await?, &name).await })
    }

    fn keep(&self, name: &str, value: Vec<u8>) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        Box::pin(async move { people::keep(&*self.client().await?, &name, &value).await })
    }

    fn save_session(&self, id: &str, state: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (id, state) = (id.to_owned(), state.to_owned());
        Box::pin(async move {
            self.hold_sessions().await?;
            people::save_session(&*self.client().await?, &self.instance, &id, &state, now).await
        })
    }

    fn bind_session(&self, id: &str, owner: TokenHash, now: Millis) -> StoreFuture<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            self.hold_sessions().await?;
            people::bind_session(&*self.client().await?, &self.instance, &id, owner, now).await
        })
    }

    fn session(&self, id: &str) -> StoreFuture<'_, Option<StoredSession>> {
        let id = id.to_owned();
        Box::pin(async move {
            let alive_since = crate::model::now_millis() - GONE_AFTER;
            people::session(&*self.client().await?, &self.instance, &id, alive_since).await
        })
    }

    fn touch_sessions(&self, ids: Vec<String>, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(async move { people::touch_sessions(&*self.client().await?, &ids, now).await })
    }

    fn end_sessions(&self, ids: Vec<String>) -> StoreFuture<'_, ()> {
        Box::pin(async move { people::end_sessions(&*self.client().await?, &ids).await })
    }

    fn forget_idle_sessions(&self, before: Millis) -> StoreFuture<'_, ()> {
        Box::pin(async move { people::forget_idle_sessions(&*self.client().await?, before).await })
    }

    fn leave(&self) -> StoreFuture<'_, ()> {
        if let Some(beating) = self.beating.lock().expect("beating lock").take() {
            beating.abort();
        }
        let gone = crate::model::now_millis() - 86_400_000;
        Box::pin(async move {
            people::forget_relays(&*self.client().await?, &self.instance, gone).await
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
