//! What every backend's search shares: the words a person typed, and an
//! excerpt split at the marks a backend put around matched words.

use crate::model::Excerpt;

/// Marks around a matched term in an excerpt: control characters, which a
/// body almost never holds (one that does only moves a highlight).
pub(crate) const OPEN: char = '\u{2}';
pub(crate) const CLOSE: char = '\u{3}';

/// The words of what a person typed, each to be matched whole except the
/// last, which also matches as a word's start (so a word still being typed
/// finds). Quotes go; a "word" with no letter or digit is dropped, so
/// nothing typed is ever query syntax. Empty when no word is left.
pub(crate) fn words(typed: &str) -> Vec<String> {
    typed
        .split_whitespace()
        .map(|word| word.replace('"', ""))
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .collect()
}

/// Splits a snippet at its marks.
pub(crate) fn excerpt(snippet: &str) -> Vec<Excerpt> {
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
    fn typed_words_lose_their_quotes_and_what_is_no_word() {
        assert_eq!(
            words("  which \"migration  it's"),
            ["which", "migration", "it's"]
        );
        assert_eq!(words("AND ( ) * :"), ["AND"]);
        assert!(words("  - ? ").is_empty());
    }

    #[test]
    fn a_snippet_splits_at_its_marks() {
        let runs = excerpt("the \u{2}deploy\u{3} went");
        let shown: Vec<(&str, bool)> = runs.iter().map(|r| (r.text.as_str(), r.matched)).collect();
        assert_eq!(shown, [("the ", false), ("deploy", true), (" went", false)]);
    }
}
