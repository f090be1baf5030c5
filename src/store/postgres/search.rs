//! Search (`../sqlite/search.rs`, in PostgreSQL): a `tsvector` of each
//! body, kept by the database, and a `tsquery` of what was typed.

use crate::model::{Found, MessageId, Millis};
use crate::store::StoreResult;
use crate::store::columns::{INBOX_JOIN, MESSAGE_COLUMNS, MESSAGE_COLUMNS_LEN};
use crate::store::sql::{Executor, Param};
use crate::store::statements::messages::message_from_row;
use crate::store::text::{CLOSE, OPEN, excerpt, words};

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
    db: &impl Executor,
    typed: &str,
    before: Option<MessageId>,
    limit: u32,
    now: Millis,
) -> StoreResult<Vec<Found>> {
    let Some(query) = ts_query(typed) else {
        return Ok(Vec::new());
    };
    let marks = format!("StartSel={OPEN}, StopSel={CLOSE}, MaxWords=24, MinWords=12, ShortWord=0");
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, ts_headline('simple', m.body, q, ?5) \
         FROM to_tsquery('simple', ?1) q, messages m {INBOX_JOIN} \
         WHERE m.words @@ q AND m.id < ?2 AND m.expires_at > ?3 \
         ORDER BY m.id DESC LIMIT ?4"
    );
    let before = before.unwrap_or(MessageId(i64::MAX));
    let params: [&dyn Param; 5] = [&query, &before, &now, &i64::from(limit), &marks];
    db.rows(&sql, &params, |row| {
        Ok(Found {
            message: message_from_row(&row)?,
            excerpt: excerpt(&row.get::<String>(MESSAGE_COLUMNS_LEN)?),
        })
    })
    .await
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
