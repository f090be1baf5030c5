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
//! The team commands change the team through the core's [`Team`], on the
//! database file a running relay uses; the relay watches the database, so a
//! change counts from the next request on. Which store stands behind the
//! team is [`crate::server`]'s to say, which also runs the other commands.

use crate::config::{AddressArgs, Database, ServeArgs};
use crate::relay::{NewToken, Team};
use crate::wire::attention::{ChangeNotifications, Notifications};
use crate::wire::timestamp;
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
    Bridge {
        /// The relay's address, e.g. https://relay.example.com.
        #[arg(long, env = "CROSSTALK_URL", value_name = "URL")]
        url: Option<String>,
        /// Your token (never the server's shared RELAY_TOKEN).
        #[arg(
            long,
            env = "CROSSTALK_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        token: Option<String>,
        /// Whether Claude Code shows crosstalk's channel events: `auto`
        /// reads how it was started (`--channels plugin:crosstalk@…` or
        /// `--dangerously-load-development-channels server:crosstalk`).
        #[arg(long, env = "CROSSTALK_CHANNELS", value_enum, default_value_t)]
        channels: crate::bridge::Channels,
    },
    /// Set an agent up for this relay, in its own user-level configuration:
    /// Claude Code (the crosstalk plugin), Codex (the relay and its hooks),
    /// Gemini CLI (the relay and its hook), OpenCode (the relay and the
    /// crosstalk plugin) or Cursor (the relay).
    Connect {
        /// The agent: claude, codex, gemini, opencode or cursor.
        #[arg(value_enum)]
        client: crate::connect::Client,
        /// The relay's address, e.g. https://relay.example.com.
        #[arg(long, env = "CROSSTALK_URL", value_name = "URL")]
        url: String,
        /// Your token, as `crosstalk add` printed it.
        #[arg(
            long,
            env = "CROSSTALK_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        token: String,
        /// Show what it would do, and do nothing.
        #[arg(long)]
        print: bool,
        /// The client's program (`claude`, `codex`), where connect or the
        /// hooks it writes run it (default: the one on PATH).
        #[arg(long, value_name = "PATH")]
        program: Option<std::path::PathBuf>,
    },
    /// A hook of Claude Code, Codex, Gemini CLI or OpenCode (the crosstalk
    /// plugin and `connect` set these up): reads the client's hook JSON on
    /// stdin and brings your teammates' messages and approvals to the
    /// session.
    Hook {
        /// The hook's event.
        #[arg(value_enum)]
        event: crate::hook::Event,
        /// The relay's address, e.g. https://relay.example.com.
        #[arg(long, env = "CROSSTALK_URL", value_name = "URL")]
        url: Option<String>,
        /// Your token.
        #[arg(
            long,
            env = "CROSSTALK_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        token: Option<String>,
        /// Whether Claude Code shows crosstalk's channel events, as for the
        /// bridge: where it does, the bridge delivers and the hook does
        /// nothing.
        #[arg(long, env = "CROSSTALK_CHANNELS", value_enum, default_value_t)]
        channels: crate::bridge::Channels,
        /// The client whose hook this is: its hook JSON, and its answer.
        #[arg(long, value_enum, default_value_t)]
        client: crate::hook::Client,
        /// The client's program, which Codex's waiter runs to hand a
        /// session a message (`codex queue`).
        #[arg(long, value_name = "PATH")]
        program: Option<std::path::PathBuf>,
        /// Be the session's waiter in this process, until process PID (the
        /// client) ends: Codex's `session-start` starts one so.
        #[arg(long, hide = true, value_name = "PID")]
        waiter: Option<u32>,
    },
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

/// Runs a command that manages the team.
pub async fn admin(team: &Team, command: Admin) -> anyhow::Result<()> {
    match command {
        Admin::Add {
            handle,
            name,
            address,
            ..
        } => {
            // Before the token exists: it is shown once, with lines that work.
            let url = address.agent_url()?;
            warn_if_default(&address, &url);
            let added = team.add(&handle, name.as_deref()).await?;
            println!("Added {} ({}).", added.handle, added.name);
            print_connection(&added, &url);
        }
        Admin::Rotate {
            handle, address, ..
        } => {
            let url = address.agent_url()?;
            warn_if_default(&address, &url);
            let rotated = team.rotate(&handle).await?;
            println!(
                "New token for {}; the old one no longer works.",
                rotated.handle
            );
            print_connection(&rotated, &url);
        }
        Admin::Revoke {
            handle,
            participants,
            ..
        } => {
            let revoked = team.revoke(&handle).await?;
            // Only the ids of `id:token,id:token`; the tokens are never read.
            let from_environment = participants
                .iter()
                .flat_map(|list| list.split(','))
                .filter_map(|entry| entry.split_once(':').map(|(id, _)| id.trim()))
                .any(|id| id == revoked.as_str());
            if from_environment {
                anyhow::bail!(
                    "Revoked {revoked}'s token, but {revoked} also has an identity in \
                     RELAY_PARTICIPANTS, which still works: remove it there and restart the relay."
                );
            }
            println!("Revoked {revoked}: their token no longer works.");
        }
        Admin::Notify {
            handle,
            webhook,
            format,
            no_webhook,
            after,
            off,
            notify_allow_private,
            ..
        } => {
            let mut change = ChangeNotifications {
                webhook_format: format,
                ..ChangeNotifications::default()
            };
            if let Some(url) = webhook {
                change.webhook = Some(Some(url));
            } else if no_webhook {
                change.webhook = Some(None);
            }
            if off {
                change.after_seconds = Some(None);
            } else if let Some(after) = after {
                change.after_seconds = Some(Some(parse_duration(&after)?));
            }
            notify(team, &handle, change, notify_allow_private).await?;
        }
        Admin::People { .. } => print_people(team).await?,
    }
    Ok(())
}

/// Changes a person's notification settings and says what they are now.
async fn notify(
    team: &Team,
    handle: &str,
    change: ChangeNotifications,
    allow_private: bool,
) -> anyhow::Result<()> {
    let (handle, current) = team.notify_settings(handle).await?;
    let settings = change.apply(current)?;
    team.set_notify_settings(&handle, settings.clone(), allow_private)
        .await?;
    let shown = Notifications::from(&settings);
    let when = match shown.after_seconds {
        None => "never told of unread messages".to_owned(),
        Some(0) => "told of unread messages at once".to_owned(),
        Some(seconds) => format!("told of unread messages after {seconds} s"),
    };
    let webhook = match &settings.webhook {
        Some(webhook) => format!(
            "posted to {} ({})",
            webhook.url.as_str(),
            webhook.format.as_str()
        ),
        None => "no webhook".to_owned(),
    };
    println!("{handle} is {when}; {webhook}.");
    Ok(())
}

/// Lists the team, revoked people too.
async fn print_people(team: &Team) -> anyhow::Result<()> {
    let people = team.people().await?;
    if people.is_empty() {
        println!("Nobody yet. Add someone with: crosstalk add HANDLE [NAME]");
        return Ok(());
    }
    println!(
        "{:<20} {:<24} {:<25} {:<25} REVOKED",
        "HANDLE", "NAME", "CREATED", "LAST SEEN"
    );
    for p in people {
        println!(
            "{:<20} {:<24} {:<25} {:<25} {}",
            p.handle.as_str(),
            p.name,
            timestamp(p.created_at),
            p.last_seen_at.map_or_else(|| "never".into(), timestamp),
            p.revoked_at.map_or_else(|| "-".into(), timestamp),
        );
    }
    Ok(())
}

/// The service's own configuration, as `deploy/install.sh` writes it.
const SERVICE_ENV_FILE: &str = "/etc/crosstalk/crosstalk.env";

/// Says so when the address printed is only the default: people given a
/// loopback address on a server would connect nowhere.
fn warn_if_default(address: &crate::config::AddressArgs, url: &str) {
    if !address.is_default() {
        return;
    }
    eprintln!(
        "warning: nothing names this relay's address (RELAY_PUBLIC_URL, RELAY_DOMAINS, \
         RELAY_PORT), so the lines below use the default, {url}."
    );
    if std::path::Path::new(SERVICE_ENV_FILE).exists() {
        eprintln!(
            "         This machine runs the service: use `sudo crosstalk-admin add|rotate …`, \
             which reads {SERVICE_ENV_FILE}, for lines with its public address."
        );
    }
}

/// The token, shown once, and what fits this relay to connect with it:
/// `crosstalk connect` (Claude Code and the other agents), plain HTTP, and
/// for a relay on a public https address the connectors that sign in with
/// OAuth (claude.ai, ChatGPT), which cannot reach any other. The rest (the
/// channel paths, the bridge by hand) is in docs/agents.md.
fn print_connection(new: &NewToken, public_url: &str) {
    let url = format!("{public_url}/mcp");
    let (handle, token) = (&new.handle, new.token.expose());
    println!(
        "\nToken for {handle} (shown only now; keep it somewhere safe):\n\n    {token}\n\n\
         On {handle}'s machine, with the crosstalk binary there, set up their agent (claude, or\n\
         codex, gemini, opencode, cursor), so that a teammate's question reaches it by the best\n\
         path that agent has:\n\n    \
         crosstalk connect claude --url {public_url} --token {token}\n\n\
         Or over HTTP alone (the agent then checks its inbox when it thinks to):\n\n    \
         claude mcp add --transport http crosstalk {url} --header \"Authorization: Bearer {token}\""
    );
    let public = public_url.starts_with("https://")
        && crate::host::url_host(public_url).is_some_and(|host| !crate::host::is_loopback(&host));
    if public {
        println!(
            "\nclaude.ai (and through it Claude Desktop and the mobile apps), ChatGPT and other\n\
             connectors sign in with OAuth instead of a token: add the relay as a connector\n\
             and sign in on the page it opens as {handle}, with the token above.\n\n    \
             claude.ai: Settings → Connectors → Add custom connector, URL {url}\n    \
             ChatGPT: in developer mode, create a connector with URL {url} and OAuth"
        );
    }
    println!(
        "\nClaude Code's channels and the bridge by hand: docs/agents.md in crosstalk's repository."
    );
}

/// `90s`, `5m`, `1h`, or plain seconds, as seconds.
fn parse_duration(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            anyhow::bail!("--after {text:?}: a number of seconds, or with s, m or h (90s, 5m, 1h)")
        }
    };
    let number: u64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("--after {text:?}: a number of seconds, or with s, m or h"))?;
    number
        .checked_mul(scale)
        .ok_or_else(|| anyhow::anyhow!("--after {text:?}: at most a day"))
}
