//! `search`: SearchMemory latency over one user's memory as it grows, per kind of query, and
//! right after a write to that memory; the loads between the sizes are measured too.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use adk_proto::{
    memory::v1::{AddMemoryRequest, MemoryEntry},
    session::v1::{part, Content, Part},
};

use crate::{
    ctx::Ctx,
    ingest::{load_memory, Texts},
    load::{drive, Report, Row},
    requests::{conns_for, memory_clients, search_request},
    server::Server,
    text::{self, Corpus},
    Result, APP,
};

/// Loads the memory up to each size of `sizes` (`batch` events per call from `load_concurrency`
/// clients, with `--sync load_sync`), then times searches at concurrency `c` on a durable
/// server (`--embedder embedder`, if given).
#[allow(clippy::too_many_arguments)]
pub async fn search(
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
