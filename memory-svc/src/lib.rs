//! memory-svc: a gRPC memory service with the semantics of Google ADK's MemoryService,
//! answering ranked (BM25), multilingual keyword searches from a persistent index, semantic and
//! hybrid searches with an embedding model, and generating memories with a chat model.
//!
//! # Layout
//! - [`config`]: command-line flags with environment fallbacks.
//! - [`budget`]: the memory budget and each in-memory structure's share of it.
//! - [`analysis`]: text analysis: memory text and queries turned into index terms (words,
//!   stems per language, stopwords).
//! - [`embed`]: sentence embedders (`--embedder`): a local model or an OpenAI-compatible endpoint.
//! - [`endpoint`]: the HTTP client of OpenAI-compatible endpoints (timeouts, retries).
//! - [`filter`]: filters of searches and listings (metadata conditions, topics), checked and
//!   tested.
//! - [`fusion`]: hybrid ranking, keyword and semantic rankings fused.
//! - [`generate`]: memory generation (`--generator`): facts extracted and consolidated by a
//!   chat model, in durable jobs.
//! - [`lifetimes`]: default lifetimes of memories per app and action (`--memory-ttl`).
//! - [`backfill`]: embedding, in the background, the entries stored without a vector.
//! - [`grpc`]: tonic handlers (thin) and the mapping of errors to statuses.
//! - [`memories`]: the domain: request checks and ADK's memory rules, free of transport types.
//! - [`purge`]: purges by filter, dry runs and durable operations.
//! - [`streams`]: event streams buffered durably and handed to generation by their triggers.
//! - [`session_source`]: fetching sessions from session-svc for ingestion by reference.
//! - [`store`]: the storage trait, the ingestion rules both backends share, and the sled and
//!   PostgreSQL backends.
//! - [`server`]: opening the store and running the server (see `adk_common::serve`).
//! - [`validity`]: validity in time (`valid_from`, `invalid_at`, `as_of`).
//! - [`error`]: the error type.

pub mod analysis;
pub mod backfill;
pub mod budget;
pub mod config;
pub mod embed;
pub mod endpoint;
pub mod error;
pub mod filter;
pub mod fusion;
pub mod generate;
pub mod grpc;
pub mod lifetimes;
pub mod memories;
pub mod purge;
pub mod server;
pub mod session_source;
pub mod store;
pub mod streams;
pub mod validity;
