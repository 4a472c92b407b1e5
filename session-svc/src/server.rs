//! Assembles the session server: opens the store and serves the session service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::{sync::Arc, time::Duration};

use adk_common::{
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
    store::sled_store::SledStore,
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
    let authenticator = config.serve.authenticator()?;
    let listener = TcpListener::bind(config.listen).await?;
    let store = SledStore::open(&config.data_dir, config.serve.sync).map_err(|e| {
        format!(
            "cannot open the data directory {}: {e}",
            config.data_dir.display()
        )
    })?;
    let change_retention = Duration::from_secs(config.change_retention_secs);
    let shutdown = Shutdown::new();
    let sessions = Arc::new(Sessions::new(
        store.clone(),
        Limits {
            max_event_bytes: config.max_event_bytes,
            change_retention,
            default_ttl: (config.default_session_ttl_secs > 0)
                .then(|| Duration::from_secs(config.default_session_ttl_secs)),
        },
        shutdown.signal(),
    ));
    let housekeeping = tokio::spawn(housekeeping(
        sessions.clone(),
        (change_retention / 4).clamp(Duration::from_millis(100), TRIM_INTERVAL),
    ));
    let service = SessionServiceServer::new(SessionGrpc::new(sessions))
        .max_decoding_message_size(config.max_event_bytes + REQUEST_OVERHEAD_BYTES);
    let admin = AdminServiceServer::new(AdminGrpc::new(
        Arc::new(store.clone()),
        config.data_dir.join("snapshots"),
    ));
    let routes = Routes::new(InterceptedService::new(service, authenticator.clone()))
        .add_service(InterceptedService::new(admin, authenticator));
    let db_size = store.clone();
    spawn(
        listener,
        "adk.session.v1.SessionService",
        routes,
        config.serve.options(),
        shutdown,
        StoreHooks {
            refresh_metrics: Arc::new(move || db_size.record_size()),
            failures: store.failures(),
            on_stop: async move {
                housekeeping.abort();
                Ok(store.flush().await?)
            },
        },
    )
    .await
}

/// Deletes expired sessions (each second: expired ones are already invisible, this reclaims
/// their space and ends their watches) and keeps the WatchEvents change feed within its
/// retention window (every `trim_every`).
async fn housekeeping(sessions: Arc<Sessions<SledStore>>, trim_every: Duration) {
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
