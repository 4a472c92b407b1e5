//! The embedded store: memory entries and their inverted index in sled.
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
//! | `ids`        | app, user, id, seq        | (empty): finds an id in every session   |
//! | `blocks`     | app, user, term, seq      | a block of postings from seq on         |
//! | `df`         | app, user, term           | document frequency (u64 big-endian)     |
//! | `tombstones` | app, user, id             | (empty): deleted ids, not re-ingested   |
//! | `stats`      | app, user                 | `Stats` (protobuf)                      |
//!
//! The `postings` module describes the blocks. A term's document frequency is kept
//! beside its postings, in the same transactions, so a search knows every term's idf before
//! reading any posting.
//!
//! # Search
//! BM25 over the scope's statistics, with MaxScore dynamic pruning: every posting of a term
//! scores at most `idf × (k1 + 1)`. The query's terms are ordered by that bound; once the
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
//! # Format change
//! Before the `blocks` and `df` trees, postings were one key each in a `postings` tree, with
//! no stored document frequency. [`SledMemoryStore::open`] converts such a database (see
//! `migrate`) before serving it.
//!
//! # Writes
//! sled transactions cannot scan, so a write is first planned with ordinary reads, then
//! committed as one transaction over all trees. Every commit bumps the scope's
//! `Stats::generation`; the transaction checks it is still the one the plan was made
//! against, and if another write got in between, the write is planned again. A group-commit
//! flush then makes it durable before the caller hears of it.

use std::{
    collections::{HashMap, HashSet},
    convert::Infallible,
    ops::Bound,
    path::Path,
};

use adk_common::{
    durability::{GroupCommit, SyncMode},
    keys::{prefix_end, Key, KeyReader},
    page,
    snapshot::{SnapshotError, Snapshotter, WriteGate},
};
use adk_proto::session::v1::Content;
use metrics::gauge;
use prost::Message;
use prost_types::Timestamp;
use sled::{transaction::TransactionError, Batch, IVec, Transactional, Tree};

use super::{
    index::{self, Terms},
    maxscore::{self, Ranked, TermList},
    postings::{self, Cursor, Posting, TermEdit},
    DeleteTarget, Entry, Hit, MemoryStore, Result, Scope, SearchQuery, StoreError,
};
use crate::text;

/// What the `entries` tree holds per entry.
#[derive(Clone, PartialEq, prost::Message)]
struct EntryRecord {
    #[prost(string, tag = "1")]
    id: String,
    #[prost(string, tag = "2")]
    session_id: String,
    #[prost(string, tag = "3")]
    author: String,
    #[prost(message, optional, tag = "4")]
    timestamp: Option<Timestamp>,
    #[prost(string, tag = "5")]
    custom_metadata: String,
    #[prost(message, optional, tag = "6")]
    content: Option<Content>,
    /// The entry's distinct terms, sorted. Kept so that removing the entry finds its postings
    /// exactly, even after a tokenizer change would index the same text differently.
    #[prost(message, repeated, tag = "7")]
    terms: Vec<TermCount>,
    /// Term occurrences in all (BM25's document length); 0 when the entry has no text.
    #[prost(uint32, tag = "8")]
    len: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TermCount {
    #[prost(string, tag = "1")]
    term: String,
    #[prost(uint32, tag = "2")]
    tf: u32,
}

/// Per-(app, user) counters.
#[derive(Clone, Copy, PartialEq, prost::Message)]
struct Stats {
    /// Entries with at least one term: BM25's N.
    #[prost(uint64, tag = "1")]
    docs: u64,
    /// Their summed lengths, for the average document length.
    #[prost(uint64, tag = "2")]
    total_len: u64,
    #[prost(uint64, tag = "3")]
    next_seq: u64,
    /// Bumped by every commit, to detect writes that raced (see the module docs).
    #[prost(uint64, tag = "4")]
    generation: u64,
}

impl EntryRecord {
    /// Indexes `entry`: its text is the text of all its parts (thoughts included), joined
    /// with spaces so words of adjacent parts stay apart.
    fn new(entry: Entry) -> Self {
        let Terms { counts, len } = Terms::of(&entry.content);
        Self {
            id: entry.id,
            session_id: entry.session_id,
            author: entry.author,
            timestamp: entry.timestamp,
            custom_metadata: entry.custom_metadata,
            content: Some(entry.content),
            terms: counts
                .into_iter()
                .map(|(term, tf)| TermCount { term, tf })
                .collect(),
            len,
        }
    }

    fn into_entry(self) -> Entry {
        Entry {
            id: self.id,
            session_id: self.session_id,
            author: self.author,
            timestamp: self.timestamp,
            custom_metadata: self.custom_metadata,
            content: self.content.unwrap_or_default(),
        }
    }
}

/// Memory store on a sled database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SledMemoryStore {
    db: sled::Db,
    entries: Tree,
    buckets: Tree,
    ids: Tree,
    blocks: Tree,
    df: Tree,
    tombstones: Tree,
    stats: Tree,
    commit: GroupCommit,
    gate: WriteGate,
}

impl SledMemoryStore {
    /// Opens (or creates) the store in `dir`. Must be called inside a tokio runtime.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self> {
        Self::from_db(sled::open(dir)?, sync)
    }

    /// Uses the memory trees of an open database, converting an older layout first. Must be
    /// called inside a tokio runtime.
    pub fn from_db(db: sled::Db, sync: SyncMode) -> Result<Self> {
        let (blocks, df) = (db.open_tree("blocks")?, db.open_tree("df")?);
        migrate(&db, &blocks, &df)?;
        let entries = db.open_tree("entries")?;
        // Counted once at startup (a scan); writes keep the gauge current from then on. Added
        // rather than set, so stores sharing a process (tests) each count their own.
        gauge!("store_memories").increment(entries.len() as f64);
        Ok(Self {
            entries,
            buckets: db.open_tree("buckets")?,
            ids: db.open_tree("ids")?,
            blocks,
            df,
            tombstones: db.open_tree("tombstones")?,
            stats: db.open_tree("stats")?,
            commit: GroupCommit::start(db.clone(), sync),
            gate: WriteGate::default(),
            db,
        })
    }

    /// Publishes the database's size on disk as a gauge (read at each metrics scrape).
    pub fn record_size(&self) {
        if let Ok(bytes) = self.db.size_on_disk() {
            gauge!("store_size_bytes", "service" => "memory-svc").set(bytes as f64);
        }
    }

    /// Watches for a disk failure (the health service turns NOT_SERVING on one).
    pub fn failures(&self) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
        self.commit.failures()
    }

    /// Flushes every write to disk, whatever the sync mode (at shutdown).
    pub async fn flush(&self) -> Result<()> {
        self.db.flush_async().await?;
        Ok(())
    }

    /// Plans a write with `plan` and commits it, planning again (so `plan` may run more than
    /// once) if another write to the same scope committed in between; then waits until it is
    /// durable.
    async fn write<T>(
        &self,
        scope: Scope<'_>,
        plan: impl Fn(&mut Plan<'_>) -> Result<T>,
    ) -> Result<T> {
        self.commit.check_writable()?;
        let writing = self.gate.writing().await;
        let out = loop {
            let mut p = Plan::new(self, scope)?;
            let out = plan(&mut p)?;
            // A plan that changes nothing commits nothing.
            let committed = if p.changed { p.commit() } else { Ok(true) };
            // An I/O error (a full disk, say) stops all writes until a restart.
            if let Err(StoreError::Storage(::sled::Error::Io(e))) = &committed {
                self.commit.fail(&e.to_string());
            }
            if committed? {
                if p.entry_delta != 0 {
                    gauge!("store_memories").increment(p.entry_delta as f64);
                }
                break out;
            }
        };
        drop(writing);
        // Also when nothing changed: the answer may rest on a concurrent write not yet flushed.
        self.commit.wait_durable().await?;
        Ok(out)
    }

    fn stats(&self, scope: &Key) -> Result<(Option<IVec>, Stats)> {
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
    /// (see [`maxscore::top_k`]).
    fn rank<T>(
        &self,
        scope: &Key,
        query: &SearchQuery,
        admit: impl FnMut(u64) -> Result<Option<T>>,
    ) -> Result<Vec<Ranked<T>>> {
        let terms = text::query_terms(&query.text);
        let (_, stats) = self.stats(scope)?;
        if terms.is_empty() || query.limit == 0 || stats.docs == 0 {
            return Ok(Vec::new());
        }
        let n = stats.docs as f64;
        let avg_len = stats.total_len as f64 / n;
        let mut lists = Vec::with_capacity(terms.len());
        for term in &terms {
            let prefix = scope.clone().str(term);
            // A term without a document frequency is in no entry.
            let Some(df) = self.df.get(&prefix)? else {
                continue;
            };
            lists.push(TermList {
                idf: index::idf(n, postings::df_value(&df)? as f64),
                cursor: Cursor::new(&self.blocks, &prefix)?,
            });
        }
        maxscore::top_k(lists, avg_len, query.limit, admit)
    }
}

/// The writes of one call, gathered against the scope's stats as they were when planning began.
impl Snapshotter for SledMemoryStore {
    async fn snapshot(&self, path: &Path) -> std::result::Result<u64, SnapshotError> {
        self.gate.snapshot(&self.db, path).await
    }
}

struct Plan<'s> {
    store: &'s SledMemoryStore,
    scope: Key,
    /// The stats record as read, compared at commit time.
    base: Option<IVec>,
    stats: Stats,
    changed: bool,
    /// Entries added minus entries removed, for the `store_memories` gauge.
    entry_delta: i64,
    entries: Batch,
    buckets: Batch,
    ids: Batch,
    /// The terms whose postings change, by term; queued into `blocks` and `df` at commit.
    terms: HashMap<String, TermEdit>,
    blocks: Batch,
    df: Batch,
    /// Seqs from this one on are new entries: their postings are appends.
    first_new_seq: u64,
    tombstones: Batch,
}

impl<'s> Plan<'s> {
    fn new(store: &'s SledMemoryStore, scope: Scope<'_>) -> Result<Self> {
        let scope = scope_key(scope);
        let (base, mut stats) = store.stats(&scope)?;
        stats.generation += 1;
        Ok(Self {
            store,
            scope,
            base,
            stats,
            changed: false,
            entry_delta: 0,
            entries: Batch::default(),
            buckets: Batch::default(),
            ids: Batch::default(),
            terms: HashMap::new(),
            blocks: Batch::default(),
            df: Batch::default(),
            first_new_seq: stats.next_seq,
            tombstones: Batch::default(),
        })
    }

    fn key(&self) -> Key {
        self.scope.clone()
    }

    fn is_tombstoned(&self, id: &str) -> Result<bool> {
        Ok(self.store.tombstones.contains_key(self.key().str(id))?)
    }

    fn slot(&self, session_id: &str, id: &str) -> Result<Option<u64>> {
        let key = self.key().str(session_id).str(id);
        self.store
            .buckets
            .get(key)?
            .map(|v| u64_value(&v, "slot"))
            .transpose()
    }

    /// The stored record of an entry that an index points at.
    fn record(&self, seq: u64) -> Result<EntryRecord> {
        self.store
            .record(&self.scope, seq)?
            .ok_or_else(|| StoreError::Corrupt(format!("indexed entry {seq} is missing")))
    }

    /// Writes `record` into its (session, id) slot: in place when the slot is taken, so it keeps
    /// its place in ingestion order, else as the newest entry.
    fn put(&mut self, record: EntryRecord) -> Result<()> {
        match self.slot(&record.session_id, &record.id)? {
            Some(seq) => {
                let old = self.record(seq)?;
                if old != record {
                    self.remove(seq, &old)?;
                    self.insert(seq, &record)?;
                }
            }
            None => {
                let seq = self.stats.next_seq;
                self.stats.next_seq += 1;
                self.insert(seq, &record)?;
            }
        }
        Ok(())
    }

    /// The edit of `term`'s postings, started on first use.
    fn term(&mut self, term: &str) -> Result<&mut TermEdit> {
        // Looked up before inserting, so the common case of a term seen before allocates nothing.
        if !self.terms.contains_key(term) {
            let edit = TermEdit::new(self.key().str(term), &self.store.df)?;
            self.terms.insert(term.to_owned(), edit);
        }
        self.terms
            .get_mut(term)
            .ok_or_else(|| StoreError::Corrupt("term edit vanished".into()))
    }

    fn insert(&mut self, seq: u64, record: &EntryRecord) -> Result<()> {
        let key = self.key();
        self.entries
            .insert(key.clone().u64(seq), record.encode_to_vec());
        self.buckets.insert(
            key.clone().str(&record.session_id).str(&record.id),
            &seq.to_be_bytes()[..],
        );
        self.ids
            .insert(key.clone().str(&record.id).u64(seq), IVec::default());
        let append = seq >= self.first_new_seq;
        let blocks = &self.store.blocks;
        for t in &record.terms {
            let posting = Posting {
                seq,
                tf: t.tf,
                len: record.len,
            };
            self.term(&t.term)?.insert(blocks, posting, append)?;
        }
        if record.len > 0 {
            self.stats.docs += 1;
            self.stats.total_len += u64::from(record.len);
        }
        self.changed = true;
        self.entry_delta += 1;
        Ok(())
    }

    /// Removes an entry that is stored at `seq` as `record`. (A later [`Plan::insert`] at the
    /// same seq overrides these removals key by key.)
    fn remove(&mut self, seq: u64, record: &EntryRecord) -> Result<()> {
        let key = self.key();
        self.entries.remove(key.clone().u64(seq));
        self.buckets
            .remove(key.clone().str(&record.session_id).str(&record.id));
        self.ids.remove(key.clone().str(&record.id).u64(seq));
        let blocks = &self.store.blocks;
        for t in &record.terms {
            self.term(&t.term)?.remove(blocks, seq)?;
        }
        if record.len > 0 {
            self.stats.docs = self.stats.docs.saturating_sub(1);
            self.stats.total_len = self.stats.total_len.saturating_sub(u64::from(record.len));
        }
        self.changed = true;
        self.entry_delta -= 1;
        Ok(())
    }

    /// Removes everything of the scope, tombstones included, and returns the number of
    /// entries removed. The next seq is kept, so a page token issued before cannot skip
    /// entries added after.
    fn clear(&mut self) -> Result<usize> {
        let s = self.store;
        let removed = remove_all(&s.entries, &self.scope, &mut self.entries)?;
        self.entry_delta -= removed as i64;
        remove_all(&s.buckets, &self.scope, &mut self.buckets)?;
        remove_all(&s.ids, &self.scope, &mut self.ids)?;
        remove_all(&s.blocks, &self.scope, &mut self.blocks)?;
        remove_all(&s.df, &self.scope, &mut self.df)?;
        remove_all(&s.tombstones, &self.scope, &mut self.tombstones)?;
        self.stats.docs = 0;
        self.stats.total_len = 0;
        // A scope without stats has never been written to: there is nothing to remove.
        self.changed = self.base.is_some();
        Ok(removed)
    }

    /// Commits the plan unless another write to the scope committed since it was made;
    /// `false` means it must be planned again.
    fn commit(&mut self) -> Result<bool> {
        for edit in self.terms.values() {
            edit.finish(&mut self.blocks, &mut self.df);
        }
        let s = self.store;
        let trees = (
            &s.entries,
            &s.buckets,
            &s.ids,
            &s.blocks,
            &s.df,
            &s.tombstones,
            &s.stats,
        );
        trees
            .transaction(|(entries, buckets, ids, blocks, df, tombstones, stats)| {
                if stats.get(&self.scope)? != self.base {
                    return Ok(false);
                }
                entries.apply_batch(&self.entries)?;
                buckets.apply_batch(&self.buckets)?;
                ids.apply_batch(&self.ids)?;
                blocks.apply_batch(&self.blocks)?;
                df.apply_batch(&self.df)?;
                tombstones.apply_batch(&self.tombstones)?;
                stats.insert(self.scope.as_bytes(), self.stats.encode_to_vec())?;
                Ok(true)
            })
            .map_err(|e: TransactionError<Infallible>| match e {
                TransactionError::Abort(never) => match never {},
                TransactionError::Storage(e) => e.into(),
            })
    }
}

impl MemoryStore for SledMemoryStore {
    async fn replace_session(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> Result<u32> {
        self.write(scope, |p| {
            // The session's slots; those the new entries do not fill again are removed.
            let mut stale = HashMap::new();
            for kv in self.buckets.scan_prefix(p.key().str(session_id)) {
                let (slot, seq) = kv?;
                stale.insert(slot.to_vec(), u64_value(&seq, "slot")?);
            }
            let mut kept = HashSet::new();
            for entry in &entries {
                if kept.contains(entry.id.as_str()) || p.is_tombstoned(&entry.id)? {
                    continue;
                }
                stale.remove(p.key().str(session_id).str(&entry.id).as_bytes());
                p.put(EntryRecord::new(Entry {
                    session_id: session_id.to_owned(),
                    ..entry.clone()
                }))?;
                kept.insert(entry.id.as_str());
            }
            for seq in stale.into_values() {
                let old = p.record(seq)?;
                p.remove(seq, &old)?;
            }
            Ok(count(kept.len()))
        })
        .await
    }

    async fn add_events(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> Result<u32> {
        self.write(scope, |p| {
            let mut added = HashSet::new();
            for entry in &entries {
                if added.contains(entry.id.as_str())
                    || p.is_tombstoned(&entry.id)?
                    || p.slot(session_id, &entry.id)?.is_some()
                {
                    continue;
                }
                p.put(EntryRecord::new(Entry {
                    session_id: session_id.to_owned(),
                    ..entry.clone()
                }))?;
                added.insert(entry.id.as_str());
            }
            Ok(count(added.len()))
        })
        .await
    }

    async fn add_memories(&self, scope: Scope<'_>, entries: Vec<Entry>) -> Result<()> {
        self.write(scope, |p| {
            // Of several writes to one slot only the last is applied: it would overwrite the others.
            let last: HashMap<_, _> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| ((e.session_id.as_str(), e.id.as_str()), i))
                .collect();
            for (i, entry) in entries.iter().enumerate() {
                if last.get(&(entry.session_id.as_str(), entry.id.as_str())) != Some(&i) {
                    continue;
                }
                if p.is_tombstoned(&entry.id)? {
                    p.tombstones.remove(p.key().str(&entry.id));
                    p.changed = true;
                }
                p.put(EntryRecord::new(entry.clone()))?;
            }
            Ok(())
        })
        .await
    }

    async fn search(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<Vec<Hit>> {
        let scope = scope_key(scope);
        let filtered = query.author.is_some() || query.after.is_some() || query.before.is_some();
        if !filtered {
            // Without filters every entry is admitted, so records are read for the results
            // only. Searches do not lock out writers, though: if one of them was removed since
            // its postings were read, the search is done again the way filters are applied.
            let ranked = self.rank(&scope, query, |_| Ok(Some(())))?;
            let mut hits = Vec::with_capacity(ranked.len());
            for r in &ranked {
                let Some(record) = self.record(&scope, r.seq)? else {
                    break;
                };
                hits.push(Hit {
                    entry: record.into_entry(),
                    score: r.score,
                });
            }
            if hits.len() == ranked.len() {
                return Ok(hits);
            }
        }
        // An entry removed since its posting was read is simply no longer there.
        let ranked = self.rank(&scope, query, |seq| {
            Ok(self
                .record(&scope, seq)?
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

    async fn delete(&self, scope: Scope<'_>, target: &DeleteTarget) -> Result<u32> {
        self.write(scope, |p| {
            let seqs = match target {
                DeleteTarget::MemoryId(id) => {
                    let prefix = p.key().str(id);
                    let seqs = self
                        .ids
                        .scan_prefix(&prefix)
                        .keys()
                        .map(|key| key_seq(&key?, prefix.as_bytes().len()))
                        .collect::<Result<Vec<_>>>()?;
                    if !seqs.is_empty() {
                        p.tombstones.insert(prefix, IVec::default());
                    }
                    seqs
                }
                DeleteTarget::Session(session_id) => self
                    .buckets
                    .scan_prefix(p.key().str(session_id))
                    .values()
                    .map(|seq| u64_value(&seq?, "slot"))
                    .collect::<Result<Vec<_>>>()?,
                DeleteTarget::All => return p.clear().map(count),
            };
            for &seq in &seqs {
                let old = p.record(seq)?;
                p.remove(seq, &old)?;
            }
            Ok(count(seqs.len()))
        })
        .await
    }

    async fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Entry>, String)> {
        let scope = scope_key(scope);
        let start = match page::decode(page_token, scope.as_bytes())? {
            Some(last) => Bound::Excluded(last),
            None => Bound::Included(scope.clone().into_vec()),
        };
        let end = Bound::Excluded(prefix_end(scope.as_bytes()));
        let mut rows = self.entries.range::<Vec<u8>, _>((start, end));
        let mut page = Vec::new();
        let mut last_key = None;
        // A page of at least one entry, so paging always makes progress.
        for kv in rows.by_ref().take(page_size.max(1)) {
            let (key, value) = kv?;
            page.push(decode::<EntryRecord>(&value, "entry")?.into_entry());
            last_key = Some(key);
        }
        let next = match (rows.next(), last_key) {
            (Some(_), Some(last)) => page::encode(&last),
            _ => String::new(),
        };
        Ok((page, next))
    }
}

/// The tree of one key per posting that [`migrate`] converts.
const OLD_POSTINGS: &[u8] = b"postings";

/// Converts a database written before the `blocks` and `df` trees: builds them from the old
/// `postings` tree (keys app, user, term, seq; values term frequency and entry length, two u32s
/// big-endian), then drops it. Runs before the store serves anything. Until the old tree is
/// dropped it is what counts: a conversion cut short leaves it in place, and the next open
/// starts over from cleared new trees.
fn migrate(db: &sled::Db, blocks: &Tree, df: &Tree) -> Result<()> {
    if !db.tree_names().iter().any(|name| name == OLD_POSTINGS) {
        return Ok(());
    }
    let old = db.open_tree(OLD_POSTINGS)?;
    tracing::info!(postings = old.len(), "converting postings to blocks");
    blocks.clear()?;
    df.clear()?;
    let (mut block_batch, mut df_batch) = (Batch::default(), Batch::default());
    // The (app, user, term) being converted, its postings not yet queued, and its df.
    let (mut prefix, mut block, mut count) = (Vec::new(), Vec::new(), 0u64);
    let mut queued = 0;
    for kv in old.iter() {
        let (key, value) = kv?;
        let split = key
            .len()
            .checked_sub(8)
            .ok_or_else(|| StoreError::Corrupt("posting key without a sequence number".into()))?;
        let (term, seq) = key.split_at(split);
        if term != prefix.as_slice() {
            flush_block(&prefix, &mut block, &mut block_batch);
            if count > 0 {
                df_batch.insert(prefix.as_slice(), &count.to_be_bytes()[..]);
            }
            (prefix, count) = (term.to_vec(), 0);
        } else if block.len() == postings::BLOCK_LEN {
            flush_block(&prefix, &mut block, &mut block_batch);
        }
        let packed = u64_value(&value, "posting")?;
        block.push(Posting {
            seq: u64_value(seq, "posting key")?,
            tf: (packed >> 32) as u32,
            len: packed as u32,
        });
        count += 1;
        queued += 1;
        // Applied in parts, to bound the memory the batches take.
        if queued % 100_000 == 0 {
            blocks.apply_batch(std::mem::take(&mut block_batch))?;
            df.apply_batch(std::mem::take(&mut df_batch))?;
        }
    }
    flush_block(&prefix, &mut block, &mut block_batch);
    if count > 0 {
        df_batch.insert(prefix.as_slice(), &count.to_be_bytes()[..]);
    }
    blocks.apply_batch(block_batch)?;
    df.apply_batch(df_batch)?;
    // The new trees are on disk before the old one goes.
    db.flush()?;
    db.drop_tree(OLD_POSTINGS)?;
    db.flush()?;
    tracing::info!(postings = queued, "converted postings to blocks");
    Ok(())
}

/// Queues `block`, the next postings of the term whose keys start with `prefix`, as one block,
/// and empties it.
fn flush_block(prefix: &[u8], block: &mut Vec<Posting>, batch: &mut Batch) {
    if let Some(first) = block.first().map(|p| p.seq) {
        let key = [prefix, &first.to_be_bytes()[..]].concat();
        batch.insert(key, postings::encode(first, block));
        block.clear();
    }
}

/// The key prefix of everything stored for one (app, user).
fn scope_key(scope: Scope<'_>) -> Key {
    Key::new().str(scope.app_name).str(scope.user_id)
}

fn decode<M: Message + Default>(bytes: &[u8], what: &str) -> Result<M> {
    M::decode(bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn u64_value(bytes: &[u8], what: &str) -> Result<u64> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt(format!("{what}: not 8 bytes")))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The seq that ends a key whose other components take `prefix_len` bytes.
fn key_seq(key: &[u8], prefix_len: usize) -> Result<u64> {
    let mut rest = KeyReader::new(key.get(prefix_len..).unwrap_or_default());
    match rest.u64() {
        Some(seq) if rest.is_empty() => Ok(seq),
        _ => Err(StoreError::Corrupt("key without a sequence number".into())),
    }
}

/// Queues the removal of every key of `tree` under `prefix`; returns how many there are.
fn remove_all(tree: &Tree, prefix: &Key, batch: &mut Batch) -> Result<usize> {
    let mut n = 0;
    for key in tree.scan_prefix(prefix).keys() {
        batch.remove(key?);
        n += 1;
    }
    Ok(n)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use adk_proto::session::v1::{part, Part};

    use super::*;

    const SCOPE: Scope<'static> = Scope {
        app_name: "app",
        user_id: "user",
    };

    fn open() -> (tempfile::TempDir, SledMemoryStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SledMemoryStore::open(dir.path(), SyncMode::Sync).unwrap();
        (dir, store)
    }

    fn text_part(text: &str) -> Part {
        Part {
            data: Some(part::Data::Text(text.into())),
            ..Default::default()
        }
    }

    fn entry(id: &str, text: &str) -> Entry {
        Entry {
            id: id.into(),
            author: "user".into(),
            content: Content {
                role: Some("user".into()),
                parts: vec![text_part(text)],
            },
            ..Default::default()
        }
    }

    /// Entries from (id, text) pairs.
    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs.iter().map(|(id, text)| entry(id, text)).collect()
    }

    fn query(text: &str) -> SearchQuery {
        SearchQuery {
            text: text.into(),
            limit: 10,
            ..Default::default()
        }
    }

    fn memory_id(id: &str) -> DeleteTarget {
        DeleteTarget::MemoryId(id.into())
    }

    // The calls below work on SCOPE and fail the test on error.

    async fn replace(store: &SledMemoryStore, session: &str, entries: Vec<Entry>) -> u32 {
        store
            .replace_session(SCOPE, session, entries)
            .await
            .unwrap()
    }

    async fn add(store: &SledMemoryStore, session: &str, entries: Vec<Entry>) -> u32 {
        store.add_events(SCOPE, session, entries).await.unwrap()
    }

    async fn memorize(store: &SledMemoryStore, entries: Vec<Entry>) {
        store.add_memories(SCOPE, entries).await.unwrap()
    }

    async fn delete(store: &SledMemoryStore, target: DeleteTarget) -> u32 {
        store.delete(SCOPE, &target).await.unwrap()
    }

    /// The ids a search finds, best first.
    async fn found(store: &SledMemoryStore, scope: Scope<'_>, q: &SearchQuery) -> Vec<String> {
        let hits = store.search(scope, q).await.unwrap();
        hits.into_iter().map(|h| h.entry.id).collect()
    }

    async fn search(store: &SledMemoryStore, text: &str) -> Vec<String> {
        found(store, SCOPE, &query(text)).await
    }

    /// The ids of all entries, in listing order.
    async fn listed(store: &SledMemoryStore, scope: Scope<'_>) -> Vec<String> {
        let (entries, next) = store.list(scope, 1000, "").await.unwrap();
        assert_eq!(next, "");
        entries.into_iter().map(|e| e.id).collect()
    }

    fn stats(store: &SledMemoryStore) -> Stats {
        store.stats(&scope_key(SCOPE)).unwrap().1
    }

    #[tokio::test]
    async fn indexes_the_text_of_all_parts() {
        let (_dir, store) = open();
        let mut e = entry("a", "visible answer");
        e.content.parts.push(Part {
            thought: Some(true),
            ..text_part("hidden reasoning")
        });
        e.content.parts.push(text_part("tail"));
        let no_text = Entry {
            content: Content::default(),
            ..entry("b", "")
        };
        memorize(&store, vec![e.clone(), no_text]).await;

        assert_eq!(search(&store, "reasoning").await, ["a"]);
        assert_eq!(search(&store, "answer").await, ["a"]);
        assert!(search(&store, "answertail").await.is_empty());
        // Stored whole and listable, but an entry without text is not indexed.
        let (listed, _) = store.list(SCOPE, 10, "").await.unwrap();
        assert_eq!(listed[0], e);
        assert_eq!(listed[1].id, "b");
        assert_eq!(stats(&store).docs, 1);
    }

    #[tokio::test]
    async fn empty_queries_find_nothing() {
        let (_dir, store) = open();
        memorize(&store, entries(&[("a", "something")])).await;
        assert!(search(&store, "").await.is_empty());
        assert!(search(&store, " ?! ").await.is_empty());
        assert!(search(&store, "absent").await.is_empty());
    }

    #[tokio::test]
    async fn replace_session_replaces_its_entries() {
        let (_dir, store) = open();
        let session = entries(&[("a", "alpha"), ("b", "beta"), ("c", "gamma")]);
        assert_eq!(replace(&store, "s1", session).await, 3);
        assert_eq!(replace(&store, "s2", entries(&[("x", "xi")])).await, 1);

        // Fewer events shrink the bucket; a changed one is rewritten in its place.
        let shorter = entries(&[("a", "alpha"), ("c", "delta")]);
        assert_eq!(replace(&store, "s1", shorter).await, 2);
        assert_eq!(listed(&store, SCOPE).await, ["a", "c", "x"]);
        assert!(search(&store, "beta gamma").await.is_empty());
        assert_eq!(search(&store, "delta").await, ["c"]);

        // Of two entries with one id the first is kept; entries record their session.
        let dup = entries(&[("d", "first"), ("d", "second")]);
        assert_eq!(replace(&store, "s1", dup).await, 1);
        assert_eq!(listed(&store, SCOPE).await, ["x", "d"]);
        assert!(search(&store, "second").await.is_empty());
        let (listed_entries, _) = store.list(SCOPE, 10, "").await.unwrap();
        assert_eq!(listed_entries[1].session_id, "s1");

        assert_eq!(replace(&store, "s1", vec![]).await, 0);
        assert_eq!(listed(&store, SCOPE).await, ["x"]);
        let s = stats(&store);
        assert_eq!((s.docs, s.total_len), (1, 1));
    }

    #[tokio::test]
    async fn add_events_keeps_the_first_copy() {
        let (_dir, store) = open();
        let first = entries(&[("a", "original"), ("a", "shadowed")]);
        assert_eq!(add(&store, "s1", first).await, 1);
        let again = entries(&[("a", "rewritten"), ("b", "new")]);
        assert_eq!(add(&store, "s1", again).await, 1);
        assert_eq!(search(&store, "original").await, ["a"]);
        assert!(search(&store, "rewritten shadowed").await.is_empty());

        // Another session, or none, is another bucket.
        assert_eq!(add(&store, "s2", entries(&[("a", "other")])).await, 1);
        assert_eq!(add(&store, "", entries(&[("a", "loose")])).await, 1);
        assert_eq!(listed(&store, SCOPE).await, ["a", "b", "a", "a"]);
    }

    #[tokio::test]
    async fn add_memories_upserts_in_place() {
        let (_dir, store) = open();
        memorize(
            &store,
            entries(&[("m1", "old"), ("m2", "two"), ("m1", "newer")]),
        )
        .await;
        memorize(&store, entries(&[("m3", "three")])).await;
        memorize(&store, entries(&[("m2", "second")])).await;
        assert_eq!(listed(&store, SCOPE).await, ["m2", "m1", "m3"]);
        assert!(search(&store, "old two").await.is_empty());
        assert_eq!(search(&store, "newer second").await.len(), 2);
        assert_eq!(stats(&store).docs, 3);
    }

    #[tokio::test]
    async fn deleted_ids_stay_deleted() {
        let (_dir, store) = open();
        replace(&store, "s1", entries(&[("a", "alpha"), ("b", "beta")])).await;
        add(&store, "s2", entries(&[("a", "alpha")])).await;
        memorize(&store, entries(&[("a", "alpha")])).await;

        // Every copy of the id goes, in every session.
        assert_eq!(delete(&store, memory_id("a")).await, 3);
        assert!(search(&store, "alpha").await.is_empty());

        // Re-ingesting does not bring it back.
        let session = entries(&[("a", "alpha"), ("b", "beta")]);
        assert_eq!(replace(&store, "s1", session).await, 1);
        assert_eq!(add(&store, "s3", entries(&[("a", "alpha")])).await, 0);
        assert_eq!(listed(&store, SCOPE).await, ["b"]);

        // Deleting an id that is not there tombstones nothing.
        assert_eq!(delete(&store, memory_id("ghost")).await, 0);
        assert_eq!(add(&store, "s1", entries(&[("ghost", "boo")])).await, 1);

        // An explicit write lifts the tombstone.
        memorize(&store, entries(&[("a", "alpha")])).await;
        assert_eq!(add(&store, "s3", entries(&[("a", "alpha")])).await, 1);
        assert_eq!(search(&store, "alpha").await, ["a", "a"]);
    }

    #[tokio::test]
    async fn delete_by_session_and_all() {
        let (_dir, store) = open();
        replace(&store, "s1", entries(&[("a", "alpha"), ("b", "beta")])).await;
        replace(&store, "s2", entries(&[("c", "gamma")])).await;
        memorize(&store, entries(&[("d", "delta")])).await;
        delete(&store, memory_id("d")).await;

        let s1 = || DeleteTarget::Session("s1".into());
        assert_eq!(delete(&store, s1()).await, 2);
        assert_eq!(delete(&store, s1()).await, 0);
        assert_eq!(listed(&store, SCOPE).await, ["c"]);
        // Deleting a session tombstones nothing.
        assert_eq!(replace(&store, "s1", entries(&[("a", "alpha")])).await, 1);

        assert_eq!(delete(&store, DeleteTarget::All).await, 2);
        assert!(listed(&store, SCOPE).await.is_empty());
        assert!(search(&store, "alpha gamma").await.is_empty());
        let s = stats(&store);
        assert_eq!((s.docs, s.total_len, s.next_seq), (0, 0, 5));
        for tree in [
            &store.buckets,
            &store.ids,
            &store.blocks,
            &store.df,
            &store.tombstones,
        ] {
            assert!(tree.is_empty());
        }

        // Tombstones went too; ingestion numbering goes on.
        assert_eq!(add(&store, "", entries(&[("d", "delta")])).await, 1);
        assert_eq!(search(&store, "delta").await, ["d"]);
        assert_eq!(stats(&store).next_seq, 6);

        // Clearing a scope never written to writes nothing.
        let fresh = Scope {
            app_name: "app",
            user_id: "nobody",
        };
        assert_eq!(store.delete(fresh, &DeleteTarget::All).await.unwrap(), 0);
        assert!(store.stats.get(scope_key(fresh)).unwrap().is_none());
    }

    #[tokio::test]
    async fn scopes_are_isolated() {
        let (_dir, store) = open();
        let scopes = [
            ("a/b", "c"),
            ("a", "b/c"),
            ("a", "b"),
            ("a\0", "b"),
            ("a", "\0b"),
        ]
        .map(|(app_name, user_id)| Scope { app_name, user_id });
        for (i, &scope) in scopes.iter().enumerate() {
            let e = entry("same-id", &format!("shared word{i}"));
            store.replace_session(scope, "s", vec![e]).await.unwrap();
        }
        for (i, &scope) in scopes.iter().enumerate() {
            assert_eq!(found(&store, scope, &query("shared")).await.len(), 1);
            assert_eq!(
                found(&store, scope, &query(&format!("word{i}")))
                    .await
                    .len(),
                1
            );
            let other = format!("word{}", (i + 1) % scopes.len());
            assert!(found(&store, scope, &query(&other)).await.is_empty());
        }

        // Statistics are per scope too: N = df = 1, whatever the other scopes hold.
        let hits = store.search(scopes[0], &query("shared")).await.unwrap();
        let idf = (1.0f64 + 0.5 / 1.5).ln();
        assert!((hits[0].score - idf).abs() < 1e-12, "{}", hits[0].score);

        // Deletes stay inside their scope, tombstones too.
        let deletes = [
            memory_id("same-id"),
            DeleteTarget::All,
            DeleteTarget::Session("s".into()),
        ];
        for (&scope, target) in scopes.iter().zip(&deletes) {
            assert_eq!(store.delete(scope, target).await.unwrap(), 1);
        }
        for (i, &scope) in scopes.iter().enumerate() {
            assert_eq!(
                listed(&store, scope).await.len(),
                usize::from(i > 2),
                "{scope:?}"
            );
        }
        let e = entry("same-id", "back");
        assert_eq!(store.add_events(scopes[1], "t", vec![e]).await.unwrap(), 1);

        // A page token works only for the scope it was issued for.
        let extra = vec![entry("x", "")];
        store.add_events(scopes[3], "t", extra).await.unwrap();
        let (_, token) = store.list(scopes[3], 1, "").await.unwrap();
        assert!(!token.is_empty());
        let err = store.list(scopes[4], 1, &token).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidPageToken(_)), "{err}");
    }

    #[tokio::test]
    async fn ranks_by_bm25() {
        let (_dir, store) = open();
        let docs = entries(&[
            ("c1", "common alpha beta"),
            ("c2", "common beta gamma"),
            ("c3", "common gamma delta"),
            ("r", "rare delta alpha"),
        ]);
        memorize(&store, docs).await;
        // The rarer term weighs more; equal scores come in ingestion order.
        assert_eq!(search(&store, "common rare").await, ["r", "c1", "c2", "c3"]);
        // Matching more terms weighs more.
        assert_eq!(search(&store, "gamma beta").await, ["c2", "c1", "c3"]);

        // More occurrences weigh more (at equal length).
        memorize(
            &store,
            entries(&[("t1", "cat dog dog"), ("t2", "cat cat dog")]),
        )
        .await;
        let hits = store.search(SCOPE, &query("cat")).await.unwrap();
        assert_eq!(hits[0].entry.id, "t2");
        assert!(hits[0].score > hits[1].score && hits[1].score > 0.0);
    }

    #[tokio::test]
    async fn ties_keep_ingestion_order() {
        let (_dir, store) = open();
        for id in ["z", "m", "a"] {
            add(&store, "s", entries(&[(id, "same words")])).await;
        }
        assert_eq!(search(&store, "same").await, ["z", "m", "a"]);
        // Re-adding the session rewrites its entries in place: the order holds.
        let session = entries(&[
            ("a", "same words"),
            ("m", "same words"),
            ("z", "same words"),
        ]);
        replace(&store, "s", session).await;
        assert_eq!(search(&store, "words").await, ["z", "m", "a"]);
    }

    #[tokio::test]
    async fn finds_substrings_of_unspaced_scripts() {
        let (_dir, store) = open();
        let docs = entries(&[
            ("ota", "太田さんです"),
            ("yamada", "山田太郎です"),
            ("hanako", "山田花子です"),
            ("ja", "私はPythonでADKを使っています"),
            ("ko", "저는 파이썬을 좋아합니다"),
        ]);
        memorize(&store, docs).await;
        assert_eq!(search(&store, "太郎").await, ["yamada"]);
        assert_eq!(search(&store, "太").await, ["ota", "yamada"]);
        // The document with the whole substring outranks those with parts of it.
        assert_eq!(search(&store, "山田太郎").await, ["yamada", "hanako"]);
        assert_eq!(search(&store, "python").await, ["ja"]);
        assert_eq!(search(&store, "ADK").await, ["ja"]);
        assert!(search(&store, "thon").await.is_empty());
        assert_eq!(search(&store, "파이썬").await, ["ko"]);
    }

    #[tokio::test]
    async fn limit_and_filters() {
        let (_dir, store) = open();
        let mut docs: Vec<Entry> = (0..6)
            .map(|i| Entry {
                timestamp: Some(Timestamp {
                    seconds: 100 + i,
                    nanos: 0,
                }),
                ..entry(&format!("e{i}"), "note")
            })
            .collect();
        docs[1].author = "model".into();
        docs[4].author = "model".into();
        docs.push(entry("untimed", "note"));
        memorize(&store, docs).await;
        let t = |seconds| Some(Timestamp { seconds, nanos: 0 });

        let mut q = query("note");
        q.limit = 2;
        assert_eq!(found(&store, SCOPE, &q).await, ["e0", "e1"]);

        let mut q = query("note");
        q.author = Some("model".into());
        assert_eq!(found(&store, SCOPE, &q).await, ["e1", "e4"]);

        // `after` is inclusive, `before` exclusive; an entry without a time is outside.
        let mut q = query("note");
        (q.after, q.before) = (t(102), t(105));
        assert_eq!(found(&store, SCOPE, &q).await, ["e2", "e3", "e4"]);

        // Filters apply before the limit.
        (q.limit, q.author) = (1, Some("model".into()));
        assert_eq!(found(&store, SCOPE, &q).await, ["e4"]);

        q.limit = 0;
        assert!(found(&store, SCOPE, &q).await.is_empty());
    }

    #[tokio::test]
    async fn lists_in_pages() {
        let (_dir, store) = open();
        memorize(
            &store,
            (0..5).map(|i| entry(&format!("e{i}"), "x")).collect(),
        )
        .await;

        let mut token = String::new();
        let mut pages = Vec::new();
        loop {
            let (page, next) = store.list(SCOPE, 2, &token).await.unwrap();
            pages.push(page.into_iter().map(|e| e.id).collect::<Vec<_>>());
            if next.is_empty() {
                break;
            }
            token = next;
        }
        assert_eq!(pages, [vec!["e0", "e1"], vec!["e2", "e3"], vec!["e4"]]);

        // A page is never empty while entries remain, and the last one has no token.
        let (page, next) = store.list(SCOPE, 0, "").await.unwrap();
        assert_eq!((page.len(), next.is_empty()), (1, false));
        let (page, next) = store.list(SCOPE, 5, "").await.unwrap();
        assert_eq!((page.len(), next.as_str()), (5, ""));

        let err = store.list(SCOPE, 2, "not a token!").await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidPageToken(_)), "{err}");
    }

    #[tokio::test]
    async fn survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            // Without a flush per write, the one at shutdown is what makes them durable.
            let store = SledMemoryStore::open(dir.path(), SyncMode::Periodic).unwrap();
            replace(&store, "s", entries(&[("a", "persisted words")])).await;
            memorize(&store, entries(&[("gone", "x")])).await;
            delete(&store, memory_id("gone")).await;
            store.flush().await.unwrap();
        }
        // The flusher task holds the database until it notices the store is gone.
        let mut attempts = 0;
        let store = loop {
            match SledMemoryStore::open(dir.path(), SyncMode::Sync) {
                Ok(store) => break store,
                Err(e) if attempts == 100 => panic!("{e}"),
                Err(_) => attempts += 1,
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        assert_eq!(search(&store, "persisted").await, ["a"]);
        assert_eq!(add(&store, "s", entries(&[("gone", "x")])).await, 0);
        memorize(&store, entries(&[("b", "later")])).await;
        assert_eq!(listed(&store, SCOPE).await, ["a", "b"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_to_one_scope_all_land() {
        let (_dir, store) = open();
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    add(
                        &store,
                        "s",
                        vec![entry(&format!("e{i}"), "concurrent words here")],
                    )
                    .await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), 1);
        }
        let s = stats(&store);
        assert_eq!((s.docs, s.total_len, s.next_seq), (16, 48, 16));
        assert_eq!(listed(&store, SCOPE).await.len(), 16);
    }

    /// A deterministic pseudo-random sequence (splitmix64).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Text like chat turns: a few very common words in most entries, some mid-frequency ones,
    /// and a long tail of rare ones; repeats give term frequencies above 1.
    fn generated_text(rng: &mut Rng) -> String {
        let words = 1 + rng.below(30);
        (0..words)
            .map(|_| match rng.below(10) {
                0..=4 => ["the", "is", "a", "my", "to"][rng.below(5) as usize].to_owned(),
                5..=7 => format!("mid{}", rng.below(40)),
                _ => format!("rare{}", rng.below(2000)),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// An entry of the generated corpus: random author, and a time (or none).
    fn generated_entry(rng: &mut Rng, id: &str) -> Entry {
        Entry {
            author: ["user", "model"][rng.below(2) as usize].into(),
            timestamp: (rng.below(10) > 0).then(|| Timestamp {
                seconds: rng.below(1000) as i64,
                nanos: 0,
            }),
            ..entry(id, &generated_text(rng))
        }
    }

    /// Fills SCOPE with a corpus long enough for common terms to span many blocks, then
    /// rewrites and deletes entries so that blocks are edited in the middle, split, emptied
    /// and created below a term's first block.
    async fn generated_corpus(store: &SledMemoryStore) {
        let mut rng = Rng(7);
        for session in 0..12 {
            let batch = (0..100)
                .map(|i| generated_entry(&mut rng, &format!("e{session}-{i}")))
                .collect();
            add(store, &format!("s{session}"), batch).await;
        }
        // In-place rewrites: new texts at old seqs.
        let rewritten = (0..60)
            .map(|i| {
                let id = format!("e0-{}", i * 3 % 100);
                Entry {
                    session_id: "s0".into(),
                    ..generated_entry(&mut rng, &id)
                }
            })
            .collect();
        memorize(store, rewritten).await;
        // "spread" first appears in one late entry, then in 600 earlier ones: below the first
        // block, then growing one block past twice its size.
        memorize(store, vec![entry("late", "spread the word")]).await;
        const { assert!(600 > 2 * postings::BLOCK_LEN) };
        let spread = (1..7)
            .flat_map(|session| (0..100).map(move |i| (session, i)))
            .map(|(session, i)| Entry {
                session_id: format!("s{session}"),
                ..entry(
                    &format!("e{session}-{i}"),
                    &format!("spread mid{} is", i % 7),
                )
            })
            .collect();
        memorize(store, spread).await;
        delete(store, DeleteTarget::Session("s5".into())).await;
        delete(store, memory_id("e7-3")).await;
        delete(store, memory_id("late")).await;
    }

    /// Every entry of a scope as a search sees it: (entry, term frequencies, length).
    async fn indexed(store: &SledMemoryStore, scope: Scope<'_>) -> Vec<(Entry, EntryRecord)> {
        let (entries, _) = store.list(scope, usize::MAX, "").await.unwrap();
        entries
            .into_iter()
            .map(|e| (e.clone(), EntryRecord::new(e)))
            .collect()
    }

    /// The results of `q` by scoring every entry: today's formula, spelled out separately.
    fn brute_force(docs: &[(Entry, EntryRecord)], q: &SearchQuery) -> Vec<(String, String, u64)> {
        let n = docs.iter().filter(|(_, r)| r.len > 0).count() as f64;
        let avg = docs.iter().map(|(_, r)| f64::from(r.len)).sum::<f64>() / n;
        let tf = |r: &EntryRecord, term: &str| {
            r.terms
                .iter()
                .find(|t| t.term == term)
                .map(|t| f64::from(t.tf))
        };
        let terms = text::query_terms(&q.text);
        let idfs: Vec<f64> = terms
            .iter()
            .map(|term| {
                let df = docs.iter().filter(|(_, r)| tf(r, term).is_some()).count() as f64;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let mut scored: Vec<(f64, usize)> = Vec::new();
        for (i, (_, r)) in docs.iter().enumerate() {
            let mut score = None;
            for (term, idf) in terms.iter().zip(&idfs) {
                if let Some(tf) = tf(r, term) {
                    let norm = 1.2 * (1.0 - 0.75 + 0.75 * f64::from(r.len) / avg);
                    *score.get_or_insert(0.0) += idf * tf * (1.2 + 1.0) / (tf + norm);
                }
            }
            if let Some(score) = score {
                scored.push((score, i));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored
            .into_iter()
            .filter(|&(_, i)| q.admits(&docs[i].0))
            .take(q.limit)
            .map(|(score, i)| {
                (
                    docs[i].0.id.clone(),
                    docs[i].0.session_id.clone(),
                    score.to_bits(),
                )
            })
            .collect()
    }

    /// Compares the store's results with [`brute_force`] for queries of common, mid-frequency
    /// and rare words, limits and filters; returns how many searches were compared.
    async fn assert_searches_exact(store: &SledMemoryStore) -> usize {
        let docs = indexed(store, SCOPE).await;
        let texts = [
            "the",
            "the is a",
            "my to the is a",
            "spread",
            "spread the",
            "mid3",
            "mid3 mid17 the",
            "the mid5 rare12 rare150",
            "rare1 rare2 rare3",
            "a rare77",
            "is mid1 mid2 mid3 mid4 mid5 my",
            "absent words only",
            "absent the",
        ];
        let t = |seconds| Some(Timestamp { seconds, nanos: 0 });
        let filters = [
            SearchQuery::default(),
            SearchQuery {
                author: Some("model".into()),
                ..Default::default()
            },
            SearchQuery {
                after: t(500),
                ..Default::default()
            },
            SearchQuery {
                before: t(100),
                ..Default::default()
            },
            SearchQuery {
                author: Some("user".into()),
                after: t(200),
                before: t(900),
                ..Default::default()
            },
            SearchQuery {
                author: Some("nobody".into()),
                ..Default::default()
            },
        ];
        let mut compared = 0;
        for text in texts {
            for filter in &filters {
                for limit in [1, 3, 10, 25, 100, 10_000] {
                    let q = SearchQuery {
                        text: text.into(),
                        limit,
                        ..filter.clone()
                    };
                    let hits = store.search(SCOPE, &q).await.unwrap();
                    let got: Vec<_> = hits
                        .into_iter()
                        .map(|h| (h.entry.id, h.entry.session_id, h.score.to_bits()))
                        .collect();
                    assert_eq!(got, brute_force(&docs, &q), "{q:?}");
                    compared += 1;
                }
            }
        }
        compared
    }

    /// Checks the posting blocks and document frequencies of SCOPE against its entries.
    async fn assert_index_consistent(store: &SledMemoryStore) {
        let mut expected = BTreeMap::<Vec<u8>, Vec<Posting>>::new();
        let scope = scope_key(SCOPE);
        for kv in store.entries.scan_prefix(&scope) {
            let (key, value) = kv.unwrap();
            let seq = key_seq(&key, scope.as_bytes().len()).unwrap();
            let record: EntryRecord = decode(&value, "entry").unwrap();
            for t in &record.terms {
                let prefix = scope.clone().str(&t.term).into_vec();
                let (tf, len) = (t.tf, record.len);
                expected
                    .entry(prefix)
                    .or_default()
                    .push(Posting { seq, tf, len });
            }
        }
        let mut stored = BTreeMap::<Vec<u8>, Vec<Posting>>::new();
        for kv in store.blocks.scan_prefix(&scope) {
            let (key, value) = kv.unwrap();
            let (prefix, first) = key.split_at(key.len() - 8);
            let first = u64_value(first, "key").unwrap();
            let mut block = Vec::new();
            postings::decode(first, &value, &mut block).unwrap();
            assert!(!block.is_empty(), "an empty block is stored");
            let list = stored.entry(prefix.to_vec()).or_default();
            assert!(list.last().is_none_or(|p| p.seq < first), "blocks overlap");
            list.extend(block);
        }
        assert_eq!(stored, expected);
        let df: BTreeMap<Vec<u8>, u64> = store
            .df
            .scan_prefix(&scope)
            .map(|kv| {
                let (key, value) = kv.unwrap();
                (key.to_vec(), postings::df_value(&value).unwrap())
            })
            .collect();
        let counts = expected.iter().map(|(k, v)| (k.clone(), v.len() as u64));
        assert_eq!(df, counts.collect());
    }

    #[tokio::test]
    async fn pruned_search_equals_exhaustive_scoring() {
        let (_dir, store) = open();
        generated_corpus(&store).await;
        assert_index_consistent(&store).await;
        // Common terms span many blocks, and one block was split.
        let the = store
            .blocks
            .scan_prefix(scope_key(SCOPE).str("the"))
            .count();
        assert!(the > 2, "{the} blocks");
        assert_eq!(
            store
                .df
                .get(scope_key(SCOPE).str("spread"))
                .unwrap()
                .map(|v| postings::df_value(&v).unwrap()),
            Some(500)
        );
        assert!(
            store
                .blocks
                .scan_prefix(scope_key(SCOPE).str("spread"))
                .count()
                >= 2
        );
        assert!(assert_searches_exact(&store).await > 400);
    }

    #[tokio::test]
    async fn converts_the_old_postings_layout() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let store = SledMemoryStore::from_db(db.clone(), SyncMode::Periodic).unwrap();
        generated_corpus(&store).await;
        let other = Scope {
            app_name: "app",
            user_id: "other",
        };
        let e = entry("o", "the other user");
        store.add_memories(other, vec![e]).await.unwrap();

        // Back to the old layout: one key per posting, no document frequencies. A conversion
        // cut short left new trees behind.
        let old = db.open_tree("postings").unwrap();
        for kv in store.entries.iter() {
            let (key, value) = kv.unwrap();
            let (scope, seq) = key.split_at(key.len() - 8);
            let record: EntryRecord = decode(&value, "entry").unwrap();
            for t in &record.terms {
                let key = [scope, Key::new().str(&t.term).as_bytes(), seq].concat();
                let posting = u64::from(t.tf) << 32 | u64::from(record.len);
                old.insert(key, &posting.to_be_bytes()[..]).unwrap();
            }
        }
        let the = scope_key(SCOPE).str("the");
        store.blocks.remove(the.clone().u64(0)).unwrap();
        store.df.insert(the, &1u64.to_be_bytes()[..]).unwrap();
        drop(old);

        let store = SledMemoryStore::from_db(db.clone(), SyncMode::Periodic).unwrap();
        assert!(!db.tree_names().iter().any(|name| name == OLD_POSTINGS));
        assert_index_consistent(&store).await;
        assert!(assert_searches_exact(&store).await > 400);
        let hits = store.search(other, &query("user")).await.unwrap();
        assert_eq!(hits.len(), 1);
        // Converted once: opening again changes nothing.
        let store = SledMemoryStore::from_db(db, SyncMode::Periodic).unwrap();
        assert_index_consistent(&store).await;
    }
}
