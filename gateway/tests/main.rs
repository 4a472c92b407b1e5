//! The integration suites of the gateway binary's HTTP front door and web console, one module per
//! file. One binary, not one per file: each would build the servers' generic code and the gRPC
//! stack again. `cargo test -p gateway --test integration <suite>::` runs one suite.

mod console;
mod console_browser;
mod console_fixture;
mod http;
