//! `connect claude`: this build's Claude Code plugin (the bridge and the
//! hooks) is written as a local marketplace under the user's data
//! directory (`$XDG_DATA_HOME/crosstalk/claude-marketplace`, else
//! `~/.local/share/…`), which Claude Code reads in place; `claude plugin
//! marketplace add` and `claude plugin install crosstalk@crosstalk` take it
//! (both change nothing the second time); `CROSSTALK_URL` and
//! `CROSSTALK_TOKEN` go into the `env` of `~/.claude/settings.json`, which
//! Claude Code gives its MCP servers and hooks, merged with what is there
//! and the file made private (0600).

use super::{Connect, Contents, Plan, Step};
use serde_json::json;
use std::path::Path;

/// The plugin's files, as this build ships them: (path in the
/// marketplace, contents).
const MARKETPLACE: &[(&str, &str)] = &[
    (
        ".claude-plugin/marketplace.json",
        include_str!("../../.claude-plugin/marketplace.json"),
    ),
    (
        "deploy/claude-plugin/.claude-plugin/plugin.json",
        include_str!("../../deploy/claude-plugin/.claude-plugin/plugin.json"),
    ),
    (
        "deploy/claude-plugin/.mcp.json",
        include_str!("../../deploy/claude-plugin/.mcp.json"),
    ),
    (
        "deploy/claude-plugin/hooks/hooks.json",
        include_str!("../../deploy/claude-plugin/hooks/hooks.json"),
    ),
];

pub(super) fn plan(connect: &Connect, home: &Path) -> anyhow::Result<Plan> {
    let marketplace = super::data_dir(home).join("crosstalk/claude-marketplace");
    let settings = home.join(".claude/settings.json");
    let claude = connect.program_or("claude");
    let mut steps: Vec<Step> = MARKETPLACE
        .iter()
        .map(|(path, contents)| Step::Write {
            path: marketplace.join(path),
            contents: Contents::Now((*contents).to_owned()),
            private: false,
        })
        .collect();
    let market = marketplace.display().to_string();
    for args in [
        vec!["plugin", "marketplace", "add", market.as_str()],
        vec!["plugin", "install", "crosstalk@crosstalk"],
    ] {
        steps.push(Step::Run {
            program: claude.clone(),
            args: args.into_iter().map(str::to_owned).collect(),
        });
    }
    // Read when written, after the plugin steps: Claude Code rewrites this
    // file as it adds them.
    let (url, token, path) = (connect.url.clone(), connect.token.clone(), settings.clone());
    steps.push(Step::Write {
        path: settings.clone(),
        contents: Contents::Then(Box::new(move || with_env(&path, &url, &token))),
        private: true,
    });
    Ok(Plan {
        steps,
        done: format!(
            "Claude Code is connected to {}: the crosstalk plugin (from {market}) is installed, \
             and CROSSTALK_URL and CROSSTALK_TOKEN are in {} (0600). A session started from \
             now on is told of teammates' messages; no flag needed.",
            connect.url,
            settings.display()
        ),
    })
}

/// The settings at `path` with the relay's variables in `env`.
fn with_env(path: &Path, url: &str, token: &str) -> anyhow::Result<String> {
    let mut settings = super::read_json(path)?;
    let env = super::object_at(&mut settings, "env", path)?;
    env.insert("CROSSTALK_URL".into(), json!(url));
    env.insert("CROSSTALK_TOKEN".into(), json!(token));
    Ok(super::pretty(settings))
}
