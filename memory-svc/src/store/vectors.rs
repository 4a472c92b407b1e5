//! Entry embeddings, once for both stores: which vectors a write stores, keeps or drops, how a
//! vector is encoded, and the exact nearest-neighbour ranking of a scope's vectors.
//!
//! An entry's vector is the embedding of its text ([`index::text_of`] its content; an entry
//! without text has none). It is computed before the write that stores the entry, by the
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
/// (the model's dimension is checked at start, so none is ever stored).
pub fn similarity(query: &[f32], stored: &[u8]) -> Result<f32> {
    if stored.len() != query.len() * 4 {
        return Err(StoreError::corrupt(format!(
            "stored vector of {} bytes, the model has {} dimensions",
            stored.len(),
            query.len()
        )));
    }
    Ok(stored
        .chunks_exact(4)
        .zip(query)
        .map(|(b, q)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * q)
        .sum())
}

/// A scored vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nearest {
    pub seq: u64,
    pub score: f32,
}

/// Scores every `(seq, stored vector)` against `query`; best first, equal scores in seq
/// (ingestion) order. Exact: every vector is scored.
pub fn rank(
    vectors: impl IntoIterator<Item = Result<(u64, impl AsRef<[u8]>)>>,
    query: &[f32],
) -> Result<Vec<Nearest>> {
    let mut scored = Vec::new();
    for item in vectors {
        let (seq, bytes) = item?;
        scored.push(Nearest {
            seq,
            score: similarity(query, bytes.as_ref())?,
        });
    }
    scored.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    Ok(scored)
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
        let ranked = rank(stored.into_iter().map(Ok), &q).unwrap();
        let seqs: Vec<u64> = ranked.iter().map(|n| n.seq).collect();
        assert_eq!(seqs, [2, 3, 1]);
        assert!((ranked[0].score - 1.0).abs() < 1e-6);
        assert!(rank([Ok((1, encode(&[1.0])))], &q).is_err());
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
}
