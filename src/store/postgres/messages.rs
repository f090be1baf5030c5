//! Messages, threads, inboxes and search (`../sqlite/messages.rs` and
//! `search.rs`, in PostgreSQL).

use super::{Db, handle, maybe_channel, maybe_handle, row};
use crate::model::{Channel, Delivery, Found, Handle, Message, Millis};
use crate::store::text::{CLOSE, OPEN, excerpt, words};
use crate::store::{Conversation, NewMessage, Offer, RecipientCheck, StoreError, StoreResult};
use tokio_postgres::Row;

/// A message's columns, with its delivery ledger: select them from
/// `messages m` [`INBOX_JOIN`].
pub(super) const MESSAGE_COLUMNS: &str = "m.id, m.thread_id, m.channel, m.sender, m.recipient, \
     m.type, m.body, m.reply_to, m.created_at, m.expires_at, \
     i.pushed_at, i.read_at, i.answered_at, i.offers";

/// Joins a message (as `m`) to its recipient's inbox row (as `i`), if any.
pub(super) const INBOX_JOIN: &str =
    "LEFT JOIN inbox i ON i.recipient = m.recipient AND i.message_id = m.id";

pub(super) fn message_from_row(row: &Row) -> StoreResult<Message> {
    let to = maybe_handle(row, 4)?;
    let delivery = match to {
        Some(_) => Some(Delivery {
            pushed_at: row.try_get(10)?,
            read_at: row.try_get(11)?,
            answered_at: row.try_get(12)?,
            offers: row
                .try_get::<_, Option<i32>>(13)?
                .map_or(0, |n| n.max(0) as u32),
        }),
        None => None,
    };
    Ok(Message {
        id: row.try_get(0)?,
        thread_id: row.try_get(1)?,
        channel: maybe_channel(row, 2)?,
        from: handle(row, 3)?,
        to,
        kind: row.try_get(5)?,
        body: row.try_get(6)?,
        reply_to: row.try_get(7)?,
        created_at: row.try_get(8)?,
        expires_at: row.try_get(9)?,
        delivery,
    })
}

fn messages_from(rows: &[Row]) -> StoreResult<Vec<Message>> {
    rows.iter().map(message_from_row).collect()
}

async fn check_recipient(
    db: &impl Db,
    recipient: &Handle,
    check: RecipientCheck,
) -> StoreResult<()> {
    let RecipientCheck::LivePerson { or_empty_store } = check else {
        return Ok(());
    };
    let row = row(
        db,
        "SELECT EXISTS (SELECT 1 FROM people WHERE handle = $1 AND revoked_at IS NULL), \
                EXISTS (SELECT 1 FROM people)",
        &[&recipient.as_str()],
    )
    .await?
    .expect("SELECT without FROM returns a row");
    let (live, anyone): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
    if live || (or_empty_store && !anyone) {
        return Ok(());
    }
    Err(StoreError::NotFound(format!(
        "there is nobody called {recipient} on this relay"
    )))
}

/// Stores a message inside the caller's transaction, which holds the write
/// lock (see `writer.rs`). Every check comes before the first write, so a
/// message refused (`NotFound`) has written nothing and the transaction
/// goes on for the others in it.
pub(super) async fn insert(db: &impl Db, new: NewMessage) -> StoreResult<Message> {
    if let Some(recipient) = &new.to {
        check_recipient(db, recipient, new.check_to).await?;
    }
    let (thread_id, channel) = match &new.conversation {
        Conversation::NewThread => (None, None),
        Conversation::Thread(thread_id) => {
            let live = row(
                db,
                "SELECT 1 FROM messages WHERE thread_id = $1 AND expires_at > $2 LIMIT 1",
                &[thread_id, &new.created_at],
            )
            .await?;
            if live.is_none() {
                return Err(StoreError::NotFound(format!(
                    "there is no thread {thread_id}"
                )));
            }
            (Some(*thread_id), None)
        }
        Conversation::Channel(name) => (None, Some(name.clone())),
    };
    let channel_name = channel.as_ref().map(Channel::as_str);
    if let Some(reply_to) = new.reply_to {
        // A new thread has nothing to reply to.
        let same_place = match new.conversation {
            Conversation::NewThread => None,
            _ => {
                row(
                    db,
                    "SELECT 1 FROM messages WHERE id = $1 AND expires_at > $2 \
                     AND thread_id IS NOT DISTINCT FROM $3 AND channel IS NOT DISTINCT FROM $4",
                    &[&reply_to, &new.created_at, &thread_id, &channel_name],
                )
                .await?
            }
        };
        if same_place.is_none() {
            return Err(StoreError::NotFound(format!(
                "reply_to {reply_to} is not a live message of this conversation"
            )));
        }
    }
    let id: i64 = row(db, "SELECT nextval('message_ids')", &[])
        .await?
        .expect("nextval returns a row")
        .try_get(0)?;
    let people = [Some(&new.from), new.to.as_ref()];
    let opened = matches!(new.conversation, Conversation::NewThread);
    let thread_id = match opened {
        true => Some(super::summaries::open_thread(db, id, people, new.created_at).await?),
        false => thread_id,
    };
    let to = new.to.as_ref().map(Handle::as_str);
    db.exec(
        "INSERT INTO messages (id, thread_id, channel, sender, recipient, type, body, reply_to, \
         created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            &id,
            &thread_id,
            &channel_name,
            &new.from.as_str(),
            &to,
            &new.kind,
            &new.body,
            &new.reply_to,
            &new.created_at,
            &new.expires_at,
        ],
    )
    .await?;
    if let Some(recipient) = to {
        db.exec(
            "INSERT INTO inbox (recipient, message_id) VALUES ($1, $2)",
            &[&recipient, &id],
        )
        .await?;
    }
    answer(db, &new, thread_id).await?;
    match (channel_name, thread_id) {
        (Some(channel), _) => {
            super::summaries::count_in_channel(db, channel, id, new.created_at).await?
        }
        (None, Some(thread_id)) if !opened => {
            super::summaries::count_in_thread(db, thread_id, id, people, new.created_at).await?
        }
        _ => {}
    }
    Ok(new.stored(id, thread_id, channel))
}

/// A reply marks what it answers: in a thread, every message of it to the
/// replier that was pushed to their agent or read (one still waiting may have
/// come a moment before the reply, unseen: it goes on waiting); in a
/// channel, the message it replies to, if it was to them.
async fn answer(db: &impl Db, new: &NewMessage, thread_id: Option<i64>) -> StoreResult<()> {
    let (from, now) = (new.from.as_str(), &new.created_at);
    match (thread_id, new.reply_to, &new.conversation) {
        (_, _, Conversation::NewThread) => {}
        (Some(thread_id), _, _) => {
            db.exec(
                "UPDATE inbox SET answered_at = $3, read_at = coalesce(read_at, $3) \
                 WHERE recipient = $1 AND answered_at IS NULL \
                 AND (pushed_at IS NOT NULL OR read_at IS NOT NULL) AND message_id IN \
                     (SELECT id FROM messages WHERE thread_id = $2)",
                &[&from, &thread_id, now],
            )
            .await?;
        }
        (None, Some(reply_to), _) => {
            db.exec(
                "UPDATE inbox SET answered_at = $3, read_at = coalesce(read_at, $3) \
                 WHERE recipient = $1 AND message_id = $2 AND answered_at IS NULL",
                &[&from, &reply_to, now],
            )
            .await?;
        }
        (None, None, _) => {}
    }
    Ok(())
}

/// What an inbox row must be for a claim or an offer to take it: unread,
/// its message live, and no stream's lease on it running. The rows are
/// locked as they are chosen, and rows another claim holds are skipped, so
/// no two claims (on any instance) take the same message.
const TAKEABLE: &str = "SELECT i.message_id FROM inbox i JOIN messages m ON m.id = i.message_id \
     WHERE i.recipient = $1 AND i.read_at IS NULL AND m.expires_at > $2 \
     AND (i.lease_until IS NULL OR i.lease_until <= $2)";

/// The row's own part of [`TAKEABLE`], checked again as the row is
/// updated: what a concurrent claim changed after the rows were chosen is
/// never taken twice. The rows are chosen once, in a CTE (an `IN` subquery
/// with a `LIMIT` may be run again per row).
const STILL_TAKEABLE: &str =
    "inbox.read_at IS NULL AND (inbox.lease_until IS NULL OR inbox.lease_until <= $2)";

/// Claims, in the caller's transaction.
pub(super) async fn claim_inbox(
    db: &impl Db,
    recipient: &Handle,
    now: Millis,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let claimed = db
        .rows(
            &format!(
                "WITH taken AS ({TAKEABLE} ORDER BY i.message_id LIMIT $3 \
                     FOR UPDATE OF i SKIP LOCKED) \
                 UPDATE inbox SET read_at = $2, lease_until = NULL FROM taken \
                 WHERE inbox.recipient = $1 AND inbox.message_id = taken.message_id \
                 AND {STILL_TAKEABLE} \
                 RETURNING inbox.message_id"
            ),
            &[&recipient.as_str(), &now, &i64::from(limit)],
        )
        .await?;
    by_ids(db, &ids_of(&claimed)?).await
}

/// Offers, in the caller's transaction.
pub(super) async fn offer_inbox(
    db: &impl Db,
    recipient: &Handle,
    offer: Offer,
    limit: u32,
) -> StoreResult<Vec<Message>> {
    let offered = db
        .rows(
            &format!(
                "WITH taken AS ({TAKEABLE} AND i.push_holder IS DISTINCT FROM $5 \
                     ORDER BY i.message_id LIMIT $3 FOR UPDATE OF i SKIP LOCKED) \
                 UPDATE inbox SET pushed_at = coalesce(pushed_at, $2), lease_until = $4, \
                     push_holder = $5, offers = offers + 1 FROM taken \
                 WHERE inbox.recipient = $1 AND inbox.message_id = taken.message_id \
                 AND {STILL_TAKEABLE} \
                 RETURNING inbox.message_id"
            ),
            &[
                &recipient.as_str(),
                &offer.now,
                &i64::from(limit),
                &offer.until,
                &offer.holder,
            ],
        )
        .await?;
    by_ids(db, &ids_of(&offered)?).await
}

fn ids_of(rows: &[Row]) -> StoreResult<Vec<i64>> {
    Ok(rows
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?)
}

/// Messages by id, oldest first, with their ledgers as they are now.
async fn by_ids(db: &impl Db, ids: &[i64]) -> StoreResult<Vec<Message>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    messages_from(
        &db.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE m.id = ANY($1) ORDER BY m.id"
            ),
            &[&ids],
        )
        .await?,
    )
}

pub(super) async fn release_offers(
    db: &impl Db,
    recipient: &Handle,
    holder: i64,
    ids: &[i64],
) -> StoreResult<()> {
    db.exec(
        "UPDATE inbox SET lease_until = NULL \
         WHERE recipient = $1 AND message_id = ANY($2) AND push_holder = $3 AND read_at IS NULL",
        &[&recipient.as_str(), &ids, &holder],
    )
    .await?;
    Ok(())
}

pub(super) async fn next_lease_end(
    db: &impl Db,
    recipient: &Handle,
    now: Millis,
) -> StoreResult<Option<Millis>> {
    Ok(row(
        db,
        "SELECT min(lease_until) FROM inbox \
         WHERE recipient = $1 AND read_at IS NULL AND lease_until > $2",
        &[&recipient.as_str(), &now],
    )
    .await?
    .map(|row| row.try_get(0))
    .transpose()?
    .flatten())
}

pub(super) async fn confirm_read(
    db: &impl Db,
    recipient: &Handle,
    ids: &[i64],
    now: Millis,
) -> StoreResult<Vec<i64>> {
    let confirmed = db
        .rows(
            "UPDATE inbox SET read_at = $3, lease_until = NULL \
             WHERE recipient = $1 AND message_id = ANY($2) AND read_at IS NULL \
             RETURNING message_id",
            &[&recipient.as_str(), &ids, &now],
        )
        .await?;
    ids_of(&confirmed)
}

pub(super) async fn message(db: &impl Db, id: i64, now: Millis) -> StoreResult<Option<Message>> {
    db.rows(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
             WHERE m.id = $1 AND m.expires_at > $2"
        ),
        &[&id, &now],
    )
    .await?
    .first()
    .map(message_from_row)
    .transpose()
}

pub(super) async fn thread(
    db: &impl Db,
    thread_id: i64,
    since_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages = messages_from(
        &db.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE m.thread_id = $1 AND m.id > $2 AND m.expires_at > $3 \
                 ORDER BY m.id LIMIT $4"
            ),
            &[&thread_id, &since_id, &now, &i64::from(limit)],
        )
        .await?,
    )?;
    if messages.is_empty() {
        thread_exists(db, thread_id, now).await?;
    }
    Ok(messages)
}

pub(super) async fn thread_recent(
    db: &impl Db,
    thread_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let messages = newest(db, "m.thread_id", &thread_id, limit, now).await?;
    if messages.is_empty() {
        thread_exists(db, thread_id, now).await?;
    }
    Ok(messages)
}

/// The newest `limit` live messages whose `column` is `place`, oldest first.
async fn newest(
    db: &impl Db,
    column: &str,
    place: &(dyn tokio_postgres::types::ToSql + Sync),
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    let mut messages = messages_from(
        &db.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE {column} = $1 AND m.expires_at > $2 ORDER BY m.id DESC LIMIT $3"
            ),
            &[place, &now, &i64::from(limit)],
        )
        .await?,
    )?;
    messages.reverse();
    Ok(messages)
}

/// `NotFound` unless the thread has a live message.
async fn thread_exists(db: &impl Db, thread_id: i64, now: Millis) -> StoreResult<()> {
    let live = row(
        db,
        "SELECT 1 FROM messages WHERE thread_id = $1 AND expires_at > $2 LIMIT 1",
        &[&thread_id, &now],
    )
    .await?;
    match live {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(format!(
            "there is no thread {thread_id}"
        ))),
    }
}

pub(super) async fn in_channel(
    db: &impl Db,
    channel: &Channel,
    since_id: i64,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    messages_from(
        &db.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m {INBOX_JOIN} \
                 WHERE m.channel = $1 AND m.id > $2 AND m.expires_at > $3 ORDER BY m.id LIMIT $4"
            ),
            &[&channel.as_str(), &since_id, &now, &i64::from(limit)],
        )
        .await?,
    )
}

pub(super) async fn recent_in_channel(
    db: &impl Db,
    channel: &Channel,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Message>> {
    newest(db, "m.channel", &channel.as_str(), limit, now).await
}

/// What a person typed, as a `tsquery`: every word must match, each quoted
/// as one lexeme (so nothing typed is query syntax), the last also as a
/// prefix. `None` when no word is left.
fn ts_query(typed: &str) -> Option<String> {
    let words: Vec<String> = words(typed)
        .iter()
        .map(|word| format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''")))
        .collect();
    words.last()?;
    Some(words.join(" & ") + ":*")
}

/// Live messages matching `typed`, newest first, with ids below `before`.
pub(super) async fn search(
    db: &impl Db,
    typed: &str,
    before: Option<i64>,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Found>> {
    let Some(query) = ts_query(typed) else {
        return Ok(Vec::new());
    };
    let marks = format!("StartSel={OPEN}, StopSel={CLOSE}, MaxWords=24, MinWords=12, ShortWord=0");
    let rows = db
        .rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS}, ts_headline('simple', m.body, q, $5) \
                 FROM to_tsquery('simple', $1) q, messages m {INBOX_JOIN} \
                 WHERE m.words @@ q AND m.id < $2 AND m.expires_at > $3 \
                 ORDER BY m.id DESC LIMIT $4"
            ),
            &[
                &query,
                &before.unwrap_or(i64::MAX),
                &now,
                &i64::from(limit),
                &marks,
            ],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Found {
                message: message_from_row(row)?,
                excerpt: excerpt(row.try_get(14)?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::ts_query;

    #[test]
    fn typed_words_are_quoted_lexemes_and_the_last_a_prefix() {
        assert_eq!(ts_query("deploy").as_deref(), Some("'deploy':*"));
        assert_eq!(
            ts_query("it's a\\b 0042").as_deref(),
            Some("'it''s' & 'a\\\\b' & '0042':*")
        );
        assert_eq!(ts_query(" & | ! "), None);
    }
}
