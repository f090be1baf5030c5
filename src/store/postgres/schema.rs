//! The PostgreSQL schema, and how a database is brought up to date: at
//! start, under an advisory lock, so instances starting together take
//! turns (the first migrates; the others find it done).
//!
//! It mirrors the SQLite schema (`../sqlite/schema.rs`) in one step: the
//! same tables and summaries, with PostgreSQL's own ways where they differ
//! (a sequence for message ids, taken under the write lock; `tsvector` for
//! search; triggers as functions).

use super::MIGRATE_LOCK;
use crate::store::{StoreError, StoreResult};
use deadpool_postgres::Client;

/// The schema, one step per version; a step never changes once released.
pub const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE people (
    id          bigserial PRIMARY KEY,
    handle      text NOT NULL UNIQUE,
    name        text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  bigint NOT NULL,
    revoked_at  bigint
);
CREATE TABLE presence (
    handle        text PRIMARY KEY,
    status        text NOT NULL DEFAULT '',
    status_at     bigint,
    last_seen_at  bigint
);
-- Moves whenever anyone is added, rotated or revoked, by any instance or
-- the CLI: servers watch it to refresh the tokens they hold.
CREATE TABLE revisions (
    name   text PRIMARY KEY,
    value  bigint NOT NULL
);
INSERT INTO revisions (name, value) VALUES ('credentials', 0);
CREATE FUNCTION credentials_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE revisions SET value = value + 1 WHERE name = 'credentials';
    RETURN NULL;
END $$;
CREATE TRIGGER people_moved AFTER INSERT OR UPDATE OR DELETE ON people
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_moved();
-- A thread's summary in its own row, as in SQLite: people as a JSON object
-- of how many of its messages each sent or received.
CREATE TABLE threads (
    id             bigserial PRIMARY KEY,
    created_at     bigint NOT NULL,
    message_count  bigint NOT NULL,
    first_id       bigint NOT NULL,
    last_id        bigint NOT NULL,
    last_activity  bigint NOT NULL,
    people         jsonb NOT NULL
);
CREATE INDEX threads_by_last ON threads(last_id);
-- Message ids come from this sequence, taken under the write lock (see
-- messages.rs): ids are handed out in the order messages commit, so a
-- reader never sees a lower id commit after a higher one.
CREATE SEQUENCE message_ids;
CREATE TABLE messages (
    id          bigint PRIMARY KEY,
    thread_id   bigint,
    channel     text,
    sender      text NOT NULL,
    recipient   text,
    type        text NOT NULL,
    body        text NOT NULL,
    reply_to    bigint,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL,
    words       tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    CHECK ((thread_id IS NULL) <> (channel IS NULL))
);
CREATE INDEX messages_by_thread ON messages(thread_id, id) WHERE thread_id IS NOT NULL;
CREATE INDEX messages_by_channel ON messages(channel, id) WHERE channel IS NOT NULL;
CREATE INDEX messages_by_expiry ON messages(expires_at);
CREATE INDEX messages_by_words ON messages USING gin (words);
CREATE TABLE inbox (
    recipient   text NOT NULL,
    message_id  bigint NOT NULL,
    claimed_at  bigint,
    PRIMARY KEY (recipient, message_id)
);
CREATE INDEX inbox_unclaimed ON inbox(recipient, message_id) WHERE claimed_at IS NULL;
CREATE TABLE channel_summaries (
    channel        text PRIMARY KEY,
    message_count  bigint NOT NULL,
    last_id        bigint NOT NULL,
    last_activity  bigint NOT NULL
);
CREATE INDEX channel_summaries_by_last ON channel_summaries(last_id);
CREATE TABLE last_read (
    handle        text NOT NULL,
    conversation  text NOT NULL,
    last_id       bigint NOT NULL,
    PRIMARY KEY (handle, conversation)
);
CREATE TABLE keys (
    name   text PRIMARY KEY,
    value  bytea NOT NULL
);
-- The relay processes on the database, each beating while it serves; one
-- that stopped beating (or left) holds nothing any more.
CREATE TABLE relays (
    instance  text PRIMARY KEY,
    seen_at   bigint NOT NULL
);
-- holder: the relay process serving the session (rmcp keeps sessions in
-- memory); another process answers it as lost while the holder beats.
-- Bytes kept under a name for every relay: the ACME account and
-- certificates, so relays behind one name share one certificate.
CREATE TABLE kept (
    name   text PRIMARY KEY,
    value  bytea NOT NULL
);
CREATE TABLE mcp_sessions (
    id         text PRIMARY KEY,
    owner      bytea,
    state      text NOT NULL,
    last_used  bigint NOT NULL,
    holder     text
);
CREATE INDEX mcp_sessions_by_owner ON mcp_sessions(owner);
CREATE FUNCTION sessions_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM mcp_sessions WHERE owner = old.token_hash;
    RETURN NULL;
END $$;
CREATE TRIGGER people_sessions_ended AFTER UPDATE OF token_hash, revoked_at ON people
    FOR EACH ROW EXECUTE FUNCTION sessions_ended();
"#,
    r#"
-- The delivery ledger (relay/push.rs): a claimed message was read; a push
-- is a lease (lease_until, push_holder: the stream offered it last), never
-- a hand-over; a reply answers. Each time is set once.
ALTER TABLE inbox RENAME COLUMN claimed_at TO read_at;
ALTER TABLE inbox ADD COLUMN pushed_at bigint;
ALTER TABLE inbox ADD COLUMN answered_at bigint;
ALTER TABLE inbox ADD COLUMN lease_until bigint;
ALTER TABLE inbox ADD COLUMN push_holder bigint;
ALTER TABLE inbox ADD COLUMN offers integer NOT NULL DEFAULT 0;
DROP INDEX inbox_unclaimed;
CREATE INDEX inbox_unread ON inbox(recipient, message_id) WHERE read_at IS NULL;
"#,
    r#"
-- People in the loop, as in SQLite's step 11 (relay/attention.rs).
ALTER TABLE inbox ADD COLUMN notified_at bigint;
UPDATE inbox SET notified_at = 0 WHERE read_at IS NULL AND answered_at IS NULL;
CREATE INDEX inbox_unnotified ON inbox(message_id)
    WHERE read_at IS NULL AND answered_at IS NULL AND notified_at IS NULL;
CREATE TABLE notify_settings (
    handle             text PRIMARY KEY,
    after_ms           bigint,
    at_once_when_away  boolean NOT NULL,
    webhook            text,
    webhook_format     text NOT NULL
);
CREATE TABLE approvals (
    id             bigserial PRIMARY KEY,
    handle         text NOT NULL,
    request_id     text NOT NULL,
    tool_name      text NOT NULL,
    description    text NOT NULL,
    input_preview  text NOT NULL,
    withheld       text,
    created_at     bigint NOT NULL,
    expires_at     bigint NOT NULL,
    behavior       text,
    answered_at    bigint
);
CREATE INDEX approvals_by_person ON approvals(handle, id);
CREATE INDEX approvals_by_age ON approvals(created_at);
CREATE TABLE push_devices (
    id          bigserial PRIMARY KEY,
    handle      text NOT NULL,
    endpoint    text NOT NULL UNIQUE,
    p256dh      bytea NOT NULL,
    auth        bytea NOT NULL,
    created_at  bigint NOT NULL
);
CREATE INDEX push_devices_by_person ON push_devices(handle);
"#,
    r#"
-- OAuth, as in SQLite (../sqlite/schema.rs): codes and tokens as hashes.
CREATE TABLE oauth_clients (
    client_id      text PRIMARY KEY,
    name           text,
    redirect_uris  text NOT NULL,
    registered_at  bigint NOT NULL,
    used_at        bigint
);
CREATE TABLE oauth_codes (
    hash          bytea PRIMARY KEY,
    handle        text NOT NULL,
    client_id     text NOT NULL,
    client_name   text NOT NULL,
    redirect_uri  text NOT NULL,
    challenge     text NOT NULL,
    resource      text NOT NULL,
    scope         text NOT NULL,
    expires_at    bigint NOT NULL,
    used_at       bigint,
    grant_id      bigint
);
CREATE TABLE oauth_grants (
    id            bigserial PRIMARY KEY,
    handle        text NOT NULL,
    client_id     text NOT NULL,
    client_name   text NOT NULL,
    redirect_uri  text NOT NULL,
    scope         text NOT NULL,
    resource      text NOT NULL,
    created_at    bigint NOT NULL,
    used_at       bigint NOT NULL
);
CREATE INDEX oauth_grants_by_person ON oauth_grants(handle);
CREATE TABLE oauth_tokens (
    hash        bytea PRIMARY KEY,
    grant_id    bigint NOT NULL,
    refresh     boolean NOT NULL,
    expires_at  bigint NOT NULL,
    used_at     bigint
);
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens(grant_id);
CREATE TRIGGER oauth_tokens_moved AFTER INSERT ON oauth_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_moved();
CREATE TRIGGER oauth_grants_moved AFTER DELETE ON oauth_grants
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_moved();
"#,
    r#"
-- A grant's tokens in its own row, as in SQLite's step 13: a row a grant
-- however often it was refreshed, no used refresh token kept, and only
-- the newest access token of each grant still working.
ALTER TABLE oauth_grants ADD COLUMN family bytea;
ALTER TABLE oauth_grants ADD COLUMN generation bigint NOT NULL DEFAULT 0;
ALTER TABLE oauth_grants ADD COLUMN refresh_hash bytea;
ALTER TABLE oauth_grants ADD COLUMN refresh_expires bigint NOT NULL DEFAULT 0;
ALTER TABLE oauth_grants ADD COLUMN previous_hash bytea;
ALTER TABLE oauth_grants ADD COLUMN previous_until bigint NOT NULL DEFAULT 0;
ALTER TABLE oauth_grants ADD COLUMN sibling_hash bytea;
ALTER TABLE oauth_grants ADD COLUMN access_hash bytea;
ALTER TABLE oauth_grants ADD COLUMN access_expires bigint NOT NULL DEFAULT 0;
UPDATE oauth_grants g SET refresh_hash = t.hash, refresh_expires = t.expires_at
    FROM (SELECT DISTINCT ON (grant_id) grant_id, hash, expires_at FROM oauth_tokens
          WHERE refresh AND used_at IS NULL ORDER BY grant_id, expires_at DESC) t
    WHERE t.grant_id = g.id;
UPDATE oauth_grants g SET access_hash = t.hash, access_expires = t.expires_at
    FROM (SELECT DISTINCT ON (grant_id) grant_id, hash, expires_at FROM oauth_tokens
          WHERE NOT refresh ORDER BY grant_id, expires_at DESC) t
    WHERE t.grant_id = g.id;
DELETE FROM oauth_grants WHERE refresh_hash IS NULL;
DROP TABLE oauth_tokens;
ALTER TABLE oauth_grants ALTER COLUMN refresh_hash SET NOT NULL;
CREATE UNIQUE INDEX oauth_grants_by_refresh ON oauth_grants(refresh_hash);
CREATE INDEX oauth_grants_by_previous ON oauth_grants(previous_hash);
CREATE INDEX oauth_grants_by_sibling ON oauth_grants(sibling_hash);
CREATE UNIQUE INDEX oauth_grants_by_access ON oauth_grants(access_hash);
CREATE UNIQUE INDEX oauth_grants_by_family ON oauth_grants(family);
CREATE INDEX oauth_grants_by_expiry ON oauth_grants(refresh_expires);
-- A grant made or refreshed moves the credentials revision; a refresh by
-- exactly one, whatever else its transaction tried first (a row trigger,
-- for the rows that changed), so the relay that made it can tell nothing
-- else moved it.
CREATE TRIGGER oauth_grants_added AFTER INSERT ON oauth_grants
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_moved();
CREATE TRIGGER oauth_grants_refreshed AFTER UPDATE OF access_hash ON oauth_grants
    FOR EACH ROW WHEN (old.access_hash IS DISTINCT FROM new.access_hash)
    EXECUTE FUNCTION credentials_moved();
"#,
    r#"
-- The path that last brought a message to its recipient's agent, as in
-- SQLite's.
ALTER TABLE inbox ADD COLUMN via text;
"#,
    r#"
-- Expectations, acknowledgements and claims, as in SQLite's.
ALTER TABLE inbox ADD COLUMN expects text;
ALTER TABLE inbox ADD COLUMN due_at bigint;
ALTER TABLE inbox ADD COLUMN ack_result text;
ALTER TABLE inbox ADD COLUMN ack_note text;
ALTER TABLE inbox ADD COLUMN acked_at bigint;
ALTER TABLE inbox ADD COLUMN overdue_at bigint;
CREATE INDEX inbox_owed ON inbox(recipient, message_id)
    WHERE expects IS NOT NULL AND answered_at IS NULL AND acked_at IS NULL;
CREATE INDEX inbox_due ON inbox(due_at)
    WHERE due_at IS NOT NULL AND overdue_at IS NULL AND answered_at IS NULL
      AND acked_at IS NULL;
CREATE TABLE claims (
    id          bigserial PRIMARY KEY,
    what        text NOT NULL,
    repo        text NOT NULL,
    holder      text NOT NULL,
    note        text,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL
);
CREATE INDEX claims_by_repo ON claims(repo, expires_at);
CREATE INDEX claims_by_expiry ON claims(expires_at);
"#,
    r#"
-- A message's files, as in SQLite's.
ALTER TABLE messages ADD COLUMN attachments text;
CREATE TABLE attachments (
    message_id  bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n           integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (message_id, n)
);
"#,
    crate::store::statements::purge::MARKS_GO_WITH_THEIR_CONVERSATION,
];

/// Brings the schema up to the last step, under the migration lock, in one
/// transaction.
pub(super) async fn migrate(client: &mut Client) -> StoreResult<()> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
        .await?;
    let migrated = migrate_steps(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await;
    migrated?;
    unlocked?;
    Ok(())
}

async fn migrate_steps(client: &mut Client) -> StoreResult<()> {
    let tx = client.transaction().await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        .await?;
    let version: i32 = tx
        .query_opt("SELECT version FROM schema_version", &[])
        .await?
        .map_or(0, |row| row.get(0));
    let version = usize::try_from(version).unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        return Err(StoreError::schema_too_new(version, MIGRATIONS.len()));
    }
    for step in &MIGRATIONS[version..] {
        tx.batch_execute(step).await?;
    }
    let last = MIGRATIONS.len() as i32;
    tx.execute("DELETE FROM schema_version", &[]).await?;
    tx.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&last])
        .await?;
    tx.commit().await?;
    Ok(())
}
