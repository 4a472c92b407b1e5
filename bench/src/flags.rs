//! The command line: the flags every scenario shares and one subcommand per scenario, with its
//! own flags and defaults.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::recall::corpus::Split;

#[derive(Debug, Parser)]
#[command(
    name = "adk-bench",
    version = adk_version::version!(),
    about = "Load generator for session-svc and memory-svc"
)]
pub struct Cli {
    /// Run everything tiny (a few seconds per scenario) for CI smoke use.
    #[arg(long, global = true)]
    pub quick: bool,
    /// Directory holding the release `session-svc` and `memory-svc` binaries (default: the
    /// directory of this executable, i.e. the same target/release).
    #[arg(long, global = true)]
    pub bin_dir: Option<PathBuf>,
    /// Measured seconds per load point (after warm-up).
    #[arg(long, global = true, default_value_t = 10.0)]
    pub duration: f64,
    /// Warm-up seconds per load point (ops run, not recorded).
    #[arg(long, global = true, default_value_t = 1.0)]
    pub warmup: f64,
    /// Upper bound on measured operations per load point.
    #[arg(long, global = true, default_value_t = 2_000_000)]
    pub max_ops: u64,
    /// `--sync` mode of the server while *seeding* read scenarios (get, recent, list) and for the
    /// whole `bounded` run. Reads are measured in the same process; the sync mode only affects
    /// when writes are acknowledged.
    #[arg(long, global = true, default_value = "periodic")]
    pub seed_sync: String,
    /// Run the servers on this PostgreSQL database (`postgres://...`) instead of their embedded
    /// databases: each server gets a fresh schema in it, dropped at the end of the run. Use a
    /// throwaway database.
    #[arg(long, global = true)]
    pub postgres: Option<String>,
    /// Append every result row as one JSON line to this file.
    #[arg(long, global = true)]
    pub json: Option<PathBuf>,
    #[command(subcommand)]
    pub scenario: Scenario,
}

#[derive(Debug, Subcommand)]
pub enum Scenario {
    /// Every scenario below, with its defaults.
    All,
    /// Unary AppendEvent, ~1 KB event, state delta in app:, user: and session scope; one
    /// session per worker, all in one app. Durable (`--sync sync`, the server default).
    Append {
        #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
        concurrency: Vec<usize>,
    },
    /// AppendEvents bidirectional streams (one per worker, one session each); `window`
    /// requests in flight per stream (1 = request/response, as the runner does).
    AppendStream {
        #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
        concurrency: Vec<usize>,
        #[arg(long, value_delimiter = ',', default_value = "1,32")]
        window: Vec<usize>,
    },
    /// GetSession (all events) of sessions of these lengths.
    Get {
        #[arg(long, value_delimiter = ',', default_value = "100,1000")]
        events: Vec<u64>,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
    },
    /// GetSession with num_recent_events=10 on sessions of these lengths.
    Recent {
        #[arg(long, value_delimiter = ',', default_value = "100,100000")]
        events: Vec<u64>,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
    },
    /// ListSessions pages of 20 in an app holding these many sessions.
    List {
        #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
        sessions: Vec<u64>,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
    },
    /// AddEventsToMemory of short conversation turns (the recall corpus's, cycled) into one
    /// user, in batches from concurrent clients: the ingestion rate of real chat turns, with the
    /// embedding model if `--embedder` is given.
    Ingest {
        /// Directory holding `corpus.jsonl`.
        #[arg(long, default_value = "bench/recall")]
        corpus: PathBuf,
        #[arg(long, default_value_t = 5000)]
        entries: u64,
        /// Events per AddEventsToMemory call.
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// Concurrent AddEventsToMemory calls.
        #[arg(long, default_value_t = 2)]
        load_concurrency: usize,
        /// Start memory-svc with this `--embedder` (`local:DIR`, `openai:BASE_URL`).
        #[arg(long)]
        embedder: Option<String>,
    },
    /// AddEventsToMemory ingestion, then SearchMemory over one user's memory as it grows
    /// through these sizes (entries).
    Search {
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        entries: Vec<u64>,
        /// Events per AddEventsToMemory call while loading.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// Concurrent AddEventsToMemory calls while loading.
        #[arg(long, default_value_t = 2)]
        load_concurrency: usize,
        /// `--sync` of memory-svc while loading (`sync`, the default, or `periodic`); with
        /// `periodic` the server is restarted in `sync` mode before searching.
        #[arg(long, default_value = "sync")]
        load_sync: String,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Start memory-svc with this `--embedder` (`local:DIR`, `openai:BASE_URL`): entries are
        /// embedded as they are loaded and searches are hybrid (AUTO), each query a new text.
        #[arg(long)]
        embedder: Option<String>,
    },
    /// SearchMemory with and without a metadata filter keeping 1% of one user's memory, and a
    /// filtered ListMemories.
    FilteredSearch {
        /// Entries of the user's memory.
        #[arg(long, default_value_t = 100_000)]
        entries: u64,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
    },
    /// SearchMemory and health-check latency on memory-svc, quiet and while `ingesters`
    /// clients ingest at full speed (AddEventsToMemory batches, one user each).
    SearchUnderIngest {
        /// Entries of the searched user's memory.
        #[arg(long, default_value_t = 10_000)]
        entries: u64,
        #[arg(long, default_value_t = 8)]
        ingesters: usize,
        /// Events per AddEventsToMemory call of an ingester.
        #[arg(long, default_value_t = 100)]
        batch: usize,
    },
    /// Idle RSS of freshly started servers.
    Idle,
    /// search_memory through the gateway (MCP over streamable HTTP) beside SearchMemory over
    /// gRPC, one at a time, at `entries` memories; then `clients` MCP clients at once, each on
    /// its own connection (initialize, tools/list, 5 searches), which must all succeed.
    Mcp {
        #[arg(long, default_value_t = 10_000)]
        entries: u64,
        #[arg(long, default_value_t = 200)]
        clients: usize,
    },
    /// session-svc's RSS over time under a mixed load on a store larger than its sled cache
    /// (see bounded.rs). Not part of `all`.
    Bounded {
        /// Sessions seeded.
        #[arg(long, default_value_t = 400)]
        sessions: u64,
        /// ~1 KB events seeded per session.
        #[arg(long, default_value_t = 1000)]
        events: u64,
        /// `--cache-bytes` of the server (default: none given).
        #[arg(long)]
        cache_bytes: Option<u64>,
        /// Run the server inside this cgroup (v1) directory, made beforehand with its limit.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        /// Seconds of mixed load after seeding.
        #[arg(long, default_value_t = 180)]
        load_secs: u64,
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// With `--cgroup`: fail if the OOM killer killed the server or its peak RSS passed
        /// this percentage of the group's limit.
        #[arg(long)]
        max_rss_percent: Option<u64>,
    },
    /// memory-svc in a memory cgroup: ingestion into one user, then spread over many, and
    /// searches; fails on an OOM kill or a peak RSS above `--max-rss-percent` of the limit (see
    /// limit.rs). Not part of `all`.
    MemoryLimit {
        /// The cgroup (v1 or v2) directory to run the server in, made beforehand with its
        /// memory limit. Without it the load runs unconstrained and nothing is judged.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        /// Entries ingested into one user's memory, then as many spread over `--users` (none
        /// with `--users 0`).
        #[arg(long, default_value_t = 300_000)]
        entries: u64,
        #[arg(long, default_value_t = 1000)]
        users: u64,
        /// Events per AddEventsToMemory call.
        #[arg(long, default_value_t = 1000)]
        batch: u64,
        /// Concurrent AddEventsToMemory calls.
        #[arg(long, default_value_t = 2)]
        load_concurrency: usize,
        /// The peak RSS allowed, in percent of the group's memory limit.
        #[arg(long, default_value_t = 90)]
        max_rss_percent: u64,
        /// More flags for memory-svc (e.g. `--server-arg=--memory-budget=67108864`).
        #[arg(long)]
        server_arg: Vec<String>,
    },
    /// A bounded soak of both servers: paced appends, reads, watch streams, ingestion and
    /// searches for `--secs`, sampling RSS, open file descriptors and p99 per interval, then
    /// saying whether anything grew after warm-up (see soak.rs). With `--postgres`, both run on
    /// PostgreSQL. Not part of `all`.
    Soak {
        #[arg(long, default_value_t = 600)]
        secs: u64,
        #[arg(long, default_value_t = 30)]
        interval_secs: u64,
        /// Samples before this are not compared.
        #[arg(long, default_value_t = 120)]
        warmup_secs: u64,
        /// AppendEvent calls per second.
        #[arg(long, default_value_t = 80)]
        appends: u32,
        /// GetSession calls per second.
        #[arg(long, default_value_t = 50)]
        reads: u32,
        /// SearchMemory calls per second.
        #[arg(long, default_value_t = 30)]
        searches: u32,
        /// AddEventsToMemory calls per second.
        #[arg(long, default_value_t = 5)]
        ingests: u32,
        /// Events per AddEventsToMemory call.
        #[arg(long, default_value_t = 20)]
        ingest_batch: u64,
        /// WatchSession streams open at once.
        #[arg(long, default_value_t = 16)]
        watchers: usize,
        /// Seconds each watch stream follows its session before it is replaced.
        #[arg(long, default_value_t = 5)]
        watch_secs: u64,
        #[arg(long, default_value_t = 200)]
        sessions: usize,
        /// `--cache-bytes` of both servers (default: none given).
        #[arg(long)]
        cache_bytes: Option<u64>,
        /// Delete as much as is added once warm, so the live data stays the same size
        /// (sessions replaced after `--session-events` appends, ingested memory kept to
        /// `--memory-entries`): what grows then is the servers' own.
        #[arg(long)]
        steady: bool,
        #[arg(long, default_value_t = 100, requires = "steady")]
        session_events: u64,
        #[arg(long, default_value_t = 10_000, requires = "steady")]
        memory_entries: u64,
    },
    /// Retrieval quality: ingest the recall corpus through gRPC, ask its questions with
    /// SearchMemory, report recall@1/5/10 and MRR per question kind, and search latency.
    /// Not part of `all`.
    Recall {
        /// Directory with `corpus.jsonl` and `questions.jsonl` (default: `bench/recall` of
        /// this source tree).
        #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/recall"))]
        corpus: PathBuf,
        /// Use the memory-svc at this URL (`http://host:port`) instead of starting one.
        #[arg(long)]
        endpoint: Option<String>,
        /// Also print every question with an answer outside the top 5, and what came first.
        #[arg(long)]
        misses: bool,
        /// Start memory-svc with this `--embedder` (`local:DIR`, `openai:BASE_URL`).
        #[arg(long)]
        embedder: Option<String>,
        /// The SearchMemory mode to ask with: auto, keyword, semantic or hybrid.
        #[arg(long, default_value = "auto")]
        mode: String,
        /// The questions to ask: all, dev (even-numbered bank items) or held-out (odd ones).
        #[arg(long, default_value = "all")]
        split: Split,
        /// Results per search.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(10..=100))]
        limit: i32,
        /// Write every question's ranked result ids to this file (JSON lines).
        #[arg(long)]
        rankings: Option<PathBuf>,
    },
}
