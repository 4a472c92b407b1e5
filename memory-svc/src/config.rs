//! Command-line flags; each reads the environment variable `MEMORY_SVC_<FLAG>` when not given
//! (e.g. `--data-dir` ← `MEMORY_SVC_DATA_DIR`).

use std::{net::SocketAddr, path::PathBuf};

use adk_common::{postgres::StoreLocation, serve::flags::ServeFlags, snapshot::AdminCommand};
use clap::Parser;

/// The start of the environment variable each flag falls back to (`MEMORY_SVC_DATA_DIR`, ...).
pub const ENV_PREFIX: &str = "MEMORY_SVC";

use crate::{
    analysis::{Analyzer, Language, UnknownLanguage},
    embed::{EmbedderOptions, EmbedderSpec},
    generate::{GeneratorOptions, GeneratorSpec, JobRetry, DEFAULT_JOB_RETENTION_SECONDS},
    lifetimes::{Lifetimes, MemoryTtl},
    streams::triggers::{PerApp, Quiet, TriggerEvents, Triggers},
};

/// `--default-language`: a language, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultLanguage(pub Option<Language>);

fn parse_language(s: &str) -> Result<DefaultLanguage, UnknownLanguage> {
    match s {
        "none" => Ok(DefaultLanguage(None)),
        code => code.parse().map(|l| DefaultLanguage(Some(l))),
    }
}

/// `--revision-retention`: how long revisions are kept, or forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<std::time::Duration>);

fn parse_retention(s: &str) -> Result<Retention, String> {
    match s {
        "forever" => Ok(Retention(None)),
        duration => match humantime::parse_duration(duration) {
            Ok(d) if !d.is_zero() => Ok(Retention(Some(d))),
            Ok(_) => Err("must be longer than 0".into()),
            Err(e) => Err(format!("{e} (e.g. 30d, 12h, forever)")),
        },
    }
}

/// gRPC memory service for agents: per-(app, user) long-term memory with ranked keyword search.
#[derive(Debug, Clone, Parser)]
#[command(name = "memory-svc", version = adk_version::version!())]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (the address is printed once ready).
    #[arg(long, default_value = "0.0.0.0:50052")]
    pub listen: SocketAddr,

    /// Directory of the embedded database (when --store is not given).
    #[arg(long, default_value = "./data/memory")]
    pub data_dir: PathBuf,

    /// Where data lives: `embedded:PATH` (the embedded database, one process per directory;
    /// `sled:PATH` means the same; the default is the --data-dir) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DB` (shared by any number of replicas).
    #[arg(long)]
    pub store: Option<StoreLocation>,

    /// session-svc, for AddSessionToMemory with a session_ref.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub session_endpoint: String,

    /// Largest request accepted, in bytes; also the largest session AddSessionToMemory reads
    /// from session-svc for a `session_ref`.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_request_bytes: usize,

    /// File holding the bearer token presented to session-svc (when it requires one).
    #[arg(long)]
    pub session_token_file: Option<PathBuf>,

    /// CA certificate (PEM) of an `https://` session endpoint.
    // Spelled like runner-client's --ca-cert; the environment variable keeps its name
    // (MEMORY_SVC_SESSION_CA), and so does the old flag, as a hidden alias.
    #[arg(long = "session-ca-cert", alias = "session-ca")]
    pub session_ca: Option<PathBuf>,

    /// Sentence-embedding model: `none` (no model), `local:DIR` (a sentence-transformers folder
    /// run in-process) or `openai:BASE_URL` (an OpenAI-compatible `/embeddings` endpoint).
    #[arg(long, default_value = "none")]
    pub embedder: EmbedderSpec,

    /// The model name sent to an `openai:` embedder (e.g. `text-embedding-3-small`).
    #[arg(long)]
    pub embedder_model: Option<String>,

    /// Environment variable holding the API key of an `openai:` embedder; when it is unset,
    /// requests carry no Authorization header.
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub embedder_api_key_env: String,

    /// Bytes of memory the service's sizeable structures may hold together: the database's page
    /// cache, postings waiting for a merge, merges, writes in flight and the vector cache each
    /// draw from a share of it (logged at startup; gauge `memory_budget_bytes`). Writes wait for
    /// room and merges start earlier when their shares are used. Default: a quarter of the
    /// container's memory limit (cgroup v2 `memory.max` or v1 `memory.limit_in_bytes`) when
    /// there is one, else a quarter of the machine's memory. See deploy/README.md for sizing.
    #[arg(long)]
    pub memory_budget: Option<u64>,

    /// Bytes of memory for the vectors of recently searched users (with an embedder): a
    /// semantic search over a user's vectors held there does not read them from the store (on
    /// PostgreSQL, it checks that no replica wrote the user since they were read). 4 bytes per
    /// dimension and 8 more per entry (1.5 KiB per entry at 384 dimensions); 0 turns it off.
    /// Default: an eighth of --memory-budget.
    #[arg(long)]
    pub vector_cache_bytes: Option<usize>,

    /// Bytes of memory for the posting blocks of recently searched words (PostgreSQL stores;
    /// the embedded database has its own page cache): a keyword search of words held there does not read them
    /// from the database while no replica wrote the user since they were read. 16 bytes per
    /// posting; 0 turns it off.
    #[arg(long, default_value_t = crate::store::pg::DEFAULT_POSTING_CACHE_BYTES)]
    pub posting_cache_bytes: usize,

    /// Memory generation model: `none` (off) or `openai:BASE_URL` (an OpenAI-compatible
    /// `/chat/completions` endpoint that supports JSON-schema structured output).
    #[arg(long, default_value = "none")]
    pub generator: GeneratorSpec,

    /// The model name sent to the `openai:` generator (e.g. `gpt-4o-mini`).
    #[arg(long)]
    pub generator_model: Option<String>,

    /// Environment variable holding the generator's API key; when it is unset, requests carry
    /// no Authorization header.
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub generator_api_key_env: String,

    /// JSON file of the topics generation extracts, per app (see the README); default: the
    /// built-in topics for every app.
    #[arg(long)]
    pub generator_topics: Option<PathBuf>,

    /// Generation jobs this process runs at once in the background.
    #[arg(long, default_value_t = 2)]
    pub generator_workers: usize,

    /// Seconds a claimed generation job stays its worker's: a job whose process died is
    /// taken over by another worker (or after a restart) once this has passed.
    #[arg(long, default_value_t = 300)]
    pub generator_lease_seconds: u64,

    /// Seconds a finished (succeeded or failed) generation job stays readable through
    /// GetGenerationJob; the background workers then delete it.
    #[arg(long, default_value_t = DEFAULT_JOB_RETENTION_SECONDS)]
    pub generator_job_retention_seconds: u64,

    /// How long the revisions of generated memories are kept (`30d`, `12h`, `90m`, ...), or
    /// `forever`; the background workers delete older ones, never the last of a memory.
    #[arg(long, default_value = "forever", value_parser = parse_retention)]
    pub revision_retention: Retention,

    /// Default lifetimes of memories, `APP:ACTION=DURATION` (e.g. `travel:created=30d`),
    /// repeated or comma-separated: APP an app or `*` for the others, ACTION `created` (by
    /// AddMemory), `generated` or `updated` (by generation, whose request `ttl` wins). Memories
    /// without a rule do not expire.
    #[arg(long, value_delimiter = ',')]
    pub memory_ttl: Vec<MemoryTtl>,

    /// Events an event stream (AppendMemoryStream) buffers before it is handed to generation
    /// by itself: `N` for every app, or `APP=N` for one, repeated or comma-separated
    /// (e.g. `20,travel=5`); 1 to 1000. An app without a setting: 20.
    #[arg(long, value_delimiter = ',', default_value = "20")]
    pub stream_trigger_events: Vec<PerApp<TriggerEvents>>,

    /// How long an event stream waits for another event before its buffered events are handed
    /// to generation (`90s`, `5m`, `500ms`): `DURATION` for every app, or `APP=DURATION` for
    /// one, repeated or comma-separated. An app without a setting: 60s.
    #[arg(long, value_delimiter = ',', default_value = "60s")]
    pub stream_quiet: Vec<PerApp<Quiet>>,

    /// The language of text whose language is not detected with confidence (short turns,
    /// most queries): an ISO 639-1 code (`en`, `de`, `fr`, `ru`, ...: see the README for the
    /// list), or `none` to keep such words as written. Changing it re-indexes the store at the
    /// next start.
    #[arg(long, default_value = "en", value_parser = parse_language)]
    pub default_language: DefaultLanguage,

    /// Whether languages are detected (`true`: once per write, for an entry in another script on
    /// its own, and per query), or every text is taken to be in --default-language (`false`,
    /// for users who all write one language). A search request's `language` applies either
    /// way. Changing it re-indexes the store at the next start.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub detect_language: bool,

    #[command(flatten)]
    pub serve: ServeFlags,

    /// Backup commands instead of serving.
    #[command(subcommand)]
    pub admin: Option<AdminCommand>,
}

/// The configuration for people, as the startup log shows it.
impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "listen {}, store {}, session-svc at {}, requests up to {}, default language {}{}, \
             embedder {} (vector cache {}), generator {}, {}",
            self.listen,
            match self.store() {
                store @ StoreLocation::Postgres(_) => format!(
                    "{store:?} ({}, posting cache {})",
                    self.serve.store_settings(&store),
                    adk_common::serve::flags::human_bytes(self.posting_cache_bytes)
                ),
                store => format!("{store:?} ({})", self.serve.store_settings(&store)),
            },
            self.session_endpoint,
            adk_common::serve::flags::human_bytes(self.max_request_bytes),
            self.default_language.0.map_or("none", Language::code),
            if self.detect_language {
                ""
            } else {
                " (language detection off)"
            },
            self.embedder,
            self.vector_cache_bytes.map_or(
                "its share".to_owned(),
                adk_common::serve::flags::human_bytes
            ),
            self.generator,
            self.serve
        )
    }
}

impl Config {
    /// The command line (with environment fallbacks) of this process.
    pub fn from_env() -> Self {
        adk_common::serve::flags::parse_flags(ENV_PREFIX)
    }

    /// Where data lives: `--store` (with `--pg-ca-file`), else the embedded database in
    /// `--data-dir`.
    pub fn store(&self) -> StoreLocation {
        self.store
            .clone()
            .unwrap_or_else(|| StoreLocation::Embedded(self.data_dir.clone()))
            .with_root_cert(self.serve.pg_ca_file.as_deref())
    }

    /// The `--embedder*` flags, with the API key read from its variable.
    pub fn embedder(&self) -> EmbedderOptions {
        EmbedderOptions {
            spec: self.embedder.clone(),
            model: self.embedder_model.clone(),
            api_key: std::env::var(&self.embedder_api_key_env)
                .ok()
                .filter(|key| !key.is_empty()),
        }
    }

    /// The `--generator*` flags, with the API key read from its variable.
    pub fn generator(&self) -> GeneratorOptions {
        GeneratorOptions {
            spec: self.generator.clone(),
            model: self.generator_model.clone(),
            api_key: std::env::var(&self.generator_api_key_env)
                .ok()
                .filter(|key| !key.is_empty()),
            topics: self.generator_topics.clone(),
            workers: self.generator_workers,
            revision_retention: self.revision_retention.0,
            retry: JobRetry {
                lease: std::time::Duration::from_secs(self.generator_lease_seconds),
                retention: std::time::Duration::from_secs(self.generator_job_retention_seconds),
                ..JobRetry::default()
            },
        }
    }

    /// The `--memory-ttl` rules.
    pub fn lifetimes(&self) -> Lifetimes {
        Lifetimes::new(self.memory_ttl.clone())
    }

    /// The `--stream-trigger-events` and `--stream-quiet` settings.
    pub fn triggers(&self) -> Triggers {
        Triggers::new(
            self.stream_trigger_events.clone(),
            self.stream_quiet.clone(),
        )
    }

    /// How text is analysed.
    pub fn analyzer(&self) -> Analyzer {
        if self.detect_language {
            Analyzer::new(self.default_language.0)
        } else {
            Analyzer::fixed(self.default_language.0)
        }
    }

    /// Defaults for `data_dir`, listening on an ephemeral loopback port (tests, scripts).
    pub fn ephemeral(data_dir: PathBuf, session_endpoint: String) -> Self {
        // The flags' defaults, written once in their attributes.
        let mut config = Self::parse_from(["memory-svc"]);
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.data_dir = data_dir;
        config.session_endpoint = session_endpoint;
        config
    }
}

#[cfg(test)]
mod tests {
    use adk_common::snapshot::AdminCommand;
    use clap::Parser;

    use super::Config;

    #[test]
    fn ca_certificates_are_spelled_ca_cert_and_the_old_spellings_still_work() {
        for flag in ["--session-ca-cert", "--session-ca"] {
            let config = Config::try_parse_from(["memory-svc", flag, "ca.pem"]).unwrap();
            assert_eq!(config.session_ca.unwrap().to_str(), Some("ca.pem"));
        }
        for flag in ["--ca-cert", "--ca"] {
            let config = Config::try_parse_from([
                "memory-svc",
                "snapshot",
                "--endpoint",
                "127.0.0.1:50052",
                "--output",
                "out.snap",
                flag,
                "ca.pem",
            ])
            .unwrap();
            let Some(AdminCommand::Snapshot { ca_cert, .. }) = config.admin else {
                panic!("a snapshot command: {:?}", config.admin);
            };
            assert_eq!(ca_cert.unwrap().to_str(), Some("ca.pem"));
        }
    }
}
