//! The short texts a person writes besides bodies: type labels, statuses,
//! display names. Each is one line, bounded, free of invisible characters
//! (which could make it read as something it is not), and, like a body,
//! free of likely secrets: teammates see them all.

use super::{RelayError, RelayResult, secrets};

/// Checks one line of text; `shape` says what it must be, for the refusal.
pub(super) fn one_line(
    text: &str,
    max_chars: usize,
    shape: impl Fn() -> String,
) -> RelayResult<()> {
    if text.chars().count() > max_chars || text.chars().any(char::is_control) {
        return Err(RelayError::BadInput(shape()));
    }
    if text.contains(secrets::is_invisible) {
        return Err(RelayError::BadInput(format!(
            "{}; it may not hold invisible characters (zero-width spaces, bidirectional \
             controls), which could make it read as something it is not",
            shape()
        )));
    }
    if let Some(kind) = secrets::find_secret(text) {
        return Err(RelayError::SecretRefused(kind));
    }
    Ok(())
}
