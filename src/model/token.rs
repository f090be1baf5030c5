//! Tokens: 256 random bits behind a recognisable prefix, stored only as a hash.

use sha2::{Digest, Sha256};
use std::fmt;

/// Every token starts with this, so a leaked one can be spotted by this relay's
/// secret scanner and by anyone else's.
pub const TOKEN_PREFIX: &str = "xtalk_";

/// What the relay's OAuth authorization server issues (codes, access and
/// refresh tokens) starts with this after [`TOKEN_PREFIX`], so a refused
/// token can be told from a person's: a person's static token that is
/// refused is told so, and is never pointed into OAuth discovery.
pub const OAUTH_TOKEN_PREFIX: &str = "xtalk_oauth_";

/// Length of the random part: 32 bytes in lowercase base32, without padding.
pub const TOKEN_BODY_LEN: usize = 52;

/// Length of an OAuth refresh token's family, the first half of its body
/// (16 random bytes): every refresh token of one grant shares it, so one
/// presented after it was replaced is known for its grant's without a
/// row kept for it (`Token::generate_refresh`).
pub const REFRESH_FAMILY_LEN: usize = TOKEN_BODY_LEN / 2;

/// A freshly made token. It exists in the clear only until it is shown once.
pub struct Token(String);

impl Token {
    /// Makes a new person's token from the operating system's random source.
    pub fn generate() -> Token {
        Token::with_prefix(TOKEN_PREFIX)
    }

    /// Makes a new OAuth code or token, as [`Token::generate`] but behind
    /// [`OAUTH_TOKEN_PREFIX`].
    pub fn generate_for_oauth() -> Token {
        Token::with_prefix(OAUTH_TOKEN_PREFIX)
    }

    /// Makes a new OAuth refresh token: [`OAUTH_TOKEN_PREFIX`], its family
    /// (that of the token it replaces, [`refresh_family`], or a new grant's
    /// [`Token::new_refresh_family`]), then 16 random bytes of its own. It
    /// has the shape of every other OAuth token.
    pub fn generate_refresh(family: &str) -> Token {
        Token(format!(
            "{OAUTH_TOKEN_PREFIX}{family}{}",
            base32(&random::<16>())
        ))
    }

    /// A new grant's refresh family: 16 random bytes, as
    /// [`REFRESH_FAMILY_LEN`] letters. Secret as a token is: only ever
    /// shown inside one.
    pub fn new_refresh_family() -> String {
        base32(&random::<16>())
    }

    fn with_prefix(prefix: &str) -> Token {
        Token(format!("{prefix}{}", base32(&random::<32>())))
    }

    /// The token in the clear: only for showing it to its owner once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> TokenHash {
        TokenHash::of(&self.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

/// Whether `presented` has the shape of a person's token (not one the
/// OAuth authorization server issued): what a 401 may say depends on it.
pub fn looks_like_a_persons_token(presented: &str) -> bool {
    presented
        .strip_prefix(TOKEN_PREFIX)
        .is_some_and(|body| body.len() == TOKEN_BODY_LEN && body.bytes().all(is_base32))
}

/// The family of what was presented as an OAuth refresh token: the first
/// [`REFRESH_FAMILY_LEN`] letters of its body; `None` if it has not the
/// shape of a token the OAuth server issues (then it is none of them).
pub fn refresh_family(presented: &str) -> Option<&str> {
    let body = presented.strip_prefix(OAUTH_TOKEN_PREFIX)?;
    (body.len() == TOKEN_BODY_LEN && body.bytes().all(is_base32))
        .then(|| &body[..REFRESH_FAMILY_LEN])
}

/// `N` bytes from the operating system's random source.
pub(super) fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
}

fn is_base32(byte: u8) -> bool {
    matches!(byte, b'a'..=b'z' | b'2'..=b'7')
}

/// The SHA-256 of a token: all the store ever keeps.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// The hash as the store keeps it.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A hash read back from the store.
    pub fn from_bytes(bytes: [u8; 32]) -> TokenHash {
        TokenHash(bytes)
    }

    /// Hashes whatever a client presented; a wrong token simply finds nobody.
    pub fn of(presented: &str) -> TokenHash {
        TokenHash(Sha256::digest(presented.as_bytes()).into())
    }

    /// Compares in time independent of where the hashes differ.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(<hidden>)")
    }
}

/// RFC 4648 base32, lowercase, unpadded: double-click selectable and free of
/// characters that shells or URLs treat specially.
pub(super) fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_documented_shape_and_differ() {
        let a = Token::generate();
        let b = Token::generate();
        assert!(a.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + TOKEN_BODY_LEN);
        assert!(
            a.expose()[TOKEN_PREFIX.len()..]
                .bytes()
                .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c))
        );
        assert_ne!(a.expose(), b.expose());
    }

    #[test]
    fn oauth_tokens_are_told_from_a_persons() {
        let person = Token::generate();
        let oauth = Token::generate_for_oauth();
        assert!(oauth.expose().starts_with(OAUTH_TOKEN_PREFIX));
        assert_eq!(
            oauth.expose().len(),
            OAUTH_TOKEN_PREFIX.len() + TOKEN_BODY_LEN
        );
        assert!(looks_like_a_persons_token(person.expose()));
        assert!(!looks_like_a_persons_token(oauth.expose()));
        for other in ["", "xtalk_", "xtalk_short", "some-service-token", "Bearer"] {
            assert!(!looks_like_a_persons_token(other), "{other:?}");
        }
        let upper = person.expose().to_uppercase().replace("XTALK_", "xtalk_");
        assert!(!looks_like_a_persons_token(&upper));
    }

    #[test]
    fn refresh_tokens_of_one_family_share_its_first_half_and_look_like_any_oauth_token() {
        let first = Token::generate_refresh(&Token::new_refresh_family());
        let family = refresh_family(first.expose()).expect("a refresh token has a family");
        assert_eq!(family.len(), REFRESH_FAMILY_LEN);
        let next = Token::generate_refresh(family);
        assert_eq!(refresh_family(next.expose()), Some(family));
        assert_ne!(next.expose(), first.expose());
        for token in [&first, &next] {
            assert_eq!(
                token.expose().len(),
                OAUTH_TOKEN_PREFIX.len() + TOKEN_BODY_LEN
            );
            assert!(!looks_like_a_persons_token(token.expose()));
        }
        let other = Token::generate_refresh(&Token::new_refresh_family());
        assert_ne!(refresh_family(other.expose()), Some(family));
        // An access token, or a refresh token from before families, has
        // one too (its first half); anything else has none.
        assert!(refresh_family(Token::generate_for_oauth().expose()).is_some());
        let long = "x".repeat(64);
        for other in ["", "xtalk_oauth_short", "xtalk_oauth_", long.as_str()] {
            assert_eq!(refresh_family(other), None, "{other:?}");
        }
        let person = Token::generate();
        assert_eq!(refresh_family(person.expose()), None);
    }

    #[test]
    fn the_hash_is_sha256_of_the_whole_token() {
        let token = Token::generate();
        assert!(token.hash().matches(&TokenHash::of(token.expose())));
        assert!(!token.hash().matches(&TokenHash::of("xtalk_wrong")));
    }

    #[test]
    fn base32_matches_rfc4648() {
        assert_eq!(base32(b"foobar"), "mzxw6ytboi");
        assert_eq!(base32(b"f"), "my");
    }

    #[test]
    fn debug_never_shows_the_token() {
        let token = Token::generate();
        assert!(!format!("{token:?}").contains(&token.expose()[6..]));
    }
}
