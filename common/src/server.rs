//! What both servers do the same way: logging setup, serving a service beside health and
//! reflection, and stopping on a signal.

use std::{
    future::Future, io::IsTerminal, net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc,
    time::Duration,
};

use crate::{
    auth::{Authenticator, TokensFileError},
    durability::SyncMode,
};
use tokio::{
    net::TcpListener,
    sync::{oneshot, watch},
    task::JoinHandle,
};
use tokio_stream::{wrappers::TcpListenerStream, StreamExt as _};
use tonic::{
    service::Routes,
    transport::{Certificate, Identity, ServerTlsConfig},
};
use tonic_health::ServingStatus;

use tonic_reflection::server::{
    v1::{ServerReflection, ServerReflectionServer},
    v1alpha::{
        ServerReflection as ServerReflectionAlpha,
        ServerReflectionServer as ServerReflectionAlphaServer,
    },
};
use tracing_subscriber::EnvFilter;

/// Flags every server has. Each flag also reads an environment variable (see [`parse_flags`]).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeFlags {
    /// `sync`: reply after writes are flushed to disk (fsync). `periodic`: reply after commit
    /// and write and fsync in the background every ~500 ms: a crash (of the process or the
    /// machine) may lose the last moments of acknowledged writes. (sled stores only; on
    /// PostgreSQL durability is the database's `synchronous_commit`.)
    #[arg(long, value_enum, default_value_t)]
    pub sync: SyncMode,

    /// Connections each process opens to PostgreSQL at most (with a `postgres://` store).
    #[arg(long, default_value_t = 16)]
    pub pg_max_connections: usize,

    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,

    /// TLS certificate chain (PEM). With --tls-key the server accepts TLS only.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificate (PEM): clients must present a certificate it signed (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// JSON file of bearer tokens and the apps (and users) each may access. Without it, no
    /// authentication.
    #[arg(long)]
    pub tokens_file: Option<PathBuf>,

    /// Calls handled at once; more are answered RESOURCE_EXHAUSTED right away (health checks
    /// are exempt, and an open stream counts only while it is being set up).
    #[arg(long, default_value_t = 1024)]
    pub max_concurrent_requests: usize,

    /// Seconds that in-flight calls and streams get to finish after SIGTERM.
    #[arg(long, default_value_t = 10)]
    pub shutdown_grace_secs: u64,

    /// Log line format; the level comes from RUST_LOG (default `info`).
    #[arg(long, value_enum, default_value_t)]
    pub log_format: LogFormat,
}

impl Default for ServeFlags {
    fn default() -> Self {
        Self {
            sync: SyncMode::Sync,
            pg_max_connections: 16,
            metrics_listen: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            tokens_file: None,
            max_concurrent_requests: 1024,
            shutdown_grace_secs: 10,
            log_format: LogFormat::Plain,
        }
    }
}

/// The flags for people, as the startup log shows them.
impl std::fmt::Display for ServeFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on_off = |set: bool| if set { "on" } else { "off" };
        let sync = match self.sync {
            SyncMode::Sync => "sync",
            SyncMode::Periodic => "periodic",
        };
        write!(
            f,
            "durability {sync}, TLS {}",
            on_off(self.tls_cert.is_some())
        )?;
        if self.tls_client_ca.is_some() {
            f.write_str(" with client certificates")?;
        }
        write!(f, ", tokens {}", on_off(self.tokens_file.is_some()))?;
        match self.metrics_listen {
            Some(addr) => write!(f, ", metrics on {addr}")?,
            None => f.write_str(", metrics off")?,
        }
        write!(
            f,
            ", at most {} calls at once, {} s shutdown grace, at most {} PostgreSQL connections",
            self.max_concurrent_requests, self.shutdown_grace_secs, self.pg_max_connections
        )
    }
}

/// A size for people: whole MiB or KiB when it is one, else bytes.
pub fn human_bytes(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl ServeFlags {
    pub fn options(&self) -> ServeOptions {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        };
        ServeOptions {
            grace: Duration::from_secs(self.shutdown_grace_secs),
            tls,
            metrics_listen: self.metrics_listen,
            max_concurrent_requests: self.max_concurrent_requests,
        }
    }

    pub fn authenticator(&self) -> Result<Authenticator, TokensFileError> {
        match &self.tokens_file {
            Some(path) => Authenticator::from_file(path),
            None => Ok(Authenticator::open()),
        }
    }
}

/// Parses a server's command line. Every long flag falls back to an environment variable named
/// `{prefix}_{FLAG}`: `--data-dir` reads `SESSION_SVC_DATA_DIR` for prefix `SESSION_SVC`.
pub fn parse_flags<T: clap::Parser>(prefix: &str) -> T {
    let command = T::command().mut_args(|arg| {
        if arg.get_long().is_some() && arg.get_id() != "help" && arg.get_id() != "version" {
            let name = format!("{prefix}_{}", arg.get_id().as_str().to_uppercase());
            arg.env(name)
        } else {
            arg
        }
    });
    T::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

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

/// Files of a TLS server identity; with `client_ca`, clients must present a certificate it
/// signed (mutual TLS).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// How a server runs, beside its own service.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long in-flight calls and streams may run on after a shutdown request.
    pub grace: Duration,
    pub tls: Option<TlsFiles>,
    /// Where to serve Prometheus `/metrics`, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// Calls handled at once before shedding.
    pub max_concurrent_requests: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(10),
            tls: None,
            metrics_listen: None,
            max_concurrent_requests: 1024,
        }
    }
}

/// Tells long-running work (watch streams, stream readers) that the server is stopping.
#[derive(Debug, Clone)]
pub struct Stopping(watch::Receiver<bool>);

impl Stopping {
    /// Resolves once the server starts shutting down.
    pub async fn wait(&mut self) {
        // An error means the server is gone altogether, which is stopping too.
        let _ = self.0.wait_for(|stopping| *stopping).await;
    }
}

/// The trigger of a server's [`Stopping`] signal.
#[derive(Debug)]
pub struct Shutdown(watch::Sender<bool>);

impl Shutdown {
    pub fn new() -> Self {
        Self(watch::Sender::new(false))
    }

    /// The signal handed to the server's service before it starts.
    pub fn signal(&self) -> Stopping {
        Stopping(self.0.subscribe())
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

/// A server running in the background.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    /// Where `/metrics` is served, if it is.
    pub metrics_addr: Option<SocketAddr>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), BoxError>>,
}

impl Running {
    /// Turns health to NOT_SERVING, stops accepting, tells streams to end, lets in-flight calls
    /// finish within the grace period, then runs the server's `on_stop` (flushing its store).
    pub async fn shutdown(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// What the server needs from its store.
pub struct StoreHooks<F> {
    /// Runs before each metrics scrape (gauges read on demand).
    pub refresh_metrics: Arc<dyn Fn() + Send + Sync>,
    /// Becomes `Some(reason)` when the store's disk fails: health turns NOT_SERVING.
    pub failures: watch::Receiver<Option<Arc<str>>>,
    /// Runs after the server stopped (flushes the store).
    pub on_stop: F,
}

/// Serves `routes` (the service named `service_name`) on `listener`, beside
/// `grpc.health.v1.Health` (SERVING from the start: the caller opened its store already),
/// reflection and, if asked, `/metrics`. Runs in a background task until [`Running::shutdown`],
/// then awaits `on_stop`.
pub async fn spawn(
    listener: TcpListener,
    service_name: &'static str,
    routes: Routes,
    options: ServeOptions,
    shutdown: Shutdown,
    store: StoreHooks<impl Future<Output = Result<(), BoxError>> + Send + 'static>,
) -> Result<Running, BoxError> {
    let StoreHooks {
        refresh_metrics,
        mut failures,
        on_stop,
    } = store;
    let addr = listener.local_addr()?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder.tls_config(tls_config(tls)?)?;
    }
    let (metrics_addr, metrics_task) = match options.metrics_listen {
        Some(listen) => {
            let (addr, task) =
                crate::metrics::serve(TcpListener::bind(listen).await?, refresh_metrics)?;
            (Some(addr), Some(task))
        }
        None => (None, None),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let (reflection_v1, reflection_v1alpha) =
        reflection(&[service_name, "adk.admin.v1.AdminService"])?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(service_name, ServingStatus::Serving)
        .await;
    // A failed disk makes the server unready (and, with liveness on health, restarted).
    let failure_health = health.clone();
    let failure_watch = tokio::spawn(async move {
        if failures.wait_for(Option::is_some).await.is_ok() {
            failure_health
                .set_service_status(service_name, ServingStatus::NotServing)
                .await;
        }
    });
    let routes = routes
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    let mut stopping = shutdown.signal();
    // Replies go out as several small writes (headers, data, trailers); with Nagle's algorithm
    // on, the last one waits for the client's delayed ACK, adding ~40 ms to every unary call.
    // (tonic's own `tcp_nodelay` only applies to listeners it binds itself.)
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!("could not set TCP_NODELAY: {e}");
            }
        })
    });
    let task = tokio::spawn(async move {
        let serve = builder
            .layer(crate::metrics::RpcMetricsLayer)
            .layer(crate::load::LoadShedLayer::new(
                options.max_concurrent_requests,
            ))
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
                health
                    .set_service_status(service_name, ServingStatus::NotServing)
                    .await;
                // Streams end themselves; unary calls in flight run to completion.
                let _ = shutdown.0.send(true);
            });
        tokio::pin!(serve);
        tokio::select! {
            served = &mut serve => served?,
            _ = async {
                stopping.wait().await;
                tokio::time::sleep(options.grace).await;
            } => tracing::warn!("shutdown grace period over; closing the remaining connections"),
        }
        if let Some(task) = metrics_task {
            task.abort();
        }
        failure_watch.abort();
        on_stop.await
    });
    Ok(Running {
        addr,
        metrics_addr,
        stop,
        task,
    })
}

fn tls_config(files: &TlsFiles) -> Result<ServerTlsConfig, BoxError> {
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let mut config =
        ServerTlsConfig::new().identity(Identity::from_pem(read(&files.cert)?, read(&files.key)?));
    if let Some(ca) = &files.client_ca {
        config = config.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(config)
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
    tracing::info!(addr = %running.addr, metrics = ?running.metrics_addr, "{name} serving");
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
