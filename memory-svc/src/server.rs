//! Assembles the memory server: opens the store (embedded or PostgreSQL) and serves the memory
//! service with that store's hooks (see [`adk_common::serve::hooks`] and [`adk_common::serve::start`]).

use std::sync::Arc;

use adk_common::{
    postgres::StoreLocation,
    serve::{
        hooks::{open_postgres, EmbeddedBacked, PgBacked, StoreHooks},
        Running,
    },
    stopping::Shutdown,
    BoxError,
};
use adk_proto::memory::v1::memory_service_server::MemoryServiceServer;

use crate::{
    backfill,
    budget::{MemoryBudget, Part},
    config::Config,
    embed::Embedder,
    generate::{jobs, Generator, JobRetry},
    grpc::MemoryGrpc,
    memories::Memories,
    purge,
    session_source::{SessionAccess, SessionSource},
    store::{embedded::EmbeddedMemoryStore, pg::PgMemoryStore, MemoryStore},
    streams,
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
        max_session_bytes: config.max_request_bytes,
    };
    let sessions = SessionSource::new(&config.session_endpoint, access)?;
    let embedder = Embedder::open(config.embedder()).await?;
    let generator = Generator::open(config.generator())?;
    if let Some(embedder) = &embedder {
        tracing::info!(model = %embedder.identity(), "embedding model ready");
    }
    let budget = MemoryBudget::choose(config.memory_budget);
    tracing::info!("memory budget {}", budget.describe());
    budget.record();
    let vector_cache = (config.vector_cache_bytes)
        .unwrap_or_else(|| usize::try_from(budget.share(Part::VectorCache)).unwrap_or(usize::MAX));
    match config.store() {
        StoreLocation::Embedded(dir) => {
            let cache_bytes = config
                .serve
                .cache_bytes
                .unwrap_or_else(|| budget.share(Part::StoreCache));
            tracing::info!(bytes = cache_bytes, "redb page cache");
            let store = EmbeddedMemoryStore::open_with_cache(
                &dir,
                usize::try_from(cache_bytes).unwrap_or(usize::MAX),
                config.serve.sync,
                config.analyzer(),
            )
            .map_err(|e| format!("cannot open the data directory {}: {e}", dir.display()))?
            .within(&budget)
            .with_vector_cache(vector_cache);
            let lock_file = dir.join(adk_common::kv::FILE);
            let hooks = StoreHooks::embedded(store.clone(), &dir, lock_file, move || {
                metrics::gauge!("redb_cache_bytes").set(cache_bytes as f64);
            });
            let memories = Memories::new(store, sessions)
                .with_embedder(embedder)
                .with_generator(generator)
                .with_lifetimes(config.lifetimes())
                .with_triggers(config.triggers());
            serve(config, memories, hooks).await
        }
        StoreLocation::Postgres(url) => {
            let opening =
                PgMemoryStore::open(&url, config.serve.pg_max_connections, config.analyzer());
            let (store, hooks) = open_postgres(async {
                opening.await.map(|store| {
                    store
                        .with_vector_cache(vector_cache)
                        .with_posting_cache(config.posting_cache_bytes)
                })
            })
            .await?;
            let memories = Memories::new(store, sessions)
                .with_embedder(embedder)
                .with_generator(generator)
                .with_lifetimes(config.lifetimes())
                .with_triggers(config.triggers());
            serve(config, memories, hooks).await
        }
    }
}

impl EmbeddedBacked for EmbeddedMemoryStore {
    const SERVICE: &'static str = "memory-svc";

    fn record_size(&self) {
        EmbeddedMemoryStore::record_size(self)
    }

    fn failures(&self) -> tokio::sync::watch::Receiver<Option<Arc<str>>> {
        EmbeddedMemoryStore::failures(self)
    }

    async fn flush(&self) -> Result<(), BoxError> {
        Ok(EmbeddedMemoryStore::flush(self).await?)
    }
}

impl PgBacked for PgMemoryStore {
    fn record_pool(&self) {
        PgMemoryStore::record_pool(self)
    }

    fn health(&self) -> tokio::sync::watch::Receiver<Option<Arc<str>>> {
        PgMemoryStore::health(self)
    }
}

/// Serves the memory service.
async fn serve<S: MemoryStore + Clone>(
    config: Config,
    memories: Memories<S>,
    hooks: StoreHooks,
) -> Result<Running, BoxError> {
    let shutdown = Shutdown::new();
    if let Some(embedder) = memories.embedder().cloned() {
        memories
            .store()
            .use_model(embedder.identity())
            .await
            .map_err(|e| format!("cannot use the embedding model: {e}"))?;
        let (store, stopping) = (memories.store().clone(), shutdown.signal());
        let stop = stopping.clone();
        stopping.spawn(async move {
            tokio::select! {
                _ = backfill::run(&store, &embedder) => {}
                _ = stop.wait() => {}
            }
        });
    }
    let memories = Arc::new(memories);
    {
        // Purges a stopped process left unfinished run to their end.
        let (memories, stopping) = (memories.clone(), shutdown.signal());
        let stop = stopping.clone();
        stopping.spawn(async move {
            tokio::select! {
                outcome = purge::resume(&*memories) => {
                    if let Err(e) = outcome {
                        tracing::error!(error = %e, "a purge left unfinished failed; it runs again at the next start");
                    }
                }
                _ = stop.wait() => {}
            }
        });
    }
    if let Some(generator) = memories.generator().cloned() {
        tracing::info!(model = %generator.model.base_url(), workers = generator.workers, "memory generation on");
        for _ in 0..generator.workers {
            let (memories, generator, stopping) =
                (memories.clone(), generator.clone(), shutdown.signal());
            shutdown
                .signal()
                .spawn(async move { jobs::work(&*memories, &generator, &stopping).await });
        }
        // The quiet timers of event streams, those a stopped process left buffered included.
        let (memories, stopping) = (memories.clone(), shutdown.signal());
        shutdown
            .signal()
            .spawn(async move { streams::watch(&*memories, &stopping).await });
    } else if memories.lifetimes().any() {
        let (memories, stopping) = (memories.clone(), shutdown.signal());
        let poll = JobRetry::default().poll;
        shutdown
            .signal()
            .spawn(async move { jobs::expire(&*memories, poll, &stopping).await });
    }
    let service = MemoryServiceServer::new(MemoryGrpc::new(memories))
        .max_decoding_message_size(config.max_request_bytes);
    adk_common::serve::start(config.listen, &config.serve, service, shutdown, hooks).await
}
