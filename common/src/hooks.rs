//! What a server needs from its store beside the service itself, built one way per kind of
//! store: [`StoreHooks::sled`] (metrics of the database, disk failures, a flush at stop, and the
//! AdminService for online backups) and [`StoreHooks::postgres`] (metrics of the pool and health
//! following the database's reachability: backups are the database's own, and every write is
//! committed before it is acknowledged).

use std::{
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    time::Duration,
};

use adk_proto::admin::v1::admin_service_server::AdminServiceServer;
use tokio::sync::watch;
use tonic::service::{interceptor::InterceptedService, Routes};

use crate::{
    auth::Authenticator,
    cache::SledCache,
    server::BoxError,
    snapshot::{AdminGrpc, Snapshotter},
};

/// The gRPC name of the AdminService, for reflection.
pub(crate) const ADMIN_SERVICE: &str = "adk.admin.v1.AdminService";

/// A store on a local sled database.
pub trait SledBacked: Snapshotter + Clone {
    /// The server's name, written into its snapshots.
    const SERVICE: &'static str;
    /// Publishes the database's size on disk as a gauge.
    fn record_size(&self);
    /// Becomes `Some(reason)` when the store's disk fails.
    fn failures(&self) -> watch::Receiver<Option<Arc<str>>>;
    /// Makes every acknowledged write durable; the server calls it once it has stopped.
    fn flush(&self) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// The AdminService of a store, ready to be routed beside the main service.
pub(crate) struct AdminRoute(Box<dyn FnOnce(Routes, Authenticator) -> Routes + Send>);

impl AdminRoute {
    pub(crate) fn add_to(self, routes: Routes, authenticator: Authenticator) -> Routes {
        (self.0)(routes, authenticator)
    }
}

/// What the server needs from its store.
pub struct StoreHooks {
    /// Runs before each metrics scrape (gauges read on demand).
    pub(crate) refresh_metrics: Arc<dyn Fn() + Send + Sync>,
    /// `Some(reason)` while the store cannot serve (a failed disk, an unreachable database):
    /// health is NOT_SERVING then, SERVING again if it returns to `None`.
    pub(crate) failures: Option<watch::Receiver<Option<Arc<str>>>>,
    /// Runs after the server stopped (flushes the store).
    pub(crate) on_stop: Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>,
    /// The AdminService, on stores that take their own backups.
    pub(crate) admin: Option<AdminRoute>,
    /// The file a sled database locks: shutdown returns once the lock is free again, so the
    /// directory can be opened at once (by a restart in the same process, say).
    pub(crate) lock_file: Option<PathBuf>,
}

impl StoreHooks {
    /// A sled store opened with `cache`: its size and cache capacity as gauges, health that
    /// follows its disk, a flush at stop, and the AdminService writing snapshots to
    /// `<data_dir>/snapshots` before streaming them.
    pub fn sled<S: SledBacked>(store: S, cache: SledCache, data_dir: &Path) -> Self {
        let snapshot_dir = data_dir.join("snapshots");
        cache.announce();
        let metrics = store.clone();
        let admin = Arc::new(store.clone());
        Self {
            refresh_metrics: Arc::new(move || {
                metrics.record_size();
                cache.record();
            }),
            failures: Some(store.failures()),
            on_stop: Box::pin(async move { store.flush().await }),
            admin: Some(AdminRoute(Box::new(move |routes, authenticator| {
                let service =
                    AdminServiceServer::new(AdminGrpc::new(S::SERVICE, admin, snapshot_dir));
                routes.add_service(InterceptedService::new(service, authenticator))
            }))),
            // sled 0.34 locks the file `db` in its directory for as long as any handle is open.
            lock_file: Some(data_dir.join("db")),
        }
    }

    /// A PostgreSQL store: `refresh_metrics` publishes its pool's gauges; health follows
    /// `reachable` (see [`crate::postgres::health`]).
    pub fn postgres(
        refresh_metrics: impl Fn() + Send + Sync + 'static,
        reachable: watch::Receiver<Option<Arc<str>>>,
    ) -> Self {
        Self {
            refresh_metrics: Arc::new(refresh_metrics),
            failures: Some(reachable),
            on_stop: Box::pin(async { Ok(()) }),
            admin: None,
            lock_file: None,
        }
    }
}

/// How long shutdown waits for a sled database's lock once the server and its store have
/// stopped. Only sled's own I/O threads may still hold the database then, for moments; a wait
/// this long means a handle was not dropped.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves once no handle of this process holds the sled database locking `lock_file`.
///
/// Dropping the last handle does not release the lock at once: sled's I/O threads finish with
/// their own references right after waking the flush that waited for them. So this waits for
/// the lock itself (a blocking lock taken and given back at once) rather than guessing when
/// they are done.
pub async fn released(lock_file: PathBuf) -> Result<(), BoxError> {
    let shown = lock_file.display().to_string();
    let waiting = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use fs2::FileExt;
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock_file)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        // Named in full: std's own File::unlock is newer than this crate's minimum Rust.
        FileExt::lock_exclusive(&file)?;
        FileExt::unlock(&file)
    });
    match tokio::time::timeout(RELEASE_TIMEOUT, waiting).await {
        Ok(joined) => Ok(joined??),
        Err(_) => Err(format!(
            "{shown} is still locked {} s after the store closed: a handle on the database \
             outlived the server",
            RELEASE_TIMEOUT.as_secs()
        )
        .into()),
    }
}
