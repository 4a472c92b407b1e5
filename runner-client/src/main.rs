//! The `runner-client` binary: parse the command line, run the command, report a failure on
//! stderr with a non-zero exit status.

mod cli;
#[cfg(test)]
mod flag_docs;

use std::{io::IsTerminal, process::ExitCode};

use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings only by default: stdout is the conversation (or JSON lines) and stays clean.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour())
        .init();
    match cli::run(cli::Cli::from_env()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runner-client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether log lines are coloured: only on a terminal, and not when `NO_COLOR` is set to
/// anything (https://no-color.org).
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
