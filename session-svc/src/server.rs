//! Assembles the session server: opens the store (sled or PostgreSQL) and serves the session
//! service with that store's hooks (see [`adk_common::serve::hooks`] and [`adk_common::serve::start`]).

use std::{sync::Arc, time::Duration};

use crate::{
    config::Config,
    grpc::{reply::SessionRoutes, SessionGrpc},
    sessions::{Limits, Sessions},
    store::{pg::PgSessionStore, sled::SledSessionStore, SessionStore},
};
use adk_common::{
    postgres::StoreLocation,
    serve::{
        hooks::{open_postgres, open_sled, EmbeddedBacked, PgBacked, StoreHooks},
        Running,
    },
    stopping::{Shutdown, Stopping},
    BoxError,
};

/// Room above `max_event_bytes` for the rest of a request; larger messages are refused by the
/// transport before they are decoded.
const REQUEST_OVERHEAD_BYTES: usize = 1 << 20;

/// How often the change feed is trimmed, at most.
const TRIM_INTERVAL: Duration = Duration::from_secs(60);

/// How often expired sessions are looked for.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Opens the store, binds the listener and serves in a background task.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    match config.store() {
        StoreLocation::Embedded(dir) => {
            let (store, hooks) = open_sled(&dir, &config.serve, SledSessionStore::from_db)?;
            serve(config, store, hooks).await
        }
        StoreLocation::Postgres(url) => {
            let (store, hooks) =
                open_postgres(PgSessionStore::open(&url, config.serve.pg_max_connections)).await?;
            serve(config, store, hooks).await
        }
    }
}

impl EmbeddedBacked for SledSessionStore {
    const SERVICE: &'static str = "session-svc";

    fn record_size(&self) {
        SledSessionStore::record_size(self)
    }

    fn failures(&self) -> tokio::sync::watch::Receiver<Option<Arc<str>>> {
        SledSessionStore::failures(self)
    }

    async fn flush(&self) -> Result<(), BoxError> {
        Ok(self.close().await?)
    }
}

impl PgBacked for PgSessionStore {
    fn record_pool(&self) {
        PgSessionStore::record_pool(self)
    }

    fn health(&self) -> tokio::sync::watch::Receiver<Option<Arc<str>>> {
        PgSessionStore::health(self)
    }
}

/// Serves the session service over `store`, with its housekeeping (and, on a shared store, the
/// relay of other replicas' notices) running until shutdown.
async fn serve<S: SessionStore>(
    config: Config,
    store: S,
    hooks: StoreHooks,
) -> Result<Running, BoxError> {
    let change_retention = Duration::from_secs(config.change_retention_secs);
    let shutdown = Shutdown::new();
    let stopping = shutdown.signal();
    let notices = store.notices(&stopping)?;
    let sessions = Arc::new(Sessions::new(
        store,
        Limits {
            max_event_bytes: config.max_event_bytes,
            change_retention,
            default_ttl: (config.default_session_ttl_secs > 0)
                .then(|| Duration::from_secs(config.default_session_ttl_secs)),
        },
        stopping.clone(),
    ));
    stopping.spawn(housekeeping(
        sessions.clone(),
        (change_retention / 4).clamp(Duration::from_millis(100), TRIM_INTERVAL),
        stopping.clone(),
    ));
    if let Some(notices) = notices {
        let (relay, stopped) = (sessions.clone(), stopping.clone());
        // The relay only waits between notices (each is handled without an await), so
        // stopping it there loses nothing.
        stopping.spawn(async move {
            tokio::select! {
                () = relay.relay(notices) => {}
                () = stopped.wait() => {}
            }
        });
    }
    let service = SessionRoutes::new(
        SessionGrpc::new(sessions),
        config.max_event_bytes + REQUEST_OVERHEAD_BYTES,
    );
    adk_common::serve::start(config.listen, &config.serve, service, shutdown, hooks).await
}

/// Deletes expired sessions (each second: expired ones are already invisible, this reclaims
/// their space and ends their watches) and keeps the WatchEvents change feed within its
/// retention window (every `trim_every`), until the server stops (a pass in progress finishes).
async fn housekeeping<S: SessionStore>(
    sessions: Arc<Sessions<S>>,
    trim_every: Duration,
    stopping: Stopping,
) {
    let mut sweeps = tokio::time::interval(SWEEP_INTERVAL);
    let mut trims = tokio::time::interval(trim_every);
    loop {
        tokio::select! {
            () = stopping.wait() => return,
            _ = sweeps.tick() => match sessions.sweep_expired(crate::time::now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "expired sessions deleted"),
                Err(e) => tracing::warn!(error = %e, "deleting expired sessions failed"),
            },
            _ = trims.tick() => match sessions.trim_changes().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(trimmed = n, "change feed trimmed"),
                Err(e) => tracing::warn!(error = %e, "trimming the change feed failed"),
            },
        }
    }
}
