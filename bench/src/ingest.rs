//! Loading memory-svc: [`load_memory`], the AddEventsToMemory load every memory scenario seeds
//! with, and the `ingest` scenario, the ingestion rate of real conversation turns.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use adk_proto::memory::v1::AddEventsToMemoryRequest;

use crate::{
    ctx::Ctx,
    load::{self, Report, Row},
    requests::{memory_clients, memory_events, search_request},
    server::Server,
    BoxError, Result, APP,
};

/// The text of memory entry `i` while loading.
pub type Texts = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// Loads entries `range` into `user`'s memory: AddEventsToMemory calls of `batch` events (one
/// session per call) from `concurrency` clients, then one search (see below). Returns the
/// calls' latencies.
pub async fn load_memory(
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
pub async fn ingest(
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
