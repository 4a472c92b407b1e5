//! The integration suites of session-svc's binary and store, one module per file. One binary, not
//! one per file: each would build the servers' generic code and the gRPC stack again. `cargo test
//! -p session-svc --test integration <suite>::` runs one suite.

mod crash_recovery;
mod disk_full;
mod misconfigured;
mod newer_store;
mod startup_log;
mod tokens_reload;
mod version;
