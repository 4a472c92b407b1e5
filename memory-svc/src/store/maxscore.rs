//! The best `k` entries for a query by BM25, reading as few postings as exactness allows
//! (MaxScore dynamic pruning, document at a time), over posting lists of any store: a store
//! hands in one [`Cursor`] per query term.
//!
//! Every posting of a term scores at most its bound `idf × (k1 + 1)` (the term-frequency factor
//! `tf × (k1 + 1) / (tf + norm)` is below `k1 + 1`). Terms are ordered by bound, lowest first.
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

use std::{cmp::Ordering, collections::BinaryHeap};

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
    let bound: Vec<f64> = lists.iter().map(|l| l.idf * (K1 + 1.0)).collect();
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
