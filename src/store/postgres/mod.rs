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
//! relays together can take (see bench/README.md's figures). Every other write
//! is its own transaction and does not take it; claims lock the rows they
//! take. Other relays' commits arrive through `listen.rs`.
//!
//! Every statement is written once for both backends (`../statements/`),
//! run here on [`Sql`]. What is PostgreSQL's own: `plumbing.rs` says how
//! the methods of `../methods.rs` run here; `writer.rs` the group commit;
//! `schema.rs` the schema and its migrations; `search.rs` the search
//! (`tsvector`); `sessions.rs` the MCP sessions and the relay processes
//! that hold them; `listen.rs` the other relays' commits.
//!
//! What survives a crash is PostgreSQL's: a write is acknowledged after
//! its commit, durable as the server's `synchronous_commit` says.

mod listen;
mod schema;
mod search;
mod sessions;
mod writer;

pub use schema::MIGRATIONS;

use super::sql::{Dialect, Executor, Param, dollars, pg_params};
use super::{StoreError, StoreResult, StoreStats};
use crate::model::{MessageId, Millis};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Transaction};
use std::{
    future::Future,
    sync::{Arc, Mutex},
};
use tokio::sync::mpsc;
use tokio_postgres::{Row, types::ToSql};

/// Advisory lock keys, the same in every instance ("crosstalk" and a role).
const MIGRATE_LOCK: i64 = 0x6372_6f73_7374_0001;
/// Held by every write that adds or removes messages or moves their ids,
/// to its commit.
pub(in crate::store) const WRITE_LOCK: i64 = 0x6372_6f73_7374_0002;
/// Held by the instance that purges, for the whole purge.
const PURGE_LOCK: i64 = 0x6372_6f73_7374_0003;

/// This backend's executor (`../sql.rs`) over a [`Db`]: a pooled
/// connection, a transaction, or a group commit's batch.
pub(super) struct Sql<'d, D>(pub &'d D);

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
    /// What the writer and the listener count.
    stats: Arc<StoreStats>,
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

/// Where a query runs: a pooled connection, a transaction, or a group
/// commit's batch (`writer.rs`), its statements prepared once per
/// connection.
pub(super) trait Db: Sync + Sized {
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

    /// A write whose row count nobody reads. A group commit's batch only
    /// queues it, to go with the batch's other writes in one round trip.
    fn write<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = StoreResult<()>> + Send + 'a {
        async move { self.exec(sql, params).await.map(drop) }
    }

    /// The next message's id, from the sequence; taken under the write
    /// lock, so ids are handed out in commit order. A group commit's batch
    /// hands them out from the sequence's value it read under the lock.
    fn next_message_id(&self) -> impl Future<Output = StoreResult<MessageId>> + Send + '_ {
        async move {
            let rows = self.rows("SELECT nextval('message_ids')", &[]).await?;
            let row = rows.first().expect("nextval returns a row");
            Ok(row.try_get(0)?)
        }
    }
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

impl<D: Db> Executor for Sql<'_, D> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn exec(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<u64> {
        self.0.exec(&dollars(sql), &pg_params(params)).await
    }

    async fn write(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<()> {
        self.0.write(&dollars(sql), &pg_params(params)).await
    }

    async fn rows<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        mut read: impl FnMut(super::sql::Row<'_>) -> StoreResult<T> + Send,
    ) -> StoreResult<Vec<T>> {
        let rows = self.0.rows(&dollars(sql), &pg_params(params)).await?;
        rows.iter()
            .map(|row| read(super::sql::Row::Postgres(row)))
            .collect()
    }

    async fn next_message_id(&self) -> StoreResult<MessageId> {
        self.0.next_message_id().await
    }
}

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
        let stats = Arc::new(StoreStats::default());
        tokio::spawn(writer::run(pool.clone(), own.clone(), jobs, stats.clone()));
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
            stats,
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
        sessions::beat(
            &Sql(&*self.client().await?),
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
                        sessions::beat(
                            &Sql(&*pool.get().await?),
                            &instance,
                            crate::model::now_millis(),
                        )
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

    pub(in crate::store) async fn client(&self) -> StoreResult<deadpool_postgres::Client> {
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

// After `transaction!`, which it uses.
mod plumbing;

#[cfg(test)]
#[test]
fn the_architecture_states_the_beat_and_when_a_relay_is_gone() {
    let doc = include_str!("../../../ARCHITECTURE.md");
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&format!("every {} s", BEAT.as_secs())));
    assert!(flat.contains(&format!("{} s without a beat", GONE_AFTER / 1000)));
}
