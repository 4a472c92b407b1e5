//! Reading a sentence-transformers model folder: which modules run in which order
//! (`modules.json`), how token vectors are pooled (`1_Pooling/config.json`), how long an input
//! may be (`sentence_bert_config.json`) and the encoder's own `config.json`. Every error names
//! the file it is about.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::EmbedError;

/// How token vectors become one sentence vector (sentence-transformers' `Pooling` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's vector (`[CLS]`).
    Cls,
    /// The mean over the real (unpadded) tokens.
    Mean,
    /// The element-wise maximum over the real tokens.
    Max,
    /// The sum over the real tokens divided by the square root of their number.
    MeanSqrtLen,
}

impl Pooling {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cls => "cls",
            Self::Mean => "mean",
            Self::Max => "max",
            Self::MeanSqrtLen => "mean_sqrt_len",
        }
    }
}

/// A model folder, checked: the files to load and the settings around the encoder.
#[derive(Debug, Clone)]
pub struct ModelFolder {
    /// `config.json` of the encoder.
    pub config: PathBuf,
    pub tokenizer: PathBuf,
    pub weights: PathBuf,
    pub pooling: Pooling,
    /// Whether a `Normalize` module follows the pooling. Vectors are made unit length in any
    /// case (cosine similarity is what they are compared by); this only says whether the model
    /// itself does it.
    pub normalize: bool,
    /// Longest input in tokens (`max_seq_length`); longer inputs are truncated.
    pub max_seq_length: Option<usize>,
    /// `do_lower_case`: inputs are lower-cased before tokenising.
    pub lower_case: bool,
}

#[derive(Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
    #[serde(default)]
    do_lower_case: bool,
}

const TRANSFORMER: &str = "sentence_transformers.models.Transformer";
const POOLING: &str = "sentence_transformers.models.Pooling";
const NORMALIZE: &str = "sentence_transformers.models.Normalize";

impl ModelFolder {
    /// Reads and checks the folder's settings (not the weights).
    pub fn read(dir: &Path) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(load_error(dir, "not a directory"));
        }
        let (encoder_dir, pooling_dir, normalize) = modules(dir)?;
        let pooling = pooling(&pooling_dir.join("config.json"))?;
        let sbert = encoder_dir.join("sentence_bert_config.json");
        let sbert: SentenceBertConfig = if sbert.exists() {
            read_json(&sbert)?
        } else {
            SentenceBertConfig {
                max_seq_length: None,
                do_lower_case: false,
            }
        };
        let folder = Self {
            config: encoder_dir.join("config.json"),
            tokenizer: encoder_dir.join("tokenizer.json"),
            weights: encoder_dir.join("model.safetensors"),
            pooling,
            normalize,
            max_seq_length: sbert.max_seq_length,
            lower_case: sbert.do_lower_case,
        };
        for file in [&folder.config, &folder.tokenizer, &folder.weights] {
            if !file.is_file() {
                return Err(load_error(file, "missing"));
            }
        }
        Ok(folder)
    }
}

/// The encoder's folder, the pooling's folder and whether a `Normalize` module follows, from
/// `modules.json`; without that file, the usual layout: encoder at the top, `1_Pooling`.
fn modules(dir: &Path) -> Result<(PathBuf, PathBuf, bool), EmbedError> {
    let file = dir.join("modules.json");
    if !file.exists() {
        return Ok((dir.to_owned(), dir.join("1_Pooling"), false));
    }
    let modules: Vec<Module> = read_json(&file)?;
    let (mut encoder, mut pooling, mut normalize) = (None, None, false);
    for module in modules {
        let expected = match module.kind.as_str() {
            TRANSFORMER if encoder.is_none() => {
                encoder = Some(dir.join(&module.path));
                true
            }
            POOLING if encoder.is_some() && pooling.is_none() => {
                pooling = Some(dir.join(&module.path));
                true
            }
            NORMALIZE if pooling.is_some() => {
                normalize = true;
                true
            }
            _ => false,
        };
        if !expected {
            let reason = format!(
                "module {} is not supported here (supported: a Transformer, then a Pooling, then \
                 optionally a Normalize)",
                module.kind
            );
            return Err(load_error(&file, &reason));
        }
    }
    match (encoder, pooling) {
        (Some(encoder), Some(pooling)) => Ok((encoder, pooling, normalize)),
        _ => Err(load_error(
            &file,
            "needs a Transformer and a Pooling module",
        )),
    }
}

fn pooling(file: &Path) -> Result<Pooling, EmbedError> {
    let config: PoolingConfig = read_json(file)?;
    if config.pooling_mode_weightedmean_tokens || config.pooling_mode_lasttoken {
        return Err(load_error(
            file,
            "weighted-mean and last-token pooling are not supported (cls, mean, max, \
             mean_sqrt_len are)",
        ));
    }
    let modes = [
        (config.pooling_mode_cls_token, Pooling::Cls),
        (config.pooling_mode_mean_tokens, Pooling::Mean),
        (config.pooling_mode_max_tokens, Pooling::Max),
        (
            config.pooling_mode_mean_sqrt_len_tokens,
            Pooling::MeanSqrtLen,
        ),
    ];
    let mut chosen = modes.iter().filter(|(on, _)| *on).map(|(_, mode)| *mode);
    match (chosen.next(), chosen.next()) {
        (Some(mode), None) => Ok(mode),
        (None, _) => Err(load_error(file, "no pooling mode is enabled")),
        (Some(_), Some(_)) => Err(load_error(
            file,
            "several pooling modes are enabled; one is supported",
        )),
    }
}

pub fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, EmbedError> {
    let bytes = std::fs::read(file).map_err(|e| load_error(file, &e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| load_error(file, &e.to_string()))
}

pub fn load_error(path: &Path, reason: &str) -> EmbedError {
    EmbedError::Load {
        path: path.to_owned(),
        reason: reason.to_owned(),
    }
}
