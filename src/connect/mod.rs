//! `crosstalk connect CLIENT`: sets an agent up for this relay in the
//! client's own user-level configuration, the person's token where that
//! client reads its secrets and never in a project directory.
//!
//! Each client's module makes a [`Plan`]: the files it writes (merged with
//! what the person has there: their other servers and settings stay as
//! they were, and a second run changes nothing) and the programs it runs.
//! `--print` shows the plan, the token masked, and does nothing.
//!
//! - `claude` (`claude.rs`): the crosstalk plugin (the bridge and its
//!   hooks) and the relay's variables in Claude Code's settings.
//! - `codex` (`codex.rs`): the relay in `config.toml`, and hooks that bring
//!   a teammate's message to a session (`crosstalk hook … --client codex`).
//! - `gemini`, `opencode`, `cursor` (`json.rs`): the relay in the client's
//!   JSON settings.
//!
//! Claude Code hands its MCP servers and hooks the variables in its
//! settings; the others read the token from the environment
//! (`CROSSTALK_TOKEN`), each in its own way. For them `connect` writes the
//! relay's address and the token into one private file (0600,
//! `~/.config/crosstalk/env`) for the person's shell profile to load: it
//! edits no profile itself.

mod claude;
mod codex;
mod json;

use anyhow::{Context, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The clients `connect` sets up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: the crosstalk plugin, and the relay in its settings.
    Claude,
    /// Codex: the relay in ~/.codex/config.toml, and its hooks.
    Codex,
    /// Gemini CLI: the relay in ~/.gemini/settings.json.
    Gemini,
    /// OpenCode: the relay in ~/.config/opencode/opencode.json.
    Opencode,
    /// Cursor: the relay in ~/.cursor/mcp.json (not tried here).
    Cursor,
}

/// What `connect` needs to know: its command line.
#[derive(Debug, clap::Args)]
pub struct Connect {
    /// The agent: claude, codex, gemini, opencode or cursor.
    #[arg(value_enum)]
    pub client: Client,
    /// The relay's address, e.g. https://relay.example.com.
    #[arg(long, env = "CROSSTALK_URL", value_name = "URL")]
    pub url: String,
    /// Your token, as `crosstalk add` printed it.
    #[arg(long, env = "CROSSTALK_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Show what it would do, and do nothing.
    #[arg(long)]
    pub print: bool,
    /// The client's program (`claude`, `codex`), where connect or the hooks
    /// it writes run it (default: the one on PATH).
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
}

impl Connect {
    /// The relay's MCP endpoint.
    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url.trim_end_matches('/'))
    }

    /// The client's program: `--program`, else the one named `name` on PATH
    /// now (hooks written into settings may run under another PATH), else
    /// the bare name.
    fn program_or(&self, name: &str) -> String {
        if let Some(program) = &self.program {
            return program.display().to_string();
        }
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
            .map_or_else(|| name.to_owned(), |found| found.display().to_string())
    }
}

pub fn run(connect: &Connect) -> anyhow::Result<()> {
    crate::bridge::check_url(&connect.url)?;
    let home = home()?;
    let plan = match connect.client {
        Client::Claude => claude::plan(connect, &home)?,
        Client::Codex => codex::plan(connect, &home)?,
        Client::Gemini => json::gemini(connect, &home)?,
        Client::Opencode => json::opencode(connect, &home)?,
        Client::Cursor => json::cursor(connect, &home)?,
    };
    if connect.print {
        plan.show(&connect.token);
    } else {
        plan.take()?;
        println!("{}", plan.done);
    }
    Ok(())
}

/// The steps that connect a client, in order, and what to tell the person
/// once they are taken.
struct Plan {
    steps: Vec<Step>,
    done: String,
}

enum Step {
    /// Write the file, when its contents differ (a second run writes
    /// nothing); a private one is made its owner's only (0600).
    Write {
        path: PathBuf,
        contents: Contents,
        private: bool,
    },
    /// Run a program, which must succeed.
    Run { program: String, args: Vec<String> },
}

/// A file's new contents: known when the plan is made, or read from the
/// file as it is when the step is taken (a program run before may have
/// changed it).
enum Contents {
    Now(String),
    Then(Box<dyn Fn() -> anyhow::Result<String>>),
}

impl Contents {
    fn text(&self) -> anyhow::Result<String> {
        match self {
            Contents::Now(text) => Ok(text.clone()),
            Contents::Then(make) => make(),
        }
    }
}

impl Plan {
    fn show(&self, token: &str) {
        for step in &self.steps {
            match step {
                Step::Write {
                    path,
                    contents,
                    private,
                } => {
                    let text = contents
                        .text()
                        .unwrap_or_else(|error| format!("(cannot tell: {error:#})"));
                    let mode = if *private { " (mode 0600)" } else { "" };
                    println!(
                        "# {}{mode}, the token masked here:\n{}\n",
                        path.display(),
                        text.replace(token, &masked(token)).trim_end()
                    );
                }
                Step::Run { program, args } => println!("{program} {}\n", args.join(" ")),
            }
        }
    }

    fn take(&self) -> anyhow::Result<()> {
        for step in &self.steps {
            match step {
                Step::Write {
                    path,
                    contents,
                    private,
                } => write(path, contents.text()?.as_bytes(), *private)?,
                Step::Run { program, args } => {
                    let done = std::process::Command::new(program)
                        .args(args)
                        .output()
                        .with_context(|| {
                            format!("running {program} (is it installed? --program names it)")
                        })?;
                    if !done.status.success() {
                        bail!(
                            "{program} {} failed: {}{}",
                            args.join(" "),
                            String::from_utf8_lossy(&done.stdout),
                            String::from_utf8_lossy(&done.stderr)
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// The JSON object in the file at `path` (none there: `{}`); anything else
/// is the person's to fix, and nothing is written over it.
fn read_json(path: &Path) -> anyhow::Result<serde_json::Map<String, Value>> {
    match read(path)? {
        None => Ok(serde_json::Map::new()),
        Some(text) if text.trim().is_empty() => Ok(serde_json::Map::new()),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(object)) => Ok(object),
            Ok(_) => bail!("{} is not a JSON object; fix or move it", path.display()),
            Err(error) => bail!("{} is not JSON ({error}); fix or move it", path.display()),
        },
    }
}

/// The object at `key` in `object`, made when missing; anything else there
/// is the person's to fix.
fn object_at<'a>(
    object: &'a mut serde_json::Map<String, Value>,
    key: &str,
    path: &Path,
) -> anyhow::Result<&'a mut serde_json::Map<String, Value>> {
    object
        .entry(key)
        .or_insert_with(|| Value::Object(serde_json::Map::new()))
        .as_object_mut()
        .with_context(|| format!("\"{key}\" in {} is not an object; fix it", path.display()))
}

/// Puts `group` (a hook's handlers) into the list of `event` under
/// `settings`' `hooks`: in place of the one an earlier `connect` wrote
/// (whose command contains `marker`), else after the person's own, which
/// stay where they are (so the trust a client keeps by position holds).
fn merge_hook(
    settings: &mut serde_json::Map<String, Value>,
    path: &Path,
    event: &str,
    group: Value,
    marker: &str,
) -> anyhow::Result<()> {
    let hooks = object_at(settings, "hooks", path)?;
    let Some(groups) = hooks
        .entry(event)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
    else {
        bail!(
            "\"hooks\".\"{event}\" in {} is not a list; fix it",
            path.display()
        );
    };
    let ours = groups.iter().position(|group| {
        group["hooks"].as_array().is_some_and(|handlers| {
            handlers.iter().any(|handler| {
                handler["command"]
                    .as_str()
                    .is_some_and(|command| command.contains(marker))
            })
        })
    });
    match ours {
        Some(at) => groups[at] = group,
        None => groups.push(group),
    }
    Ok(())
}

fn pretty(object: serde_json::Map<String, Value>) -> String {
    let mut text = serde_json::to_string_pretty(&Value::Object(object)).expect("JSON");
    text.push('\n');
    text
}

/// The file's text, or none when there is no file.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `bytes` to `path` through a file beside it renamed over it,
/// unless the file already holds them. A private file is its owner's only;
/// another keeps the mode it had.
fn write(path: &Path, bytes: &[u8], private: bool) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let before = std::fs::metadata(path).ok();
    let unchanged = std::fs::read(path).is_ok_and(|now| now == bytes);
    let mode = match &before {
        _ if private => 0o600,
        Some(meta) => meta.permissions().mode() & 0o7777,
        None => 0o644,
    };
    if unchanged && before.is_some_and(|meta| meta.permissions().mode() & 0o7777 == mode) {
        return Ok(());
    }
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    let mut name = path.file_name().expect("a file").to_owned();
    name.push(".crosstalk");
    let next = path.with_file_name(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&next)
        .with_context(|| format!("writing {}", next.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&next, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The private file that holds the relay's address and the person's token
/// for the clients that read them from the environment, and the step that
/// writes it.
fn env_file(connect: &Connect, home: &Path) -> (PathBuf, Step) {
    let path = config_dir(home).join("crosstalk/env");
    let contents = format!(
        "# crosstalk: the relay and your token, for the agents `crosstalk connect` set up.\n\
         # Your shell's profile loads it: . {}\n\
         export CROSSTALK_URL={}\n\
         export CROSSTALK_TOKEN={}\n",
        path.display(),
        shell_quote(&connect.url),
        shell_quote(&connect.token),
    );
    let step = Step::Write {
        path: path.clone(),
        contents: Contents::Now(contents),
        private: true,
    };
    (path, step)
}

/// What the person does once for the clients that read the token from the
/// environment.
fn load_env_hint(env: &Path) -> String {
    format!(
        "They read CROSSTALK_TOKEN from the environment: add this line to your shell's profile \
         (~/.bashrc, ~/.zshrc), then open a new shell:\n\n    . {}\n",
        env.display()
    )
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// This program, as the hooks written into a client's settings run it.
fn this_program() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding this program, for the hooks")?;
    Ok(exe.display().to_string())
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
    xdg("XDG_DATA_HOME").unwrap_or_else(|| home.join(".local/share"))
}

fn config_dir(home: &Path) -> PathBuf {
    xdg("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"))
}

fn xdg(variable: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_once_and_a_private_one_is_the_owner_s_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/settings.json");
        write(&path, b"{}\n", true).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        write(&path, b"{}\n", true).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified
        );
        // Another keeps the mode the person gave it.
        let other = dir.path().join("config.toml");
        std::fs::write(&other, "a = 1\n").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&other, b"a = 2\n", false).unwrap();
        let mode = std::fs::metadata(&other).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "a = 2\n");
    }

    #[test]
    fn what_is_not_a_json_object_is_left_for_the_person() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "[1]").unwrap();
        assert!(read_json(&path).is_err());
        std::fs::write(&path, "{ not json").unwrap();
        assert!(read_json(&path).is_err());
        assert!(read_json(&dir.path().join("none.json")).unwrap().is_empty());
    }
}
