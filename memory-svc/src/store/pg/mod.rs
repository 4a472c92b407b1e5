//! The PostgreSQL store: memories shared by any number of stateless replicas.
//!
//! [`schema`] holds the tables; [`write`] runs a write in one transaction holding its scope's
//! lock, deciding with the shared planner exactly as the sled store does.
//!
//! # Search
//! Postings are kept in blocks with score bounds ([`blocks`]); [`search`] reads only the
//! blocks that can hold results, and ranks them with the same MaxScore code and the same
//! formula, summed in the same order, as the sled store ([`super::maxscore`],
//! [`super::index`]), so both rank alike to the last bit.

mod blocks;
mod schema;
mod search;
#[cfg(test)]
mod tests;
mod write;

use adk_common::{postgres, storage::StorageErrorKind};
use deadpool_postgres::Pool;

use self::schema::{db_int, stored, ENTRY, MIGRATIONS};
use super::{plan::Write, token, Entry, Hit, MemoryStore, Result, Scope, SearchQuery, StoreError};
use crate::analysis::Analyzer;

/// Memory store on a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgMemoryStore {
    pool: Pool,
    analyzer: Analyzer,
}

impl std::fmt::Debug for PgMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemoryStore").finish_non_exhaustive()
    }
}

impl PgMemoryStore {
    /// Connects with at most `max_connections`, brings the schema up to date, and re-indexes
    /// if the index was built by another analysis than `analyzer`.
    pub async fn open(url: &str, max_connections: usize, analyzer: Analyzer) -> Result<Self> {
        let pool = postgres::pool(url, max_connections)?;
        postgres::migrate(&pool, "memory-svc", MIGRATIONS).await?;
        let store = Self { pool, analyzer };
        store.reindex().await?;
        Ok(store)
    }

    /// Indexes every scope again when the index was built by another analysis (as the sled
    /// store does at open; see its `migrate::reindex`). Each scope is one write transaction,
    /// so replicas starting together re-index a scope one after the other, the second finding
    /// nothing to change; the identity is stored once every scope is done.
    async fn reindex(&self) -> Result<()> {
        let identity = self.analyzer.identity();
        let client = self.pool.get().await?;
        let stored: Option<String> = client
            .query_opt("SELECT analysis FROM memory_index", &[])
            .await?
            .map(|row| row.try_get(0))
            .transpose()?;
        if stored.as_deref() == Some(identity.as_str()) {
            return Ok(());
        }
        let scopes = client
            .query("SELECT app_name, user_id FROM memory_scopes", &[])
            .await?;
        drop(client);
        if !scopes.is_empty() {
            let from = stored.as_deref().unwrap_or("none");
            tracing::info!(scopes = scopes.len(), %from, to = %identity, "re-indexing memory");
        }
        for (done, row) in scopes.iter().enumerate() {
            let (app_name, user_id): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            let scope = Scope {
                app_name: &app_name,
                user_id: &user_id,
            };
            let entries = self.write(scope, Write::Reindex).await?;
            metrics::counter!("memory_reindexed_entries_total").increment(u64::from(entries));
            tracing::info!(
                app_name,
                user_id,
                entries,
                progress = format!("{}/{}", done + 1, scopes.len()),
                "re-indexed"
            );
        }
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO memory_index (analysis) VALUES ($1)
                 ON CONFLICT (one) DO UPDATE SET analysis = EXCLUDED.analysis",
                &[&identity],
            )
            .await?;
        Ok(())
    }

    /// Publishes the connection pool's size as gauges (read at each metrics scrape).
    pub fn record_pool(&self) {
        postgres::record_pool(&self.pool, "memory-svc");
    }

    /// Whether the database is reachable, checked every second (see [`postgres::health`]).
    pub fn health(&self) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
        postgres::health(self.pool.clone())
    }
}

impl MemoryStore for PgMemoryStore {
    /// Runs `op` in one transaction holding the scope's lock. A transaction that loses a race
    /// (deadlock, serialization failure) was rolled back by the server, and is run again whole
    /// on a fresh transaction, a bounded number of times; any other failure, a failed COMMIT
    /// included, is returned as it is and never re-run. Should the race go on, the call fails
    /// as a conflict (ABORTED), which the client may retry.
    async fn write(&self, scope: Scope<'_>, op: Write) -> Result<u32> {
        postgres::retry_conflicts(
            || async {
                let mut client = self.pool.get().await?;
                // Dropped without a commit on any error, the transaction is rolled back: no
                // statement runs in a failed transaction.
                let tx = client.transaction().await?;
                let out = write::write(&tx, scope, &op, &self.analyzer).await?;
                tx.commit().await?;
                Ok(out)
            },
            |e: &StoreError| {
                matches!(e, StoreError::Storage(e) if e.kind() == StorageErrorKind::Conflict)
            },
        )
        .await
    }

    async fn search(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<Vec<Hit>> {
        self.ranked(scope, query).await
    }

    async fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Entry>, String)> {
        let after = token::decode(scope, page_token)?.map_or(0, db_int);
        // A page of at least one entry, so paging always makes progress.
        let size = page_size.max(1);
        let client = self.pool.get().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND seq > $3 ORDER BY seq LIMIT $4"
                ),
                &[
                    &scope.app_name,
                    &scope.user_id,
                    &after,
                    &i64::try_from(size.saturating_add(1)).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        let mut page = Vec::with_capacity(rows.len().min(size));
        let mut last = None;
        for row in rows.iter().take(size) {
            let s = stored(row)?;
            last = Some(s.seq);
            page.push(s.entry);
        }
        let next = match last {
            Some(seq) if rows.len() > size => token::encode(scope, seq),
            _ => String::new(),
        };
        Ok((page, next))
    }
}
