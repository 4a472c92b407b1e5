//! Hybrid ranking: a keyword (BM25) ranking and a semantic (cosine) ranking of the same search
//! fused by weighted reciprocal rank.
//!
//! An entry's fused score is the sum, over the rankings that found it, of
//! `weight / (RRF_K + rank)`, rank counted from 1. Ranks rather than scores are fused since BM25
//! is unbounded and its scale changes with the query and the user's memory, while cosine
//! similarities crowd together; a rank means the same in both. The offset, the weights and the
//! depth were chosen on the recall harness's dev split (`bench/recall/fuse.py` over the rankings
//! of a corpus of another seed, the even-numbered facts) and reported on its held-out split:
//! BENCHMARKS.md, "Hybrid search".

use std::collections::HashMap;

use crate::store::Hit;

/// The rank offset of reciprocal rank fusion: how slowly a rank's weight falls (20: the first
/// few ranks of each ranking count clearly more than the usual 60 lets them).
pub const RRF_K: f64 = 20.0;

/// Weight of the keyword ranking.
pub const KEYWORD_WEIGHT: f64 = 1.0;

/// Weight of the semantic ranking: twice the keyword one, so that an entry the model puts first
/// outranks one BM25 puts first, while an entry both rankings hold near the top beats either.
pub const SEMANTIC_WEIGHT: f64 = 2.0;

/// Candidates taken from each ranking (or the limit, if larger): deeper candidates only let
/// weak matches of one ranking crowd out the other's good ones.
pub const DEPTH: usize = 10;

/// The best `limit` of both rankings fused. Both hold hits of one search (filtered alike); an
/// entry is the same in both when its (session, id) slot is. Equal fused scores keep the
/// keyword ranking's order, then the semantic one's.
pub fn fuse(keyword: Vec<Hit>, semantic: Vec<Hit>, limit: usize) -> Vec<Hit> {
    let mut fused: Vec<Hit> = Vec::with_capacity(keyword.len() + semantic.len());
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for (hits, weight) in [(keyword, KEYWORD_WEIGHT), (semantic, SEMANTIC_WEIGHT)] {
        for (i, hit) in hits.into_iter().enumerate() {
            let score = weight / (RRF_K + (i + 1) as f64);
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
        );
        // c and b were found by both; d, second by meaning, outweighs a, first by keyword.
        assert_eq!(ids(&fused), ["c", "b", "d", "a"]);
        let c = KEYWORD_WEIGHT / (RRF_K + 3.0) + SEMANTIC_WEIGHT / (RRF_K + 1.0);
        assert!((fused[0].score - c).abs() < 1e-12);
        assert_eq!(fuse(vec![hit("a")], vec![hit("b")], 1).len(), 1);
        assert!(fuse(Vec::new(), Vec::new(), 10).is_empty());
    }
}
