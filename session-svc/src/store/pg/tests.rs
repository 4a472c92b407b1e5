//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (skipped without one).

use super::{super::contract::session_store_suite, PgStore};

async fn open() -> Option<((), PgStore)> {
    let url = adk_tests::postgres_url()?;
    let url = adk_tests::fresh_schema(&url).await;
    Some(((), PgStore::open(&url, 8).await.unwrap()))
}

session_store_suite!(open());
