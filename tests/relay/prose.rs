//! The documents, held to the code: the README, the pages under `docs/`,
//! `bench/README.md` and ARCHITECTURE.md state limits in numbers, and each
//! phrase is read from them with the number taken from the constant; and
//! every relative link in them leads to a file that exists, with a heading
//! there when it names one.

use crosstalk::relay::{MAX_OVERVIEW_PAGE, MAX_PAGE, MAX_SEARCH_PAGE, MAX_WAIT};
use crosstalk::store::PURGE_BATCH;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documents people read: the README, the pages under docs/ and the
/// benchmarks' page.
fn user_documents() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.push(root().join("README.md"));
    pages.push(root().join("bench/README.md"));
    pages
}

/// Every document, the map included.
fn all_documents() -> Vec<PathBuf> {
    let mut all = user_documents();
    all.push(root().join("ARCHITECTURE.md"));
    all
}

/// The documents' text, whitespace made single spaces (however the lines
/// are wrapped).
fn flat(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fails unless one of the user documents says `phrase`.
fn users_read(phrase: &str) {
    assert!(
        flat(&user_documents()).contains(phrase),
        "neither the README nor a page under docs/ says {phrase:?}"
    );
}

/// Fails unless ARCHITECTURE.md says `phrase`.
fn the_map_says(phrase: &str) {
    assert!(
        flat(&[root().join("ARCHITECTURE.md")]).contains(phrase),
        "ARCHITECTURE.md does not say {phrase:?}"
    );
}

#[test]
fn the_documents_state_the_limits_the_code_has() {
    let wait = MAX_WAIT.as_secs();
    the_map_says(&format!("the {wait} s cap"));
    the_map_says(&format!("capped at {wait} s"));
    users_read(&format!("Waits are capped at {wait} s"));
    users_read(&format!("Waits last at most {wait} s"));
    the_map_says(&format!(
        "({MAX_PAGE} messages, {MAX_OVERVIEW_PAGE} conversations, {MAX_SEARCH_PAGE} results)"
    ));
    users_read(&format!("{PURGE_BATCH} per transaction"));
    users_read(&format!("batches of {PURGE_BATCH} messages"));
    let mib = crosstalk::web::PAGE_HTML >> 20;
    the_map_says(&format!("what a page renders by {mib} MiB"));
    users_read(&format!("a page renders at most {mib} MiB"));
    let generation = crosstalk::store::sqlite::SEARCH_GENERATION;
    let size = format!("{},{:03}", generation / 1000, generation % 1000);
    the_map_says(&format!("one table per {size} ids"));
    users_read(&format!("one per {size} messages"));
    let every = crosstalk::bridge::PROBE_EVERY.as_millis();
    the_map_says(&format!("every {every} ms"));
    users_read(&format!("{every} ms, until Claude Code lists them again"));
}

/// The relative targets of a document's Markdown links and images:
/// `](target)`, not web addresses nor anchors on the same page.
fn relative_links(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    link.captures_iter(text)
        .map(|c| c[1].to_owned())
        .filter(|target| !target.contains("://") && !target.starts_with('#'))
        .filter(|target| !target.starts_with("mailto:"))
        .collect()
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped,
/// spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_link_in_the_documents_leads_somewhere() {
    let (mut broken, mut links) = (Vec::new(), 0);
    for document in all_documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        for target in relative_links(&text) {
            links += 1;
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let path = document.parent().unwrap().join(file);
            if !path.exists() {
                broken.push(format!("{}: {target}", document.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                let headings = std::fs::read_to_string(&path).unwrap_or_default();
                let found = headings
                    .lines()
                    .filter_map(|line| line.strip_prefix('#'))
                    .map(|line| anchor(line.trim_start_matches('#')))
                    .any(|a| a == fragment);
                if !found {
                    broken.push(format!(
                        "{}: {target} (no such heading)",
                        document.display()
                    ));
                }
            }
        }
    }
    assert!(links > 40, "the reader found only {links} links");
    assert!(
        broken.is_empty(),
        "links that lead nowhere:\n{}",
        broken.join("\n")
    );
}

/// The front door stays short: what crosstalk is, the two commands, a
/// quickstart, the three steps, its promises, and links.
#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 250,
        "the README grew past 250 lines"
    );
    for command in ["cargo run --release -- demo", "cargo test"] {
        assert!(readme.contains(command), "{command}");
    }
}
