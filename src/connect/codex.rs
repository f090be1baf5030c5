//! `connect codex`: the relay as an MCP server in Codex's `config.toml`
//! (`$CODEX_HOME`, else `~/.codex`), its token read from `CROSSTALK_TOKEN`
//! (`bearer_token_env_var`) and its tools run without asking the person
//! each time (`default_tools_approval_mode = "approve"`: they only talk to
//! the relay, which refuses likely secrets); and the crosstalk hooks in
//! `hooks.json` beside it (`crosstalk hook EVENT --client codex`, see
//! `hook`). Codex runs a new or changed hook only once the person trusts
//! it, which only its terminal asks: the next start shows "Hooks need
//! review", and "Trust all and continue" is the person's step.
//!
//! Both files are merged: the person's lines, comments and other servers
//! in `config.toml` stay as they were (it is edited, not rewritten), and
//! their own hooks stay where they are, so their trust holds.

use super::{Connect, Contents, Plan, Step};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The hooks written, each with the seconds Codex gives it: none waits
/// (the waiter `session-start` starts runs on its own), and Codex allows a
/// `SessionEnd` hook at most 3.
const HOOKS: &[(&str, &str, u64)] = &[
    ("SessionStart", "session-start", 10),
    ("UserPromptSubmit", "user-prompt-submit", 10),
    ("Stop", "stop", 10),
    ("SessionEnd", "session-end", 3),
];

pub(super) fn plan(connect: &Connect, home: &Path) -> anyhow::Result<Plan> {
    let dir = match std::env::var_os("CODEX_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home.join(".codex"),
    };
    let config_path = dir.join("config.toml");
    let hooks_path = dir.join("hooks.json");
    let config = with_server(super::read(&config_path)?.unwrap_or_default(), connect)
        .with_context(|| {
            format!(
                "{} is not valid TOML; fix or move it",
                config_path.display()
            )
        })?;
    let crosstalk = super::this_program()?;
    // The `codex` the waiter runs to hand a session a message.
    let codex = connect.program_or("codex");
    let hooks = with_hooks(super::read_json(&hooks_path)?, &crosstalk, &codex)
        .with_context(|| format!("in {}", hooks_path.display()))?;
    let (env, env_step) = super::env_file(connect, home);
    Ok(Plan {
        steps: vec![
            env_step,
            Step::Write {
                path: config_path.clone(),
                contents: Contents::Now(config),
                private: false,
            },
            Step::Write {
                path: hooks_path.clone(),
                contents: Contents::Now(hooks),
                private: false,
            },
        ],
        done: format!(
            "Codex is connected to {}: the relay is in {} and crosstalk's hooks in {}. \
             The next time Codex starts it shows \"Hooks need review\": choose \"Trust all \
             and continue\" (or review them with /hooks), and a teammate's message then reaches \
             a running session by itself. {}",
            connect.url,
            config_path.display(),
            hooks_path.display(),
            super::load_env_hint(&env)
        ),
    })
}

/// Codex's `config.toml` with the relay's server table: its keys set, any
/// others the person gave it kept.
fn with_server(text: String, connect: &Connect) -> anyhow::Result<String> {
    use toml_edit::{DocumentMut, Item, Table, value};
    let mut doc = text.parse::<DocumentMut>()?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    });
    let Some(servers) = servers.as_table_like_mut() else {
        bail!("mcp_servers is not a table");
    };
    if !servers.get("crosstalk").is_some_and(Item::is_table_like) {
        servers.insert("crosstalk", Item::Table(Table::new()));
    }
    let server = servers
        .get_mut("crosstalk")
        .and_then(Item::as_table_like_mut)
        .expect("made above");
    server.insert("url", value(connect.mcp_url()));
    server.insert("bearer_token_env_var", value("CROSSTALK_TOKEN"));
    server.insert("default_tools_approval_mode", value("approve"));
    Ok(doc.to_string())
}

/// Codex's `hooks.json` with crosstalk's hooks: each replaces the one an
/// earlier `connect` wrote, where it was, or comes after the person's own.
fn with_hooks(
    mut settings: serde_json::Map<String, Value>,
    crosstalk: &str,
    codex: &str,
) -> anyhow::Result<String> {
    for (event, name, timeout) in HOOKS {
        let mine = format!(" hook {name} --client codex");
        let mut command = format!("{}{mine}", super::shell_quote(crosstalk));
        if *name == "session-start" {
            command.push_str(&format!(" --program {}", super::shell_quote(codex)));
        }
        let group =
            json!({ "hooks": [{ "type": "command", "command": command, "timeout": timeout }] });
        super::merge_hook(&mut settings, Path::new("hooks.json"), event, group, &mine)?;
    }
    Ok(super::pretty(settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect() -> Connect {
        Connect {
            client: crate::connect::Client::Codex,
            url: "https://relay.example.com/".into(),
            token: "xtalk_secret".into(),
            print: false,
            program: None,
        }
    }

    #[test]
    fn the_person_s_config_keeps_its_lines_and_a_second_run_changes_nothing() {
        let theirs = "# my settings\nmodel = \"o4\" # the one I like\n\n\
                      [mcp_servers.docs]\ncommand = \"docs-mcp\"\n\n\
                      [mcp_servers.crosstalk]\nstartup_timeout_sec = 30\nurl = \"http://old/mcp\"\n";
        let once = with_server(theirs.into(), &connect()).unwrap();
        assert!(
            once.starts_with("# my settings\nmodel = \"o4\" # the one I like\n"),
            "{once}"
        );
        assert!(
            once.contains("[mcp_servers.docs]\ncommand = \"docs-mcp\"\n"),
            "{once}"
        );
        assert!(once.contains("startup_timeout_sec = 30"), "{once}");
        assert!(
            once.contains("url = \"https://relay.example.com/mcp\""),
            "{once}"
        );
        assert!(!once.contains("http://old"), "{once}");
        assert!(
            once.contains("bearer_token_env_var = \"CROSSTALK_TOKEN\""),
            "{once}"
        );
        assert!(
            !once.contains("xtalk_secret"),
            "the token stays in the environment"
        );
        assert_eq!(with_server(once.clone(), &connect()).unwrap(), once);
        let fresh = with_server(String::new(), &connect()).unwrap();
        assert!(fresh.starts_with("[mcp_servers.crosstalk]\n"), "{fresh}");
        assert!(with_server("mcp_servers = 3".into(), &connect()).is_err());
    }

    #[test]
    fn the_person_s_own_hooks_stay_where_they_are() {
        let theirs = json!({ "hooks": { "Stop": [
            { "hooks": [{ "type": "command", "command": "notify-me" }] },
        ] } });
        let Value::Object(theirs) = theirs else {
            unreachable!()
        };
        let once = with_hooks(theirs, "/bin/crosstalk", "/bin/codex").unwrap();
        let read: Value = serde_json::from_str(&once).unwrap();
        let stop = read["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop[0]["hooks"][0]["command"], "notify-me");
        assert_eq!(
            stop[1]["hooks"][0]["command"],
            "'/bin/crosstalk' hook stop --client codex"
        );
        assert_eq!(
            read["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "'/bin/crosstalk' hook session-start --client codex --program '/bin/codex'"
        );
        let Value::Object(again) = read else {
            unreachable!()
        };
        assert_eq!(
            with_hooks(again, "/bin/crosstalk", "/bin/codex").unwrap(),
            once
        );
    }
}
