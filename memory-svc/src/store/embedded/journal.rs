//! The index journal: posting changes a write committed that are not yet in the blocks.
//!
//! Putting a write's postings into its terms' blocks takes a key or two per distinct term (its
//! df value, and the block it appends once it has more than a few postings): a few hundred for
//! a session of turns, and most of what a write costs. So a write commits its entries together with one record of the
//! `journal` tree, under (app, user, the write's generation), listing its posting changes in
//! order, and holds them in memory too ([`super::pending`]), where searches read them beside
//! the blocks. Once enough changes of a scope wait (see [`Thresholds`]), a background task
//! merges its records into the blocks at once (a term several of them touch is rewritten once).
//! The more records a merge takes, the fewer times a term they share is rewritten: since no
//! search waits for a merge, merges wait for many. A merge commits term by term, in short
//! transactions, each term's df value noting the generation of the last record merged into it;
//! then it removes the records. A merge cut short (a crash) is taken up where it stopped: the
//! changes a term has merged are passed over, when the records are held again and merged again.
//!
//! The journal is durable with the write, so nothing acknowledged depends on the merge; the
//! records a restart finds are held again and queued for the merger at open. A write that finds
//! a backlog of its scope's changes waiting merges them before it replies, so a merger that
//! cannot keep up slows writers down instead of letting the journal grow; and once too many
//! wait in all scopes together, every scope holding some is queued, which bounds the memory
//! they take however many users are written to.
//!
//! Lock order: a scope's merge lock, then its scan lock. A merge holds the merge lock from
//! reading the journal to committing, so merges of one scope run one at a time; so does a
//! write that clears the scope (it removes the blocks, df values and records it scanned).

use std::{
    collections::{hash_map::Entry, BTreeSet, HashMap},
    convert::Infallible,
    hash::{Hash, Hasher},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, MutexGuard, PoisonError,
    },
};

use adk_common::{
    keys::Key,
    kv::{Batch, TransactionError, Transactional},
};
use metrics::counter;

use super::{
    super::{Result, StoreError},
    postings::{Posting, TermEdit},
    records::{decode, key_seq},
    EmbeddedMemoryStore,
};

/// When journal records are merged, by the posting changes that wait, and how many a merge
/// takes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Thresholds {
    /// Changes of a scope at which a write queues the scope for the background merger.
    pub merge_after: usize,
    /// Changes of a scope at which a write merges them itself.
    pub backlog: usize,
    /// Changes in all scopes together at which a write queues every scope holding some for
    /// the merger; at twice as many, a write merges its own scope itself.
    pub held_at_most: usize,
    /// Bytes of journal records (as stored) one round of a merge reads at most (but one record,
    /// whatever its size).
    pub merge_bytes: usize,
}

/// Bytes a change waiting for a merge takes in memory: 32 of its own, plus its share of its
/// term's entry in the map (measured: 47 MB for a million).
pub(super) const CHANGE_BYTES: usize = 48;

/// A merge holds about this many times the bytes of the records it reads: their changes decoded,
/// and the blocks of their terms read and rewritten (measured: 58 MB for records of 14 MB).
pub(super) const MERGE_EXPANSION: usize = 4;

impl Default for Thresholds {
    /// A scope's records are merged about every 200 sessions of 20 turns: merging the records
    /// of many writes at once writes a term they share once, not once per write (measured in
    /// BENCHMARKS.md, "Ingestion: searches read what waits for a merge"). A change waiting
    /// takes [`CHANGE_BYTES`].
    fn default() -> Self {
        Self {
            merge_after: 1 << 18,
            backlog: 1 << 20,
            held_at_most: 1 << 20,
            merge_bytes: usize::MAX,
        }
    }
}

impl Thresholds {
    /// The defaults, lowered so that the changes waiting take `pending` bytes at most (a write
    /// merges its own scope at twice `held_at_most`), and a merge about `merging` bytes.
    pub fn within(pending: u64, merging: u64) -> Self {
        let bytes = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
        let all = Self::default();
        let held_at_most = all
            .held_at_most
            .min(bytes(pending) / CHANGE_BYTES / 2)
            .max(1);
        Self {
            merge_after: all.merge_after.min(held_at_most / 2).max(1),
            backlog: all.backlog.min(held_at_most * 2),
            held_at_most,
            merge_bytes: bytes(merging) / MERGE_EXPANSION,
        }
    }
}

/// Records merged at once at most, so a long journal (a restart after a burst) is merged in
/// bounded steps.
const RECORDS_PER_MERGE: usize = 256;

/// Terms whose blocks one transaction of a merge rewrites: a scope's writes wait for the
/// transaction that commits (and the store's other writers, the database taking one at a time),
/// so a merge of many
/// records commits term by term, each term once, in transactions of a few milliseconds.
const TERMS_PER_COMMIT: usize = 256;

/// What a write changes in the postings, in the order it changes them.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct JournalRecord {
    #[prost(message, repeated, tag = "1")]
    pub ops: Vec<PostingOp>,
}

/// One posting inserted or removed.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PostingOp {
    #[prost(string, tag = "1")]
    pub term: String,
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    /// Removes the term's posting of `seq` (the other fields are then unused).
    #[prost(bool, tag = "3")]
    pub remove: bool,
    #[prost(uint32, tag = "4")]
    pub tf: u32,
    #[prost(uint32, tag = "5")]
    pub len: u32,
    /// The posting is of a new entry, above every seq of the term so far.
    #[prost(bool, tag = "6")]
    pub append: bool,
}

impl JournalRecord {
    pub fn insert(&mut self, term: &str, p: Posting, append: bool) {
        self.ops.push(PostingOp {
            term: term.to_owned(),
            seq: p.seq,
            remove: false,
            tf: p.tf,
            len: p.len,
            append,
        });
    }

    pub fn remove(&mut self, term: &str, seq: u64) {
        self.ops.push(PostingOp {
            term: term.to_owned(),
            seq,
            remove: true,
            ..PostingOp::default()
        });
    }
}

/// Posting changes applied to a scope's blocks and df values, by term: what a merge does
/// with journal records, and a write indexing directly.
pub(super) struct TermEdits<'a> {
    scope: &'a Key,
    edits: HashMap<String, TermEdit>,
}

impl<'a> TermEdits<'a> {
    pub fn new(scope: &'a Key) -> Self {
        Self {
            scope,
            edits: HashMap::new(),
        }
    }

    /// Applies `ops` in order, reading the blocks and df values they change from `store`.
    /// `record` is the generation of the journal record they come from: the changes of a term
    /// that has it merged already are passed over, and the others note it.
    pub fn apply(
        &mut self,
        store: &EmbeddedMemoryStore,
        ops: Vec<PostingOp>,
        record: Option<u64>,
    ) -> Result<()> {
        for op in ops {
            let edit = match self.edits.entry(op.term) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let prefix = self.scope.clone().str(e.key());
                    e.insert(TermEdit::new(prefix, &store.df)?)
                }
            };
            if let Some(generation) = record {
                if edit.has_merged(generation) {
                    continue;
                }
                edit.merging(generation);
            }
            if op.remove {
                edit.remove(&store.blocks, op.seq)?;
            } else {
                let posting = Posting {
                    seq: op.seq,
                    tf: op.tf,
                    len: op.len,
                };
                edit.insert(&store.blocks, posting, op.append)?;
            }
        }
        Ok(())
    }

    /// Queues the changed blocks and df values into the batches of their trees.
    pub fn finish(
        mut self,
        store: &EmbeddedMemoryStore,
        blocks: &mut Batch,
        df: &mut Batch,
    ) -> Result<()> {
        for edit in self.edits.values_mut() {
            edit.finish(&store.blocks, blocks, df)?;
        }
        Ok(())
    }

    /// The changed blocks and df values in batches of up to `terms` terms each, in term order:
    /// a batch then changes neighbouring keys, so the tree pages a merge rewrites are written
    /// about once each, not once by every batch whose terms fall in them.
    fn finish_by(self, store: &EmbeddedMemoryStore, terms: usize) -> Result<Vec<TermBatch>> {
        let mut edits: Vec<_> = self.edits.into_iter().collect();
        edits.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        let mut batches = Vec::with_capacity(edits.len().div_ceil(terms));
        for chunk in edits.chunks_mut(terms) {
            let mut batch = TermBatch::default();
            for (term, edit) in chunk {
                edit.finish(&store.blocks, &mut batch.blocks, &mut batch.df)?;
                batch.terms.push(std::mem::take(term));
            }
            batches.push(batch);
        }
        Ok(batches)
    }
}

/// What a merge commits at once: the blocks and df values of some terms.
#[derive(Default)]
struct TermBatch {
    terms: Vec<String>,
    blocks: Batch,
    df: Batch,
}

/// Who merged a scope's journal: the label of `memory_journal_merged_records_total`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Merger {
    /// The background task.
    Background,
    /// A write: one that found a backlog of changes waiting, or one that indexes directly.
    Writer,
}

impl Merger {
    fn label(self) -> &'static str {
        match self {
            Self::Background => "background",
            Self::Writer => "writer",
        }
    }
}

/// The merge locks (striped by scope) and the scopes waiting for the background merger.
#[derive(Debug)]
pub(super) struct Merges {
    locks: [Mutex<()>; 64],
    queue: Mutex<Queue>,
    /// About the bytes the merges under way hold (see [`MERGE_EXPANSION`]).
    held: AtomicUsize,
}

/// A merge round's records, counted in [`Merges::held`] while it runs.
struct MergeHeld<'a> {
    merges: &'a Merges,
    bytes: usize,
}

impl<'a> MergeHeld<'a> {
    fn new(merges: &'a Merges, records: &[(Vec<u8>, Vec<u8>)]) -> Self {
        let read: usize = records.iter().map(|(_, value)| value.len()).sum();
        let bytes = read.saturating_mul(MERGE_EXPANSION);
        merges.held.fetch_add(bytes, Ordering::Relaxed);
        Self { merges, bytes }
    }
}

impl Drop for MergeHeld<'_> {
    fn drop(&mut self) {
        self.merges.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Queue {
    scopes: BTreeSet<Key>,
    /// A merger task is running: it takes what is queued before it ends.
    running: bool,
}

impl Default for Merges {
    fn default() -> Self {
        Self {
            locks: std::array::from_fn(|_| Mutex::new(())),
            queue: Mutex::default(),
            held: AtomicUsize::new(0),
        }
    }
}

/// The lock whatever poisoned it: the locks here guard no data a panic could leave half-made.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Merges {
    /// About the bytes the merges under way hold.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Held while merging `scope`'s journal, or clearing the scope.
    pub fn lock(&self, scope: &Key) -> MutexGuard<'_, ()> {
        let mut hasher = std::hash::DefaultHasher::new();
        scope.as_bytes().hash(&mut hasher);
        lock(&self.locks[(hasher.finish() % self.locks.len() as u64) as usize])
    }
}

impl EmbeddedMemoryStore {
    /// Queues `scope` for the background merger, starting it unless it runs.
    pub(super) fn merge_later(&self, scope: &Key) {
        let start = {
            let mut queue = lock(&self.merges.queue);
            queue.scopes.insert(scope.clone());
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            let store = self.clone();
            self.work.spawn_blocking(move || store.merge_queued());
        }
    }

    /// The background merger: merges queued scopes until none is left.
    fn merge_queued(&self) {
        loop {
            let next = {
                let mut queue = lock(&self.merges.queue);
                let next = queue.scopes.pop_first();
                queue.running = next.is_some();
                next
            };
            let Some(scope) = next else { return };
            let _writing = self.gate.writing_blocking();
            // Nothing is lost: the records stay, and the next merge of the scope takes them.
            if let Err(e) = self.merge_journal(&scope, Merger::Background) {
                tracing::warn!(error = %e, "merging the index journal failed");
            }
        }
    }

    /// After a write to `scope` committed a journal record: merges the scope's journal now,
    /// queues it (or every scope holding changes) for the merger, or leaves it to wait for
    /// more, by how many changes wait.
    pub(super) fn journalled(&self, scope: &Key) -> Result<()> {
        let (waiting, all) = self.pending.len(scope);
        let at = self.thresholds;
        if waiting >= at.backlog || all >= at.held_at_most.saturating_mul(2) {
            self.merge_journal(scope, Merger::Writer)?;
        } else if all >= at.held_at_most {
            for scope in self.pending.scopes() {
                self.merge_later(&scope);
            }
        } else if waiting >= at.merge_after {
            self.merge_later(scope);
        }
        Ok(())
    }

    /// Merges `scope`'s journal into its blocks and df values. The caller holds a write gate
    /// guard: a snapshot must not see a merge half done (the blocks without the records, say).
    pub(super) fn merge_journal(&self, scope: &Key, by: Merger) -> Result<()> {
        let merging = self.merges.lock(scope);
        self.merge_held(scope, by, &merging)
    }

    /// [`Self::merge_journal`] for a caller that holds the scope's merge lock.
    pub(super) fn merge_held(
        &self,
        scope: &Key,
        by: Merger,
        _merging: &MutexGuard<'_, ()>,
    ) -> Result<()> {
        loop {
            // Read while no commit to the scope can add a record: a record is never read
            // without those of earlier generations.
            let records = {
                let _reading = self.scans.reading(scope);
                let mut records: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let mut bytes = 0;
                for kv in self.journal.scan_prefix(scope).take(RECORDS_PER_MERGE) {
                    let (key, value) = kv?;
                    bytes += value.len();
                    if bytes > self.thresholds.merge_bytes && !records.is_empty() {
                        break;
                    }
                    records.push((key, value));
                }
                records
            };
            let _held = MergeHeld::new(&self.merges, &records);
            let (Some((first, _)), Some((last, _))) = (records.first(), records.last()) else {
                return Ok(());
            };
            let last = key_seq(last, scope.as_bytes().len())?;
            let mut edits = TermEdits::new(scope);
            let mut journal = Batch::default();
            for (key, value) in &records {
                let record: JournalRecord = decode(value, "journal record")?;
                let generation = key_seq(key, scope.as_bytes().len())?;
                edits.apply(self, record.ops, Some(generation))?;
                journal.remove(key.clone());
            }
            // Each term's blocks and df value are committed at once, with the generation of the
            // last record merged into them: a merge cut short is taken up where it stopped.
            for batch in edits.finish_by(self, TERMS_PER_COMMIT)? {
                let _writing = self.scans.writing(scope);
                let committed = (&self.blocks, &self.df, &self.journal)
                    .transaction(|(b, d, j)| {
                        // Another store on the same database (a test reopening it while this
                        // one's merger runs) may have merged them meanwhile: then nothing is
                        // written, and the next round reads what is left.
                        if j.get(first)?.is_none() {
                            return Ok(false);
                        }
                        b.apply_batch(&batch.blocks)?;
                        d.apply_batch(&batch.df)?;
                        Ok(true)
                    })
                    .map_err(|e: TransactionError<Infallible>| match e {
                        TransactionError::Abort(never) => match never {},
                        TransactionError::Storage(e) => StoreError::from(e),
                    })?;
                if !committed {
                    break;
                }
                // Still under the scan lock: a search sees a term's changes in one place.
                self.pending.merged_terms(scope, &batch.terms, last);
            }
            let _writing = self.scans.writing(scope);
            let removed = records.len();
            self.journal.apply_batch(journal)?;
            self.pending.merged(scope, last);
            counter!("memory_journal_merged_records_total", "by" => by.label())
                .increment(removed as u64);
        }
    }

    /// Queues every scope that has journal records for the merger (at open: what a crash or
    /// shutdown left).
    pub(super) fn merge_left_records(&self) {
        for scope in self.pending.scopes() {
            self.merge_later(&scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use adk_common::durability::SyncMode;

    use super::{
        super::{super::contract, records::scope_key},
        *,
    };
    use crate::analysis::Analyzer;

    /// Past twice `held_at_most` changes in all scopes, a write merges its own scope before it
    /// returns, however few changes it has; below, it only queues the scopes.
    #[tokio::test]
    async fn a_write_past_twice_the_memory_bound_merges_its_own_scope() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
        let store = EmbeddedMemoryStore {
            thresholds: Thresholds {
                merge_after: usize::MAX,
                backlog: usize::MAX,
                held_at_most: 5,
                merge_bytes: usize::MAX,
            },
            ..store
        };
        // As if the merger were busy: what is queued waits.
        lock(&store.merges.queue).running = true;
        let scope = scope_key(contract::SCOPE);
        // 4 changes: "words", its own word, the author's term and name term.
        let write = |id: &str| contract::memorize(&store, contract::entries(&[(id, "words w")]));
        write("a").await;
        assert_eq!(store.pending.len(&scope), (4, 4));
        write("b").await;
        assert_eq!(store.pending.len(&scope), (8, 8));
        assert!(lock(&store.merges.queue).scopes.contains(&scope));
        write("c").await;
        assert_eq!(store.pending.len(&scope), (0, 0));
        assert!(store.journal.is_empty().unwrap());
    }
}
