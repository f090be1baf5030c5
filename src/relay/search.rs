//! Search: live messages whose bodies hold the words a person typed. The
//! team reads everything, so search finds across every channel and thread,
//! for everyone, by the same rule as reading; expired messages never.

use super::{Relay, RelayError, RelayResult, read::Listing};
use crate::model::{Found, MessageId, now_millis};

/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// Results in a page, by default and at most.
pub const SEARCH_PAGE: u32 = 20;
pub const MAX_SEARCH_PAGE: u32 = 50;

/// The query's rule as a regular expression, for the API's schemas: 1 to
/// [`MAX_QUERY_CHARS`] characters once trimmed.
pub fn query_pattern() -> String {
    super::text::trimmed_pattern(1, MAX_QUERY_CHARS, "")
}

impl Relay {
    /// Messages matching every word of `query` (the last also as a prefix),
    /// newest first, a page of at most `limit` after the cursor `before`.
    pub async fn search(
        &self,
        query: &str,
        before: Option<MessageId>,
        limit: Option<u32>,
    ) -> RelayResult<Listing<Found>> {
        let query = query.trim();
        if query.is_empty() {
            return Err(RelayError::bad_field("query", "must not be empty"));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(RelayError::bad_field(
                "query",
                format!("must be at most {MAX_QUERY_CHARS} characters"),
            ));
        }
        let limit = limit.unwrap_or(SEARCH_PAGE).clamp(1, MAX_SEARCH_PAGE);
        let found = self
            .store
            .search(query, before, limit, now_millis())
            .await?;
        Ok(Listing::of(found, limit, |f| f.message.id))
    }
}
