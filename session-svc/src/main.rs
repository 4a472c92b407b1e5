//! The `session-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use session_svc::{config::Config, server};

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    adk_common::server::init_logging(config.log_format);
    let running = match server::start(config.clone()).await {
        Ok(running) => running,
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Scripts wait for this line (and read the port from it when listening on port 0).
    println!("session-svc listening on {}", running.addr);
    tracing::info!(addr = %running.addr, data_dir = %config.data_dir.display(), "serving");
    adk_common::server::shutdown_signal().await;
    tracing::info!("shutting down");
    match running.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("shutdown failed: {e}");
            ExitCode::FAILURE
        }
    }
}
