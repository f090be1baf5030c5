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
/// placeholder, an environment lookup, a reference to another variable or a
/// redaction.
fn literal_value(matched: &str) -> bool {
    let value = matched
        .rsplit(['=', ':'])
        .next()
        .unwrap_or(matched)
        .trim_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '@' | '`'));
    let lower = value.to_ascii_lowercase();
    let identifier = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'));
    let placeholder = value.len() < 6
        || value.starts_with(['$', '<', '{', '%', '*', '['])
        || value.contains("${")
        || value.contains("{{")
        || value.contains('(')
        || value.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '#'))
        // `self.password`, `config.api_key`: a reference, not a value.
        || (identifier && value.contains('.'))
        // `DB_PASSWORD`: the name of a variable that holds it.
        || (identifier && value.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        || ["true", "false", "null", "none", "undefined", "required", "optional", "string"]
            .contains(&lower.as_str())
        || [
            "changeme", "change_me", "redacted", "example", "placeholder", "your_", "your-",
            "xxxx", "getenv", "environ", "process.env", "env::var", "secretref", "vault",
        ]
        .iter()
        .any(|word| lower.contains(word));
    !placeholder
}

/// Generated tokens mix letters and digits; hyphenated words rarely do.
/// Used where a prefix alone could start a word (`sk-learn-…`).
fn mixed(matched: &str) -> bool {
    let tail = matched
        .split_once(['-', '_', '.'])
        .map_or(matched, |(_, tail)| tail);
    tail.chars().any(|c| c.is_ascii_digit()) && tail.chars().any(|c| c.is_ascii_alphabetic())
}

/// The table. Order matters only for which kind a message with several
/// secrets is refused for: the more specific kinds come first.
static PATTERNS: &[Pattern] = &[
    // This relay's own tokens.
    Pattern {
        kind: "a crosstalk token",
        regex: r"\bxtalk_[a-z2-7]{52}\b",
        plausible: always,
    },
    // Private keys of every PEM and OpenSSH kind, and PuTTY's.
    Pattern {
        kind: "a private key",
        regex: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:",
        plausible: always,
    },
    // Cloud providers.
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
        kind: "a Google API key",
        regex: r"\bAIza[0-9A-Za-z_-]{35}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Google OAuth client secret",
        regex: r"\bGOCSPX-[A-Za-z0-9_-]{28}\b",
        plausible: always,
    },
    Pattern {
        kind: "an Azure storage account key",
        regex: r"(?i)AccountKey=[A-Za-z0-9+/]{86}==",
        plausible: always,
    },
    Pattern {
        kind: "a DigitalOcean token",
        regex: r"\bdo[por]_v1_[a-f0-9]{64}\b",
        plausible: always,
    },
    Pattern {
        kind: "a HashiCorp Vault token",
        regex: r"\bhv[sb]\.[A-Za-z0-9_-]{24,}",
        plausible: mixed,
    },
    // Source hosts and CI.
    Pattern {
        kind: "a GitHub token",
        regex: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})\b",
        plausible: always,
    },
    Pattern {
        kind: "a GitLab token",
        regex: r"\bgl(?:pat|dt|rt|cbt|ptt|ft|oas)-[A-Za-z0-9_-]{20,}",
        plausible: mixed,
    },
    Pattern {
        kind: "an Atlassian API token",
        regex: r"\bATATT3[A-Za-z0-9_=-]{100,}",
        plausible: always,
    },
    // Chat.
    Pattern {
        kind: "a Slack token",
        regex: r"\bx(?:ox[abposr]|app)-[A-Za-z0-9-]{10,}",
        plausible: mixed,
    },
    Pattern {
        kind: "a Slack webhook URL",
        regex: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Discord webhook URL",
        regex: r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Microsoft Teams webhook URL",
        regex: r"https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Telegram bot token",
        regex: r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}",
        plausible: always,
    },
    // Payments and mail.
    Pattern {
        kind: "a Stripe key",
        regex: r"\b(?:[rs]k_live|whsec)_[A-Za-z0-9]{20,}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Square token",
        regex: r"\bsq0(?:csp|atp)-[A-Za-z0-9_-]{22,}",
        plausible: always,
    },
    Pattern {
        kind: "a Shopify token",
        regex: r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        plausible: always,
    },
    Pattern {
        kind: "a SendGrid API key",
        regex: r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Twilio API key",
        regex: r"\bSK[0-9a-f]{32}\b",
        plausible: mixed,
    },
    // AI providers.
    Pattern {
        kind: "an Anthropic API key",
        regex: r"\bsk-ant-[A-Za-z0-9_-]{32,}",
        plausible: always,
    },
    Pattern {
        kind: "an OpenAI API key",
        regex: r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}|\bsk-[A-Za-z0-9]{40,}\b",
        plausible: mixed,
    },
    Pattern {
        kind: "a Hugging Face token",
        regex: r"\bhf_[A-Za-z]{34,}\b",
        plausible: always,
    },
    Pattern {
        kind: "a Groq API key",
        regex: r"\bgsk_[A-Za-z0-9]{48,}\b",
        plausible: mixed,
    },
    Pattern {
        kind: "a Replicate token",
        regex: r"\br8_[A-Za-z0-9]{37}\b",
        plausible: mixed,
    },
    // Package registries.
    Pattern {
        kind: "an npm token",
        regex: r"\bnpm_[A-Za-z0-9]{36}\b",
        plausible: mixed,
    },
    Pattern {
        kind: "a PyPI token",
        regex: r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
        plausible: always,
    },
    Pattern {
        kind: "a RubyGems key",
        regex: r"\brubygems_[a-f0-9]{48}\b",
        plausible: always,
    },
    Pattern {
        kind: "a crates.io token",
        regex: r"\bcio[A-Za-z0-9]{32}\b",
        plausible: mixed,
    },
    Pattern {
        kind: "a Docker Hub token",
        regex: r"\bdckr_pat_[A-Za-z0-9_-]{27,}",
        plausible: always,
    },
    Pattern {
        kind: "a NuGet key",
        regex: r"\boy2[a-z0-9]{43}\b",
        plausible: mixed,
    },
    // Generic shapes.
    Pattern {
        kind: "a JSON Web Token",
        regex: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        plausible: always,
    },
    Pattern {
        kind: "a URL with a password",
        regex: r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]*:[^\s@/]{3,}@[^\s/]",
        plausible: url_password,
    },
    Pattern {
        kind: "a password assignment",
        regex: r#"(?i)\b(?:[a-z0-9]+_)*(?:password|passwd|pwd|passphrase|secret|client_secret|secret_key|api_?key|apikey|access_?key|auth_?token|access_?token|private_?key|token)\b["']?\s*(?::|=|:=|=>)\s*["']?[^\s"',;]{6,}"#,
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

/// Every kind of secret the scanner knows, in the order it checks them.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    PATTERNS.iter().map(|p| p.kind)
}

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
            ("a GitLab token", format!("glpat-{}", b64(20)), "glpat-token-rotation-guide-for-everyone"),
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
                "a password assignment",
                "password=hunter2hunter2".into(),
                "password = os.environ[\"DB_PASSWORD\"]",
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
        ] {
            assert_eq!(find_secret(text), None, "refused {text:?}");
        }
    }
}
