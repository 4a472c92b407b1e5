//! The best `k` entries for a query by BM25, reading as few postings as exactness allows
//! (MaxScore dynamic pruning, document at a time), over posting lists of any store: a store
//! hands in one [`Cursor`] per query term.
//!
//! Every posting of a term scores at most its bound: `idf × (k1 + 1)` (the term-frequency factor
//! `tf × (k1 + 1) / (tf + norm)` is below `k1 + 1`), or, when the cursor knows its list's
//! [`Ceiling`], what a posting with the list's highest frequency in its shortest entry would
//! score (BM25 grows with the frequency and falls with the length), which is far tighter when
//! the frequencies and lengths vary little. Terms are ordered by bound, lowest first.
//! Once `k` entries are held and the lowest terms' bounds add up to no more than the `k`-th
//! score θ, an entry holding only those ("lazy") terms cannot beat θ, so candidates come from
//! the other ("essential") terms only, scanned in seq order; the lazy terms' postings are then
//! looked up for a candidate, highest bound first, only while its partial score plus the
//! remaining bounds can still beat θ. θ only grows, so terms only ever turn lazy.
//!
//! Exactness: a candidate's score is summed in query-term order, exactly as scoring every
//! posting would sum it; pruning compares bounds with a relative margin far above the rounding
//! error of sums in another order, and only when no idf is negative (which only a race between
//! a search and a write can produce), since the margin argument needs non-negative terms.
//! Candidates come in increasing seq (ingestion) order, so one that ties with θ ranks after the
//! entries holding θ and is rightly left out.

use std::{
    cmp::Ordering,
    collections::{btree_set, BTreeSet, BinaryHeap},
};

use super::{
    index::{self, K1},
    Result,
};

/// One entry's posting in a term's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    pub seq: u64,
    /// The term's weighted frequency in the entry, in [`index::UNIT`]s.
    pub tf: u32,
    /// The entry's length, in [`index::UNIT`]s.
    pub len: u32,
}

/// A term's postings in increasing seq order, as [`top_k`] reads them: one by one
/// ([`Cursor::current`], [`Cursor::advance`]) or by looking seqs up in increasing order
/// ([`Cursor::seek`]). A cursor that has sought is not scanned again.
pub trait Cursor {
    /// The posting the cursor is at; `None` once every posting has been read.
    fn current(&self) -> Option<Posting>;
    fn advance(&mut self) -> Result<()>;
    /// The posting of `seq`, if the term has one. Seqs are sought in increasing order.
    fn seek(&mut self, seq: u64) -> Result<Option<Posting>>;
    /// The ceiling of the term's postings, when the cursor knows it without reading them.
    fn ceiling(&self) -> Option<Ceiling> {
        None
    }
}

/// The highest frequency and the shortest length among a term's postings (not necessarily of
/// one posting): no posting of the term scores more than an entry that had both would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    pub tf: u32,
    pub len: u32,
}

impl Ceiling {
    /// The ceiling of `postings`; `None` when there are none.
    pub fn of(mut postings: impl Iterator<Item = Posting>) -> Option<Self> {
        let first = postings.next()?;
        let start = Self {
            tf: first.tf,
            len: first.len,
        };
        Some(postings.fold(start, |c, p| Self {
            tf: c.tf.max(p.tf),
            len: c.len.min(p.len),
        }))
    }
}

/// A term's postings, all of them or only those of a filter's candidates. Only candidates can
/// enter the results, so their postings rank exactly as the whole list would; when they are few,
/// seeking each of them reads far fewer postings than scanning the list (see [`among_few`]).
pub struct Among<'a, C> {
    inner: C,
    /// The candidates not sought yet; `None`: every posting.
    seqs: Option<btree_set::Iter<'a, u64>>,
    /// The posting of the last candidate found, when only candidates are read.
    at: Option<Posting>,
}

impl<'a, C: Cursor> Among<'a, C> {
    /// Every posting of `inner`.
    pub fn all(inner: C) -> Self {
        Self {
            inner,
            seqs: None,
            at: None,
        }
    }

    /// The postings of `inner` whose seq is one of `candidates`.
    pub fn only(inner: C, candidates: &'a BTreeSet<u64>) -> Result<Self> {
        let mut among = Self {
            inner,
            seqs: Some(candidates.iter()),
            at: None,
        };
        among.find()?;
        Ok(among)
    }

    /// Moves to the posting of the next candidate the term has.
    fn find(&mut self) -> Result<()> {
        self.at = None;
        if let Some(seqs) = &mut self.seqs {
            for &seq in seqs.by_ref() {
                if let Some(p) = self.inner.seek(seq)? {
                    self.at = Some(p);
                    break;
                }
            }
        }
        Ok(())
    }
}

impl<C: Cursor> Cursor for Among<'_, C> {
    fn current(&self) -> Option<Posting> {
        match self.seqs {
            Some(_) => self.at,
            None => self.inner.current(),
        }
    }

    fn advance(&mut self) -> Result<()> {
        match self.seqs {
            Some(_) => self.find(),
            None => self.inner.advance(),
        }
    }

    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        match self.seqs {
            // A seq past the candidate the cursor is at: that candidate is passed over, as a
            // scan passes over the postings before a seek's.
            Some(_) => {
                while self.at.is_some_and(|p| p.seq < seq) {
                    self.find()?;
                }
                Ok(self.at.filter(|p| p.seq == seq))
            }
            None => self.inner.seek(seq),
        }
    }

    /// The whole list's: a bound of its candidates' postings too.
    fn ceiling(&self) -> Option<Ceiling> {
        self.inner.ceiling()
    }
}

/// Whether ranking `candidates` entries by seeking each in `lists` term lists reads less than
/// scanning the lists' `postings`: a seek costs about as much as scanning a few postings
/// (measured in BENCHMARKS.md, "Filtered search").
pub fn among_few(candidates: usize, lists: usize, postings: u64) -> bool {
    const SEEK_COST: u64 = 4;
    (candidates as u64)
        .saturating_mul(lists as u64)
        .saturating_mul(SEEK_COST)
        < postings
}

/// Relative margin on bounds: sums of a few dozen non-negative terms in different orders differ
/// by a few ulps, many orders of magnitude below this.
const SLACK: f64 = 1e-9;

/// What a posting adds to its entry's score.
fn contribution(idf: f64, p: Posting, avg_len: f64) -> f64 {
    index::score(idf, f64::from(p.tf), f64::from(p.len), avg_len)
}

/// Frequencies and lengths up to which a term's contributions are memoised.
const MEMO_TF: u32 = 8;
const MEMO_LEN: u32 = 256;

/// The contributions of one term's postings. Most postings share a few (tf, len) pairs, so
/// each pair's contribution is computed once (the same expression, so the same value) rather
/// than with two divisions per posting.
struct Scorer {
    idf: f64,
    avg_len: f64,
    /// By `(tf - 1) * MEMO_LEN + len`; NaN until computed (a contribution is never NaN).
    memo: Vec<f64>,
}

impl Scorer {
    fn new(idf: f64, avg_len: f64) -> Self {
        Self {
            idf,
            avg_len,
            memo: vec![f64::NAN; (MEMO_TF * MEMO_LEN) as usize],
        }
    }

    fn score(&mut self, p: Posting) -> f64 {
        if p.tf == 0 || p.tf > MEMO_TF || p.len >= MEMO_LEN {
            return contribution(self.idf, p, self.avg_len);
        }
        let slot = &mut self.memo[((p.tf - 1) * MEMO_LEN + p.len) as usize];
        if slot.is_nan() {
            *slot = contribution(self.idf, p, self.avg_len);
        }
        *slot
    }
}

/// One query term: its idf and its postings.
pub struct TermList<C> {
    pub idf: f64,
    pub cursor: C,
}

/// A ranked entry, with what admitting it returned.
pub struct Ranked<T> {
    pub score: f64,
    pub seq: u64,
    pub item: T,
}

/// Heap order: the worst entry (lowest score, then latest seq) is the greatest.
struct Worst<T>(Ranked<T>);

impl<T> Ord for Worst<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.0.score.total_cmp(&self.0.score)).then(self.0.seq.cmp(&other.0.seq))
    }
}

impl<T> PartialOrd for Worst<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Worst<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Worst<T> {}

/// Whether an entry whose score is at most `bound` cannot beat `theta`.
pub fn cannot_beat(bound: f64, theta: f64) -> bool {
    bound * (1.0 + SLACK) <= theta
}

/// The `k` best entries holding any term of `lists` (given in query order), best first: highest
/// score, then lowest seq. An entry counts only if `admit` returns `Some` for it (the filters);
/// it is asked only about entries that would enter the best `k` at that point.
///
/// `floor` is a score the caller already holds `k` entries at or above (`NEG_INFINITY`: none):
/// entries that cannot reach it are pruned as if it were the `k`-th score from the start, so
/// the result may miss entries below it (which the caller's own best `k` outrank).
pub fn top_k<C: Cursor, T>(
    mut lists: Vec<TermList<C>>,
    avg_len: f64,
    k: usize,
    floor: f64,
    mut admit: impl FnMut(u64) -> Result<Option<T>>,
) -> Result<Vec<Ranked<T>>> {
    let n = lists.len();
    let prune = lists.iter().all(|l| l.idf >= 0.0);
    let bound: Vec<f64> = (lists.iter())
        .map(|l| match l.cursor.ceiling() {
            Some(c) => index::score(l.idf, f64::from(c.tf), f64::from(c.len), avg_len),
            None => l.idf * (K1 + 1.0),
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| bound[a].total_cmp(&bound[b]));
    // below[j]: the summed bounds of the j lowest terms.
    let mut below = vec![0.0; n + 1];
    for j in 0..n {
        below[j + 1] = below[j] + bound[order[j]];
    }
    // order[..lazy] are the lazy terms. `theta` is the k-th score held here; pruning compares
    // with `bar`, the higher of it and the floor.
    let mut lazy = 0;
    let mut theta = f64::NEG_INFINITY;
    let mut bar = floor;
    while prune && lazy < n && cannot_beat(below[lazy + 1], bar) {
        lazy += 1;
    }
    let mut heap = BinaryHeap::<Worst<T>>::with_capacity(k + 1);
    let mut parts = vec![None::<f64>; n];
    let mut scorers: Vec<Scorer> = lists.iter().map(|l| Scorer::new(l.idf, avg_len)).collect();
    'candidates: loop {
        let next = order[lazy..]
            .iter()
            .filter_map(|&i| lists[i].cursor.current())
            .map(|p| p.seq)
            .min();
        let Some(seq) = next else { break };
        parts.fill(None);
        let mut partial = 0.0;
        for &i in &order[lazy..] {
            let cursor = &mut lists[i].cursor;
            if let Some(p) = cursor.current().filter(|p| p.seq == seq) {
                let c = scorers[i].score(p);
                parts[i] = Some(c);
                partial += c;
                cursor.advance()?;
            }
        }
        for j in (0..lazy).rev() {
            if cannot_beat(partial + below[j + 1], bar) {
                continue 'candidates;
            }
            let i = order[j];
            if let Some(p) = lists[i].cursor.seek(seq)? {
                let c = scorers[i].score(p);
                parts[i] = Some(c);
                partial += c;
            }
        }
        let score = parts.iter().flatten().fold(0.0, |sum, c| sum + c);
        if heap.len() == k && score <= theta {
            continue;
        }
        let Some(item) = admit(seq)? else { continue };
        heap.push(Worst(Ranked { score, seq, item }));
        if heap.len() > k {
            heap.pop();
        }
        if heap.len() == k {
            if let Some(worst) = heap.peek() {
                theta = worst.0.score;
                bar = theta.max(floor);
            }
            while prune && lazy < n && cannot_beat(below[lazy + 1], bar) {
                lazy += 1;
            }
        }
    }
    Ok(heap.into_sorted_vec().into_iter().map(|w| w.0).collect())
}

/// A term's postings in a list, at a place in it: the cursor of the tests of what reads cursors.
#[cfg(test)]
pub(super) struct Listed(pub Vec<Posting>, pub usize);

#[cfg(test)]
impl Cursor for Listed {
    fn current(&self) -> Option<Posting> {
        self.0.get(self.1).copied()
    }
    fn advance(&mut self) -> Result<()> {
        self.1 += 1;
        Ok(())
    }
    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        self.1 += self.0[self.1..].partition_point(|p| p.seq < seq);
        Ok(self.current().filter(|p| p.seq == seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three terms over 2,000 entries: a common one, one in every third entry, a rare one; the
    /// frequencies and lengths vary with the seq.
    fn lists() -> Vec<(f64, Vec<Posting>)> {
        let posting = |seq: u64| Posting {
            seq,
            tf: (seq % 5 + 1) as u32 * index::UNIT,
            len: (seq % 40 + 5) as u32 * index::UNIT,
        };
        [(0.2, 1), (1.1, 3), (3.0, 97)]
            .into_iter()
            .map(|(idf, every)| (idf, (0..2000).step_by(every).map(posting).collect()))
            .collect()
    }

    fn ranked(candidates: &BTreeSet<u64>, seek: bool, k: usize) -> Vec<(u64, f64)> {
        let lists = lists()
            .into_iter()
            .map(|(idf, postings)| {
                let cursor = Listed(postings, 0);
                let cursor = if seek {
                    Among::only(cursor, candidates)?
                } else {
                    Among::all(cursor)
                };
                Ok(TermList { idf, cursor })
            })
            .collect::<Result<Vec<_>>>()
            .unwrap();
        top_k(
            lists,
            20.0 * f64::from(index::UNIT),
            k,
            f64::NEG_INFINITY,
            |seq| Ok(candidates.contains(&seq).then_some(())),
        )
        .unwrap()
        .into_iter()
        .map(|r| (r.seq, r.score))
        .collect()
    }

    #[test]
    fn seeking_the_candidates_ranks_as_scanning_the_lists() {
        let sets: [BTreeSet<u64>; 4] = [
            (0..2000).step_by(101).collect(),
            (0..2000).step_by(7).collect(),
            [0, 97, 1999, 1500, 3, 2500].into_iter().collect(),
            BTreeSet::new(),
        ];
        for candidates in &sets {
            for k in [1, 5, 50] {
                let scanned = ranked(candidates, false, k);
                assert_eq!(
                    ranked(candidates, true, k),
                    scanned,
                    "{k} of {candidates:?}"
                );
                assert!(scanned.iter().all(|(seq, _)| candidates.contains(seq)));
                let expected = k.min(candidates.iter().filter(|&&s| s < 2000).count());
                assert_eq!(scanned.len(), expected);
            }
        }
    }

    /// A list that knows its ceiling, counting the postings read from it.
    struct Ceiled<'a> {
        list: Listed,
        ceiling: Option<Ceiling>,
        reads: &'a std::cell::Cell<usize>,
    }

    impl Cursor for Ceiled<'_> {
        fn current(&self) -> Option<Posting> {
            self.list.current()
        }
        fn advance(&mut self) -> Result<()> {
            self.reads.set(self.reads.get() + 1);
            self.list.advance()
        }
        fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
            self.reads.set(self.reads.get() + 1);
            self.list.seek(seq)
        }
        fn ceiling(&self) -> Option<Ceiling> {
            self.ceiling
        }
    }

    /// The best `k` of `lists`, with or without their ceilings, and the postings read.
    fn ranked_with(
        lists: &[(f64, Vec<Posting>)],
        ceilings: bool,
        k: usize,
    ) -> (Vec<(u64, f64)>, usize) {
        let reads = std::cell::Cell::new(0);
        let cursors = (lists.iter())
            .map(|(idf, postings)| TermList {
                idf: *idf,
                cursor: Ceiled {
                    list: Listed(postings.clone(), 0),
                    ceiling: Ceiling::of(postings.iter().copied()).filter(|_| ceilings),
                    reads: &reads,
                },
            })
            .collect();
        let avg_len = 12.0 * f64::from(index::UNIT);
        let ranked = top_k(cursors, avg_len, k, f64::NEG_INFINITY, |_| Ok(Some(()))).unwrap();
        let ranked = ranked.into_iter().map(|r| (r.seq, r.score)).collect();
        (ranked, reads.get())
    }

    /// Ceilings rank exactly as the general bound does, on lists of varied frequencies and
    /// lengths, and on lists alike in both (two common words of short chat turns). On those,
    /// once the best `k` are held early, they spare reading a third or more of the postings.
    #[test]
    fn ceilings_rank_as_the_general_bound_and_read_less() {
        let uniform = |seq: u64| Posting {
            seq,
            tf: index::UNIT * if seq < 240 { 2 } else { 1 },
            len: (seq % 3 + 10) as u32 * index::UNIT,
        };
        let alike = vec![
            (0.9, (0..3000).step_by(3).map(uniform).collect()),
            (1.0, (0..3000).step_by(4).map(uniform).collect::<Vec<_>>()),
        ];
        let varied: Vec<_> = lists();
        for k in [1, 10, 100] {
            for lists in [&alike, &varied] {
                let (general, _) = ranked_with(lists, false, k);
                let (ceiled, _) = ranked_with(lists, true, k);
                assert_eq!(ceiled, general, "k = {k}");
                assert_eq!(general.len(), k);
            }
        }
        for k in [1, 10] {
            let (_, general_reads) = ranked_with(&alike, false, k);
            let (_, ceiled_reads) = ranked_with(&alike, true, k);
            assert!(
                ceiled_reads * 3 < general_reads * 2,
                "k = {k}: {ceiled_reads} reads with ceilings, {general_reads} without"
            );
        }
    }

    #[test]
    fn a_seek_past_a_candidate_passes_it_over() {
        let candidates: BTreeSet<u64> = [2, 4, 6, 9].into_iter().collect();
        let postings = (0..10).map(|seq| Posting { seq, tf: 1, len: 1 }).collect();
        let mut among = Among::only(Listed(postings, 0), &candidates).unwrap();
        assert_eq!(among.current().map(|p| p.seq), Some(2));
        assert_eq!(among.seek(5).unwrap(), None);
        assert_eq!(among.current().map(|p| p.seq), Some(6));
        assert_eq!(among.seek(6).unwrap().map(|p| p.seq), Some(6));
        among.advance().unwrap();
        assert_eq!(among.current().map(|p| p.seq), Some(9));
        among.advance().unwrap();
        assert_eq!(among.current(), None);
    }
}
