//! The integration tests of the gateway binary's HTTP front door and web console, one module
//! per suite: one binary, not one per file, which would build the servers' generic code and
//! the gRPC stack again for each. `cargo test --test integration <suite>::` runs one suite.

mod console;
mod console_browser;
mod console_fixture;
mod http;
