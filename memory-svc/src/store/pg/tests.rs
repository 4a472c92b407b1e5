//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (skipped without one), and how writes meet other transactions.

use tokio_postgres::NoTls;

use super::PgMemoryStore;
use crate::store::contract::{
    add, delete, entries, listed, memorize, memory_id, memory_store_suite, SCOPE,
};

/// A fresh schema's connection string, or `None` without a test database.
async fn fresh_url() -> Option<String> {
    let url = adk_tests::postgres_url()?;
    Some(adk_tests::fresh_schema(&url).await)
}

async fn open() -> Option<((), PgMemoryStore)> {
    let url = fresh_url().await?;
    Some(((), PgMemoryStore::open(&url, 8).await.unwrap()))
}

memory_store_suite!(open());

/// A write chosen as a deadlock's victim is rolled back and run again whole, and succeeds.
/// Another transaction inserts the tombstone a delete is about to write, so the delete (holding
/// its scope's lock) waits for it; that transaction then asks for the scope's lock. The delete
/// has waited longer, so its deadlock check fires first and it is the one aborted (40P01).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_loses_a_deadlock_runs_again() {
    let Some(url) = fresh_url().await else {
        return;
    };
    let store = PgMemoryStore::open(&url, 4).await.unwrap();
    memorize(&store, entries(&[("a", "alpha")])).await;

    let (other, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    other
        .batch_execute(
            "BEGIN; INSERT INTO memory_tombstones (app_name, user_id, id) VALUES ('app', 'user', 'a')",
        )
        .await
        .unwrap();
    let deleting = {
        let store = store.clone();
        tokio::spawn(async move { delete(&store, memory_id("a")).await })
    };
    // Until the delete waits for this transaction.
    loop {
        let waiting: i64 = other
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    // Waits for the delete's scope lock until the delete is aborted.
    other
        .execute(
            "UPDATE memory_scopes SET docs = docs WHERE app_name = 'app' AND user_id = 'user'",
            &[],
        )
        .await
        .unwrap();
    other.batch_execute("ROLLBACK").await.unwrap();

    assert_eq!(deleting.await.unwrap(), 1);
    assert!(listed(&store, SCOPE).await.is_empty());
    assert_eq!(add(&store, "s", entries(&[("a", "alpha")])).await, 0);
}
