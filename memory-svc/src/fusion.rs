//! Hybrid ranking: a keyword (BM25) ranking and a semantic (cosine) ranking of the same search
//! fused by weighted reciprocal rank, in the two ways a search with a model asks for.
//!
//! An entry's fused score is the sum, over the rankings that found it among their first
//! `depth`, of `weight / (k + rank)`, rank counted from 1. Ranks rather than scores are fused
//! since BM25 is unbounded and its scale changes with the query and the user's memory, while
//! cosine similarities crowd together; a rank means the same in both.
//!
//! - [`DEFAULT`], what a search with a model does unless it names a mode, keeps the keyword
//!   ranking as it is when its best match holds most of the query's terms
//!   ([`keyword_suffices`]): most questions about a conversation ask with the words of their
//!   answer (names, things, places, times), and a model's ranking fused in only pushes those
//!   answers down under entries about the same topic. Where keyword evidence is weak (no match,
//!   or matches of only a name or a word of the question, as a paraphrase has), both rankings
//!   count alike, with a small `k` so that the first few of each lead.
//! - [`HYBRID`], `SEARCH_MODE_HYBRID`: the model's ranking weighs twice the keyword one, the
//!   better choice when most questions share no words with their answers.
//!
//! Both were chosen with `bench/recall/fuse.py` on the dev questions of two corpora of
//! different styles and are reported on their held-out questions (BENCHMARKS.md, "Memory
//! retrieval quality").

use std::collections::HashMap;

use crate::store::Hit;

/// How two rankings are fused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fusion {
    /// The rank offset: how slowly a rank's weight falls.
    pub k: f64,
    /// Weight of the keyword ranking.
    pub keyword: f64,
    /// Weight of the semantic ranking.
    pub semantic: f64,
    /// Candidates taken from each ranking (or the limit, if larger).
    pub depth: usize,
}

/// `SEARCH_MODE_HYBRID`: k = 20 (the first few ranks count clearly more than the usual 60 lets
/// them), the semantic ranking twice the keyword one, so that an entry the model puts first
/// outranks one BM25 puts first while an entry both hold near the top beats either; 10
/// candidates each, since deeper ones only let one ranking's weak matches crowd out the other's
/// good ones.
pub const HYBRID: Fusion = Fusion {
    k: 20.0,
    keyword: 1.0,
    semantic: 2.0,
    depth: 10,
};

/// The default mode with a model, where keyword evidence is weak: both rankings alike, k = 5,
/// 20 candidates each.
pub const DEFAULT: Fusion = Fusion {
    k: 5.0,
    keyword: 1.0,
    semantic: 1.0,
    depth: 20,
};

/// The share of a query's terms the best keyword match must hold for the default mode to keep
/// the keyword ranking as it is (three of four, two of two; not two of three). fuse.py's 0.67
/// and 0.75 rank the dev questions alike; three quarters is the plainer rule.
pub const KEYWORD_COVERAGE: f64 = 0.75;

/// Whether the default mode keeps the keyword ranking as it is: its best match holds at least
/// [`KEYWORD_COVERAGE`] of the query's terms (`coverage`, see `store::index::coverage`).
pub fn keyword_suffices(coverage: f64) -> bool {
    coverage >= KEYWORD_COVERAGE
}

/// The best `limit` of both rankings fused as `fusion` says. Both hold hits of one search
/// (filtered alike); an entry is the same in both when its (session, id) slot is. Equal fused
/// scores keep the keyword ranking's order, then the semantic one's.
pub fn fuse(keyword: Vec<Hit>, semantic: Vec<Hit>, limit: usize, fusion: &Fusion) -> Vec<Hit> {
    let depth = fusion.depth.max(limit);
    let mut fused: Vec<Hit> = Vec::with_capacity(keyword.len() + semantic.len());
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for (hits, weight) in [(keyword, fusion.keyword), (semantic, fusion.semantic)] {
        for (i, hit) in hits.into_iter().take(depth).enumerate() {
            let score = weight / (fusion.k + (i + 1) as f64);
            let slot = (hit.entry.session_id.clone(), hit.entry.id.clone());
            match at.get(&slot) {
                Some(&j) => fused[j].score += score,
                None => {
                    at.insert(slot, fused.len());
                    fused.push(Hit {
                        entry: hit.entry,
                        score,
                    });
                }
            }
        }
    }
    // Stable: ties keep the order above.
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(limit);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Entry;

    fn hit(id: &str) -> Hit {
        Hit {
            entry: Entry {
                id: id.into(),
                ..Default::default()
            },
            score: 0.0,
        }
    }

    fn ids(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.entry.id.as_str()).collect()
    }

    #[test]
    fn entries_found_by_both_rise() {
        let fused = fuse(
            vec![hit("a"), hit("b"), hit("c")],
            vec![hit("c"), hit("d"), hit("b")],
            10,
            &HYBRID,
        );
        // c and b were found by both; d, second by meaning, outweighs a, first by keyword.
        assert_eq!(ids(&fused), ["c", "b", "d", "a"]);
        let c = 1.0 / (20.0 + 3.0) + 2.0 / (20.0 + 1.0);
        assert!((fused[0].score - c).abs() < 1e-12);
        assert_eq!(fuse(vec![hit("a")], vec![hit("b")], 1, &HYBRID).len(), 1);
        assert!(fuse(Vec::new(), Vec::new(), 10, &HYBRID).is_empty());
    }

    #[test]
    fn the_default_weighs_both_alike_among_the_first_twenty() {
        let keyword = || (0..25).map(|i| hit(&format!("k{i}"))).collect::<Vec<_>>();
        let fused = fuse(
            keyword(),
            vec![hit("s0"), hit("k1"), hit("k22")],
            10,
            &DEFAULT,
        );
        // Equal weights: k1, found by both, leads; then the first of each, keyword's on a tie.
        assert_eq!(ids(&fused[..3]), ["k1", "k0", "s0"]);
        assert!((fused[0].score - (1.0 / 7.0 + 1.0 / 7.0)).abs() < 1e-12);
        // k22 is below the keyword ranking's depth (20, the limit being smaller): only its
        // semantic rank counts.
        let k22 = fused.iter().find(|h| h.entry.id == "k22").map(|h| h.score);
        assert_eq!(k22, Some(1.0 / 8.0));
        // A limit above the depth takes that many of each.
        assert_eq!(fuse(keyword(), Vec::new(), 25, &DEFAULT).len(), 25);
        assert_eq!(fuse(keyword(), Vec::new(), 10, &DEFAULT).len(), 10);
        assert!(keyword_suffices(0.75) && keyword_suffices(1.0));
        assert!(!keyword_suffices(2.0 / 3.0));
    }
}
