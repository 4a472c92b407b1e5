//! What a test needs from the machine beyond this repository, and how a missing one shows.
//!
//! A test that needs PostgreSQL, the embedding model or root is marked
//! `#[ignore = "needs ..."]`: a plain `cargo test` counts it as ignored and prints the reason,
//! never as passed. The runs that provide the prerequisite select such tests with `--ignored`
//! (or `--include-ignored`), as `.ci/run` does; there the functions below fail the test when the
//! prerequisite is missing after all, instead of letting it pass without running.

use crate::{postgres_url, POSTGRES_VAR};

/// The database of the PostgreSQL pass (`ADK_TEST_POSTGRES`); panics without one.
pub fn postgres() -> String {
    postgres_url().unwrap_or_else(|| {
        panic!(
            "this test needs PostgreSQL: set {POSTGRES_VAR} to a connection string \
             (`.ci/postgres` starts a server and prints one)"
        )
    })
}
