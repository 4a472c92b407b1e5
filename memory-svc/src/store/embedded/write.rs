//! Writes to the embedded store: loading what a [`plan`] needs, and committing its edits.
//!
//! The store's transactions read and write keys, not ranges, so what a write reads is loaded
//! with ordinary reads, the plan is made from it, and its edits become batches committed as one
//! transaction over all trees.
//! Every commit bumps the scope's `Stats::generation`; the transaction checks it is still the
//! one the load saw, and if another write got in between, the write is loaded and planned
//! again. This runs on a blocking thread (see [`super::EmbeddedMemoryStore::blocking`]).

use std::{
    collections::{btree_map::Entry, BTreeMap, BTreeSet},
    convert::Infallible,
};

use adk_common::{
    keys::Key,
    kv::{Batch, TransactionError, Transactional, Tree},
};
use metrics::gauge;
use prost::Message;

use super::{
    super::{
        plan::{self, Edit, Loaded, Plan, Stored, Write},
        vectors::{self, VectorEdits, Vectors},
        Result, RevisionRecord, StoreError,
    },
    journal::{JournalRecord, Merger, TermEdits},
    metadata,
    postings::Posting,
    records::{decode, key_seq, time_value, u64_value, EntryRecord, Stats},
    EmbeddedMemoryStore,
};

impl EmbeddedMemoryStore {
    /// Loads, plans and commits `write` in the scope whose keys start with `scope`, until it
    /// commits without a concurrent write having come between; returns the call's count. Not
    /// yet durable.
    pub(super) fn write_now(
        &self,
        scope: &Key,
        write: &Write,
        vectors: &Vectors,
        revisions: &[RevisionRecord],
    ) -> Result<u32> {
        // Revisions are numbered once, in order, so a write planned again keeps their numbers.
        let revision_seqs = revisions
            .iter()
            .map(|_| self.db.generate_id())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // The texts are analysed before planning, so that a concurrent commit during the
        // analysis does not make the write plan and build its batches twice; but only after a
        // first load, so that turns the scope holds unchanged are not analysed (a session added
        // again after every turn has only its new turns analysed). Attempts planned again reuse
        // the analysis, and the first load when nothing was committed to the scope since.
        let (first_base, stats) = self.stats(scope)?;
        let first = self.load(scope, write, &stats, first_base.is_some())?;
        let mut analysis = plan::prepared(write, self.analyzer, &first.entries);
        let mut first = Some(first);
        loop {
            let (base, stats) = self.stats(scope)?;
            let loaded = match first.take() {
                Some(loaded) if base == first_base => loaded,
                _ => self.load(scope, write, &stats, base.is_some())?,
            };
            let plan = plan::plan(write, loaded, &mut analysis);
            // A plan that changes nothing commits nothing (but its revisions).
            if plan.edits.is_empty() && revisions.is_empty() {
                return Ok(plan.count);
            }
            let (count, delta) = (plan.count, plan.entry_delta());
            let vector_edits = vectors::edits(&plan.edits, vectors);
            // A write that clears the scope removes the blocks, df values and journal records it
            // scans, and one with many postings (a re-indexing) is not journalled but applied
            // to the blocks: either holds the merge lock until it commits, so that no merge
            // changes them in between, and applies its postings after the journal's.
            let direct = posting_changes(&plan) > DIRECT_AFTER
                || plan.edits.iter().any(|edit| matches!(edit, Edit::Clear));
            let merging = direct.then(|| self.merges.lock(scope));
            if let Some(held) = &merging {
                self.merge_held(scope, Merger::Writer, held)?;
            }
            let mut batches = Batches::of(self, scope, plan, stats, direct)?;
            batches.vectors = self.vector_batch(scope, &vector_edits)?;
            batches.vector_edits = vector_edits;
            for (revision, &seq) in revisions.iter().zip(&revision_seqs) {
                batches
                    .revisions
                    .insert(scope.clone().u64(seq), revision.encode_to_vec());
            }
            let journalled = batches.record.is_some();
            match batches.commit(self, scope, base) {
                Ok(true) => {
                    if delta != 0 {
                        gauge!("store_memories").increment(delta as f64);
                    }
                    if journalled {
                        self.journalled(scope)?;
                    }
                    return Ok(count);
                }
                Ok(false) => continue,
                Err(e) => {
                    // An I/O error (a full disk, say) stops all writes until a restart.
                    if let adk_common::kv::Error::Io(io) = &e {
                        self.commit.fail(&io.to_string());
                    }
                    return Err(e.into());
                }
            }
        }
    }

    /// What `write` reads, with the scope's `stats` as loaded. Every entry is read once,
    /// however many of the reads name it.
    fn load(&self, scope: &Key, write: &Write, stats: &Stats, written: bool) -> Result<Loaded> {
        let reads = write.reads();
        let mut loaded = Loaded {
            stats: stats.counters(),
            written,
            ..Loaded::default()
        };
        let mut found = BTreeMap::new();
        for (session_id, id) in reads.slots {
            if let Some(seq) = self.buckets.get(scope.clone().str(session_id).str(id))? {
                self.load_entry(scope, u64_value(&seq, "slot")?, &mut found)?;
            }
        }
        let mut sessions: BTreeSet<String> = (reads.session.into_iter())
            .chain(reads.sessions)
            .map(str::to_owned)
            .collect();
        // The id's entries, and for a delete by id the sessions they are in.
        if let Some(id) = reads.id.or(reads.sessions_holding) {
            let prefix = scope.clone().str(id);
            for key in self.ids.scan_prefix(&prefix).keys() {
                let seq = key_seq(&key?, prefix.as_bytes().len())?;
                let stored = self.load_entry(scope, seq, &mut found)?;
                if reads.sessions_holding.is_some() && !stored.entry.session_id.is_empty() {
                    sessions.insert(stored.entry.session_id.clone());
                }
            }
        }
        for session_id in sessions {
            let prefix = scope.clone().str(&session_id);
            for key in self.turns.scan_prefix(&prefix).keys() {
                let seq = key_seq(&key?, prefix.as_bytes().len())?;
                self.load_entry(scope, seq, &mut found)?;
            }
        }
        for id in reads.tombstones {
            if self.tombstones.contains_key(scope.clone().str(id))? {
                loaded.tombstoned.insert(id.to_owned());
            }
        }
        if reads.count {
            loaded.count = count_keys(&self.entries, scope)?;
        }
        if let Some(session_id) = reads.tail {
            // The session's turns are keyed by seq: its last one is the last key.
            let prefix = scope.clone().str(session_id);
            if let Some(key) = self.turns.scan_prefix(&prefix).keys().next_back() {
                let seq = key_seq(&key?, prefix.as_bytes().len())?;
                loaded.tail = Some(self.stored(scope, seq)?);
            }
        }
        if reads.all {
            let prefix_len = scope.as_bytes().len();
            for kv in self.entries.scan_prefix(scope) {
                let (key, value) = kv?;
                let (seq, record) = (key_seq(&key, prefix_len)?, decode(&value, "entry")?);
                found.insert(seq, EntryRecord::into_stored(record, seq));
            }
        }
        loaded.entries = found.into_values().collect();
        Ok(loaded)
    }

    /// The entry stored at `seq`, read into `found` unless it is there already.
    fn load_entry<'a>(
        &self,
        scope: &Key,
        seq: u64,
        found: &'a mut BTreeMap<u64, Stored>,
    ) -> Result<&'a Stored> {
        Ok(match found.entry(seq) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(self.stored(scope, seq)?),
        })
    }

    /// The stored entry an index points at.
    fn stored(&self, scope: &Key, seq: u64) -> Result<Stored> {
        self.record(scope, seq)?
            .map(|record| record.into_stored(seq))
            .ok_or_else(|| StoreError::corrupt(format!("indexed entry {seq} is missing")))
    }
}

/// A plan's edits as batches over the store's trees, and the stats to commit with them.
struct Batches {
    stats: Stats,
    entries: Batch,
    buckets: Batch,
    turns: Batch,
    ids: Batch,
    blocks: Batch,
    df: Batch,
    /// The write's journal record (see [`super::journal`]), and what clearing removes.
    journal: Batch,
    /// The record in `journal`, if the write has one.
    record: Option<JournalRecord>,
    tombstones: Batch,
    /// See [`EmbeddedMemoryStore::vector_batch`].
    vectors: Batch,
    /// What `vectors` does, for the vector cache once committed.
    vector_edits: VectorEdits,
    revisions: Batch,
    expiries: Batch,
    /// See [`super::metadata`].
    metadata: Batch,
    /// The entries whose validity is closed (see [`crate::validity`]).
    closed: Batch,
}

impl Batches {
    /// Turns `plan`, made against `stats`, into batches: its postings as a journal record, or
    /// if `direct` as the changes of the blocks and df values (read from the store).
    fn of(
        store: &EmbeddedMemoryStore,
        scope: &Key,
        plan: Plan,
        stats: Stats,
        direct: bool,
    ) -> Result<Self> {
        let mut b = Self {
            stats: Stats {
                docs: plan.stats.docs,
                total_len: plan.stats.total_len,
                next_seq: plan.stats.next_seq,
                generation: stats.generation + 1,
            },
            entries: Batch::default(),
            buckets: Batch::default(),
            turns: Batch::default(),
            ids: Batch::default(),
            blocks: Batch::default(),
            df: Batch::default(),
            journal: Batch::default(),
            record: None,
            tombstones: Batch::default(),
            vectors: Batch::default(),
            vector_edits: VectorEdits::default(),
            revisions: Batch::default(),
            expiries: Batch::default(),
            metadata: Batch::default(),
            closed: Batch::default(),
        };
        // The postings it changes, in order.
        let mut record = JournalRecord::default();
        // Seqs from this one on are new entries: their postings are appends.
        let first_new_seq = stats.next_seq;
        // The expiries of generated memories, keyed by id (such a memory has no session, so
        // one id has one at most): those of removed entries go, then those inserted are set.
        let mut expiries = BTreeMap::new();
        for edit in plan.edits {
            match edit {
                Edit::Remove(old) => {
                    let (entry, seq) = (&old.entry, old.seq);
                    b.entries.remove(scope.clone().u64(seq));
                    b.buckets
                        .remove(scope.clone().str(&entry.session_id).str(&entry.id));
                    if !entry.session_id.is_empty() {
                        b.turns
                            .remove(scope.clone().str(&entry.session_id).u64(seq));
                    }
                    b.ids.remove(scope.clone().str(&entry.id).u64(seq));
                    for key in metadata::keys(scope, seq, &entry.custom_metadata) {
                        b.metadata.remove(key);
                    }
                    if entry.validity.until.is_some() {
                        b.closed.remove(scope.clone().u64(seq));
                    }
                    if entry.kind.expire_ms.is_some() {
                        expiries.entry(entry.id.clone()).or_insert(None);
                    }
                    for term in &old.terms {
                        record.remove(term, seq);
                    }
                }
                Edit::Insert {
                    seq,
                    entry,
                    context,
                    terms: indexed,
                } => {
                    let stored = EntryRecord::new(entry, context, indexed);
                    let append = seq >= first_new_seq;
                    for t in &stored.terms {
                        let posting = Posting {
                            seq,
                            tf: t.tf,
                            len: stored.len,
                        };
                        record.insert(&t.term, posting, append);
                    }
                    b.buckets.insert(
                        scope.clone().str(&stored.session_id).str(&stored.id),
                        &seq.to_be_bytes()[..],
                    );
                    if !stored.session_id.is_empty() {
                        b.turns
                            .insert(scope.clone().str(&stored.session_id).u64(seq), Vec::new());
                    }
                    b.ids
                        .insert(scope.clone().str(&stored.id).u64(seq), Vec::new());
                    if let Some(at) = stored.expire_ms {
                        expiries.insert(stored.id.clone(), Some(at));
                    }
                    for key in metadata::keys(scope, seq, &stored.custom_metadata) {
                        b.metadata.insert(key, &seq.to_be_bytes()[..]);
                    }
                    if let Some(until) = &stored.invalid_at {
                        b.closed.insert(scope.clone().u64(seq), time_value(until));
                    }
                    b.entries
                        .insert(scope.clone().u64(seq), stored.encode_to_vec());
                }
                Edit::Tombstone(id) => b.tombstones.insert(scope.clone().str(&id), Vec::new()),
                Edit::Lift(id) => b.tombstones.remove(scope.clone().str(&id)),
                Edit::Clear => {
                    remove_all(&store.entries, scope, &mut b.entries)?;
                    remove_all(&store.buckets, scope, &mut b.buckets)?;
                    remove_all(&store.turns, scope, &mut b.turns)?;
                    remove_all(&store.ids, scope, &mut b.ids)?;
                    remove_all(&store.blocks, scope, &mut b.blocks)?;
                    remove_all(&store.df, scope, &mut b.df)?;
                    remove_all(&store.journal, scope, &mut b.journal)?;
                    remove_all(&store.tombstones, scope, &mut b.tombstones)?;
                    remove_all(&store.expiries, scope, &mut b.expiries)?;
                    remove_all(&store.metadata, scope, &mut b.metadata)?;
                    remove_all(&store.closed, scope, &mut b.closed)?;
                }
            }
        }
        if direct {
            let mut edits = TermEdits::new(scope);
            edits.apply(store, record.ops, None)?;
            edits.finish(store, &mut b.blocks, &mut b.df)?;
        } else if !record.ops.is_empty() {
            b.journal.insert(
                scope.clone().u64(b.stats.generation),
                record.encode_to_vec(),
            );
            b.record = Some(record);
        }
        for (id, at) in expiries {
            let key = scope.clone().str(&id);
            match at {
                Some(at) => b.expiries.insert(key, &at.to_be_bytes()[..]),
                None => b.expiries.remove(key),
            }
        }
        Ok(b)
    }

    /// Commits the batches unless another write to the scope committed since its stats record
    /// was `base`; `false` means the write must be planned again.
    fn commit(
        self,
        store: &EmbeddedMemoryStore,
        scope: &Key,
        base: Option<Vec<u8>>,
    ) -> std::result::Result<bool, adk_common::kv::Error> {
        let trees = (
            &store.entries,
            &store.buckets,
            &store.turns,
            &store.ids,
            &store.blocks,
            &store.df,
            &store.journal,
            &store.tombstones,
            &store.stats,
            &store.vectors,
            &store.revisions,
            &store.expiries,
            &store.metadata,
            &store.closed,
        );
        let _writing = store.scans.writing(scope);
        let committed = trees
            .transaction(
                |(
                    entries,
                    buckets,
                    turns,
                    ids,
                    blocks,
                    df,
                    journal,
                    tombstones,
                    stats,
                    vectors,
                    revisions,
                    expiries,
                    metadata,
                    closed,
                )| {
                    if stats.get(scope)? != base {
                        return Ok(false);
                    }
                    entries.apply_batch(&self.entries)?;
                    buckets.apply_batch(&self.buckets)?;
                    turns.apply_batch(&self.turns)?;
                    ids.apply_batch(&self.ids)?;
                    blocks.apply_batch(&self.blocks)?;
                    df.apply_batch(&self.df)?;
                    journal.apply_batch(&self.journal)?;
                    tombstones.apply_batch(&self.tombstones)?;
                    vectors.apply_batch(&self.vectors)?;
                    revisions.apply_batch(&self.revisions)?;
                    expiries.apply_batch(&self.expiries)?;
                    metadata.apply_batch(&self.metadata)?;
                    closed.apply_batch(&self.closed)?;
                    stats.insert(scope.as_bytes(), self.stats.encode_to_vec())?;
                    Ok(true)
                },
            )
            .map_err(|e: TransactionError<Infallible>| match e {
                TransactionError::Abort(never) => match never {},
                TransactionError::Storage(e) => e,
            })?;
        if committed {
            // Still holding the scan lock: see `VectorCache::apply` and `super::pending`.
            store
                .vector_cache
                .apply(scope.as_bytes(), &self.vector_edits);
            if let Some(record) = self.record {
                store.pending.add(scope, self.stats.generation, record.ops);
            }
        }
        Ok(committed)
    }
}

/// What a write of one entry holds while it is planned and committed, beside its text: the
/// entry's keys in every tree, its postings, its record encoded, and the database's copies of
/// them in the transaction. Together with [`COST_PER_BYTE`], a batch of 1,000 entries of 180 bytes
/// counts 7 MB, so that the writes' share of a 256 MiB pod's budget (16 MiB) lets two such
/// batches be analysed and committed at once: counted at 40 MB each (their RSS growth, which
/// includes the pages they bring into the database's cache, counted in its own share), they ran
/// one at
/// a time and ingestion took 1.8x as long as without the budget.
const COST_PER_ENTRY: u64 = 4 << 10;

/// ... and per byte of its text and metadata, analysed and stored.
const COST_PER_BYTE: u64 = 16;

/// About the bytes `write` holds while it is planned and committed: what it waits for in the
/// memory budget's share of writes. A delete or a re-indexing counts as one entry (what they
/// read is not known before).
pub(super) fn cost(write: &Write) -> u64 {
    let entries = write.entries();
    let bytes: usize = (entries.iter())
        .map(|e| e.content.encoded_len() + e.custom_metadata.len() + e.id.len())
        .sum();
    (entries.len().max(1) as u64) * COST_PER_ENTRY + bytes as u64 * COST_PER_BYTE
}

/// Posting changes above which a write applies them to the blocks rather than journal them:
/// a record is read whole by a merge, and a re-indexing changes every posting of the scope.
const DIRECT_AFTER: usize = 1 << 16;

/// How many postings `plan` inserts or removes.
fn posting_changes(plan: &Plan) -> usize {
    plan.edits
        .iter()
        .map(|edit| match edit {
            Edit::Insert { terms, .. } => terms.counts.len(),
            Edit::Remove(old) => old.terms.len(),
            Edit::Tombstone(_) | Edit::Lift(_) | Edit::Clear => 0,
        })
        .sum()
}

/// Queues the removal of every key of `tree` under `prefix`.
fn remove_all(tree: &Tree, prefix: &Key, batch: &mut Batch) -> Result<()> {
    for key in tree.scan_prefix(prefix).keys() {
        batch.remove(key?);
    }
    Ok(())
}

/// The number of keys of `tree` under `prefix`.
fn count_keys(tree: &Tree, prefix: &Key) -> Result<u64> {
    let mut n = 0;
    for key in tree.scan_prefix(prefix).keys() {
        key?;
        n += 1;
    }
    Ok(n)
}
