//! The index journal: posting changes a write committed that are not yet in the blocks.
//!
//! Putting a write's postings into its terms' blocks takes two keys per distinct term (the
//! block it appends and the term's df value): a few hundred for a session of turns, and most
//! of what a write costs. So a write commits its entries together with one record of the
//! `journal` tree, under (app, user, the write's generation), listing its posting changes in
//! order. Once [`MERGE_AFTER`] records of a scope wait, a background task merges them into the
//! blocks at once (a term several of them touch is rewritten once), in one transaction that
//! also removes the records it merged.
//!
//! The journal is durable with the write, so nothing acknowledged depends on the merge; the
//! records a restart finds are queued for the merger at open. Readers of the index (searches,
//! `indexed`) see every committed write: they merge the scope's journal first and read only
//! once it is empty, holding the scope's scan lock, which every commit to the scope takes. A
//! write that finds [`BACKLOG`] or more records of its scope waiting merges them before it
//! replies, so a merger that cannot keep up slows writers down instead of letting the journal
//! grow.
//!
//! Lock order: a scope's merge lock, then its scan lock. A merge holds the merge lock from
//! reading the journal to committing, so merges of one scope run one at a time; so does a
//! write that clears the scope (it removes the blocks, df values and records it scanned).

use std::{
    collections::{hash_map::Entry, BTreeSet, HashMap},
    convert::Infallible,
    hash::{Hash, Hasher},
    sync::{Mutex, MutexGuard, PoisonError, RwLockReadGuard},
};

use adk_common::keys::{prefix_end, Key, KeyReader};
use metrics::counter;
use sled::{transaction::TransactionError, Batch, IVec, Transactional};

use super::{
    super::{Result, Scope, StoreError},
    postings::{Posting, TermEdit},
    records::{decode, scope_key},
    SledMemoryStore,
};

/// Records of a scope waiting at which a write queues them for the background merger: merging
/// the records of this many writes at once writes a term they share once, not this many times.
pub const MERGE_AFTER: u64 = 16;

/// Records of a scope waiting at which a write merges them itself.
pub const BACKLOG: u64 = 4 * MERGE_AFTER;

/// Records merged per transaction at most, so a long journal (a restart after a burst) is
/// merged in bounded steps.
const RECORDS_PER_MERGE: usize = 256;

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
    pub fn apply(&mut self, store: &SledMemoryStore, ops: Vec<PostingOp>) -> Result<()> {
        for op in ops {
            let edit = match self.edits.entry(op.term) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let prefix = self.scope.clone().str(e.key());
                    e.insert(TermEdit::new(prefix, &store.df)?)
                }
            };
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
        store: &SledMemoryStore,
        blocks: &mut Batch,
        df: &mut Batch,
    ) -> Result<()> {
        for edit in self.edits.values_mut() {
            edit.finish(&store.blocks, blocks, df)?;
        }
        Ok(())
    }
}

/// Who merged a scope's journal: the label of `memory_journal_merged_records_total`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Merger {
    /// The background task.
    Background,
    /// A search (or `indexed`) that found records waiting.
    Reader,
    /// A write: one that found [`BACKLOG`] records waiting, or one that indexes directly.
    Writer,
}

impl Merger {
    fn label(self) -> &'static str {
        match self {
            Self::Background => "background",
            Self::Reader => "reader",
            Self::Writer => "writer",
        }
    }
}

/// The merge locks (striped by scope) and the scopes waiting for the background merger.
#[derive(Debug)]
pub(super) struct Merges {
    locks: [Mutex<()>; 64],
    queue: Mutex<Queue>,
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
        }
    }
}

/// The lock whatever poisoned it: the locks here guard no data a panic could leave half-made.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Merges {
    /// Held while merging `scope`'s journal, or clearing the scope.
    pub fn lock(&self, scope: &Key) -> MutexGuard<'_, ()> {
        let mut hasher = std::hash::DefaultHasher::new();
        scope.as_bytes().hash(&mut hasher);
        lock(&self.locks[(hasher.finish() % self.locks.len() as u64) as usize])
    }
}

impl SledMemoryStore {
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
            // Nothing is lost: the records stay, and the next reader of the scope merges them.
            if let Err(e) = self.merge_journal(&scope, Merger::Background) {
                tracing::warn!(error = %e, "merging the index journal failed");
            }
        }
    }

    /// After a write to `scope` committed a journal record at `generation`: merges the
    /// journal now, queues it for the merger, or leaves it to wait for more, by how many
    /// records wait (counted by generations, from the oldest record's).
    pub(super) fn journalled(&self, scope: &Key, generation: u64) -> Result<()> {
        let Some(kv) = self.journal.scan_prefix(scope).next() else {
            return Ok(());
        };
        let (key, _) = kv?;
        let oldest = super::records::key_seq(&key, scope.as_bytes().len())?;
        let waiting = generation.saturating_sub(oldest) + 1;
        if waiting >= BACKLOG {
            self.merge_journal(scope, Merger::Writer)?;
        } else if waiting >= MERGE_AFTER {
            self.merge_later(scope);
        }
        Ok(())
    }

    /// The scope's scan lock, held shared, once its journal is merged: what a reader of its
    /// index holds while it reads. Runs on a blocking thread that holds no write gate guard.
    pub(super) fn settled(&self, scope: &Key) -> Result<RwLockReadGuard<'_, ()>> {
        loop {
            {
                let reading = self.scans.reading(scope);
                if self
                    .journal
                    .scan_prefix(scope)
                    .next()
                    .transpose()?
                    .is_none()
                {
                    return Ok(reading);
                }
            }
            let _writing = self.gate.writing_blocking();
            self.merge_journal(scope, Merger::Reader)?;
        }
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
                self.journal
                    .scan_prefix(scope)
                    .take(RECORDS_PER_MERGE)
                    .collect::<std::result::Result<Vec<(IVec, IVec)>, _>>()?
            };
            if records.is_empty() {
                return Ok(());
            }
            let mut edits = TermEdits::new(scope);
            let mut journal = Batch::default();
            for (key, value) in &records {
                let record: JournalRecord = decode(value, "journal record")?;
                edits.apply(self, record.ops)?;
                journal.remove(key.clone());
            }
            let (mut blocks, mut df) = (Batch::default(), Batch::default());
            edits.finish(self, &mut blocks, &mut df)?;
            let _writing = self.scans.writing(scope);
            let committed = (&self.blocks, &self.df, &self.journal)
                .transaction(|(b, d, j)| {
                    // Another store on the same database (a test reopening it while this one's
                    // merger runs) may have merged them meanwhile: then nothing is written, and
                    // the next round reads what is left.
                    for (key, _) in &records {
                        if j.get(key)?.is_none() {
                            return Ok(false);
                        }
                    }
                    b.apply_batch(&blocks)?;
                    d.apply_batch(&df)?;
                    j.apply_batch(&journal)?;
                    Ok(true)
                })
                .map_err(|e: TransactionError<Infallible>| match e {
                    TransactionError::Abort(never) => match never {},
                    TransactionError::Storage(e) => StoreError::from(e),
                })?;
            if committed {
                counter!("memory_journal_merged_records_total", "by" => by.label())
                    .increment(records.len() as u64);
            }
        }
    }

    /// Queues every scope that has journal records for the merger (at open: what a crash or
    /// shutdown left).
    pub(super) fn merge_left_records(&self) -> Result<()> {
        let mut next = self.journal.first()?;
        while let Some((key, _)) = next {
            let mut reader = KeyReader::new(&key);
            let (Some(app_name), Some(user_id)) = (reader.str(), reader.str()) else {
                return Err(StoreError::corrupt("journal key"));
            };
            let scope = scope_key(Scope {
                app_name: &app_name,
                user_id: &user_id,
            });
            self.merge_later(&scope);
            next = self
                .journal
                .range(prefix_end(scope.as_bytes())..)
                .next()
                .transpose()?;
        }
        Ok(())
    }
}
