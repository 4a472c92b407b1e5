//! `adk-bench`: load generator for session-svc and memory-svc.
//!
//! Spawns the release servers itself (`--listen 127.0.0.1:0`, a temporary data directory each),
//! drives them over loopback with the project's own gRPC client types, and prints throughput,
//! latency percentiles and the servers' resident memory. Every scenario is bounded in time and
//! size; `--quick` shrinks everything to a few seconds for CI smoke runs. See BENCHMARKS.md.
//!
//! The load generator runs on the same machine as the servers and competes with them for CPU:
//! numbers are for "client and server on one box", which is the pessimistic case.
//!
//! This file reads the flags ([`flags`]) and runs the scenario they name. Each scenario lives in
//! a module of its own: [`appends`] (`append`, `append-stream`), [`reads`] (`get`, `recent`,
//! `list`), [`ingest`], [`search`], [`filters`] (`filtered-search`), [`contention`]
//! (`search-under-ingest`), [`idle`], [`mcp`], [`bounded`], [`limit`] (`memory-limit`), [`soak`]
//! and [`recall`]; what they share is in [`ctx`] (the global settings), [`requests`]
//! (connections and requests), [`server`] (the spawned servers), [`load`] (the closed-loop
//! driver and the report) and [`text`] (the synthetic text).

mod appends;
mod bounded;
mod contention;
mod ctx;
mod filters;
mod flags;
mod idle;
mod ingest;
mod limit;
mod load;
mod mcp;
mod reads;
mod recall;
mod requests;
mod search;
mod server;
mod soak;
mod text;

use std::time::Duration;

use clap::Parser;

use crate::{
    ctx::Ctx,
    flags::{Cli, Scenario},
    load::Report,
};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, BoxError>;

/// The app every session and memory of a run belongs to.
const APP: &str = "bench";

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = rt.block_on(async {
        let ctx = Ctx::new(&cli)?;
        let outcome = run(cli, &ctx).await;
        server::drop_schemas(&ctx).await;
        outcome
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("adk-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli, ctx: &Ctx) -> Result<()> {
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
    load::print_load("start");
    let q = ctx.quick;
    match cli.scenario {
        Scenario::All => all(ctx, &mut report).await?,
        Scenario::Append { concurrency } => appends::append(ctx, &mut report, &concurrency).await?,
        Scenario::AppendStream {
            concurrency,
            window,
        } => appends::append_stream(ctx, &mut report, &concurrency, &window).await?,
        Scenario::Get {
            events,
            concurrency,
        } => reads::get(ctx, &mut report, &ctx.shrink(events, 1000), concurrency).await?,
        Scenario::Recent {
            events,
            concurrency,
        } => reads::recent(ctx, &mut report, &ctx.shrink(events, 5000), concurrency).await?,
        Scenario::List {
            sessions,
            concurrency,
        } => reads::list(ctx, &mut report, &ctx.shrink(sessions, 5000), concurrency).await?,
        Scenario::Search {
            entries,
            batch,
            load_concurrency,
            load_sync,
            concurrency,
            embedder,
        } => {
            search::search(
                ctx,
                &mut report,
                &ctx.shrink(entries, 10_000),
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
            ingest::ingest(
                ctx,
                &mut report,
                turns,
                if q { entries.min(500) } else { entries },
                batch,
                load_concurrency,
                embedder.as_deref(),
            )
            .await?
        }
        Scenario::FilteredSearch {
            entries,
            concurrency,
        } => {
            filters::filtered_search(
                ctx,
                &mut report,
                ctx.shrink(vec![entries], 10_000)[0],
                concurrency,
            )
            .await?
        }
        Scenario::SearchUnderIngest {
            entries,
            ingesters,
            batch,
        } => {
            let entries = ctx.shrink(vec![entries], 2000)[0];
            contention::search_under_ingest(ctx, &mut report, entries, ingesters, batch).await?
        }
        Scenario::Idle => idle::idle(ctx, &mut report).await?,
        Scenario::Mcp { entries, clients } => {
            let entries = ctx.shrink(vec![entries], 2000)[0];
            mcp::mcp(ctx, &mut report, entries, clients).await?
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
            let entries = ctx.shrink(vec![entries], 20_000)[0];
            limit::memory_limit(
                ctx,
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
            max_rss_percent,
        } => {
            let (sessions, events, load_secs) = if q {
                (sessions.min(20), events.min(200), load_secs.min(3))
            } else {
                (sessions, events, load_secs)
            };
            bounded::bounded(
                ctx,
                bounded::Bounded {
                    sessions,
                    events,
                    cache_bytes,
                    cgroup,
                    load_secs,
                    concurrency,
                    max_rss_percent,
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
                ctx,
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
            load::print_load("end");
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
            recall::run(ctx, &opts).await?;
            load::print_load("end");
            return Ok(());
        }
    }
    load::print_load("end");
    report.print_table();
    Ok(())
}

/// `all`: every scenario that is part of it, with its defaults.
async fn all(ctx: &Ctx, report: &mut Report) -> Result<()> {
    let q = ctx.quick;
    idle::idle(ctx, report).await?;
    appends::append(ctx, report, &[1, 16, 64]).await?;
    appends::append_stream(ctx, report, &[1, 16, 64], &[1, 32]).await?;
    reads::get(ctx, report, &[100, 1000], 1).await?;
    reads::recent(
        ctx,
        report,
        &if q {
            vec![100, 5000]
        } else {
            vec![100, 100_000]
        },
        1,
    )
    .await?;
    reads::list(
        ctx,
        report,
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
    search::search(ctx, report, &sizes, 1000, 2, "sync", 1, None).await?;
    Ok(())
}
