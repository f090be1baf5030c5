//! The schema, and how a connection is opened and brought up to date.
//!
//! Durability: WAL, synced as [`Durability`] says. Either way a commit is in
//! the WAL before its caller hears of it, so a crash of the process loses
//! nothing that was acknowledged, and the database is never left
//! inconsistent.

use super::StoreError;
use crate::store::Durability;
use rusqlite::{Connection, OpenFlags, OptionalExtension, config::DbConfig};
use std::{path::Path, time::Duration};

impl Durability {
    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }

    /// Set on the connection that commits: the writer's.
    pub(super) fn apply(self, conn: &Connection) -> Result<(), StoreError> {
        conn.pragma_update(None, "synchronous", self.pragma())
            .map_err(|e| StoreError::backend("cannot set how commits are synced", e))
    }
}

/// The schema, one step per version. A database is brought up to the last
/// step at open; a step never changes once released (the upgrade test
/// builds a database from the first step alone).
pub const MIGRATIONS: &[&str] = &[
    r#"
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
"#,
    r#"
-- A counter that moves whenever anyone is added, rotated or revoked, by
-- whichever process does it (the CLI writes while a server runs): servers
-- watch it to refresh the tokens they hold in memory and to end what a
-- revoked or replaced token holds open.
CREATE TABLE revisions (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO revisions (name, value) VALUES ('credentials', 0);
CREATE TRIGGER people_added AFTER INSERT ON people BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
CREATE TRIGGER people_changed AFTER UPDATE ON people BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
CREATE TRIGGER people_removed AFTER DELETE ON people BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
"#,
    r#"
-- Overviews kept as messages commit (summaries.rs), so listing channels
-- and threads reads a few rows by index whatever the history holds.
CREATE TABLE channel_summaries (
    channel        TEXT PRIMARY KEY,
    message_count  INTEGER NOT NULL,
    last_id        INTEGER NOT NULL,
    last_activity  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX channel_summaries_by_last ON channel_summaries(last_id);
CREATE TABLE thread_summaries (
    thread_id      INTEGER PRIMARY KEY REFERENCES threads(id) ON DELETE CASCADE,
    message_count  INTEGER NOT NULL,
    first_id       INTEGER NOT NULL,
    opening        TEXT NOT NULL,
    last_id        INTEGER NOT NULL,
    last_activity  INTEGER NOT NULL
);
CREATE INDEX thread_summaries_by_last ON thread_summaries(last_id);
CREATE TABLE thread_people (
    thread_id  INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    handle     TEXT NOT NULL,
    PRIMARY KEY (thread_id, handle)
) WITHOUT ROWID;
-- Deleting a message deletes its inbox rows, and deleting a thread its
-- messages (ON DELETE CASCADE). SQLite looks the children up with an index
-- only if a full one exists (a partial index does not serve): without
-- these, each delete would scan the whole inbox or the whole history.
CREATE INDEX inbox_by_message ON inbox(message_id);
DROP INDEX messages_by_thread;
CREATE INDEX messages_by_thread ON messages(thread_id, id);
-- What each person has read of each conversation ('c:NAME' or 't:ID').
CREATE TABLE last_read (
    handle        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    last_id       INTEGER NOT NULL,
    PRIMARY KEY (handle, conversation)
) WITHOUT ROWID;
-- The summaries of what a database holds already.
INSERT INTO channel_summaries (channel, message_count, last_id, last_activity)
    SELECT channel, count(*), max(id), max(created_at) FROM messages
    WHERE channel IS NOT NULL GROUP BY channel;
INSERT INTO thread_summaries (thread_id, message_count, first_id, opening, last_id, last_activity)
    SELECT m.thread_id, count(*), min(m.id),
           (SELECT f.body FROM messages f WHERE f.thread_id = m.thread_id ORDER BY f.id LIMIT 1),
           max(m.id), max(m.created_at)
    FROM messages m WHERE m.thread_id IS NOT NULL GROUP BY m.thread_id;
INSERT OR IGNORE INTO thread_people (thread_id, handle)
    SELECT thread_id, sender FROM messages WHERE thread_id IS NOT NULL
    UNION SELECT thread_id, recipient FROM messages
    WHERE thread_id IS NOT NULL AND recipient IS NOT NULL;
"#,
    r#"
-- How many of a thread's messages each of its people sent or received (a
-- note to oneself counted once), so the purge knows who is left in a
-- thread from what it deleted, without reading what is left.
ALTER TABLE thread_people ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
UPDATE thread_people SET message_count = (
    SELECT count(*) FROM messages m WHERE m.thread_id = thread_people.thread_id
    AND (m.sender = thread_people.handle OR m.recipient = thread_people.handle));
"#,
    r#"
-- Full-text search over bodies (search.rs): an index of the messages
-- table's own text. It is brought up to date in batches (before each
-- search, and by the maintenance), not as each message commits: FTS5 writes
-- a segment per transaction, which would cost every small group commit a
-- multiple of the message itself. `search_state` says how far it has got;
-- a message deleted before it was indexed has nothing to take out.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE search_state (
    indexed_to  INTEGER NOT NULL
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
INSERT INTO search_state (indexed_to) SELECT coalesce(max(id), 0) FROM messages;
CREATE TRIGGER messages_fts_removed AFTER DELETE ON messages
WHEN old.id <= (SELECT indexed_to FROM search_state) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
-- Keys the relay keeps for itself: 'page' signs the team page's forms.
CREATE TABLE keys (
    name   TEXT PRIMARY KEY,
    value  BLOB NOT NULL
) WITHOUT ROWID;
"#,
    r#"
-- MCP sessions, so a client's session survives a restart (sessions.rs):
-- rmcp's state (the client's initialize parameters), and the hash of the
-- token that opened it, which alone may use it again.
CREATE TABLE mcp_sessions (
    id         TEXT PRIMARY KEY,
    owner      BLOB,
    state      TEXT NOT NULL,
    last_used  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX mcp_sessions_by_owner ON mcp_sessions(owner);
-- A revoked or replaced token's sessions end with it, whoever changes it
-- (the CLI writes from another process).
CREATE TRIGGER people_sessions_ended AFTER UPDATE OF token_hash, revoked_at ON people BEGIN
    DELETE FROM mcp_sessions WHERE owner = old.token_hash;
END;
"#,
    r#"
-- Fewer writes per message, and a purge that never cascades: a thread's
-- summary lives in its own row instead of two tables beside it (its
-- people as a JSON object of how many of its messages each sent or
-- received, its opening read through first_id instead of copied).
-- Messages and the inbox lose their foreign keys: the purge deletes a
-- message's inbox row itself (it knows the recipient) and a thread only
-- once it has no message left, and a cascade cost about 100 µs a thread,
-- sometimes tens of milliseconds. Both tables are rebuilt for it (the
-- migration runs with foreign keys off, and checks them before it commits).
ALTER TABLE threads ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN first_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN last_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN last_activity INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN people TEXT NOT NULL DEFAULT '{}';
UPDATE threads SET (message_count, first_id, last_id, last_activity) =
    (SELECT message_count, first_id, last_id, last_activity FROM thread_summaries
     WHERE thread_id = threads.id)
WHERE id IN (SELECT thread_id FROM thread_summaries);
UPDATE threads SET people =
    (SELECT json_group_object(handle, message_count) FROM thread_people
     WHERE thread_id = threads.id)
WHERE id IN (SELECT thread_id FROM thread_people);
DELETE FROM threads WHERE id NOT IN (SELECT thread_id FROM thread_summaries)
    AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = threads.id);
DROP TABLE thread_people;
DROP TABLE thread_summaries;
CREATE INDEX threads_by_last ON threads(last_id);
CREATE TABLE inbox_kept (
    recipient   TEXT NOT NULL,
    message_id  INTEGER NOT NULL,
    claimed_at  INTEGER,
    PRIMARY KEY (recipient, message_id)
) WITHOUT ROWID;
INSERT INTO inbox_kept SELECT recipient, message_id, claimed_at FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_kept RENAME TO inbox;
CREATE INDEX inbox_unclaimed ON inbox(recipient, message_id) WHERE claimed_at IS NULL;
CREATE TABLE messages_kept (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id   INTEGER,
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
INSERT INTO messages_kept SELECT id, thread_id, channel, sender, recipient, type, body,
    reply_to, created_at, expires_at FROM messages;
-- Ids never go back: the sequence carries over, even past purged messages.
DELETE FROM sqlite_sequence WHERE name = 'messages_kept';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'messages_kept', seq FROM sqlite_sequence WHERE name = 'messages';
DROP TRIGGER messages_fts_removed;
DROP TABLE messages;
ALTER TABLE messages_kept RENAME TO messages;
CREATE INDEX messages_by_thread ON messages(thread_id, id) WHERE thread_id IS NOT NULL;
CREATE INDEX messages_by_channel ON messages(channel, id) WHERE channel IS NOT NULL;
CREATE INDEX messages_by_expiry ON messages(expires_at);
CREATE TRIGGER messages_fts_removed AFTER DELETE ON messages
WHEN old.id <= (SELECT indexed_to FROM search_state) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
"#,
    r#"
-- The search index in generations (search.rs): one FTS5 table per range
-- of ids, made as messages are indexed and dropped whole once none of its
-- messages is left, instead of one index that every purged message is
-- taken out of (which held the writer for 100 ms and more). The old index
-- goes; the messages are indexed again in batches, from the first, by the
-- maintenance and before the first search.
DROP TRIGGER messages_fts_removed;
DROP TABLE messages_fts;
CREATE TABLE search_generations (
    number  INTEGER PRIMARY KEY
);
UPDATE search_state SET indexed_to = 0;
"#,
    r#"
-- Bytes kept under a name (Store::kept), as the PostgreSQL store keeps
-- them; a SQLite relay keeps its ACME cache in RELAY_CACHE_DIR instead.
CREATE TABLE kept (
    name   TEXT PRIMARY KEY,
    value  BLOB NOT NULL
) WITHOUT ROWID;
"#,
    r#"
-- The delivery ledger (relay/push.rs): a claimed message was read; a push
-- is a lease (lease_until, push_holder: the stream offered it last), never
-- a hand-over; a reply answers. Each time is set once.
ALTER TABLE inbox RENAME COLUMN claimed_at TO read_at;
ALTER TABLE inbox ADD COLUMN pushed_at INTEGER;
ALTER TABLE inbox ADD COLUMN answered_at INTEGER;
ALTER TABLE inbox ADD COLUMN lease_until INTEGER;
ALTER TABLE inbox ADD COLUMN push_holder INTEGER;
ALTER TABLE inbox ADD COLUMN offers INTEGER NOT NULL DEFAULT 0;
DROP INDEX inbox_unclaimed;
CREATE INDEX inbox_unread ON inbox(recipient, message_id) WHERE read_at IS NULL;
"#,
    r#"
-- People in the loop (relay/attention.rs). notified_at: when an unread
-- message was brought to its person (or let go without telling them), set
-- once by the relay that claims it. Messages from before notifications
-- existed are not brought up now: they count as handled at time 0.
ALTER TABLE inbox ADD COLUMN notified_at INTEGER;
UPDATE inbox SET notified_at = 0 WHERE read_at IS NULL AND answered_at IS NULL;
CREATE INDEX inbox_unnotified ON inbox(message_id)
    WHERE read_at IS NULL AND answered_at IS NULL AND notified_at IS NULL;
-- A person's choices; no row: the defaults. after_ms NULL: never.
CREATE TABLE notify_settings (
    handle             TEXT PRIMARY KEY,
    after_ms           INTEGER,
    at_once_when_away  INTEGER NOT NULL,
    webhook            TEXT,
    webhook_format     TEXT NOT NULL
) WITHOUT ROWID;
-- The steps people's agents asked them to allow, and their answers: kept
-- a while as the person's audit trail. withheld: the kinds of secret
-- masked in the input preview, one a line, or, with an empty preview, the
-- kind that withheld it whole (model::Preview::to_columns).
CREATE TABLE approvals (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    handle         TEXT NOT NULL,
    request_id     TEXT NOT NULL,
    tool_name      TEXT NOT NULL,
    description    TEXT NOT NULL,
    input_preview  TEXT NOT NULL,
    withheld       TEXT,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    behavior       TEXT,
    answered_at    INTEGER
);
CREATE INDEX approvals_by_person ON approvals(handle, id);
CREATE INDEX approvals_by_age ON approvals(created_at);
-- Browsers people asked to be notified on (Web Push): one row per push
-- endpoint, the person who subscribed it last, and its keys.
CREATE TABLE push_devices (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    handle      TEXT NOT NULL,
    endpoint    TEXT NOT NULL UNIQUE,
    p256dh      BLOB NOT NULL,
    auth        BLOB NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX push_devices_by_person ON push_devices(handle);
"#,
    r#"
-- OAuth (relay/oauth/). Codes and tokens are kept only as SHA-256
-- hashes. A client registered by DCR; one known by its metadata document
-- is fetched, never kept. used_at: when a grant was last made for it.
CREATE TABLE oauth_clients (
    client_id      TEXT PRIMARY KEY,
    name           TEXT,
    redirect_uris  TEXT NOT NULL,
    registered_at  INTEGER NOT NULL,
    used_at        INTEGER
) WITHOUT ROWID;
-- An authorization code, single-use: used_at set when redeemed, grant_id
-- the grant made from it (ended if the code comes back).
CREATE TABLE oauth_codes (
    hash          BLOB PRIMARY KEY,
    handle        TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    client_name   TEXT NOT NULL,
    redirect_uri  TEXT NOT NULL,
    challenge     TEXT NOT NULL,
    resource      TEXT NOT NULL,
    scope         TEXT NOT NULL,
    expires_at    INTEGER NOT NULL,
    used_at       INTEGER,
    grant_id      INTEGER
) WITHOUT ROWID;
CREATE TABLE oauth_grants (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    handle        TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    client_name   TEXT NOT NULL,
    redirect_uri  TEXT NOT NULL,
    scope         TEXT NOT NULL,
    resource      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    used_at       INTEGER NOT NULL
);
CREATE INDEX oauth_grants_by_person ON oauth_grants(handle);
-- A grant's tokens: access tokens, and refresh tokens (used_at set once
-- rotated; presented again, the grant ends).
CREATE TABLE oauth_tokens (
    hash        BLOB PRIMARY KEY,
    grant_id    INTEGER NOT NULL,
    refresh     INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens(grant_id);
-- An access token made or a grant ended moves the credentials revision, so
-- every relay reloads what it holds and ends what an ended grant held open.
CREATE TRIGGER oauth_tokens_added AFTER INSERT ON oauth_tokens BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
CREATE TRIGGER oauth_grants_removed AFTER DELETE ON oauth_grants BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
"#,
    r#"
-- A grant's tokens in its own row, so that what the relays reload is a
-- row a grant however often it was refreshed (rules::refresh_grant): its
-- one access token (a refresh replaces it, and the one before stops
-- working at once), its current refresh token, the one that it replaced
-- (taken again as a retry until previous_until), the family every refresh
-- token of the grant shares (any other of its tokens presented ends the
-- grant), and how many times it was refreshed. Used refresh tokens are
-- not kept, nor superseded access tokens: a grant keeps its newest of
-- each.
ALTER TABLE oauth_grants ADD COLUMN family BLOB;
ALTER TABLE oauth_grants ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oauth_grants ADD COLUMN refresh_hash BLOB;
ALTER TABLE oauth_grants ADD COLUMN refresh_expires INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oauth_grants ADD COLUMN previous_hash BLOB;
ALTER TABLE oauth_grants ADD COLUMN previous_until INTEGER NOT NULL DEFAULT 0;
-- The refresh token a retry superseded: good until it or the current one
-- is used (a client whose two answers raced may keep either).
ALTER TABLE oauth_grants ADD COLUMN sibling_hash BLOB;
ALTER TABLE oauth_grants ADD COLUMN access_hash BLOB;
ALTER TABLE oauth_grants ADD COLUMN access_expires INTEGER NOT NULL DEFAULT 0;
UPDATE oauth_grants SET (refresh_hash, refresh_expires) =
    (SELECT t.hash, t.expires_at FROM oauth_tokens t
     WHERE t.grant_id = oauth_grants.id AND t.refresh AND t.used_at IS NULL
     ORDER BY t.expires_at DESC LIMIT 1)
WHERE id IN (SELECT grant_id FROM oauth_tokens WHERE refresh AND used_at IS NULL);
UPDATE oauth_grants SET (access_hash, access_expires) =
    (SELECT t.hash, t.expires_at FROM oauth_tokens t
     WHERE t.grant_id = oauth_grants.id AND NOT t.refresh
     ORDER BY t.expires_at DESC LIMIT 1)
WHERE id IN (SELECT grant_id FROM oauth_tokens WHERE NOT refresh);
-- A grant with no refresh token left holds nothing.
DELETE FROM oauth_grants WHERE refresh_hash IS NULL;
DROP TABLE oauth_tokens;
CREATE UNIQUE INDEX oauth_grants_by_refresh ON oauth_grants(refresh_hash);
CREATE INDEX oauth_grants_by_previous ON oauth_grants(previous_hash);
CREATE INDEX oauth_grants_by_sibling ON oauth_grants(sibling_hash);
CREATE UNIQUE INDEX oauth_grants_by_access ON oauth_grants(access_hash);
CREATE UNIQUE INDEX oauth_grants_by_family ON oauth_grants(family);
CREATE INDEX oauth_grants_by_expiry ON oauth_grants(refresh_expires);
-- A grant made or refreshed moves the credentials revision (as ending one
-- does), so every relay holds its new access token and drops the old.
CREATE TRIGGER oauth_grants_added AFTER INSERT ON oauth_grants BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
CREATE TRIGGER oauth_grants_refreshed AFTER UPDATE OF access_hash ON oauth_grants
WHEN old.access_hash IS NOT new.access_hash BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
END;
"#,
    r#"
-- The path that last brought a message to its recipient's agent
-- (model::Via, by name): set by each offer and by a claim.
ALTER TABLE inbox ADD COLUMN via TEXT;
"#,
    r#"
-- What a message expects of its recipient (model::Expects by name; NULL
-- for nothing), by when, their acknowledgement, and when it came back to
-- its sender overdue.
ALTER TABLE inbox ADD COLUMN expects TEXT;
ALTER TABLE inbox ADD COLUMN due_at INTEGER;
ALTER TABLE inbox ADD COLUMN ack_result TEXT;
ALTER TABLE inbox ADD COLUMN ack_note TEXT;
ALTER TABLE inbox ADD COLUMN acked_at INTEGER;
ALTER TABLE inbox ADD COLUMN overdue_at INTEGER;
CREATE INDEX inbox_owed ON inbox(recipient, message_id)
    WHERE expects IS NOT NULL AND answered_at IS NULL AND acked_at IS NULL;
CREATE INDEX inbox_due ON inbox(due_at)
    WHERE due_at IS NOT NULL AND overdue_at IS NULL AND answered_at IS NULL
      AND acked_at IS NULL;
-- Claims on work: `what` as given, `repo` normalised ('' for none).
CREATE TABLE claims (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    what        TEXT NOT NULL,
    repo        TEXT NOT NULL,
    holder      TEXT NOT NULL,
    note        TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX claims_by_repo ON claims(repo, expires_at);
CREATE INDEX claims_by_expiry ON claims(expires_at);
"#,
    r#"
-- A message's files: listed on its row (a JSON list of {n, name,
-- content_type, size}), their bytes apart, gone with the message.
ALTER TABLE messages ADD COLUMN attachments TEXT;
CREATE TABLE attachments (
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n           INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (message_id, n)
);
"#,
    crate::store::statements::purge::MARKS_GO_WITH_THEIR_CONVERSATION,
];

/// Opens a connection with the pragmas every connection needs.
pub(super) fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let opening = || format!("cannot open the database {}", path.display());
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::backend(opening(), e))?;
    let configure = || -> rusqlite::Result<()> {
        conn.busy_timeout(Duration::from_secs(5))?;
        // WAL lets readers run beside the writer. Readers commit nothing;
        // the writer's own syncing is set as the store is opened.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // Checkpoints keep the WAL from growing; this truncates what it grew
        // to under a burst once a checkpoint has passed.
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        // Not mapped: a connection that maps the file drops its whole
        // mapping at the start of every read after another connection's
        // commit (SQLite's pager unfetches on a changed WAL), so under
        // writes each credentials read paid an munmap and the page faults
        // after it. Pages come from SQLite's own cache, and past it as a
        // copy from the kernel's; mapped pages also counted in the
        // process's resident memory (bench/README.md).
        conn.pragma_update(None, "mmap_size", 0)?;
        // What a load wrote is in the kernel's cache anyway, a copy away:
        // a connection's own cache buys little past the pages every
        // statement walks. At 32 MiB a connection the writer's cache held
        // most of a load (the process's own memory after it, 41 MB against
        // 21 at 4 MiB, as fast); at 1 MiB, 12.4 against 16.0 MB after
        // bench/outside.py's load and 27 against 33 after random channel
        // reads, neither slower (bench/README.md).
        conn.pragma_update(None, "cache_size", -1024)?;
        // Plans that never depend on a bound value. Otherwise SQLite marks
        // a statement whose `LIMIT ?` (or a value compared with an index,
        // or a LIKE's pattern) the planner looked at, and compiles it
        // again at every step after that value is bound, same value or
        // not: a page of channel messages spent a quarter of its query
        // there, statement cache or not (bench/README.md). The relay binds
        // no LIKE pattern, and the channel page's plan is the same either
        // way (its index, in its order).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        Ok(())
    };
    configure().map_err(|e| StoreError::backend(opening(), e))?;
    // Room for every statement a connection runs, with one search per
    // generation of the index (search.rs) among them.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

/// Brings the schema up to the last step, in one transaction.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let fresh: bool = conn.query_row("SELECT count(*) = 0 FROM sqlite_master", [], |row| {
        row.get(0)
    })?;
    if fresh {
        // Only before the first table: a database made by this version
        // gives the pages the purge frees back to the file system
        // (`incremental_vacuum`). Older ones would need a full VACUUM,
        // which an operator may run while the relay is stopped.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    // Off while the schema changes (a step may rebuild a table, which with
    // them on would cascade), and checked before the change commits.
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    let migrated = migrate_steps(conn);
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrated
}

fn migrate_steps(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version > MIGRATIONS.len() {
        return Err(StoreError::schema_too_new(version, MIGRATIONS.len()));
    }
    for step in &MIGRATIONS[version..] {
        tx.execute_batch(step)?;
    }
    let broken: Option<String> = tx
        .query_row("PRAGMA foreign_key_check", [], |row| row.get(0))
        .optional()?;
    if let Some(table) = broken {
        return Err(StoreError::backend(
            "cannot bring the database up to date",
            format!("a row of {table} refers to one that does not exist"),
        ));
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len())?;
    tx.commit()?;
    Ok(())
}
