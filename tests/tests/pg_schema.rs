//! Replicas and schema versions on PostgreSQL: replicas of both services starting at the same
//! instant on an empty schema migrate it exactly once, and a replica of an older release
//! refuses a schema a newer one migrated, naming both versions. And the suites' own schemas:
//! those earlier runs left are swept, those of a run still going kept.
//!
//! Needs PostgreSQL (`ADK_TEST_POSTGRES`): ignored unless asked for (`adk_tests::prerequisite`).

use adk_common::postgres::StoreLocation;
use adk_tests::{fresh_schema, sweep_schemas, MemoryServer, SessionServer};
use serde_json::json;
use tempfile::TempDir;

const REPLICAS: usize = 6;

/// The `schema_versions` rows of the schema `url` uses, by component.
async fn versions(url: &str) -> Vec<(String, i32)> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT component, version FROM schema_versions ORDER BY component",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

async fn set_version(url: &str, component: &str, version: i32) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let updated = client
        .execute(
            "UPDATE schema_versions SET version = $2 WHERE component = $1",
            &[&component, &version],
        )
        .await
        .unwrap();
    assert_eq!(updated, 1);
    drop(client);
    let _ = driver.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn replicas_starting_together_on_an_empty_schema_migrate_it_once() {
    let url = adk_tests::prerequisite::postgres();
    let schema = fresh_schema(&url).await;
    let store = StoreLocation::Postgres(schema.clone());
    // Every replica of both services is started before any has opened its store. The steps
    // create tables without IF NOT EXISTS: a step run twice would fail that replica's start.
    let sessions: Vec<_> = (0..REPLICAS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(SessionServer::start_with(move |c| c.store = Some(store)))
        })
        .collect();
    let memories: Vec<_> = (0..REPLICAS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                MemoryServer::start_with("http://127.0.0.1:9", |c| c.store = Some(store)).await
            })
        })
        .collect();
    let mut sessions = futures::future::join_all(sessions).await;
    let memories = futures::future::join_all(memories).await;
    let first = sessions.remove(0).expect("every session replica starts");
    first.create("app", "u", "s", json!({"k": 1})).await;
    for other in sessions {
        let other = other.expect("every session replica starts");
        assert_eq!(other.get("app", "u", "s").await.state, r#"{"k":1}"#);
        other.shutdown().await;
    }
    for memory in memories {
        memory
            .expect("every memory replica starts")
            .shutdown()
            .await;
    }
    first.shutdown().await;
    let stored = versions(&schema).await;
    let components: Vec<&str> = stored.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(components, ["memory-svc", "session-svc"]);
    assert!(stored.iter().all(|(_, v)| *v >= 1), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_replica_refuses_a_schema_migrated_by_a_newer_release() {
    let url = adk_tests::prerequisite::postgres();
    let schema = fresh_schema(&url).await;
    let store = StoreLocation::Postgres(schema.clone());
    let session = SessionServer::start_with(|c| c.store = Some(store.clone())).await;
    MemoryServer::start_with(&format!("http://{}", session.addr), |c| {
        c.store = Some(store.clone())
    })
    .await
    .shutdown()
    .await;
    session.shutdown().await;

    for (component, known) in versions(&schema).await {
        // What a newer release would leave behind.
        set_version(&schema, &component, known + 1).await;
        let dir = TempDir::new().unwrap();
        let refused = match component.as_str() {
            "session-svc" => {
                let mut config = session_svc::config::Config::ephemeral(dir.path().to_owned());
                config.store = Some(store.clone());
                session_svc::server::start(config).await.err()
            }
            _ => {
                let mut config = memory_svc::config::Config::ephemeral(
                    dir.path().to_owned(),
                    "http://127.0.0.1:9".into(),
                );
                config.store = Some(store.clone());
                memory_svc::server::start(config).await.err()
            }
        }
        .unwrap_or_else(|| panic!("{component} starts on a newer schema"))
        .to_string();
        let expected = format!(
            "the {component} database schema is at version {}, written by a newer release; \
             this binary knows versions up to {known}",
            known + 1
        );
        assert!(refused.contains(&expected), "{refused}");
        // Nothing was changed.
        assert!(versions(&schema)
            .await
            .contains(&(component.clone(), known + 1)));
    }
}

/// Runs `sql` on the database at `url`.
async fn run(url: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

/// Whether the database at `url` has a schema named `name`.
async fn has_schema(url: &str, name: &str) -> bool {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let found = client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
        .await
        .unwrap()
        .is_some();
    drop(client);
    let _ = driver.await;
    found
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn the_schemas_of_earlier_runs_are_swept_and_a_running_ones_kept() {
    let url = adk_tests::prerequisite::postgres();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    // Named as the suites name theirs: a process id, a counter, the microseconds made at.
    let day_old = format!("t1_0_{}", now - 24 * 3600 * 1_000_000);
    let minute_old = format!("t1_1_{}", now - 60 * 1_000_000);
    for schema in [&day_old, &minute_old] {
        run(
            &url,
            &format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.t (x int)"),
        )
        .await;
    }

    sweep_schemas(&url).await;
    assert!(!has_schema(&url, &day_old).await, "{day_old} was swept");
    assert!(has_schema(&url, &minute_old).await, "{minute_old} was kept");

    // Made by a fresh_schema of this run: kept too.
    let fresh = fresh_schema(&url).await;
    let name = fresh.rsplit("%3D").next().unwrap().to_owned();
    sweep_schemas(&url).await;
    assert!(has_schema(&url, &name).await, "{name} was kept");
    for schema in [minute_old, name] {
        run(&url, &format!("DROP SCHEMA {schema} CASCADE")).await;
    }
}
