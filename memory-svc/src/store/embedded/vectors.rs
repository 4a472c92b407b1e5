//! Entry vectors in the embedded store: the `vectors` tree (app, user, seq → the vector as
//! little-endian `f32`s) and the `vector_model` tree (the identity of the model that made
//! them). Writes change `vectors` in their own transaction (see [`super::write`]); the
//! background embedding of older entries adds to it here. Runs on blocking threads.

use adk_common::{
    keys::{Key, KeyReader},
    kv::{Batch, TransactionError, Transactional},
};

use super::{
    super::{
        index::text_of,
        vectors::{self, check_model, ModelCheck, Nearest, Unembedded, VectorEdits, VectorOp},
        Hit, Result, SearchQuery, StoreError,
    },
    records::{decode, key_seq, EntryRecord},
    EmbeddedMemoryStore,
};
use crate::embed::Identity;

/// The `vector_model` key holding the identity.
const MODEL: &[u8] = b"model";

impl EmbeddedMemoryStore {
    /// `edits` as a batch of the `vectors` tree, for the write's transaction.
    pub(super) fn vector_batch(&self, scope: &Key, edits: &VectorEdits) -> Result<Batch> {
        let mut batch = Batch::default();
        if edits.clear {
            for key in self.vectors.scan_prefix(scope).keys() {
                batch.remove(key?);
            }
        }
        for (&seq, op) in &edits.ops {
            let key = scope.clone().u64(seq);
            match op {
                VectorOp::Put(v) => batch.insert(key.as_bytes(), vectors::encode(v)),
                VectorOp::Delete => batch.remove(key.as_bytes()),
            }
        }
        Ok(batch)
    }

    /// [`super::MemoryStore::nearest`] in the scope whose keys start with `scope`.
    pub(super) fn nearest_now(
        &self,
        scope: &Key,
        vector: &[f32],
        query: &SearchQuery,
    ) -> Result<Vec<Hit>> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let _reading = self.scans.reading(scope);
        // Versions stay 0: this process's writes drop the scope instead (see `vector_cache`).
        let ranked = match self.vector_cache.get(scope.as_bytes(), 0) {
            Ok(matrix) => matrix.rank(vector)?,
            Err(reading) => {
                let prefix_len = scope.as_bytes().len();
                let (ranked, matrix) = vectors::rank(
                    self.vectors.scan_prefix(scope).map(|kv| {
                        let (key, value) = kv?;
                        Ok((key_seq(&key, prefix_len)?, value))
                    }),
                    vector,
                    self.vector_cache.capacity(),
                )?;
                if let Some(matrix) = matrix {
                    self.vector_cache.keep(scope.as_bytes(), reading, 0, matrix);
                }
                ranked
            }
        };
        let candidates = self.candidates(scope, &query.filter)?;
        let hidden = self.hidden(scope, query)?;
        let mut hits = Vec::with_capacity(query.limit);
        for Nearest { seq, score } in ranked {
            if hidden.contains(&seq) || candidates.as_ref().is_some_and(|c| !c.contains(&seq)) {
                continue;
            }
            // An entry removed since its vector was read is simply no longer there.
            let Some(record) = self.record(scope, seq)? else {
                continue;
            };
            let entry = record.into_entry();
            if query.admits(&entry) {
                hits.push(Hit {
                    entry,
                    score: f64::from(score),
                });
                if hits.len() == query.limit {
                    break;
                }
            }
        }
        Ok(hits)
    }

    /// [`super::MemoryStore::use_model`].
    pub(super) fn use_model_now(&self, model: &Identity) -> Result<()> {
        let stored = self.vector_model.get(MODEL)?;
        let parsed = stored.as_deref().map(parse_identity).transpose()?;
        let check = check_model(
            parsed
                .as_ref()
                .map(|(m, d, f)| (m.as_str(), *d, f.as_str())),
            model,
        )
        .map_err(StoreError::Model)?;
        if check == ModelCheck::Changed {
            let mut batch = Batch::default();
            for key in self.vectors.iter().keys() {
                batch.remove(key?);
            }
            self.vectors.apply_batch(batch)?;
            self.vector_cache.clear();
            self.vector_model
                .insert(MODEL, encode_identity(model).into_bytes())?;
            self.db.flush()?;
        }
        Ok(())
    }

    /// [`super::MemoryStore::unembedded`].
    pub(super) fn unembedded_now(
        &self,
        after: Option<&Unembedded>,
        n: usize,
    ) -> Result<Vec<Unembedded>> {
        let start = match after {
            Some(u) => {
                let mut key = Key::new()
                    .str(&u.app_name)
                    .str(&u.user_id)
                    .u64(u.seq)
                    .into_vec();
                // The smallest key after it.
                key.push(0);
                key
            }
            None => Vec::new(),
        };
        let mut out = Vec::new();
        for kv in self.entries.range(start..) {
            if out.len() == n {
                break;
            }
            let (key, value) = kv?;
            if self.vectors.contains_key(&key)? {
                continue;
            }
            let mut reader = KeyReader::new(&key);
            let (Some(app_name), Some(user_id), Some(seq)) =
                (reader.str(), reader.str(), reader.u64())
            else {
                return Err(StoreError::corrupt("entry key"));
            };
            let record: EntryRecord = decode(&value, "entry")?;
            let text = text_of(record.content.as_ref().unwrap_or(&Default::default()));
            if text.trim().is_empty() {
                continue;
            }
            out.push(Unembedded {
                app_name,
                user_id,
                seq,
                text,
            });
        }
        Ok(out)
    }

    /// [`super::MemoryStore::put_vectors`]: one transaction that stores each vector whose
    /// entry still has its text (an entry rewritten or removed meanwhile is left alone).
    pub(super) fn put_vectors_now(&self, vectors: &[(Unembedded, Vec<f32>)]) -> Result<usize> {
        let encoded: Vec<(Vec<u8>, &str, Vec<u8>)> = vectors
            .iter()
            .map(|(u, v)| {
                let key = Key::new().str(&u.app_name).str(&u.user_id).u64(u.seq);
                (key.into_vec(), u.text.as_str(), vectors::encode(v))
            })
            .collect();
        let stored = (&self.entries, &self.vectors)
            .transaction(|(entries, stored)| {
                let mut n = 0;
                for (key, text, vector) in &encoded {
                    let Some(value) = entries.get(key)? else {
                        continue;
                    };
                    let Ok(record) = decode::<EntryRecord>(&value, "entry") else {
                        continue;
                    };
                    let current = text_of(record.content.as_ref().unwrap_or(&Default::default()));
                    if current == *text {
                        stored.insert(key.as_slice(), vector.as_slice())?;
                        n += 1;
                    }
                }
                Ok(n)
            })
            .map_err(|e: TransactionError<std::convert::Infallible>| match e {
                TransactionError::Abort(never) => match never {},
                TransactionError::Storage(e) => StoreError::from(e),
            })?;
        for (u, _) in vectors {
            let scope = Key::new().str(&u.app_name).str(&u.user_id);
            self.vector_cache.written(scope.as_bytes());
        }
        Ok(stored)
    }
}

/// The identity as `vector_model` stores it: dimension, fingerprint and model, one per line
/// (the model, a path or a name, comes last since only it could hold a line break).
fn encode_identity(model: &Identity) -> String {
    format!(
        "{}\n{}\n{}",
        model.dimension, model.fingerprint, model.model
    )
}

fn parse_identity(bytes: &[u8]) -> Result<(String, usize, String)> {
    let corrupt = || StoreError::corrupt("vector model identity");
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt())?;
    let mut lines = text.splitn(3, '\n');
    let (Some(dimension), Some(fingerprint), Some(model)) =
        (lines.next(), lines.next(), lines.next())
    else {
        return Err(corrupt());
    };
    let dimension = dimension.parse().map_err(|_| corrupt())?;
    Ok((model.to_owned(), dimension, fingerprint.to_owned()))
}
