//! runner-client's flag reference in docs/operations.md (the command and each subcommand)
//! matches its clap definition (see `adk_tests::flag_docs`).

use adk_tests::flag_docs::{check, operations_md, tables};
use clap::CommandFactory;

#[test]
fn the_flag_reference_matches_the_flags() {
    check(
        &operations_md(),
        &tables("runner-client", &crate::cli::Cli::command()),
    );
}
