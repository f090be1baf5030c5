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
//!   looks like a literal secret (`values.rs`): code and prose that merely
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

mod patterns;
mod values;

use patterns::PATTERNS;
use regex::{Regex, RegexSet};
use std::{borrow::Cow, sync::LazyLock};
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
    if let Some(kind) = split_relay_token(&text) {
        return Some(kind);
    }
    let text = text.as_ref();
    let scanner = &*SCANNER;
    let hits = scanner.set.matches(text);
    if !hits.matched_any() {
        return None;
    }
    hits.iter().find_map(|index| {
        let pattern = &PATTERNS[index];
        scanner.each[index]
            .find_iter(text)
            .any(|m| !stand_in(m.as_str()) && (pattern.plausible)(m.as_str()))
            .then_some(pattern.kind)
    })
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
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
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
/// words).
fn split_relay_token(text: &str) -> Option<&'static str> {
    use crate::model::{OAUTH_TOKEN_PREFIX, TOKEN_PREFIX};
    // What follows a person's prefix in one the OAuth server issued.
    let oauth = &OAUTH_TOKEN_PREFIX[TOKEN_PREFIX.len()..];
    const BODY: usize = crate::model::TOKEN_BODY_LEN;
    const MIN_PIECE: usize = 10;
    let separator = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n' | '"' | '\'' | '`' | '+' | '\\');
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(TOKEN_PREFIX) {
        let mut start = from + at + TOKEN_PREFIX.len();
        from = start;
        if lower[start..].starts_with(oauth) {
            start += oauth.len();
        }
        let mut body = String::with_capacity(BODY);
        let mut piece = 0;
        for c in lower[start..].chars() {
            if body.len() == BODY {
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
            body.push(c);
            piece += 1;
        }
        if body.len() == BODY && (piece >= MIN_PIECE || piece == body.len()) {
            return Some("a crosstalk token");
        }
    }
    None
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
