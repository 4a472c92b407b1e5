//! Assembles the memory server: opens the store and serves the memory service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::sync::Arc;

use adk_common::server::{spawn, BoxError, Running};
use adk_proto::memory::v1::memory_service_server::MemoryServiceServer;
use tokio::net::TcpListener;
use tonic::service::Routes;

use crate::{
    config::Config, grpc::MemoryGrpc, memories::Memories, session_source::SessionSource,
    store::sled::SledMemoryStore,
};

/// Opens the store, binds the listener and serves in a background task.
pub async fn start(config: Config) -> Result<Running, BoxError> {
    let sessions = SessionSource::new(&config.session_endpoint)?;
    let listener = TcpListener::bind(config.listen).await?;
    let store = SledMemoryStore::open(&config.data_dir, config.sync)?;
    let memories = Arc::new(Memories::new(store.clone(), sessions));
    let service = MemoryServiceServer::new(MemoryGrpc::new(memories))
        .max_decoding_message_size(config.max_request_bytes);
    spawn(
        listener,
        "adk.memory.v1.MemoryService",
        Routes::new(service),
        async move { Ok(store.flush().await?) },
    )
}
