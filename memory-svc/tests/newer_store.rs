//! A memory store written by a newer release (its format version above what this binary
//! knows): the binary says so, naming both versions, and exits with a failure instead of
//! serving. A sled store of an earlier release's layout at a newer format is refused as it is,
//! not converted.

use std::path::Path;

use adk_tests::refused_data_dir;

fn assert_refused(dir: &Path) {
    let stderr = refused_data_dir(env!("CARGO_BIN_EXE_memory-svc"), "MEMORY_SVC_", dir);
    assert!(
        stderr.contains(
            "the memory store is at version 1000, written by a newer release; this binary knows \
             versions up to 9"
        ),
        "{stderr}"
    );
}

#[test]
fn the_binary_refuses_a_store_of_a_newer_format_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    // What a release knowing format 1000 leaves behind when it opens the store.
    let db = adk_common::kv::Db::open(&dir.path().join(adk_common::kv::FILE), 1 << 20).unwrap();
    adk_common::kv::open_format(&db, "memory store", 1000).unwrap();
    drop(db);
    assert_refused(dir.path());
}

#[test]
fn a_sled_store_of_a_newer_format_is_refused_unconverted() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    adk_common::sled::open(&db, "memory store", 1000).unwrap();
    drop(db);
    assert_refused(dir.path());
    assert!(dir.path().join("db").exists(), "sled's files were kept");
    assert!(!dir.path().join(adk_common::kv::FILE).exists());
}
