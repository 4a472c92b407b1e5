//! What both stores compute the same way, so they rank identically: the terms an entry is
//! indexed under, and the BM25 score of a term in an entry.

use std::collections::BTreeMap;

use adk_proto::session::v1::{part, Content};

use crate::text;

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length normalisation.
pub const B: f64 = 0.75;

/// An entry's index terms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Terms {
    /// Each distinct term once, sorted, with its number of occurrences.
    pub counts: Vec<(String, u32)>,
    /// Term occurrences in all (BM25's document length); 0 when there is no text.
    pub len: u32,
}

impl Terms {
    /// The terms of the text of all of `content`'s parts (thoughts included), joined with
    /// spaces so that words of adjacent parts stay apart.
    pub fn of(content: &Content) -> Self {
        let text = content
            .parts
            .iter()
            .filter_map(|p| match &p.data {
                Some(part::Data::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        let all = text::terms(&text);
        let mut counts = BTreeMap::<String, u32>::new();
        for term in &all {
            *counts.entry(term.clone()).or_default() += 1;
        }
        Self {
            counts: counts.into_iter().collect(),
            len: u32::try_from(all.len()).unwrap_or(u32::MAX),
        }
    }
}

/// BM25's inverse document frequency of a term found in `df` of `n` entries.
pub fn idf(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A term's contribution to an entry's score: it occurs `tf` times in an entry of `len` terms,
/// where entries average `avg_len` terms.
pub fn score(idf: f64, tf: f64, len: f64, avg_len: f64) -> f64 {
    let norm = K1 * (1.0 - B + B * len / avg_len);
    idf * tf * (K1 + 1.0) / (tf + norm)
}
