//! `--embedder openai:BASE_URL`: any OpenAI-compatible `POST {BASE_URL}/embeddings` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp, text-embeddings-inference, …).
//!
//! Texts go in batches of [`Limits::batch`]; each request has a timeout and is retried with
//! doubling backoff when the endpoint is unreachable, times out, or answers 429 or 5xx. Each
//! answer is checked (one vector per input, each placed by its `index`, all of the model's
//! dimension) before anything is returned.

use std::time::Duration;

use reqwest::{header, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::{backoff, unit_length, EmbedError, Identity};

/// Where and what to ask.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// E.g. `https://api.openai.com/v1`; requests go to `{base_url}/embeddings`.
    pub base_url: String,
    /// The `model` of each request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
}

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
    http: reqwest::Client,
    url: String,
    endpoint: Endpoint,
    limits: Limits,
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

/// Why one request failed, before retries are decided.
enum Failure {
    /// Worth retrying: unreachable, timed out, 429 or 5xx.
    Transient(String),
    /// Another 4xx: asking again gives the same answer.
    Refused(String),
    Malformed(String),
}

impl OpenAiEmbedder {
    /// Builds the client and embeds one probe text to learn the model's dimension: an
    /// endpoint that is down or answers malformed embeddings fails here, at startup.
    pub async fn connect(endpoint: Endpoint, limits: Limits) -> Result<Self, EmbedError> {
        let url = format!("{}/embeddings", endpoint.base_url.trim_end_matches('/'));
        let invalid = |reason: String| EmbedError::Refused {
            endpoint: endpoint.base_url.clone(),
            reason,
        };
        reqwest::Url::parse(&url).map_err(|e| invalid(format!("invalid URL {url}: {e}")))?;
        // reqwest is built without a TLS crypto provider of its own: it uses the process-wide
        // one, ring, which the gRPC side links already. An error only means one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(limits.timeout)
            .build()
            .map_err(|e| invalid(error_chain(&e)))?;
        let mut embedder = Self {
            http,
            url,
            identity: Identity {
                model: format!("{} at {}", endpoint.model, endpoint.base_url),
                dimension: 0,
                fingerprint: endpoint.model.clone(),
            },
            endpoint,
            limits,
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
        for batch in texts.chunks(self.limits.batch.max(1)) {
            vectors.extend(self.request(batch).await?);
        }
        Ok(vectors)
    }

    /// One batch, retried while the failure is transient and attempts remain.
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut attempt = 1;
        loop {
            let reason = match self.attempt(texts).await {
                Ok(vectors) => return Ok(vectors),
                Err(Failure::Transient(reason)) => reason,
                Err(Failure::Refused(reason)) => return Err(self.refused(reason)),
                Err(Failure::Malformed(reason)) => return Err(self.malformed(reason)),
            };
            if attempt >= self.limits.attempts {
                return Err(EmbedError::Unavailable {
                    endpoint: self.endpoint.base_url.clone(),
                    reason: format!("{reason} (after {attempt} attempts)"),
                });
            }
            tracing::debug!(endpoint = %self.endpoint.base_url, %reason, attempt, "retrying");
            tokio::time::sleep(backoff(self.limits.first_backoff, attempt)).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Failure> {
        let mut request = self
            .http
            .post(&self.url)
            .json(&json!({ "model": self.endpoint.model, "input": texts }));
        if let Some(key) = &self.endpoint.api_key {
            request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failure::Transient(error_chain(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| Failure::Transient(error_chain(&e)))?;
        let body_text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let reason = format!("HTTP {status}: {}", excerpt(&body_text));
            return Err(
                if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    Failure::Transient(reason)
                } else {
                    Failure::Refused(reason)
                },
            );
        }
        let response: Response = serde_json::from_slice(&body)
            .map_err(|e| Failure::Malformed(format!("{e} in {}", excerpt(&body_text))))?;
        self.check(response, texts.len())
            .map_err(Failure::Malformed)
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

    fn refused(&self, reason: String) -> EmbedError {
        EmbedError::Refused {
            endpoint: self.endpoint.base_url.clone(),
            reason,
        }
    }

    fn malformed(&self, reason: String) -> EmbedError {
        EmbedError::Malformed {
            endpoint: self.endpoint.base_url.clone(),
            reason,
        }
    }
}

/// An error with its causes ("error sending request: connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The start of an answer, enough to recognise it in a message.
fn excerpt(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}
