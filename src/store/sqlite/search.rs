//! Full-text search over message bodies (SQLite's FTS5).

use super::messages::{MESSAGE_COLUMNS, message_from_row};
use crate::model::{Excerpt, Found, Millis};
use crate::store::StoreResult;
use rusqlite::{Connection, params};

/// Marks around a matched term in an excerpt: control characters, which a
/// body almost never holds (one that does only moves a highlight).
const OPEN: char = '\u{2}';
const CLOSE: char = '\u{3}';

/// What a person typed, as an FTS5 query: every word must match, each
/// quoted so no character is query syntax, the last one also as a prefix
/// (so a word still being typed finds). `None` when no word is left.
pub(super) fn fts_query(typed: &str) -> Option<String> {
    let words: Vec<String> = typed
        .split_whitespace()
        .map(|word| word.replace('"', ""))
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .map(|word| format!("\"{word}\""))
        .collect();
    words.last()?;
    Some(words.join(" ") + "*")
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
    let indexed = conn
        .prepare_cached(
            "INSERT INTO messages_fts (rowid, body) \
             SELECT id, body FROM messages WHERE id > ?1 AND id <= ?2",
        )?
        .execute(params![from, to])?;
    conn.prepare_cached("UPDATE search_state SET indexed_to = ?1")?
        .execute([to])?;
    Ok(indexed as u64)
}

/// Live messages matching `typed`, newest first, with ids below `before`.
pub(super) fn search(
    conn: &Connection,
    typed: &str,
    before: Option<i64>,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Found>> {
    let Some(query) = fts_query(typed) else {
        return Ok(Vec::new());
    };
    let columns: String = MESSAGE_COLUMNS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {columns}, snippet(messages_fts, 0, char(2), char(3), '…', 24) \
         FROM messages_fts f JOIN messages m ON m.id = f.rowid \
         WHERE messages_fts MATCH ?1 AND f.rowid < ?2 AND m.expires_at > ?3 \
         ORDER BY f.rowid DESC LIMIT ?4"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_map(
            params![query, before.unwrap_or(i64::MAX), now, limit],
            |row| {
                Ok(Found {
                    message: message_from_row(row)?,
                    excerpt: excerpt(&row.get::<_, String>(10)?),
                })
            },
        )?
        .collect::<Result<_, _>>()?)
}

/// Splits a snippet at its marks.
fn excerpt(snippet: &str) -> Vec<Excerpt> {
    let mut runs = Vec::new();
    let mut rest = snippet;
    while let Some(start) = rest.find(OPEN) {
        if start > 0 {
            runs.push(Excerpt {
                text: rest[..start].to_owned(),
                matched: false,
            });
        }
        let after = &rest[start + OPEN.len_utf8()..];
        let end = after.find(CLOSE).unwrap_or(after.len());
        runs.push(Excerpt {
            text: after[..end].to_owned(),
            matched: true,
        });
        rest = after.get(end + CLOSE.len_utf8()..).unwrap_or("");
    }
    if !rest.is_empty() {
        runs.push(Excerpt {
            text: rest.to_owned(),
            matched: false,
        });
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_words_are_quoted_and_the_last_is_a_prefix() {
        assert_eq!(fts_query("deploy"), Some("\"deploy\"*".into()));
        assert_eq!(
            fts_query("  which \"migration  0042"),
            Some("\"which\" \"migration\" \"0042\"*".into())
        );
        assert_eq!(
            fts_query("AND OR NOT ( ) * :"),
            Some("\"AND\" \"OR\" \"NOT\"*".into())
        );
        assert_eq!(fts_query("  - ? "), None);
    }

    #[test]
    fn a_snippet_splits_at_its_marks() {
        let runs = excerpt("the \u{2}deploy\u{3} went");
        let shown: Vec<(&str, bool)> = runs.iter().map(|r| (r.text.as_str(), r.matched)).collect();
        assert_eq!(shown, [("the ", false), ("deploy", true), (" went", false)]);
    }
}
