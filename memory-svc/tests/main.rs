//! The integration suites of memory-svc's binary, store and models, one module per file. One
//! binary, not one per file: each would build the servers' generic code and the gRPC stack again.
//! `cargo test -p memory-svc --test integration <suite>::` runs one suite.

mod backends;
mod backup;
mod crash_recovery;
mod embedding_metrics;
mod filters;
mod generation;
mod hybrid;
mod local_model;
mod memory_ranking;
mod memory_reindex;
mod newer_store;
mod openai_endpoint;
mod purge;
mod streams;
mod validity;
mod version;
