//! The `crosstalk` binary's commands: what each does, and the process
//! around them (logging, the umask). Serving is [`crate::server`]'s; this
//! module only dispatches, so the server knows nothing of the CLI, the demo
//! or the bridge.

use crate::cli::{self, Cli, Command};
use crate::config::Config;
use crate::mcp::ClientMistakes;
use crate::{bridge, demo, server};

/// Runs a command of the `crosstalk` binary.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    server::restrict_new_files();
    match cli.command {
        Command::Serve(args) => server::serve(Config::from_args(&args)?).await,
        Command::Check(args) => check(&args).await,
        Command::Admin(command) => {
            let team = server::open_team(command.database(), !command.reads_only()).await?;
            cli::admin(&team, command).await
        }
        Command::Backup { database, path } => {
            server::backup(&database, &path)?;
            println!("Copied {} to {}.", database.db.display(), path.display());
            Ok(())
        }
        Command::Restore { database, path } => {
            server::restore(&database, &path)?;
            println!(
                "Restored {} from {}; start the relay again.",
                database.db.display(),
                path.display()
            );
            Ok(())
        }
        Command::MigrateToPostgres { database } => server::migrate_to_postgres(&database).await,
        Command::Bridge(reach) => {
            // The bridge reaches the relay over HTTPS.
            crate::tls::install_crypto_provider();
            bridge::run(reach).await
        }
        Command::Connect(connect) => crate::connect::run(&connect),
        Command::Hook(hook) => {
            crate::tls::install_crypto_provider();
            std::process::exit(crate::hook::run(hook).await)
        }
        Command::Demo => {
            let dir = tempfile::tempdir()?;
            let running = server::spawn(Config::local(dir.path().join("relay.db"))).await?;
            let url = running.url();
            let relay = running.state.relay.clone();
            demo::run(&url, relay.team(), async move { running.stop().await }).await
        }
    }
}

/// Prints what `crosstalk serve` would find, and fails if it would stop.
async fn check(args: &crate::config::ServeArgs) -> anyhow::Result<()> {
    let findings = server::check::check(args).await;
    for finding in &findings {
        println!("{finding}");
    }
    let failed = findings
        .iter()
        .filter(|f| f.level == server::check::Level::Fail)
        .count();
    match failed {
        0 => Ok(()),
        n => anyhow::bail!("{n} problem(s) would stop `crosstalk serve`; see FAIL above"),
    }
}

/// The log filter when `RUST_LOG` says nothing: the relay's own news, ACME's
/// progress, and every library's warnings.
pub const DEFAULT_LOG: &str = "crosstalk=info,rustls_acme=info,warn";

/// Libraries that log what passes through them (message bodies, headers,
/// a statement's parameters: bodies, token hashes, keys, the ACME account)
/// at their debug and trace levels; they are held at info whatever
/// `RUST_LOG` asks, so no body, credential or key reaches the log at any
/// level.
const CAPPED_LOGS: &[&str] = &[
    "rmcp",
    "h2",
    "hyper",
    "hyper_util",
    "reqwest",
    "tower_http",
    "tokio_postgres",
    "postgres_protocol",
    "deadpool_postgres",
    "rustls_acme",
];

/// The log filter for what `RUST_LOG` asked for, with the capped
/// libraries logging at most info: every directive that can reach them (one
/// naming them or a part of them, or a span filter naming no target) has
/// its level capped; each capped library not named on its own gets the
/// default level (the bare one, `off` without one), capped too. So the
/// default's `warn` keeps them at warn, and `trace` gives them info.
pub fn log_filter(requested: Option<&str>) -> String {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    const INFO: usize = 3;
    let rank = |level: &str| {
        LEVELS
            .iter()
            .position(|l| l.eq_ignore_ascii_case(level.trim()))
    };
    let requested = requested
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or(DEFAULT_LOG);
    let directives: Vec<&str> = requested
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let default = directives
        .iter()
        .filter_map(|d| rank(d))
        .next_back()
        .unwrap_or(0);
    let capped = |target: &str| {
        CAPPED_LOGS
            .iter()
            .position(|c| target == *c || target.starts_with(&format!("{c}::")))
    };
    let mut named_alone = [false; CAPPED_LOGS.len()];
    let mut kept: Vec<String> = Vec::new();
    for directive in directives {
        if rank(directive).is_some() {
            kept.push(directive.to_owned()); // the default level
            continue;
        }
        let (selector, level) = match directive.split_once('=') {
            Some((selector, level)) => (selector, rank(level)),
            // A target or a span alone enables all of its levels.
            None => (directive, Some(LEVELS.len() - 1)),
        };
        let target = selector.split('[').next().unwrap_or("");
        let reaches_capped = match capped(target) {
            Some(at) => {
                named_alone[at] |= target == CAPPED_LOGS[at] && !selector.contains('[');
                true
            }
            None => target.is_empty(),
        };
        match (reaches_capped, level) {
            (true, Some(level)) => kept.push(format!("{selector}={}", LEVELS[level.min(INFO)])),
            // A level we cannot read: leave it out rather than guess.
            (true, None) => {}
            (false, _) => kept.push(directive.to_owned()),
        }
    }
    for (capped, named) in CAPPED_LOGS.iter().zip(named_alone) {
        if !named {
            kept.push(format!("{capped}={}", LEVELS[default.min(INFO)]));
        }
    }
    kept.join(",")
}

/// How log lines are written (`RELAY_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For people: `TIME LEVEL span{fields}: target: message key=value`.
    #[default]
    Text,
    /// For machines: one JSON object a line, with the same fields
    /// (`timestamp`, `level`, `target`, the message and its fields under
    /// `fields`, the spans and theirs under `spans`).
    Json,
}

impl LogFormat {
    /// `RELAY_LOG_FORMAT`'s value; unset is text.
    pub fn parse(value: Option<&str>) -> Result<LogFormat, String> {
        match value.map(str::trim) {
            None | Some("") | Some("text") => Ok(LogFormat::Text),
            Some("json") => Ok(LogFormat::Json),
            Some(other) => Err(format!(
                "RELAY_LOG_FORMAT is {other:?}: it must be text or json"
            )),
        }
    }
}

/// Starts logging to stderr in `format`: `requested` (RUST_LOG) through
/// [`log_filter`], and without the warnings that are a client's mistake
/// ([`ClientMistakes`], rmcp's). Both formats carry the same events and
/// fields, so what one keeps out of the log the other does too.
pub fn start_logging(requested: Option<&str>, format: LogFormat) {
    use tracing_subscriber::{
        EnvFilter, Layer, filter::FilterExt, layer::SubscriberExt, util::SubscriberInitExt,
    };
    let filter = EnvFilter::try_new(log_filter(requested))
        .unwrap_or_else(|_| EnvFilter::new(log_filter(None)));
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let output = match format {
        LogFormat::Text => lines
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => lines.json().with_span_list(true).boxed(),
    };
    tracing_subscriber::registry()
        .with(output.with_filter(filter.and(ClientMistakes)))
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_format_is_text_or_json() {
        assert_eq!(LogFormat::parse(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("json")), Ok(LogFormat::Json));
        assert_eq!(
            LogFormat::parse(Some("logfmt")),
            Err("RELAY_LOG_FORMAT is \"logfmt\": it must be text or json".into())
        );
    }

    #[test]
    fn the_log_filter_caps_libraries_that_log_bodies() {
        assert_eq!(
            log_filter(Some("trace")),
            "trace,rmcp=info,h2=info,hyper=info,hyper_util=info,reqwest=info,tower_http=info,\
             tokio_postgres=info,postgres_protocol=info,deadpool_postgres=info,rustls_acme=info"
        );
        assert!(
            log_filter(Some("debug,tokio_postgres=trace")).contains("tokio_postgres=info"),
            "statements' parameters are bodies and keys"
        );
        assert!(!log_filter(Some("debug,rmcp=trace,rmcp::transport=debug")).contains("trace"));
        // A span filter, with a target or without, is capped too.
        for spans in [
            "hyper[foo]",
            "h2[Connection]=trace",
            "[span]=trace",
            "[{id}]",
        ] {
            let filter = log_filter(Some(&format!("info,{spans}")));
            assert!(!filter.contains("trace"), "{spans}: {filter}");
            assert!(filter.contains('['), "{spans}: {filter}");
        }
        // A part of a library keeps its own level, and the rest the default.
        let filter = log_filter(Some("info,rmcp::service=error"));
        assert!(filter.contains("rmcp::service=error") && filter.contains("rmcp=info"));
        // Quieter than info is kept; without a default level, nothing more.
        assert!(log_filter(Some("info,h2=warn")).contains("h2=warn"));
        assert!(log_filter(Some("crosstalk=debug")).contains("hyper=off"));
        // The default keeps them at warn (the demo's narrative is its own),
        // but for ACME's progress.
        assert_eq!(
            log_filter(None),
            "crosstalk=info,rustls_acme=info,warn,rmcp=warn,h2=warn,hyper=warn,hyper_util=warn,\
             reqwest=warn,tower_http=warn,tokio_postgres=warn,postgres_protocol=warn,\
             deadpool_postgres=warn"
        );
    }
}
