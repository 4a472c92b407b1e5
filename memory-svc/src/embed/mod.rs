//! Sentence embedders: text in, unit-length vectors out, so that the cosine similarity of two
//! texts is the dot product of their vectors.
//!
//! `--embedder` chooses one (see [`EmbedderSpec`]):
//! - `none`: no model (keyword search only);
//! - `local:DIR`: a sentence-transformers folder run in-process on the CPU ([`local`]);
//! - `openai:BASE_URL`: any OpenAI-compatible `/embeddings` endpoint ([`openai`]).
//!
//! [`Embedder`] is an enum rather than a trait object: the set is closed (one variant per
//! `--embedder` scheme), `embed` stays a plain `async fn` without boxing, and the caller sees
//! every kind in one place.

#[cfg(feature = "local-embedder")]
mod folder;
#[cfg(feature = "local-embedder")]
pub mod local;
pub mod openai;

use std::{fmt, path::PathBuf, str::FromStr};

#[cfg(feature = "local-embedder")]
use self::local::LocalEmbedder;
use self::openai::OpenAiEmbedder;

/// What `--embedder` names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EmbedderSpec {
    /// No model: keyword search only.
    #[default]
    None,
    /// A sentence-transformers folder, run in-process.
    Local(PathBuf),
    /// An OpenAI-compatible endpoint, e.g. `http://127.0.0.1:11434/v1`.
    OpenAi(String),
}

impl FromStr for EmbedderSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = "expected none, local:DIR or openai:BASE_URL";
        if s == "none" {
            return Ok(Self::None);
        }
        match s.split_once(':') {
            Some(("local", dir)) if !dir.is_empty() => Ok(Self::Local(PathBuf::from(dir))),
            Some(("openai", url)) => match reqwest::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
                    Ok(Self::OpenAi(url.trim_end_matches('/').to_owned()))
                }
                Ok(_) => Err(format!("{s:?}: the base URL must be http:// or https://")),
                Err(e) => Err(format!("{s:?}: invalid base URL: {e}")),
            },
            _ => Err(format!("{s:?}: {expected}")),
        }
    }
}

impl fmt::Display for EmbedderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Local(dir) => write!(f, "local:{}", dir.display()),
            Self::OpenAi(url) => write!(f, "openai:{url}"),
        }
    }
}

/// The `--embedder*` flags together.
#[derive(Debug, Clone, Default)]
pub struct EmbedderOptions {
    pub spec: EmbedderSpec,
    /// `--embedder-model`: the model name sent to an endpoint.
    pub model: Option<String>,
    /// The API key for an endpoint (read from the variable `--embedder-api-key-env` names).
    pub api_key: Option<String>,
}

/// What the vectors of an embedder depend on: vectors of two embedders are comparable exactly
/// when their identities are equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The model as configured: the folder's path, or `NAME at BASE_URL`.
    pub model: String,
    /// Length of every vector.
    pub dimension: usize,
    /// For a local model, `sha256:` and the hex digest of its weights, tokenizer and pooling
    /// settings; for an endpoint, the model name (the endpoint's weights cannot be seen).
    pub fingerprint: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} dimensions, {})",
            self.model, self.dimension, self.fingerprint
        )
    }
}

/// A configured embedding model. Cheap to clone (the model is shared).
#[derive(Debug, Clone)]
pub enum Embedder {
    #[cfg(feature = "local-embedder")]
    Local(LocalEmbedder),
    OpenAi(OpenAiEmbedder),
}

impl Embedder {
    /// Loads the model `--embedder` names (`None` for `none`). For an endpoint, one request
    /// learns the dimension, so an endpoint that is down fails the start, naming it.
    pub async fn open(options: EmbedderOptions) -> Result<Option<Self>, EmbedError> {
        match options.spec {
            EmbedderSpec::None => Ok(None),
            #[cfg(feature = "local-embedder")]
            EmbedderSpec::Local(dir) => {
                let embedder = tokio::task::spawn_blocking(move || LocalEmbedder::load(&dir))
                    .await
                    .map_err(|e| EmbedError::Inference(e.to_string()))??;
                Ok(Some(Self::Local(embedder)))
            }
            #[cfg(not(feature = "local-embedder"))]
            EmbedderSpec::Local(path) => Err(EmbedError::Load {
                path,
                reason: "this memory-svc was built without in-process models \
                         (the cargo feature `local-embedder`)"
                    .to_owned(),
            }),
            EmbedderSpec::OpenAi(base_url) => {
                let model = options.model.ok_or(EmbedError::ModelNameMissing)?;
                let endpoint = openai::Endpoint {
                    base_url,
                    model,
                    api_key: options.api_key,
                };
                let embedder = OpenAiEmbedder::connect(endpoint, openai::Limits::default()).await?;
                Ok(Some(Self::OpenAi(embedder)))
            }
        }
    }

    /// One unit-length vector per text, in input order. An empty input costs nothing.
    ///
    /// Each call that embeds is measured: `memory_embedding_duration_seconds{embedder}` (the
    /// call, waiting for the model included) and `memory_embedded_texts_total{embedder}`, with
    /// `embedder` `local` or `openai`.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (count, started) = (texts.len() as u64, std::time::Instant::now());
        let (kind, vectors) = match self {
            #[cfg(feature = "local-embedder")]
            Self::Local(e) => ("local", e.embed(texts).await),
            Self::OpenAi(e) => ("openai", e.embed(texts).await),
        };
        metrics::histogram!("memory_embedding_duration_seconds", "embedder" => kind)
            .record(started.elapsed().as_secs_f64());
        if vectors.is_ok() {
            metrics::counter!("memory_embedded_texts_total", "embedder" => kind).increment(count);
        }
        vectors
    }

    /// The model's name or path, dimension and fingerprint.
    pub fn identity(&self) -> &Identity {
        match self {
            #[cfg(feature = "local-embedder")]
            Self::Local(e) => e.identity(),
            Self::OpenAi(e) => e.identity(),
        }
    }
}

/// Why an embedder could not be loaded or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot load the embedding model: {path}: {reason}")]
    Load { path: PathBuf, reason: String },

    #[error("--embedder openai:BASE_URL needs --embedder-model (the model name to send)")]
    ModelNameMissing,

    #[error("the embedding endpoint {endpoint} is unavailable: {reason}")]
    Unavailable { endpoint: String, reason: String },

    #[error("the embedding endpoint {endpoint} refused the request: {reason}")]
    Refused { endpoint: String, reason: String },

    #[error("the embedding endpoint {endpoint} answered malformed embeddings: {reason}")]
    Malformed { endpoint: String, reason: String },

    #[error("the embedding model failed: {0}")]
    Inference(String),
}

/// Scales `v` to unit length; `None` for a zero or non-finite vector, which has no direction.
fn unit_length(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_each_scheme() {
        assert_eq!("none".parse(), Ok(EmbedderSpec::None));
        assert_eq!(
            "local:/models/minilm".parse(),
            Ok(EmbedderSpec::Local("/models/minilm".into()))
        );
        assert_eq!(
            "openai:http://127.0.0.1:11434/v1/".parse(),
            Ok(EmbedderSpec::OpenAi("http://127.0.0.1:11434/v1".into()))
        );
        for bad in [
            "",
            "local:",
            "minilm",
            "openai:",
            "openai:ftp://x",
            "tei:http://x",
        ] {
            let err = bad.parse::<EmbedderSpec>().unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let spec: EmbedderSpec = "openai:https://api.openai.com/v1".parse().unwrap();
        assert_eq!(spec.to_string(), "openai:https://api.openai.com/v1");
    }

    #[test]
    fn vectors_are_scaled_to_unit_length() {
        assert_eq!(unit_length(vec![3.0, 4.0]), Some(vec![0.6, 0.8]));
        assert_eq!(unit_length(vec![0.0, 0.0]), None);
        assert_eq!(unit_length(vec![f32::NAN, 1.0]), None);
    }

    #[tokio::test]
    async fn none_loads_nothing_and_an_endpoint_needs_a_model_name() {
        assert!(Embedder::open(EmbedderOptions::default())
            .await
            .unwrap()
            .is_none());
        let options = EmbedderOptions {
            spec: EmbedderSpec::OpenAi("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let err = Embedder::open(options).await.unwrap_err();
        assert!(matches!(err, EmbedError::ModelNameMissing), "{err}");
    }
}
