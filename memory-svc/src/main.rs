//! The `memory-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use memory_svc::{config::Config, server};

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::from_env();
    if let Some(command) = config.admin {
        return command.run("memory-svc").await;
    }
    adk_common::server::init_logging(config.serve.log_format);
    tracing::info!("starting: {config}");
    adk_common::server::run_until_signal("memory-svc", server::start(config).await).await
}
