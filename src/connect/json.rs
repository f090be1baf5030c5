//! The clients whose MCP servers are a JSON object in one user-level file:
//! the relay goes in as `crosstalk`, reading the token from
//! `CROSSTALK_TOKEN` the way that client expands the environment, and
//! everything else in the file stays as it was.
//!
//! - Gemini CLI: `~/.gemini/settings.json`, `mcpServers.crosstalk` with
//!   `httpUrl`, `"Authorization": "Bearer $CROSSTALK_TOKEN"` and `trust`
//!   (its tools run without a confirmation each time, as Codex's do: they
//!   only talk to the relay, which refuses likely secrets); and its
//!   `AfterAgent` hook (`crosstalk hook stop --client gemini`), which goes
//!   on with a teammate's message when a turn ends. It connects only in a
//!   folder the person trusts (its own prompt, or
//!   `~/.gemini/trustedFolders.json`): theirs to decide, and said so.
//! - OpenCode: `$XDG_CONFIG_HOME/opencode/opencode.json` (else
//!   `~/.config/…`), `mcp.crosstalk` of `type: "remote"` and
//!   `{env:CROSSTALK_TOKEN}`; and beside it the crosstalk plugin
//!   (`plugin/crosstalk.js`, from `opencode.js`), which prompts the
//!   person's session with a teammate's message as it comes.
//! - Cursor: `~/.cursor/mcp.json`, `mcpServers.crosstalk` with `url` and
//!   `${env:CROSSTALK_TOKEN}`, as Cursor's documentation gives it: its CLI
//!   is not on npm, and this was not tried here.

use super::{Connect, Contents, Plan, Step};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub(super) fn gemini(connect: &Connect, home: &Path) -> anyhow::Result<Plan> {
    let server = json!({
        "httpUrl": connect.mcp_url(),
        "headers": { "Authorization": "Bearer $CROSSTALK_TOKEN" },
        "trust": true,
    });
    let path = home.join(".gemini/settings.json");
    // Gemini CLI's timeouts are in milliseconds.
    let marker = " hook stop --client gemini";
    let command = format!("{}{marker}", super::shell_quote(&super::this_program()?));
    let hook = json!({ "matcher": "*", "hooks": [{
        "name": "crosstalk", "type": "command", "command": command, "timeout": 10000,
    }] });
    plan(
        connect,
        home,
        path,
        ("mcpServers", server),
        &[("AfterAgent", hook, marker)],
        "Gemini CLI",
        "When one of your turns ends, a teammate's message that waits goes on in it. Gemini \
         CLI connects to the relay only in a folder you trust: it asks the first time you \
         start it in one (or list the folder in ~/.gemini/trustedFolders.json).",
    )
}

pub(super) fn opencode(connect: &Connect, home: &Path) -> anyhow::Result<Plan> {
    let server = json!({
        "type": "remote",
        "url": connect.mcp_url(),
        "enabled": true,
        "headers": { "Authorization": "Bearer {env:CROSSTALK_TOKEN}" },
    });
    let dir = super::config_dir(home).join("opencode");
    let mut plan = plan(
        connect,
        home,
        dir.join("opencode.json"),
        ("mcp", server),
        &[],
        "OpenCode",
        "A teammate's message reaches the session you last used as its next prompt (the \
         crosstalk plugin, in OpenCode's plugin folder).",
    )?;
    // OpenCode loads every plugin in its config folder's `plugin/`.
    let program = serde_json::to_string(&super::this_program()?)?;
    plan.steps.push(Step::Write {
        path: dir.join("plugin/crosstalk.js"),
        contents: Contents::Now(include_str!("opencode.js").replace("\"{{PROGRAM}}\"", &program)),
        private: false,
    });
    Ok(plan)
}

pub(super) fn cursor(connect: &Connect, home: &Path) -> anyhow::Result<Plan> {
    let server = json!({
        "url": connect.mcp_url(),
        "headers": { "Authorization": "Bearer ${env:CROSSTALK_TOKEN}" },
    });
    let path = home.join(".cursor/mcp.json");
    plan(
        connect,
        home,
        path,
        ("mcpServers", server),
        &[],
        "Cursor",
        "(Cursor was not tried with crosstalk: this follows its documentation.)",
    )
}

/// The plan for a client whose servers are `path`'s object at `key`:
/// `crosstalk`'s fields there set, any others the person gave it kept; and
/// each of `hooks` (event, handler group, what marks it as crosstalk's)
/// merged into the file's `hooks`.
fn plan(
    connect: &Connect,
    home: &Path,
    path: PathBuf,
    (key, server): (&str, Value),
    hooks: &[(&str, Value, &str)],
    name: &str,
    note: &str,
) -> anyhow::Result<Plan> {
    let mut settings = super::read_json(&path)?;
    let servers = super::object_at(&mut settings, key, &path)?;
    let entry = super::object_at(servers, "crosstalk", &path)?;
    if let Value::Object(fields) = server {
        entry.extend(fields);
    }
    for (event, group, marker) in hooks {
        super::merge_hook(&mut settings, &path, event, group.clone(), marker)?;
    }
    let (env, env_step) = super::env_file(connect, home);
    Ok(Plan {
        steps: vec![
            env_step,
            Step::Write {
                path: path.clone(),
                contents: Contents::Now(super::pretty(settings)),
                private: false,
            },
        ],
        done: [
            format!(
                "{name} is connected to {}: the relay is in {}.",
                connect.url,
                path.display()
            ),
            note.to_owned(),
            super::load_env_hint(&env),
        ]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" "),
    })
}
