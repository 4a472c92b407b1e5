//! `bounded`: session-svc's memory over a store several times larger than its sled cache.
//!
//! Seeds `sessions` sessions of `events` ~1 KB events each, then runs a mixed load for
//! `load_secs`: half appends, the rest GetSession (10 most recent) and ListEvents pages at
//! random positions, all on sessions picked at random, so reads keep missing the cache and
//! evicting. The server's RSS is sampled every second; the run prints it over time and its peak
//! (`VmHWM`). With `--cgroup DIR` the server starts inside that cgroup (made by the caller, with
//! its memory limit), so that without `--cache-bytes` it sizes its cache from the limit; the
//! group's own peak usage and limit hits are printed too, and with `--max-rss-percent` the run
//! fails if the kernel's OOM killer killed the server or its peak RSS passed that share of the
//! limit (as `memory-limit` judges memory-svc).

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use adk_proto::session::v1::{GetSessionRequest, ListEventsRequest};

use crate::{
    appends::stream_appends,
    ctx::Ctx,
    limit::{judge, Group},
    load::drive,
    requests::{append_request, create_session, session_clients, template_event},
    server::Server,
    text::Corpus,
    Result, APP,
};

/// What the `bounded` scenario runs.
pub struct Bounded {
    pub sessions: u64,
    pub events: u64,
    pub cache_bytes: Option<u64>,
    pub cgroup: Option<PathBuf>,
    pub load_secs: u64,
    pub concurrency: usize,
    pub max_rss_percent: Option<u64>,
}

fn user_of(session: u64) -> String {
    format!("u{}", session % 16)
}

fn session_of(session: u64) -> String {
    format!("b{session}")
}

/// A cheap per-worker random sequence (xorshift64*): which session, which page.
struct Picker(u64);

impl Picker {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
    }
}

pub async fn bounded(ctx: &Ctx, run: Bounded) -> Result<()> {
    let cache = run.cache_bytes.map(|b| b.to_string());
    let mut args = vec!["--sync", ctx.seed_sync.as_str()];
    if let Some(bytes) = &cache {
        args.extend(["--cache-bytes", bytes]);
    }
    let group = run.cgroup.clone().map(Group);
    let kills_before = group.as_ref().map_or(0, Group::oom_kills);
    let server = Server::spawn_in_cgroup(ctx, "session-svc", &args, run.cgroup.as_deref()).await?;
    let sampler = Sampler::start(&server, run.cgroup.clone());
    let clients = Arc::new(session_clients(&server, 8));
    let corpus = Corpus::new();
    let template = template_event(&corpus, 7);

    // Seed: `concurrency` workers, each a pipelined stream per session.
    let t = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut seeders = Vec::new();
    for w in 0..run.concurrency.max(1) {
        let (clients, next, template) = (clients.clone(), next.clone(), template.clone());
        let (sessions, events) = (run.sessions, run.events);
        seeders.push(tokio::spawn(async move {
            let mut client = clients[w % clients.len()].clone();
            loop {
                let s = next.fetch_add(1, Ordering::Relaxed);
                if s >= sessions {
                    return Ok::<_, crate::BoxError>(());
                }
                let (user, session) = (user_of(s), session_of(s));
                create_session(&mut client, APP, &user, &session).await?;
                let done = stream_appends(
                    &mut client,
                    &template,
                    &user,
                    &session,
                    0,
                    events,
                    64,
                    None,
                    |_| {},
                )
                .await?;
                if done != events {
                    return Err(format!("seeded {done} of {events} events").into());
                }
            }
        }));
    }
    let mut seeded = Ok(());
    for s in seeders {
        seeded = seeded.and(s.await?);
    }
    // A server the OOM killer killed fails the calls: the verdict names the kill.
    let verdict = Verdict {
        group: group.as_ref(),
        kills_before,
        max_rss_percent: run.max_rss_percent,
    };
    if let Err(e) = seeded {
        verdict.stop(server).await?;
        return Err(e);
    }
    let seeded = run.sessions * run.events;
    println!(
        "  seeded {seeded} events in {} sessions in {:.0}s ({:.0} events/s); {}",
        run.sessions,
        t.elapsed().as_secs_f64(),
        seeded as f64 / t.elapsed().as_secs_f64(),
        sampler.line(&server)
    );

    // Mixed load.
    let lengths: Arc<Vec<AtomicU64>> = Arc::new(
        (0..run.sessions)
            .map(|_| AtomicU64::new(run.events))
            .collect(),
    );
    let load_ctx = Ctx {
        duration: Duration::from_secs(run.load_secs),
        warmup: Duration::ZERO,
        max_ops: u64::MAX,
        ..ctx.clone()
    };
    let label = format!(
        "mixed 50% AppendEvent / 30% GetSession recent 10 / 20% ListEvents, c={}, {} sessions",
        run.concurrency, run.sessions
    );
    let pickers: Arc<Vec<std::sync::Mutex<Picker>>> = Arc::new(
        (0..run.concurrency)
            .map(|w| std::sync::Mutex::new(Picker(0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1))))
            .collect(),
    );
    let sessions = run.sessions;
    let row = drive(&load_ctx, &label, run.concurrency, &server, move |w| {
        let mut client = clients[w % clients.len()].clone();
        let (kind, s, position) = {
            let mut picker = pickers[w].lock().unwrap_or_else(|e| e.into_inner());
            (
                picker.next(10),
                picker.next(sessions),
                picker.next(u64::MAX),
            )
        };
        let (lengths, template) = (lengths.clone(), template.clone());
        async move {
            let (user, session) = (user_of(s), session_of(s));
            match kind {
                0..=4 => {
                    let i = lengths[s as usize].fetch_add(1, Ordering::Relaxed);
                    client
                        .append_event(append_request(&template, &user, &session, w, i))
                        .await?;
                }
                5..=7 => {
                    client
                        .get_session(GetSessionRequest {
                            app_name: APP.into(),
                            user_id: user,
                            session_id: session,
                            num_recent_events: Some(10),
                            after_timestamp: None,
                            ..Default::default()
                        })
                        .await?;
                }
                _ => {
                    let len = lengths[s as usize].load(Ordering::Relaxed);
                    client
                        .list_events(ListEventsRequest {
                            app_name: APP.into(),
                            user_id: user,
                            session_id: session,
                            after_sequence: position % len.max(1),
                            page_size: 50,
                            page_token: String::new(),
                            ..Default::default()
                        })
                        .await?;
                }
            }
            Ok(())
        }
    })
    .await;
    let row = match row {
        Ok(row) => row,
        Err(e) => {
            verdict.stop(server).await?;
            return Err(e);
        }
    };
    let summary = sampler.stop().await;
    println!("  after the load: {}", summary);
    println!(
        "  => peak RSS {:.1} MB with --cache-bytes {} over a {:.0} MB store ({} ops in {:.0}s)",
        row.hwm_kb as f64 / 1024.0,
        cache.as_deref().unwrap_or("(not given)"),
        dir_bytes(&server.data_dir()) as f64 / 1e6,
        row.ops,
        row.secs
    );
    verdict.stop(server).await
}

/// What a run in a cgroup is judged against (see [`judge`]).
struct Verdict<'a> {
    group: Option<&'a Group>,
    kills_before: u64,
    max_rss_percent: Option<u64>,
}

impl Verdict<'_> {
    /// Stops `server`, then judges its peak RSS and whether it was killed.
    async fn stop(&self, server: Server) -> Result<()> {
        let peak = server.rss_kb().1 * 1024;
        server.stop().await;
        match (self.group, self.max_rss_percent) {
            (Some(group), Some(percent)) => {
                judge("session-svc", group, self.kills_before, peak, percent)
            }
            _ => Ok(()),
        }
    }
}

/// Samples the server's RSS every second and prints it every 15 s.
struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    cgroup: Option<PathBuf>,
}

impl Sampler {
    fn start(server: &Server, cgroup: Option<PathBuf>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (pid, dir, group) = (server.pid, server.data_dir(), cgroup.clone());
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            let mut n = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                ticks.tick().await;
                n += 1;
                if n.is_multiple_of(15) {
                    println!(
                        "  t={:>4.0}s {}",
                        start.elapsed().as_secs_f64(),
                        describe(pid, &dir, group.as_deref())
                    );
                }
            }
        });
        Self { stop, task, cgroup }
    }

    fn line(&self, server: &Server) -> String {
        describe(server.pid, &server.data_dir(), self.cgroup.as_deref())
    }

    async fn stop(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        match &self.cgroup {
            Some(group) => format!(
                "cgroup {}: limit {:.1} MB, peak usage {:.1} MB, limit hits {}",
                group.display(),
                read_u64(&group.join("memory.limit_in_bytes")) as f64 / 1048576.0,
                read_u64(&group.join("memory.max_usage_in_bytes")) as f64 / 1048576.0,
                read_u64(&group.join("memory.failcnt")),
            ),
            None => "no cgroup".into(),
        }
    }
}

fn describe(pid: u32, dir: &Path, cgroup: Option<&Path>) -> String {
    let (rss, hwm) = crate::server::rss_kb_of(pid);
    let mut line = format!(
        "RSS {:.1} MB, peak {:.1} MB, store {:.0} MB on disk",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        dir_bytes(dir) as f64 / 1e6
    );
    if let Some(group) = cgroup {
        line.push_str(&format!(
            ", cgroup usage {:.1} MB",
            read_u64(&group.join("memory.usage_in_bytes")) as f64 / 1048576.0
        ));
    }
    line
}

fn read_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes of the files under `dir`.
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
