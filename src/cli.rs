//! The command line: what `crosstalk` takes, and the commands that manage
//! the team (`add`, `rotate`, `revoke`, `people`).
//!
//! Those change the team through the core's [`Team`], on the database file
//! a running relay uses; the relay reads credentials from the database on
//! every request, so a change counts from the next request on. Which store
//! stands behind the team is [`crate::server`]'s to say, which also runs
//! `serve` and `demo`.

use crate::config::{AddressArgs, ServeArgs};
use crate::relay::{NewToken, Team};
use crate::wire::timestamp;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "crosstalk",
    version,
    about = "A relay for a team's coding agents: MCP, REST and a team page over one SQLite file."
)]
pub struct Cli {
    /// The SQLite file.
    #[arg(long, env = "RELAY_DB", default_value = "data/relay.db", global = true)]
    pub db: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the relay.
    Serve(Box<ServeArgs>),
    #[command(flatten)]
    Admin(Admin),
    /// Run a real relay on a spare loopback port and show two agents talking.
    Demo,
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
        address: AddressArgs,
    },
    /// Replace a person's token; the old one stops working at once.
    Rotate {
        handle: String,
        #[command(flatten)]
        address: AddressArgs,
    },
    /// Cut a person off at once.
    Revoke { handle: String },
    /// List people: handle, name, created, last seen, revoked.
    People,
}

/// Runs a command that manages the team.
pub async fn admin(team: &Team, command: Admin) -> anyhow::Result<()> {
    match command {
        Admin::Add {
            handle,
            name,
            address,
        } => {
            let added = team.add(&handle, name.as_deref()).await?;
            println!("Added {} ({}).", added.handle, added.name);
            print_connection(&added, &address.public_url());
        }
        Admin::Rotate { handle, address } => {
            let rotated = team.rotate(&handle).await?;
            println!(
                "New token for {}; the old one no longer works.",
                rotated.handle
            );
            print_connection(&rotated, &address.public_url());
        }
        Admin::Revoke { handle } => {
            let revoked = team.revoke(&handle).await?;
            println!("Revoked {revoked}: their token no longer works.");
        }
        Admin::People => {
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
        }
    }
    Ok(())
}

/// The token, shown once, and how to connect an agent with it.
fn print_connection(new: &NewToken, public_url: &str) {
    let url = format!("{public_url}/mcp");
    let (handle, token) = (&new.handle, new.token.expose());
    println!(
        "\nToken for {handle} (shown only now; keep it somewhere safe):\n\n    {token}\n\n\
         Connect Claude Code:\n\n    \
         claude mcp add --transport http crosstalk {url} --header \"Authorization: Bearer {token}\"\n\n\
         Or put this in the project's .mcp.json, with CROSSTALK_TOKEN set to the token in your environment\n\
         (not RELAY_TOKEN: that is the server's shared token, which may act as anyone):\n\n\
         {{\n  \"mcpServers\": {{\n    \"crosstalk\": {{\n      \"type\": \"http\",\n      \"url\": \"{url}\",\n      \
         \"headers\": {{ \"Authorization\": \"Bearer ${{CROSSTALK_TOKEN}}\" }}\n    }}\n  }}\n}}"
    );
}
