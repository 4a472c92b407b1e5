//! The contract suite on sled, each test on a fresh database in a temporary directory.

use adk_common::durability::SyncMode;

use super::{super::contract::session_store_suite, SledStore};

async fn open() -> Option<(tempfile::TempDir, SledStore)> {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    Some((dir, SledStore::from_db(db, SyncMode::Sync).unwrap()))
}

session_store_suite!(open());
