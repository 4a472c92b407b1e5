//! `--embedder openai:BASE_URL`: any OpenAI-compatible `POST {BASE_URL}/embeddings` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp, text-embeddings-inference, …).
//!
//! Texts go in batches of [`Limits::batch`]; each request has a timeout and is retried with
//! doubling backoff when the endpoint is unreachable, times out, or answers 429 or 5xx. Each
//! answer is checked (one vector per input, each placed by its `index`, all of the model's
//! dimension) before anything is returned.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

pub use crate::endpoint::Endpoint;
use crate::endpoint::{excerpt, Client, Failure, Retry};

use super::{unit_length, EmbedError, Identity};

/// How requests are sized, timed and retried.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Inputs per request (text-embeddings-inference accepts 32 by default).
    pub batch: usize,
    /// Per request, connection included.
    pub timeout: Duration,
    /// Requests per batch at most, the first one included.
    pub attempts: u32,
    /// Wait before the first retry; doubled before each next one.
    pub first_backoff: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            batch: 32,
            timeout: Duration::from_secs(30),
            attempts: 4,
            first_backoff: Duration::from_millis(250),
        }
    }
}

/// The endpoint client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    client: Client,
    batch: usize,
    identity: Identity,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// Builds the client and embeds one probe text to learn the model's dimension: an
    /// endpoint that is down or answers malformed embeddings fails here, at startup.
    pub async fn connect(endpoint: Endpoint, limits: Limits) -> Result<Self, EmbedError> {
        let retry = Retry {
            timeout: limits.timeout,
            attempts: limits.attempts,
            first_backoff: limits.first_backoff,
        };
        let base_url = endpoint.base_url.clone();
        let client = Client::new(endpoint.clone(), "embeddings", retry)
            .map_err(|failure| embed_error(&base_url, failure))?;
        let mut embedder = Self {
            client,
            batch: limits.batch,
            identity: Identity {
                model: format!("{} at {}", endpoint.model, endpoint.base_url),
                dimension: 0,
                fingerprint: endpoint.model,
            },
        };
        let probe = embedder.request(&["dimension probe".to_owned()]).await?;
        embedder.identity.dimension = probe.first().map_or(0, Vec::len);
        Ok(embedder)
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// One unit-length vector per text, in input order.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch.max(1)) {
            vectors.extend(self.request(batch).await?);
        }
        Ok(vectors)
    }

    /// One batch (retried by the client while the failure is transient).
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({ "model": self.client.endpoint().model, "input": texts });
        self.client
            .post(&body, |bytes| {
                let response: Response = serde_json::from_slice(bytes)
                    .map_err(|e| format!("{e} in {}", excerpt(&String::from_utf8_lossy(bytes))))?;
                self.check(response, texts.len())
            })
            .await
            .map_err(|failure| embed_error(&self.client.endpoint().base_url, failure))
    }

    /// The vectors of `response` in input order, unit length, or why they cannot be used.
    fn check(&self, response: Response, inputs: usize) -> Result<Vec<Vec<f32>>, String> {
        if response.data.len() != inputs {
            return Err(format!(
                "{} embeddings for {inputs} inputs",
                response.data.len()
            ));
        }
        let dimension = match self.identity.dimension {
            0 => response.data.first().map_or(0, |d| d.embedding.len()),
            known => known,
        };
        let mut vectors = vec![None; inputs];
        for datum in response.data {
            let index = datum.index;
            if datum.embedding.len() != dimension {
                return Err(format!(
                    "data[index={index}] has {} dimensions, expected {dimension}",
                    datum.embedding.len()
                ));
            }
            let slot = vectors
                .get_mut(index)
                .ok_or_else(|| format!("index {index} is out of range for {inputs} inputs"))?;
            if slot.is_some() {
                return Err(format!("index {index} appears twice"));
            }
            *slot =
                Some(unit_length(datum.embedding).ok_or_else(|| {
                    format!("data[index={index}] is a zero or non-finite vector")
                })?);
        }
        // Every slot is filled: `inputs` distinct indices below `inputs`.
        Ok(vectors.into_iter().flatten().collect())
    }
}

/// A failed call to the endpoint at `endpoint`, in the embedder's words.
fn embed_error(endpoint: &str, failure: Failure) -> EmbedError {
    let endpoint = endpoint.to_owned();
    match failure {
        Failure::Unavailable(reason) => EmbedError::Unavailable { endpoint, reason },
        Failure::Refused(reason) => EmbedError::Refused { endpoint, reason },
        Failure::Malformed(reason) => EmbedError::Malformed { endpoint, reason },
    }
}
