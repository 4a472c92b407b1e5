//! The integration suites of the servers booted in-process on port 0 and driven over gRPC, one
//! module per file. One binary, not one per file: each would build the servers' generic code and
//! the gRPC stack again. `cargo test -p adk-tests --test integration <suite>::` runs one suite.

mod authorization;
mod flag_docs;
mod hostile;
mod large_sessions;
mod list_apps;
mod memory;
mod memory_conversion;
mod operations;
mod pg_contention;
mod pg_lost_commit;
mod pg_outage;
mod pg_schema;
mod pg_tls;
mod races;
mod replicas;
mod runner;
mod session_conversion;
mod session_errors;
mod session_rules;
mod session_streams;
