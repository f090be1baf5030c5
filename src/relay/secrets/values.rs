//! The second look at a match: is the value a literal secret, or a
//! placeholder, a name, a type, a call, a path or a word?
//!
//! Code mentions tokens and passwords all day (`token: Option<String>`,
//! `fn f(token: &Token)`, `password: SecretStr`, `next_token =
//! self._get_param("NextToken")`), and so does prose ("Token: expired",
//! "password: incorrect"). An assignment counts only when its value looks
//! like a literal secret: long enough, not a placeholder, and, when it is
//! not quoted, shaped like generated text rather than like code or words.

/// The shortest literal value that counts as a secret.
const MIN_LITERAL: usize = 8;

/// Generated tokens mix letters and digits; hyphenated words rarely do.
/// Used where a prefix alone could start a word (`sk-learn-…`).
pub(super) fn mixed(matched: &str) -> bool {
    let tail = matched
        .split_once(['-', '_', '.'])
        .map_or(matched, |(_, tail)| tail);
    tail.chars().any(|c| c.is_ascii_digit()) && tail.chars().any(|c| c.is_ascii_alphabetic())
}

/// "scheme://user:PASSWORD@host": a password that is not a placeholder or
/// a plain word (`user:password@`), for a host that is not one of the
/// names reserved for documentation (RFC 2606: `example.com`, `.test`, …),
/// where examples in docs and code point.
pub(super) fn url_password(matched: &str) -> bool {
    let after_scheme = matched.split_once("://").map_or(matched, |(_, rest)| rest);
    let Some((credentials, host)) = after_scheme.rsplit_once('@') else {
        return false;
    };
    let password = credentials.split_once(':').map_or("", |(_, pw)| pw);
    password.len() >= 3
        && !placeholder(password)
        && !plain_word(password)
        && !documentation_host(host)
}

fn documentation_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    [
        "example.com",
        "example.net",
        "example.org",
        "example",
        "test",
        "invalid",
        "localhost",
    ]
    .iter()
    .any(|reserved| host == *reserved || host.ends_with(&format!(".{reserved}")))
}

/// `Authorization: Bearer VALUE`: a generated-looking value.
pub(super) fn bearer(matched: &str) -> bool {
    let value = matched.rsplit(char::is_whitespace).next().unwrap_or("");
    !placeholder(value) && generated(value)
}

/// `key = value`, `key: "value"`, `key => value`: the value is a literal
/// secret. Quoted values need only be long and no placeholder or prose;
/// bare values must also look generated.
pub(super) fn assigned_literal(matched: &str) -> bool {
    let Some(raw) = value_of(matched) else {
        return false;
    };
    let (value, quoted) = match raw.chars().next() {
        Some(q @ ('"' | '\'' | '`')) => (raw.trim_matches(q), true),
        _ => (raw, false),
    };
    if value.len() < MIN_LITERAL || placeholder(value) || value.contains(char::is_whitespace) {
        return false;
    }
    if quoted {
        // A quoted word ("incorrect", "password") is prose; a long phrase
        // (correct-horse-battery-staple) may be a passphrase.
        return generated(value) || (value.len() >= 16 && !plain_word(value));
    }
    !code(value) && generated(value)
}

/// The value after the assignment operator of a match.
fn value_of(matched: &str) -> Option<&str> {
    let at = matched.find([':', '=']).map(|i| {
        let rest = &matched[i..];
        let operator = rest
            .find(|c: char| !matches!(c, ':' | '=' | '>'))
            .unwrap_or(rest.len());
        i + operator
    })?;
    Some(matched[at..].trim())
}

/// Looks like code rather than a value: a call, a type, a path, a
/// reference, an attribute or an expression.
fn code(value: &str) -> bool {
    value.contains([
        '(', ')', '[', ']', '<', '>', '{', '}', '!', '&', '*', '|', '\\',
    ]) || value.contains("::")
        || value.contains("->")
        || (identifier(value) && value.contains('.'))
        || (identifier(value) && !value.contains(|c: char| c.is_ascii_digit()))
}

fn identifier(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'))
}

/// Letters only: one word, not a secret.
fn plain_word(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_alphabetic())
}

/// Shaped like generated text: letters and digits mixed, or three kinds of
/// character (lower, upper, digit, symbol) among enough distinct ones.
fn generated(value: &str) -> bool {
    let lower = value.chars().any(|c| c.is_ascii_lowercase());
    let upper = value.chars().any(|c| c.is_ascii_uppercase());
    let digit = value.chars().any(|c| c.is_ascii_digit());
    let symbol = value.chars().any(|c| c.is_ascii_punctuation());
    let classes = [lower, upper, digit, symbol].iter().filter(|x| **x).count();
    let mut distinct: Vec<char> = value.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.len() >= 6 && (((lower || upper) && digit) || classes >= 3)
}

/// A placeholder, an environment lookup, a template, a redaction or a
/// well-known stand-in: not a secret.
fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.starts_with(['$', '<', '{', '%', '*', '['])
        || value.contains("${")
        || value.contains("{{")
        || value.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '#' | '•'))
        // `DB_PASSWORD`: the name of a variable that holds it.
        || (identifier(value)
            && value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        || ["true", "false", "null", "none", "undefined", "required", "optional", "string"]
            .contains(&lower.as_str())
        || [
            "changeme", "change_me", "redacted", "example", "placeholder", "your_", "your-",
            "xxxx", "getenv", "environ", "process.env", "env::var", "secretref", "vault",
            "dummy", "sample",
        ]
        .iter()
        .any(|word| lower.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_prose_are_not_literals() {
        for harmless in [
            "token: Option<String>",
            "token: &Token",
            "api_key: Optional[str]",
            "password: SecretStr",
            "Token: expired",
            "password: incorrect",
            "colon_token: Token![:]",
            "next_token = self._get_param(",
            "password = os.environ[",
            "token = self.token",
            "secret = SECRET_KEY_BASE",
            "password: \"incorrect\"",
            "api_key = ${API_KEY}",
            "password: <redacted>",
            "token => token_stream",
            "access_token = response.access_token",
            "private_key = PrivateKey::from_pem",
        ] {
            assert!(
                !assigned_literal(harmless),
                "{harmless:?} counted as a secret"
            );
        }
    }

    #[test]
    fn literal_secrets_are() {
        for secret in [
            "password=hunter2hunter2",
            "DB_PASSWORD: \"Tr0ub4dor&3x\"",
            "api_key = 'a7Fz93kQpL0x'",
            "PGPASSWORD=s3cr3tPa55",
            "--password=c0rrectH0rse",
            "secret_key => a7b9c3d4e5f6",
            "password = \"correct-horse-battery\"",
        ] {
            assert!(assigned_literal(secret), "{secret:?} was not counted");
        }
    }
}
