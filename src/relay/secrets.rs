//! Refusing messages that carry likely secrets.
//!
//! One table of named patterns. A message is checked before it is stored; a
//! hit refuses the whole message and names the kind of secret, never the text
//! that matched. The scan is best effort: it catches the shapes that leak in
//! practice, and says nothing about secrets it has no pattern for.

use regex::{Regex, RegexSet};
use std::sync::LazyLock;

/// One kind of secret and how to recognise it.
struct Pattern {
    /// What the refusal calls it ("an AWS access key id").
    kind: &'static str,
    regex: &'static str,
    /// A second look at a match, for kinds whose shape alone also fits
    /// harmless text (placeholders like `${DB_PASSWORD}`).
    plausible: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

/// The value of an assignment or URL password is a literal, not a
/// placeholder, an environment lookup or a redaction.
fn literal_value(matched: &str) -> bool {
    let value = matched
        .rsplit(['=', ':'])
        .next()
        .unwrap_or(matched)
        .trim_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '@' | '`'));
    let placeholder = value.starts_with(['$', '<', '{', '%', '*'])
        || value.contains("${")
        || value
            .chars()
            .all(|c| c == '*' || c == 'x' || c == 'X' || c == '.')
        || [
            "changeme",
            "redacted",
            "example",
            "placeholder",
            "your_",
            "your-",
            "xxxx",
        ]
        .iter()
        .any(|word| value.to_ascii_lowercase().contains(word))
        || value.contains("getenv")
        || value.contains("environ")
        || value.contains("process.env")
        || value.contains("env::var")
        || value.contains('(');
    !placeholder
}

/// The table. Order matters only for which kind a message with several
/// secrets is refused for: the more specific kinds come first.
static PATTERNS: &[Pattern] = &[
    Pattern {
        kind: "a crosstalk token",
        regex: r"\bxtalk_[a-z2-7]{52}\b",
        plausible: always,
    },
    Pattern {
        kind: "a private key",
        regex: r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----",
        plausible: always,
    },
    Pattern {
        kind: "an AWS access key id",
        regex: r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        plausible: always,
    },
    Pattern {
        kind: "an AWS secret access key",
        regex: r#"(?i)aws.{0,20}secret.{0,20}[:=]\s*["']?[A-Za-z0-9/+]{40}\b"#,
        plausible: always,
    },
    Pattern {
        kind: "a GitHub token",
        regex: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})\b",
        plausible: always,
    },
    Pattern {
        kind: "a GitLab token",
        regex: r"\bglpat-[A-Za-z0-9_-]{20,}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Slack token",
        regex: r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Slack webhook URL",
        regex: r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
        plausible: always,
    },
    Pattern {
        kind: "a Stripe secret key",
        regex: r"\b[rs]k_live_[A-Za-z0-9]{20,}\b",
        plausible: always,
    },
    Pattern {
        kind: "an Anthropic API key",
        regex: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "an OpenAI API key",
        regex: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Google API key",
        regex: r"\bAIza[0-9A-Za-z_-]{35}\b",
        plausible: always,
    },
    Pattern {
        kind: "an npm token",
        regex: r"\bnpm_[A-Za-z0-9]{36}\b",
        plausible: always,
    },
    Pattern {
        kind: "a PyPI token",
        regex: r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
        plausible: always,
    },
    Pattern {
        kind: "a JSON Web Token",
        regex: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        plausible: always,
    },
    Pattern {
        kind: "a URL with a password",
        regex: r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]+:[^\s@/]{3,}@[^\s/]",
        plausible: url_password,
    },
    Pattern {
        kind: "a password assignment",
        regex: r#"(?i)\b(?:password|passwd|pwd|secret|client_secret|api_?key|access_?key|auth_?token|private_?key)\b["']?\s*[:=]\s*["']?[^\s"',;]{6,}"#,
        plausible: literal_value,
    },
];

fn url_password(matched: &str) -> bool {
    // "scheme://user:PASSWORD@host": look only at the password part.
    let after_scheme = matched.split_once("://").map_or(matched, |(_, rest)| rest);
    let password = after_scheme.split_once(':').map_or("", |(_, rest)| {
        rest.rsplit_once('@').map_or(rest, |(pw, _)| pw)
    });
    literal_value(password)
}

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

/// Returns the kind of the first likely secret in `text`, if any.
pub fn find_secret(text: &str) -> Option<&'static str> {
    let scanner = &*SCANNER;
    let hits = scanner.set.matches(text);
    if !hits.matched_any() {
        return None;
    }
    hits.iter().find_map(|index| {
        let pattern = &PATTERNS[index];
        scanner.each[index]
            .find_iter(text)
            .any(|m| (pattern.plausible)(m.as_str()))
            .then_some(pattern.kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::token::Token;

    /// Each kind with one sample it must catch and one look-alike it must let pass.
    fn cases() -> Vec<(&'static str, String, &'static str)> {
        vec![
            ("a crosstalk token", Token::generate().expose().to_owned(), "the xtalk_ prefix marks our tokens"),
            ("a private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...".into(), "-----BEGIN PUBLIC KEY-----"),
            ("an AWS access key id", "key AKIAIOSFODNN7EXAMPLE here".into(), "AKIA is how AWS ids start"),
            (
                "an AWS secret access key",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
                "set aws_secret_access_key from the vault",
            ),
            ("a GitHub token", format!("ghp_{}", "a1B2".repeat(9)), "ghp_ tokens are classic PATs"),
            ("a GitLab token", "glpat-abcdefghij0123456789".into(), "glpat- is GitLab's prefix"),
            ("a Slack token", "xoxb-123456789012-abcdefghijkl".into(), "xoxb- bot tokens"),
            (
                "a Slack webhook URL",
                "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX".into(),
                "https://hooks.slack.com/ is where webhooks live",
            ),
            ("a Stripe secret key", format!("sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc"), "sk_test_ keys are for tests"),
            ("an Anthropic API key", format!("sk-ant-api03-{}", "x1".repeat(20)), "sk-ant- is the prefix"),
            ("an OpenAI API key", format!("sk-proj-{}", "Ab3".repeat(10)), "risk-averse plans"),
            ("a Google API key", format!("AIza{}", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"), "AIza starts Google keys"),
            ("an npm token", format!("npm_{}", "a".repeat(36)), "npm_config_registry"),
            ("a PyPI token", format!("pypi-AgEIcHlwaS5vcmc{}", "b".repeat(50)), "pypi-AgE prefix"),
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
                "a password assignment",
                "password=hunter2hunter2".into(),
                "password = os.environ[\"DB_PASSWORD\"]",
            ),
        ]
    }

    #[test]
    fn every_kind_matches_its_sample_and_misses_its_look_alike() {
        let kinds: Vec<_> = PATTERNS.iter().map(|p| p.kind).collect();
        let cases = cases();
        for kind in &kinds {
            assert!(
                cases.iter().any(|(k, ..)| k == kind),
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
    fn everyday_text_passes() {
        for text in [
            "Which branch has the migration? I think 3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b.",
            "uuid 123e4567-e89b-12d3-a456-426614174000, sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "The password policy asks for 12 characters; reset yours in the admin page.",
            "password: <redacted>",
            "api_key = ${API_KEY}",
            "https://example.com/path?q=1",
        ] {
            assert_eq!(find_secret(text), None, "refused {text:?}");
        }
    }
}
