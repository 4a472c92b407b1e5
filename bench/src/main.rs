//! `adk-bench`: load generator for session-svc and memory-svc.
//!
//! Spawns the release servers itself (`--listen 127.0.0.1:0`, a temporary data directory each),
//! drives them over loopback with the project's own gRPC client types, and prints throughput,
//! latency percentiles and the servers' resident memory. Every scenario is bounded in time and
//! size; `--quick` shrinks everything to a few seconds for CI smoke runs. See BENCHMARKS.md.
//!
//! The load generator runs on the same machine as the servers and competes with them for CPU:
//! numbers are for "client and server on one box", which is the pessimistic case.

mod bounded;
mod contention;
mod limit;
mod load;
mod mcp;
mod recall;
mod server;
mod soak;
mod text;

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant, SystemTime},
};

use adk_proto::{
    memory::v1::{
        memory_service_client::MemoryServiceClient, AddEventsToMemoryRequest, AddMemoryRequest,
        MemoryEntry, SearchMemoryRequest,
    },
    session::v1::{
        part, session_service_client::SessionServiceClient, AppendEventRequest, Content,
        CreateSessionRequest, Event, EventActions, GetSessionRequest, ListSessionsRequest, Part,
    },
};
use clap::{Parser, Subcommand};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::{
    load::{drive, Report, Row},
    server::Server,
    text::Corpus,
};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, BoxError>;

const APP: &str = "bench";

#[derive(Debug, Parser)]
#[command(
    name = "adk-bench",
    version = adk_version::version!(),
    about = "Load generator for session-svc and memory-svc"
)]
struct Cli {
    /// Run everything tiny (a few seconds per scenario) for CI smoke use.
    #[arg(long, global = true)]
    quick: bool,
    /// Directory holding the release `session-svc` and `memory-svc` binaries (default: the
    /// directory of this executable, i.e. the same target/release).
    #[arg(long, global = true)]
    bin_dir: Option<PathBuf>,
    /// Measured seconds per load point (after warm-up).
    #[arg(long, global = true, default_value_t = 10.0)]
    duration: f64,
    /// Warm-up seconds per load point (ops run, not recorded).
    #[arg(long, global = true, default_value_t = 1.0)]
    warmup: f64,
    /// Upper bound on measured operations per load point.
    #[arg(long, global = true, default_value_t = 2_000_000)]
    max_ops: u64,
    /// `--sync` mode of the server while *seeding* read scenarios (get, recent, list) and for the
    /// whole `bounded` run. Reads are measured in the same process; the sync mode only affects
    /// when writes are acknowledged.
    #[arg(long, global = true, default_value = "periodic")]
    seed_sync: String,
    /// Run the servers on this PostgreSQL database (`postgres://...`) instead of sled: each
    /// server gets a fresh schema in it. Use a throwaway database.
    #[arg(long, global = true)]
    postgres: Option<String>,
    /// Append every result row as one JSON line to this file.
    #[arg(long, global = true)]
    json: Option<PathBuf>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
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
    },
    /// memory-svc in a memory cgroup: ingestion into one user, then spread over many, and
    /// searches; fails on an OOM kill or a peak RSS above `--max-rss-percent` of the limit (see
    /// limit.rs). Not part of `all`.
    MemoryLimit {
        /// The cgroup (v1 or v2) directory to run the server in, made beforehand with its
        /// memory limit.
        #[arg(long)]
        cgroup: PathBuf,
        /// Entries ingested into one user's memory, then as many spread over `--users`.
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
        split: recall::corpus::Split,
        /// Results per search.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(10..=100))]
        limit: i32,
        /// Write every question's ranked result ids to this file (JSON lines).
        #[arg(long)]
        rankings: Option<PathBuf>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("adk-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Settings every scenario shares.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub quick: bool,
    pub bin_dir: PathBuf,
    pub duration: Duration,
    pub warmup: Duration,
    pub max_ops: u64,
    pub seed_sync: String,
    pub postgres: Option<String>,
}

async fn run(cli: Cli) -> Result<()> {
    let bin_dir = match cli.bin_dir {
        Some(d) => d,
        None => std::env::current_exe()?
            .parent()
            .ok_or("no directory for this executable")?
            .to_path_buf(),
    };
    let (duration, warmup) = if cli.quick {
        (Duration::from_secs_f64(1.0), Duration::from_secs_f64(0.2))
    } else {
        (
            Duration::from_secs_f64(cli.duration),
            Duration::from_secs_f64(cli.warmup),
        )
    };
    let ctx = Ctx {
        quick: cli.quick,
        bin_dir,
        duration,
        warmup,
        max_ops: cli.max_ops,
        seed_sync: cli.seed_sync,
        postgres: cli.postgres,
    };
    let mut report = Report::new(cli.json.clone());
    println!(
        "# adk-bench{}{} bin_dir={} duration={:?} warmup={:?}",
        if ctx.quick { " --quick" } else { "" },
        if ctx.postgres.is_some() {
            " --postgres"
        } else {
            ""
        },
        ctx.bin_dir.display(),
        ctx.duration,
        ctx.warmup
    );
    print_load("start");
    let q = ctx.quick;
    match cli.scenario {
        Scenario::All => {
            idle(&ctx, &mut report).await?;
            append(&ctx, &mut report, &[1, 16, 64]).await?;
            append_stream(&ctx, &mut report, &[1, 16, 64], &[1, 32]).await?;
            get(&ctx, &mut report, &[100, 1000], 1).await?;
            recent(
                &ctx,
                &mut report,
                &if q {
                    vec![100, 5000]
                } else {
                    vec![100, 100_000]
                },
                1,
            )
            .await?;
            list(
                &ctx,
                &mut report,
                &if q {
                    vec![1000, 5000]
                } else {
                    vec![1000, 100_000]
                },
                1,
            )
            .await?;
            let sizes = if q {
                vec![2000, 10_000]
            } else {
                vec![10_000, 100_000]
            };
            search(&ctx, &mut report, &sizes, 1000, 2, "sync", 1, None).await?;
        }
        Scenario::Append { concurrency } => append(&ctx, &mut report, &concurrency).await?,
        Scenario::AppendStream {
            concurrency,
            window,
        } => append_stream(&ctx, &mut report, &concurrency, &window).await?,
        Scenario::Get {
            events,
            concurrency,
        } => get(&ctx, &mut report, &shrink(q, events, 1000), concurrency).await?,
        Scenario::Recent {
            events,
            concurrency,
        } => recent(&ctx, &mut report, &shrink(q, events, 5000), concurrency).await?,
        Scenario::List {
            sessions,
            concurrency,
        } => list(&ctx, &mut report, &shrink(q, sessions, 5000), concurrency).await?,
        Scenario::Search {
            entries,
            batch,
            load_concurrency,
            load_sync,
            concurrency,
            embedder,
        } => {
            search(
                &ctx,
                &mut report,
                &shrink(q, entries, 10_000),
                batch,
                load_concurrency,
                &load_sync,
                concurrency,
                embedder.as_deref(),
            )
            .await?
        }
        Scenario::Ingest {
            corpus,
            entries,
            batch,
            load_concurrency,
            embedder,
        } => {
            let turns = recall::turns(&corpus)?;
            ingest(
                &ctx,
                &mut report,
                turns,
                if q { entries.min(500) } else { entries },
                batch,
                load_concurrency,
                embedder.as_deref(),
            )
            .await?
        }
        Scenario::SearchUnderIngest {
            entries,
            ingesters,
            batch,
        } => {
            let entries = shrink(q, vec![entries], 2000)[0];
            contention::search_under_ingest(&ctx, &mut report, entries, ingesters, batch).await?
        }
        Scenario::Idle => idle(&ctx, &mut report).await?,
        Scenario::Mcp { entries, clients } => {
            let entries = shrink(q, vec![entries], 2000)[0];
            mcp::mcp(&ctx, &mut report, entries, clients).await?
        }
        Scenario::MemoryLimit {
            cgroup,
            entries,
            users,
            batch,
            load_concurrency,
            max_rss_percent,
            server_arg,
        } => {
            let entries = shrink(q, vec![entries], 20_000)[0];
            limit::memory_limit(
                &ctx,
                limit::MemoryLimit {
                    cgroup,
                    entries,
                    users,
                    batch,
                    concurrency: load_concurrency,
                    max_rss_percent,
                    server_args: server_arg,
                },
            )
            .await?
        }
        Scenario::Bounded {
            sessions,
            events,
            cache_bytes,
            cgroup,
            load_secs,
            concurrency,
        } => {
            let (sessions, events, load_secs) = if q {
                (sessions.min(20), events.min(200), load_secs.min(3))
            } else {
                (sessions, events, load_secs)
            };
            bounded::bounded(
                &ctx,
                bounded::Bounded {
                    sessions,
                    events,
                    cache_bytes,
                    cgroup,
                    load_secs,
                    concurrency,
                },
            )
            .await?
        }
        Scenario::Soak {
            secs,
            interval_secs,
            warmup_secs,
            appends,
            reads,
            searches,
            ingests,
            ingest_batch,
            watchers,
            watch_secs,
            sessions,
            cache_bytes,
            steady,
            session_events,
            memory_entries,
        } => {
            let (secs, interval_secs, warmup_secs) = if q {
                (secs.min(6), interval_secs.min(1), warmup_secs.min(2))
            } else {
                (secs, interval_secs, warmup_secs)
            };
            soak::soak(
                &ctx,
                soak::Soak {
                    duration: Duration::from_secs(secs),
                    interval: Duration::from_secs(interval_secs.max(1)),
                    warmup: Duration::from_secs(warmup_secs),
                    appends,
                    reads,
                    searches,
                    ingests,
                    ingest_batch,
                    watchers,
                    watch_secs,
                    sessions,
                    cache_bytes,
                    steady: steady.then_some(soak::Steady {
                        session_events,
                        memory_entries,
                    }),
                },
            )
            .await?;
            print_load("end");
            return Ok(());
        }
        Scenario::Recall {
            corpus,
            endpoint,
            misses,
            embedder,
            mode,
            split,
            limit,
            rankings,
        } => {
            // Its own report: quality per question kind, not a load table.
            let opts = recall::Options {
                corpus,
                endpoint,
                misses,
                embedder,
                mode: recall::parse_mode(&mode)?,
                split,
                limit,
                rankings,
                json: cli.json,
            };
            recall::run(&ctx, &opts).await?;
            print_load("end");
            return Ok(());
        }
    }
    print_load("end");
    report.print_table();
    Ok(())
}

/// In quick mode, caps every size at `cap`.
fn shrink(quick: bool, sizes: Vec<u64>, cap: u64) -> Vec<u64> {
    if quick {
        sizes.into_iter().map(|s| s.min(cap)).collect()
    } else {
        sizes
    }
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn print_load(when: &str) {
    println!("# load average at {when}: {}", loadavg());
}

fn now_ts() -> prost_types::Timestamp {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Connections to a server; workers use them round-robin.
fn session_clients(server: &Server, n: usize) -> Vec<SessionServiceClient<Channel>> {
    (0..n.max(1))
        .map(|_| {
            let ch = Channel::from_shared(format!("http://{}", server.addr))
                .unwrap()
                .tcp_nodelay(true)
                .connect_lazy();
            SessionServiceClient::new(ch)
                .max_decoding_message_size(512 << 20)
                .max_encoding_message_size(512 << 20)
        })
        .collect()
}

fn memory_clients(server: &Server, n: usize) -> Vec<MemoryServiceClient<Channel>> {
    (0..n.max(1))
        .map(|_| {
            let ch = Channel::from_shared(format!("http://{}", server.addr))
                .unwrap()
                .tcp_nodelay(true)
                .connect_lazy();
            MemoryServiceClient::new(ch)
                .max_decoding_message_size(512 << 20)
                .max_encoding_message_size(512 << 20)
        })
        .collect()
}

fn conns_for(concurrency: usize) -> usize {
    concurrency.clamp(1, 8)
}

/// The ~1 KB event every append scenario sends (id and timestamp set per call).
fn template_event(corpus: &Corpus, seed: u64) -> Event {
    let text = corpus.text_of_bytes(seed, 1000);
    Event {
        invocation_id: format!("inv-{seed}"),
        author: "model".into(),
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![Part {
                data: Some(part::Data::Text(text)),
                ..Default::default()
            }],
        }),
        actions: Some(EventActions::default()),
        ..Default::default()
    }
}

fn append_request(
    template: &Event,
    user: &str,
    session: &str,
    worker: usize,
    i: u64,
) -> AppendEventRequest {
    let mut event = template.clone();
    event.id = format!("{session}-{i}");
    event.timestamp = Some(now_ts());
    if let Some(actions) = event.actions.as_mut() {
        actions.state_delta = format!(
            r#"{{"app:last_writer":{worker},"user:turns":{i},"turn":{i},"last_topic":"topic-{}","temp:scratch":1}}"#,
            i % 97
        );
    }
    AppendEventRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: session.into(),
        event: Some(event),
        expected_last_sequence: None,
    }
}

async fn create_session(
    client: &mut SessionServiceClient<Channel>,
    app: &str,
    user: &str,
    session: &str,
) -> Result<()> {
    client
        .create_session(CreateSessionRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session.into(),
            state: r#"{"app:theme":"dark","user:name":"bench","turn":0}"#.into(),
            ..Default::default()
        })
        .await?;
    Ok(())
}

fn user_of(worker: usize) -> String {
    format!("u{worker}")
}
fn session_of(worker: usize) -> String {
    format!("s{worker}")
}

// ---------------------------------------------------------------- scenarios

async fn idle(ctx: &Ctx, report: &mut Report) -> Result<()> {
    for name in ["session-svc", "memory-svc"] {
        let server = Server::spawn(ctx, name, &[]).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rss, hwm) = server.rss_kb();
        println!(
            "{name}: idle RSS {:.1} MB (peak {:.1} MB)",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        report.push(Row::info(&format!("{name} idle"), &server));
        server.stop().await;
    }
    Ok(())
}

async fn append(ctx: &Ctx, report: &mut Report, levels: &[usize]) -> Result<()> {
    let corpus = Arc::new(Corpus::new());
    for &c in levels {
        let server = Server::spawn(ctx, "session-svc", &[]).await?;
        let clients = session_clients(&server, conns_for(c));
        for w in 0..c {
            create_session(
                &mut clients[w % clients.len()].clone(),
                APP,
                &user_of(w),
                &session_of(w),
            )
            .await?;
        }
        let templates: Arc<Vec<Event>> =
            Arc::new((0..16).map(|s| template_event(&corpus, s)).collect());
        let counters: Arc<Vec<AtomicU64>> = Arc::new((0..c).map(|_| AtomicU64::new(0)).collect());
        let clients = Arc::new(clients);
        let row = drive(ctx, &format!("AppendEvent c={c}"), c, &server, move |w| {
            let mut client = clients[w % clients.len()].clone();
            let templates = templates.clone();
            let counters = counters.clone();
            async move {
                let i = counters[w].fetch_add(1, Ordering::Relaxed);
                let req = append_request(
                    &templates[(i % 16) as usize],
                    &user_of(w),
                    &session_of(w),
                    w,
                    i,
                );
                client.append_event(req).await?;
                Ok(())
            }
        })
        .await?;
        report.push(row);
        server.stop().await;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
/// One AppendEvents stream: sends `count` requests for (user, session) with at most `window`
/// in flight, calling `on_response(latency)` for each answer. Fails on any in-band error.
async fn stream_appends(
    client: &mut SessionServiceClient<Channel>,
    template: &Event,
    user: &str,
    session: &str,
    first: u64,
    count: u64,
    window: usize,
    deadline: Option<Instant>,
    mut on_response: impl FnMut(Duration),
) -> Result<u64> {
    let (tx, rx) = mpsc::channel::<AppendEventRequest>(window.max(1));
    let mut responses = client
        .append_events(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    let permits = Arc::new(tokio::sync::Semaphore::new(window.max(1)));
    let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<Instant>();
    let sender = {
        let permits = permits.clone();
        let template = template.clone();
        let (user, session) = (user.to_owned(), session.to_owned());
        tokio::spawn(async move {
            for i in first..first + count {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let permit = permits.clone().acquire_owned().await.unwrap();
                permit.forget();
                let req = append_request(&template, &user, &session, 0, i);
                let _ = sent_tx.send(Instant::now());
                if tx.send(req).await.is_err() {
                    break;
                }
            }
            // Dropping tx closes the request stream once everything is answered.
        })
    };
    let mut done = 0;
    while let Some(resp) = responses.message().await? {
        let sent = sent_rx.recv().await.ok_or("response without request")?;
        on_response(sent.elapsed());
        if resp.code != 0 {
            return Err(
                format!("append failed in-band: code {} {}", resp.code, resp.message).into(),
            );
        }
        done += 1;
        permits.add_permits(1);
    }
    sender.await?;
    Ok(done)
}

async fn append_stream(
    ctx: &Ctx,
    report: &mut Report,
    levels: &[usize],
    windows: &[usize],
) -> Result<()> {
    let corpus = Corpus::new();
    let template = template_event(&corpus, 7);
    for &window in windows {
        for &c in levels {
            if window > 1 && c > 16 {
                continue; // pipelining many streams adds nothing new
            }
            let server = Server::spawn(ctx, "session-svc", &[]).await?;
            let clients = session_clients(&server, conns_for(c));
            for w in 0..c {
                create_session(
                    &mut clients[w % clients.len()].clone(),
                    APP,
                    &user_of(w),
                    &session_of(w),
                )
                .await?;
            }
            let start = Instant::now();
            let measure_from = start + ctx.warmup;
            let deadline = measure_from + ctx.duration;
            let mut tasks = Vec::new();
            for w in 0..c {
                let mut client = clients[w % clients.len()].clone();
                let template = template.clone();
                tasks.push(tokio::spawn(async move {
                    let mut hist = load::new_hist();
                    let mut ops = 0u64;
                    stream_appends(
                        &mut client,
                        &template,
                        &user_of(w),
                        &session_of(w),
                        0,
                        u64::MAX / 4,
                        window,
                        Some(deadline),
                        |lat| {
                            if Instant::now() >= measure_from {
                                load::record(&mut hist, lat);
                                ops += 1;
                            }
                        },
                    )
                    .await?;
                    Ok::<_, BoxError>((hist, ops))
                }));
            }
            let mut hist = load::new_hist();
            let mut ops = 0;
            for t in tasks {
                let (h, o) = t.await??;
                hist.add(&h).ok();
                ops += o;
            }
            let secs = (Instant::now() - measure_from).as_secs_f64();
            let row = Row::from_hist(
                &format!("AppendEvents stream c={c} window={window}"),
                ops,
                secs,
                &hist,
                &server,
            );
            row.print();
            report.push(row);
            server.stop().await;
        }
    }
    Ok(())
}

/// Seeds one session of `n` events through a pipelined AppendEvents stream.
async fn seed_session(
    client: &mut SessionServiceClient<Channel>,
    template: &Event,
    user: &str,
    session: &str,
    n: u64,
) -> Result<()> {
    create_session(client, APP, user, session).await?;
    let t = Instant::now();
    let done = stream_appends(client, template, user, session, 0, n, 256, None, |_| {}).await?;
    if done != n {
        return Err(format!("seeded {done} of {n} events").into());
    }
    println!(
        "  seeded {session}: {n} events in {:.1}s ({:.0} events/s)",
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn get(ctx: &Ctx, report: &mut Report, sizes: &[u64], c: usize) -> Result<()> {
    get_like(ctx, report, sizes, c, None).await
}

async fn recent(ctx: &Ctx, report: &mut Report, sizes: &[u64], c: usize) -> Result<()> {
    get_like(ctx, report, sizes, c, Some(10)).await
}

async fn get_like(
    ctx: &Ctx,
    report: &mut Report,
    sizes: &[u64],
    c: usize,
    recent: Option<i32>,
) -> Result<()> {
    let corpus = Corpus::new();
    let template = template_event(&corpus, 3);
    let seed_sync = ["--sync", ctx.seed_sync.as_str()];
    let server = Server::spawn(ctx, "session-svc", &seed_sync).await?;
    let clients = Arc::new(session_clients(&server, conns_for(c)));
    for &n in sizes {
        seed_session(
            &mut clients[0].clone(),
            &template,
            "reader",
            &format!("len{n}"),
            n,
        )
        .await?;
    }
    for &n in sizes {
        let clients = clients.clone();
        let label = match recent {
            Some(k) => format!("GetSession num_recent_events={k} of {n}-event session"),
            None => format!("GetSession (all events) of {n}-event session"),
        };
        let row = drive(ctx, &label, c, &server, move |w| {
            let mut client = clients[w % clients.len()].clone();
            async move {
                let s = client
                    .get_session(GetSessionRequest {
                        app_name: APP.into(),
                        user_id: "reader".into(),
                        session_id: format!("len{n}"),
                        num_recent_events: recent,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                let want = recent.map_or(n, |k| (k as u64).min(n));
                if s.events.len() as u64 != want {
                    return Err(format!("got {} events, want {want}", s.events.len()).into());
                }
                Ok(())
            }
        })
        .await?;
        report.push(row);
    }
    server.stop().await;
    Ok(())
}

async fn list(ctx: &Ctx, report: &mut Report, counts: &[u64], c: usize) -> Result<()> {
    let seed_sync = ["--sync", ctx.seed_sync.as_str()];
    for &n in counts {
        let server = Server::spawn(ctx, "session-svc", &seed_sync).await?;
        let clients = Arc::new(session_clients(&server, 8));
        let app = format!("list{n}");
        // Seed: n sessions over 100 users, 32 creators.
        let t = Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for w in 0..32 {
            let mut client = clients[w % clients.len()].clone();
            let next = next.clone();
            let app = app.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, BoxError>(());
                    }
                    create_session(
                        &mut client,
                        &app,
                        &format!("u{}", i % 100),
                        &format!("s{i}"),
                    )
                    .await?;
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        println!(
            "  seeded {n} sessions in {:.1}s ({:.0}/s)",
            t.elapsed().as_secs_f64(),
            n as f64 / t.elapsed().as_secs_f64()
        );
        // Tokens of the first 50 pages, to measure pages deeper than the first.
        let mut tokens = vec![String::new()];
        let mut client = clients[0].clone();
        while tokens.len() < 50 {
            let page = client
                .list_sessions(ListSessionsRequest {
                    app_name: app.clone(),
                    user_id: None,
                    page_size: 20,
                    page_token: tokens.last().unwrap().clone(),
                })
                .await?
                .into_inner();
            if page.next_page_token.is_empty() {
                break;
            }
            tokens.push(page.next_page_token);
        }
        let tokens = Arc::new(tokens);
        for (kind, user) in [
            ("all users, pages 1-50", None),
            ("one user (of 100), first page", Some("u7")),
        ] {
            let clients = clients.clone();
            let tokens = tokens.clone();
            let app = app.clone();
            let counter = Arc::new(AtomicU64::new(0));
            let row = drive(
                ctx,
                &format!("ListSessions page_size=20 among {n} sessions, {kind}"),
                c,
                &server,
                move |w| {
                    let mut client = clients[w % clients.len()].clone();
                    let i = counter.fetch_add(1, Ordering::Relaxed) as usize;
                    let token = if user.is_none() {
                        tokens[i % tokens.len()].clone()
                    } else {
                        String::new()
                    };
                    let app = app.clone();
                    async move {
                        let page = client
                            .list_sessions(ListSessionsRequest {
                                app_name: app,
                                user_id: user.map(str::to_owned),
                                page_size: 20,
                                page_token: token,
                            })
                            .await?
                            .into_inner();
                        if page.sessions.is_empty() {
                            return Err("empty ListSessions page".into());
                        }
                        Ok(())
                    }
                },
            )
            .await?;
            report.push(row);
        }
        server.stop().await;
    }
    Ok(())
}

/// The text of memory entry `i` while loading.
type Texts = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// Events `m{i}` for each `i` of `range`, with the texts `text(i)`, to ingest.
fn memory_events(text: impl Fn(u64) -> String, range: std::ops::Range<u64>) -> Vec<Event> {
    let ts = now_ts();
    range
        .map(|i| Event {
            id: format!("m{i}"),
            author: if i % 2 == 0 {
                "user".into()
            } else {
                "model".into()
            },
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(part::Data::Text(text(i))),
                    ..Default::default()
                }],
            }),
            timestamp: Some(ts),
            ..Default::default()
        })
        .collect()
}

/// The search the `search` scenario times: the 10 best of `user`'s memories for `query`.
fn search_request(user: &str, query: String) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: APP.into(),
        user_id: user.into(),
        query,
        limit: 10,
        ..Default::default()
    }
}

/// Loads entries `range` into `user`'s memory: AddEventsToMemory calls of `batch` events (one
/// session per call) from `concurrency` clients, then one search (see below). Returns the
/// calls' latencies.
async fn load_memory(
    srv: &Server,
    texts: &Texts,
    user: &'static str,
    range: std::ops::Range<u64>,
    batch: usize,
    concurrency: usize,
) -> Result<hdrhistogram::Histogram<u64>> {
    let clients = Arc::new(memory_clients(srv, concurrency));
    let next = Arc::new(AtomicU64::new(range.start));
    let mut tasks = Vec::new();
    let load_lat = Arc::new(std::sync::Mutex::new(load::new_hist()));
    for w in 0..concurrency {
        let mut client = clients[w % clients.len()].clone();
        let (next, texts, load_lat) = (next.clone(), texts.clone(), load_lat.clone());
        let end = range.end;
        tasks.push(tokio::spawn(async move {
            loop {
                let first = next.fetch_add(batch as u64, Ordering::Relaxed);
                if first >= end {
                    return Ok::<_, BoxError>(());
                }
                let last = (first + batch as u64).min(end);
                let events = memory_events(texts.as_ref(), first..last);
                let t0 = Instant::now();
                let resp = client
                    .add_events_to_memory(AddEventsToMemoryRequest {
                        app_name: APP.into(),
                        user_id: user.into(),
                        session_id: format!("conv{}", first / batch as u64),
                        events,
                        custom_metadata: String::new(),
                    })
                    .await?
                    .into_inner();
                load::record(&mut load_lat.lock().unwrap(), t0.elapsed());
                if resp.entries as u64 != last - first {
                    return Err(format!("ingested {} of {}", resp.entries, last - first).into());
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    // The load ends once what it added is searchable: a store may index part of it after
    // replying, and a search first finishes that.
    if let Some(client) = clients.first() {
        let query = texts(range.end.saturating_sub(1));
        client
            .clone()
            .search_memory(search_request(user, query))
            .await?;
    }
    let hist = load_lat.lock().unwrap().clone();
    Ok(hist)
}

/// The `ingest` scenario: `entries` of `turns` (cycled) into one user of a fresh memory-svc.
async fn ingest(
    ctx: &Ctx,
    report: &mut Report,
    turns: Vec<String>,
    entries: u64,
    batch: usize,
    concurrency: usize,
    embedder: Option<&str>,
) -> Result<()> {
    if turns.is_empty() {
        return Err("the corpus has no turns".into());
    }
    let model_args: Vec<&str> = embedder.map_or(Vec::new(), |e| vec!["--embedder", e]);
    let dir = tempfile::Builder::new()
        .prefix("adk-bench-ingest")
        .tempdir()?;
    let srv = Server::spawn_in(ctx, "memory-svc", &model_args, dir.path()).await?;
    let texts: Texts = Arc::new(move |i| turns[i as usize % turns.len()].clone());
    let t = Instant::now();
    let hist = load_memory(&srv, &texts, "ingester", 0..entries, batch, concurrency).await?;
    let mut row = Row::from_hist(
        &format!("AddEventsToMemory of conversation turns (batch {batch}, c={concurrency})"),
        entries,
        t.elapsed().as_secs_f64(),
        &hist,
        &srv,
    );
    row.unit = "entries";
    row.print();
    report.push(row);
    srv.stop().await;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn search(
    ctx: &Ctx,
    report: &mut Report,
    sizes: &[u64],
    batch: usize,
    load_concurrency: usize,
    load_sync: &str,
    c: usize,
    embedder: Option<&str>,
) -> Result<()> {
    let corpus = Arc::new(Corpus::new());
    let texts: Texts = {
        let corpus = corpus.clone();
        Arc::new(move |i| corpus.memory_text(i))
    };
    let model_args: Vec<&str> = embedder.map_or(Vec::new(), |e| vec!["--embedder", e]);
    let dir = tempfile::Builder::new()
        .prefix("adk-bench-memory")
        .tempdir()?;
    let mut loaded = 0u64;
    let user = "searcher";
    let mut server: Option<Server> = None;
    for &target in sizes {
        // ---- load up to `target` entries
        let load_args = [&["--sync", load_sync][..], &model_args].concat();
        let srv = match server.take() {
            Some(s) if load_sync == "sync" => s,
            Some(s) => {
                s.stop().await;
                Server::spawn_in(ctx, "memory-svc", &load_args, dir.path()).await?
            }
            None => Server::spawn_in(ctx, "memory-svc", &load_args, dir.path()).await?,
        };
        let t = Instant::now();
        let start_at = loaded;
        let hist = load_memory(&srv, &texts, user, loaded..target, batch, load_concurrency).await?;
        let secs = t.elapsed().as_secs_f64();
        let added = target.saturating_sub(start_at);
        loaded = loaded.max(target);
        let mut row = Row::from_hist(
            &format!("AddEventsToMemory ingest {start_at}->{target} (batch {batch}, c={load_concurrency}, --sync {load_sync})"),
            added,
            secs,
            &hist,
            &srv,
        );
        row.unit = "entries";
        row.print();
        report.push(row);
        // ---- search in durable mode
        let srv = if load_sync == "sync" {
            srv
        } else {
            srv.stop().await;
            Server::spawn_in(ctx, "memory-svc", &model_args, dir.path()).await?
        };
        let clients = Arc::new(memory_clients(&srv, conns_for(c)));
        for class in text::QueryClass::ALL {
            let clients = clients.clone();
            let corpus = corpus.clone();
            let counter = Arc::new(AtomicU64::new(0));
            let label = format!("SearchMemory {} among {target} entries", class.label());
            let row = drive(ctx, &label, c, &srv, move |w| {
                let mut client = clients[w % clients.len()].clone();
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let query = corpus.query(class, i);
                async move {
                    client.search_memory(search_request(user, query)).await?;
                    Ok(())
                }
            })
            .await?;
            report.push(row);
        }
        // A question right after a write to the user's memory (one entry rewritten in place
        // with another text each time): what a store that keeps read blocks between searches
        // (PostgreSQL) can still use of them.
        let written = {
            let clients = clients.clone();
            let corpus = corpus.clone();
            let counter = Arc::new(AtomicU64::new(0));
            let class = text::QueryClass::Common;
            let label = format!(
                "AddMemory (1 entry rewritten) then SearchMemory {} among {target} entries",
                class.label()
            );
            drive(ctx, &label, c, &srv, move |w| {
                let mut client = clients[w % clients.len()].clone();
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let (query, text) = (corpus.query(class, i), corpus.memory_text(i));
                async move {
                    client
                        .add_memory(AddMemoryRequest {
                            app_name: APP.into(),
                            user_id: user.into(),
                            memories: vec![MemoryEntry {
                                id: "rewritten".into(),
                                author: "user".into(),
                                content: Some(Content {
                                    role: Some("user".into()),
                                    parts: vec![Part {
                                        data: Some(part::Data::Text(text)),
                                        ..Default::default()
                                    }],
                                }),
                                ..Default::default()
                            }],
                            custom_metadata: String::new(),
                        })
                        .await?;
                    client.search_memory(search_request(user, query)).await?;
                    Ok(())
                }
            })
            .await?
        };
        report.push(written);
        server = Some(srv);
    }
    if let Some(s) = server {
        tokio::time::sleep(Duration::from_secs(1)).await;
        report.push(Row::info("memory-svc after search", &s));
        s.stop().await;
    }
    Ok(())
}
