//! What both servers do the same way: logging setup, health and reflection services, and
//! waiting for a shutdown signal.

use std::io::IsTerminal;

use tonic_reflection::server::{
    v1::{ServerReflection, ServerReflectionServer},
    v1alpha::{
        ServerReflection as ServerReflectionAlpha,
        ServerReflectionServer as ServerReflectionAlphaServer,
    },
};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Installs the global `tracing` subscriber. The filter comes from `RUST_LOG` (default `info`).
/// Logs go to stderr, so stdout carries only the "listening on" line scripts wait for.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second call (several servers in one test process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Plain => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Reflection in both protocol versions (`v1`, and `v1alpha`, which widely deployed grpcurl
/// builds still speak), listing only `services` and the health service.
pub fn reflection(
    services: &[&str],
) -> Result<
    (
        ServerReflectionServer<impl ServerReflection>,
        ServerReflectionAlphaServer<impl ServerReflectionAlpha>,
    ),
    tonic_reflection::server::Error,
> {
    let builder = || {
        let mut b = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(adk_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name("grpc.health.v1.Health");
        for s in services {
            b = b.with_service_name(*s);
        }
        b
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}

/// Resolves on SIGTERM (what Kubernetes sends) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot listen for SIGTERM: {e}");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
