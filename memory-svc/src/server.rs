//! Assembles the memory server: opens the store (sled or PostgreSQL) and serves the memory service (beside health
//! and reflection, see [`adk_common::server::spawn`]).

use std::{future::Future, sync::Arc};

use adk_common::{
    postgres::StoreLocation,
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
    store::{pg::PgMemoryStore, sled::SledMemoryStore, MemoryStore},
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
    match config.store() {
        StoreLocation::Sled(dir) => {
            let store = SledMemoryStore::open(&dir, config.serve.sync)
                .map_err(|e| format!("cannot open the data directory {}: {e}", dir.display()))?;
            let admin = AdminServiceServer::new(AdminGrpc::new(
                "memory-svc",
                Arc::new(store.clone()),
                dir.join("snapshots"),
            ));
            let (db_size, flushed) = (store.clone(), store.clone());
            let hooks = StoreHooks {
                refresh_metrics: Arc::new(move || db_size.record_size()),
                failures: store.failures(),
                on_stop: async move { Ok(flushed.flush().await?) },
            };
            serve(config, Memories::new(store, sessions), Some(admin), hooks).await
        }
        StoreLocation::Postgres(url) => {
            let store = PgMemoryStore::open(&url, config.serve.pg_max_connections)
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
            serve(config, Memories::new(store, sessions), None, hooks).await
        }
    }
}

/// Serves the memory service, with the AdminService when there is one.
async fn serve<S: MemoryStore>(
    config: Config,
    memories: Memories<S>,
    admin: Option<AdminServiceServer<AdminGrpc<SledMemoryStore>>>,
    hooks: StoreHooks<impl Future<Output = Result<(), BoxError>> + Send + 'static>,
) -> Result<Running, BoxError> {
    let authenticator = config.serve.authenticator()?;
    let listener = TcpListener::bind(config.listen).await?;
    let service = MemoryServiceServer::new(MemoryGrpc::new(Arc::new(memories)))
        .max_decoding_message_size(config.max_request_bytes);
    let mut routes = Routes::new(InterceptedService::new(service, authenticator.clone()));
    if let Some(admin) = admin {
        routes = routes.add_service(InterceptedService::new(admin, authenticator));
    }
    spawn(
        listener,
        "adk.memory.v1.MemoryService",
        routes,
        config.serve.options(),
        Shutdown::new(),
        hooks,
    )
    .await
}
