//! The `session-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use session_svc::{config::Config, server};

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::from_env();
    if let Some(command) = config.admin {
        return command.run("session-svc").await;
    }
    adk_common::server::init_logging(config.serve.log_format);
    tracing::info!("starting: {config}");
    adk_common::server::run_until_signal("session-svc", server::start(config).await).await
}
