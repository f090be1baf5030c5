//! The second look at a match: is the value a literal secret, or a
//! placeholder, a name, a type, a call, a path or a word?
//!
//! Code mentions tokens and passwords all day (`token: Option<String>`,
//! `fn f(token: &Token)`, `password: SecretStr`, `next_token =
//! self._get_param("NextToken")`), and so does prose ("Token: expired",
//! "password: incorrect"). An assignment counts only when its value looks
//! like a literal secret: long enough, not a placeholder, and, when it is
//! not quoted, shaped like generated text rather than like code or words.
//!
//! A call, a subscript, a path or a string that names a token is code, not
//! a secret: `b64decode(auth[…`, `PRIVATE_KEYS_MAP[crv]`,
//! `_bindgen_ty_7::IFLA_INET6_TOKEN`, `"pagination_token"`. Where a type
//! annotation stands between the name and the value (`crv_key: t.Type[…]
//! = …`, `const API_TOKEN: &str = "…"`), the value after it is judged.

mod shapes;

use base64::{Engine, engine::general_purpose::STANDARD};
use shapes::{
    changeable, code, generated, names_itself, number, placeholder, plain_word, reference,
    repeats_name, snake_name, template, uuid,
};

/// The shortest literal value that counts as a secret.
const MIN_LITERAL: usize = 8;

/// The random part of a prefixed token (after its first `-`, `_` or `.`)
/// looks generated: letters mixed with digits, or upper and lower case
/// changing often, as random text does whether or not it happens to hold a
/// digit. Hyphenated words (`sk-learn-…`, `glpat-token-rotation-guide`)
/// and capitalised ones (`TokenRotationGuide`) do not.
pub(super) fn random(matched: &str) -> bool {
    let tail = matched
        .split_once(['-', '_', '.'])
        .map_or(matched, |(_, tail)| tail);
    let digit = tail.chars().any(|c| c.is_ascii_digit());
    let letters = tail.chars().filter(char::is_ascii_alphabetic).count();
    letters > 0 && (digit || case_changes(tail) * 3 >= letters)
}

/// How often consecutive letters change case.
fn case_changes(text: &str) -> usize {
    let letters: Vec<bool> = text
        .chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.is_ascii_uppercase())
        .collect();
    letters.windows(2).filter(|pair| pair[0] != pair[1]).count()
}

/// Base64 that opens a PEM block: a private key's, not a certificate's.
pub(super) fn encoded_private_key(matched: &str) -> bool {
    // Enough for `-----BEGIN ENCRYPTED PRIVATE KEY-----`, in whole groups.
    let head = &matched[..matched.len().min(72) / 4 * 4];
    STANDARD
        .decode(head)
        .is_ok_and(|pem| pem.windows(11).any(|w| w == b"PRIVATE KEY"))
}

/// Base64 of `user:password` (a Basic header, a Docker `auth`): it decodes
/// to text with a user and a password that is no placeholder or word
/// (`user:password` is every document's example).
pub(super) fn encoded_credentials(matched: &str) -> bool {
    let encoded = matched
        .trim_end_matches('"')
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        .next()
        .unwrap_or("");
    let Some(text) = STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
    else {
        return false;
    };
    text.split_once(':').is_some_and(|(user, password)| {
        !user.is_empty() && !password.contains(char::is_control) && credible_password(password)
    })
}

/// `-u user:password` on a command line: a generated-looking password
/// (`-u 1000:1000` is a uid and gid, `-u admin:admin` a default).
pub(super) fn command_line_credentials(matched: &str) -> bool {
    let given = matched.trim_end_matches(['"', '\'']);
    given
        .split_once(':')
        .is_some_and(|(_, password)| credible_password(password) && generated(password))
}

/// Long enough to be someone's password, and no placeholder or word.
fn credible_password(password: &str) -> bool {
    password.len() >= 6 && !placeholder(password) && !plain_word(password)
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
    // `https://foo.com:123,foo:bar@bar.com`: a list of hosts and ports.
    let hosts = password
        .split_once(',')
        .is_some_and(|(port, _)| !port.is_empty() && number(port));
    !hosts
        && password.len() >= 3
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
/// secret. Quoted values need only be long and no placeholder, prose or
/// reference; bare values must also look generated and not like code.
pub(super) fn assigned_literal(matched: &str) -> bool {
    if let Some(parameter) = matched.strip_prefix(['?', '&']) {
        return query_literal(parameter);
    }
    let Some(assignment) = assignment(matched) else {
        return false;
    };
    let Some((value, quoted)) = literal_value(&assignment) else {
        return false;
    };
    if quoted {
        // A quoted name ("pagination_token") or format string ("{}:{}") is
        // code's, and the name again ("password1") a stand-in; a quoted
        // word ("incorrect", "password") is prose; a long phrase
        // (correct-horse-battery-staple) may be a passphrase, unless it
        // repeats the name it is given to ("client-secret-value").
        if snake_name(value) || template(value) || repeats_name(assignment.name, value) {
            return false;
        }
        return generated(value)
            || (value.len() >= 16
                && !plain_word(value)
                && !number(value)
                && !names_itself(assignment.name, value));
    }
    !code(value, assignment.env_style()) && generated(value)
}

/// An assignment as matched: the name, and the value it is given.
struct Assignment<'a> {
    name: &'a str,
    value: &'a str,
    /// Whitespace between the name and the operator (`NAME = …`), as code
    /// writes it and `.env` and compose files do not.
    spaced: bool,
    /// The value came after a type (`name: Type = value`).
    annotated: bool,
    /// A colon with the value right after it (`secret:AmazonSageMaker-*`),
    /// as ARNs, URNs, labels and slices write it; YAML, JSON and headers
    /// put a space or a quote there.
    tight: bool,
}

impl Assignment<'_> {
    /// Named as an environment variable is (`DB_PASSWORD=`): upper case,
    /// with nothing between the name and its operator. Such a value is
    /// never a call, so symbols in it are a generator's, not code's;
    /// `CHALLENGE_PASSWORD = ObjectIdentifier(` is a Python constant.
    fn env_style(&self) -> bool {
        !self.spaced
            && !self.annotated
            && self.name.contains(|c: char| c.is_ascii_uppercase())
            && !self.name.contains(|c: char| c.is_ascii_lowercase())
    }
}

/// `?token=…&password=…` in a URL or a form: a generated value, up to the
/// next parameter. A token there must also be long: short ones are the
/// public tokens of badges (`badge.svg?token=3KA3R2D9fV`), while an OAuth
/// access token or a signature is long.
fn query_literal(parameter: &str) -> bool {
    let Some(Assignment { name, value, .. }) = assignment(parameter) else {
        return false;
    };
    let value = value.split(['&', '#', ')', ']', '>']).next().unwrap_or("");
    let name = name.to_ascii_lowercase();
    let shortest = match name.contains("pass") || name.contains("pwd") || name.contains("secret") {
        true => MIN_LITERAL,
        false => 16,
    };
    // `password=secure%20password`: words, as a form encodes them.
    value.len() >= shortest && !value.contains("%20") && !placeholder(value) && generated(value)
}

/// `SESSION_KEY=…`, `APP_KEY=base64:…`: a key of any other name, which
/// counts only when its value is random text, such as a generated key is
/// (a name that is a key of some table, `sort_key: "created_at"`, is not),
/// and is no public key.
pub(super) fn assigned_key(matched: &str) -> bool {
    let Some(assignment) = assignment(matched) else {
        return false;
    };
    let name = assignment.name.to_ascii_lowercase();
    // A WebSocket handshake's key is a nonce, sent in the clear.
    if ["public", "publishable", "websocket"]
        .iter()
        .any(|word| name.contains(word))
    {
        return false;
    }
    let Some((value, _)) = literal_value(&assignment) else {
        return false;
    };
    let value = value.strip_prefix("base64:").unwrap_or(value);
    value.len() >= 16
        && !uuid(value)
        && !code(value, assignment.env_style())
        && generated(value)
        && changeable(value)
}

/// The literal an assignment gives, and whether it was quoted: none when
/// the name is part of a path (`AWS::ApiGateway::ApiKey`), the value too
/// short, a placeholder, more than one word, or right after a colon.
fn literal_value<'a>(assignment: &Assignment<'a>) -> Option<(&'a str, bool)> {
    if assignment.name.contains("::") {
        return None;
    }
    let raw = assignment.value;
    let (value, quoted) = match raw.chars().next() {
        Some(q @ ('"' | '\'' | '`')) => (raw.trim_matches(q), true),
        _ => (raw, false),
    };
    // A tight colon (`secret:AmazonSageMaker-*`) assigns only a quoted value.
    let assigned = quoted || !assignment.tight;
    let literal = value.len() >= MIN_LITERAL
        && assigned
        && !placeholder(value)
        && !value.contains(char::is_whitespace)
        && !reference(value);
    literal.then_some((value, quoted))
}

/// A match split at its assignment operator (`=`, `:`, `:=`, `=>`; a
/// path's `::` is part of the name), and past a type annotation: the name,
/// and the value, trimmed. A `:` that opens the match is `.npmrc`'s
/// (`//registry.npmjs.org/:_authToken=`), not an operator.
fn assignment(matched: &str) -> Option<Assignment<'_>> {
    let bytes = matched.as_bytes();
    let at = (1..bytes.len()).find(|&i| match bytes[i] {
        b'=' => true,
        b':' => bytes.get(i + 1) != Some(&b':') && bytes[i - 1] != b':',
        _ => false,
    })?;
    let rest = &matched[at..];
    let operator = rest
        .find(|c: char| !matches!(c, ':' | '=' | '>'))
        .unwrap_or(rest.len());
    let (operator, after) = rest.split_at(operator);
    let name = &matched[..at];
    let value = after.trim();
    let colon = operator == ":";
    // The pattern lets whitespace into an unquoted value only as
    // `Type = value`: the type is no value, what follows its `=` is.
    let annotated = colon
        && !value.starts_with(['"', '\'', '`'])
        && value.contains(char::is_whitespace)
        && value.contains('=');
    let value = match annotated {
        true => value
            .split_once('=')
            .map_or(value, |(_, value)| value.trim()),
        false => value,
    };
    Some(Assignment {
        name: name.trim_end_matches(['"', '\'', ' ', '\t']),
        value,
        spaced: name.ends_with([' ', '\t']),
        annotated,
        tight: colon && !annotated && after.starts_with(|c: char| !c.is_whitespace()),
    })
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
            "CHALLENGE_PASSWORD = ObjectIdentifier(",
            "SECRET_KEY = os.urandom(24)",
            "private_key: PKCS7PrivateKeyTypes",
            "generate_private_key: x25519_generate_private_key",
            "continuation_token = self.s3tables_backend.list_table_buckets(",
            "raw_private_key: EcPrivateKeyBin<'_> = private_key",
            "token = _bindgen_ty_7",
            "secret:AmazonSageMaker-*",
            "ACCESS_KEY = 'aws_access_key_id'",
            "password = \"{}:{}\"",
            "client_secret: \"client-secret-value\"",
            "NOPASSWORD = \"no-password-required\"",
            "access_token\": \"access-1\"",
            "password='password1'",
            "&password=secure%20password",
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
            "auth_token = \"a7Fz93kQpL0xWq81Zc4R\"",
            "API_KEY: str = \"a7Fz93kQpL0xWq81Zc\"",
            "API_TOKEN: &'static str = \"a7Fz93kQpL0xWq81Zc\"",
            "api_key: a7Xk9QzLm2Pb4Rt8",
            "password: \"Summer2024\"",
            "password=Summer2024",
            "PASSWORD=a7Xk(Qz2",
            "password: \"Xk9_pass_word\"",
        ] {
            assert!(assigned_literal(secret), "{secret:?} was not counted");
        }
    }

    /// Issue 39's six lines, as the patterns match them: a call, a
    /// subscript, a path or a string that names a token is code.
    #[test]
    fn the_lines_real_code_was_refused_for_are_code() {
        for code in [
            "auth_token = b64decode(auth[",
            "input_token\": \"pagination_token\"",
            "auth_token = b64encode(f",
            "IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN",
            "IFLA_VXLAN_LOCALBYPASS: _bindgen_ty_24 = _bindgen_ty_24::IFLA_VXLAN_LOCALBYPASS",
        ] {
            assert!(!assigned_literal(code), "{code:?} counted as a secret");
        }
        for code in [
            "crv_key: t.Type[PrivateOKPKey] = PRIVATE_KEYS_MAP[crv]",
            // Without the annotation, as a line cut after it reads.
            "crv_key: t.Type[PrivateOKPKey]",
            "api_key = ApiGatewayApiKey(",
            "sort_key: t.Callable[[t.Any]",
            "encrypted_key: b64u(encryptedKey)",
            "op_key = t.cast(t.Union[Ed25519PrivateKey",
            "THREAD_RNG_KEY: Rc<UnsafeCell<ReseedingRng<Core, OsRng>>> = {",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ] {
            assert!(!assigned_key(code), "{code:?} counted as a key");
        }
    }

    #[test]
    fn generated_keys_are_keys_past_an_annotation_too() {
        for key in [
            "SESSION_KEY=a7Fz93kQpL0xWq81ZcR4tY",
            "SIGNING_KEY: &str = \"a7Fz-93kQpL0xWq81ZcR4tY\"",
        ] {
            assert!(assigned_key(key), "{key:?} was not counted");
        }
    }

    #[test]
    fn a_list_of_hosts_is_no_password() {
        assert!(!url_password("https://foo.com:123,foo:bar@bar.com"));
        assert!(url_password("postgres://app:s3cr3t-Pa55@db.internal"));
    }
}
