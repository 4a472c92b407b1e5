//! The `runner-client` binary: parse the command line, run the command, report a failure on
//! stderr with a non-zero exit status.

mod cli;
#[cfg(test)]
mod flag_docs;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings only by default: stdout is the conversation (or JSON lines) and stays clean.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cli::run(cli::Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runner-client: {e}");
            ExitCode::FAILURE
        }
    }
}
