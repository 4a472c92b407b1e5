//! The `session-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use session_svc::{config::Config, server};

/// The servers allocate with jemalloc: after a burst of writes it hands freed memory back to the
/// system, where glibc's malloc kept about 2.7x more resident (BENCHMARKS.md, "Peak RSS at 1M
/// events"), which a pod's memory limit counts.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::from_env();
    if let Some(command) = config.admin {
        return command
            .run::<adk_common::sled::Restoring>("session-svc")
            .await;
    }
    adk_common::serve::flags::init_logging(config.serve.log_format);
    tracing::info!("starting: {config}");
    adk_common::serve::run_until_signal("session-svc", server::start(config).await).await
}
