//! The SQLite store: one file, WAL mode, one writer thread with group commit,
//! and a small pool of reader connections used from the blocking pool.
//!
//! Writes are closures sent to the writer thread. It takes every write that
//! is waiting (up to [`MAX_BATCH`]), runs each inside its own savepoint of one
//! transaction, commits once, and only then answers each caller. So many
//! concurrent writers share one commit, a failed write undoes only itself, and
//! no caller hears of a write that might still be lost.

use super::{
    ChannelSummary, Conversation, Message, Millis, NewMessage, PersonRecord, Presence,
    RecipientCheck, Store, StoreError, StoreFuture, StoreResult, ThreadSummary,
};
use crate::relay::token::TokenHash;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};
use tokio::sync::oneshot;

/// The most writes committed together; bounds the latency a batch adds.
const MAX_BATCH: usize = 512;
/// Reader connections kept open between reads.
const MAX_IDLE_READERS: usize = 8;

/// The schema, one step per version. A database is brought up to the last
/// step at open; a step never changes once released.
const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE people (
    id          INTEGER PRIMARY KEY,
    handle      TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    token_hash  BLOB NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
-- Presence is keyed by handle, not by person, so identities from the
-- environment (RELAY_PARTICIPANTS) have a status and a last-seen time too.
CREATE TABLE presence (
    handle        TEXT PRIMARY KEY,
    status        TEXT NOT NULL DEFAULT '',
    status_at     INTEGER,
    last_seen_at  INTEGER
) WITHOUT ROWID;
CREATE TABLE threads (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  INTEGER NOT NULL
);
-- AUTOINCREMENT: ids never go back, even after the newest rows expire,
-- so since_id cursors stay valid.
CREATE TABLE messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id   INTEGER REFERENCES threads(id) ON DELETE CASCADE,
    channel     TEXT,
    sender      TEXT NOT NULL,
    recipient   TEXT,
    type        TEXT NOT NULL,
    body        TEXT NOT NULL,
    reply_to    INTEGER,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    CHECK ((thread_id IS NULL) <> (channel IS NULL))
);
CREATE INDEX messages_by_thread ON messages(thread_id, id) WHERE thread_id IS NOT NULL;
CREATE INDEX messages_by_channel ON messages(channel, id) WHERE channel IS NOT NULL;
CREATE INDEX messages_by_expiry ON messages(expires_at);
-- One row per message addressed to a person; claimed_at is set exactly once.
CREATE TABLE inbox (
    recipient   TEXT NOT NULL,
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    claimed_at  INTEGER,
    PRIMARY KEY (recipient, message_id)
) WITHOUT ROWID;
CREATE INDEX inbox_unclaimed ON inbox(recipient, message_id) WHERE claimed_at IS NULL;
"#];

const MESSAGE_COLUMNS: &str =
    "id, thread_id, channel, sender, recipient, type, body, reply_to, created_at, expires_at";

/// A write: runs on the writer's connection, says whether it succeeded (so
/// the writer can undo it alone), and leaves what to do after the commit.
type Job = Box<dyn FnOnce(&Connection) -> (bool, Finish) + Send>;
/// What a job leaves to do once its batch has committed (or failed to).
type Finish = Box<dyn FnOnce(Result<(), &StoreError>) + Send>;

/// The SQLite implementation of [`Store`].
pub struct SqliteStore {
    /// Where the database lives, for opening more reader connections.
    path: PathBuf,
    /// The queue of the writer thread; the thread ends when this is dropped.
    writer: Mutex<mpsc::Sender<Job>>,
    /// Idle reader connections, reused from the blocking pool.
    readers: Arc<Mutex<Vec<Connection>>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema
    /// up to date. Also used by the CLI while a server runs on the same file.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        let mut conn = open_connection(path)?;
        migrate(&mut conn)?;
        let (sender, receiver) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("crosstalk-writer".into())
            .spawn(move || run_writer(conn, receiver))
            .map_err(|e| StoreError::Backend(format!("cannot start the writer thread: {e}")))?;
        Ok(SqliteStore {
            path: path.to_owned(),
            writer: Mutex::new(sender),
            readers: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Runs `work` on the writer thread inside the next batch; resolves after
    /// the batch commits.
    fn write<T, F>(&self, work: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let outcome = work(conn);
            let succeeded = outcome.is_ok();
            let finish: Finish = Box::new(move |committed: Result<(), &StoreError>| {
                let outcome = match (outcome, committed) {
                    (Ok(value), Ok(())) => Ok(value),
                    (Err(error), _) => Err(error),
                    (Ok(_), Err(error)) => Err(StoreError::Backend(error.to_string())),
                };
                let _ = reply.send(outcome);
            });
            (succeeded, finish)
        });
        let sent = self.writer.lock().expect("writer queue lock").send(job);
        Box::pin(async move {
            let lost = || StoreError::Backend("the write was not committed".into());
            sent.map_err(|_| lost())?;
            answer.await.map_err(|_| lost())?
        })
    }

    /// Runs `work` on a reader connection in the blocking pool.
    fn read<T, F>(&self, work: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let readers = self.readers.clone();
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let idle = readers.lock().expect("reader pool lock").pop();
                let conn = match idle {
                    Some(conn) => conn,
                    None => open_connection(&path)?,
                };
                let outcome = work(&conn);
                let mut pool = readers.lock().expect("reader pool lock");
                if pool.len() < MAX_IDLE_READERS {
                    pool.push(conn);
                }
                outcome
            })
            .await
            .map_err(|e| StoreError::Backend(format!("a read task failed: {e}")))?
        })
    }
}

fn open_connection(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // WAL lets readers run beside the writer; NORMAL syncs at checkpoints,
    // which in WAL mode keeps the database consistent on power loss and
    // loses at most the last moment of commits.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> StoreResult<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "the database has schema version {version}, newer than this crosstalk knows ({}); \
             run a newer crosstalk",
            MIGRATIONS.len()
        )));
    }
    for step in &MIGRATIONS[version..] {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len())?;
    tx.commit()?;
    Ok(())
}

/// The writer thread: batch, commit once, then answer everyone in the batch.
fn run_writer(conn: Connection, queue: mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
            tracing::error!(%error, "cannot begin a write transaction");
            // Dropping the jobs unrun answers each caller with an error.
            continue;
        }
        let mut finishes = Vec::with_capacity(batch.len());
        for job in batch {
            // Each job in its own savepoint, so a failing one undoes only itself.
            if let Err(error) = conn.execute_batch("SAVEPOINT job") {
                tracing::error!(%error, "cannot open a write's savepoint");
                continue; // dropped unrun: its caller gets an error
            }
            let (succeeded, finish) = job(&conn);
            let closed = if succeeded {
                conn.execute_batch("RELEASE job")
            } else {
                conn.execute_batch("ROLLBACK TO job; RELEASE job")
            };
            if let Err(error) = closed {
                tracing::error!(%error, "cannot close a write's savepoint");
            }
            finishes.push(finish);
        }
        let committed = conn.execute_batch("COMMIT").map_err(StoreError::from);
        if let Err(error) = &committed {
            tracing::error!(%error, "a group commit failed");
            let _ = conn.execute_batch("ROLLBACK");
        }
        for finish in finishes {
            finish(committed.as_ref().map(|_| ()));
        }
    }
}

fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: row.get(0)?,
        thread_id: row.get(1)?,
        channel: row.get(2)?,
        from: row.get(3)?,
        to: row.get(4)?,
        kind: row.get(5)?,
        body: row.get(6)?,
        reply_to: row.get(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
    })
}

fn person_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PersonRecord> {
    Ok(PersonRecord {
        handle: row.get(0)?,
        name: row.get(1)?,
        created_at: row.get(2)?,
        last_seen_at: row.get(3)?,
        revoked_at: row.get(4)?,
    })
}

const PERSON_COLUMNS: &str = "p.handle, p.name, p.created_at, s.last_seen_at, p.revoked_at \
     FROM people p LEFT JOIN presence s ON s.handle = p.handle";

fn check_recipient(conn: &Connection, recipient: &str, check: RecipientCheck) -> StoreResult<()> {
    let RecipientCheck::LivePerson { or_empty_store } = check else {
        return Ok(());
    };
    let live = conn
        .prepare_cached("SELECT 1 FROM people WHERE handle = ?1 AND revoked_at IS NULL")?
        .exists([recipient])?;
    if live
        || (or_empty_store
            && !conn
                .prepare_cached("SELECT 1 FROM people LIMIT 1")?
                .exists([])?)
    {
        return Ok(());
    }
    Err(StoreError::NotFound(format!(
        "there is nobody called {recipient} on this relay"
    )))
}

fn insert_message(conn: &Connection, new: NewMessage) -> StoreResult<Message> {
    if let Some(recipient) = &new.to {
        check_recipient(conn, recipient, new.check_to)?;
    }
    let (thread_id, channel) = match new.conversation {
        Conversation::NewThread => {
            conn.prepare_cached("INSERT INTO threads (created_at) VALUES (?1)")?
                .execute([new.created_at])?;
            (Some(conn.last_insert_rowid()), None)
        }
        Conversation::Thread(id) => {
            let exists = conn
                .prepare_cached(
                    "SELECT 1 FROM messages WHERE thread_id = ?1 AND expires_at > ?2 LIMIT 1",
                )?
                .exists(params![id, new.created_at])?;
            if !exists {
                return Err(StoreError::NotFound(format!("there is no thread {id}")));
            }
            (Some(id), None)
        }
        Conversation::Channel(name) => (None, Some(name)),
    };
    if let Some(reply_to) = new.reply_to {
        let same_place = conn
            .prepare_cached(
                "SELECT 1 FROM messages WHERE id = ?1 AND expires_at > ?2 \
                 AND thread_id IS ?3 AND channel IS ?4",
            )?
            .exists(params![reply_to, new.created_at, thread_id, channel])?;
        if !same_place {
            return Err(StoreError::NotFound(format!(
                "reply_to {reply_to} is not a live message of this conversation"
            )));
        }
    }
    let id: i64 = conn
        .prepare_cached(
            "INSERT INTO messages (thread_id, channel, sender, recipient, type, body, reply_to, \
             created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id",
        )?
        .query_row(
            params![
                thread_id,
                channel,
                new.from,
                new.to,
                new.kind,
                new.body,
                new.reply_to,
                new.created_at,
                new.expires_at
            ],
            |row| row.get(0),
        )?;
    if let Some(recipient) = &new.to {
        conn.prepare_cached("INSERT INTO inbox (recipient, message_id) VALUES (?1, ?2)")?
            .execute(params![recipient, id])?;
    }
    Ok(Message {
        id,
        thread_id,
        channel,
        from: new.from,
        to: new.to,
        kind: new.kind,
        body: new.body,
        reply_to: new.reply_to,
        created_at: new.created_at,
        expires_at: new.expires_at,
    })
}

fn claim_inbox(
    conn: &Connection,
    recipient: &str,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    // The writer runs one job at a time, and the UPDATE both finds and marks
    // the rows, so no two claims can return the same message.
    let ids: Vec<i64> = conn
        .prepare_cached(
            "UPDATE inbox SET claimed_at = ?2 WHERE recipient = ?1 AND message_id IN ( \
                 SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
                 WHERE i.recipient = ?1 AND i.claimed_at IS NULL AND m.expires_at > ?2 \
                 ORDER BY i.message_id LIMIT ?3) \
             RETURNING message_id",
        )?
        .query_map(params![recipient, now, limit], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (SELECT value FROM json_each(?1)) \
         ORDER BY id"
    ))?;
    let list = serde_json::to_string(&ids).expect("ids serialize");
    let messages = statement
        .query_map([list], message_from_row)?
        .collect::<Result<_, _>>()?;
    Ok(messages)
}

impl Store for SqliteStore {
    fn person_by_token(&self, hash: TokenHash) -> StoreFuture<'_, Option<PersonRecord>> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {PERSON_COLUMNS} WHERE p.token_hash = ?1 AND p.revoked_at IS NULL"
                ))?
                .query_row([&hash.0[..]], person_from_row)
                .optional()?)
        })
    }

    fn has_people(&self) -> StoreFuture<'_, bool> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM people LIMIT 1")?
                .exists([])?)
        })
    }

    fn people(&self) -> StoreFuture<'_, Vec<PersonRecord>> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached(&format!("SELECT {PERSON_COLUMNS} ORDER BY p.id"))?
                .query_map([], person_from_row)?
                .collect::<Result<_, _>>()?)
        })
    }

    fn add_person(
        &self,
        handle: &str,
        name: &str,
        hash: TokenHash,
        now: Millis,
    ) -> StoreFuture<'_, ()> {
        let (handle, name) = (handle.to_owned(), name.to_owned());
        self.write(move |conn| {
            let taken = conn
                .prepare_cached("SELECT 1 FROM people WHERE handle = ?1")?
                .exists([&handle])?;
            if taken {
                return Err(StoreError::Conflict(format!(
                    "{handle} is already taken (revoked handles stay taken, so old messages keep their author)"
                )));
            }
            conn.prepare_cached(
                "INSERT INTO people (handle, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![handle, name, &hash.0[..], now])?;
            Ok(())
        })
    }

    fn rotate_token(&self, handle: &str, hash: TokenHash) -> StoreFuture<'_, ()> {
        let handle = handle.to_owned();
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE people SET token_hash = ?2 WHERE handle = ?1 AND revoked_at IS NULL",
                )?
                .execute(params![handle, &hash.0[..]])?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!(
                    "there is no active person {handle}"
                )));
            }
            Ok(())
        })
    }

    fn revoke_person(&self, handle: &str, now: Millis) -> StoreFuture<'_, ()> {
        let handle = handle.to_owned();
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE people SET revoked_at = ?2 WHERE handle = ?1 AND revoked_at IS NULL",
                )?
                .execute(params![handle, now])?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!(
                    "there is no active person {handle}"
                )));
            }
            Ok(())
        })
    }

    fn set_status(&self, handle: &str, status: &str, now: Millis) -> StoreFuture<'_, ()> {
        let (handle, status) = (handle.to_owned(), status.to_owned());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO presence (handle, status, status_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (handle) DO UPDATE SET status = ?2, status_at = ?3",
            )?
            .execute(params![handle, status, now])?;
            Ok(())
        })
    }

    fn record_seen(&self, seen: Vec<(String, Millis)>) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            let mut statement = conn.prepare_cached(
                "INSERT INTO presence (handle, last_seen_at) VALUES (?1, ?2) \
                 ON CONFLICT (handle) DO UPDATE SET last_seen_at = max(coalesce(last_seen_at, 0), ?2)",
            )?;
            for (handle, at) in seen {
                statement.execute(params![handle, at])?;
            }
            Ok(())
        })
    }

    fn presence(&self) -> StoreFuture<'_, Vec<Presence>> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached("SELECT handle, status, last_seen_at FROM presence")?
                .query_map([], |row| {
                    Ok(Presence {
                        handle: row.get(0)?,
                        status: row.get(1)?,
                        last_seen_at: row.get(2)?,
                    })
                })?
                .collect::<Result<_, _>>()?)
        })
    }

    fn insert_message(&self, message: NewMessage) -> StoreFuture<'_, Message> {
        self.write(move |conn| insert_message(conn, message))
    }

    fn claim_inbox(
        &self,
        recipient: &str,
        now: Millis,
        limit: u32,
    ) -> StoreFuture<'_, Vec<Message>> {
        let recipient = recipient.to_owned();
        self.write(move |conn| claim_inbox(conn, &recipient, now, limit))
    }

    fn thread(&self, thread_id: i64, now: Millis) -> StoreFuture<'_, Vec<Message>> {
        self.read(move |conn| {
            let messages: Vec<Message> = conn
                .prepare_cached(&format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages \
                     WHERE thread_id = ?1 AND expires_at > ?2 ORDER BY id"
                ))?
                .query_map(params![thread_id, now], message_from_row)?
                .collect::<Result<_, _>>()?;
            if messages.is_empty() {
                return Err(StoreError::NotFound(format!(
                    "there is no thread {thread_id}"
                )));
            }
            Ok(messages)
        })
    }

    fn channel_messages(
        &self,
        channel: &str,
        since_id: i64,
        limit: u32,
        now: Millis,
    ) -> StoreFuture<'_, Vec<Message>> {
        let channel = channel.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages \
                     WHERE channel = ?1 AND id > ?2 AND expires_at > ?3 ORDER BY id LIMIT ?4"
                ))?
                .query_map(params![channel, since_id, now, limit], message_from_row)?
                .collect::<Result<_, _>>()?)
        })
    }

    fn channels(&self, now: Millis) -> StoreFuture<'_, Vec<ChannelSummary>> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT channel, count(*), max(id), max(created_at) FROM messages \
                     WHERE channel IS NOT NULL AND expires_at > ?1 \
                     GROUP BY channel ORDER BY max(id) DESC",
                )?
                .query_map([now], |row| {
                    Ok(ChannelSummary {
                        name: row.get(0)?,
                        message_count: row.get::<_, i64>(1)? as u64,
                        last_id: row.get(2)?,
                        last_activity: row.get(3)?,
                    })
                })?
                .collect::<Result<_, _>>()?)
        })
    }

    fn threads(&self, now: Millis, limit: u32) -> StoreFuture<'_, Vec<ThreadSummary>> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT m.thread_id, count(*), max(m.id), max(m.created_at), \
                            group_concat(m.sender, ','), group_concat(coalesce(m.recipient, ''), ','), \
                            (SELECT f.body FROM messages f WHERE f.thread_id = m.thread_id \
                             AND f.expires_at > ?1 ORDER BY f.id LIMIT 1) \
                     FROM messages m WHERE m.thread_id IS NOT NULL AND m.expires_at > ?1 \
                     GROUP BY m.thread_id ORDER BY max(m.id) DESC LIMIT ?2",
                )?
                .query_map(params![now, limit], |row| {
                    let senders: String = row.get(4)?;
                    let recipients: String = row.get(5)?;
                    let mut people: Vec<String> = senders
                        .split(',')
                        .chain(recipients.split(','))
                        .filter(|h| !h.is_empty())
                        .map(str::to_owned)
                        .collect();
                    people.sort();
                    people.dedup();
                    Ok(ThreadSummary {
                        id: row.get(0)?,
                        people,
                        message_count: row.get::<_, i64>(1)? as u64,
                        last_id: row.get(2)?,
                        last_activity: row.get(3)?,
                        opening: row.get(6)?,
                    })
                })?
                .collect::<Result<_, _>>()?)
        })
    }

    fn purge_expired(&self, now: Millis) -> StoreFuture<'_, u64> {
        self.write(move |conn| {
            let deleted = conn
                .prepare_cached("DELETE FROM messages WHERE expires_at <= ?1")?
                .execute([now])?;
            conn.prepare_cached(
                "DELETE FROM threads WHERE NOT EXISTS \
                 (SELECT 1 FROM messages m WHERE m.thread_id = threads.id)",
            )?
            .execute([])?;
            Ok(deleted as u64)
        })
    }
}
