//! Handles: the short names people are known by (`alice`, `ci-bot`).

/// The longest handle accepted, in bytes (all of them ASCII).
pub const MAX_HANDLE_LEN: usize = 32;

/// [`Handle::parse`]'s rule as a regular expression, for the API's schemas
/// (held to it by the tests below).
pub const HANDLE_PATTERN: &str = "^[a-z0-9][a-z0-9._-]{0,31}$";

/// Why a handle was refused: each says exactly what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    #[error("a handle cannot be empty")]
    Empty,
    #[error("a handle is at most {MAX_HANDLE_LEN} characters, not {0}")]
    TooLong(usize),
    #[error("a handle starts with a lowercase letter or a digit: {0:?}")]
    BadStart(String),
    #[error("a handle holds only lowercase letters, digits, '.', '_' and '-'; {0:?} has {1:?}")]
    BadCharacter(String, char),
}

/// A person's handle: `[a-z0-9][a-z0-9._-]{0,31}`.
///
/// Parsed once at the edge, so everything past it can rely on the shape:
/// handles are safe in URLs, logs and file names, and compare byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(String);

impl Handle {
    /// Parses a handle, saying exactly what is wrong when it is not one.
    pub fn parse(raw: &str) -> Result<Handle, HandleError> {
        let mut chars = raw.chars();
        let Some(first) = chars.next() else {
            return Err(HandleError::Empty);
        };
        if raw.len() > MAX_HANDLE_LEN {
            return Err(HandleError::TooLong(raw.chars().count()));
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(HandleError::BadStart(raw.to_owned()));
        }
        if let Some(bad) = chars.find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        }) {
            return Err(HandleError::BadCharacter(raw.to_owned(), bad));
        }
        Ok(Handle(raw.to_owned()))
    }
}

text_type!(Handle);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{assert_longest, assert_pattern_mirrors};

    #[test]
    fn accepts_the_documented_shape() {
        for ok in ["a", "alice", "0", "ci-bot", "j.doe_2", &"a".repeat(32)] {
            assert_eq!(Handle::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn the_pattern_says_what_parse_does() {
        let parses = |text: &str| Handle::parse(text).is_ok();
        assert_longest(HANDLE_PATTERN, parses, MAX_HANDLE_LEN);
        assert_pattern_mirrors(
            HANDLE_PATTERN,
            parses,
            &[
                "a", "alice", "0", "ci-bot", "j.doe_2", "", "Alice", "-lead", ".x", "_x", "a b",
                "a\n", "\na", "ünï", "a:b",
            ],
        );
    }

    #[test]
    fn refuses_everything_else_with_a_reason() {
        for bad in [
            "",
            "Alice",
            "-lead",
            ".hidden",
            "_x",
            "with space",
            "semi;colon",
            "ünï",
            "a:b",
            "a,b",
            &"a".repeat(33),
        ] {
            let err = Handle::parse(bad).unwrap_err();
            assert!(
                !err.to_string().is_empty(),
                "{bad:?} was refused without a reason"
            );
        }
    }
}
