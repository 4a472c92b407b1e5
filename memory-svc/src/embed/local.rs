//! `--embedder local:DIR`: a BERT-family sentence encoder (all-MiniLM-L6-v2, bge-small,
//! e5-small, gte-small, multilingual MiniLM, …) loaded from a sentence-transformers folder and
//! run in-process on the CPU with candle.
//!
//! Inference is CPU-bound, so it runs on tokio's blocking threads, one call at a time: a
//! semaphore with one permit bounds it, and the async runtime never runs it. The texts of one
//! call are embedded in batches, sorted by length so that little padding is computed (the
//! attention mask keeps padding out of every vector); the batches run side by side on rayon's
//! pool, one per core, and a lone batch (a search's query) splits its matrix products between
//! the cores instead.

use std::{path::Path, sync::Arc};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use rayon::prelude::*;
use tokenizers::{Encoding, Tokenizer, TruncationParams};
use tokio::sync::Semaphore;

use super::{
    folder::{load_error, read_json, ModelFolder, Pooling},
    unit_length, EmbedError, Identity,
};

/// Sets candle's thread counts, unless the environment sets them: element-wise operations on
/// the calling thread (`CANDLE_NUM_THREADS=1`), matrix products and batches on one rayon thread
/// per core (`RAYON_NUM_THREADS`). Call before any other thread starts (it sets those variables).
///
/// candle splits each element-wise operation between the calling thread and a pool of workers
/// that spin while they wait for each other. A sentence model runs about 150 such operations
/// per batch, each on little data, so the hand-offs cost more than they save, and on a machine
/// whose cores are busy with other work a descheduled worker leaves the others spinning: a
/// query took 19 ms on a quiet 2-core machine and 27-33 ms on a busy one (BENCHMARKS.md,
/// "Vector search and the local model, profiled").
///
/// Without `RAYON_NUM_THREADS`, candle counts the machine's cores anew for every matrix product
/// by reading `/proc/cpuinfo`: about 36 reads per forward pass, a quarter to a third of a short
/// query's embedding time (BENCHMARKS.md, "The local model on both cores").
pub fn configure_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        std::env::set_var("RAYON_NUM_THREADS", cores.to_string());
    }
}

/// Texts run through the encoder together. Small, so that a call's batches spread evenly over
/// the cores (they are sorted by length, the longest last) and pad little: on short turns in
/// calls of 100, batches of 8 gave 308-335 embeddings/s on 2 cores, batches of 32 288-308
/// (BENCHMARKS.md, "The local model on both cores").
const BATCH: usize = 8;

/// The in-process model. Cheap to clone.
#[derive(Clone)]
pub struct LocalEmbedder {
    model: Arc<Model>,
    /// One inference at a time: each one uses every core already (see the module docs).
    running: Arc<Semaphore>,
    identity: Identity,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

struct Model {
    bert: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    lower_case: bool,
    pad_id: u32,
}

impl LocalEmbedder {
    /// Loads the model in `dir` (blocking: reads and hashes the weights).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let folder = ModelFolder::read(dir)?;
        let config: BertConfig = read_json(&folder.config)?;
        if let Some(kind) = config.model_type.as_deref().filter(|kind| *kind != "bert") {
            let reason = format!("model_type {kind:?} is not supported (BERT-family encoders are)");
            return Err(load_error(&folder.config, &reason));
        }
        let tokenizer_json = std::fs::read(&folder.tokenizer)
            .map_err(|e| load_error(&folder.tokenizer, &e.to_string()))?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_json)
            .map_err(|e| load_error(&folder.tokenizer, &e.to_string()))?;
        // As sentence-transformers does: max_seq_length, never beyond the position table;
        // padding per batch here, not the tokenizer's own (often a fixed length).
        let max_length = folder
            .max_seq_length
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings);
        let truncation = TruncationParams {
            max_length,
            ..Default::default()
        };
        let pad_id = tokenizer
            .get_padding()
            .map_or(config.pad_token_id as u32, |padding| padding.pad_id);
        tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| load_error(&folder.tokenizer, &e.to_string()))?
            .with_padding(None);

        let weights = std::fs::read(&folder.weights)
            .map_err(|e| load_error(&folder.weights, &e.to_string()))?;
        let settings = format!(
            "pooling={} max_length={max_length} lower_case={}",
            folder.pooling.name(),
            folder.lower_case
        );
        let fingerprint = fingerprint(&[&weights, &tokenizer_json, settings.as_bytes()]);
        let bert = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .and_then(|vb| BertModel::load(vb, &config))
            .map_err(|e| load_error(&folder.weights, &e.to_string()))?;

        let identity = Identity {
            model: std::fs::canonicalize(dir)
                .unwrap_or_else(|_| dir.to_owned())
                .display()
                .to_string(),
            dimension: config.hidden_size,
            fingerprint,
        };
        tracing::debug!(
            model = %identity,
            pooling = folder.pooling.name(),
            normalized_by_model = folder.normalize,
            max_length,
            "embedding model loaded"
        );
        let model = Model {
            bert,
            tokenizer,
            pooling: folder.pooling,
            lower_case: folder.lower_case,
            pad_id,
        };
        Ok(Self {
            model: Arc::new(model),
            running: Arc::new(Semaphore::new(1)),
            identity,
        })
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// One unit-length vector per text, in input order.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|e| EmbedError::Inference(e.to_string()))?;
        let model = Arc::clone(&self.model);
        // The permit moves into the task: a caller that gives up does not free the CPU early.
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            model.embed(texts)
        })
        .await
        .map_err(|e| EmbedError::Inference(e.to_string()))?
    }
}

impl Model {
    fn embed(&self, mut texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.lower_case {
            texts.iter_mut().for_each(|t| *t = t.to_lowercase());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let chunks: Vec<&[usize]> = order.chunks(BATCH).collect();
        // Each batch on its own rayon thread; a batch's matrix products run on the same pool,
        // so the cores are never asked for more threads than they have.
        let pooled = chunks
            .par_iter()
            .map(|chunk| {
                let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
                self.forward(&batch)
            })
            .collect::<candle_core::Result<Vec<_>>>()
            .map_err(|e| EmbedError::Inference(e.to_string()))?;
        let mut vectors = vec![Vec::new(); encodings.len()];
        for (chunk, pooled) in chunks.into_iter().zip(pooled) {
            for (&i, vector) in chunk.iter().zip(pooled) {
                vectors[i] = unit_length(vector).ok_or_else(|| {
                    EmbedError::Inference("the model produced a zero vector".into())
                })?;
            }
        }
        Ok(vectors)
    }

    /// Pooled (not yet normalised) vectors of one batch, padded to its longest input.
    fn forward(&self, batch: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let len = batch.iter().map(|e| e.len()).max().unwrap_or(0);
        let (mut ids, mut types, mut mask) = (Vec::new(), Vec::new(), Vec::new());
        for encoding in batch {
            let padding = len - encoding.len();
            ids.extend(encoding.get_ids().iter().copied());
            ids.extend(std::iter::repeat_n(self.pad_id, padding));
            types.extend(encoding.get_type_ids().iter().copied());
            types.extend(std::iter::repeat_n(0, padding));
            mask.extend(encoding.get_attention_mask().iter().copied());
            mask.extend(std::iter::repeat_n(0, padding));
        }
        let shape = (batch.len(), len);
        let device = &self.bert.device;
        let ids = Tensor::from_vec(ids, shape, device)?;
        let types = Tensor::from_vec(types, shape, device)?;
        let mask_tensor = Tensor::from_vec(mask.clone(), shape, device)?;
        let tokens = self.bert.forward(&ids, &types, Some(&mask_tensor))?;
        let tokens = tokens.to_vec3::<f32>()?;
        Ok(tokens
            .iter()
            .zip(mask.chunks(len.max(1)))
            .map(|(tokens, mask)| pool(self.pooling, tokens, mask))
            .collect())
    }
}

/// One sentence vector from its token vectors; `mask` is 1 for real tokens, 0 for padding.
fn pool(pooling: Pooling, tokens: &[Vec<f32>], mask: &[u32]) -> Vec<f32> {
    let dimension = tokens.first().map_or(0, Vec::len);
    let real = || {
        tokens
            .iter()
            .zip(mask)
            .filter(|(_, &m)| m != 0)
            .map(|(t, _)| t)
    };
    let count = real().count().max(1) as f32;
    let sum = || {
        real().fold(vec![0.0; dimension], |mut acc, t| {
            acc.iter_mut().zip(t).for_each(|(a, x)| *a += x);
            acc
        })
    };
    match pooling {
        Pooling::Cls => tokens.first().cloned().unwrap_or_default(),
        Pooling::Mean => sum().into_iter().map(|x| x / count).collect(),
        Pooling::MeanSqrtLen => sum().into_iter().map(|x| x / count.sqrt()).collect(),
        Pooling::Max => real().fold(vec![f32::NEG_INFINITY; dimension], |mut acc, t| {
            acc.iter_mut().zip(t).for_each(|(a, &x)| *a = a.max(x));
            acc
        }),
    }
}

/// `sha256:` and the hex SHA-256 of `parts`, each prefixed with its length.
fn fingerprint(parts: &[&[u8]]) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        digest.update(&(part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    let hex: String = digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests;
