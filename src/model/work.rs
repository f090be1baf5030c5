//! Coordinating work: what a message expects of its recipient and how they
//! acknowledge it, and claims on work (paths, branches, keys) with the one
//! rule of when two claims are on the same thing.

use super::{Handle, Millis};

/// The longest time a message may give its recipient (`due_seconds`): a week.
pub const MAX_DUE: Millis = 7 * 24 * 3600 * 1000;

/// What a message addressed to a person expects of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expects {
    /// Nothing: it is owed no answer.
    #[default]
    Nothing,
    /// An answer in its conversation (or an acknowledgement).
    Reply,
    /// An acknowledgement (`ack_message`), or an answer.
    Ack,
}

names!(Expects {
    Nothing => "none",
    Reply => "reply",
    Ack => "ack",
});

impl Expects {
    /// What a message of type `kind` expects when it does not say: a
    /// question a reply, anything else nothing.
    pub fn default_for(kind: &str) -> Expects {
        if kind.eq_ignore_ascii_case("QUESTION") {
            Expects::Reply
        } else {
            Expects::Nothing
        }
    }

    /// Whether anything is owed.
    pub fn is_owed(self) -> bool {
        self != Expects::Nothing
    }
}

/// How a recipient acknowledges a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckResult {
    Done,
    Blocked,
    Rejected,
}

names!(AckResult {
    Done => "done",
    Blocked => "blocked",
    Rejected => "rejected",
});

/// A recipient's acknowledgement of a message: the latest they gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub result: AckResult,
    pub note: Option<String>,
    pub at: Millis,
}

/// The longest claim (`ttl_seconds`): a day; the default is half an hour.
pub const MAX_CLAIM_TTL: Millis = 24 * 3600 * 1000;
pub const DEFAULT_CLAIM_TTL: Millis = 30 * 60 * 1000;

/// A claim on work, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub id: i64,
    /// What is claimed, as given (see [`ClaimTarget`]).
    pub what: String,
    /// The repository it is in (normalised, see [`normalize_repo`]); empty
    /// for none.
    pub repo: String,
    pub holder: Handle,
    pub note: Option<String>,
    pub created_at: Millis,
    pub expires_at: Millis,
}

impl Claim {
    /// Whether this claim and `other` are on the same thing: the same
    /// repository, and a path both globs match, or the same branch or key.
    pub fn overlaps(&self, what: &ClaimTarget, repo: &str) -> bool {
        self.repo == repo && ClaimTarget::parse(&self.what).is_ok_and(|mine| mine.overlaps(what))
    }
}

/// A claim about to be made (or renewed, when its holder holds the same
/// `what` in the same `repo` already).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaim {
    pub what: String,
    pub target: ClaimTarget,
    pub repo: String,
    pub holder: Handle,
    pub note: Option<String>,
    pub expires_at: Millis,
}

/// What claiming came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// Made, or renewed: the claim as it is now.
    Made(Claim),
    /// Another person's claim overlaps it: that claim.
    Taken(Claim),
}

/// What a claim is on: files (a glob from the repository's root), a
/// branch, or a key (anything else a team names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimTarget {
    Paths(Glob),
    Branch(String),
    Key(String),
}

/// The longest `what`.
pub const MAX_CLAIM_WHAT: usize = 256;

impl ClaimTarget {
    /// `branch:NAME`, `key:NAME`, or a glob of paths relative to the
    /// repository's root (`src/store/**`, `README.md`; a leading `./` or
    /// `/` is dropped, a trailing `/` means everything beneath).
    pub fn parse(what: &str) -> Result<ClaimTarget, String> {
        let what = what.trim();
        if what.is_empty() || what.len() > MAX_CLAIM_WHAT || what.chars().any(char::is_control) {
            return Err(format!(
                "what: a path glob, branch:NAME or key:NAME, one line of at most \
                 {MAX_CLAIM_WHAT} bytes"
            ));
        }
        let named = |name: &str, kind: &str| {
            let name = name.trim();
            if name.is_empty() {
                Err(format!("what: {kind}: needs a name"))
            } else {
                Ok(name.to_owned())
            }
        };
        if let Some(branch) = what.strip_prefix("branch:") {
            return Ok(ClaimTarget::Branch(named(branch, "branch")?));
        }
        if let Some(key) = what.strip_prefix("key:") {
            return Ok(ClaimTarget::Key(named(key, "key")?));
        }
        Glob::parse(what).map(ClaimTarget::Paths)
    }

    /// Whether some path, branch or key is covered by both.
    pub fn overlaps(&self, other: &ClaimTarget) -> bool {
        match (self, other) {
            (ClaimTarget::Paths(a), ClaimTarget::Paths(b)) => a.intersects(b),
            (ClaimTarget::Branch(a), ClaimTarget::Branch(b)) => a == b,
            (ClaimTarget::Key(a), ClaimTarget::Key(b)) => a == b,
            _ => false,
        }
    }
}

/// One piece of a [`Glob`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// This character.
    Char(char),
    /// `?`: one character, not `/`.
    One,
    /// `*`: any run of characters without `/`.
    Star,
    /// `**`: any run of characters, `/` too.
    Stars,
    /// `**/`: nothing, or any run of characters ending in `/` (so
    /// `src/**/x` covers `src/x`).
    Dirs,
}

/// The most wildcards a glob may hold, and the most pairs of states two
/// globs' comparison visits: past it they are taken to overlap (a claim
/// errs towards holding), so no glob makes the comparison slow.
const MAX_WILDCARDS: usize = 8;
const MAX_VISITS: usize = 1024;

/// A glob of paths: `?`, `*`, `**` and `**/` as git and shells read them;
/// every other character stands for itself (no classes or braces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(Vec<Piece>);

impl Glob {
    pub fn parse(text: &str) -> Result<Glob, String> {
        let text = text.trim_start_matches("./").trim_start_matches('/');
        if text.is_empty() {
            return Err("what: an empty path".into());
        }
        if text.split('/').any(|segment| segment == "..") {
            return Err("what: a path inside the repository, without ..".into());
        }
        let mut pieces = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            pieces.push(match c {
                '?' => Piece::One,
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    while chars.peek() == Some(&'*') {
                        chars.next();
                    }
                    if chars.peek() == Some(&'/') {
                        chars.next();
                        Piece::Dirs
                    } else {
                        Piece::Stars
                    }
                }
                '*' => Piece::Star,
                c => Piece::Char(c),
            });
        }
        if pieces.last() == Some(&Piece::Char('/')) {
            pieces.push(Piece::Stars);
        }
        let wild = pieces
            .iter()
            .filter(|p| !matches!(p, Piece::Char(_)))
            .count();
        if wild > MAX_WILDCARDS {
            return Err(format!(
                "what: at most {MAX_WILDCARDS} wildcards (*, ** or ?) in a glob"
            ));
        }
        Ok(Glob(pieces))
    }

    /// Whether `path` (relative to the repository's root) matches.
    pub fn matches(&self, path: &str) -> bool {
        Glob::parse(path).is_ok_and(|path| {
            // A path is a glob of plain characters (its `*`, if any, read
            // as a wildcard only widens it, which errs towards a match).
            self.intersects(&path)
        })
    }

    /// Whether some path matches both: the two globs' automata run side by
    /// side over every character that could tell them apart.
    pub fn intersects(&self, other: &Glob) -> bool {
        let (a, b) = (&self.0, &other.0);
        // The characters worth trying: every one either names, `/`, and
        // one neither names (which stands for all the others).
        let mut alphabet: Vec<char> = a
            .iter()
            .chain(b)
            .filter_map(|p| match p {
                Piece::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        alphabet.push('/');
        let fresh = (1..)
            .filter_map(char::from_u32)
            .find(|c| !alphabet.contains(c))
            .unwrap_or('\u{10FFFF}');
        alphabet.push(fresh);
        alphabet.sort_unstable();
        alphabet.dedup();

        let start = (closure(a, 0), closure(b, 0));
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![start];
        while let Some((here_a, here_b)) = todo.pop() {
            if !seen.insert((here_a.clone(), here_b.clone())) {
                continue;
            }
            if seen.len() > MAX_VISITS {
                return true;
            }
            if here_a.contains(&(a.len(), false)) && here_b.contains(&(b.len(), false)) {
                return true;
            }
            for &c in &alphabet {
                let next_a = step(a, &here_a, c);
                let next_b = step(b, &here_b, c);
                if !next_a.is_empty() && !next_b.is_empty() {
                    todo.push((next_a, next_b));
                }
            }
        }
        false
    }
}

/// A place in a glob while reading: a piece's index, and whether some of a
/// `**/` there was read already (then only a `/` leaves it).
type State = (usize, bool);

/// The states reachable from `at` without reading a character, sorted.
fn closure(glob: &[Piece], at: usize) -> Vec<State> {
    let mut here = vec![(at, false)];
    let mut i = at;
    while let Some(Piece::Star | Piece::Stars | Piece::Dirs) = glob.get(i) {
        i += 1;
        here.push((i, false));
    }
    here
}

/// The states reached from `here` by reading `c`, sorted.
fn step(glob: &[Piece], here: &[State], c: char) -> Vec<State> {
    let mut next = Vec::new();
    for &(at, _) in here {
        match glob.get(at) {
            Some(Piece::Char(want)) if *want == c => next.extend(closure(glob, at + 1)),
            Some(Piece::One) if c != '/' => next.extend(closure(glob, at + 1)),
            Some(Piece::Star) if c != '/' => next.extend(closure(glob, at)),
            Some(Piece::Stars) => next.extend(closure(glob, at)),
            Some(Piece::Dirs) => {
                next.push((at, true));
                if c == '/' {
                    next.extend(closure(glob, at + 1));
                }
            }
            _ => {}
        }
    }
    next.sort_unstable();
    next.dedup();
    next
}

/// A repository as claims name it: its remote without scheme, user,
/// `.git` or trailing `/`, and `host:path` (scp-like) as `host/path`, in
/// lower case — so `git@github.com:Org/App.git` and
/// `https://github.com/org/app` are one. Empty stays empty (no repository).
pub fn normalize_repo(remote: &str) -> String {
    let mut repo = remote.trim();
    if let Some((_, rest)) = repo.split_once("://") {
        repo = rest;
    }
    if let Some((user, rest)) = repo.split_once('@')
        && !user.contains('/')
    {
        repo = rest;
    }
    let repo = repo.trim_end_matches('/');
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    let repo = match repo.split_once(':') {
        // host:path (scp-like), but not host:port/path
        Some((host, path)) if !path.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{host}/{}", path.trim_start_matches('/'))
        }
        Some((host, rest)) => {
            let path = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{host}{path}")
        }
        None => repo.to_owned(),
    };
    repo.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> Glob {
        Glob::parse(text).unwrap()
    }

    #[test]
    fn globs_match_paths_as_git_reads_them() {
        assert!(glob("src/store/**").matches("src/store/sqlite/mod.rs"));
        assert!(glob("src/store/").matches("src/store/mod.rs"));
        assert!(glob("README.md").matches("README.md"));
        assert!(glob("./README.md").matches("README.md"));
        assert!(!glob("README.md").matches("docs/README.md"));
        assert!(glob("src/*.rs").matches("src/main.rs"));
        assert!(!glob("src/*.rs").matches("src/store/mod.rs"));
        assert!(glob("src/**/mod.rs").matches("src/mod.rs"));
        assert!(glob("src/**/mod.rs").matches("src/a/b/mod.rs"));
        assert!(!glob("src/**/mod.rs").matches("src/a/bmod.rs"));
        assert!(glob("**/*.md").matches("docs/api.md"));
        assert!(glob("**/*.md").matches("README.md"));
        assert!(glob("src/?.rs").matches("src/a.rs"));
        assert!(!glob("src/?.rs").matches("src/ab.rs"));
    }

    #[test]
    fn two_globs_overlap_when_some_path_matches_both() {
        let overlap = |a: &str, b: &str| {
            let (a, b) = (glob(a), glob(b));
            assert_eq!(a.intersects(&b), b.intersects(&a), "symmetric");
            a.intersects(&b)
        };
        assert!(overlap("src/store/**", "src/store/sqlite/mod.rs"));
        assert!(overlap("src/store/**", "src/**/mod.rs"));
        assert!(overlap("src/*.rs", "src/m*"));
        assert!(overlap("**", "anything/at/all"));
        assert!(overlap("src/*/mod.rs", "src/store/*"));
        assert!(!overlap("src/store/**", "src/relay/**"));
        assert!(!overlap("src/*.rs", "src/*.md"));
        assert!(!overlap("src/*.rs", "src/a/b.rs"));
        assert!(!overlap("docs/*", "docs/a/b"));
        assert!(overlap("docs/**", "docs/a/b"));
        assert!(!overlap("a?c", "abbc"));
    }

    #[test]
    fn no_glob_makes_the_comparison_slow() {
        assert!(Glob::parse("*a*a*a*a*a*a*a*a*a").is_err(), "nine wildcards");
        // The most a comparison visits is bounded: one this wide stops there
        // and errs towards an overlap.
        let a = glob(&format!("*a*b*c*d*e*f*g*{}", "x".repeat(200)));
        let b = glob(&format!("*b*c*d*e*f*g*h*{}", "x".repeat(200)));
        assert!(a.intersects(&b));
    }

    #[test]
    fn branches_and_keys_overlap_only_by_name() {
        let target = |w: &str| ClaimTarget::parse(w).unwrap();
        assert!(target("branch:main").overlaps(&target("branch: main")));
        assert!(!target("branch:main").overlaps(&target("branch:dev")));
        assert!(!target("branch:main").overlaps(&target("key:main")));
        assert!(!target("key:main").overlaps(&target("main")));
        assert!(ClaimTarget::parse("branch:").is_err());
        assert!(ClaimTarget::parse("../etc/passwd").is_err());
        assert!(ClaimTarget::parse("").is_err());
        assert!(ClaimTarget::parse(&"a".repeat(300)).is_err());
    }

    #[test]
    fn a_repository_is_named_one_way_however_its_remote_is_written() {
        let want = "github.com/org/app";
        for remote in [
            "git@github.com:Org/App.git",
            "https://github.com/org/app",
            "https://github.com/org/app.git/",
            "ssh://git@github.com/org/app.git",
            "https://user@github.com/org/app",
        ] {
            assert_eq!(normalize_repo(remote), want, "{remote}");
        }
        assert_eq!(
            normalize_repo("ssh://git@host:2222/org/app.git"),
            "host/org/app"
        );
        assert_eq!(normalize_repo(""), "");
        assert_eq!(
            normalize_repo("https://x-access-token:ghs_abc123@github.com/org/app.git\n"),
            "github.com/org/app",
            "a token in the URL is not part of the name"
        );
    }

    #[test]
    fn a_question_expects_a_reply_and_nothing_else_expects_anything() {
        assert_eq!(Expects::default_for("QUESTION"), Expects::Reply);
        assert_eq!(Expects::default_for("question"), Expects::Reply);
        assert_eq!(Expects::default_for("NOTE"), Expects::Nothing);
        assert_eq!(Expects::parse("ack"), Some(Expects::Ack));
        assert_eq!(Expects::parse("maybe"), None);
        assert_eq!(AckResult::parse("done"), Some(AckResult::Done));
        assert_eq!(AckResult::parse("ok"), None);
    }
}
