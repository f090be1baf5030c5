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

/// The characters `str::trim` takes off (Unicode's White_Space), as the
/// inside of a regular expression's class.
pub(crate) const WHITESPACE: &str =
    r"\t-\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";
/// `char::is_control`'s characters (Unicode's Cc), likewise.
const CONTROL: &str = r"\u0000-\u001F\u007F-\u009F";
/// [`secrets::is_invisible`]'s characters, likewise.
const INVISIBLE: &str =
    r"\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF";

/// [`one_line`]'s rule, for text the relay trims first, as a regular
/// expression for the API's schemas: `min` (0 or 1) to `max` characters
/// once trimmed, none a control or an invisible character. (Whether it
/// holds a secret no pattern can say.)
pub fn line_pattern(min: usize, max: usize) -> String {
    trimmed_pattern(min, max, &format!("{CONTROL}{INVISIBLE}"))
}

/// Text the relay trims first, of `min` (0 or 1) to `max` characters once
/// trimmed, none of them `forbidden` (the inside of a class, or empty).
pub(crate) fn trimmed_pattern(min: usize, max: usize, forbidden: &str) -> String {
    let edge = format!("[^{WHITESPACE}{forbidden}]");
    let inner = match forbidden {
        "" => r"[\s\S]".to_owned(),
        _ => format!("[^{forbidden}]"),
    };
    let text = match max {
        0 => String::new(),
        1 => edge,
        _ => format!("{edge}(?:{inner}{{0,{}}}{edge})?", max - 2),
    };
    let text = if min == 0 {
        format!("(?:{text})?")
    } else {
        text
    };
    format!("^[{WHITESPACE}]*{text}[{WHITESPACE}]*$")
}

/// A body's rule (see `check_body`): something besides whitespace, and no
/// NUL, which no database's text holds.
pub fn body_pattern() -> String {
    format!(r"^[^\u0000]*[^{WHITESPACE}\u0000][^\u0000]*$")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string of up to four characters from the ones the rules
    /// treat differently.
    fn tricky() -> Vec<String> {
        let alphabet = [
            'a', 'é', ' ', '\t', '\n', '\u{0}', '\u{7f}', '\u{85}', '\u{a0}', '\u{200b}',
            '\u{3000}', '\u{feff}', '\u{1c}',
        ];
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn the_line_pattern_says_what_one_line_does() {
        for (min, max) in [(0, 2), (1, 2), (0, 1), (1, 3)] {
            let pattern = regex::Regex::new(&line_pattern(min, max)).unwrap();
            for text in tricky() {
                let trimmed = text.trim();
                let ok =
                    trimmed.chars().count() >= min && one_line(trimmed, max, String::new).is_ok();
                assert_eq!(pattern.is_match(&text), ok, "{min}..={max}: {text:?}");
            }
        }
    }

    #[test]
    fn the_trimmed_pattern_counts_what_is_left() {
        for (min, max) in [(0, 2), (1, 2), (1, 3)] {
            let pattern = regex::Regex::new(&trimmed_pattern(min, max, "")).unwrap();
            for text in tricky() {
                let left = text.trim().chars().count();
                assert_eq!(
                    pattern.is_match(&text),
                    (min..=max).contains(&left),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn the_body_pattern_refuses_blank_and_nul() {
        let pattern = regex::Regex::new(&body_pattern()).unwrap();
        for text in tricky() {
            let ok = !text.trim().is_empty() && !text.contains('\0');
            assert_eq!(pattern.is_match(&text), ok, "{text:?}");
        }
    }
}
