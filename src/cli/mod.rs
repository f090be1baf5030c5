//! The command line: what `crosstalk` takes, how it reads its
//! configuration, and the commands that manage the team (`add`, `rotate`,
//! `revoke`, `people`).
//!
//! Every flag has an environment variable. An empty variable means unset
//! (systemd's `EnvironmentFile` writes `RELAY_PORT=` for "no value"), and
//! `--env-file FILE` reads variables from the service's own file, as
//! systemd would, so an administrator runs a command with exactly the
//! service's configuration: flags come first, then the process's
//! environment, then the file, then the defaults.
//!
//! The team commands (`team.rs`) change the team through the core's
//! [`Team`](crate::relay::Team), on the database a running relay uses; the
//! relay watches the database, so a change counts from the next request
//! on. Which store stands behind the team is [`crate::server`]'s to say.

use crate::config::{AddressArgs, Database, ServeArgs};
mod team;

pub use team::admin;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::{
    collections::HashMap,
    ffi::OsString,
    path::{Path, PathBuf},
};

/// The version, the commit it was built from and the build date.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CROSSTALK_COMMIT"),
    ", built ",
    env!("CROSSTALK_BUILD_DATE"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "crosstalk",
    version = VERSION,
    about = "A relay for a team's coding agents: MCP, REST and a team page over one SQLite file or PostgreSQL."
)]
pub struct Cli {
    /// Read variables from FILE (VAR=value lines, as systemd's
    /// EnvironmentFile): the service's configuration, for an administrator.
    #[arg(long, global = true, value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the relay.
    Serve(Box<ServeArgs>),
    /// Check the configuration and the machine without serving: exits
    /// non-zero, saying which variable to change, where `serve` would refuse.
    Check(Box<ServeArgs>),
    #[command(flatten)]
    Admin(Admin),
    /// Copy the live database to PATH, consistently, while the relay runs.
    Backup {
        #[command(flatten)]
        database: Database,
        /// Where to write the copy (a new file).
        path: PathBuf,
    },
    /// Replace the database with the copy at PATH. The relay must be stopped.
    Restore {
        #[command(flatten)]
        database: Database,
        /// A copy made by `crosstalk backup`.
        path: PathBuf,
    },
    /// Copy this relay's SQLite database (RELAY_DB: people, tokens, live
    /// messages) into the empty PostgreSQL database at RELAY_DATABASE_URL,
    /// keeping ids, and check the counts. The relay must be stopped.
    MigrateToPostgres {
        #[command(flatten)]
        database: Database,
    },
    /// Run a real relay on a spare loopback port and show two agents talking.
    Demo,
    /// A local stdio MCP server for Claude Code: forwards the relay's tools
    /// and turns your inbox into pushed channel events (`.mcp.json`).
    Bridge(crate::bridge::Reach),
    /// Set an agent up for this relay, in its own user-level configuration:
    /// Claude Code (the crosstalk plugin), Codex (the relay and its hooks),
    /// Gemini CLI (the relay and its hook), OpenCode (the relay and the
    /// crosstalk plugin) or Cursor (the relay).
    Connect(crate::connect::Connect),
    /// A hook of Claude Code, Codex, Gemini CLI or OpenCode (the crosstalk
    /// plugin and `connect` set these up): reads the client's hook JSON on
    /// stdin and brings your teammates' messages and approvals to the
    /// session.
    Hook(crate::hook::Hook),
}

/// The commands that manage the team.
#[derive(Debug, Subcommand)]
pub enum Admin {
    /// Add a person; prints their token once, and how to connect an agent.
    Add {
        /// Lowercase letters, digits, '.', '_', '-'; up to 32 characters.
        handle: String,
        /// The name teammates see (default: the handle).
        name: Option<String>,
        #[command(flatten)]
        database: Database,
        #[command(flatten)]
        address: AddressArgs,
    },
    /// Replace a person's token; the old one stops working at once.
    Rotate {
        /// The handle of the person whose token to replace.
        handle: String,
        #[command(flatten)]
        database: Database,
        #[command(flatten)]
        address: AddressArgs,
    },
    /// Cut a person off at once; their handle stays taken.
    Revoke {
        /// The handle of the person to cut off.
        handle: String,
        #[command(flatten)]
        database: Database,
        /// The relay's identities from the environment, to say when the
        /// handle also has one (which revoking cannot cut off).
        #[arg(long, env = "RELAY_PARTICIPANTS", hide_env_values = true, hide = true)]
        participants: Option<String>,
    },
    /// List people: handle, name, created, last seen, revoked.
    People {
        #[command(flatten)]
        database: Database,
    },
    /// Show or change when and where a person is told of messages their
    /// agent has not read: `--webhook URL`, `--after DURATION`, `--off`.
    Notify {
        /// The person's handle.
        handle: String,
        /// Post notifications to this https:// URL (an ntfy topic URL, a
        /// Slack-compatible incoming webhook, or any that takes JSON).
        #[arg(long, value_name = "URL", conflicts_with = "no_webhook")]
        webhook: Option<String>,
        /// What the webhook is posted: json, ntfy or slack.
        #[arg(long, value_name = "FORMAT")]
        format: Option<String>,
        /// Post no more notifications to a webhook.
        #[arg(long)]
        no_webhook: bool,
        /// How long a message may stay unread before they are told: 90s,
        /// 5m, 1h (at most a day); 0 is at once.
        #[arg(long, value_name = "DURATION", conflicts_with = "off")]
        after: Option<String>,
        /// Never tell them.
        #[arg(long)]
        off: bool,
        #[command(flatten)]
        database: Database,
        /// Whether plain http and private addresses may be notified, as
        /// the relay itself is configured.
        #[arg(long, env = "RELAY_NOTIFY_ALLOW_PRIVATE", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new(), hide = true)]
        notify_allow_private: bool,
    },
}

impl Admin {
    /// The database the command works on.
    pub fn database(&self) -> &Database {
        match self {
            Admin::Add { database, .. }
            | Admin::Rotate { database, .. }
            | Admin::Revoke { database, .. }
            | Admin::People { database }
            | Admin::Notify { database, .. } => database,
        }
    }

    /// Whether the command only reads (and so must not create a database).
    pub fn reads_only(&self) -> bool {
        matches!(self, Admin::People { .. })
    }
}

/// Why the command line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Clap(#[from] clap::Error),
    #[error("cannot read the --env-file {}", .path.display())]
    EnvFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Cli {
    /// Parses the process's command line and environment.
    pub fn from_env() -> Result<Cli, CliError> {
        let environment: HashMap<String, String> = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .collect();
        Cli::parse_with(std::env::args_os(), &environment)
    }

    /// Parses `args` with `environment` as the process's environment:
    /// empty variables are unset, and `--env-file` fills in what neither
    /// the flags nor the environment give.
    pub fn parse_with(
        args: impl IntoIterator<Item = impl Into<OsString>>,
        environment: &HashMap<String, String>,
    ) -> Result<Cli, CliError> {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let from_file = match env_file_in(&args) {
            Some(path) => {
                read_env_file(&path).map_err(|source| CliError::EnvFile { path, source })?
            }
            None => HashMap::new(),
        };
        let command = configure(Cli::command(), environment, &from_file);
        let matches = command.try_get_matches_from(args)?;
        Ok(Cli::from_arg_matches(&matches)?)
    }
}

/// The `--env-file` value among the arguments, read before clap parses.
fn env_file_in(args: &[OsString]) -> Option<PathBuf> {
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--env-file" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--env-file=") {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// `VAR=value` lines as systemd's `EnvironmentFile` takes them: blank lines
/// and `#` or `;` comments skipped, an optional `export `, values optionally
/// in single or double quotes.
pub fn read_env_file(path: &Path) -> std::io::Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with(['#', ';']))
        .filter_map(|line| {
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (name, value) = line.split_once('=')?;
            let value = value.trim();
            let value = [('"', '"'), ('\'', '\'')]
                .iter()
                .find_map(|(open, close)| value.strip_prefix(*open)?.strip_suffix(*close))
                .unwrap_or(value);
            Some((name.trim().to_owned(), value.to_owned()))
        })
        .collect())
}

/// Applies the environment rules to every argument of every command: a
/// variable set but empty is no value; one unset in the environment takes
/// the env file's value, as a default below flags and the environment.
fn configure(
    command: clap::Command,
    environment: &HashMap<String, String>,
    from_file: &HashMap<String, String>,
) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    let mut command = command.mut_args(|arg| {
        let Some(variable) = arg.get_env().and_then(|v| v.to_str()).map(str::to_owned) else {
            return arg;
        };
        let arg = match environment.get(&variable).map(String::as_str) {
            Some(value) if !value.trim().is_empty() => return arg,
            // Set but empty: no value (clap would take the empty one).
            Some(_) => arg.env(None::<&str>),
            // Unset: the variable stays named, so `--help` lists it.
            None => arg,
        };
        match from_file.get(&variable).filter(|v| !v.trim().is_empty()) {
            // A secret's default is never shown in `--help`.
            Some(value) if arg.is_hide_env_values_set() => {
                arg.default_value(value.clone()).hide_default_value(true)
            }
            Some(value) => arg.default_value(value.clone()),
            None => arg,
        }
    });
    for name in names {
        command = command.mut_subcommand(name, |sub| configure(sub, environment, from_file));
    }
    command
}
