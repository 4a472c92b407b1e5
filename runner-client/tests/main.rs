//! The integration suites of the runner-client binary, one module per file. One binary, not one per
//! file: each would build the servers' generic code and the gRPC stack again. `cargo test -p
//! runner-client --test integration <suite>::` runs one suite.

mod cli;
mod completions;
mod openai;
mod version;
