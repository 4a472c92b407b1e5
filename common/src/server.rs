//! What both servers do the same way: logging setup, serving a service beside health,
//! reflection and (on stores that have it) the AdminService, tracking background tasks, and
//! stopping on a signal.

use std::{
    future::Future, io::IsTerminal, net::SocketAddr, path::PathBuf, process::ExitCode,
    time::Duration,
};

use crate::{
    auth::{Authenticator, TokensFileError},
    durability::SyncMode,
    hooks::StoreHooks,
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tokio_stream::{wrappers::TcpListenerStream, StreamExt as _};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::{
    body::Body,
    codegen::{http, Service},
    server::NamedService,
    service::{interceptor::InterceptedService, Routes},
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

    /// Root certificate(s) (PEM) PostgreSQL's server certificate must chain to, for a
    /// `postgres://` store whose connection string has no `sslrootcert` (which wins). Use with
    /// `sslmode=verify-full` (or `verify-ca`) in the connection string; see README.md.
    #[arg(long)]
    pub pg_ca_file: Option<PathBuf>,

    /// Capacity of sled's page cache, in bytes (sled stores only). Default: an eighth of the
    /// container's memory limit (cgroup v2 `memory.max` or v1 `memory.limit_in_bytes`) when
    /// there is one, else sled's default of 1 GiB. See deploy/README.md for sizing.
    #[arg(long)]
    pub cache_bytes: Option<u64>,

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
            pg_ca_file: None,
            cache_bytes: None,
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

/// The flags for people, as the startup log shows them, but for those of one kind of store
/// (see [`ServeFlags::store_settings`]).
impl std::fmt::Display for ServeFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on_off = |set: bool| if set { "on" } else { "off" };
        write!(f, "TLS {}", on_off(self.tls_cert.is_some()))?;
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
            ", at most {} calls at once, {} s shutdown grace",
            self.max_concurrent_requests, self.shutdown_grace_secs
        )
    }
}

impl ServeFlags {
    /// The flags that apply to `store`'s kind, for people: a sled store's durability, a
    /// PostgreSQL store's connection limit.
    pub fn store_settings(&self, store: &crate::postgres::StoreLocation) -> String {
        match store {
            crate::postgres::StoreLocation::Sled(_) => match self.sync {
                SyncMode::Sync => "durability sync".to_owned(),
                SyncMode::Periodic => "durability periodic".to_owned(),
            },
            crate::postgres::StoreLocation::Postgres(_) => {
                format!("at most {} connections", self.pg_max_connections)
            }
        }
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
        // Colour only on a terminal, and not when NO_COLOR is set (https://no-color.org).
        LogFormat::Plain => builder
            .with_ansi(
                std::io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            )
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A listener on `addr`; the error names the address (a port in use, say).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BoxError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}").into())
}

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

/// Tells long-running work (watch streams, stream readers, background loops) that the server is
/// stopping, and tracks the tasks doing it, so that shutdown waits for them to end before the
/// store is flushed and closed.
#[derive(Debug, Clone)]
pub struct Stopping {
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Stopping {
    /// Resolves once the server starts shutting down.
    pub async fn wait(&self) {
        self.cancel.cancelled().await
    }

    /// Runs `task` in the background; shutdown waits (within its grace period) for it to end,
    /// so it must end soon after [`wait`](Self::wait) resolves.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }
}

/// The trigger of a server's [`Stopping`] signal, and the tracker of its tasks.
#[derive(Debug)]
pub struct Shutdown(Stopping);

impl Shutdown {
    pub fn new() -> Self {
        Self(Stopping {
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// The signal handed to the server's service before it starts.
    pub fn signal(&self) -> Stopping {
        self.0.clone()
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
    authenticator: Authenticator,
    /// The file the store's database locks, if it is a sled store (see [`StoreHooks`]).
    lock_file: Option<PathBuf>,
}

impl Running {
    /// Turns health to NOT_SERVING, stops accepting, tells streams to end, lets in-flight calls
    /// finish within the grace period, then runs the server's `on_stop` (flushing its store).
    /// Returns once nothing of the server holds its store any more: a sled directory can be
    /// opened again at once.
    pub async fn shutdown(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        // The task's end drops the service and every task's handle on the store.
        self.task.await??;
        match self.lock_file {
            Some(lock_file) => crate::hooks::released(lock_file).await,
            None => Ok(()),
        }
    }

    /// Reads the tokens file again (what SIGHUP does): new calls see the new tokens, open
    /// streams keep the grant they were opened with. Returns how many tokens are in force.
    pub fn reload_tokens(&self) -> Result<usize, TokensFileError> {
        self.authenticator.reload()
    }
}

/// Serves `service` behind `authenticator` on `listener`, beside `grpc.health.v1.Health`
/// (SERVING from the start: the caller opened its store already), reflection, the store's
/// AdminService if it has one, and, if asked, `/metrics`. Runs in a background task until
/// [`Running::shutdown`]; then waits for the calls in flight and the tasks of `shutdown`
/// (within the grace period), and awaits the store's `on_stop`.
pub async fn spawn<S>(
    listener: TcpListener,
    service: S,
    authenticator: Authenticator,
    options: ServeOptions,
    shutdown: Shutdown,
    store: StoreHooks,
) -> Result<Running, BoxError>
where
    S: Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = std::convert::Infallible,
        > + NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let service_name = S::NAME;
    let StoreHooks {
        refresh_metrics,
        failures,
        on_stop,
        admin,
        lock_file,
    } = store;
    let addr = listener.local_addr()?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder.tls_config(tls_config(tls)?)?;
    }
    let Shutdown(stopping) = shutdown;
    let metrics_addr = match options.metrics_listen {
        Some(listen) => Some(crate::metrics::serve(
            bind(listen).await?,
            refresh_metrics,
            &stopping,
        )?),
        None => None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let mut routes = Routes::new(InterceptedService::new(service, authenticator.clone()));
    let mut served = vec![service_name];
    if let Some(admin) = admin {
        routes = admin.add_to(routes, authenticator.clone());
        served.push(crate::hooks::ADMIN_SERVICE);
    }
    let (reflection_v1, reflection_v1alpha) = reflection(&served)?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(service_name, ServingStatus::Serving)
        .await;
    // A failed disk or an unreachable database makes the server unready (and, with liveness
    // on health, restarted) for as long as it lasts (a failed disk: until the restart).
    let failure_watch = failures.map(|mut failures| {
        let failure_health = health.clone();
        stopping.spawn(async move {
            loop {
                let status = match failures.borrow_and_update().as_ref() {
                    Some(_) => ServingStatus::NotServing,
                    None => ServingStatus::Serving,
                };
                failure_health
                    .set_service_status(service_name, status)
                    .await;
                if failures.changed().await.is_err() {
                    return;
                }
            }
        })
    });
    let routes = routes
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    let cancel = stopping.cancel.clone();
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
                // Ended first, so that it cannot report SERVING again after this.
                if let Some(task) = failure_watch {
                    task.abort();
                    let _ = task.await;
                }
                health
                    .set_service_status(service_name, ServingStatus::NotServing)
                    .await;
                // Streams and background tasks end themselves; unary calls in flight run to
                // completion.
                cancel.cancel();
            });
        tokio::pin!(serve);
        // One grace period, counted from the shutdown request, for calls and tasks together.
        let grace_over = async {
            stopping.wait().await;
            tokio::time::sleep(options.grace).await;
        };
        tokio::pin!(grace_over);
        let mut in_grace = true;
        tokio::select! {
            served = &mut serve => served?,
            _ = &mut grace_over => {
                in_grace = false;
                tracing::warn!("shutdown grace period over; closing the remaining connections");
            }
        }
        stopping.tasks.close();
        if in_grace {
            tokio::select! {
                _ = stopping.tasks.wait() => {}
                _ = &mut grace_over => tracing::warn!(
                    tasks = stopping.tasks.len(),
                    "shutdown grace period over; background tasks still running"
                ),
            }
        }
        on_stop.await
    });
    Ok(Running {
        addr,
        metrics_addr,
        stop,
        task,
        authenticator,
        lock_file,
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
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let mut hangups = hangups();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = next_hangup(&mut hangups) => match running.reload_tokens() {
                Ok(count) => tracing::info!(tokens = count, "tokens file reloaded"),
                Err(e) => tracing::error!("tokens file not reloaded, the previous tokens stay: {e}"),
            },
        }
    }
    tracing::info!("{name} shutting down");
    match running.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{name} shutdown failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGHUP, where there is such a signal and it can be listened for.
#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<std::convert::Infallible>;

fn hangups() -> Hangups {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::hangup())
            .inspect_err(|e| {
                tracing::warn!(
                    "cannot listen for SIGHUP; the tokens file will not be reloaded: {e}"
                )
            })
            .ok()
    }
    #[cfg(not(unix))]
    None
}

/// Resolves on the next SIGHUP (never without a listener).
async fn next_hangup(hangups: &mut Hangups) {
    #[cfg(unix)]
    if let Some(signal) = hangups {
        if signal.recv().await.is_some() {
            return;
        }
    }
    #[cfg(not(unix))]
    let _ = hangups;
    std::future::pending::<()>().await
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

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    };

    use super::*;

    /// A service to serve: the AdminService of a store that never has a snapshot to give.
    struct NoSnapshots;

    impl crate::snapshot::Snapshotter for NoSnapshots {
        async fn snapshot(
            &self,
            _: &std::path::Path,
        ) -> Result<u64, crate::snapshot::SnapshotError> {
            Err(crate::snapshot::SnapshotError::Format("no store".into()))
        }
    }

    /// Shutdown returns only once tracked tasks have ended, and before the store's `on_stop`.
    #[tokio::test]
    async fn shutdown_waits_for_tracked_tasks_before_stopping_the_store() {
        let shutdown = Shutdown::new();
        let stopping = shutdown.signal();
        let task_done = Arc::new(AtomicBool::new(false));
        let seen_by_on_stop = Arc::new(AtomicBool::new(false));
        let (done, stopped) = (task_done.clone(), stopping.clone());
        stopping.spawn(async move {
            stopped.wait().await;
            // Work that takes a while to wind down after the signal.
            tokio::time::sleep(Duration::from_millis(200)).await;
            done.store(true, Ordering::SeqCst);
        });
        let (done, seen) = (task_done.clone(), seen_by_on_stop.clone());
        let (_reachable, reachability) = tokio::sync::watch::channel(None);
        let mut hooks = StoreHooks::postgres(|| {}, reachability);
        hooks.on_stop = Box::pin(async move {
            seen.store(done.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(())
        });
        let scratch = tempfile::tempdir().unwrap();
        let service = adk_proto::admin::v1::admin_service_server::AdminServiceServer::new(
            crate::snapshot::AdminGrpc::new(
                "test",
                Arc::new(NoSnapshots),
                scratch.path().to_owned(),
            ),
        );
        let running = spawn(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            service,
            Authenticator::open(),
            ServeOptions::default(),
            shutdown,
            hooks,
        )
        .await
        .unwrap();
        running.shutdown().await.unwrap();
        assert!(task_done.load(Ordering::SeqCst));
        assert!(seen_by_on_stop.load(Ordering::SeqCst));
    }
}
