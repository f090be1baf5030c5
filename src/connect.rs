//! `crosstalk connect CLIENT`: sets an agent up for this relay in the
//! client's own user-level configuration, the person's token where that
//! client reads its secrets and never in a project directory.
//!
//! `claude`: this build's Claude Code plugin (the bridge and the hooks) is
//! written as a local marketplace under the user's data directory
//! (`$XDG_DATA_HOME/crosstalk/claude-marketplace`, else
//! `~/.local/share/…`), which Claude Code reads in place; `claude plugin
//! marketplace add` and `claude plugin install crosstalk@crosstalk` take
//! it (both change nothing the second time); `CROSSTALK_URL` and
//! `CROSSTALK_TOKEN` go into the `env` of `~/.claude/settings.json`, which
//! Claude Code gives its MCP servers and hooks, merged with what is there
//! and the file made private (0600). `--print` shows each step and writes
//! nothing.

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// The clients `connect` sets up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: the crosstalk plugin, and the relay in its settings.
    Claude,
}

/// The plugin's files, as this build ships them: (path in the
/// marketplace, contents).
const CLAUDE_MARKETPLACE: &[(&str, &str)] = &[
    (
        ".claude-plugin/marketplace.json",
        include_str!("../.claude-plugin/marketplace.json"),
    ),
    (
        "deploy/claude-plugin/.claude-plugin/plugin.json",
        include_str!("../deploy/claude-plugin/.claude-plugin/plugin.json"),
    ),
    (
        "deploy/claude-plugin/.mcp.json",
        include_str!("../deploy/claude-plugin/.mcp.json"),
    ),
    (
        "deploy/claude-plugin/hooks/hooks.json",
        include_str!("../deploy/claude-plugin/hooks/hooks.json"),
    ),
];

/// What `connect` needs to know.
pub struct Connect {
    pub client: Client,
    pub url: String,
    pub token: String,
    /// Show the steps; take none.
    pub print: bool,
    /// The `claude` program.
    pub claude: PathBuf,
}

pub fn run(connect: &Connect) -> anyhow::Result<()> {
    crate::bridge::check_url(&connect.url)?;
    match connect.client {
        Client::Claude => claude(connect),
    }
}

fn claude(connect: &Connect) -> anyhow::Result<()> {
    let home = home()?;
    let marketplace = data_dir(&home).join("crosstalk/claude-marketplace");
    let settings_path = home.join(".claude/settings.json");
    let settings = merged_env(&settings_path, &connect.url, &connect.token)?;
    let claude = connect.claude.display().to_string();
    let market = marketplace.display().to_string();
    let steps = [
        vec![
            claude.as_str(),
            "plugin",
            "marketplace",
            "add",
            market.as_str(),
        ],
        vec![claude.as_str(), "plugin", "install", "crosstalk@crosstalk"],
    ];
    if connect.print {
        println!("# the crosstalk plugin of this build, in {market}:");
        for (path, _) in CLAUDE_MARKETPLACE {
            println!("#   {path}");
        }
        for step in &steps {
            println!("{}", step.join(" "));
        }
        let mut shown = settings.clone();
        shown["env"]["CROSSTALK_TOKEN"] = json!(masked(&connect.token));
        println!(
            "# {} (mode 0600), the token masked here:\n{}",
            settings_path.display(),
            serde_json::to_string_pretty(&shown)?
        );
        return Ok(());
    }
    for (path, contents) in CLAUDE_MARKETPLACE {
        let path = marketplace.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        if std::fs::read_to_string(&path).ok().as_deref() != Some(contents) {
            std::fs::write(&path, contents)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    for step in &steps {
        let done = std::process::Command::new(step[0])
            .args(&step[1..])
            .output()
            .with_context(|| {
                format!("running {claude} (is Claude Code installed? --claude names it)")
            })?;
        if !done.status.success() {
            bail!(
                "{} failed: {}{}",
                step.join(" "),
                String::from_utf8_lossy(&done.stdout),
                String::from_utf8_lossy(&done.stderr)
            );
        }
    }
    // After the plugin steps: Claude Code rewrites this file as it adds them.
    let settings = merged_env(&settings_path, &connect.url, &connect.token)?;
    write_private(&settings_path, &serde_json::to_vec_pretty(&settings)?)?;
    println!(
        "Claude Code is connected to {}: the crosstalk plugin (from {market}) is installed, \
         and CROSSTALK_URL and CROSSTALK_TOKEN are in {} (0600). A session started from now \
         on is told of teammates' messages; no flag needed.",
        connect.url,
        settings_path.display()
    );
    Ok(())
}

/// `path`'s settings (none: `{}`) with the relay's variables in `env`.
fn merged_env(path: &Path, url: &str, token: &str) -> anyhow::Result<Value> {
    let mut settings = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str::<Value>(&text)
            .with_context(|| format!("{} is not JSON; fix or move it", path.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let Some(object) = settings.as_object_mut() else {
        bail!("{} is not a JSON object; fix or move it", path.display());
    };
    let env = object
        .entry("env")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(env) = env.as_object_mut() else {
        bail!("\"env\" in {} is not an object; fix it", path.display());
    };
    env.insert("CROSSTALK_URL".into(), json!(url));
    env.insert("CROSSTALK_TOKEN".into(), json!(token));
    Ok(settings)
}

/// Writes `bytes` to `path`, readable by its owner only, through a file
/// beside it renamed over it.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    let next = path.with_extension("json.crosstalk");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&next)
        .with_context(|| format!("writing {}", next.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&next, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn masked(token: &str) -> String {
    let shown: String = token.chars().take(6).collect();
    format!("{shown}…")
}

fn home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home)),
        _ => bail!("HOME is not set: connect writes the client's user-level configuration"),
    }
}

fn data_dir(home: &Path) -> PathBuf {
    match std::env::var_os("XDG_DATA_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home.join(".local/share"),
    }
}
