//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (skipped without one), and how writes meet other transactions.

use tokio_postgres::NoTls;

use super::PgMemoryStore;
use crate::analysis::Analyzer;
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
    Some((
        (),
        PgMemoryStore::open(&url, 8, Analyzer::default())
            .await
            .unwrap(),
    ))
}

memory_store_suite!(open());

/// A write chosen as a deadlock's victim is rolled back and run again whole, and succeeds.
/// Which of two real transactions PostgreSQL picks as a deadlock's victim depends on which of
/// their deadlock timers fires first, so the abort is injected instead: a trigger fails the
/// delete's tombstone insert once with SQLSTATE 40P01, in the middle of its transaction, as
/// the deadlock detector would.
#[tokio::test]
async fn a_write_that_loses_a_deadlock_runs_again() {
    let Some(url) = fresh_url().await else {
        return;
    };
    let store = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    memorize(&store, entries(&[("a", "alpha")])).await;

    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE SEQUENCE attempts;
             CREATE FUNCTION lose_a_deadlock() RETURNS trigger AS $$
             BEGIN
                 IF nextval('attempts') = 1 THEN
                     RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
                 END IF;
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER lose_a_deadlock BEFORE INSERT ON memory_tombstones
                 FOR EACH ROW EXECUTE FUNCTION lose_a_deadlock();",
        )
        .await
        .unwrap();

    assert_eq!(delete(&store, memory_id("a")).await, 1);
    // Sequences ignore rollbacks: the first attempt failed, the second went through.
    let attempts: i64 = client
        .query_one("SELECT last_value FROM attempts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 2);
    assert!(listed(&store, SCOPE).await.is_empty());
    assert_eq!(add(&store, "s", entries(&[("a", "alpha")])).await, 0);
}
