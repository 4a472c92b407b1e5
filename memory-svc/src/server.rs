//! Assembles the memory server: opens the store and serves the memory service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::sync::Arc;

use adk_common::{
    server::{spawn, BoxError, Running, Shutdown, StoreHooks},
    snapshot::AdminGrpc,
};
use adk_proto::admin::v1::admin_service_server::AdminServiceServer;
use adk_proto::memory::v1::memory_service_server::MemoryServiceServer;
use tokio::net::TcpListener;
use tonic::service::{interceptor::InterceptedService, Routes};

use crate::{
    config::Config,
    grpc::MemoryGrpc,
    memories::Memories,
    session_source::{SessionAccess, SessionSource},
    store::sled::SledMemoryStore,
};

/// Opens the store, binds the listener and serves in a background task.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    let read = |path: &std::path::PathBuf| {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let access = SessionAccess {
        token: match &config.session_token_file {
            Some(path) => Some(String::from_utf8(read(path)?)?),
            None => None,
        },
        ca_pem: config.session_ca.as_ref().map(read).transpose()?,
    };
    let sessions = SessionSource::new(&config.session_endpoint, access)?;
    let authenticator = config.serve.authenticator()?;
    let listener = TcpListener::bind(config.listen).await?;
    let store = SledMemoryStore::open(&config.data_dir, config.serve.sync).map_err(|e| {
        format!(
            "cannot open the data directory {}: {e}",
            config.data_dir.display()
        )
    })?;
    let memories = Arc::new(Memories::new(store.clone(), sessions));
    let service = MemoryServiceServer::new(MemoryGrpc::new(memories))
        .max_decoding_message_size(config.max_request_bytes);
    let admin = AdminServiceServer::new(AdminGrpc::new(
        Arc::new(store.clone()),
        config.data_dir.join("snapshots"),
    ));
    let routes = Routes::new(InterceptedService::new(service, authenticator.clone()))
        .add_service(InterceptedService::new(admin, authenticator));
    let db_size = store.clone();
    spawn(
        listener,
        "adk.memory.v1.MemoryService",
        routes,
        config.serve.options(),
        Shutdown::new(),
        StoreHooks {
            refresh_metrics: Arc::new(move || db_size.record_size()),
            failures: store.failures(),
            on_stop: async move { Ok(store.flush().await?) },
        },
    )
    .await
}
