//! The SQLite store: one file in WAL mode, one writer thread with group
//! commit (`writer.rs`), and a few reader threads, each with a connection
//! of its own (`readers.rs`), so SQLite never blocks the async workers. The
//! one exception is the credentials revision every authenticated request
//! reads: one row, read at once on a connection of its own, which goes to
//! the reader threads instead whenever it would wait for a lock
//! (`read_now`).
//!
//! Every statement is written once for both backends (`../statements/`),
//! run here on [`Sql`], this backend's executor. What is SQLite's own:
//! `plumbing.rs` says how the methods of `../methods.rs` run here;
//! `writer.rs` the writer thread; `readers.rs` the reader threads;
//! `schema.rs` the schema, its migrations
//! and what survives a crash; `search.rs` the search index (FTS5 in
//! generations); `sessions.rs` saving and reading an MCP session; `copy.rs`
//! backup, restore and the serving lock.

mod copy;
mod plumbing;
mod readers;
mod schema;
mod search;
mod sessions;
mod writer;

use crate::store::Durability;
pub use copy::{ServingLock, backup, lock_for_serving, restore};
pub use schema::MIGRATIONS;
pub use search::GENERATION as SEARCH_GENERATION;

use super::sql::{Dialect, Executor, Param, Row, bind_sqlite};
use super::{StoreError, StoreFuture, StoreResult, StoreStats};
use crate::model::MessageId;
use rusqlite::Connection;
use std::{
    path::Path,
    sync::{Arc, Mutex, mpsc},
};

/// This backend's executor (`../sql.rs`): the writer's connection, or a
/// reader's, where every statement completes at once.
pub(super) struct Sql<'c>(pub &'c Connection);

/// The most messages one write adds to the search index: the writer is
/// held for a few milliseconds at a time.
const INDEX_BATCH: u32 = 500;

/// The SQLite implementation of [`super::Store`].
pub struct SqliteStore {
    /// The queue of the writer thread; the thread ends when this is dropped.
    writer: Mutex<mpsc::Sender<writer::Job>>,
    /// The reader threads and their connections.
    readers: readers::Readers,
    /// A reader of its own for the one read every authenticated request
    /// makes (the credentials revision), run on the async worker: the
    /// hand-off to a reader thread and back costs more than the read.
    now: Mutex<Connection>,
    /// What the writer counts of its commits.
    stats: Arc<StoreStats>,
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::backend("a database query failed", error)
    }
}

impl SqliteStore {
    /// Brings the search index up to date, a batch per write.
    async fn index_pending(&self) -> StoreResult<()> {
        while self
            .write(|conn| search::index_batch(conn, INDEX_BATCH))
            .await?
            == u64::from(INDEX_BATCH)
        {}
        Ok(())
    }

    /// Opens (creating if needed) the database at `path` and brings its schema
    /// up to date. The CLI opens it this way too while a server runs on it.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        SqliteStore::open_with(path, Durability::default())
    }

    /// As [`SqliteStore::open`], with commits synced as `durability` says.
    pub fn open_with(path: &Path, durability: Durability) -> StoreResult<SqliteStore> {
        create_private(path)?;
        let mut conn = schema::open_connection(path)?;
        durability.apply(&conn)?;
        schema::migrate(&mut conn)?;
        let (sender, receiver) = mpsc::channel();
        let stats = Arc::new(StoreStats::default());
        let counted = stats.clone();
        std::thread::Builder::new()
            .name("crosstalk-writer".into())
            .spawn(move || writer::run(conn, receiver, &counted))
            .map_err(|e| StoreError::backend("cannot start the database writer thread", e))?;
        let now = schema::open_connection(path)?;
        // Never waits for a lock on the async worker: see read_now.
        now.busy_timeout(std::time::Duration::ZERO)?;
        Ok(SqliteStore {
            writer: Mutex::new(sender),
            readers: readers::Readers::start(path)?,
            now: Mutex::new(now),
            stats,
        })
    }

    /// Runs `work` on the writer thread inside the next batch; resolves after
    /// the batch commits.
    fn write<T, F>(&self, work: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (job, answer) = writer::job(work);
        let sent = self.writer.lock().expect("writer queue lock").send(job);
        Box::pin(async move {
            let lost = || {
                StoreError::backend(
                    "the write was not committed",
                    "the database writer has stopped",
                )
            };
            sent.map_err(|_| lost())?;
            answer.await.map_err(|_| lost())?
        })
    }

    /// Runs a read of one row at once, on the async worker, if neither
    /// another worker nor the database would make it wait. In WAL mode a
    /// reader waits only while a checkpoint resets the log or the file is
    /// being recovered. Either way this gives None, and the caller reads on
    /// a reader thread, which may wait.
    fn read_now<T>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Option<StoreResult<T>> {
        let conn = self.now.try_lock().ok()?;
        match work(&conn) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                None
            }
            read => Some(read.map_err(StoreError::from)),
        }
    }

    /// Runs `work` on a reader thread's connection.
    fn read<T, F>(&self, work: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let answer = self.readers.run(work);
        Box::pin(async move {
            answer
                .await
                .map_err(|_| StoreError::backend("a database read did not finish", "it panicked"))?
        })
    }
}

/// The credentials' revision: bumped by every change of a live token
/// (people's and OAuth's), which the relay follows. The statement is
/// `statements::oauth::credentials_revision`'s, run here on the bare
/// connection: `read_now` must see SQLite's own busy error to fall back to
/// the reader threads.
fn credentials_revision(conn: &Connection) -> rusqlite::Result<u64> {
    Ok(conn
        .prepare_cached("SELECT value FROM revisions WHERE name = 'credentials'")?
        .query_row([], |row| row.get::<_, i64>(0))? as u64)
}

/// Creates the database file, and the folders it needs, readable by this
/// user only (0600, 0700), whatever the umask; makes an existing file so.
/// SQLite gives its `-wal` and `-shm` files the database file's mode.
/// Folders that already exist are left as they are: they may be shared.
fn create_private(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    create_folder(path)?;
    let denied = |e| StoreError::backend(format!("cannot create {}", path.display()), e);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(denied)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(denied)
}

/// Creates the folder of `path` (and its parents), 0700, if missing.
fn create_folder(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| {
                StoreError::backend(format!("cannot create the folder {}", parent.display()), e)
            })?;
    }
    Ok(())
}

impl Executor for Sql<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn exec(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<u64> {
        let mut statement = self.0.prepare_cached(sql)?;
        bind_sqlite(&mut statement, params)?;
        Ok(statement.raw_execute()? as u64)
    }

    async fn rows<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        mut read: impl FnMut(Row<'_>) -> StoreResult<T> + Send,
    ) -> StoreResult<Vec<T>> {
        let mut statement = self.0.prepare_cached(sql)?;
        bind_sqlite(&mut statement, params)?;
        let mut rows = statement.raw_query();
        let mut read_rows = Vec::new();
        while let Some(row) = rows.next()? {
            read_rows.push(read(Row::Sqlite(row))?);
        }
        Ok(read_rows)
    }

    /// Above the highest id ever given, even to a message since deleted.
    async fn next_message_id(&self) -> StoreResult<MessageId> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0), \
                            coalesce((SELECT max(id) FROM messages), 0)) + 1",
            )?
            .query_row([], |row| row.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_syncs_as_it_is_told_and_fully_by_default() {
        for (durability, synchronous) in [
            (Durability::default(), 2),
            (Durability::Full, 2),
            (Durability::Normal, 1),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open_with(&dir.path().join("relay.db"), durability).unwrap();
            let set = store.write(|conn| {
                Ok(conn.pragma_query_value(None, "synchronous", |row| row.get::<_, i64>(0))?)
            });
            assert_eq!(
                futures::executor::block_on(set).unwrap(),
                synchronous,
                "{durability:?}"
            );
        }
    }

    /// Many reads at once run `readers::most()` at a time, on as many
    /// threads, each on its own kept connection. Each read holds its turn
    /// a while, so that reads not held back would overlap: that is the
    /// case this fails on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_run_a_bounded_number_at_once_on_kept_connections() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("relay.db")).unwrap();
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let reads = (0..4 * readers::most()).map(|_| {
            let (running, most) = (running.clone(), most.clone());
            store.read(move |conn| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(20));
                running.fetch_sub(1, Ordering::SeqCst);
                // A row a read in the connection's own temporary table: a
                // kept connection counts every read its thread ran.
                conn.execute_batch(
                    "CREATE TEMP TABLE IF NOT EXISTS seen (n INTEGER); \
                     INSERT INTO seen VALUES (1);",
                )?;
                let seen: i64 =
                    conn.query_row("SELECT count(*) FROM seen", [], |row| row.get(0))?;
                Ok((std::thread::current().id(), seen))
            })
        });
        let ran: Vec<_> = futures::future::try_join_all(reads).await.unwrap();
        let most = most.load(Ordering::SeqCst);
        assert!((2..=readers::most()).contains(&most), "{most} at once");
        let mut by_thread = std::collections::HashMap::<_, Vec<i64>>::new();
        for (thread, seen) in ran {
            by_thread.entry(thread).or_default().push(seen);
        }
        let started = store.readers.started();
        assert!(
            by_thread.len() <= started && started <= readers::most(),
            "{started} started"
        );
        for (thread, mut seen) in by_thread {
            seen.sort_unstable();
            let each = (1..=seen.len() as i64).collect::<Vec<_>>();
            assert_eq!(seen, each, "{thread:?} reopened its connection");
        }
    }

    /// A read whose caller gave up before a thread took it is not run.
    #[tokio::test]
    async fn a_read_nobody_waits_for_is_skipped() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("relay.db")).unwrap();
        // Every thread held until `release` is dropped.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let holding: Vec<_> = (0..readers::most())
            .map(|_| {
                let held = held.clone();
                store.read(move |_| {
                    let _ = held.lock().unwrap().recv();
                    Ok(())
                })
            })
            .collect();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        drop(store.read(move |_| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        }));
        let after =
            store.read(|conn| Ok(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?));
        drop(release);
        futures::future::try_join_all(holding).await.unwrap();
        assert_eq!(after.await.unwrap(), 1);
        assert!(
            !ran.load(Ordering::SeqCst),
            "the read nobody waited for ran"
        );
    }

    /// A read that panics is answered with an error, and reads go on: no
    /// thread is lost to it.
    #[tokio::test]
    async fn a_read_that_panics_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("relay.db")).unwrap();
        let reads = async {
            for _ in 0..2 * readers::most() {
                let failed = store.read(|_| -> StoreResult<()> { panic!("a read that panics") });
                assert!(failed.await.is_err());
            }
            store
                .read(|conn| Ok(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?))
                .await
        };
        // Reads left to no thread would wait forever.
        let answered = tokio::time::timeout(std::time::Duration::from_secs(10), reads).await;
        assert_eq!(answered.expect("every read was taken").unwrap(), 1);
    }

    /// A statement run again, its values bound again, is not compiled
    /// again: not even one whose `LIMIT ?`, or a value compared with an
    /// index, the planner could have looked at.
    #[test]
    fn statements_are_not_compiled_again_for_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_connection(&dir.path().join("relay.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX t_b ON t (b, a); \
             INSERT INTO t (b) VALUES ('x'), ('x'), ('y');",
        )
        .unwrap();
        let sql = "SELECT a FROM t WHERE b = ?1 AND a > ?2 ORDER BY a LIMIT ?3";
        for since in 0..3 {
            let mut statement = conn.prepare_cached(sql).unwrap();
            let rows: Vec<i64> = statement
                .query_map(rusqlite::params!["x", since, 100], |row| row.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert_eq!(rows, (since + 1..=2).collect::<Vec<i64>>());
        }
        let statement = conn.prepare_cached(sql).unwrap();
        let again = statement.get_status(rusqlite::StatementStatus::RePrepare);
        assert_eq!(again, 0, "compiled again {again} times");
    }
}
