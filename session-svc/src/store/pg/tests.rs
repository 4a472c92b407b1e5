//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (ignored unless asked for: `adk_tests::prerequisite`), and what
//! only this store has: versioned shared state and its migration.

use std::time::{Duration, SystemTime};

use adk_common::postgres;
use adk_proto::session::v1::Event;
use prost_types::Timestamp;
use tokio_postgres::NoTls;

use super::{
    super::contract::session_store_suite,
    schema::MIGRATIONS,
    write::{WRITE_APP_STATE, WRITE_USER_STATE},
    PgSessionStore,
};
use crate::{
    state::{Entry, ScopedDelta},
    store::{Append, EventWindow, NewSession, SessionKey, SessionStore},
};

async fn open() -> ((), PgSessionStore) {
    let url = adk_tests::fresh_schema(&adk_tests::prerequisite::postgres()).await;
    ((), PgSessionStore::open(&url, 8).await.unwrap())
}

session_store_suite!(open(), needs_postgres);

fn key(session_id: &str) -> SessionKey {
    SessionKey {
        app_name: "app".into(),
        user_id: "user".into(),
        session_id: session_id.into(),
    }
}

/// A delta writing `k` in the user and the app scope.
fn shared(value: &str) -> ScopedDelta {
    ScopedDelta {
        app: vec![("k".into(), value.into())],
        user: vec![("k".into(), value.into())],
        session: Vec::new(),
    }
}

fn new_session(key: &SessionKey, state: ScopedDelta) -> NewSession {
    NewSession {
        key: key.clone(),
        create_time: Timestamp::default(),
        expire_time: None,
        state,
    }
}

fn append_of(id: &str, delta: ScopedDelta) -> Append {
    Append {
        event: Event {
            id: id.into(),
            author: "user".into(),
            timestamp: Some(Timestamp::default()),
            ..Default::default()
        },
        timestamp_given: true,
        delta,
        expected_last_sequence: None,
    }
}

async fn state(store: &PgSessionStore, key: &SessionKey) -> serde_json::Value {
    let session = store.get(key, EventWindow::NONE).await.unwrap().unwrap();
    serde_json::from_str(&session.state).unwrap()
}

/// Rows of `table` (every version of every key).
async fn rows(db: &tokio_postgres::Client, table: &str) -> i64 {
    db.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (db, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_writer_of_shared_keys_waits_for_no_other() {
    let url = adk_tests::prerequisite::postgres();
    let url = adk_tests::fresh_schema(&url).await;
    let store = PgSessionStore::open(&url, 4).await.unwrap();
    let (a, b) = (key("a"), key("b"));
    store.create(new_session(&a, shared("0"))).await.unwrap();
    store
        .create(new_session(&b, ScopedDelta::default()))
        .await
        .unwrap();

    // Another append has written both keys and not committed yet.
    let mut other = connect(&url).await;
    let other = other.transaction().await.unwrap();
    let (names, values) = (vec!["k"], vec!["1"]);
    other
        .execute(WRITE_USER_STATE, &[&"app", &"user", &names, &values])
        .await
        .unwrap();
    other
        .execute(WRITE_APP_STATE, &[&"app", &names, &values])
        .await
        .unwrap();

    // An append writing the same keys does not wait for it: rows updated in place would keep
    // this one waiting for the other's commit, which comes only after it (the time limit only
    // turns that hang into a failure).
    let appended = tokio::time::timeout(
        Duration::from_secs(60),
        store.append(&b, append_of("e1", shared("2"))),
    )
    .await
    .expect("the append waited for another writer of its shared keys");
    appended.unwrap();
    other.commit().await.unwrap();

    // The other writer drew its versions first, so the append's values stay the newest.
    let expected = serde_json::json!({"app:k": 2, "user:k": 2});
    assert_eq!(state(&store, &a).await, expected);
    assert_eq!(state(&store, &b).await, expected);

    // The next write of the keys deletes every version it supersedes.
    store
        .append(&a, append_of("e2", shared("3")))
        .await
        .unwrap();
    let db = connect(&url).await;
    assert_eq!(rows(&db, "app_state").await, 1);
    assert_eq!(rows(&db, "user_state").await, 1);
    assert_eq!(
        state(&store, &b).await,
        serde_json::json!({"app:k": 3, "user:k": 3})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_version_1_schema_is_migrated_with_its_state() {
    let url = adk_tests::prerequisite::postgres();
    let url = adk_tests::fresh_schema(&url).await;
    let pool = postgres::pool(&url, 1).unwrap();
    postgres::migrate(&pool, "session-svc", &MIGRATIONS[..1])
        .await
        .unwrap();
    pool.get()
        .await
        .unwrap()
        .batch_execute(
            r#"INSERT INTO app_state VALUES ('app', 'j', '1'), ('app', 'k', '"old"');
               INSERT INTO user_state VALUES ('app', 'user', 'k', '"old"');"#,
        )
        .await
        .unwrap();
    drop(pool);

    let store = PgSessionStore::open(&url, 2).await.unwrap();
    let entries = |pairs: &[(&str, &str)]| -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    };
    assert_eq!(
        store.app_state("app").await.unwrap(),
        entries(&[("j", "1"), ("k", "\"old\"")])
    );
    assert_eq!(
        store.user_state("app", "user").await.unwrap(),
        entries(&[("k", "\"old\"")])
    );

    store
        .create(new_session(&key("s"), shared("\"new\"")))
        .await
        .unwrap();
    assert_eq!(
        state(&store, &key("s")).await,
        serde_json::json!({"app:j": 1, "app:k": "new", "user:k": "new"})
    );
    let db = connect(&url).await;
    assert_eq!(rows(&db, "app_state").await, 2);
    assert_eq!(rows(&db, "user_state").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn changes_not_yet_readable_are_not_trimmed() {
    let url = adk_tests::fresh_schema(&adk_tests::prerequisite::postgres()).await;
    let store = PgSessionStore::open(&url, 4).await.unwrap();
    let a = key("a");
    store
        .create(new_session(&a, ScopedDelta::default()))
        .await
        .unwrap();

    // A transaction elsewhere in the cluster, older than the appends, keeps them unreadable.
    let mut other = connect(&url).await;
    let other = other.transaction().await.unwrap();
    other
        .execute("SELECT pg_current_xact_id()", &[])
        .await
        .unwrap();
    let mut positions = Vec::new();
    for id in ["e1", "e2"] {
        let appended = store
            .append(&a, append_of(id, ScopedDelta::default()))
            .await
            .unwrap();
        positions.push(appended.change);
    }

    // However old they are, the trim keeps them, and a reader starting now is not out of range.
    let future = SystemTime::now() + Duration::from_secs(60);
    assert_eq!(store.trim_changes(future.into()).await.unwrap(), 0);
    let waiting = store.changes("app", 0, 10).await.unwrap();
    assert!(waiting.head < positions[0], "{waiting:?}");
    assert!(
        waiting.oldest <= waiting.head + 1,
        "a reader at the head is out of range: {waiting:?}"
    );

    // Once readable (when every older transaction of the cluster has ended: other tests run
    // beside this one), they are delivered, and only then trimmed.
    other.commit().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let delivered = loop {
        let readable = store.changes("app", waiting.head, 10).await.unwrap();
        if !readable.items.is_empty() {
            break readable
                .items
                .iter()
                .map(|c| c.position)
                .collect::<Vec<_>>();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the appends never became readable"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(delivered, positions);
    assert_eq!(store.trim_changes(future.into()).await.unwrap(), 2);
}
