//! The servers' flag reference in docs/operations.md matches their clap definitions (see
//! `adk_tests::flag_docs`); runner-client's is checked in its own crate, where its command line
//! lives.

use adk_common::serve::flags::command;
use adk_tests::flag_docs::{check, operations_md, tables};

#[test]
fn the_servers_flag_reference_matches_their_flags() {
    let mut all = tables(
        "session-svc",
        &command::<session_svc::config::Config>(session_svc::config::ENV_PREFIX),
    );
    all.extend(tables(
        "memory-svc",
        &command::<memory_svc::config::Config>(memory_svc::config::ENV_PREFIX),
    ));
    check(&operations_md(), &all);
}
