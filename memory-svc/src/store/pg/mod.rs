//! The PostgreSQL store: memories shared by any number of stateless replicas.
//!
//! [`schema`] holds the tables; [`write`] runs a write in one transaction holding its scope's
//! lock, deciding with the shared planner exactly as the sled store does.
//!
//! # Search
//! Postings are kept in blocks with score bounds ([`blocks`]); [`search`] reads only the
//! blocks that can hold results, and ranks them with the same MaxScore code and the same
//! formula, summed in the same order, as the sled store ([`super::maxscore`],
//! [`super::index`]), so both rank alike to the last bit. The blocks of recently searched
//! terms are kept in memory while the scope's version says no replica has written it since
//! they were read ([`BlockCache`]). A semantic search scores the scope's
//! vectors from memory while the scope's version says no replica has written it since they
//! were read ([`VectorCache`], [`vectors::version`]).

mod blocks;
mod cache;
mod generation;
mod metadata;
mod purges;
mod schema;
mod scopes;
mod search;
mod streams;
#[cfg(test)]
mod tests;
mod vectors;
mod write;

use std::sync::Arc;

use adk_common::{
    postgres,
    storage::{StorageError, StorageErrorKind},
};
use deadpool_postgres::Pool;

use self::{
    cache::BlockCache,
    schema::{db_int, stored, ENTRY, MIGRATIONS},
};
use super::{
    index,
    plan::{self, Write},
    token,
    vector_cache::{self, VectorCache},
    vectors::{check_model, rank, ModelCheck},
    Appended, Buffered, DeleteTarget, Entry, Expired, Hit, JobRecord, MemoryStore, PurgeRecord,
    Result, Revision, RevisionRecord, Scope, SearchQuery, StoreError, StreamKey, Unembedded,
    Vectors,
};
use crate::{analysis::Analyzer, embed::Identity, filter::Filter};

pub use self::cache::DEFAULT_BYTES as DEFAULT_POSTING_CACHE_BYTES;

/// A scope's version, from its `memory_scopes` row: the id of the transaction that last wrote
/// the row (`xmin`, read as text), and its next seq in case transaction ids wrapped around.
/// Every transaction that changes a scope's entries, blocks or vectors holds the scope's lock,
/// taken by rewriting that row ([`scopes::lock`]), so a version names one state of the scope;
/// a rolled-back transaction leaves the committed version as it was. `also` is hashed in (what
/// else a cached copy depends on).
fn scope_version(xmin: &str, next_seq: i64, also: impl std::hash::Hash) -> u64 {
    use std::hash::{Hash, Hasher};
    // A fixed-key hash: versions are compared within this process only.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (xmin, next_seq, also).hash(&mut hasher);
    hasher.finish()
}

/// Candidates fetched at a time while filtering nearest-vector results.
const FETCH: usize = 64;

/// Memory store on a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgMemoryStore {
    pool: Pool,
    analyzer: Analyzer,
    /// Searched scopes' vectors, decoded, each under the version it was read at.
    vector_cache: Arc<VectorCache>,
    /// Searched terms' posting blocks, decoded, each under the version it was read at.
    block_cache: Arc<BlockCache>,
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
        postgres::migrate_converting(&pool, "memory-svc", MIGRATIONS, schema::convert).await?;
        let store = Self {
            pool,
            analyzer,
            vector_cache: Arc::new(VectorCache::new(vector_cache::DEFAULT_BYTES)),
            block_cache: Arc::new(BlockCache::new(cache::DEFAULT_BYTES)),
        };
        store.reindex().await?;
        Ok(store)
    }

    /// The same, keeping up to `bytes` of searched scopes' vectors in memory
    /// (`--vector-cache-bytes`; see [`VectorCache`] for how they stay current).
    pub fn with_vector_cache(self, bytes: usize) -> Self {
        Self {
            vector_cache: Arc::new(VectorCache::new(bytes)),
            ..self
        }
    }

    /// The same, keeping up to `bytes` of searched terms' posting blocks in memory
    /// (`--posting-cache-bytes`; see [`BlockCache`] for how they stay current).
    pub fn with_posting_cache(self, bytes: usize) -> Self {
        Self {
            block_cache: Arc::new(BlockCache::new(bytes)),
            ..self
        }
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
    async fn write_changed(
        &self,
        scope: Scope<'_>,
        op: Write,
        vectors: Vectors,
        revisions: Vec<RevisionRecord>,
    ) -> Result<u32> {
        // The texts are analysed before the scope is locked, once for every attempt, on the
        // blocking pool (a batch of a thousand turns is ~100 ms of CPU).
        let analyzer = self.analyzer;
        let (op, analysis) = tokio::task::spawn_blocking(move || {
            let analysis = plan::prepared(&op, analyzer, &[]);
            (op, analysis)
        })
        .await
        .map_err(|e| StorageError::new(StorageErrorKind::Internal, format!("analysis: {e}")))?;
        // Attempts run one after another: each has it to itself.
        let analysis = tokio::sync::Mutex::new(analysis);
        let delete_all = matches!(op, Write::Delete(DeleteTarget::All));
        let job = super::generation::job_of(&revisions);
        let key = vectors::cache_key(scope);
        postgres::retry_conflicts(
            || async {
                let mut client = self.pool.get().await?;
                // Dropped without a commit on any error, the transaction is rolled back: no
                // statement runs in a failed transaction.
                let tx = client.transaction().await?;
                if delete_all {
                    generation::end_jobs(&tx, scope).await?;
                }
                if let Some(id) = job {
                    generation::lock_open_job(&tx, id).await?;
                }
                // Where this replica keeps the scope's vectors, the write changes them as it
                // commits, from the version it locked to the one it leaves (see
                // `VectorCache::apply_at`); else the next search would read them all again.
                let before = match self.vector_cache.holds(&key) {
                    true => vectors::locked_version(&tx, scope).await?,
                    false => None,
                };
                let mut analysis = analysis.lock().await;
                let (count, edits) = write::write(&tx, scope, &op, &vectors, &mut analysis).await?;
                for revision in &revisions {
                    generation::revise(&tx, scope, revision).await?;
                }
                let change = match (before, edits) {
                    (Some(from), Some(edits)) => vectors::version(&tx, scope)
                        .await?
                        .map(|to| (from, to, edits)),
                    _ => None,
                };
                tx.commit().await?;
                if let Some((from, to, edits)) = change {
                    self.vector_cache.apply_at(&key, from, to, &edits);
                }
                Ok(count)
            },
            |e: &StoreError| {
                matches!(e, StoreError::Storage(e) if e.kind() == StorageErrorKind::Conflict)
            },
        )
        .await
    }

    /// Unless the query filters by author, time or kind, postings alone are ranked and the
    /// entries read for the results only ([`SearchQuery::unfiltered`]).
    async fn search(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<Vec<Hit>> {
        if !query.filters() {
            let hits = self.ranked(scope, query, false).await?;
            if let Some(hits) = query.unfiltered(hits.into_iter().map(|hit| Ok(Some(hit))))? {
                return Ok(hits);
            }
        }
        self.ranked(scope, query, true).await
    }

    fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    async fn indexed(&self, scope: Scope<'_>, terms: &[String]) -> Result<Vec<bool>> {
        let client = self.pool.get().await?;
        // A term in some entry has a block with postings (one probe of the primary key each).
        let statement = client
            .prepare_cached(
                "SELECT EXISTS (
                     SELECT 1 FROM memory_blocks
                     WHERE app_name = $1 AND user_id = $2 AND term = q.term AND postings > 0
                 )
                 FROM unnest($3::text[]) WITH ORDINALITY AS q(term, n) ORDER BY q.n",
            )
            .await?;
        let rows = client
            .query(&statement, &[&scope.app_name, &scope.user_id, &terms])
            .await?;
        rows.iter().map(|row| Ok(row.try_get(0)?)).collect()
    }

    async fn nearest(
        &self,
        scope: Scope<'_>,
        vector: &[f32],
        query: &SearchQuery,
    ) -> Result<Vec<Hit>> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let client = self.pool.get().await?;
        // A scope never written has no vectors.
        let Some(version) = vectors::version(&client, scope).await? else {
            return Ok(Vec::new());
        };
        let key = vectors::cache_key(scope);
        let ranked = match self.vector_cache.get(&key, version) {
            Ok(matrix) => matrix.rank(vector)?,
            Err(reading) => {
                let rows = client
                    .query(
                        "SELECT seq, vector FROM memory_vectors
                         WHERE app_name = $1 AND user_id = $2",
                        &[&scope.app_name, &scope.user_id],
                    )
                    .await?;
                let (ranked, matrix) = rank(
                    rows.iter().map(|row| {
                        let seq: i64 = row.try_get(0)?;
                        let vector: &[u8] = row.try_get(1)?;
                        Ok((u64::try_from(seq).unwrap_or(0), vector))
                    }),
                    vector,
                    self.vector_cache.capacity(),
                )?;
                if let Some(matrix) = matrix {
                    self.vector_cache.keep(&key, reading, version, matrix);
                }
                ranked
            }
        };
        let candidates = metadata::candidates(&client, scope, &query.filter).await?;
        let hidden = search::hidden(&client, scope, query).await?;
        let mut ranked = ranked.filter(|n| {
            !hidden.contains(&n.seq) && candidates.as_ref().is_none_or(|c| c.contains(&n.seq))
        });
        let mut hits = Vec::new();
        loop {
            let chunk: Vec<_> = ranked.by_ref().take(FETCH).collect();
            if chunk.is_empty() {
                return Ok(hits);
            }
            let seqs: Vec<i64> = chunk.iter().map(|n| db_int(n.seq)).collect();
            let mut fetched = search::entries(&client, scope, &seqs).await?;
            for n in chunk {
                // Removed since its vector was read: no longer there.
                let Some(entry) = fetched.remove(&db_int(n.seq)) else {
                    continue;
                };
                if query.admits(&entry) {
                    hits.push(Hit {
                        entry,
                        score: f64::from(n.score),
                    });
                    if hits.len() == query.limit {
                        return Ok(hits);
                    }
                }
            }
        }
    }

    async fn use_model(&self, model: &Identity) -> Result<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        // One replica at a time decides, so two starting together do not both clear.
        tx.execute("LOCK TABLE memory_vector_model IN EXCLUSIVE MODE", &[])
            .await?;
        let row = tx
            .query_opt(
                "SELECT model, dimension, fingerprint FROM memory_vector_model",
                &[],
            )
            .await?;
        let stored = match &row {
            Some(row) => {
                let dimension: i32 = row.try_get(1)?;
                Some((
                    row.try_get::<_, String>(0)?,
                    usize::try_from(dimension).unwrap_or(0),
                    row.try_get::<_, String>(2)?,
                ))
            }
            None => None,
        };
        let check = check_model(
            stored
                .as_ref()
                .map(|(m, d, f)| (m.as_str(), *d, f.as_str())),
            model,
        )
        .map_err(StoreError::Model)?;
        if check == ModelCheck::Changed {
            self.vector_cache.clear();
            tx.execute("DELETE FROM memory_vectors", &[]).await?;
            tx.execute(
                "INSERT INTO memory_vector_model (model, dimension, fingerprint)
                 VALUES ($1, $2, $3)
                 ON CONFLICT (one) DO UPDATE SET model = EXCLUDED.model,
                   dimension = EXCLUDED.dimension, fingerprint = EXCLUDED.fingerprint",
                &[
                    &model.model,
                    &i32::try_from(model.dimension).unwrap_or(i32::MAX),
                    &model.fingerprint,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn unembedded(&self, after: Option<&Unembedded>, n: usize) -> Result<Vec<Unembedded>> {
        let (app, user, seq) = match after {
            Some(u) => (u.app_name.as_str(), u.user_id.as_str(), db_int(u.seq)),
            None => ("", "", -1),
        };
        let client = self.pool.get().await?;
        let mut out = Vec::new();
        let (mut app, mut user, mut seq) = (app.to_owned(), user.to_owned(), seq);
        // Entries without text are skipped, so a page may hold fewer than `n`: read on.
        while out.len() < n {
            let rows = client
                .query(
                    "SELECT e.app_name, e.user_id, e.seq, e.content FROM memory_entries e
                     WHERE (e.app_name, e.user_id, e.seq) > ($1, $2, $3)
                       AND NOT EXISTS (SELECT 1 FROM memory_vectors v
                                       WHERE v.app_name = e.app_name AND v.user_id = e.user_id
                                         AND v.seq = e.seq)
                     ORDER BY e.app_name, e.user_id, e.seq LIMIT $4",
                    &[&app, &user, &seq, &db_int(n as u64)],
                )
                .await?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                (app, user, seq) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                let content: &[u8] = row.try_get(3)?;
                let content = <adk_proto::session::v1::Content as prost::Message>::decode(content)
                    .map_err(|e| StoreError::corrupt(format!("memory content: {e}")))?;
                let text = index::text_of(&content);
                if !text.trim().is_empty() && out.len() < n {
                    out.push(Unembedded {
                        app_name: app.clone(),
                        user_id: user.clone(),
                        seq: u64::try_from(seq).unwrap_or(0),
                        text,
                    });
                }
            }
        }
        Ok(out)
    }

    async fn put_vectors(&self, vectors: Vec<(Unembedded, Vec<f32>)>) -> Result<usize> {
        let mut by_scope: std::collections::BTreeMap<(String, String), Vec<_>> = Default::default();
        for (u, v) in vectors {
            by_scope
                .entry((u.app_name.clone(), u.user_id.clone()))
                .or_default()
                .push((u, v));
        }
        let mut stored = 0;
        for ((app_name, user_id), vectors) in by_scope {
            let scope = Scope {
                app_name: &app_name,
                user_id: &user_id,
            };
            let mut client = self.pool.get().await?;
            let tx = client.transaction().await?;
            stored += vectors::put(&tx, scope, &vectors).await?;
            tx.commit().await?;
        }
        Ok(stored)
    }

    async fn enqueue(&self, job: &JobRecord) -> Result<()> {
        self.enqueue_now(job).await
    }

    async fn claim(
        &self,
        id: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<JobRecord>> {
        self.claim_now(id, now_ms, lease_ms).await
    }

    async fn finish(&self, job: &JobRecord) -> Result<bool> {
        self.finish_now(job).await
    }

    async fn job(&self, scope: Scope<'_>, id: &str) -> Result<Option<JobRecord>> {
        self.job_now(scope, id).await
    }

    async fn revisions(
        &self,
        scope: Scope<'_>,
        memory_id: Option<&str>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Revision>, String)> {
        self.revisions_now(scope, memory_id, page_size, page_token)
            .await
    }

    async fn revision(&self, scope: Scope<'_>, seq: u64) -> Result<Option<Revision>> {
        self.revision_now(scope, seq).await
    }

    async fn prune_revisions(&self, before_ms: i64, n: usize) -> Result<usize> {
        self.prune_revisions_now(before_ms, n).await
    }

    async fn expired(&self, now_ms: i64, n: usize) -> Result<Vec<Expired>> {
        self.expired_now(now_ms, n).await
    }

    async fn prune_jobs(&self, before_ms: i64, n: usize) -> Result<usize> {
        self.prune_jobs_now(before_ms, n).await
    }

    async fn put_purge(&self, purge: &PurgeRecord) -> Result<()> {
        self.put_purge_now(purge).await
    }

    async fn purges(&self) -> Result<Vec<PurgeRecord>> {
        self.purges_now().await
    }

    async fn remove_purge(&self, id: &str) -> Result<()> {
        self.remove_purge_now(id).await
    }

    async fn users(&self, app: &str) -> Result<Vec<String>> {
        self.users_now(app).await
    }

    async fn append_stream(
        &self,
        stream: StreamKey<'_>,
        events: Vec<adk_proto::session::v1::Event>,
        now_ms: i64,
        trigger: usize,
        job: JobRecord,
    ) -> Result<Appended> {
        self.append_stream_now(stream, events, now_ms, trigger, job)
            .await
    }

    async fn flush_stream(
        &self,
        stream: StreamKey<'_>,
        job: JobRecord,
        quiet_since: Option<i64>,
    ) -> Result<Option<JobRecord>> {
        self.flush_stream_now(stream, job, quiet_since).await
    }

    async fn buffered_streams(&self) -> Result<Vec<Buffered>> {
        self.buffered_streams_now().await
    }

    async fn scope_streams(&self, scope: Scope<'_>) -> Result<Vec<Buffered>> {
        self.scope_streams_now(scope).await
    }

    async fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
        filter: &Filter,
    ) -> Result<(Vec<Entry>, String)> {
        let after = token::decode(scope, page_token)?.map_or(0, db_int);
        // A page of at least one entry, so paging always makes progress.
        let size = page_size.max(1);
        let client = self.pool.get().await?;
        if let Some(candidates) = metadata::candidates(&client, scope, filter).await? {
            let seqs: Vec<i64> = candidates
                .into_iter()
                .map(db_int)
                .filter(|&seq| seq > after)
                .take(size.saturating_add(1))
                .collect();
            let mut found = search::entries(&client, scope, &seqs[..seqs.len().min(size)]).await?;
            let page = seqs
                .iter()
                .take(size)
                .filter_map(|seq| found.remove(seq))
                .collect();
            let next = match seqs.get(size.wrapping_sub(1)) {
                Some(&seq) if seqs.len() > size => token::encode(scope, seq as u64),
                _ => String::new(),
            };
            return Ok((page, next));
        }
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
