//! The journal's posting changes held in memory, by scope and term, from the commit that
//! journals them until the merge that puts them in the blocks: what a search reads beside the
//! blocks, so that no search waits for a merge and merges can wait until many records share
//! their terms.
//!
//! A record enters [`Pending`] in the commit that writes it (or, after a restart, when the
//! store opens) and leaves it term by term, in the commits of the merge that moves it into the
//! blocks. Both happen while the scope's scan lock is held exclusively, and a search holds it
//! shared from reading the changes of its terms to reading their blocks: it sees each change in
//! exactly one of the two places.
//!
//! A search reads a term as its blocks with the term's changes laid over them ([`Overlay`]):
//! the last change of a seq decides its posting (a removal hides the block's), and the term's
//! document frequency is the stored one corrected by the seqs the changes add or hide.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use adk_common::{
    keys::{Key, KeyReader},
    kv::Tree,
};
use metrics::gauge;

use super::{
    super::{
        maxscore::{Ceiling, Cursor},
        Result, Scope, StoreError,
    },
    journal::{JournalRecord, PostingOp},
    postings::{self, merged_generation, Posting},
    records::{decode, scope_key},
};

/// One posting change of a journal record (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Change {
    /// The record's generation.
    generation: u64,
    seq: u64,
    tf: u32,
    len: u32,
    remove: bool,
    /// The posting is of a new entry: the blocks cannot hold its seq.
    append: bool,
}

impl Change {
    /// The posting the change inserts; `None` for a removal.
    fn posting(&self) -> Option<Posting> {
        (!self.remove).then_some(Posting {
            seq: self.seq,
            tf: self.tf,
            len: self.len,
        })
    }
}

/// The changes of one scope, by term, each term's in commit order.
#[derive(Debug, Default)]
struct ScopeChanges {
    terms: HashMap<String, Vec<Change>>,
    len: usize,
}

#[derive(Debug, Default)]
struct Held {
    scopes: BTreeMap<Key, ScopeChanges>,
    /// Changes held, in all scopes.
    len: usize,
}

/// Every journalled posting change not yet merged into the blocks. Searches of every scope
/// read it side by side; commits and merges take it alone, briefly.
#[derive(Debug, Default)]
pub(super) struct Pending(RwLock<Held>);

impl Pending {
    /// The changes of every record in `journal` that are not in the blocks yet (see `df`):
    /// what a store finds when it opens.
    pub fn load(journal: &Tree, df: &Tree) -> Result<Self> {
        let pending = Self::default();
        // By term key: the generation of the last record merged into the term.
        let mut merged = HashMap::<Key, u64>::new();
        for kv in journal.iter() {
            let (key, value) = kv?;
            let mut reader = KeyReader::new(&key);
            let (Some(app_name), Some(user_id), Some(generation)) =
                (reader.str(), reader.str(), reader.u64())
            else {
                return Err(StoreError::corrupt("journal key"));
            };
            let mut record: JournalRecord = decode(&value, "journal record")?;
            let scope = scope_key(Scope {
                app_name: &app_name,
                user_id: &user_id,
            });
            let mut waiting = Vec::with_capacity(record.ops.len());
            for op in record.ops.drain(..) {
                let term = scope.clone().str(&op.term);
                let through = match merged.get(&term) {
                    Some(&through) => through,
                    None => {
                        let through = match df.get(&term)? {
                            Some(value) => merged_generation(&value)?,
                            None => 0,
                        };
                        *merged.entry(term).or_insert(through)
                    }
                };
                if generation > through {
                    waiting.push(op);
                }
            }
            pending.add(&scope, generation, waiting);
        }
        Ok(pending)
    }

    // A panic cannot leave the map half-changed in a way that matters: a change is listed in
    // its term whole, and the counts only decide when to merge.
    fn held(&self) -> RwLockReadGuard<'_, Held> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn held_mut(&self) -> RwLockWriteGuard<'_, Held> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the changes of the record of `generation` just committed to `scope`.
    pub fn add(&self, scope: &Key, generation: u64, ops: Vec<PostingOp>) {
        let added = ops.len();
        let mut held = self.held_mut();
        let changes = held.scopes.entry(scope.clone()).or_default();
        for op in ops {
            let change = Change {
                generation,
                seq: op.seq,
                tf: op.tf,
                len: op.len,
                remove: op.remove,
                append: op.append,
            };
            match changes.terms.get_mut(op.term.as_str()) {
                Some(list) => list.push(change),
                None => {
                    changes.terms.insert(op.term, vec![change]);
                }
            }
        }
        changes.len += added;
        held.len += added;
        // Added and subtracted rather than set, so stores sharing a process (tests) each count
        // their own.
        gauge!("memory_pending_postings").increment(added as f64);
    }

    /// How many changes `scope` holds, and how many all scopes hold.
    pub fn len(&self, scope: &Key) -> (usize, usize) {
        let held = self.held();
        (held.scopes.get(scope).map_or(0, |s| s.len), held.len)
    }

    /// How many changes all scopes hold.
    pub fn all(&self) -> usize {
        self.held().len
    }

    /// Drops the changes of `scope`'s records up to generation `through`, merged into the
    /// blocks.
    pub fn merged(&self, scope: &Key, through: u64) {
        let mut held = self.held_mut();
        let Some(changes) = held.scopes.get_mut(scope) else {
            return;
        };
        let before = changes.len;
        changes.terms.retain(|_, list| {
            list.retain(|c| c.generation > through);
            !list.is_empty()
        });
        changes.len = changes.terms.values().map(Vec::len).sum();
        let dropped = before - changes.len;
        if changes.len == 0 {
            held.scopes.remove(scope);
        }
        held.len -= dropped;
        gauge!("memory_pending_postings").decrement(dropped as f64);
    }

    /// Drops the changes of `terms` in `scope` up to generation `through`, merged into their
    /// blocks.
    pub fn merged_terms(&self, scope: &Key, terms: &[String], through: u64) {
        let mut held = self.held_mut();
        let Some(changes) = held.scopes.get_mut(scope) else {
            return;
        };
        let mut dropped = 0;
        for term in terms {
            if let Some(list) = changes.terms.get_mut(term) {
                let before = list.len();
                list.retain(|c| c.generation > through);
                dropped += before - list.len();
                if list.is_empty() {
                    changes.terms.remove(term);
                }
            }
        }
        changes.len -= dropped;
        held.len -= dropped;
        gauge!("memory_pending_postings").decrement(dropped as f64);
    }

    /// The scopes that hold changes.
    pub fn scopes(&self) -> Vec<Key> {
        self.held().scopes.keys().cloned().collect()
    }

    /// The changes of `term` (a term key under `scope`), as a search reads them.
    pub fn overlay(&self, scope: &Key, term: &str) -> Overlay {
        let held = self.held();
        let changes = held
            .scopes
            .get(scope)
            .and_then(|s| s.terms.get(term))
            .map_or(&[][..], Vec::as_slice);
        Overlay::of(changes)
    }
}

/// A term's pending changes, reduced to the last one of each seq, in seq order.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Overlay {
    /// Each changed seq, its posting after the changes (`None`: removed), and whether its
    /// first change was an append (so the blocks do not hold it).
    seqs: Vec<(u64, Option<Posting>, bool)>,
}

impl Overlay {
    fn of(changes: &[Change]) -> Self {
        let mut seqs: Vec<_> = (changes.iter())
            .map(|c| (c.seq, c.posting(), c.append))
            .collect();
        // Usually they are appends, in seq order already.
        if seqs.windows(2).any(|w| w[0].0 >= w[1].0) {
            // Stable: the changes of one seq stay in commit order.
            seqs.sort_by_key(|&(seq, _, _)| seq);
            seqs.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = later.1;
                }
                same
            });
        }
        Self { seqs }
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// The term's document frequency, from the one its blocks hold (`stored`, read with a
    /// cursor `blocks` makes when one is needed): the seqs the changes give a posting count,
    /// those they change in the blocks are counted once, and those they remove from the blocks
    /// not at all.
    pub fn df<C: Cursor>(&self, stored: u64, mut blocks: impl FnMut() -> Result<C>) -> Result<u64> {
        let mut df = stored;
        let mut cursor = None;
        for &(seq, posting, append) in &self.seqs {
            let in_blocks = !append
                && match &mut cursor {
                    Some(cursor) => cursor,
                    None => cursor.insert(blocks()?),
                }
                .seek(seq)?
                .is_some();
            // Saturating: a corrupt stored df must not panic a search.
            df = (df + u64::from(posting.is_some())).saturating_sub(u64::from(in_blocks));
        }
        Ok(df)
    }

    /// The term's postings: those of `blocks` with the changes laid over them.
    pub fn over<C: Cursor>(self, blocks: C) -> Result<Overlaid<C>> {
        // A term whose postings all wait here (every term of a memory smaller than a merge)
        // has its ceiling known for a pass over them; one with blocks would need theirs read.
        let ceiling = match blocks.current() {
            None => Ceiling::of(self.seqs.iter().filter_map(|&(_, posting, _)| posting)),
            Some(_) => None,
        };
        let mut cursor = Overlaid {
            ceiling,
            blocks,
            seqs: self.seqs,
            at: 0,
            current: None,
            from_blocks: false,
        };
        cursor.settle()?;
        Ok(cursor)
    }
}

/// A cursor over a term's blocks with its pending changes laid over them.
pub(super) struct Overlaid<C> {
    /// The postings' ceiling, when they all wait here.
    ceiling: Option<Ceiling>,
    blocks: C,
    seqs: Vec<(u64, Option<Posting>, bool)>,
    /// The first of `seqs` not yet passed.
    at: usize,
    current: Option<Posting>,
    /// Whether `current` is the blocks' (else it is `seqs[at]`'s).
    from_blocks: bool,
}

impl<C: Cursor> Overlaid<C> {
    /// Finds the next posting, from the blocks or the changes, whichever has the lower seq;
    /// a block posting whose seq the changes name gives way to them.
    fn settle(&mut self) -> Result<()> {
        loop {
            let changed = self.seqs.get(self.at).copied();
            match (self.blocks.current(), changed) {
                (Some(b), Some((seq, _, _))) if b.seq == seq => self.blocks.advance()?,
                (Some(b), changed) if changed.is_none_or(|(seq, _, _)| b.seq < seq) => {
                    self.current = Some(b);
                    self.from_blocks = true;
                    return Ok(());
                }
                (_, Some((_, None, _))) => self.at += 1,
                (_, changed) => {
                    self.current = changed.and_then(|(_, posting, _)| posting);
                    self.from_blocks = false;
                    return Ok(());
                }
            }
        }
    }
}

impl<C: Cursor> Cursor for Overlaid<C> {
    fn current(&self) -> Option<Posting> {
        self.current
    }

    fn advance(&mut self) -> Result<()> {
        if self.from_blocks {
            self.blocks.advance()?;
        } else {
            self.at += 1;
        }
        self.settle()
    }

    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        // Found as in a block: the sought seq is usually a few changes further on.
        let seqs = &self.seqs;
        self.at = postings::search(self.at, seqs.len(), seq, |i| seqs[i].0);
        match self.seqs.get(self.at) {
            Some(&(s, posting, _)) if s == seq => Ok(posting),
            _ => self.blocks.seek(seq),
        }
    }

    fn ceiling(&self) -> Option<Ceiling> {
        self.ceiling
    }
}

#[cfg(test)]
mod tests {
    use super::{super::super::maxscore::Listed, *};

    fn p(seq: u64, tf: u32) -> Posting {
        Posting { seq, tf, len: 10 }
    }

    fn op(seq: u64, tf: Option<u32>, append: bool) -> PostingOp {
        PostingOp {
            term: "t".into(),
            seq,
            remove: tf.is_none(),
            tf: tf.unwrap_or(0),
            len: 10,
            append,
        }
    }

    /// Blocks holding seqs 1, 3, 5 and 7; changes that rewrite 3, remove 5, add 4 and remove
    /// it again, add 6, and append 9 in a later record.
    fn fixture() -> (Pending, Key, Vec<Posting>) {
        let scope = Key::new().str("app").str("user");
        let pending = Pending::default();
        pending.add(
            &scope,
            1,
            vec![
                op(3, Some(2), false),
                op(5, None, false),
                op(4, Some(1), false),
                op(6, Some(1), false),
            ],
        );
        pending.add(&scope, 2, vec![op(4, None, false), op(9, Some(3), true)]);
        let blocks = vec![p(1, 1), p(3, 1), p(5, 1), p(7, 1)];
        (pending, scope, blocks)
    }

    fn scanned(mut cursor: impl Cursor) -> Vec<Posting> {
        let mut out = Vec::new();
        while let Some(p) = cursor.current() {
            out.push(p);
            cursor.advance().unwrap();
        }
        out
    }

    #[test]
    fn a_search_reads_the_blocks_with_the_changes_laid_over_them() {
        let (pending, scope, blocks) = fixture();
        let overlay = pending.overlay(&scope, "t");
        let expected = vec![p(1, 1), p(3, 2), p(6, 1), p(7, 1), p(9, 3)];
        let df = overlay.df(4, || Ok(Listed(blocks.clone(), 0))).unwrap();
        assert_eq!(df, expected.len() as u64);
        let cursor = overlay.clone().over(Listed(blocks.clone(), 0)).unwrap();
        assert_eq!(scanned(cursor), expected);
        let mut cursor = overlay.over(Listed(blocks, 0)).unwrap();
        let sought: Vec<_> = (0..=10).map(|s| cursor.seek(s).unwrap()).collect();
        let by_seq = |s| expected.iter().find(|p| p.seq == s).copied();
        assert_eq!(sought, (0..=10).map(by_seq).collect::<Vec<_>>());
    }

    /// Seeks a few changes ahead and far ahead find what a scan finds, in a term with many
    /// changes: the even seqs appended, every tenth removed again, over blocks of the odd ones.
    #[test]
    fn seeks_near_and_far_find_what_a_scan_finds() {
        let scope = Key::new().str("app").str("user");
        let pending = Pending::default();
        pending.add(
            &scope,
            1,
            (0..400).step_by(2).map(|s| op(s, Some(1), true)).collect(),
        );
        pending.add(
            &scope,
            2,
            (0..400).step_by(20).map(|s| op(s, None, false)).collect(),
        );
        let blocks: Vec<_> = (1..400).step_by(2).map(|s| p(s, 2)).collect();
        let expected = scanned(
            pending
                .overlay(&scope, "t")
                .over(Listed(blocks.clone(), 0))
                .unwrap(),
        );
        assert_eq!(expected.len(), 200 + 200 - 20);
        for stride in [1, 3, 9, 50] {
            let mut cursor = pending
                .overlay(&scope, "t")
                .over(Listed(blocks.clone(), 0))
                .unwrap();
            for seq in (0..420).step_by(stride) {
                let found = cursor.seek(seq).unwrap();
                assert_eq!(
                    found,
                    expected.iter().find(|p| p.seq == seq).copied(),
                    "seq {seq}"
                );
            }
        }
    }

    /// A term whose postings all wait here knows their ceiling, removed ones left out; one with
    /// blocks does not claim one.
    #[test]
    fn a_term_without_blocks_knows_its_ceiling() {
        let scope = Key::new().str("app").str("user");
        let pending = Pending::default();
        let at = |seq, tf, len| PostingOp {
            len,
            ..op(seq, Some(tf), true)
        };
        pending.add(
            &scope,
            1,
            vec![at(1, 2, 30), at(2, 1, 12), at(3, 9, 4), at(4, 3, 20)],
        );
        pending.add(&scope, 2, vec![op(3, None, false)]);
        let cursor = pending
            .overlay(&scope, "t")
            .over(Listed(vec![], 0))
            .unwrap();
        assert_eq!(cursor.ceiling(), Some(Ceiling { tf: 3, len: 12 }));
        let cursor = (pending.overlay(&scope, "t"))
            .over(Listed(vec![p(5, 1)], 0))
            .unwrap();
        assert_eq!(cursor.ceiling(), None);
    }

    #[test]
    fn merged_records_leave_and_later_ones_stay() {
        let (pending, scope, blocks) = fixture();
        assert_eq!(pending.scopes(), std::slice::from_ref(&scope));
        pending.merged(&scope, 1);
        // What record 2 changes: 4 removed (the blocks do not hold it) and 9 appended.
        let cursor = pending
            .overlay(&scope, "t")
            .over(Listed(blocks, 0))
            .unwrap();
        assert_eq!(
            scanned(cursor),
            [p(1, 1), p(3, 1), p(5, 1), p(7, 1), p(9, 3)]
        );
        pending.merged(&scope, 2);
        assert!(pending.overlay(&scope, "t").is_empty());
        assert!(pending.scopes().is_empty());
        assert_eq!(pending.held().len, 0);
    }

    /// What a store finds at open: every journalled change, but those of a term whose df value
    /// says a merge cut short put them in its blocks already.
    #[test]
    fn an_opening_store_holds_what_its_journal_holds() {
        let db = adk_common::kv::Db::temporary().unwrap();
        let (journal, df) = (
            db.open_tree("journal").unwrap(),
            db.open_tree("df").unwrap(),
        );
        let scope = Key::new().str("app").str("user");
        let record = |ops: Vec<PostingOp>| prost::Message::encode_to_vec(&JournalRecord { ops });
        let u = |op: PostingOp| PostingOp {
            term: "u".into(),
            ..op
        };
        journal
            .insert(
                scope.clone().u64(7),
                record(vec![op(2, Some(1), true), u(op(2, Some(5), true))]),
            )
            .unwrap();
        journal
            .insert(
                scope.clone().u64(8),
                record(vec![op(3, Some(4), true), u(op(3, Some(6), true))]),
            )
            .unwrap();
        // "t" has record 7 merged (df 1, no appended blocks, merged through 7); "u" none.
        let merged = [
            &1u64.to_be_bytes()[..],
            &0u32.to_be_bytes(),
            &7u64.to_be_bytes(),
        ]
        .concat();
        df.insert(scope.clone().str("t"), merged).unwrap();

        let pending = Pending::load(&journal, &df).unwrap();
        let read = |term| {
            let cursor = pending
                .overlay(&scope, term)
                .over(Listed(vec![], 0))
                .unwrap();
            scanned(cursor)
        };
        assert_eq!(read("t"), [p(3, 4)]);
        assert_eq!(read("u"), [p(2, 5), p(3, 6)]);
        assert_eq!(pending.len(&scope), (3, 3));
        pending.merged_terms(&scope, &["u".to_owned()], 7);
        assert_eq!(read("u"), [p(3, 6)]);
        assert_eq!(pending.len(&scope), (2, 2));
        pending.merged(&scope, 8);
        assert!(pending.scopes().is_empty());
        journal.insert(b"bad key", &b""[..]).unwrap();
        assert!(Pending::load(&journal, &df).is_err());
    }
}
