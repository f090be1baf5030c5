//! The arrows between the crate's top-level modules, read from the source:
//! the dependency rules of `ARCHITECTURE.md`, kept by a test.
//!
//! Every `crate::…` path (and `super::…` that climbs to the crate root) in
//! a module's files is an arrow from that module to another. The test
//! fails, naming the file and the arrow, on any arrow ARCHITECTURE.md's
//! table does not allow, on any cycle, and on the core or the store naming
//! a web or protocol crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the modules it may name, read from the table
/// under "## Arrows" in ARCHITECTURE.md: the one place the rules are
/// written. Each line there is `a, b → c, d`, continued on lines without a
/// `→`; `(nothing)` names none. A module missing from the table fails the
/// test.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let map =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md is readable");
    let section = map
        .split("\n## Arrows\n")
        .nth(1)
        .expect("ARCHITECTURE.md has an Arrows section");
    let table = section
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Arrows section has a ```text table");
    let names = |list: &str| -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty() && *name != "(nothing)")
            .map(str::to_owned)
            .collect()
    };
    let mut allowed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in table.lines() {
        let targets = match line.split_once('→') {
            Some((from, to)) => {
                current = names(from);
                to
            }
            None => line,
        };
        for from in &current {
            allowed
                .entry(from.clone())
                .or_default()
                .extend(names(targets));
        }
    }
    // The reader reads what the table says: a leaf, a module's list, and
    // a list continued on the next line.
    assert!(allowed.len() > 10, "the Arrows table reads as {allowed:?}");
    assert!(allowed["model"].is_empty(), "{allowed:?}");
    assert!(allowed["relay"].contains("store"), "{allowed:?}");
    assert!(allowed["server"].contains("mcp"), "{allowed:?}");
    allowed
}

/// Crates the core and the store must never name: the web, the protocol,
/// the page and the limiter are the edges' and the layers' business.
const FRAMEWORKS: &[&str] = &[
    "axum",
    "axum_server",
    "rmcp",
    "askama",
    "hyper",
    "hyper_util",
    "tower",
    "tower_http",
    "governor",
    "http",
    "reqwest",
];

struct Arrow {
    from: String,
    to: String,
    file: PathBuf,
    line: usize,
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src`: `src/relay/send.rs` is
/// `["relay", "send"]`, `src/relay/mod.rs` is `["relay"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a line without its `//` comment (strings are not parsed:
/// no source line here has `//` inside a string next to a path).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(at) if !line[..at].contains('"') => &line[..at],
        Some(at) if line.trim_start().starts_with("//") => &line[..at],
        _ => line,
    }
}

/// The first identifiers of every path after `prefix` in `text`: for
/// `crate::a::b` it is `a`; for `crate::{a, b::c}` it is `a` and `b`.
fn targets(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(prefix) {
        let start = from + at;
        let before = text[..start].chars().next_back();
        from = start + prefix.len();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // part of a longer name
        }
        let rest = &text[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 1 => {
                        item_start = false;
                        found.push((start, ident(&group[i..])));
                    }
                    _ => {}
                }
            }
        } else {
            found.push((start, ident(rest)));
        }
    }
    // `super::super::…` read from a shallower prefix: a path inside an
    // inline module (tests), which climbs no further than its own file.
    found.retain(|(_, name)| !name.is_empty() && name != "self" && name != "super");
    found
}

/// Every arrow between top-level modules, with where it is written.
fn arrows(src: &Path) -> Vec<Arrow> {
    let mut files = Vec::new();
    source_files(src, &mut files);
    let mut arrows = Vec::new();
    for file in files {
        let path = module_path(src, &file);
        let Some(module) = path.first().cloned() else {
            continue;
        };
        if module == "lib" || module == "main" {
            continue; // the crate root names every module by design
        }
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let code: String = text.lines().map(code).collect::<Vec<_>>().join("\n");
        let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
        let mut named: Vec<(usize, String)> = targets(&code, "crate::");
        // `super::` that climbs to the crate root names a top-level module.
        let climbs_to_root = "super::".repeat(path.len());
        named.extend(targets(&code, &climbs_to_root));
        for (offset, to) in named {
            if to != module {
                arrows.push(Arrow {
                    from: module.clone(),
                    to,
                    file: file.clone(),
                    line: line_of(offset),
                });
            }
        }
    }
    arrows
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_arrow_between_modules_is_an_allowed_one() {
    let allowed = allowed();
    let mut wrong = Vec::new();
    for arrow in arrows(&src()) {
        match allowed.get(arrow.from.as_str()) {
            None => wrong.push(format!(
                "{}:{}: module `{}` is not in the table of allowed arrows (ARCHITECTURE.md)",
                arrow.file.display(),
                arrow.line,
                arrow.from
            )),
            Some(to) if !to.contains(&arrow.to) => wrong.push(format!(
                "{}:{}: `{}` -> `{}` is not an allowed arrow",
                arrow.file.display(),
                arrow.line,
                arrow.from,
                arrow.to
            )),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows that break the architecture:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_modules_form_no_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut witness: BTreeMap<(String, String), String> = BTreeMap::new();
    for arrow in arrows(&src()) {
        witness
            .entry((arrow.from.clone(), arrow.to.clone()))
            .or_insert_with(|| format!("{}:{}", arrow.file.display(), arrow.line));
        graph.entry(arrow.from).or_default().insert(arrow.to);
    }
    // Depth-first search; a node met again on the current path closes a cycle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    format!(
                        "  {} -> {} ({})",
                        w[0],
                        w[1],
                        witness[&(w[0].clone(), w[1].clone())]
                    )
                })
                .collect();
            panic!("the modules form a cycle:\n{}", steps.join("\n"));
        }
    }
}

#[test]
fn the_core_and_the_store_name_no_web_or_protocol_crate() {
    let mut files = Vec::new();
    for module in ["relay", "store", "model"] {
        source_files(&src().join(module), &mut files);
        let single = src().join(format!("{module}.rs"));
        if single.exists() {
            files.push(single);
        }
    }
    assert!(!files.is_empty(), "the core's files were found");
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            let line = code(line);
            for framework in FRAMEWORKS {
                let named = targets(line, &format!("{framework}::"));
                let used = line.trim_start().starts_with(&format!("use {framework}"))
                    && line[line.find(framework).unwrap() + framework.len()..]
                        .starts_with([':', ';', ' ']);
                if !named.is_empty() || used {
                    wrong.push(format!(
                        "{}:{}: names `{framework}`",
                        file.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the core or the store names a framework:\n{}",
        wrong.join("\n")
    );
}

/// A line's code without its string literals, so that a log target or a
/// filter directive written as a string (`"rmcp::service"`) names nothing.
fn without_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let (mut quoted, mut escaped) = (false, false);
    for c in line.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, c) => out.push(c),
            _ => {}
        }
    }
    out
}

/// rmcp is the MCP edges' own: the server's `mcp`, the client side's
/// `agent` and `bridge`, and the `protocol` leaf they share. Nothing else
/// names it, so a change of rmcp touches only them.
#[test]
fn rmcp_is_named_only_by_the_mcp_edges() {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let module = module_path(&src(), &file);
        if ["mcp", "agent", "bridge", "protocol"].contains(&module[0].as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            let line = without_strings(code(line));
            let used = line.trim_start().starts_with("use rmcp");
            if used || !targets(&line, "rmcp::").is_empty() {
                wrong.push(format!("{}:{}", file.display(), number + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "rmcp named outside the MCP edges:\n{}",
        wrong.join("\n")
    );
}

/// Which store backs the relay is `server`'s choice alone: no other module
/// names a backend (`store::sqlite`, `store::postgres`), so a new backend
/// touches `store` and `server` only.
#[test]
fn only_the_server_names_a_store_backend() {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let module = module_path(&src(), &file);
        if ["store", "server", "lib", "main"].contains(&module[0].as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            let line = without_strings(code(line));
            if line.contains("store::sqlite") || line.contains("store::postgres") {
                wrong.push(format!("{}:{}", file.display(), number + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a store backend named outside store and server:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_of_arrows_finds_every_form_of_path() {
    let found: Vec<String> = targets(
        "use crate::{a, b::{c, d}, e::f};\nlet x = crate::g::h();\nnotcrate::i; super::super::j",
        "crate::",
    )
    .into_iter()
    .map(|(_, name)| name)
    .collect();
    assert_eq!(found, ["a", "b", "e", "g"]);
    assert_eq!(targets("super::super::j", "super::super::")[0].1, "j");
    assert_eq!(code("let a = 1; // crate::x"), "let a = 1; ");
}
