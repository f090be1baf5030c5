//! Full-text search over message bodies (SQLite's FTS5).

use super::Sql;
use crate::model::{Found, MessageId, Millis};
use crate::store::StoreResult;
use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS, MESSAGE_COLUMNS_LEN};
use crate::store::sql::{Executor, Param};
use crate::store::statements::messages::message_from_row;
use crate::store::text::{excerpt, words};
use rusqlite::{Connection, OptionalExtension, params};

/// What a person typed, as an FTS5 query: every word must match, each
/// quoted so no character is query syntax, the last one also as a prefix.
/// `None` when no word is left.
pub(super) fn fts_query(typed: &str) -> Option<String> {
    let words: Vec<String> = words(typed)
        .into_iter()
        .map(|word| format!("\"{word}\""))
        .collect();
    words.last()?;
    Some(words.join(" ") + "*")
}

/// How many ids one generation of the search index covers: generation `n`
/// is its own FTS5 table, `messages_fts_{n}`, holding the messages whose
/// ids are `n * GENERATION ..= (n + 1) * GENERATION - 1`. Released with
/// schema step 8 and frozen: a database's tables are numbered by it.
///
/// Why generations: a message is never taken out of the index one by one
/// (FTS5 writes each removal into every word's list, and merges a word's
/// list whole, so purging a common word held the writer for 100 ms and
/// more). The purge deletes messages only; a search joins the messages
/// table, so what was purged is never found; and a generation none of whose
/// messages is left is dropped whole. The index stays within one
/// generation of what is live, and a merge never rewrites more than one
/// generation's list of a word.
pub const GENERATION: i64 = 65_536;

/// The table of generation `n`.
fn generation_table(n: i64) -> String {
    format!("messages_fts_{n}")
}

/// Indexes up to `batch` messages not yet in the search index, in one
/// transaction; returns how many.
pub(super) fn index_batch(conn: &Connection, batch: u32) -> StoreResult<u64> {
    let from: i64 = conn
        .prepare_cached("SELECT indexed_to FROM search_state")?
        .query_row([], |row| row.get(0))?;
    let to: Option<i64> = conn
        .prepare_cached(
            "SELECT max(id) FROM (SELECT id FROM messages WHERE id > ?1 ORDER BY id LIMIT ?2)",
        )?
        .query_row(params![from, batch], |row| row.get(0))?;
    let Some(to) = to else {
        return Ok(0);
    };
    let mut indexed = 0;
    let mut start = from + 1;
    while start <= to {
        let n = start / GENERATION;
        let end = to.min((n + 1) * GENERATION - 1);
        let table = open_generation(conn, n)?;
        indexed += conn
            .prepare_cached(&format!(
                "INSERT INTO {table} (rowid, body) \
                 SELECT id, body FROM messages WHERE id >= ?1 AND id <= ?2"
            ))?
            .execute(params![start, end])?;
        start = end + 1;
    }
    conn.prepare_cached("UPDATE search_state SET indexed_to = ?1")?
        .execute([to])?;
    Ok(indexed as u64)
}

/// The table of generation `n`, made if it is new.
fn open_generation(conn: &Connection, n: i64) -> StoreResult<String> {
    let table = generation_table(n);
    let new = conn
        .prepare_cached("INSERT OR IGNORE INTO search_generations (number) VALUES (?1)")?
        .execute([n])?
        == 1;
    if new {
        // The index of the messages table's own text (nothing copied);
        // no sizes kept, as results are ordered by id, never ranked.
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\
                 body, content = 'messages', content_rowid = 'id', columnsize = 0, \
                 tokenize = 'unicode61 remove_diacritics 2')"
        ))?;
    }
    Ok(table)
}

/// Drops the oldest generation of the search index none of whose messages
/// is left; returns whether there was one. A generation still being filled
/// may go too: the next message indexed into it makes it again.
pub(super) fn drop_emptied_generation(conn: &Connection) -> StoreResult<bool> {
    let emptied: Option<i64> = conn
        .prepare_cached(
            "SELECT number FROM search_generations g WHERE NOT EXISTS \
             (SELECT 1 FROM messages WHERE id >= g.number * ?1 AND id < (g.number + 1) * ?1) \
             ORDER BY number LIMIT 1",
        )?
        .query_row([GENERATION], |row| row.get(0))
        .optional()?;
    let Some(n) = emptied else {
        return Ok(false);
    };
    conn.execute_batch(&format!("DROP TABLE IF EXISTS {}", generation_table(n)))?;
    conn.prepare_cached("DELETE FROM search_generations WHERE number = ?1")?
        .execute([n])?;
    Ok(true)
}

/// Live messages matching `typed`, newest first, with ids below `before`:
/// generation by generation from the newest, until `limit` are found.
pub(super) async fn search(
    db: &Sql<'_>,
    typed: &str,
    before: Option<MessageId>,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Found>> {
    let Some(query) = fts_query(typed) else {
        return Ok(Vec::new());
    };
    let before = before.unwrap_or(MessageId(i64::MAX)).0;
    let generations: Vec<i64> = db
        .column(
            "SELECT number FROM search_generations WHERE number <= ?1 ORDER BY number DESC",
            &[&(before / GENERATION)],
        )
        .await?;
    let mut found = Vec::new();
    for n in generations {
        let wanted = limit as usize - found.len();
        if wanted == 0 {
            break;
        }
        let table = generation_table(n);
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS}, snippet({table}, 0, char(2), char(3), '…', 24) \
             FROM {table} f JOIN messages m ON m.id = f.rowid {INBOX_JOIN} \
             WHERE {table} MATCH ?1 AND f.rowid < ?2 AND m.expires_at > ?3 \
             ORDER BY f.rowid DESC LIMIT ?4"
        );
        let params: [&dyn Param; 4] = [&query, &before, &now, &(wanted as i64)];
        let rows = db
            .rows(&sql, &params, |row| {
                Ok(Found {
                    message: message_from_row(&row)?,
                    excerpt: excerpt(&row.get::<String>(MESSAGE_COLUMNS_LEN)?),
                })
            })
            .await?;
        found.extend(rows);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_words_are_quoted_and_the_last_is_a_prefix() {
        for (typed, query) in [
            ("deploy", Some("\"deploy\"*")),
            (
                "  which \"migration  0042",
                Some("\"which\" \"migration\" \"0042\"*"),
            ),
            ("AND OR NOT ( ) * :", Some("\"AND\" \"OR\" \"NOT\"*")),
            ("  - ? ", None),
        ] {
            assert_eq!(fts_query(typed).as_deref(), query, "{typed:?}");
        }
    }
}
