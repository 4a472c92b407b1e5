//! A bounded soak: both servers under a steady mixed load for minutes (appends, reads, watch
//! streams that come and go, memory ingestion, searches), sampling each server's resident memory
//! and open file descriptors and the p99 of every kind of call per interval, then comparing the
//! first third of the samples after warm-up with the last third. What it looks for is a leak:
//! memory, descriptors or latency that keep growing while the load stays the same.
//!
//! The load is paced (a fixed rate per kind of call), not closed-loop: a soak is about the same
//! work repeated for a long time, and a saturated loop would make every figure depend on what
//! else runs on the machine. A call slower than its period delays the next one of its worker.
//!
//! By default the stores only grow, as they do in use, so resident memory that follows the
//! store (the page table of a store larger than the cache) cannot be told from a leak. A steady
//! soak (`Steady`) deletes as much as it adds once warm: sessions are replaced after a fixed
//! number of appends and memory batches are deleted once enough newer ones exist, so the live
//! data stays the same size and anything that still grows is the server's own.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use adk_proto::session::v1::session_service_client::SessionServiceClient;
use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, AddEventsToMemoryRequest, DeleteMemoryRequest,
        SearchMemoryRequest,
    },
    session::v1::{DeleteSessionRequest, GetSessionRequest, WatchSessionRequest},
};
use hdrhistogram::Histogram;
use tokio::time::MissedTickBehavior;
use tonic::transport::Channel;

use crate::{
    bounded::dir_bytes,
    ctx::Ctx,
    load::{self, loadavg},
    requests::{
        append_request, create_session, memory_clients, memory_events, session_clients,
        template_event,
    },
    server::{rss_kb_of, Server},
    text::{Corpus, QueryClass},
    BoxError, Result, APP,
};

/// What the soak runs.
#[derive(Debug, Clone)]
pub struct Soak {
    pub duration: Duration,
    pub interval: Duration,
    pub warmup: Duration,
    /// AppendEvent calls per second (~1 KB events, state delta in every scope).
    pub appends: u32,
    /// GetSession calls (the 10 most recent events) per second.
    pub reads: u32,
    /// SearchMemory calls per second (mixed queries).
    pub searches: u32,
    /// AddEventsToMemory calls per second, `ingest_batch` events each.
    pub ingests: u32,
    pub ingest_batch: u64,
    /// WatchSession streams open at once; each follows one session for `watch_secs`, then a
    /// new one opens on another session.
    pub watchers: usize,
    pub watch_secs: u64,
    /// Sessions the appends and reads spread over (10 users).
    pub sessions: usize,
    /// `--cache-bytes` of both servers (embedded); none: the servers' own default.
    pub cache_bytes: Option<u64>,
    /// Delete as much as is added (see the module docs); none: the stores grow.
    pub steady: Option<Steady>,
}

/// How a steady soak keeps its live data the same size.
#[derive(Debug, Clone, Copy)]
pub struct Steady {
    /// Appends after which a session is replaced by a new one; the one before the previous is
    /// deleted then.
    pub session_events: u64,
    /// Ingested entries kept: each ingestion deletes the batch that falls out of this window.
    pub memory_entries: u64,
}

/// The sessions appends, reads and watches spread over (10 users). Each slot's session id
/// carries a generation; a steady soak moves a slot to its next generation after
/// `Steady::session_events` appends to it and deletes the generation before the previous one,
/// so readers and watchers, which take the current generation, always find their session.
struct Slots {
    users: Vec<String>,
    appends: Vec<AtomicU64>,
    generations: Vec<AtomicU64>,
}

impl Slots {
    fn new(n: usize) -> Self {
        Self {
            users: (0..n.max(1)).map(|i| format!("u{}", i % 10)).collect(),
            appends: (0..n.max(1)).map(|_| AtomicU64::new(0)).collect(),
            generations: (0..n.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn id(slot: usize, generation: u64) -> String {
        format!("soak{slot}g{generation}")
    }

    /// The user and the current session of slot `n` (modulo the number of slots).
    fn current(&self, n: usize) -> (String, String) {
        let slot = n % self.users.len();
        let generation = self.generations[slot].load(Ordering::Acquire);
        (self.users[slot].clone(), Self::id(slot, generation))
    }

    /// Counts an append to slot `n`; in a steady soak, the generation this append must start
    /// (exactly one append of each turn-over gets it).
    fn count_append(&self, n: usize, steady: Option<Steady>) -> Option<u64> {
        let slot = n % self.users.len();
        let count = self.appends[slot].fetch_add(1, Ordering::Relaxed);
        let every = steady?.session_events.max(1);
        (count > 0 && count.is_multiple_of(every)).then_some(count / every)
    }

    /// Creates generation `generation` of slot `n`, makes it current and deletes the one
    /// before the previous.
    async fn turn_over(
        &self,
        client: &mut SessionServiceClient<Channel>,
        n: usize,
        generation: u64,
    ) -> Result<()> {
        let slot = n % self.users.len();
        let user = &self.users[slot];
        create_session(client, APP, user, &Self::id(slot, generation)).await?;
        self.generations[slot].store(generation, Ordering::Release);
        if generation >= 2 {
            client
                .delete_session(DeleteSessionRequest {
                    app_name: APP.into(),
                    user_id: user.clone(),
                    session_id: Self::id(slot, generation - 2),
                })
                .await?;
        }
        Ok(())
    }
}

/// The kinds of call, in the order of the table's columns.
const KINDS: [&str; 6] = ["append", "get", "search", "ingest", "watch-open", "delete"];
const APPEND: usize = 0;
const GET: usize = 1;
const SEARCH: usize = 2;
const INGEST: usize = 3;
const WATCH_OPEN: usize = 4;
/// A steady soak's turn-overs: a session replaced (create and delete), a memory batch deleted.
const DELETE: usize = 5;

/// Latencies of the current interval, per kind, and the counters of the whole run.
struct Meter {
    hists: Vec<Mutex<Histogram<u64>>>,
    errors: AtomicU64,
    watched_events: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Meter {
    fn new() -> Self {
        Self {
            hists: KINDS.iter().map(|_| Mutex::new(load::new_hist())).collect(),
            errors: AtomicU64::new(0),
            watched_events: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    fn record(&self, kind: usize, started: Instant, outcome: Result<()>) {
        match outcome {
            Ok(()) => {
                if let Ok(mut h) = self.hists[kind].lock() {
                    load::record(&mut h, started.elapsed());
                }
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = Some(format!("{}: {e}", KINDS[kind]));
                }
            }
        }
    }

    /// (calls, p99 in ms) per kind since the last call, and resets.
    fn take(&self) -> Vec<(u64, f64)> {
        self.hists
            .iter()
            .map(|h| match h.lock() {
                Ok(mut h) => {
                    let taken = (h.len(), h.value_at_quantile(0.99) as f64 / 1000.0);
                    h.reset();
                    taken
                }
                Err(_) => (0, 0.0),
            })
            .collect()
    }
}

/// One row of samples.
struct Sample {
    at: Duration,
    /// (RSS in KiB, open descriptors, store bytes on disk) per server.
    servers: Vec<(u64, usize, u64)>,
    calls: Vec<(u64, f64)>,
}

/// Open file descriptors of process `pid` (0 when unreadable).
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

pub async fn soak(ctx: &Ctx, soak: Soak) -> Result<()> {
    let cache: Vec<String> = soak
        .cache_bytes
        .map(|b| vec!["--cache-bytes".into(), b.to_string()])
        .unwrap_or_default();
    let args: Vec<&str> = cache.iter().map(String::as_str).collect();
    let sessions_srv = Server::spawn(ctx, "session-svc", &args).await?;
    let memory_srv = Server::spawn(ctx, "memory-svc", &args).await?;
    let corpus = Arc::new(Corpus::new());
    let template = Arc::new(template_event(&corpus, 7));
    let slots = Arc::new(Slots::new(soak.sessions));
    let sclients = session_clients(&sessions_srv, 4);
    let mclients = memory_clients(&memory_srv, 2);
    let mut setup = sclients[0].clone();
    for slot in 0..slots.users.len() {
        let (user, id) = slots.current(slot);
        create_session(&mut setup, APP, &user, &id).await?;
    }
    // The searched memory starts non-empty, so the first searches do real work too.
    let mut loader = mclients[0].clone();
    for first in (0..5_000u64).step_by(500) {
        loader
            .add_events_to_memory(AddEventsToMemoryRequest {
                app_name: APP.into(),
                user_id: "searcher".into(),
                session_id: format!("seed{first}"),
                events: memory_events(|i| corpus.memory_text(i), first..first + 500),
                custom_metadata: String::new(),
            })
            .await?;
    }

    let meter = Arc::new(Meter::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    // Paced workers: `rate` calls per second over `workers` tasks.
    let paced = |rate: u32, workers: usize| {
        let workers = workers.max(1);
        let period = Duration::from_secs_f64(workers as f64 / f64::from(rate.max(1)));
        (workers, period)
    };
    let ticker = |period: Duration| {
        let mut t = tokio::time::interval(period);
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    };

    let (workers, period) = paced(soak.appends, 4);
    for w in 0..workers {
        let (meter, stop, slots, template) =
            (meter.clone(), stop.clone(), slots.clone(), template.clone());
        let steady = soak.steady;
        let mut client = sclients[w % sclients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = ticker(period);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let n = i as usize * workers + w;
                if let Some(generation) = slots.count_append(n, steady) {
                    let t0 = Instant::now();
                    let outcome = slots.turn_over(&mut client, n, generation).await;
                    meter.record(DELETE, t0, outcome);
                }
                let (user, id) = slots.current(n);
                let request =
                    append_request(&template, &user, &id, w, i * workers as u64 + w as u64);
                let t0 = Instant::now();
                let outcome = client.append_event(request).await.map(|_| ());
                meter.record(APPEND, t0, outcome.map_err(BoxError::from));
                i += 1;
            }
        }));
    }

    let (workers, period) = paced(soak.reads, 2);
    for w in 0..workers {
        let (meter, stop, slots) = (meter.clone(), stop.clone(), slots.clone());
        let mut client = sclients[(w + 1) % sclients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = ticker(period);
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let (user_id, session_id) = slots.current(i * 7919);
                let t0 = Instant::now();
                let outcome = client
                    .get_session(GetSessionRequest {
                        app_name: APP.into(),
                        user_id,
                        session_id,
                        num_recent_events: Some(10),
                        ..Default::default()
                    })
                    .await
                    .map(|_| ());
                meter.record(GET, t0, outcome.map_err(BoxError::from));
                i += 1;
            }
        }));
    }

    let (workers, period) = paced(soak.searches, 2);
    for w in 0..workers {
        let (meter, stop, corpus) = (meter.clone(), stop.clone(), corpus.clone());
        let mut client = mclients[w % mclients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = ticker(period);
            let mut i = w as u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t0 = Instant::now();
                let outcome = client
                    .search_memory(SearchMemoryRequest {
                        app_name: APP.into(),
                        user_id: "searcher".into(),
                        query: corpus.query(QueryClass::Mixed, i),
                        limit: 10,
                        ..Default::default()
                    })
                    .await
                    .map(|_| ());
                meter.record(SEARCH, t0, outcome.map_err(BoxError::from));
                i += workers as u64;
            }
        }));
    }

    {
        let (meter, stop, corpus) = (meter.clone(), stop.clone(), corpus.clone());
        let mut client = mclients[1 % mclients.len()].clone();
        let (_, period) = paced(soak.ingests, 1);
        let batch = soak.ingest_batch.max(1);
        // A steady soak keeps this many batches: each ingestion then deletes the oldest.
        let kept = soak.steady.map(|s| (s.memory_entries / batch).max(1));
        tasks.push(tokio::spawn(async move {
            let mut tick = ticker(period);
            // New entries for ten users in turn: memory grows as it does in use.
            const FIRST: u64 = 1_000_000;
            let user_of = |first: u64| format!("u{}", (first / batch) % 10);
            let mut next = FIRST;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t0 = Instant::now();
                let outcome = client
                    .add_events_to_memory(AddEventsToMemoryRequest {
                        app_name: APP.into(),
                        user_id: user_of(next),
                        session_id: format!("conv{next}"),
                        events: memory_events(|i| corpus.memory_text(i), next..next + batch),
                        custom_metadata: String::new(),
                    })
                    .await
                    .map(|_| ());
                meter.record(INGEST, t0, outcome.map_err(BoxError::from));
                next += batch;
                if let Some(kept) = kept.filter(|&k| next >= FIRST + (k + 1) * batch) {
                    let old = next - (kept + 1) * batch;
                    let t0 = Instant::now();
                    let outcome = client
                        .delete_memory(DeleteMemoryRequest {
                            app_name: APP.into(),
                            user_id: user_of(old),
                            target: Some(Target::SessionId(format!("conv{old}"))),
                        })
                        .await
                        .map(|_| ());
                    meter.record(DELETE, t0, outcome.map_err(BoxError::from));
                }
            }
        }));
    }

    let stride = soak.watchers.max(1);
    for w in 0..soak.watchers {
        let (meter, stop, slots) = (meter.clone(), stop.clone(), slots.clone());
        let mut client = sclients[(w + 2) % sclients.len()].clone();
        let follow = Duration::from_secs(soak.watch_secs.max(1));
        tasks.push(tokio::spawn(async move {
            let mut n = w;
            while !stop.load(Ordering::Relaxed) {
                let (user, id) = slots.current(n * 31);
                let (user, id) = (&user, &id);
                n += stride;
                let t0 = Instant::now();
                // From the current end of the session: a watcher follows live appends.
                let opened = async {
                    let head = client
                        .get_session(GetSessionRequest {
                            app_name: APP.into(),
                            user_id: user.clone(),
                            session_id: id.clone(),
                            num_recent_events: Some(0),
                            ..Default::default()
                        })
                        .await?
                        .into_inner();
                    let stream = client
                        .watch_session(WatchSessionRequest {
                            app_name: APP.into(),
                            user_id: user.clone(),
                            session_id: id.clone(),
                            after_sequence: head.last_sequence,
                            include_partial: false,
                        })
                        .await?
                        .into_inner();
                    Ok::<_, BoxError>(stream)
                }
                .await;
                let mut stream = match opened {
                    Ok(stream) => {
                        meter.record(WATCH_OPEN, t0, Ok(()));
                        stream
                    }
                    Err(e) => {
                        meter.record(WATCH_OPEN, t0, Err(e));
                        tokio::time::sleep(follow).await;
                        continue;
                    }
                };
                let until = tokio::time::Instant::now() + follow;
                loop {
                    match tokio::time::timeout_at(until, stream.message()).await {
                        Ok(Ok(Some(_))) => {
                            meter.watched_events.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Ok(None)) => break,
                        Ok(Err(status)) => {
                            meter.record(WATCH_OPEN, t0, Err(status.into()));
                            break;
                        }
                        // Dropping the stream cancels the watch on the server.
                        Err(_) => break,
                    }
                }
            }
        }));
    }

    println!(
        "# soak: {:?} in intervals of {:?}, warm-up {:?}; per second: {} appends, {} reads, \
         {} searches, {} ingests of {} events; {} watchers re-opened every {} s; {} sessions",
        soak.duration,
        soak.interval,
        soak.warmup,
        soak.appends,
        soak.reads,
        soak.searches,
        soak.ingests,
        soak.ingest_batch,
        soak.watchers,
        soak.watch_secs,
        soak.sessions,
    );
    if let Some(steady) = soak.steady {
        println!(
            "# steady: each session replaced after {} appends, {} ingested entries kept",
            steady.session_events, steady.memory_entries
        );
    }
    println!(
        "# per server: RSS MB / open fds / store MB on disk (embedded; nothing on PostgreSQL); per \
         kind of call: calls in the interval and their p99"
    );
    println!(
        "{:>6}  {:>18}  {:>18}  {}  {:>8}  {:>6}  load",
        "t (s)",
        "session-svc",
        "memory-svc",
        KINDS
            .iter()
            .map(|k| format!("{k:>16}"))
            .collect::<Vec<_>>()
            .join(" "),
        "watched",
        "errors",
    );
    let pids = [sessions_srv.pid, memory_srv.pid];
    let dirs = [sessions_srv.data_dir(), memory_srv.data_dir()];
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut watched_before = 0;
    let mut next = tokio::time::Instant::now() + soak.interval;
    while started.elapsed() < soak.duration {
        tokio::time::sleep_until(next).await;
        next += soak.interval;
        let sample = Sample {
            at: started.elapsed(),
            servers: pids
                .iter()
                .zip(&dirs)
                .map(|(&pid, dir)| (rss_kb_of(pid).0, open_fds(pid), dir_bytes(dir)))
                .collect(),
            calls: meter.take(),
        };
        let watched = meter.watched_events.load(Ordering::Relaxed);
        let server = |(rss, fds, store): (u64, usize, u64)| {
            format!(
                "{:.0} / {fds} / {:.0}",
                rss as f64 / 1024.0,
                store as f64 / 1e6
            )
        };
        println!(
            "{:>6.0}  {:>18}  {:>18}  {}  {:>8}  {:>6}  {}",
            sample.at.as_secs_f64(),
            server(sample.servers[0]),
            server(sample.servers[1]),
            sample
                .calls
                .iter()
                .map(|(n, p99)| format!("{:>16}", format!("{n} p99 {p99:.1}ms")))
                .collect::<Vec<_>>()
                .join(" "),
            watched - watched_before,
            meter.errors.load(Ordering::Relaxed),
            loadavg(),
        );
        watched_before = watched;
        samples.push(sample);
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.abort();
    }
    let peaks: Vec<u64> = pids.iter().map(|&pid| rss_kb_of(pid).1).collect();
    let last_error = meter.last_error.lock().ok().and_then(|e| e.clone());
    sessions_srv.stop().await;
    memory_srv.stop().await;

    let verdict = judge(&samples, soak.warmup, &peaks);
    println!("{verdict}");
    // The RSS verdict is for a person to weigh; a failed call or a steady soak that never turned
    // anything over makes the run itself invalid, so those end it with an error.
    if let Some(e) = last_error {
        let failed = meter.errors.load(Ordering::Relaxed);
        return Err(format!("{failed} calls failed; the last: {e}").into());
    }
    let turned_over: u64 = samples.iter().map(|s| s.calls[DELETE].0).sum();
    if soak.steady.is_some() && turned_over == 0 {
        return Err(
            "the steady soak deleted nothing, so its live data was not held constant: \
                    run longer (--secs) or turn over sooner (--sessions, --session-events)"
                .into(),
        );
    }
    Ok(())
}

/// Compares the samples after warm-up: the median RSS and the median p99 of each kind in the
/// first third against the last third, and open descriptors first against last.
fn judge(samples: &[Sample], warmup: Duration, peaks: &[u64]) -> String {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at >= warmup).collect();
    let (Some(first), Some(last)) = (after.first(), after.last()) else {
        return "# too short: no sample after warm-up".into();
    };
    let mut out = vec![format!(
        "# after warm-up ({} samples, t = {:.0}..{:.0} s):",
        after.len(),
        first.at.as_secs_f64(),
        last.at.as_secs_f64()
    )];
    let mut grew = Vec::new();
    // Resident memory is judged on the medians of the first and the last third: a single
    // sample can fall on a burst (a steady soak's turn-overs), a trend cannot.
    let third = (after.len() / 3).max(1);
    let (early, late) = (&after[..third], &after[after.len() - third..]);
    let median_rss = |part: &[&Sample], i: usize| {
        let mut v: Vec<u64> = part.iter().map(|s| s.servers[i].0).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    for (i, name) in ["session-svc", "memory-svc"].iter().enumerate() {
        let (rss0, fds0, store0) = first.servers[i];
        let (rss1, fds1, store1) = last.servers[i];
        let max_rss = after.iter().map(|s| s.servers[i].0).max().unwrap_or(0);
        let max_fds = after.iter().map(|s| s.servers[i].1).max().unwrap_or(0);
        let (med0, med1) = (median_rss(early, i), median_rss(late, i));
        let change = (med1 as f64 - med0 as f64) / (med0.max(1) as f64) * 100.0;
        let mb = |kb: u64| kb as f64 / 1024.0;
        out.push(format!(
            "#   {name}: RSS median {:.0} -> {:.0} MB ({change:+.0}%; first {:.0}, last {:.0}, \
             max {:.0} MB, peak VmHWM {:.0} MB); open fds {fds0} -> {fds1} (max {max_fds}); \
             store {:.0} -> {:.0} MB on disk",
            mb(med0),
            mb(med1),
            mb(rss0),
            mb(rss1),
            mb(max_rss),
            mb(peaks[i]),
            store0 as f64 / 1e6,
            store1 as f64 / 1e6,
        ));
        if change > 10.0 {
            grew.push(format!("{name} RSS {change:+.0}%"));
        }
        if fds1 > fds0 + 2 {
            grew.push(format!("{name} fds {fds0} -> {fds1}"));
        }
    }
    let median = |part: &[&Sample], kind: usize| {
        // Intervals without a call of this kind have no p99.
        let mut v: Vec<f64> = part
            .iter()
            .filter(|s| s.calls[kind].0 > 0)
            .map(|s| s.calls[kind].1)
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let trends: Vec<String> = KINDS
        .iter()
        .enumerate()
        .map(|(k, name)| {
            format!(
                "{name} {:.1} -> {:.1} ms",
                median(early, k),
                median(late, k)
            )
        })
        .collect();
    out.push(format!(
        "#   p99, median of the first third -> of the last third: {}",
        trends.join(", ")
    ));
    out.push(if grew.is_empty() {
        "# verdict: no growth after warm-up (median RSS within 10%, open fds within 2)".into()
    } else {
        format!("# verdict: GROWTH after warm-up: {}", grew.join(", "))
    });
    out.join("\n")
}
