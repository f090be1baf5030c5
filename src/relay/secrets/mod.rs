//! Refusing messages that carry likely secrets.
//!
//! One table of named patterns (`patterns.rs`). Everything a person writes
//! is checked before it is stored (bodies, statuses, type labels); a hit
//! refuses the whole message and names the kind of secret, never the text
//! that matched.
//!
//! - **Normalised first**: NFKC (fullwidth letters become ASCII), with
//!   zero-width characters, soft hyphens and bidi controls removed, so a
//!   key with an invisible character pasted into it is still a key.
//! - **Precise**: assignments (`password = …`) count only when the value
//!   looks like a literal secret (`values/`): code and prose that merely
//!   mention tokens pass. `tests/relay/secret_corpus.rs` holds it to zero
//!   refusals over thousands of chunks of real source code.
//! - **Linear**: the regex crate never backtracks, and every pattern uses
//!   ASCII word boundaries, which keep its fast engines on any input; ASCII
//!   text skips normalisation.
//!
//! It is best effort, and says nothing about secrets it has no shape for.
//! It does not decode: a secret that is base64- or URL-encoded, reversed,
//! split across messages, or spelled out is not found (decoding every
//! plausible encoding of every substring would refuse far more harmless
//! text than it would catch). The one exception is crosstalk's own tokens,
//! which are also found split by spaces, quotes or `+` (string
//! concatenation) and in any case.
//!
//! Where a text must be shown however it reads (an approval's input, which
//! its person has to see to allow it), [`mask_secrets`] replaces only what
//! matched, by the same rules, and says when that cannot be trusted.

mod patterns;
mod values;

use patterns::PATTERNS;
use regex::{Regex, RegexSet};
use std::{borrow::Cow, ops::Range, sync::LazyLock};
use unicode_normalization::UnicodeNormalization;

struct Scanner {
    set: RegexSet,
    each: Vec<Regex>,
}

static SCANNER: LazyLock<Scanner> = LazyLock::new(|| {
    let sources: Vec<&str> = PATTERNS.iter().map(|p| p.regex).collect();
    Scanner {
        set: RegexSet::new(&sources).expect("secret patterns compile"),
        each: sources
            .iter()
            .map(|s| Regex::new(s).expect("secret patterns compile"))
            .collect(),
    }
});

/// Every kind of secret the scanner knows, each once (some kinds have
/// several shapes), in the order it checks them.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    PATTERNS
        .iter()
        .enumerate()
        .filter(|(at, pattern)| PATTERNS[..*at].iter().all(|p| p.kind != pattern.kind))
        .map(|(_, pattern)| pattern.kind)
}

/// Returns the kind of the first likely secret in `text`, if any.
pub fn find_secret(text: &str) -> Option<&'static str> {
    let text = normalize(text);
    found(&text).next().map(|(kind, _)| kind)
}

/// What crosstalk's own tokens are called, found whole or split.
const RELAY_TOKEN: &str = "a crosstalk token";

/// Every likely secret in normalised `text`, with its kind and the bytes it
/// holds: crosstalk's own tokens first, then the table's kinds in its
/// order. [`find_secret`] takes the first, [`mask_secrets`] all of them:
/// one set of rules for refusing and for masking.
fn found(text: &str) -> impl Iterator<Item = (&'static str, Range<usize>)> {
    let scanner = &*SCANNER;
    let tokens = split_relay_tokens(text).map(|at| (RELAY_TOKEN, at));
    let hits = scanner.set.matches(text);
    let table = hits.into_iter().flat_map(move |index| {
        let pattern = &PATTERNS[index];
        scanner.each[index]
            .find_iter(text)
            .filter(move |m| !stand_in(m.as_str()) && (pattern.plausible)(m.as_str()))
            .map(move |m| (pattern.kind, m.range()))
    });
    tokens.chain(table)
}

/// Kinds whose shape marks where a secret begins, not where it ends (a
/// private key's `BEGIN` line, the first line of its base64): masking the
/// match would show the rest of the key, so a text holding one cannot be
/// shown at all.
const UNBOUNDED: &[&str] = &["a private key"];

/// A text with its likely secrets masked ([`mask_secrets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masked {
    /// The text as it was, but for each likely secret, replaced by
    /// `[withheld: <its kind>]`.
    pub text: String,
    /// The kinds masked, each once, in the order the scanner checks them;
    /// none when nothing was.
    pub kinds: Vec<&'static str>,
}

/// `text` as it may be shown: each likely secret [`find_secret`] sees in it
/// replaced by `[withheld: <kind>]`, everything else as it was. `Err`, with
/// the kind, when its secrets cannot be masked on their own: then nothing
/// of it may be shown. That is so for a private key (whose match is where
/// it begins, not all of it), and for any text in which the scanner still
/// finds a secret once the matches are masked (one that only the whole
/// text made, or a mask that made one): what is shown is always text that
/// `find_secret` passes.
///
/// The patterns read the normalised text, but the person's own text is
/// shown, not the scanner's folded copy of it (whose other scripts are
/// spaces): each match is mapped back to the characters it came from,
/// whole characters, with the invisible ones inside it. A match that
/// cannot be mapped withholds the whole text.
pub fn mask_secrets(text: &str) -> Result<Masked, &'static str> {
    let mut origins = Vec::new();
    let normalized = normalize_noting(text, Some(&mut origins));
    let unchanged = matches!(normalized, Cow::Borrowed(_));
    // The bytes of `text` that the normalised bytes `at` came from.
    let original = |at: Range<usize>| -> Option<Range<usize>> {
        if unchanged {
            return Some(at);
        }
        let start = *origins.get(at.start)?;
        let last = *origins.get(at.end.checked_sub(1)?)?;
        Some(start..last + text.get(last..)?.chars().next()?.len_utf8())
    };
    let mut spans = Vec::new();
    let mut kinds = Vec::new();
    for (kind, at) in found(&normalized) {
        if UNBOUNDED.contains(&kind) {
            return Err(kind);
        }
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        // (None of the shapes matches nothing; were one to, the check
        // below would see it.)
        if !at.is_empty() {
            let at = original(at).ok_or(kind)?;
            spans.push((at.start..to_the_word_end(text, at.end), kind));
        }
    }
    // In the order they start; one that overlaps the one before is masked
    // with it, under the first one's name.
    spans.sort_by_key(|(at, _)| (at.start, std::cmp::Reverse(at.end)));
    let mut shown = String::with_capacity(text.len());
    let mut done = 0;
    for (at, kind) in spans {
        if at.start >= done {
            shown.push_str(text.get(done..at.start).ok_or(kind)?);
            shown.push_str("[withheld: ");
            shown.push_str(kind);
            shown.push(']');
        }
        done = done.max(at.end);
    }
    shown.push_str(text.get(done..).unwrap_or_default());
    if let Some(kind) = find_secret(&shown) {
        return Err(kind);
    }
    Ok(Masked { text: shown, kinds })
}

/// Where the word that goes on at `end` of `text` ends: a pattern's match
/// may stop inside a secret (an assignment's value at a `;` or a `,` the
/// password holds), so a mask reaches on over visible ASCII up to the next
/// space, quote or closing bracket, hiding a little more rather than a
/// tail of the secret.
fn to_the_word_end(text: &str, end: usize) -> usize {
    let rest = text.get(end..).unwrap_or_default();
    let word = rest
        .find(|c: char| !c.is_ascii_graphic() || "\"'`)]}>".contains(c))
        .unwrap_or(rest.len());
    end + word
}

/// A documentation's stand-in, not a secret: six zeros or `x`s in a row
/// (`ghp_PersonalAccessToken01245678900000000`, `T00000000/B00000000/
/// XXXXXXXX…`), or ten of any one letter or digit. Random text does the
/// first about once in 600,000 32-character hex values (and once in 700
/// million of base62), the second far more rarely.
fn stand_in(matched: &str) -> bool {
    let bytes = matched.as_bytes();
    let run = |length: usize, of: fn(u8) -> bool| {
        bytes
            .windows(length)
            .any(|run| of(run[0]) && run.iter().all(|b| *b == run[0]))
    };
    run(6, |b| matches!(b, b'0' | b'x' | b'X')) || run(10, |b| b.is_ascii_alphanumeric())
}

/// Characters that change nothing a reader sees: zero-width spaces and
/// joiners, the word joiner, the byte-order mark, the soft hyphen, and the
/// bidirectional controls.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// The text the patterns read: ASCII text as it is; in other text, the
/// invisible characters removed, the characters whose NFKC form is ASCII
/// (fullwidth `ＡＫＩＡ`, ligatures, mathematical letters) folded to it, and
/// every other character made a space. Every secret's shape is ASCII, so
/// those characters can only separate secrets from what surrounds them;
/// reading pure ASCII keeps the regex engines on their fastest path, and
/// folding only where NFKC could give ASCII keeps this pass cheap.
fn normalize(text: &str) -> Cow<'_, str> {
    normalize_noting(text, None)
}

/// [`normalize`], noting in `origins` (when asked), for each byte of the
/// text it gives, where in `text` the character it came from starts. ASCII
/// text is given as it is, and nothing is noted.
fn normalize_noting<'t>(text: &'t str, mut origins: Option<&mut Vec<usize>>) -> Cow<'t, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        match c {
            c if c.is_ascii() => out.push(c),
            // Dropped: it changes nothing a reader sees.
            c if is_invisible(c) => {}
            c if may_fold_to_ascii(c) => {
                let start = out.len();
                out.extend(std::iter::once(c).nfkc());
                if !out[start..].is_ascii() {
                    out.truncate(start);
                    out.push(' ');
                }
            }
            _ => out.push(' '),
        }
        if let Some(origins) = origins.as_deref_mut() {
            origins.resize(out.len(), at);
        }
    }
    Cow::Owned(out)
}

/// The blocks holding every character whose NFKC form is ASCII: Latin-1's
/// symbols (`ª`, `²`), general punctuation and letterlike and enclosed
/// forms (`ℌ`, `①`, `Ⓐ`), the ideographic space, ligatures, small and
/// fullwidth forms, and the mathematical alphanumerics.
fn may_fold_to_ascii(c: char) -> bool {
    matches!(
        c as u32,
        0x00A0..=0x00BF
            | 0x2000..=0x24FF
            | 0x3000
            | 0xFB00..=0xFB06
            | 0xFE30..=0xFE6F
            | 0xFF00..=0xFFEF
            | 0x1D400..=0x1D7FF
            | 0x1F100..=0x1F1FF
    )
}

/// crosstalk's own tokens (a person's, or one its OAuth server issued),
/// also when split into pieces by spaces, line breaks, quotes or `+`, or in
/// another case: they are ours, and leaking one is never harmless. Pieces
/// are long (prose that mentions the `xtalk_` prefix is made of short
/// words). Each is given as its bytes, from its prefix to its last
/// character.
fn split_relay_tokens(text: &str) -> impl Iterator<Item = Range<usize>> {
    use crate::model::{OAUTH_TOKEN_PREFIX, TOKEN_PREFIX};
    // What follows a person's prefix in one the OAuth server issued.
    let oauth: &'static str = &OAUTH_TOKEN_PREFIX[TOKEN_PREFIX.len()..];
    const BODY: usize = crate::model::TOKEN_BODY_LEN;
    const MIN_PIECE: usize = 10;
    let separator = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n' | '"' | '\'' | '`' | '+' | '\\');
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(at) = lower[from..].find(TOKEN_PREFIX) {
            let begins = from + at;
            let mut start = begins + TOKEN_PREFIX.len();
            from = start;
            if lower[start..].starts_with(oauth) {
                start += oauth.len();
            }
            let (mut body, mut piece, mut ends) = (0, 0, start);
            for (offset, c) in lower[start..].char_indices() {
                if body == BODY {
                    break;
                }
                if separator(c) {
                    if piece > 0 && piece < MIN_PIECE {
                        break;
                    }
                    piece = 0;
                    continue;
                }
                if !matches!(c, 'a'..='z' | '2'..='7') {
                    break;
                }
                body += 1;
                piece += 1;
                ends = start + offset + c.len_utf8();
            }
            if body == BODY && (piece >= MIN_PIECE || piece == body) {
                from = ends;
                return Some(begins..ends);
            }
        }
        None
    })
}

#[cfg(test)]
mod tests;
