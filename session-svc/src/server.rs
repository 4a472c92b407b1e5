//! Assembles the session server: opens the store and serves the session service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::sync::Arc;

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

/// Opens the store, binds the listener and serves in a background task.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    let listener = TcpListener::bind(config.listen).await?;
    let store = SledStore::open(&config.data_dir, config.sync)?;
    let sessions = Arc::new(Sessions::new(
        store.clone(),
        Limits {
            max_event_bytes: config.max_event_bytes,
        },
    ));
    let service = SessionServiceServer::new(SessionGrpc::new(sessions))
        .max_decoding_message_size(config.max_event_bytes + REQUEST_OVERHEAD_BYTES);
    spawn(
        listener,
        "adk.session.v1.SessionService",
        Routes::new(service),
        async move { Ok(store.flush().await?) },
    )
}
