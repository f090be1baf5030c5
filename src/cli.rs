//! The commands: `serve`, `add`, `rotate`, `revoke`, `people`, `demo`.
//!
//! `add`, `rotate`, `revoke` and `people` work on the database file directly,
//! even while a server runs on it; the server reads credentials from the
//! database on every request, so a change counts from the next request on.

use crate::config::{AddressArgs, Config, ServeArgs};
use crate::relay::{handle::Handle, now_millis, token::Token};
use crate::store::{SqliteStore, Store};
use crate::{api::wire::timestamp, app};
use anyhow::{Context, bail};
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
    Serve(ServeArgs),
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
    /// Run a real relay on a spare loopback port and show two agents talking.
    Demo,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(Config::from_args(cli.db, &args)?).await,
        Command::Add {
            handle,
            name,
            address,
        } => {
            let handle = parse_handle(&handle)?;
            let name = name.unwrap_or_else(|| handle.to_string());
            if name.trim().is_empty()
                || name.chars().count() > 64
                || name.chars().any(char::is_control)
            {
                bail!("a name is one line of 1 to 64 characters");
            }
            let token = Token::generate();
            open(&cli.db)?
                .add_person(handle.as_str(), name.trim(), token.hash(), now_millis())
                .await?;
            println!("Added {handle} ({}).", name.trim());
            print_connection(&handle, &token, &address.public_url());
            Ok(())
        }
        Command::Rotate { handle, address } => {
            let handle = parse_handle(&handle)?;
            let token = Token::generate();
            open(&cli.db)?
                .rotate_token(handle.as_str(), token.hash())
                .await?;
            println!("New token for {handle}; the old one no longer works.");
            print_connection(&handle, &token, &address.public_url());
            Ok(())
        }
        Command::Revoke { handle } => {
            let handle = parse_handle(&handle)?;
            open(&cli.db)?
                .revoke_person(handle.as_str(), now_millis())
                .await?;
            println!("Revoked {handle}: their token no longer works.");
            Ok(())
        }
        Command::People => {
            let people = open(&cli.db)?.people().await?;
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
                    p.handle,
                    p.name,
                    timestamp(p.created_at),
                    p.last_seen_at.map_or_else(|| "never".into(), timestamp),
                    p.revoked_at.map_or_else(|| "-".into(), timestamp),
                );
            }
            Ok(())
        }
        Command::Demo => crate::demo::run().await,
    }
}

fn parse_handle(raw: &str) -> anyhow::Result<Handle> {
    Handle::parse(raw).map_err(anyhow::Error::msg)
}

fn open(db: &std::path::Path) -> anyhow::Result<SqliteStore> {
    SqliteStore::open(db).with_context(|| format!("opening {}", db.display()))
}

fn print_connection(handle: &Handle, token: &Token, public_url: &str) {
    let url = format!("{public_url}/mcp");
    let token = token.expose();
    println!(
        "\nToken for {handle} (shown only now; keep it somewhere safe):\n\n    {token}\n\n\
         Connect Claude Code:\n\n    \
         claude mcp add --transport http crosstalk {url} --header \"Authorization: Bearer {token}\"\n\n\
         Or put this in the project's .mcp.json, with RELAY_TOKEN set to the token in your environment:\n\n\
         {{\n  \"mcpServers\": {{\n    \"crosstalk\": {{\n      \"type\": \"http\",\n      \"url\": \"{url}\",\n      \
         \"headers\": {{ \"Authorization\": \"Bearer ${{RELAY_TOKEN}}\" }}\n    }}\n  }}\n}}"
    );
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let running = app::spawn(config).await?;
    let config = &running.state.config;
    let tls = match &config.tls {
        crate::config::Tls::Off => "off",
        crate::config::Tls::Files { .. } => "certificate files",
        crate::config::Tls::Acme(_) => "ACME",
    };
    tracing::info!(
        listen = %running.addr,
        tls,
        redirect = ?running.redirect_addr,
        public_url = %config.public_url,
        db = %config.db.display(),
        "crosstalk is serving"
    );
    let shutdown = running.shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: ending waits and draining connections");
        shutdown.cancel();
    });
    running.stop_when_cancelled().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
