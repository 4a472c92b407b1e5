//! Serving: a server's service beside health, reflection and (on stores that have it) the
//! AdminService, behind tokens, metrics and load shedding; shutdown that waits for background
//! tasks; stopping on a signal.
//!
//! # Layout
//! - [`flags`]: the flags every server has, and what they turn into.
//! - [`auth`]: bearer tokens (in clear or hashed) scoped to apps and users, reloadable.
//! - [`rpc`]: per-request access checks and log spans.
//! - [`load`]: load shedding beyond a concurrency limit.
//! - [`hooks`]: what a server needs from its store (sled or PostgreSQL), built once per kind.
//! - [`admin`]: the AdminService streaming a sled store's snapshots.
//! - this module: [`spawn`] and [`start`] (serving beside the rest), [`run_until_signal`].

pub mod admin;
pub mod auth;
pub mod flags;
pub mod hooks;
pub mod load;
pub mod rpc;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tokio_stream::{wrappers::TcpListenerStream, StreamExt as _};
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

use crate::{
    serve::{
        auth::{Authenticator, TokensFileError},
        flags::{ServeFlags, ServeOptions, TlsFiles},
        hooks::StoreHooks,
    },
    stopping::Shutdown,
    BoxError,
};

/// A listener on `addr`; the error names the address (a port in use, say).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BoxError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}").into())
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
            Some(lock_file) => crate::file_lock::released(lock_file).await,
            None => Ok(()),
        }
    }

    /// Reads the tokens file again (what SIGHUP does): new calls see the new tokens, open
    /// streams keep the grant they were opened with. Returns how many tokens are in force.
    pub fn reload_tokens(&self) -> Result<usize, TokensFileError> {
        self.authenticator.reload()
    }
}

/// Binds `listen` and serves `service` there, as [`spawn`] does, behind the tokens (if any) and
/// with the options of `flags`.
pub async fn start<S>(
    listen: SocketAddr,
    flags: &ServeFlags,
    service: S,
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
    let authenticator = flags.authenticator()?;
    let listener = bind(listen).await?;
    spawn(
        listener,
        service,
        authenticator,
        flags.options(),
        shutdown,
        store,
    )
    .await
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
        served.push(hooks::ADMIN_SERVICE);
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
            .layer(load::LoadShedLayer::new(options.max_concurrent_requests))
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

    use std::time::Duration;

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
            admin::AdminGrpc::new("test", Arc::new(NoSnapshots), scratch.path().to_owned()),
        );
        let running = spawn(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            service,
            Authenticator::open(),
            ServeFlags::default().options(),
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
