//! `memory-limit`: memory-svc inside a memory cgroup, under an ingestion that outgrows its caches.
//!
//! Starts memory-svc in `cgroup` (made by the caller, with its memory limit) with no memory flag,
//! so it sizes its budget from the limit; ingests `entries` into one user's memory, then as many
//! spread over `users` users (AddEventsToMemory batches from concurrent clients; no second phase
//! with `users` 0), searching after each. Fails when the server is killed (the kernel's OOM
//! killer counts in the group's `oom_kill`) or when its peak RSS (`VmHWM`) passes
//! `max_rss_percent` of the limit. Prints each phase's ingestion rate, bytes written per entry
//! and RSS, and its search p50 by query class twice: right after the ingestion (the merges it
//! left may still run) and, with other queries, once the server is idle.
//! Without a cgroup the same load runs unconstrained, for comparison, and nothing is judged.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use adk_proto::memory::v1::AddEventsToMemoryRequest;

use crate::{
    ctx::Ctx,
    requests::{memory_clients, memory_events, search_request},
    server::Server,
    text::{Corpus, QueryClass},
    Result, APP,
};

/// What the `memory-limit` scenario runs.
pub struct MemoryLimit {
    pub cgroup: Option<PathBuf>,
    pub entries: u64,
    pub users: u64,
    pub batch: u64,
    pub concurrency: usize,
    pub max_rss_percent: u64,
    /// Extra flags for memory-svc.
    pub server_args: Vec<String>,
}

/// Searches timed after each phase, and again once it settled.
const SEARCHES: u64 = 300;

pub async fn memory_limit(ctx: &Ctx, run: MemoryLimit) -> Result<()> {
    let group = run.cgroup.clone().map(Group);
    let limit = group.as_ref().map(Group::limit).transpose()?;
    let kills_before = group.as_ref().map_or(0, Group::oom_kills);
    let args: Vec<&str> = run.server_args.iter().map(String::as_str).collect();
    let server = Server::spawn_in_cgroup(ctx, "memory-svc", &args, run.cgroup.as_deref()).await?;
    match (&run.cgroup, limit) {
        (Some(cgroup), Some(limit)) => println!(
            "  memory-svc in {} (limit {} MiB)",
            cgroup.display(),
            limit >> 20
        ),
        _ => println!("  memory-svc in no cgroup (unconstrained)"),
    }
    let corpus = Arc::new(Corpus::new());
    let mut phases = vec![("one user", 1, run.entries, run.batch)];
    if run.users > 0 {
        phases.push((
            "spread",
            run.users,
            run.entries,
            run.batch.min(run.entries / run.users).max(1),
        ));
    }
    let mut first_entry = 0;
    let mut outcome = Ok(());
    for (label, users, entries, batch) in phases {
        let written = server.bytes_written();
        let loaded = ingest(
            &server,
            &corpus,
            label,
            users,
            first_entry..first_entry + entries,
            batch,
            run.concurrency,
        )
        .await;
        first_entry += entries;
        let (rss, hwm) = server.rss_kb();
        match loaded {
            Ok(rate) => {
                let per_entry =
                    server.bytes_written().saturating_sub(written) as f64 / entries as f64;
                println!(
                    "  {label}: {entries} entries in {users} users at {rate:.0} entries/s, \
                     {:.1} KB written per entry; RSS {:.1} MB, peak {:.1} MB",
                    per_entry / 1e3,
                    rss as f64 / 1024.0,
                    hwm as f64 / 1024.0,
                );
                let after = search_p50s(&server, &corpus, label, users, 0).await;
                println!(
                    "  {label}: search p50 {} right after the ingestion",
                    show(&after)
                );
                let waited = settle(&server).await;
                let settled = search_p50s(&server, &corpus, label, users, SEARCHES).await;
                println!(
                    "  {label}: search p50 {} once the server was idle ({:.0} s later)",
                    show(&settled),
                    waited.as_secs_f64()
                );
            }
            Err(e) => {
                outcome = Err(format!("{label}: the ingestion failed: {e}"));
                break;
            }
        }
    }
    let (_, hwm_kb) = server.rss_kb();
    let peak = hwm_kb * 1024;
    let Some(group) = group else {
        println!("  => peak RSS {:.1} MB", peak as f64 / 1e6);
        server.stop().await;
        return outcome.map_err(Into::into);
    };
    server.stop().await;
    judge(
        "memory-svc",
        &group,
        kills_before,
        peak,
        run.max_rss_percent,
    )?;
    outcome.map_err(Into::into)
}

/// The verdict on a server that ran in `group`: it fails if the OOM killer killed a process of
/// the group since it counted `kills_before`, or if `peak` (bytes of RSS) passed
/// `max_rss_percent` of the group's limit. Prints the peak against the limit.
pub(crate) fn judge(
    name: &str,
    group: &Group,
    kills_before: u64,
    peak: u64,
    max_rss_percent: u64,
) -> Result<()> {
    let limit = group.limit()?;
    let killed = group.oom_kills() > kills_before;
    println!(
        "  => {name}: peak RSS {:.1} MB of a {} MiB limit ({:.0} %), {}",
        peak as f64 / 1e6,
        limit >> 20,
        peak as f64 * 100.0 / limit as f64,
        if killed {
            "KILLED by the OOM killer"
        } else {
            "no OOM kill"
        }
    );
    if killed {
        return Err(format!("the kernel's OOM killer killed {name}").into());
    }
    if peak > limit / 100 * max_rss_percent {
        return Err(format!(
            "{name}: peak RSS {} MB passed {max_rss_percent} % of the {} MiB limit",
            peak >> 20,
            limit >> 20
        )
        .into());
    }
    Ok(())
}

/// Ingests entries `range` spread evenly over `users` users, in batches of `batch` (one
/// session each) from `concurrency` clients; returns the entries per second.
async fn ingest(
    server: &Server,
    corpus: &Arc<Corpus>,
    label: &str,
    users: u64,
    range: std::ops::Range<u64>,
    batch: u64,
    concurrency: usize,
) -> Result<f64> {
    let clients = Arc::new(memory_clients(server, concurrency));
    let next = Arc::new(AtomicU64::new(range.start));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..concurrency.max(1) {
        let mut client = clients[w % clients.len()].clone();
        let (next, corpus, label) = (next.clone(), corpus.clone(), label.to_owned());
        let end = range.end;
        let start = range.start;
        workers.push(tokio::spawn(async move {
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= end {
                    return Ok::<_, crate::BoxError>(());
                }
                let last = (first + batch).min(end);
                let call = (first - start) / batch;
                let response = client
                    .add_events_to_memory(AddEventsToMemoryRequest {
                        app_name: APP.into(),
                        user_id: user_of(&label, call % users),
                        session_id: format!("s{first}"),
                        events: memory_events(|i| corpus.memory_text(i), first..last),
                        custom_metadata: String::new(),
                    })
                    .await?
                    .into_inner();
                if u64::from(response.entries) != last - first {
                    return Err(format!("ingested {} of {}", response.entries, last - first).into());
                }
            }
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok((range.end - range.start) as f64 / started.elapsed().as_secs_f64())
}

/// The median latency of each query class ([`QueryClass::ALL`]) over [`SEARCHES`] searches
/// of the phase's users, the classes taking turns; the queries are the corpus's from number
/// `first` on (a second round asks others, so that it does not find their blocks cached).
async fn search_p50s(
    server: &Server,
    corpus: &Corpus,
    label: &str,
    users: u64,
    first: u64,
) -> Result<Vec<Duration>> {
    let mut client = memory_clients(server, 1).remove(0);
    let mut took = vec![Vec::new(); QueryClass::ALL.len()];
    for i in first..first + SEARCHES {
        let class = (i % QueryClass::ALL.len() as u64) as usize;
        let request = search_request(
            &user_of(label, i % users),
            corpus.query(QueryClass::ALL[class], i),
        );
        let t = Instant::now();
        client.search_memory(request).await?;
        took[class].push(t.elapsed());
    }
    Ok(took
        .into_iter()
        .map(|mut took| {
            took.sort();
            took[took.len() / 2]
        })
        .collect())
}

/// "rare / mixed / common" p50s in milliseconds, or why they failed.
fn show(p50s: &Result<Vec<Duration>>) -> String {
    match p50s {
        Ok(p50s) => {
            let ms: Vec<String> = (p50s.iter())
                .map(|d| format!("{:.2}", d.as_secs_f64() * 1e3))
                .collect();
            format!("{} ms (rare / mixed / common)", ms.join(" / "))
        }
        Err(e) => format!("failed: {e}"),
    }
}

/// The longest [`settle`] waits.
const SETTLE_AT_MOST: Duration = Duration::from_secs(600);

/// Waits until the server spends under 2 % of a core over a second (the merges an ingestion
/// leaves behind are done), at most [`SETTLE_AT_MOST`]; returns how long it waited. A search
/// right after an ingestion shares the machine with those merges; one after them shows what a
/// store of this size serves.
async fn settle(server: &Server) -> Duration {
    let started = Instant::now();
    let mut used = server.cpu_time();
    while started.elapsed() < SETTLE_AT_MOST {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = server.cpu_time();
        if now.saturating_sub(used) < Duration::from_millis(20) {
            break;
        }
        used = now;
    }
    started.elapsed()
}

fn user_of(label: &str, i: u64) -> String {
    format!("{}-{i}", label.replace(' ', "-"))
}

/// A memory cgroup directory, v1 or v2.
pub(crate) struct Group(pub PathBuf);

impl Group {
    fn read(&self, v1: &str, v2: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(v1))
            .or_else(|_| std::fs::read_to_string(self.0.join(v2)))
            .ok()
    }

    /// The group's memory limit.
    pub fn limit(&self) -> Result<u64> {
        let text = self
            .read("memory.limit_in_bytes", "memory.max")
            .ok_or_else(|| format!("{} is not a memory cgroup", self.0.display()))?;
        match text.trim().parse::<u64>() {
            Ok(bytes) if bytes < 1 << 60 => Ok(bytes),
            _ => Err(format!("{} has no memory limit", self.0.display()).into()),
        }
    }

    /// How many processes of the group the OOM killer killed so far (`oom_kill` of v1's
    /// `memory.oom_control` or v2's `memory.events`; 0 on a kernel that does not count them).
    pub fn oom_kills(&self) -> u64 {
        let text = self
            .read("memory.oom_control", "memory.events")
            .unwrap_or_default();
        (text.lines())
            .filter_map(|line| line.strip_prefix("oom_kill "))
            .find_map(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}
