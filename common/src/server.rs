//! What both servers do the same way: logging setup, serving a service beside health and
//! reflection, and stopping on a signal.

use std::{future::Future, io::IsTerminal, net::SocketAddr, process::ExitCode};

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::Routes;
use tonic_health::ServingStatus;

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

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A server running in the background.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), BoxError>>,
}

impl Running {
    /// Turns health to NOT_SERVING, stops accepting, lets in-flight calls finish, then runs
    /// the server's `on_stop` (flushing its store).
    pub async fn shutdown(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// Serves `routes` (the service named `service_name`) on `listener`, beside
/// `grpc.health.v1.Health` (SERVING from the start: the caller opened its store already) and
/// reflection. Runs in a background task until [`Running::shutdown`], then awaits `on_stop`.
pub fn spawn(
    listener: TcpListener,
    service_name: &'static str,
    routes: Routes,
    on_stop: impl Future<Output = Result<(), BoxError>> + Send + 'static,
) -> Result<Running, BoxError> {
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let (reflection_v1, reflection_v1alpha) = reflection(&[service_name])?;
    let (health, health_service) = tonic_health::server::health_reporter();
    let task = tokio::spawn(async move {
        health
            .set_service_status(service_name, ServingStatus::Serving)
            .await;
        let routes = routes
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);
        tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
                health
                    .set_service_status(service_name, ServingStatus::NotServing)
                    .await;
            })
            .await?;
        on_stop.await
    });
    Ok(Running { addr, stop, task })
}

/// Reflection in both protocol versions (`v1`, and `v1alpha`, which widely deployed grpcurl
/// builds still speak), listing only `services` and the health service.
fn reflection(
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

/// The body of a server binary's `main` once its server is `started`: announce the address,
/// serve until SIGTERM/SIGINT, shut down cleanly.
pub async fn run_until_signal(name: &str, started: Result<Running, BoxError>) -> ExitCode {
    let running = match started {
        Ok(running) => running,
        Err(e) => {
            tracing::error!("{name} cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Scripts wait for this line (and read the port from it when listening on port 0).
    println!("{name} listening on {}", running.addr);
    tracing::info!(addr = %running.addr, "{name} serving");
    shutdown_signal().await;
    tracing::info!("{name} shutting down");
    match running.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{name} shutdown failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM (what Kubernetes sends) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
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
