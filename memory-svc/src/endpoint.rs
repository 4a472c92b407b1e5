//! The HTTP client of OpenAI-compatible endpoints, shared by the embedder (`/embeddings`) and
//! the generation model (`/chat/completions`): one request has a timeout, and is retried with
//! doubling backoff while the endpoint is unreachable, times out, or answers 429 or 5xx. What
//! a failure means (unavailable, refused, malformed) is decided here once; each caller words
//! it in its own error type.

use std::time::Duration;

use reqwest::{header, StatusCode};

/// Where and what to ask.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// E.g. `https://api.openai.com/v1`; requests go to `{base_url}/{path}`.
    pub base_url: String,
    /// The `model` of each request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
}

/// How requests are timed and retried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Per request, connection included.
    pub timeout: Duration,
    /// Requests per call at most, the first one included.
    pub attempts: u32,
    /// Wait before the first retry; doubled before each next one.
    pub first_backoff: Duration,
}

/// Why a call failed, after retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Unreachable, timed out, 429 or 5xx, on every attempt.
    Unavailable(String),
    /// Another 4xx (or a URL that cannot be requested): asking again gives the same answer.
    Refused(String),
    /// A 2xx answer the caller cannot use.
    Malformed(String),
}

/// One failed attempt, before retries are decided.
enum Attempt {
    Transient(String),
    Final(Failure),
}

/// A client of one endpoint path. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    endpoint: Endpoint,
    retry: Retry,
}

impl Client {
    /// A client of `{base_url}/{path}`; fails on a URL that cannot be requested.
    pub fn new(endpoint: Endpoint, path: &str, retry: Retry) -> Result<Self, Failure> {
        let url = format!("{}/{path}", endpoint.base_url.trim_end_matches('/'));
        reqwest::Url::parse(&url)
            .map_err(|e| Failure::Refused(format!("invalid URL {url}: {e}")))?;
        // reqwest is built without a TLS crypto provider of its own: it uses the process-wide
        // one, ring, which the gRPC side links already. An error only means one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(retry.timeout)
            .build()
            .map_err(|e| Failure::Refused(format!("{:#}", anyhow::Error::new(e))))?;
        Ok(Self {
            http,
            url,
            endpoint,
            retry,
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// POSTs `body` and reads the answer with `parse`, retrying while the failure is transient
    /// and attempts remain. `parse` returns why an answer cannot be used.
    pub async fn post<T>(
        &self,
        body: &serde_json::Value,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let mut attempt = 1;
        loop {
            let reason = match self.attempt(body, &parse).await {
                Ok(value) => return Ok(value),
                Err(Attempt::Final(failure)) => return Err(failure),
                Err(Attempt::Transient(reason)) => reason,
            };
            if attempt >= self.retry.attempts {
                return Err(Failure::Unavailable(format!(
                    "{reason} (after {attempt} attempts)"
                )));
            }
            tracing::debug!(endpoint = %self.endpoint.base_url, %reason, attempt, "retrying");
            tokio::time::sleep(backoff(self.retry.first_backoff, attempt)).await;
            attempt += 1;
        }
    }

    async fn attempt<T>(
        &self,
        body: &serde_json::Value,
        parse: &impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, Attempt> {
        let mut request = self.http.post(&self.url).json(body);
        if let Some(key) = &self.endpoint.api_key {
            request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let response = request
            .send()
            .await
            .map_err(|e| Attempt::Transient(format!("{:#}", anyhow::Error::new(e))))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| Attempt::Transient(format!("{:#}", anyhow::Error::new(e))))?;
        if !status.is_success() {
            let reason = format!(
                "HTTP {status}: {}",
                excerpt(&String::from_utf8_lossy(&body))
            );
            return Err(
                if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    Attempt::Transient(reason)
                } else {
                    Attempt::Final(Failure::Refused(reason))
                },
            );
        }
        parse(&body).map_err(|reason| Attempt::Final(Failure::Malformed(reason)))
    }
}

/// Backoff before retry `attempt` (1-based): `first`, doubled each time.
pub fn backoff(first: Duration, attempt: u32) -> Duration {
    first.saturating_mul(1 << attempt.saturating_sub(1).min(16))
}

/// The start of an answer, enough to recognise it in a message.
pub fn excerpt(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles() {
        let first = Duration::from_millis(100);
        let waits: Vec<_> = (1..=4).map(|a| backoff(first, a).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800]);
    }
}
