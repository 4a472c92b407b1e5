//! Memory generation: facts extracted from conversations by a chat model and consolidated with
//! what the user's memory already holds, as Vertex AI Memory Bank does.
//!
//! - [`topics`]: what to extract, per app (`--generator-topics`).
//! - [`model`]: the two structured calls to the model, and the checks of their answers.
//! - [`jobs`]: a job from the queue to its writes: extraction, candidate search,
//!   consolidation, one transaction (with its revision) per change; the background workers
//!   and the expiry sweep.
//!
//! Generation is off unless `--generator` names a model.

pub mod jobs;
pub mod model;
pub mod topics;

use std::{fmt, str::FromStr, time::Duration};

use self::{model::ChatModel, topics::Topics};
use crate::endpoint::{Client, Endpoint, Failure, Retry};

/// What `--generator` names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GeneratorSpec {
    /// No generation.
    #[default]
    None,
    /// An OpenAI-compatible chat endpoint, e.g. `http://127.0.0.1:11434/v1`.
    OpenAi(String),
}

impl FromStr for GeneratorSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "none" {
            return Ok(Self::None);
        }
        match s.split_once(':') {
            Some(("openai", url)) => match reqwest::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
                    Ok(Self::OpenAi(url.trim_end_matches('/').to_owned()))
                }
                Ok(_) => Err(format!("{s:?}: the base URL must be http:// or https://")),
                Err(e) => Err(format!("{s:?}: invalid base URL: {e}")),
            },
            _ => Err(format!("{s:?}: expected none or openai:BASE_URL")),
        }
    }
}

impl fmt::Display for GeneratorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::OpenAi(url) => write!(f, "openai:{url}"),
        }
    }
}

/// The `--generator*` flags together.
#[derive(Debug, Clone, Default)]
pub struct GeneratorOptions {
    pub spec: GeneratorSpec,
    pub model: Option<String>,
    pub api_key: Option<String>,
    /// The topics file, if any.
    pub topics: Option<std::path::PathBuf>,
    /// Jobs run at once by this process's background workers.
    pub workers: usize,
    pub retry: JobRetry,
    /// How long revisions are kept; `None`: forever.
    pub revision_retention: Option<Duration>,
}

/// How long a finished job is kept by default: 7 days.
pub const DEFAULT_JOB_RETENTION_SECONDS: u64 = 7 * 24 * 3600;

/// How jobs and model calls are timed and retried.
#[derive(Debug, Clone, Copy)]
pub struct JobRetry {
    /// Each model request's timeout and retries (see [`crate::endpoint`]).
    pub request: Retry,
    /// Attempts of a job at most; a transient failure of the last one fails it.
    pub attempts: u32,
    /// Wait before a job's second attempt; doubled before each next one.
    pub first_backoff: Duration,
    /// How long a claimed job is its worker's before another may take it over.
    pub lease: Duration,
    /// How often idle workers look for due jobs (other replicas' jobs, retries, expiries).
    pub poll: Duration,
    /// How long a finished job stays readable after it ended, before it is pruned.
    pub retention: Duration,
}

impl Default for JobRetry {
    fn default() -> Self {
        Self {
            request: Retry {
                timeout: Duration::from_secs(60),
                attempts: 3,
                first_backoff: Duration::from_millis(500),
            },
            attempts: 5,
            first_backoff: Duration::from_secs(2),
            lease: Duration::from_secs(300),
            poll: Duration::from_secs(1),
            retention: Duration::from_secs(DEFAULT_JOB_RETENTION_SECONDS),
        }
    }
}

/// A configured generation model and the topics it extracts. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Generator {
    pub model: ChatModel,
    pub topics: Topics,
    pub workers: usize,
    pub retry: JobRetry,
    /// How long revisions are kept; `None`: forever.
    pub revision_retention: Option<Duration>,
}

impl Generator {
    /// The generator `--generator` names (`None` for `none`). Nothing is requested yet: the
    /// model is first called by the first job, so memory-svc starts while it is down.
    pub fn open(options: GeneratorOptions) -> Result<Option<Self>, GenerateError> {
        let GeneratorSpec::OpenAi(base_url) = options.spec else {
            return Ok(None);
        };
        let model = options.model.ok_or(GenerateError::ModelNameMissing)?;
        let topics = match &options.topics {
            Some(path) => Topics::load(path).map_err(|reason| GenerateError::Topics {
                path: path.display().to_string(),
                reason,
            })?,
            None => Topics::default(),
        };
        let endpoint = Endpoint {
            base_url: base_url.clone(),
            model,
            api_key: options.api_key,
        };
        let client = Client::new(endpoint, "chat/completions", options.retry.request).map_err(
            |failure| {
                let reason = match failure {
                    Failure::Unavailable(r) | Failure::Refused(r) | Failure::Malformed(r) => r,
                };
                GenerateError::Refused {
                    endpoint: base_url,
                    reason,
                }
            },
        )?;
        Ok(Some(Self {
            model: ChatModel::new(client),
            topics,
            workers: options.workers.max(1),
            retry: options.retry,
            revision_retention: options.revision_retention,
        }))
    }
}

/// Why generation could not start, or a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GenerateError {
    #[error("memory generation needs a generation model (memory-svc --generator)")]
    NotConfigured,

    #[error("--generator openai:BASE_URL needs --generator-model (the model name to send)")]
    ModelNameMissing,

    #[error("--generator-topics {path}: {reason}")]
    Topics { path: String, reason: String },

    #[error("the generation model at {endpoint} is unavailable: {reason}")]
    Unavailable { endpoint: String, reason: String },

    #[error("the generation model at {endpoint} refused the request: {reason}")]
    Refused { endpoint: String, reason: String },

    #[error("the generation model at {endpoint} answered malformed output: {reason}")]
    Malformed { endpoint: String, reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses() {
        assert_eq!("none".parse(), Ok(GeneratorSpec::None));
        assert_eq!(
            "openai:http://127.0.0.1:8080/v1/".parse(),
            Ok(GeneratorSpec::OpenAi("http://127.0.0.1:8080/v1".into()))
        );
        for bad in ["", "openai:", "openai:ftp://x", "local:/m"] {
            let err = bad.parse::<GeneratorSpec>().unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn an_endpoint_needs_a_model_name() {
        let options = GeneratorOptions {
            spec: GeneratorSpec::OpenAi("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let err = Generator::open(options).unwrap_err();
        assert!(matches!(err, GenerateError::ModelNameMissing), "{err}");
    }
}
