//! The shapes a value takes when it is not a secret: code (a call, a
//! path, a member), a name, a type, a template, a word, a number, a
//! placeholder; and the one a generated secret takes.

/// Looks like code rather than a value: a call, an index, a generic type,
/// a macro, a reference, a path or a member. Symbols alone do not make
/// code: generated passwords hold `!`, `&`, `*` and brackets too
/// (`Hx7!kd9Qz2Lm`), so a symbol counts only where code puts it, after a
/// name that reads as one (`self._get_param(`, `Option<String>`,
/// `Token![:]`) or closed again (`md5(x)`). Where the name is an
/// environment variable's (`DB_PASSWORD=`), a `.env` file or a compose
/// file, whose values are never calls, only paths and members count.
pub(super) fn code(value: &str, env_style: bool) -> bool {
    if value.contains("::") || value.contains("->") || value.contains("=>") {
        return true;
    }
    // `self.token`, `settings.CLIENT_SECRET`, `token_stream`.
    if identifier(value) && (value.contains('.') || !value.contains(|c: char| c.is_ascii_digit())) {
        return true;
    }
    if env_style {
        return false;
    }
    // `_bindgen_ty_7`, `PKCS7PrivateKeyTypes`: names with a number in them.
    if snake_name(value) || type_name(value) {
        return true;
    }
    if value.starts_with(['(', '|']) {
        return true; // a tuple, a closure
    }
    // A reference to, a dereference or a negation of a name: `&Token`.
    let named = value.trim_start_matches(['&', '*', '!']);
    let end = named
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$')))
        .unwrap_or(named.len());
    let (name, rest) = named.split_at(end);
    if rest.is_empty() {
        return named.len() < value.len() && reads_as_name(name);
    }
    // A macro's `!` comes before what it opens.
    let opened = rest
        .strip_prefix('!')
        .filter(|r| r.starts_with(['(', '[', '{']))
        .unwrap_or(rest);
    let closer = match opened.as_bytes()[0] {
        b'(' => Some(')'),
        b'[' => Some(']'),
        b'{' if opened.len() < rest.len() => Some('}'),
        b'<' => Some('>'),
        // The end of a parameter list or a type.
        b')' | b']' | b'>' => None,
        _ => return false,
    };
    let closed = closer.is_some_and(|closer| opened[1..].contains(closer));
    reads_as_name(name) || closed
}

/// A name as people write them: words of letters, each perhaps with a
/// number inside or at its end (`get_param`, `sha256`, `b64decode`,
/// `TokenTree`, `XMLHttpRequest`), not a random run (`Hx7`, `kD9x`), whose
/// case changes after single letters. Read only where code follows the
/// name (`(`, `[`, `<`), which a literal seldom puts there.
fn reads_as_name(name: &str) -> bool {
    let words_then_digits = name.split(['.', '_', '$']).all(|word| {
        let word = word.trim_end_matches(|c: char| c.is_ascii_digit());
        let word = word.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        let word = word.trim_start_matches(|c: char| c.is_ascii_digit());
        word.chars().all(|c| c.is_ascii_alphabetic())
    });
    // A lone lower-case letter between others (`H·x·7`), past the first
    // and the separators (`self.s3tables`).
    let bytes = name.as_bytes();
    let lone_lower = (1..bytes.len()).any(|at| {
        bytes[at].is_ascii_lowercase()
            && !bytes[at - 1].is_ascii_lowercase()
            && !matches!(bytes[at - 1], b'_' | b'.' | b'$')
            && bytes
                .get(at + 1)
                .is_some_and(|next| !next.is_ascii_lowercase())
    });
    name.len() >= 3 && words_then_digits && !lone_lower
}

/// snake_case words, each perhaps ending in digits, or numbers between
/// them (`pagination_token`, `aws_access_key_id`, `_bindgen_ty_7`,
/// `x25519_generate_private_key`): a name. Generated values mix cases, or
/// have no `_`.
pub(super) fn snake_name(value: &str) -> bool {
    value.contains('_')
        && value
            .split(|c: char| !c.is_ascii_lowercase())
            .any(|letters| letters.len() >= 3)
        && value.split('_').all(|part| {
            part.trim_end_matches(|c: char| c.is_ascii_digit())
                .bytes()
                .all(|b| b.is_ascii_lowercase())
        })
}

/// A type named with a number in its first word, then two capitalised
/// words or more (`PKCS7PrivateKeyTypes`, `Ed25519PrivateKey`): random
/// text of any length takes that shape less than once in 1,000.
fn type_name(value: &str) -> bool {
    let lower = value.trim_start_matches(|c: char| c.is_ascii_uppercase());
    let digits = lower.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let mut rest = digits.trim_start_matches(|c: char| c.is_ascii_digit());
    if lower.len() == value.len() || rest.len() == digits.len() {
        return false;
    }
    let mut words = 0;
    while let Some(word) = rest.strip_prefix(|c: char| c.is_ascii_uppercase()) {
        let after = word.trim_start_matches(|c: char| c.is_ascii_lowercase());
        if word.len() - after.len() < 2 {
            return false;
        }
        rest = after;
        words += 1;
    }
    rest.is_empty() && words >= 2
}

/// A format string's placeholder: `{}`, `{0}`, `{name}`, `%s`, `%(name)s`.
pub(super) fn template(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.bytes().enumerate().any(|(at, byte)| match byte {
        b'{' => value[at + 1..].split_once('}').is_some_and(|(inside, _)| {
            inside
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        }),
        b'%' => matches!(bytes.get(at + 1), Some(b's' | b'd' | b'(')),
        _ => false,
    })
}

/// A phrase that shares a word with the name it is given to
/// (`client_secret: "client-secret-value"`, `NOPASSWORD =
/// "no-password-required"`): a stand-in.
pub(super) fn names_itself(name: &str, value: &str) -> bool {
    let name = name.to_ascii_lowercase();
    words(value)
        .iter()
        .any(|word| word.len() >= 3 && name.contains(word.as_str()))
}

/// A value whose words are all the name's own, with at most digits and
/// symbols besides (`"access_token": "access-1"`, `password='password1'`):
/// a stand-in, as documentation writes them.
pub(super) fn repeats_name(name: &str, value: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let words = words(value);
    !words.is_empty()
        && words
            .iter()
            .all(|word| word.len() >= 3 && name.contains(word.as_str()))
}

/// The words of a name or a phrase, in lower case: `clientSecret`,
/// `client_secret` and `client-secret-value` share `client` and `secret`.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous = ' ';
    for c in text.chars() {
        let starts =
            !c.is_ascii_alphabetic() || (c.is_ascii_uppercase() && previous.is_ascii_lowercase());
        if starts && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphabetic() {
            word.push(c.to_ascii_lowercase());
        }
        previous = c;
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Names something rather than being a value: a file path (`/etc/ssl/…`,
/// `./config/secret.json`), a dotted key (`auth.password.reset`) or a
/// module path; each made of words, where a random value is not.
pub(super) fn reference(value: &str) -> bool {
    let path = value.starts_with(['/', '~']) || value.starts_with("./") || value.starts_with("../");
    let dotted = identifier(value) && value.contains('.');
    (path || dotted || value.contains("::"))
        && value
            .split(['/', '.', ':', '\\'])
            .all(|part| !changeable(part) || part.len() < 4)
}

/// Only digits and dots: a version, an address or an OID
/// (`1.3.6.1.5.5.7.3.1`), not a secret.
pub(super) fn number(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// `8e03978e-40d5-43e8-bc93-6894a57f9324`: an id.
pub(super) fn uuid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Changes kind (lower, upper, digit) at least once every four letters
/// and digits, as random text does and words and names do not
/// (`user-profile-2024` changes once in 15, `v2_users_by_team` twice in
/// 13). Symbols are left out: they separate words as often as they are
/// random.
pub(super) fn changeable(value: &str) -> bool {
    let kinds: Vec<u8> = value
        .chars()
        .filter_map(|c| match c {
            'a'..='z' => Some(0),
            'A'..='Z' => Some(1),
            '0'..='9' => Some(2),
            _ => None,
        })
        .collect();
    let changes = kinds.windows(2).filter(|pair| pair[0] != pair[1]).count();
    !kinds.is_empty() && changes * 4 >= kinds.len()
}

fn identifier(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'))
}

/// Letters only: one word, not a secret.
pub(super) fn plain_word(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_alphabetic())
}

/// Shaped like generated text: letters and digits mixed, or three kinds of
/// character (lower, upper, digit, symbol) among enough distinct ones.
pub(super) fn generated(value: &str) -> bool {
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
pub(super) fn placeholder(value: &str) -> bool {
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
