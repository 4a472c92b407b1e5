//! Retrieval metrics of the recall harness: recall@k and reciprocal rank per question, and their
//! means per question kind.
//!
//! A question has one or more answer turns (a fact told across two turns needs both). For one
//! question, with the search's ranked result ids:
//! - recall@k is the share of its answer turns found among the first k results (so a two-turn
//!   answer with one turn in the top 5 scores 0.5 at k = 5);
//! - the reciprocal rank is 1 / the rank of the first answer turn found, 0 when none is.
//!
//! A kind's (or the whole set's) figure is the mean over its questions, each question weighing
//! the same however many turns answer it.

use std::collections::BTreeMap;

/// The cut-offs reported.
pub const KS: [usize; 4] = [1, 3, 5, 10];

/// How one question fared.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// recall@k for each k of [`KS`].
    pub recall: [f64; 4],
    pub reciprocal_rank: f64,
}

/// Scores one question: `ranked` are the result ids best first, `answers` the ids that answer
/// it (at least one).
pub fn score(ranked: &[String], answers: &[String]) -> Scored {
    let rank_of = |id: &String| ranked.iter().position(|r| r == id).map(|p| p + 1);
    let ranks: Vec<usize> = answers.iter().filter_map(rank_of).collect();
    let total = answers.len().max(1) as f64;
    let recall = KS.map(|k| ranks.iter().filter(|&&r| r <= k).count() as f64 / total);
    let reciprocal_rank = ranks.iter().min().map_or(0.0, |&r| 1.0 / r as f64);
    Scored {
        recall,
        reciprocal_rank,
    }
}

/// Means over a set of questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub questions: usize,
    pub recall: [f64; 4],
    pub mrr: f64,
}

impl Summary {
    pub fn of<'a>(scores: impl IntoIterator<Item = &'a Scored>) -> Self {
        let mut n = 0usize;
        let mut recall = [0.0; 4];
        let mut rr = 0.0;
        for s in scores {
            n += 1;
            for (sum, r) in recall.iter_mut().zip(s.recall) {
                *sum += r;
            }
            rr += s.reciprocal_rank;
        }
        let mean = |sum: f64| if n == 0 { 0.0 } else { sum / n as f64 };
        Self {
            questions: n,
            recall: recall.map(mean),
            mrr: mean(rr),
        }
    }
}

/// The summary of every kind (in name order) and of all questions together.
pub fn by_kind<'a>(
    scored: impl IntoIterator<Item = (&'a str, &'a Scored)> + Clone,
) -> (BTreeMap<&'a str, Summary>, Summary) {
    let mut kinds: BTreeMap<&str, Vec<&Scored>> = BTreeMap::new();
    for (kind, s) in scored.clone() {
        kinds.entry(kind).or_default().push(s);
    }
    let per_kind = kinds
        .into_iter()
        .map(|(k, v)| (k, Summary::of(v)))
        .collect();
    (per_kind, Summary::of(scored.into_iter().map(|(_, s)| s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_answer_at_rank_three() {
        let s = score(&ids(&["x", "y", "a", "z"]), &ids(&["a"]));
        assert_eq!(s.recall, [0.0, 1.0, 1.0, 1.0]);
        assert!((s.reciprocal_rank - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn two_answers_one_in_top_five_one_at_rank_seven() {
        let ranked = ids(&["q", "a", "r", "s", "t", "u", "b", "v"]);
        let s = score(&ranked, &ids(&["a", "b"]));
        assert_eq!(s.recall, [0.0, 0.5, 0.5, 1.0]);
        assert_eq!(s.reciprocal_rank, 0.5);
    }

    #[test]
    fn answer_first_and_answer_missing() {
        let s = score(&ids(&["a", "x"]), &ids(&["a", "b"]));
        assert_eq!(s.recall, [0.5, 0.5, 0.5, 0.5]);
        assert_eq!(s.reciprocal_rank, 1.0);
    }

    #[test]
    fn nothing_found_and_empty_results() {
        assert_eq!(
            score(&ids(&["x", "y"]), &ids(&["a"])),
            Scored {
                recall: [0.0; 4],
                reciprocal_rank: 0.0
            }
        );
        assert_eq!(score(&[], &ids(&["a"])).recall, [0.0; 4]);
    }

    #[test]
    fn an_answer_beyond_rank_ten_counts_for_no_cut_off_but_for_the_rank() {
        let mut ranked: Vec<String> = (0..11).map(|i| format!("x{i}")).collect();
        ranked.push("a".into());
        let s = score(&ranked, &ids(&["a"]));
        assert_eq!(s.recall, [0.0; 4]);
        assert!((s.reciprocal_rank - 1.0 / 12.0).abs() < 1e-12);
    }

    #[test]
    fn means_weigh_every_question_the_same() {
        // rank 1; rank 2; half of a two-turn answer at rank 4 and the other half missing.
        let a = score(&ids(&["a"]), &ids(&["a"]));
        let b = score(&ids(&["x", "b"]), &ids(&["b"]));
        let c = score(&ids(&["x", "y", "z", "c1"]), &ids(&["c1", "c2"]));
        let (kinds, all) = by_kind([("when", &a), ("when", &b), ("adjacent", &c)]);
        assert_eq!(kinds["when"].questions, 2);
        assert_eq!(kinds["when"].recall, [0.5, 1.0, 1.0, 1.0]);
        assert_eq!(kinds["when"].mrr, 0.75);
        assert_eq!(kinds["adjacent"].recall, [0.0, 0.0, 0.5, 0.5]);
        assert_eq!(kinds["adjacent"].mrr, 0.25);
        assert_eq!(all.questions, 3);
        let third = |x: f64| (x / 3.0 * 1e9).round() / 1e9;
        assert_eq!(
            all.recall.map(|r| (r * 1e9).round() / 1e9),
            [third(1.0), third(2.0), third(2.5), third(2.5)]
        );
        assert!((all.mrr - (1.0 + 0.5 + 0.25) / 3.0).abs() < 1e-12);
        assert_eq!(
            kinds.keys().copied().collect::<Vec<_>>(),
            ["adjacent", "when"]
        );
    }

    #[test]
    fn empty_set_means_zero() {
        let s = Summary::of(std::iter::empty());
        assert_eq!(s.questions, 0);
        assert_eq!(s.recall, [0.0; 4]);
        assert_eq!(s.mrr, 0.0);
    }
}
