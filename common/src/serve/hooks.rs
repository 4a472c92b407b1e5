//! What a server needs from its store beside the service itself, built one way per kind of
//! store: [`StoreHooks::embedded`] (metrics of the database, disk failures, a flush at stop, and
//! the AdminService for online backups; [`StoreHooks::sled`] opens a sled database for it) and [`StoreHooks::postgres`] (metrics of the pool and health
//! following the database's reachability: backups are the database's own, and every write is
//! committed before it is acknowledged).

use std::{
    fmt,
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
};

use adk_proto::admin::v1::admin_service_server::AdminServiceServer;
use tokio::sync::watch;
use tonic::service::{interceptor::InterceptedService, Routes};

use crate::{
    durability::SyncMode,
    serve::{admin::AdminGrpc, auth::Authenticator, flags::ServeFlags},
    sled::cache::SledCache,
    snapshot::Snapshotter,
    BoxError,
};

/// The gRPC name of the AdminService, for reflection.
pub(crate) const ADMIN_SERVICE: &str = "adk.admin.v1.AdminService";

/// A store on a database embedded in the server (sled or redb).
pub trait EmbeddedBacked: Snapshotter + Clone {
    /// The server's name, written into its snapshots.
    const SERVICE: &'static str;
    /// Publishes the database's size on disk as a gauge.
    fn record_size(&self);
    /// Becomes `Some(reason)` when the store's disk fails.
    fn failures(&self) -> watch::Receiver<Option<Arc<str>>>;
    /// Makes every acknowledged write durable; the server calls it once it has stopped.
    fn flush(&self) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A store on a PostgreSQL database.
pub trait PgBacked: Clone + Send + Sync + 'static {
    /// Publishes the connection pool's gauges.
    fn record_pool(&self);
    /// Becomes `Some(reason)` while the database cannot be reached (see
    /// [`crate::postgres::health`]).
    fn health(&self) -> watch::Receiver<Option<Arc<str>>>;
}

/// Opens the sled database in `dir` with the page cache `flags` ask for, and the store `open`
/// makes of it (with the flags' durability): the store and its hooks.
pub fn open_sled<S, E>(
    dir: &Path,
    flags: &ServeFlags,
    open: impl FnOnce(sled::Db, SyncMode) -> Result<S, E>,
) -> Result<(S, StoreHooks), BoxError>
where
    S: EmbeddedBacked,
    E: fmt::Display,
{
    let cannot_open =
        |e: &dyn fmt::Display| format!("cannot open the data directory {}: {e}", dir.display());
    let cache = SledCache::choose(flags.cache_bytes);
    let db = cache.open(dir).map_err(|e| cannot_open(&e))?;
    let store = open(db, flags.sync).map_err(|e| cannot_open(&e))?;
    let hooks = StoreHooks::sled(store.clone(), cache, dir);
    Ok((store, hooks))
}

/// The PostgreSQL store `opening` opens: the store and its hooks.
pub async fn open_postgres<S, E>(
    opening: impl Future<Output = Result<S, E>>,
) -> Result<(S, StoreHooks), BoxError>
where
    S: PgBacked,
    E: fmt::Display,
{
    let store = opening
        .await
        .map_err(|e| format!("cannot open the PostgreSQL store: {e}"))?;
    let pool = store.clone();
    let hooks = StoreHooks::postgres(move || pool.record_pool(), store.health());
    Ok((store, hooks))
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
    /// The file an embedded database locks: shutdown returns once the lock is free again, so
    /// the directory can be opened at once (by a restart in the same process, say).
    pub(crate) lock_file: Option<PathBuf>,
}

impl StoreHooks {
    /// A sled store opened with `cache`: its size and cache capacity as gauges, health that
    /// follows its disk, a flush at stop, and the AdminService writing snapshots to
    /// `<data_dir>/snapshots` before streaming them.
    pub fn sled<S: EmbeddedBacked>(store: S, cache: SledCache, data_dir: &Path) -> Self {
        cache.announce();
        // sled 0.34 locks the file `db` in its directory for as long as any handle is open.
        let lock_file = data_dir.join("db");
        Self::embedded(store, data_dir, lock_file, move || cache.record())
    }

    /// A store on an embedded database in `data_dir` that locks `lock_file`: its size (and
    /// what `record_cache` publishes) as gauges, health that follows its disk, a flush at stop,
    /// and the AdminService writing snapshots to `<data_dir>/snapshots` before streaming them.
    pub fn embedded<S: EmbeddedBacked>(
        store: S,
        data_dir: &Path,
        lock_file: PathBuf,
        record_cache: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        let snapshot_dir = data_dir.join("snapshots");
        let metrics = store.clone();
        let admin = Arc::new(store.clone());
        Self {
            refresh_metrics: Arc::new(move || {
                metrics.record_size();
                record_cache();
            }),
            failures: Some(store.failures()),
            on_stop: Box::pin(async move { store.flush().await }),
            admin: Some(AdminRoute(Box::new(move |routes, authenticator| {
                let service =
                    AdminServiceServer::new(AdminGrpc::new(S::SERVICE, admin, snapshot_dir));
                routes.add_service(InterceptedService::new(service, authenticator))
            }))),
            lock_file: Some(lock_file),
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
