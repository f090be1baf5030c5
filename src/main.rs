//! The `crosstalk` binary: parse the command line, start logging, run.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match crosstalk::cli::Cli::from_env() {
        Ok(cli) => cli,
        Err(crosstalk::cli::CliError::Clap(error)) => error.exit(),
        Err(error) => {
            eprintln!("error: {}", crosstalk::server::check::chain(&error));
            return ExitCode::FAILURE;
        }
    };
    let format = match crosstalk::commands::LogFormat::parse(
        std::env::var("RELAY_LOG_FORMAT").ok().as_deref(),
    ) {
        Ok(format) => format,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The demo's output is its story: its relay says only what went wrong.
    let quiet = matches!(cli.command, crosstalk::cli::Command::Demo).then_some("warn");
    let requested = std::env::var("RUST_LOG").ok();
    crosstalk::commands::start_logging(requested.as_deref().or(quiet), format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crosstalk::commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
