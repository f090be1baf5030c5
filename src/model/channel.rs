//! Channel names: the open conversations a whole team reads (`release`, `ops`).

/// The longest channel name, in bytes (all of them ASCII).
pub const MAX_CHANNEL_LEN: usize = 64;

/// [`Channel::parse`]'s rule as a regular expression, for the API's schemas
/// (held to it by the tests below).
pub const CHANNEL_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";

/// A channel's name: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, safe in URLs and logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Channel(String);

/// Why a channel name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "channel {0:?} is not a valid name: use 1 to {MAX_CHANNEL_LEN} letters, digits, '.', '_' or \
     '-', starting with a letter or digit"
)]
pub struct ChannelError(String);

impl Channel {
    pub fn parse(name: &str) -> Result<Channel, ChannelError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_CHANNEL_LEN
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if ok {
            Ok(Channel(name.to_owned()))
        } else {
            Err(ChannelError(name.to_owned()))
        }
    }
}

text_type!(Channel);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{assert_longest, assert_pattern_mirrors};

    #[test]
    fn accepts_the_documented_shape_and_refuses_the_rest() {
        for ok in ["ops", "Release-1.4", "a", "0_x", &"c".repeat(64)] {
            assert_eq!(Channel::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "-x", ".x", "with space", "a/b", "ünï", &"c".repeat(65)] {
            assert!(Channel::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_pattern_says_what_parse_does() {
        let parses = |text: &str| Channel::parse(text).is_ok();
        assert_longest(CHANNEL_PATTERN, parses, MAX_CHANNEL_LEN);
        assert_pattern_mirrors(
            CHANNEL_PATTERN,
            parses,
            &[
                "ops",
                "Release-1.4",
                "a",
                "0_x",
                "",
                "-x",
                ".x",
                "a b",
                "a/b",
                "ünï",
                "x\n",
            ],
        );
    }
}
