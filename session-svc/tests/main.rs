//! The integration tests of session-svc's binary and store, one module
//! per suite: one binary, not one per file, which would build the servers' generic code and
//! the gRPC stack again for each. `cargo test --test integration <suite>::` runs one suite.

mod crash_recovery;
mod disk_full;
mod misconfigured;
mod newer_store;
mod startup_log;
mod tokens_reload;
mod version;
