//! Assembles the session server: opens the store and serves the session service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::{sync::Arc, time::Duration};

use adk_common::server::{spawn, BoxError, Running};
use adk_proto::session::v1::session_service_server::SessionServiceServer;
use tokio::net::TcpListener;
use tonic::service::Routes;

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

/// Opens the store, binds the listener and serves in a background task.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    let listener = TcpListener::bind(config.listen).await?;
    let store = SledStore::open(&config.data_dir, config.sync)?;
    let change_retention = Duration::from_secs(config.change_retention_secs);
    let sessions = Arc::new(Sessions::new(
        store.clone(),
        Limits {
            max_event_bytes: config.max_event_bytes,
            change_retention,
        },
    ));
    let trimmer = tokio::spawn(trim_changes(
        sessions.clone(),
        (change_retention / 4).clamp(Duration::from_millis(100), TRIM_INTERVAL),
    ));
    let service = SessionServiceServer::new(SessionGrpc::new(sessions))
        .max_decoding_message_size(config.max_event_bytes + REQUEST_OVERHEAD_BYTES);
    spawn(
        listener,
        "adk.session.v1.SessionService",
        Routes::new(service),
        async move {
            trimmer.abort();
            Ok(store.flush().await?)
        },
    )
}

/// Keeps the WatchEvents change feed within its retention window.
async fn trim_changes(sessions: Arc<Sessions<SledStore>>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        match sessions.trim_changes().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(trimmed = n, "change feed trimmed"),
            Err(e) => tracing::warn!(error = %e, "trimming the change feed failed"),
        }
    }
}
