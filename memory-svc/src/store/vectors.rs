//! Entry embeddings, once for both stores: which vectors a write stores, keeps or drops, how a
//! vector is encoded, and the exact nearest-neighbour ranking of a scope's vectors.
//!
//! An entry's vector is the embedding of its text ([`super::index::text_of`] its content; an
//! entry without text has none). It is computed before the write that stores the entry, by the
//! caller, and committed in the same transaction ([`Vectors`], [`edits`]). Vectors live beside
//! the entries (a sled tree, a PostgreSQL table) keyed by (app, user, seq), written and removed
//! with their entry. An entry rewritten in place with the same text keeps its vector.
//!
//! Vectors are unit length (see [`crate::embed`]), so the cosine similarity of two texts is the
//! dot product of their vectors.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use super::{index::text_of, plan::Edit, Entry, Result, StoreError};

/// The vectors of a write call's texts, by text, computed before the write.
#[derive(Debug, Clone, Default)]
pub struct Vectors {
    by_text: HashMap<String, Arc<[f32]>>,
}

impl Vectors {
    /// The distinct texts of `entries` that have a vector (the non-empty ones), in order.
    pub fn texts_of(entries: &[Entry]) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        entries
            .iter()
            .map(|e| text_of(&e.content))
            .filter(|t| !t.trim().is_empty() && seen.insert(t.clone()))
            .collect()
    }

    /// `vectors[i]` is the vector of `texts[i]`.
    pub fn new(texts: Vec<String>, vectors: Vec<Vec<f32>>) -> Self {
        Self {
            by_text: texts
                .into_iter()
                .zip(vectors)
                .map(|(t, v)| (t, Arc::from(v)))
                .collect(),
        }
    }
}

/// What a write does to one seq's vector.
#[derive(Debug, Clone, PartialEq)]
pub enum VectorOp {
    Put(Arc<[f32]>),
    Delete,
}

/// The vector changes of a write, applied in its transaction after its entry edits.
#[derive(Debug, Default, PartialEq)]
pub struct VectorEdits {
    /// Remove every vector of the scope first.
    pub clear: bool,
    pub ops: BTreeMap<u64, VectorOp>,
}

/// The vector changes that go with a plan's `edits`: a removed entry loses its vector, an
/// inserted one gets the vector of its text from `vectors`; an entry removed and inserted
/// again at its seq with the same text (a rewrite, a new context) keeps the vector it has.
pub fn edits(edits: &[Edit], vectors: &Vectors) -> VectorEdits {
    let mut out = VectorEdits::default();
    let mut removed: HashMap<u64, String> = HashMap::new();
    for edit in edits {
        match edit {
            Edit::Remove(old) => {
                out.ops.insert(old.seq, VectorOp::Delete);
                removed.insert(old.seq, text_of(&old.entry.content));
            }
            Edit::Insert { seq, entry, .. } => {
                let text = text_of(&entry.content);
                match vectors.by_text.get(&text) {
                    Some(v) => {
                        out.ops.insert(*seq, VectorOp::Put(v.clone()));
                    }
                    None if removed.get(seq) == Some(&text) => {
                        out.ops.remove(seq);
                    }
                    None => {
                        out.ops.insert(*seq, VectorOp::Delete);
                    }
                }
            }
            Edit::Clear => {
                out.clear = true;
                out.ops.clear();
                removed.clear();
            }
            Edit::Tombstone(_) | Edit::Lift(_) => {}
        }
    }
    out
}

/// A vector as stored: its components as little-endian `f32`s.
pub fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The dot product of `query` and a stored vector; a vector of another dimension is corrupt
/// (the model's dimension is checked at start, so none is ever stored). Read in place: the
/// stored bytes are decoded a lane at a time, never into a vector of their own.
pub fn similarity(query: &[f32], stored: &[u8]) -> Result<f32> {
    if stored.len() != query.len() * 4 {
        return Err(wrong_dimension(stored.len() / 4, query.len()));
    }
    let mut lanes = [0.0f32; LANES];
    let (mut bytes, mut q) = (stored.chunks_exact(4 * LANES), query.chunks_exact(LANES));
    for (b, q) in bytes.by_ref().zip(q.by_ref()) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let x = f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            *lane += x * q[i];
        }
    }
    let tail = bytes
        .remainder()
        .chunks_exact(4)
        .zip(q.remainder())
        .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q);
    Ok(lanes.iter().sum::<f32>() + tail.sum::<f32>())
}

/// The dot product of two vectors of one length, summed as [`similarity`] sums it (so a vector
/// scores the same from the store and from [`Matrix`]).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let (mut xs, mut ys) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in xs.by_ref().zip(ys.by_ref()) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane += x[i] * y[i];
        }
    }
    let tail = xs
        .remainder()
        .iter()
        .zip(ys.remainder())
        .map(|(x, y)| x * y);
    lanes.iter().sum::<f32>() + tail.sum::<f32>()
}

/// Independent partial sums of a dot product: one chain of additions cannot be vectorised
/// (floating-point addition is not associative), eight can.
const LANES: usize = 8;

fn wrong_dimension(stored: usize, model: usize) -> StoreError {
    StoreError::corrupt(format!(
        "stored vector of {stored} dimensions, the model has {model}"
    ))
}

/// A scored vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nearest {
    pub seq: u64,
    pub score: f32,
}

/// Best first; equal scores in seq (ingestion) order.
fn best_first(a: &Nearest, b: &Nearest) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq))
}

/// Every vector of a scope scored, handed out best first. Sorted a slice at a time (the best
/// [`FIRST_SORTED`], then twice as many each time more are asked for), since a search reads
/// only its limit and what its filters turn away: at 100k vectors a full sort would cost more
/// than the scoring. The order is the full sort's (score, then seq, is a total order).
#[derive(Debug)]
pub struct Ranking {
    scored: Vec<Nearest>,
    next: usize,
    sorted: usize,
}

/// How many of a ranking are sorted first.
const FIRST_SORTED: usize = 64;

impl Ranking {
    fn new(scored: Vec<Nearest>) -> Self {
        Self {
            scored,
            next: 0,
            sorted: 0,
        }
    }
}

impl Iterator for Ranking {
    type Item = Nearest;

    fn next(&mut self) -> Option<Nearest> {
        if self.next == self.sorted {
            let rest = self
                .scored
                .get_mut(self.sorted..)
                .filter(|r| !r.is_empty())?;
            let take = self.sorted.max(FIRST_SORTED).min(rest.len());
            if take < rest.len() {
                rest.select_nth_unstable_by(take - 1, best_first);
            }
            rest[..take].sort_unstable_by(best_first);
            self.sorted += take;
        }
        let nearest = self.scored.get(self.next).copied();
        self.next += 1;
        nearest
    }
}

/// Scores every `(seq, stored vector)` against `query` (exact: every vector is scored). With
/// `keep` bytes to spare, also returns the vectors read as a [`Matrix`] for the next searches
/// (none when they need more).
pub fn rank(
    vectors: impl IntoIterator<Item = Result<(u64, impl AsRef<[u8]>)>>,
    query: &[f32],
    keep: usize,
) -> Result<(Ranking, Option<Matrix>)> {
    let mut scored = Vec::new();
    let mut matrix = Some(Matrix::default());
    for item in vectors {
        let (seq, bytes) = item?;
        let bytes = bytes.as_ref();
        scored.push(Nearest {
            seq,
            score: similarity(query, bytes)?,
        });
        if let Some(m) = &mut matrix {
            if m.bytes() + 8 + bytes.len() > keep {
                matrix = None;
            } else {
                m.seqs.push(seq);
                m.values.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                );
            }
        }
    }
    if let Some(m) = &mut matrix {
        m.seqs.shrink_to_fit();
        m.values.shrink_to_fit();
    }
    Ok((Ranking::new(scored), matrix))
}

/// A scope's vectors decoded, one row per seq, for searches that do not read the store.
#[derive(Debug, Default)]
pub struct Matrix {
    seqs: Vec<u64>,
    values: Vec<f32>,
}

impl Matrix {
    /// Memory it holds (once read: [`rank`] trims what it allocated ahead).
    pub fn bytes(&self) -> usize {
        self.seqs.len() * 8 + self.values.len() * 4
    }

    /// As [`rank`] ranks the vectors it was read from.
    pub fn rank(&self, query: &[f32]) -> Result<Ranking> {
        if self.values.len() != self.seqs.len() * query.len() {
            let stored = self.values.len() / self.seqs.len().max(1);
            return Err(wrong_dimension(stored, query.len()));
        }
        let rows = self.values.chunks_exact(query.len().max(1));
        let scored = self
            .seqs
            .iter()
            .zip(rows)
            .map(|(&seq, row)| Nearest {
                seq,
                score: dot(query, row),
            })
            .collect();
        Ok(Ranking::new(scored))
    }

    /// Takes a write's vector changes (`ops` of its [`VectorEdits`]), so that it holds what
    /// reading the scope again would give: rows stay in seq order, with the same values.
    /// `false` for a vector of another dimension than its rows (the matrix must be dropped).
    ///
    /// Room for new rows is added exactly, with a little to spare (1/64 of the rows), and
    /// removals give theirs back: a doubling `Vec` would hold up to twice the bytes the cache
    /// counts.
    pub fn apply(&mut self, ops: &BTreeMap<u64, VectorOp>) -> bool {
        let added = ops
            .iter()
            .filter(|(seq, op)| {
                matches!(op, VectorOp::Put(_)) && self.seqs.binary_search(seq).is_err()
            })
            .count();
        let first_put = ops.values().find_map(|op| match op {
            VectorOp::Put(v) => Some(v.len()),
            VectorOp::Delete => None,
        });
        let Some(dimension) = self.values.len().checked_div(self.seqs.len()).or(first_put) else {
            // Empty, and nothing to add.
            return true;
        };
        let spare = self.seqs.capacity() - self.seqs.len();
        if added > spare {
            let rows = added.max(self.seqs.len() / 64);
            self.seqs.reserve_exact(rows);
            self.values.reserve_exact(rows * dimension);
        }
        for (&seq, op) in ops {
            let at = self.seqs.partition_point(|&s| s < seq);
            let present = self.seqs.get(at) == Some(&seq);
            let row = at * dimension..(at + 1) * dimension;
            match op {
                VectorOp::Put(v) if v.len() != dimension => return false,
                VectorOp::Put(v) if present => self.values[row].copy_from_slice(v),
                VectorOp::Put(v) => {
                    self.seqs.insert(at, seq);
                    self.values.splice(row.start..row.start, v.iter().copied());
                }
                VectorOp::Delete if present => {
                    self.seqs.remove(at);
                    self.values.drain(row);
                }
                VectorOp::Delete => {}
            }
        }
        // Removals give back what room they leave beyond that spare.
        let rows = self.seqs.len();
        if self.seqs.capacity() > rows + rows / 32 + 1 {
            self.seqs.shrink_to(rows + rows / 64);
            self.values.shrink_to((rows + rows / 64) * dimension);
        }
        true
    }
}

/// What a stored model identity says about the configured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelCheck {
    /// The same model: stored vectors are comparable.
    Same,
    /// Another model (or none stored): stored vectors are dropped and recomputed.
    Changed,
}

/// Compares the stored model identity (`model`, `dimension`, `fingerprint`) with the configured
/// one. The same model and fingerprint answering another dimension is an error: its stored
/// vectors cannot be told apart from new ones, so nothing is mixed or dropped silently.
pub fn check_model(
    stored: Option<(&str, usize, &str)>,
    configured: &crate::embed::Identity,
) -> std::result::Result<ModelCheck, String> {
    match stored {
        Some((model, dimension, fingerprint))
            if model == configured.model && fingerprint == configured.fingerprint =>
        {
            if dimension == configured.dimension {
                Ok(ModelCheck::Same)
            } else {
                Err(format!(
                    "the stored memory vectors of {model} have {dimension} dimensions, but it \
                     now answers {}: if the model was replaced, configure it under another \
                     name so that every entry is embedded again",
                    configured.dimension
                ))
            }
        }
        _ => Ok(ModelCheck::Changed),
    }
}

/// An entry without a vector of the configured model, found at start to be embedded in the
/// background.
#[derive(Debug, Clone, PartialEq)]
pub struct Unembedded {
    pub app_name: String,
    pub user_id: String,
    pub seq: u64,
    /// Its text: the vector is stored only if the entry still has it.
    pub text: String,
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{part, Content, Part};

    use super::*;
    use crate::store::plan::{Context, Stored};

    fn entry(text: &str) -> Entry {
        Entry {
            id: text.into(),
            content: Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(part::Data::Text(text.into())),
                    ..Default::default()
                }],
            },
            ..Default::default()
        }
    }

    fn insert(seq: u64, text: &str) -> Edit {
        Edit::Insert {
            seq,
            entry: entry(text),
            context: Context::default(),
            terms: Default::default(),
        }
    }

    fn remove(seq: u64, text: &str) -> Edit {
        Edit::Remove(Stored {
            seq,
            entry: entry(text),
            context: Context::default(),
            terms: Vec::new(),
            len: 0,
        })
    }

    #[test]
    fn a_rewrite_keeps_its_vector_only_with_its_text() {
        let vectors = Vectors::new(vec!["new".into()], vec![vec![1.0, 0.0]]);
        let put = VectorOp::Put(Arc::from(vec![1.0, 0.0]));
        let e = edits(
            &[
                remove(1, "same"),
                insert(1, "same"),
                remove(2, "old"),
                insert(2, "new"),
                remove(3, "gone"),
                remove(4, "old"),
                insert(4, "unembedded"),
                insert(5, "new"),
            ],
            &vectors,
        );
        let expected: BTreeMap<u64, VectorOp> = [
            (2, put.clone()),
            (3, VectorOp::Delete),
            (4, VectorOp::Delete),
            (5, put),
        ]
        .into_iter()
        .collect();
        assert_eq!(e.ops, expected);
        assert!(!e.clear);
        let cleared = edits(&[remove(1, "a"), Edit::Clear], &vectors);
        assert!(cleared.clear && cleared.ops.is_empty());
    }

    #[test]
    fn texts_are_distinct_and_non_empty() {
        let texts = Vectors::texts_of(&[entry("a"), entry(" "), entry("b"), entry("a")]);
        assert_eq!(texts, ["a", "b"]);
    }

    #[test]
    fn ranking_is_by_similarity_then_seq() {
        let q = [0.6, 0.8];
        let stored = [
            (3, encode(&[0.6, 0.8])),
            (1, encode(&[1.0, 0.0])),
            (2, encode(&[0.6, 0.8])),
        ];
        let (ranked, matrix) = rank(stored.clone().into_iter().map(Ok), &q, usize::MAX).unwrap();
        let ranked: Vec<Nearest> = ranked.collect();
        let seqs: Vec<u64> = ranked.iter().map(|n| n.seq).collect();
        assert_eq!(seqs, [2, 3, 1]);
        assert!((ranked[0].score - 1.0).abs() < 1e-6);
        let from_matrix: Vec<Nearest> = matrix.unwrap().rank(&q).unwrap().collect();
        assert_eq!(from_matrix, ranked);
        assert!(rank([Ok((1, encode(&[1.0])))], &q, usize::MAX).is_err());
        // Not kept when it needs more than it may take.
        let (_, none) = rank(stored.into_iter().map(Ok), &q, 30).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn rankings_sorted_in_slices_are_sorted_fully() {
        let dimension = 20;
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // A few distinct values, so that equal scores are common.
            ((state >> 33) % 5) as f32 - 2.0
        };
        let stored: Vec<(u64, Vec<u8>)> = (0..1000u64)
            .map(|seq| {
                (
                    seq,
                    encode(&(0..dimension).map(|_| next()).collect::<Vec<_>>()),
                )
            })
            .collect();
        let query: Vec<f32> = (0..dimension).map(|_| next()).collect();
        let (ranked, matrix) = rank(stored.iter().cloned().map(Ok), &query, usize::MAX).unwrap();
        let ranked: Vec<Nearest> = ranked.collect();
        let mut expected: Vec<Nearest> = stored
            .iter()
            .map(|(seq, bytes)| {
                let plain: f32 = bytes
                    .chunks_exact(4)
                    .zip(&query)
                    .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q)
                    .sum();
                Nearest {
                    seq: *seq,
                    score: plain,
                }
            })
            .collect();
        expected.sort_by(best_first);
        assert_eq!(ranked, expected);
        assert_eq!(
            matrix.unwrap().rank(&query).unwrap().collect::<Vec<_>>(),
            expected
        );
    }

    #[test]
    fn a_model_answering_another_dimension_is_refused() {
        let identity = crate::embed::Identity {
            model: "m".into(),
            dimension: 384,
            fingerprint: "sha256:ab".into(),
        };
        assert_eq!(check_model(None, &identity), Ok(ModelCheck::Changed));
        assert_eq!(
            check_model(Some(("m", 384, "sha256:ab")), &identity),
            Ok(ModelCheck::Same)
        );
        assert_eq!(
            check_model(Some(("m", 384, "sha256:cd")), &identity),
            Ok(ModelCheck::Changed)
        );
        let err = check_model(Some(("m", 768, "sha256:ab")), &identity).unwrap_err();
        assert!(err.contains("768") && err.contains("384"), "{err}");
    }

    /// A matrix read from `(seq, vector)` rows, as a search keeps it.
    fn read(rows: &BTreeMap<u64, Vec<f32>>) -> Matrix {
        let stored = rows.iter().map(|(&seq, v)| Ok((seq, encode(v))));
        rank(stored, &[1.0, 0.0], usize::MAX).unwrap().1.unwrap()
    }

    #[test]
    fn a_kept_matrix_takes_a_write_as_reading_the_scope_again_would_give() {
        let v = |x: f32| Arc::<[f32]>::from(vec![x, 1.0 - x]);
        let mut rows: BTreeMap<u64, Vec<f32>> = (0..200)
            .map(|seq| (seq * 2, v(seq as f32 / 200.0).to_vec()))
            .collect();
        let mut matrix = read(&rows);
        let writes: Vec<Vec<(u64, VectorOp)>> = vec![
            // Appended entries (the common write).
            vec![(400, VectorOp::Put(v(0.9))), (401, VectorOp::Put(v(0.8)))],
            // A rewrite in place, an insertion between rows, a removal, and the removal of an
            // entry that had no vector.
            vec![
                (10, VectorOp::Put(v(0.05))),
                (11, VectorOp::Put(v(0.06))),
                (0, VectorOp::Delete),
                (399, VectorOp::Delete),
            ],
            // Everything removed, then rows from nothing.
            (0..402).map(|seq| (seq, VectorOp::Delete)).collect(),
            vec![(500, VectorOp::Put(v(0.5)))],
        ];
        for ops in writes {
            let ops: BTreeMap<u64, VectorOp> = ops.into_iter().collect();
            for (seq, op) in &ops {
                match op {
                    VectorOp::Put(x) => rows.insert(*seq, x.to_vec()),
                    VectorOp::Delete => rows.remove(seq),
                };
            }
            assert!(matrix.apply(&ops));
            let again = read(&rows);
            assert_eq!((&matrix.seqs, &matrix.values), (&again.seqs, &again.values));
            // Room is added and given back exactly: the cache counts what the matrix holds.
            assert!(matrix.seqs.capacity() <= rows.len() + rows.len() / 32 + 1);
            assert!(matrix.values.capacity() <= 2 * (rows.len() + rows.len() / 32 + 1));
        }
        let other_dimension = BTreeMap::from([(600, VectorOp::Put(Arc::from(vec![1.0])))]);
        assert!(!matrix.apply(&other_dimension));
    }
}
