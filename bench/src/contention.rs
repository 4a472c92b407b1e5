//! Whether ingestion starves the RPCs beside it: SearchMemory and health-check latency on a
//! memory-svc that is quiet, then while clients ingest at full speed.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use adk_proto::memory::v1::{AddEventsToMemoryRequest, SearchMemoryRequest};
use tonic::transport::Channel;
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

use crate::{
    ctx::Ctx,
    load::{drive, Report, Row},
    requests::{memory_clients, memory_events},
    server::Server,
    text::{Corpus, QueryClass},
    BoxError, Result, APP,
};

/// The searched user.
const SEARCHER: &str = "searcher";

/// Loads `entries` into the searcher's memory, measures searches (mixed queries) and health
/// checks at concurrency 1, starts `ingesters` clients that each add batches of `batch` events
/// to their own user's memory in a closed loop, and measures both again.
pub async fn search_under_ingest(
    ctx: &Ctx,
    report: &mut Report,
    entries: u64,
    ingesters: usize,
    batch: usize,
) -> Result<()> {
    let corpus = Arc::new(Corpus::new());
    let dir = tempfile::Builder::new()
        .prefix("adk-bench-contention")
        .tempdir()?;
    let srv = Server::spawn_in(ctx, "memory-svc", &[], dir.path()).await?;
    let mut loader = memory_clients(&srv, 1).remove(0);
    for first in (0..entries).step_by(1000) {
        let events = memory_events(
            |i| corpus.memory_text(i),
            first..(first + 1000).min(entries),
        );
        loader
            .add_events_to_memory(AddEventsToMemoryRequest {
                app_name: APP.into(),
                user_id: SEARCHER.into(),
                session_id: format!("conv{}", first / 1000),
                events,
                custom_metadata: String::new(),
            })
            .await?;
    }
    let health = HealthClient::new(
        Channel::from_shared(format!("http://{}", srv.addr))?
            .tcp_nodelay(true)
            .connect_lazy(),
    );

    measure(ctx, report, &srv, &corpus, health.clone(), entries, "quiet").await?;

    let stop = Arc::new(AtomicBool::new(false));
    let ingested = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (w, mut client) in memory_clients(&srv, ingesters).into_iter().enumerate() {
        let (stop, ingested, corpus) = (stop.clone(), ingested.clone(), corpus.clone());
        tasks.push(tokio::spawn(async move {
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let events = memory_events(|i| corpus.memory_text(i), next..next + batch as u64);
                client
                    .add_events_to_memory(AddEventsToMemoryRequest {
                        app_name: APP.into(),
                        user_id: format!("ingester{w}"),
                        session_id: format!("conv{next}"),
                        events,
                        custom_metadata: String::new(),
                    })
                    .await?;
                next += batch as u64;
                ingested.fetch_add(batch as u64, Ordering::Relaxed);
            }
            Ok::<_, BoxError>(())
        }));
    }
    let label = format!("{ingesters} clients ingesting");
    measure(ctx, report, &srv, &corpus, health, entries, &label).await?;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let n = ingested.load(Ordering::Relaxed);
    println!(
        "AddEventsToMemory meanwhile: {n} entries in {secs:.1} s ({:.0} entries/s, batch {batch}, c={ingesters})",
        n as f64 / secs
    );
    srv.stop().await;
    Ok(())
}

/// One row of searches and one of health checks, labelled with `during`.
async fn measure(
    ctx: &Ctx,
    report: &mut Report,
    srv: &Server,
    corpus: &Arc<Corpus>,
    health: HealthClient<Channel>,
    entries: u64,
    during: &str,
) -> Result<()> {
    let client = memory_clients(srv, 1).remove(0);
    let (corpus, counter) = (corpus.clone(), Arc::new(AtomicU64::new(0)));
    let label = format!("SearchMemory mixed among {entries} entries, {during}");
    let row: Row = drive(ctx, &label, 1, srv, move |_| {
        let mut client = client.clone();
        let query = corpus.query(QueryClass::Mixed, counter.fetch_add(1, Ordering::Relaxed));
        async move {
            client
                .search_memory(SearchMemoryRequest {
                    app_name: APP.into(),
                    user_id: SEARCHER.into(),
                    query,
                    limit: 10,
                    ..Default::default()
                })
                .await?;
            Ok(())
        }
    })
    .await?;
    report.push(row);
    let label = format!("Health check, {during}");
    let row = drive(ctx, &label, 1, srv, move |_| {
        let mut health = health.clone();
        async move {
            health.check(HealthCheckRequest::default()).await?;
            Ok(())
        }
    })
    .await?;
    report.push(row);
    Ok(())
}
