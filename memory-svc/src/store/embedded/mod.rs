//! The embedded store: memory entries and their inverted index in a redb file (through
//! [`adk_common::kv`], named trees of byte keys), converted at open from the sled database of
//! earlier releases ([`from_sled`]).
//!
//! # Layout
//! Every key starts with the (app, user) as [`Key`] components, so no two scopes alias and a
//! prefix scan never leaves one user's memory. `seq` is the entry's ingestion sequence number:
//! per (app, user), increasing, never reused.
//!
//! | tree         | key                       | value                                   |
//! |--------------|---------------------------|-----------------------------------------|
//! | `entries`    | app, user, seq            | `EntryRecord` (protobuf)                |
//! | `buckets`    | app, user, session, id    | seq (u64 big-endian)                    |
//! | `turns`      | app, user, session, seq   | (empty): a session's entries in order   |
//! | `ids`        | app, user, id, seq        | (empty): finds an id in every session   |
//! | `blocks`     | app, user, term, seq      | a block of postings from seq on         |
//! | `df`         | app, user, term           | document frequency, merge state (below) |
//! | `journal`    | app, user, generation     | `JournalRecord`: postings to merge      |
//! | `tombstones` | app, user, id             | (empty): deleted ids, not re-ingested   |
//! | `stats`      | app, user                 | `Stats` (protobuf)                      |
//! | `vectors`    | app, user, seq            | the entry's vector (see [`vectors`])    |
//! | `revisions`  | app, user, revision seq   | `RevisionRecord` (protobuf)             |
//! | `expiries`   | app, user, memory id      | its expiry, ms (i64 big-endian)         |
//! | `metadata`   | app, user, key, value, seq| seq: entries by metadata value (below)  |
//! | `closed`     | app, user, seq            | `invalid_at` of an entry no longer valid|
//! | `jobs`       | job id                    | `JobRecord` (protobuf)                  |
//! | `job_queue`  | due ms, job id            | (empty): the open jobs, due first       |
//! | `jobs_done`  | end ms, job id            | (empty): the finished jobs, oldest first|
//! | `purges`     | purge id                  | `PurgeRecord`: a purge not yet finished |
//! | `streams`    | app, user, stream         | `StreamRecord`: a stream's buffered ids |
//! | `stream_events` | app, user, stream, event id | `StreamEventRecord` (see [`streams`]) |
//!
//! The `postings` module describes the blocks and the df values (the document frequency, how
//! many blocks were appended since the last merge of the term's blocks, the last journal
//! record merged into them, and the postings themselves of a term that has few: one key
//! instead of two for most terms of a user). A term's document frequency is kept
//! beside its postings, in the same transactions, so a search knows every term's idf before
//! reading any posting. A write puts its posting changes in the `journal` and in memory, and a
//! background merge moves them into the blocks once many wait (see [`journal`]); a search reads
//! those still waiting beside the blocks (see [`pending`]).
//!
//! # Search
//! BM25 over the scope's statistics, with MaxScore dynamic pruning: every posting of a term
//! scores at most `idf × (k1 + 1)`, or its ceiling's score when all its postings still wait for
//! a merge (see `store/maxscore.rs`). The query's terms are ordered by that bound; once the
//! current `limit`-th best score is above the summed bounds of the lowest terms, an entry
//! holding only those terms cannot make it into the results, so only the postings of the other
//! ("essential") terms are scanned, in seq order, and the lowest terms' postings are looked up
//! for the candidates whose score could still rise above that score (the blocks between are
//! not read). A query of common words thus scans the postings of its rarest word and reads
//! the others' only where they may count. The result is exactly that of scoring every
//! posting: scores are summed in query-term order as the exhaustive sum would be, bounds carry
//! a margin for rounding, filters are checked before an entry counts towards the `limit`-th
//! score, and an entry tying with it loses, as a later one in ingestion order.
//!
//! # Format changes
//! Before the `blocks` and `df` trees, postings were one key each in a `postings` tree, with
//! no stored document frequency. [`EmbeddedMemoryStore::open`] converts such a database (see
//! [`migrate`]) before serving it. The `index` tree holds the identity of the analysis the index
//! was built with (`analysis`); when it is not the store's, every scope is re-indexed at open
//! (see [`migrate::reindex`]). Before format 4, an entry's kind and expiry were read from its
//! metadata: [`migrate::convert_kinds`] stores them in the records of a format-3 database.
//!
//! The `metadata` tree indexes every top-level key of an entry's metadata by its value (see
//! [`metadata`] and [`crate::store::metadata`]), so a filtered search or listing reads only
//! the entries the filter may admit. Every write keeps it in step with the entries; a store of
//! format 5 has it built at open ([`migrate::build_metadata`]).
//!
//! An entry's record holds its kind and expiry; the `expiries` tree indexes the expiries for
//! the sweep, and every write keeps it in step with the entries it removes and inserts.
//!
//! An entry's record holds its validity (see [`crate::validity`]); the `closed` tree indexes
//! the entries whose validity is closed (superseded facts), kept in step by every write, so a
//! search reads the scope's few closed entries and leaves out the superseded ones before
//! ranking. A store of format 6 has every entry's `valid_from` set from its timestamp at open
//! ([`migrate::convert_validity`]).
//!
//! # Writes
//! The shared planner decides what a write changes; [`write`] loads what it reads and commits
//! its edits as one transaction over all trees (its postings as one journal record), and a
//! group-commit flush then makes it durable before the caller hears of it.
//!
//! # Threads
//! Database calls block (reads may go to disk, a commit waits for the one writer before it), and
//! ingesting a batch of entries takes milliseconds of CPU. So every call's database work runs on
//! tokio's blocking pool, never on the workers that answer other RPCs (health probes,
//! searches); an async method only waits for it. Searches too: run in place on the worker
//! (`block_in_place`), short ones took a fifth less time, but at 100,000 entries with the
//! benchmark's concurrent searches common words took 11-22 % more, the worker's tasks moving to
//! another thread at every search.

mod from_sled;
mod generation;
mod journal;
mod metadata;
mod migrate;
mod pending;
mod postings;
mod purges;
mod records;
mod streams;
#[cfg(test)]
mod tests;
mod vectors;
mod write;

use std::{
    collections::{BTreeSet, HashSet},
    hash::{Hash, Hasher},
    ops::Bound,
    path::Path,
    sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use adk_common::{
    durability::{GroupCommit, SyncMode},
    keys::{prefix_end, Key},
    kv::Tree,
    snapshot::SnapshotError,
    snapshot::Snapshotter,
    snapshot::WriteGate,
    storage::{StorageError, StorageErrorKind},
};
use metrics::gauge;
use tokio_util::task::TaskTracker;

use self::{
    pending::Overlay,
    postings::StoredTerm,
    records::{decode, scope_key, EntryRecord, Stats},
};
use super::{
    index,
    maxscore::{self, Among, Ranked, TermList},
    plan::Write,
    token,
    vector_cache::{self, VectorCache},
    Appended, Buffered, DeleteTarget, Entry, Expired, Hit, JobRecord, MemoryStore, PurgeRecord,
    Result, Revision, RevisionRecord, Scope, SearchQuery, StreamKey, Unembedded, Vectors,
};
use crate::analysis::Analyzer;
use crate::budget::{self, MemoryBudget, Part, Room};
use crate::embed::Identity;
use crate::filter::Filter;

/// The page cache of a store opened by [`EmbeddedMemoryStore::open`] (tests and tools; the
/// server sizes it from its memory budget).
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// Memory store on an embedded database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EmbeddedMemoryStore {
    db: adk_common::kv::Db,
    entries: Tree,
    buckets: Tree,
    turns: Tree,
    ids: Tree,
    blocks: Tree,
    df: Tree,
    /// Posting changes not yet in `blocks` and `df` (see [`journal`]).
    journal: Tree,
    /// The same changes, by term, as searches read them.
    pending: Arc<pending::Pending>,
    tombstones: Tree,
    stats: Tree,
    vectors: Tree,
    vector_model: Tree,
    revisions: Tree,
    expiries: Tree,
    /// Entries by metadata value (see [`metadata`]).
    metadata: Tree,
    jobs: Tree,
    job_queue: Tree,
    jobs_done: Tree,
    /// Purges asked to delete, until they have run to their end.
    purges: Tree,
    /// Event streams with buffered events, and every event each stream was given.
    streams: Tree,
    stream_events: Tree,
    /// The entries whose validity is closed, and when it closed.
    closed: Tree,
    commit: GroupCommit,
    gate: WriteGate,
    analyzer: Analyzer,
    /// Searched scopes' vectors, decoded.
    vector_cache: Arc<VectorCache>,
    /// Blocking work still running (each holds the database); shutdown waits for it.
    work: TaskTracker,
    /// Keeps a search's reads of a scope from interleaving with a commit to it.
    scans: Arc<ScanLocks>,
    /// Merges of the index journal (see [`journal`]).
    merges: Arc<journal::Merges>,
    /// Held by a generation job's write from the check that its job is open to its commit, and
    /// by a delete of all a scope's memories from ending the scope's jobs to its commit: no job
    /// writes after the delete that ended it. Both are rare; one lock serves the store.
    job_writes: Arc<Mutex<()>>,
    thresholds: journal::Thresholds,
    /// The memory-budget share of the writes being planned and committed: a write waits for
    /// room before it starts (see [`write::cost`]).
    writes: Arc<Room>,
}

/// Stripes of locks by scope: searches of a scope hold its stripe shared while they read, a
/// write holds it exclusively while it commits.
///
/// Each read and each transaction is atomic, but a search reads key after key, and a
/// transaction may commit between two of its steps. A write that merges a term's appended
/// blocks rewrites the first and removes the others: a search reading the first block before
/// that commit and going on after it would miss the postings of the removed ones, and rank
/// with part of the list.
#[derive(Debug)]
struct ScanLocks([RwLock<()>; 64]);

impl Default for ScanLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| RwLock::new(())))
    }
}

impl ScanLocks {
    fn of(&self, scope: &Key) -> &RwLock<()> {
        let mut hasher = std::hash::DefaultHasher::new();
        scope.as_bytes().hash(&mut hasher);
        &self.0[(hasher.finish() % self.0.len() as u64) as usize]
    }

    /// Held while searching `scope`. The locks guard no data, so one a panic poisoned is
    /// as good as any.
    fn reading(&self, scope: &Key) -> RwLockReadGuard<'_, ()> {
        self.of(scope)
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Held while committing to `scope`.
    fn writing(&self, scope: &Key) -> RwLockWriteGuard<'_, ()> {
        self.of(scope)
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl EmbeddedMemoryStore {
    /// Opens (or creates) the store in `dir`, analysing text with `analyzer`. Must be called
    /// inside a tokio runtime.
    pub fn open(dir: &Path, sync: SyncMode, analyzer: Analyzer) -> Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES, sync, analyzer)
    }

    /// [`EmbeddedMemoryStore::open`] with a page cache of `cache_bytes`. A sled store of an
    /// earlier release found in `dir` is converted first (see [`from_sled`]).
    pub fn open_with_cache(
        dir: &Path,
        cache_bytes: usize,
        sync: SyncMode,
        analyzer: Analyzer,
    ) -> Result<Self> {
        Self::from_db(from_sled::open(dir, cache_bytes)?, sync, analyzer)
    }

    /// Uses the memory trees of an open database, converting an older layout or index first.
    /// Must be called inside a tokio runtime.
    pub fn from_db(db: adk_common::kv::Db, sync: SyncMode, analyzer: Analyzer) -> Result<Self> {
        let (blocks, df) = (db.open_tree("blocks")?, db.open_tree("df")?);
        migrate::migrate(&db, &blocks, &df)?;
        let (buckets, turns) = (db.open_tree("buckets")?, db.open_tree("turns")?);
        migrate::build_turns(&db, &buckets, &turns)?;
        let entries = db.open_tree("entries")?;
        let journal = db.open_tree("journal")?;
        let pending = Arc::new(pending::Pending::load(&journal, &df)?);
        // Counted once at startup (a scan); writes keep the gauge current from then on. Added
        // rather than set, so stores sharing a process (tests) each count their own.
        gauge!("store_memories").increment(entries.len()? as f64);
        let store = Self {
            entries,
            buckets,
            turns,
            ids: db.open_tree("ids")?,
            blocks,
            df,
            pending,
            journal,
            tombstones: db.open_tree("tombstones")?,
            stats: db.open_tree("stats")?,
            vectors: db.open_tree("vectors")?,
            vector_model: db.open_tree("vector_model")?,
            revisions: db.open_tree("revisions")?,
            expiries: db.open_tree("expiries")?,
            metadata: db.open_tree("metadata")?,
            jobs: db.open_tree("jobs")?,
            job_queue: db.open_tree("job_queue")?,
            jobs_done: db.open_tree("jobs_done")?,
            purges: db.open_tree("purges")?,
            streams: db.open_tree("streams")?,
            stream_events: db.open_tree("stream_events")?,
            closed: db.open_tree("closed")?,
            commit: GroupCommit::start(db.clone(), sync),
            gate: WriteGate::default(),
            analyzer,
            vector_cache: Arc::new(VectorCache::new(vector_cache::DEFAULT_BYTES)),
            work: TaskTracker::new(),
            scans: Arc::default(),
            merges: Arc::default(),
            job_writes: Arc::default(),
            thresholds: journal::Thresholds::default(),
            writes: Arc::new(Room::new(u64::MAX)),
            db,
        };
        migrate::convert_kinds(&store)?;
        migrate::build_metadata(&store)?;
        migrate::convert_validity(&store)?;
        migrate::reindex(&store)?;
        store.merge_left_records();
        Ok(store)
    }

    /// The same, keeping up to `bytes` of searched scopes' vectors in memory (`--vector-cache-bytes`).
    pub fn with_vector_cache(self, bytes: usize) -> Self {
        Self {
            vector_cache: Arc::new(VectorCache::new(bytes)),
            ..self
        }
    }

    /// The same, within `budget`: the postings waiting for a merge, merges and writes each
    /// within their share.
    pub fn within(self, budget: &MemoryBudget) -> Self {
        Self {
            thresholds: journal::Thresholds::within(
                budget.share(Part::PendingPostings),
                budget.share(Part::Merges),
            ),
            writes: Arc::new(Room::new(budget.share(Part::Writes))),
            ..self
        }
    }

    /// Publishes the database's size on disk, and what the parts of the memory budget hold, as
    /// gauges (read at each metrics scrape).
    pub fn record_size(&self) {
        if let Ok(bytes) = self.db.size_on_disk() {
            gauge!("store_size_bytes", "service" => "memory-svc").set(bytes as f64);
        }
        let pending = self.pending.all() * journal::CHANGE_BYTES;
        budget::record_use(Part::PendingPostings, pending as u64);
        budget::record_use(Part::Merges, self.merges.held() as u64);
        budget::record_use(Part::Writes, self.writes.used());
        budget::record_use(Part::VectorCache, self.vector_cache.held() as u64);
    }

    /// Watches for a disk failure (the health service turns NOT_SERVING on one).
    pub fn failures(&self) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
        self.commit.failures()
    }

    /// Flushes every write to disk, whatever the sync mode, and stops the flusher (at
    /// shutdown: later writes are refused).
    pub async fn flush(&self) -> Result<()> {
        // Work whose caller stopped waiting (a cancelled call) still runs, holding the database;
        // once it and the group-commit flusher have ended, nothing of the store runs on, and
        // the directory can be opened again as soon as the last handle is dropped.
        self.work.close();
        self.work.wait().await;
        self.commit.stop().await;
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush())
            .await
            .map_err(|e| {
                StorageError::new(StorageErrorKind::Internal, format!("last flush: {e}"))
            })??;
        Ok(())
    }

    /// Runs `work`, which makes blocking database calls, on tokio's blocking pool (see the module
    /// docs). It runs to the end even if the caller stops waiting.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.clone();
        self.work
            .spawn_blocking(move || work(&store))
            .await
            .map_err(|e| {
                StorageError::new(StorageErrorKind::Internal, format!("storage task: {e}"))
            })?
    }

    fn stats(&self, scope: &Key) -> Result<(Option<Vec<u8>>, Stats)> {
        let raw = self.stats.get(scope)?;
        let stats = match &raw {
            Some(bytes) => decode(bytes, "stats")?,
            None => Stats::default(),
        };
        Ok((raw, stats))
    }

    fn record(&self, scope: &Key, seq: u64) -> Result<Option<EntryRecord>> {
        self.entries
            .get(scope.clone().u64(seq))?
            .map(|bytes| decode(&bytes, "entry"))
            .transpose()
    }

    /// The best `query.limit` entries for the query's terms among those `admit` lets through
    /// (see [`maxscore::top_k`]), which are all among `candidates` when it is given.
    fn rank<T>(
        &self,
        scope: &Key,
        query: &SearchQuery,
        candidates: Option<&BTreeSet<u64>>,
        admit: impl FnMut(u64) -> Result<Option<T>>,
    ) -> Result<Vec<Ranked<T>>> {
        let terms = self.analyzer.query_terms(&query.text, query.language);
        let (_, stats) = self.stats(scope)?;
        if terms.is_empty() || query.limit == 0 || stats.docs == 0 {
            return Ok(Vec::new());
        }
        let n = stats.docs as f64;
        let avg_len = stats.total_len as f64 / n;
        let mut found = Vec::with_capacity(terms.len());
        for term in &terms {
            let prefix = scope.clone().str(term);
            let (df, overlay, stored) = self.df(scope, term, &prefix)?;
            // A term of no entry has no postings to read.
            if df == 0 {
                continue;
            }
            let cursor = stored.cursor(&self.blocks, &prefix)?;
            found.push((df, overlay.over(cursor)?));
        }
        let postings = found.iter().map(|(df, _)| df).sum();
        let among = candidates.filter(|c| maxscore::among_few(c.len(), found.len(), postings));
        let mut lists = Vec::with_capacity(found.len());
        for (df, cursor) in found {
            lists.push(TermList {
                idf: index::idf(n, df as f64),
                cursor: match among {
                    Some(candidates) => Among::only(cursor, candidates)?,
                    None => Among::all(cursor),
                },
            });
        }
        maxscore::top_k(lists, avg_len, query.limit, f64::NEG_INFINITY, admit)
    }

    /// The document frequency of `term` in `scope` (whose keys start with `prefix`), with its
    /// changes that wait for a merge, and its stored df value. The caller holds the scope's
    /// scan lock.
    fn df(&self, scope: &Key, term: &str, prefix: &Key) -> Result<(u64, Overlay, StoredTerm)> {
        let stored = StoredTerm::read(&self.df, prefix)?;
        let overlay = self.pending.overlay(scope, term);
        if overlay.is_empty() {
            return Ok((stored.df()?, overlay, stored));
        }
        let df = overlay.df(stored.df()?, || stored.cursor(&self.blocks, prefix))?;
        Ok((df, overlay, stored))
    }

    /// The seqs of `scope` the query leaves out for their closed validity (see
    /// [`SearchQuery::hidden`]). The caller holds the scope's scan lock.
    fn hidden(&self, scope: &Key, query: &SearchQuery) -> Result<HashSet<u64>> {
        if !query.valid_at.hides_any_closed() {
            return Ok(HashSet::new());
        }
        let prefix_len = scope.as_bytes().len();
        let closed = self
            .closed
            .scan_prefix(scope)
            .map(|kv| {
                let (key, value) = kv?;
                let until = records::time_of_value(&value, "closed entry")?;
                Ok((records::key_seq(&key, prefix_len)?, until))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(query.hidden(closed))
    }

    /// [`MemoryStore::search`] in the scope whose keys start with `scope`.
    fn search_now(&self, scope: &Key, query: &SearchQuery) -> Result<Vec<Hit>> {
        let _reading = self.scans.reading(scope);
        let hidden = self.hidden(scope, query)?;
        if !query.filters() {
            // Searches do not lock out writers: an entry removed since its postings were read
            // sends the search the filtering way, as an expired generated memory does.
            let ranked = self.rank(scope, query, None, |seq| {
                Ok((!hidden.contains(&seq)).then_some(()))
            })?;
            let hits = ranked.iter().map(|r| {
                Ok(self.record(scope, r.seq)?.map(|record| Hit {
                    entry: record.into_entry(),
                    score: r.score,
                }))
            });
            if let Some(hits) = query.unfiltered(hits)? {
                return Ok(hits);
            }
        }
        // Only the filter's candidates are read; an entry removed since its posting was read
        // is simply no longer there.
        let candidates = self.candidates(scope, &query.filter)?;
        let ranked = self.rank(scope, query, candidates.as_ref(), |seq| {
            if hidden.contains(&seq) || candidates.as_ref().is_some_and(|c| !c.contains(&seq)) {
                return Ok(None);
            }
            Ok(self
                .record(scope, seq)?
                .map(EntryRecord::into_entry)
                .filter(|entry| query.admits(entry)))
        })?;
        Ok(ranked
            .into_iter()
            .map(|r| Hit {
                entry: r.item,
                score: r.score,
            })
            .collect())
    }

    /// [`MemoryStore::list`] from the entry after seq `after` (from the first with `None`).
    fn list_now(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        after: Option<u64>,
        filter: &Filter,
    ) -> Result<(Vec<Entry>, String)> {
        let prefix = scope_key(scope);
        if let Some(candidates) = self.candidates(&prefix, filter)? {
            let from = after.map_or(Bound::Unbounded, Bound::Excluded);
            let mut seqs = candidates.range((from, Bound::Unbounded)).copied();
            let mut page = Vec::new();
            let mut last_seq = None;
            for seq in seqs.by_ref() {
                if let Some(record) = self.record(&prefix, seq)? {
                    page.push(record.into_entry());
                }
                last_seq = Some(seq);
                if page.len() >= page_size.max(1) {
                    break;
                }
            }
            let next = match (seqs.next(), last_seq) {
                (Some(_), Some(seq)) => token::encode(scope, seq),
                _ => String::new(),
            };
            return Ok((page, next));
        }
        let start = match after {
            Some(seq) => Bound::Excluded(prefix.clone().u64(seq).into_vec()),
            None => Bound::Included(prefix.clone().into_vec()),
        };
        let end = Bound::Excluded(prefix_end(prefix.as_bytes()));
        let mut rows = self.entries.range::<Vec<u8>>((start, end));
        let mut page = Vec::new();
        let mut last_seq = None;
        // A page of at least one entry, so paging always makes progress.
        for kv in rows.by_ref().take(page_size.max(1)) {
            let (key, value) = kv?;
            page.push(decode::<EntryRecord>(&value, "entry")?.into_entry());
            last_seq = Some(records::key_seq(&key, prefix.as_bytes().len())?);
        }
        let next = match (rows.next(), last_seq) {
            (Some(_), Some(seq)) => token::encode(scope, seq),
            _ => String::new(),
        };
        Ok((page, next))
    }
}

impl Snapshotter for EmbeddedMemoryStore {
    async fn snapshot(&self, path: &Path) -> std::result::Result<u64, SnapshotError> {
        self.gate.snapshot(&self.db, path).await
    }
}

impl MemoryStore for EmbeddedMemoryStore {
    /// Applies `write` in `scope` (see [`write`]), then waits until it is durable.
    async fn write_changed(
        &self,
        scope: Scope<'_>,
        write: Write,
        vectors: Vectors,
        revisions: Vec<RevisionRecord>,
    ) -> Result<u32> {
        self.commit.check_writable()?;
        // Before the gate: a write waiting for room must not keep a snapshot waiting.
        let room = self.writes.take(write::cost(&write)).await;
        let writing = self.gate.writing_owned().await;
        let key = scope_key(scope);
        // A delete of all names its user, whose streams and jobs it ends too.
        let delete_all = matches!(write, Write::Delete(DeleteTarget::All))
            .then(|| (scope.app_name.to_owned(), scope.user_id.to_owned()));
        let job = super::generation::job_of(&revisions).map(str::to_owned);
        let count = self
            .blocking(move |store| {
                let (_writing, _room) = (writing, room);
                let _job_writes = (delete_all.is_some() || job.is_some())
                    .then(|| (store.job_writes.lock()).unwrap_or_else(PoisonError::into_inner));
                if let Some((app, user)) = &delete_all {
                    store.clear_streams_now(&key)?;
                    store.end_jobs_now(app, user)?;
                }
                if let Some(id) = &job {
                    store.check_job_open(id)?;
                }
                store.write_now(&key, &write, &vectors, &revisions)
            })
            .await;
        // Also when nothing changed: the answer may rest on a concurrent write not yet flushed.
        self.commit.wait_durable().await?;
        count
    }

    async fn search(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<Vec<Hit>> {
        let (key, query) = (scope_key(scope), query.clone());
        self.blocking(move |store| store.search_now(&key, &query))
            .await
    }

    fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    async fn indexed(&self, scope: Scope<'_>, terms: &[String]) -> Result<Vec<bool>> {
        let (key, terms) = (scope_key(scope), terms.to_vec());
        self.blocking(move |store| {
            let _reading = store.scans.reading(&key);
            terms
                .iter()
                .map(|term| Ok(store.df(&key, term, &key.clone().str(term))?.0 > 0))
                .collect()
        })
        .await
    }

    async fn nearest(
        &self,
        scope: Scope<'_>,
        vector: &[f32],
        query: &SearchQuery,
    ) -> Result<Vec<Hit>> {
        let (key, vector, query) = (scope_key(scope), vector.to_vec(), query.clone());
        self.blocking(move |store| store.nearest_now(&key, &vector, &query))
            .await
    }

    async fn use_model(&self, model: &Identity) -> Result<()> {
        let model = model.clone();
        self.blocking(move |store| store.use_model_now(&model))
            .await
    }

    async fn unembedded(&self, after: Option<&Unembedded>, n: usize) -> Result<Vec<Unembedded>> {
        let after = after.cloned();
        self.blocking(move |store| store.unembedded_now(after.as_ref(), n))
            .await
    }

    async fn put_vectors(&self, vectors: Vec<(Unembedded, Vec<f32>)>) -> Result<usize> {
        self.commit.check_writable()?;
        let writing = self.gate.writing_owned().await;
        let stored = self
            .blocking(move |store| {
                let _writing = writing;
                store.put_vectors_now(&vectors)
            })
            .await?;
        self.commit.wait_durable().await?;
        Ok(stored)
    }

    async fn enqueue(&self, job: &JobRecord) -> Result<()> {
        let job = job.clone();
        self.durably(move |store| store.enqueue_now(&job)).await
    }

    async fn claim(
        &self,
        id: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<JobRecord>> {
        let id = id.map(str::to_owned);
        self.commit.check_writable()?;
        let writing = self.gate.writing_owned().await;
        let claimed = self
            .blocking(move |store| {
                let _writing = writing;
                store.claim_now(id.as_deref(), now_ms, lease_ms)
            })
            .await?;
        // Idle workers poll: a poll that claimed nothing wrote nothing to wait for.
        if claimed.is_some() {
            self.commit.wait_durable().await?;
        }
        Ok(claimed)
    }

    async fn finish(&self, job: &JobRecord) -> Result<bool> {
        let job = job.clone();
        self.durably(move |store| store.finish_now(&job)).await
    }

    async fn job(&self, scope: Scope<'_>, id: &str) -> Result<Option<JobRecord>> {
        let (app_name, user_id, id) = (
            scope.app_name.to_owned(),
            scope.user_id.to_owned(),
            id.to_owned(),
        );
        self.blocking(move |store| store.job_now(&app_name, &user_id, &id))
            .await
    }

    async fn revisions(
        &self,
        scope: Scope<'_>,
        memory_id: Option<&str>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Revision>, String)> {
        let after = token::decode(scope, page_token)?;
        let (app_name, user_id) = (scope.app_name.to_owned(), scope.user_id.to_owned());
        let memory_id = memory_id.map(str::to_owned);
        self.blocking(move |store| {
            let scope = Scope {
                app_name: &app_name,
                user_id: &user_id,
            };
            store.revisions_now(scope, memory_id.as_deref(), page_size, after)
        })
        .await
    }

    async fn expired(&self, now_ms: i64, n: usize) -> Result<Vec<Expired>> {
        self.blocking(move |store| store.expired_now(now_ms, n))
            .await
    }

    async fn revision(&self, scope: Scope<'_>, seq: u64) -> Result<Option<Revision>> {
        let (app_name, user_id) = (scope.app_name.to_owned(), scope.user_id.to_owned());
        self.blocking(move |store| {
            let scope = Scope {
                app_name: &app_name,
                user_id: &user_id,
            };
            store.revision_now(scope, seq)
        })
        .await
    }

    async fn prune_revisions(&self, before_ms: i64, n: usize) -> Result<usize> {
        self.commit.check_writable()?;
        let writing = self.gate.writing_owned().await;
        let pruned = self
            .blocking(move |store| {
                let _writing = writing;
                store.prune_revisions_now(before_ms, n)
            })
            .await?;
        if pruned > 0 {
            self.commit.wait_durable().await?;
        }
        Ok(pruned)
    }

    async fn prune_jobs(&self, before_ms: i64, n: usize) -> Result<usize> {
        self.commit.check_writable()?;
        let writing = self.gate.writing_owned().await;
        let pruned = self
            .blocking(move |store| {
                let _writing = writing;
                store.prune_jobs_now(before_ms, n)
            })
            .await?;
        // Workers prune at every poll: one that pruned nothing wrote nothing to wait for.
        if pruned > 0 {
            self.commit.wait_durable().await?;
        }
        Ok(pruned)
    }

    async fn put_purge(&self, purge: &PurgeRecord) -> Result<()> {
        let purge = purge.clone();
        self.durably(move |store| store.put_purge_now(&purge)).await
    }

    async fn purges(&self) -> Result<Vec<PurgeRecord>> {
        self.blocking(|store| store.purges_now()).await
    }

    async fn remove_purge(&self, id: &str) -> Result<()> {
        let id = id.to_owned();
        self.durably(move |store| store.remove_purge_now(&id)).await
    }

    async fn users(&self, app: &str) -> Result<Vec<String>> {
        let app = app.to_owned();
        self.blocking(move |store| store.users_now(&app)).await
    }

    async fn append_stream(
        &self,
        stream: StreamKey<'_>,
        events: Vec<adk_proto::session::v1::Event>,
        now_ms: i64,
        trigger: usize,
        job: JobRecord,
    ) -> Result<Appended> {
        let (app_name, user_id, stream_id) = owned(stream);
        self.durably(move |store| {
            let stream = borrowed(&app_name, &user_id, &stream_id);
            store.append_stream_now(stream, &events, now_ms, trigger, &job)
        })
        .await
    }

    async fn flush_stream(
        &self,
        stream: StreamKey<'_>,
        job: JobRecord,
        quiet_since: Option<i64>,
    ) -> Result<Option<JobRecord>> {
        let (app_name, user_id, stream_id) = owned(stream);
        self.durably(move |store| {
            let stream = borrowed(&app_name, &user_id, &stream_id);
            store.flush_stream_now(stream, &job, quiet_since)
        })
        .await
    }

    async fn buffered_streams(&self) -> Result<Vec<Buffered>> {
        self.blocking(|store| store.buffered_streams_now()).await
    }

    async fn scope_streams(&self, scope: Scope<'_>) -> Result<Vec<Buffered>> {
        let (app_name, user_id) = (scope.app_name.to_owned(), scope.user_id.to_owned());
        self.blocking(move |store| {
            store.scope_streams_now(Scope {
                app_name: &app_name,
                user_id: &user_id,
            })
        })
        .await
    }

    async fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
        filter: &Filter,
    ) -> Result<(Vec<Entry>, String)> {
        let after = token::decode(scope, page_token)?;
        let (app_name, user_id) = (scope.app_name.to_owned(), scope.user_id.to_owned());
        let filter = filter.clone();
        self.blocking(move |store| {
            let scope = Scope {
                app_name: &app_name,
                user_id: &user_id,
            };
            store.list_now(scope, page_size, after, &filter)
        })
        .await
    }
}

/// A stream's names, owned, for the blocking pool.
fn owned(stream: StreamKey<'_>) -> (String, String, String) {
    (
        stream.scope.app_name.to_owned(),
        stream.scope.user_id.to_owned(),
        stream.stream_id.to_owned(),
    )
}

fn borrowed<'a>(app_name: &'a str, user_id: &'a str, stream_id: &'a str) -> StreamKey<'a> {
    StreamKey {
        scope: Scope { app_name, user_id },
        stream_id,
    }
}
