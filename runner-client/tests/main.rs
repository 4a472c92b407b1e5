//! The integration tests of the runner-client binary, one module
//! per suite: one binary, not one per file, which would build the servers' generic code and
//! the gRPC stack again for each. `cargo test --test integration <suite>::` runs one suite.

mod cli;
mod completions;
mod openai;
mod version;
