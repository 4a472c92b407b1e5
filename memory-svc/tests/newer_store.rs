//! A sled memory store written by a newer release (its format version above what this binary
//! knows): the binary says so, naming both versions, and exits with a failure instead of
//! serving.

use adk_tests::refused_data_dir;

#[test]
fn the_binary_refuses_a_store_of_a_newer_format_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    // What a release knowing format 1000 leaves behind when it opens the store.
    let db = sled::open(dir.path()).unwrap();
    adk_common::sled::open(&db, "memory store", 1000).unwrap();
    drop(db);

    let stderr = refused_data_dir(env!("CARGO_BIN_EXE_memory-svc"), "MEMORY_SVC_", dir.path());
    assert!(
        stderr.contains(
            "the memory store is at version 1000, written by a newer release; this binary knows \
             versions up to 9"
        ),
        "{stderr}"
    );
}
