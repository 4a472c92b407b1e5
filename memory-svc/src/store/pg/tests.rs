//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (skipped without one).

use super::PgMemoryStore;
use crate::store::contract::memory_store_suite;

async fn open() -> Option<((), PgMemoryStore)> {
    let url = adk_tests::postgres_url()?;
    let url = adk_tests::fresh_schema(&url).await;
    Some(((), PgMemoryStore::open(&url, 8).await.unwrap()))
}

memory_store_suite!(open());
