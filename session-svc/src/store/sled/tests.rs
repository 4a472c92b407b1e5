//! The contract suite on sled, each test on a fresh database in a temporary directory.

use adk_common::durability::SyncMode;

use super::{super::contract::session_store_suite, SledSessionStore};

async fn open() -> (tempfile::TempDir, SledSessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    (dir, SledSessionStore::from_db(db, SyncMode::Sync).unwrap())
}

session_store_suite!(open());

/// A format-1 store whose conversion was cut short (the format already recorded as 2, one
/// session's state moved, another's not, and state left by a deleted session) is converted at
/// the next open: every session has its state, the orphan is gone, and so is the old tree.
#[tokio::test]
async fn a_conversion_cut_short_carries_on() {
    use std::collections::BTreeMap;

    use adk_common::keys::Key;
    use prost::Message;

    use super::{super::EventWindow, records::SessionRecord, SessionKey, SessionStore};

    let dir = tempfile::tempdir().unwrap();
    let key = |id: &str| Key::new().str("app").str("user").str(id);
    let record = |state: &[(&str, &str)]| SessionRecord {
        incarnation: 1,
        create_time: Some(prost_types::Timestamp::default()),
        last_update_time: Some(prost_types::Timestamp::default()),
        last_sequence: 0,
        expire_time: None,
        state: state
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    };
    {
        let db = sled::open(dir.path()).unwrap();
        adk_common::sled::open(&db, "session store", 2).unwrap();
        let sessions = db.open_tree("sessions").unwrap();
        let old = db.open_tree("session_state").unwrap();
        sessions
            .insert(
                key("moved").as_bytes(),
                record(&[("k", "1")]).encode_to_vec(),
            )
            .unwrap();
        sessions
            .insert(key("waiting").as_bytes(), record(&[]).encode_to_vec())
            .unwrap();
        old.insert(key("waiting").str("k").as_bytes(), b"2")
            .unwrap();
        old.insert(key("waiting").str("m").as_bytes(), b"[3]")
            .unwrap();
        old.insert(key("deleted").str("x").as_bytes(), b"1")
            .unwrap();
        db.flush().unwrap();
    }
    let db = sled::open(dir.path()).unwrap();
    let store = SledSessionStore::from_db(db.clone(), SyncMode::Sync).unwrap();
    let state = |id: &str| {
        let store = store.clone();
        let key = SessionKey {
            app_name: "app".into(),
            user_id: "user".into(),
            session_id: id.into(),
        };
        async move {
            let session = store.get(&key, EventWindow::NONE).await.unwrap();
            session.map(|s| s.state)
        }
    };
    assert_eq!(state("moved").await.as_deref(), Some(r#"{"k":1}"#));
    assert_eq!(
        state("waiting").await.as_deref(),
        Some(r#"{"k":2,"m":[3]}"#)
    );
    assert_eq!(state("deleted").await, None);
    assert!(!db.tree_names().iter().any(|name| name == b"session_state"));
}
