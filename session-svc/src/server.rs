//! Assembles the session server: opens the store (sled or PostgreSQL) and serves the session service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::{future::Future, sync::Arc, time::Duration};

use adk_common::{
    postgres::StoreLocation,
    server::{spawn, BoxError, Running, Shutdown, StoreHooks},
    snapshot::AdminGrpc,
};
use adk_proto::admin::v1::admin_service_server::AdminServiceServer;
use adk_proto::session::v1::session_service_server::SessionServiceServer;
use tokio::net::TcpListener;
use tonic::service::{interceptor::InterceptedService, Routes};

use crate::{
    config::Config,
    grpc::SessionGrpc,
    sessions::{Limits, Sessions},
    store::{pg_store::PgStore, sled_store::SledStore, SessionStore},
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
        StoreLocation::Sled(dir) => {
            let store = SledStore::open(&dir, config.serve.sync)
                .map_err(|e| format!("cannot open the data directory {}: {e}", dir.display()))?;
            let admin = AdminServiceServer::new(AdminGrpc::new(
                "session-svc",
                Arc::new(store.clone()),
                dir.join("snapshots"),
            ));
            let (db_size, flushed) = (store.clone(), store.clone());
            let hooks = StoreHooks {
                refresh_metrics: Arc::new(move || db_size.record_size()),
                failures: store.failures(),
                on_stop: async move { Ok(flushed.close().await?) },
            };
            serve(config, store, Some(admin), hooks).await
        }
        StoreLocation::Postgres(url) => {
            let store = PgStore::open(&url, config.serve.pg_max_connections)
                .await
                .map_err(|e| format!("cannot open the PostgreSQL store: {e}"))?;
            // Backups are the database's own (pg_dump, PITR): no AdminService, and nothing to
            // flush, since every write is committed before it is acknowledged.
            let pool = store.clone();
            let hooks = StoreHooks {
                refresh_metrics: Arc::new(move || pool.record_pool()),
                failures: tokio::sync::watch::channel(None).1,
                on_stop: async { Ok(()) },
            };
            serve(config, store, None, hooks).await
        }
    }
}

/// Serves the session service over `store`, with the AdminService when there is one.
async fn serve<S: SessionStore>(
    config: Config,
    store: S,
    admin: Option<AdminServiceServer<AdminGrpc<SledStore>>>,
    hooks: StoreHooks<impl Future<Output = Result<(), BoxError>> + Send + 'static>,
) -> Result<Running, BoxError> {
    let authenticator = config.serve.authenticator()?;
    let listener = TcpListener::bind(config.listen).await?;
    let change_retention = Duration::from_secs(config.change_retention_secs);
    let shutdown = Shutdown::new();
    let notices = store.notices()?;
    let sessions = Arc::new(Sessions::new(
        store,
        Limits {
            max_event_bytes: config.max_event_bytes,
            change_retention,
            default_ttl: (config.default_session_ttl_secs > 0)
                .then(|| Duration::from_secs(config.default_session_ttl_secs)),
        },
        shutdown.signal(),
    ));
    let mut background = vec![tokio::spawn(housekeeping(
        sessions.clone(),
        (change_retention / 4).clamp(Duration::from_millis(100), TRIM_INTERVAL),
    ))];
    if let Some(notices) = notices {
        let relay = sessions.clone();
        background.push(tokio::spawn(async move { relay.relay(notices).await }));
    }
    let service = SessionServiceServer::new(SessionGrpc::new(sessions))
        .max_decoding_message_size(config.max_event_bytes + REQUEST_OVERHEAD_BYTES);
    let mut routes = Routes::new(InterceptedService::new(service, authenticator.clone()));
    if let Some(admin) = admin {
        routes = routes.add_service(InterceptedService::new(admin, authenticator));
    }
    let StoreHooks {
        refresh_metrics,
        failures,
        on_stop,
    } = hooks;
    spawn(
        listener,
        "adk.session.v1.SessionService",
        routes,
        config.serve.options(),
        shutdown,
        StoreHooks {
            refresh_metrics,
            failures,
            on_stop: async move {
                for task in background {
                    task.abort();
                }
                on_stop.await
            },
        },
    )
    .await
}

/// Deletes expired sessions (each second: expired ones are already invisible, this reclaims
/// their space and ends their watches) and keeps the WatchEvents change feed within its
/// retention window (every `trim_every`).
async fn housekeeping<S: SessionStore>(sessions: Arc<Sessions<S>>, trim_every: Duration) {
    let mut sweeps = tokio::time::interval(SWEEP_INTERVAL);
    let mut trims = tokio::time::interval(trim_every);
    loop {
        tokio::select! {
            _ = sweeps.tick() => match sessions.sweep_expired().await {
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
