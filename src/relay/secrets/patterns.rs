//! The table of secret kinds: what each is called in a refusal, its shape,
//! and, for shapes that harmless text shares, a second look at the match.
//!
//! Every pattern is linear-time (the regex crate has no backtracking) and
//! uses ASCII word boundaries, which keep the fast engines on any input.

use super::values;

/// One kind of secret and how to recognise it.
pub(super) struct Pattern {
    /// What the refusal calls it ("an AWS access key id").
    pub kind: &'static str,
    pub regex: &'static str,
    /// A second look at a match, for kinds whose shape alone also fits
    /// harmless text (placeholders like `${DB_PASSWORD}`).
    pub plausible: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

/// A type annotation between an assignment's name and its `=`, on one
/// line (`API_TOKEN: &'static str = `, `crv_key: t.Type[PrivateOKPKey] = `,
/// `sort_key: t.Callable[[t.Any], t.Any] | None = `), so that the value
/// after it is the one judged: the type is code.
macro_rules! annotation {
    () => {
        r#"[ \t]*:[ \t]*&?(?:'[a-z_]+[ \t]+)?(?:[A-Za-z_][A-Za-z0-9_.:&]*(?:[<\[(][^=\n"`]*[>\])])?|[\[(][^=\n"`]*[\])])(?:[ \t]*\|[ \t]*[A-Za-z_][A-Za-z0-9_.:&\[\]<>]*)*[ \t]+=[ \t]"#
    };
}

/// What follows a secret's name in an assignment: its annotation or its
/// operator, and the value assigned (quoted, or up to a space or a `,`).
macro_rules! assignment {
    () => {
        concat!(
            r#"["']?(?:"#,
            annotation!(),
            r#"|\s*(?:=>|:=|:|=))\s*(?:"[^"\n]*"|'[^'\n]*'|`[^`\n]*`|[^\s"'`,;]+)"#
        )
    };
}

/// The table. Order matters only for which kind a message with several
/// secrets is refused for: the more specific kinds come first.
///
/// A prefix that is the provider's alone (`glpat-`, `hvs.`, `npm_`) is
/// enough: what follows it is not tested for randomness, which a random
/// value fails now and then (a GitLab token's 20 characters hold no digit
/// one time in thirty). Short or common prefixes (`sk-`, `SK`, `cio`) get
/// the second look of [`values::random`].
pub(super) static PATTERNS: &[Pattern] = &[
    // This relay's own tokens.
    Pattern {
        kind: "a crosstalk token",
        regex: r"(?i)xtalk_(?:oauth_)?[a-z2-7]{52}",
        plausible: always,
    },
    // Private keys of every PEM and OpenSSH kind, and PuTTY's.
    Pattern {
        kind: "a private key",
        regex: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-[0-9]+:",
        plausible: always,
    },
    // The same, base64-encoded (a kubeconfig's `client-key-data`)...
    Pattern {
        kind: "a private key",
        regex: r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}",
        plausible: values::encoded_private_key,
    },
    // ...or a key's DER body pasted without its PEM lines: RSA (PKCS#8
    // and PKCS#1), EC (PKCS#8 and SEC1) and Ed25519, each by the fixed
    // bytes that open it (a version of 0 or 1, then the algorithm), which
    // public keys and certificates do not share.
    Pattern {
        kind: "a private key",
        regex: r"(?-u:\b)(?:MII[A-Za-z0-9+/]{3}IBA(?:DANBgkqhkiG9w0BAQEFAAS|AKC)|MIG[A-Za-z0-9+/]AgEAMB[A-Za-z0-9+/]GByqGSM49AgE|MHcCAQEEI|MIGkAgEBBD|MIHcAgEBBEI|MC4CAQAwBQYDK2VwBCIEI)[A-Za-z0-9+/]{16,}",
        plausible: always,
    },
    // Cloud providers.
    Pattern {
        kind: "an AWS access key id",
        regex: r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "an AWS secret access key",
        regex: r#"(?i)(?:aws.{0,20}secret|secret_?access_?key).{0,20}[:=]\s*["']?[A-Za-z0-9/+]{40}(?-u:\b)"#,
        plausible: always,
    },
    Pattern {
        kind: "a Google API key",
        regex: r"(?-u:\b)AIza[0-9A-Za-z_-]{35}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a Google OAuth client secret",
        regex: r"(?-u:\b)GOCSPX-[A-Za-z0-9_-]{28}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "an Azure storage account key",
        regex: r"(?i)AccountKey=[A-Za-z0-9+/]{86}==",
        plausible: always,
    },
    Pattern {
        kind: "a DigitalOcean token",
        regex: r"(?-u:\b)do[por]_v1_[a-f0-9]{64}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a HashiCorp Vault token",
        regex: r"(?-u:\b)hv[sb]\.[A-Za-z0-9_-]{24,}",
        plausible: always,
    },
    // Source hosts and CI.
    Pattern {
        kind: "a GitHub token",
        regex: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a GitLab token",
        regex: r"(?-u:\b)gl(?:pat|dt|rt|cbt|ptt|ft|oas)-[A-Za-z0-9_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "an Atlassian API token",
        regex: r"(?-u:\b)ATATT3[A-Za-z0-9_=-]{100,}",
        plausible: always,
    },
    // Chat.
    Pattern {
        kind: "a Slack token",
        regex: r"(?-u:\b)x(?:ox[abposr]|app)-[A-Za-z0-9-]{10,}",
        plausible: values::random,
    },
    Pattern {
        kind: "a Slack webhook URL",
        regex: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Discord webhook URL",
        regex: r"https://(?:[A-Za-z0-9_-]+\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Microsoft Teams webhook URL",
        regex: r"https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{20,}",
        plausible: always,
    },
    Pattern {
        kind: "a Telegram bot token",
        regex: r"(?-u:\b)[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
        plausible: always,
    },
    // Payments and mail.
    Pattern {
        kind: "a Stripe key",
        regex: r"(?-u:\b)(?:[rs]k_live|whsec)_[A-Za-z0-9]{20,}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a Square token",
        regex: r"(?-u:\b)sq0(?:csp|atp)-[A-Za-z0-9_-]{22,}",
        plausible: always,
    },
    Pattern {
        kind: "a Shopify token",
        regex: r"(?-u:\b)shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a SendGrid API key",
        regex: r"(?-u:\b)SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a Twilio API key",
        regex: r"(?-u:\b)SK[0-9a-f]{32}(?-u:\b)",
        plausible: values::random,
    },
    // AI providers.
    Pattern {
        kind: "an Anthropic API key",
        regex: r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{32,}",
        plausible: always,
    },
    Pattern {
        kind: "an OpenAI API key",
        regex: r"(?-u:\b)sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}|(?-u:\b)sk-[A-Za-z0-9]{40,}(?-u:\b)",
        plausible: values::random,
    },
    Pattern {
        kind: "a Hugging Face token",
        regex: r"(?-u:\b)hf_[A-Za-z]{34,}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a Groq API key",
        regex: r"(?-u:\b)gsk_[A-Za-z0-9]{48,}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a Replicate token",
        regex: r"(?-u:\b)r8_[A-Za-z0-9]{37}(?-u:\b)",
        plausible: always,
    },
    // Package registries.
    Pattern {
        kind: "an npm token",
        regex: r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a PyPI token",
        regex: r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{50,}",
        plausible: always,
    },
    Pattern {
        kind: "a RubyGems key",
        regex: r"(?-u:\b)rubygems_[a-f0-9]{48}(?-u:\b)",
        plausible: always,
    },
    Pattern {
        kind: "a crates.io token",
        regex: r"(?-u:\b)cio[A-Za-z0-9]{32}(?-u:\b)",
        plausible: values::random,
    },
    Pattern {
        kind: "a Docker Hub token",
        regex: r"(?-u:\b)dckr_pat_[A-Za-z0-9_-]{27,}",
        plausible: always,
    },
    Pattern {
        kind: "a NuGet key",
        regex: r"(?-u:\b)oy2[a-z0-9]{43}(?-u:\b)",
        plausible: values::random,
    },
    // Generic shapes.
    Pattern {
        kind: "a JSON Web Token",
        regex: r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        plausible: always,
    },
    Pattern {
        kind: "a URL with a password",
        regex: r#"(?-u:\b)[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]*:[^\s@/]{3,}@[^\s/?#:"'`)<>,;]+"#,
        plausible: values::url_password,
    },
    Pattern {
        kind: "an npm registry token",
        // At a line's start or after the registry's `:`, as `.npmrc` has
        // it: `SERVER_AUTH = '…'` is somebody's constant.
        regex: r#"(?im)(?:^|:)\s*_auth(?:Token)?\s*=\s*["']?[^\s"']{8,}"#,
        plausible: values::assigned_literal,
    },
    Pattern {
        kind: "an Azure shared access key",
        regex: r"(?i)SharedAccess(?:Key|Signature)\s*=\s*[A-Za-z0-9+/%]{20,}={0,2}",
        plausible: always,
    },
    Pattern {
        kind: "a bearer token",
        regex: r"(?i)(?-u:\b)authorization\s*:\s*bearer\s+[A-Za-z0-9._~+/-]{16,}=*",
        plausible: values::bearer,
    },
    // `user:password`, base64-encoded (`Authorization: Basic`, a Docker
    // `config.json` `auth`) or on a command line (`curl -u`).
    Pattern {
        kind: "a user and password",
        regex: r"(?i)(?-u:\b)authorization\s*:\s*basic\s+[A-Za-z0-9+/]{8,}={0,2}",
        plausible: values::encoded_credentials,
    },
    Pattern {
        kind: "a user and password",
        regex: r#""auth"\s*:\s*"[A-Za-z0-9+/]{8,}={0,2}""#,
        plausible: values::encoded_credentials,
    },
    Pattern {
        kind: "a user and password",
        regex: r#"(?m)(?:^|\s)(?:-u|--user)(?:\s+|=)["']?[A-Za-z0-9._@+-]+:[^\s"']{4,}"#,
        plausible: values::command_line_credentials,
    },
    Pattern {
        kind: "a password assignment",
        // A name that is part of a path (`AWS::ApiGateway::ApiKey`), or a
        // URL's query (`?token=`), is matched with what says so, and a
        // type annotation (`API_TOKEN: &str = "…"`, `crv_key: t.Type[…] =
        // …`) with the value after it, so that the second look can tell.
        regex: concat!(
            r#"(?i)(?:[?&]|(?-u:\b))(?:[a-z0-9]+(?:[_-]|::))*(?:[a-z]*pass(?:word|wd|phrase)?|pwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?key|auth[_-]?token|access[_-]?token|private[_-]?key|token)"#,
            assignment!()
        ),
        plausible: values::assigned_literal,
    },
    // `SESSION_KEY=`, `ENCRYPTION_KEY=`, Laravel's `APP_KEY=base64:…`:
    // keys of every other name, where only a generated value counts
    // (`cache_key = "v2_users"` is a name).
    Pattern {
        kind: "a key assignment",
        regex: concat!(r#"(?i)(?-u:\b)(?:[a-z0-9]+(?:[_-]|::))+key"#, assignment!()),
        plausible: values::assigned_key,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    /// What the pattern of `kind` matches in `text`.
    fn matches(kind: &str, text: &str) -> Vec<String> {
        let mut found = Vec::new();
        for pattern in PATTERNS.iter().filter(|pattern| pattern.kind == kind) {
            let regex = Regex::new(pattern.regex).expect("the pattern compiles");
            found.extend(regex.find_iter(text).map(|m| m.as_str().to_owned()));
        }
        found
    }

    /// A type annotation is matched with the value after it, on its line,
    /// so that the value is what the second look judges (issue 39).
    #[test]
    fn an_annotation_is_matched_with_the_value_after_it() {
        for (kind, line, matched) in [
            (
                "a password assignment",
                "pub const IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN;",
                "IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN",
            ),
            (
                "a password assignment",
                "pub const IFLA_VXLAN_LOCALBYPASS: _bindgen_ty_24 = _bindgen_ty_24::IFLA_VXLAN_LOCALBYPASS;",
                "IFLA_VXLAN_LOCALBYPASS: _bindgen_ty_24 = _bindgen_ty_24::IFLA_VXLAN_LOCALBYPASS",
            ),
            (
                "a key assignment",
                "crv_key: t.Type[PrivateOKPKey] = PRIVATE_KEYS_MAP[crv]",
                "crv_key: t.Type[PrivateOKPKey] = PRIVATE_KEYS_MAP[crv]",
            ),
            (
                "a key assignment",
                "sort_key: t.Callable[[t.Any], t.Any] | None = None,",
                "sort_key: t.Callable[[t.Any], t.Any] | None = None",
            ),
            (
                "a password assignment",
                "static SECRET: &'static str = \"x\";",
                "SECRET: &'static str = \"x\"",
            ),
            // No annotation: a value, then a comma; a comparison.
            (
                "a password assignment",
                "api_key: a7Xk9QzLm2Pb4Rt8, region = us-east-1",
                "api_key: a7Xk9QzLm2Pb4Rt8",
            ),
            ("a password assignment", "password: x == y", "password: x"),
        ] {
            assert_eq!(matches(kind, line), [matched], "{line:?}");
        }
    }

    /// Each of the issue's six lines, whole, is no secret of any kind.
    #[test]
    fn the_lines_real_code_was_refused_for_pass_every_pattern() {
        for line in [
            "auth_token = b64decode(auth['authorizationToken']).decode()",
            "\"input_token\": \"pagination_token\",",
            "crv_key: t.Type[PrivateOKPKey] = PRIVATE_KEYS_MAP[crv]",
            "auth_token = b64encode(f\"AWS:{password}\".encode(\"ascii\")).decode()",
            "pub const IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN;",
            "pub const IFLA_VXLAN_LOCALBYPASS: _bindgen_ty_24 = _bindgen_ty_24::IFLA_VXLAN_LOCALBYPASS;",
        ] {
            for pattern in PATTERNS {
                let regex = Regex::new(pattern.regex).expect("the pattern compiles");
                for m in regex.find_iter(line) {
                    assert!(
                        !(pattern.plausible)(m.as_str()),
                        "{line:?} counted as {} for {:?}",
                        pattern.kind,
                        m.as_str()
                    );
                }
            }
        }
    }
}
