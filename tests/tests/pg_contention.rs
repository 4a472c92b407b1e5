//! Concurrent writers on PostgreSQL that share `app:` and `user:` state rows: every append
//! succeeds, the database detects no deadlock (each one would have stalled its appends for
//! `deadlock_timeout`, 1 s by default, before failing one of them), and the state ends exactly
//! as the last writes left it.
//!
//! The wait is checked through the database's own deadlock counter rather than a clock: an
//! append's time depends on the disk and the machine's load (latency is measured by `bench/`,
//! see BENCHMARKS.md; that a writer of shared keys waits for no other is checked in the store's
//! own tests).
//!
//! Needs PostgreSQL (`ADK_TEST_POSTGRES`): ignored unless asked for (`adk_tests::prerequisite`).

use adk_common::postgres::StoreLocation;
use adk_tests::{append_request, delta_event, fresh_schema, json, SessionServer};
use serde_json::json;

const WRITERS: usize = 16;
const APPENDS: usize = 25;

/// Deadlocks the database has detected so far (all schemas of the test database).
async fn deadlocks(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
        &[],
    )
    .await
    .expect("reads pg_stat_database")
    .get(0)
}

/// Ends the connections of `application` and waits until their backends have exited: a
/// backend publishes its statistics (the deadlock counter among them) at the latest when it
/// exits. (A role may end its own connections.)
async fn end_backends(db: &tokio_postgres::Client, application: &str) {
    // `false` for a backend that exited on its own meanwhile; the count below checks them all.
    db.execute(
        "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity
         WHERE application_name = $1",
        &[&application],
    )
    .await
    .expect("ends the server's connections");
    let left: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&application],
        )
        .await
        .expect("reads pg_stat_activity")
        .get(0);
    assert_eq!(left, 0, "connections of the stopped server are still open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn sixteen_writers_sharing_app_and_user_keys_never_deadlock() {
    let url = adk_tests::prerequisite::postgres();
    let application = format!("adk_contention_{}", std::process::id());
    let store = format!(
        "{}&application_name={application}",
        fresh_schema(&url).await
    );
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects to the test database");
    tokio::spawn(connection);
    let before = deadlocks(&db).await;

    let server = SessionServer::start_with(|config| {
        config.store = Some(StoreLocation::Postgres(store));
        config.serve.pg_max_connections = WRITERS;
    })
    .await;
    for w in 0..WRITERS {
        server
            .create("app", "user", &format!("s{w}"), json!({}))
            .await;
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut client = server.client.clone();
            tokio::spawn(async move {
                for i in 0..APPENDS {
                    // Shared keys in both scopes, on both sides of the writer's own key, so the
                    // rows are taken in an order only a global rule can make the same.
                    let event = delta_event(json!({
                        "turn": i,
                        "user:a": i, "user:m": i, "user:z": i, format!("user:w{w}"): i,
                        "app:a": i, "app:m": i, "app:z": i, format!("app:w{w}"): i,
                    }));
                    let appended = client
                        .append_event(append_request("app", "user", &format!("s{w}"), event))
                        .await;
                    if let Err(status) = appended {
                        panic!("writer {w}, append {i}: {status:?}");
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("writer finishes");
    }

    // Each writer's last append is the last write of its keys, and the newest version of a
    // shared key was written by some writer's last append (each writer's appends come one
    // after another, so its last one wins over its earlier ones): every shared key ends at the
    // last turn too.
    let last = APPENDS - 1;
    let mut expected = serde_json::Map::new();
    expected.insert("turn".into(), json!(last));
    for key in ["a", "m", "z"] {
        expected.insert(format!("app:{key}"), json!(last));
        expected.insert(format!("user:{key}"), json!(last));
    }
    for w in 0..WRITERS {
        expected.insert(format!("app:w{w}"), json!(last));
        expected.insert(format!("user:w{w}"), json!(last));
    }
    for w in 0..WRITERS {
        let session = server.get("app", "user", &format!("s{w}")).await;
        assert_eq!(session.last_sequence, APPENDS as u64, "session s{w}");
        assert_eq!(session.events.len(), APPENDS, "session s{w}");
        assert_eq!(
            json(&session.state),
            serde_json::Value::Object(expected.clone()),
            "session s{w}"
        );
    }

    server.shutdown().await;
    end_backends(&db, &application).await;
    assert_eq!(
        deadlocks(&db).await,
        before,
        "the database detected deadlocks during the run"
    );
}
