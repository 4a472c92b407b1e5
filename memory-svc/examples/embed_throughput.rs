//! Embeddings per second of a local model on short conversation turns, in calls of 100 texts
//! (as ingestion would make them), then the latency of one-text calls (as a search embeds its
//! query). The turns are those of the recall corpus (`bench/recall/corpus.jsonl`); the model
//! runs with the threads memory-svc gives it. See BENCHMARKS.md, "Embedding model".
//!
//! ```text
//! cargo run --release -p memory-svc --example embed_throughput -- MODEL_DIR [CALLS]
//! ```

use std::{path::PathBuf, time::Instant};

use memory_svc::embed::{Embedder, EmbedderOptions, EmbedderSpec};
use serde_json::Value;

const CORPUS: &str = include_str!("../../bench/recall/corpus.jsonl");
const PER_CALL: usize = 100;

/// One-text calls measured for the latency.
const QUERIES: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    memory_svc::embed::local::configure_threads();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: embed_throughput MODEL_DIR [CALLS]")?,
    );
    let calls: usize = args.next().map_or(Ok(20), |n| n.parse())?;

    let mut turns = Vec::new();
    for line in CORPUS.lines() {
        let record: Value = serde_json::from_str(line)?;
        for event in record["events"].as_array().into_iter().flatten() {
            if let Some(text) = event["text"].as_str() {
                turns.push(text.to_owned());
            }
        }
    }
    let words: usize = turns.iter().map(|t| t.split_whitespace().count()).sum();
    println!(
        "{} turns, {:.1} words each on average",
        turns.len(),
        words as f64 / turns.len() as f64
    );

    let started = Instant::now();
    let options = EmbedderOptions {
        spec: EmbedderSpec::Local(dir),
        ..Default::default()
    };
    let embedder = Embedder::open(options).await?.ok_or("no model")?;
    println!(
        "loaded {} in {:.2} s",
        embedder.identity(),
        started.elapsed().as_secs_f64()
    );

    if turns.is_empty() {
        return Err("no turns in the corpus".into());
    }
    let mut stream = turns.iter().cycle().cloned();
    let mut next_call = || (&mut stream).take(PER_CALL).collect::<Vec<_>>();
    // One call to warm up (allocations, thread pools), not measured.
    embedder.embed(next_call()).await?;
    let started = Instant::now();
    let mut embedded = 0;
    for _ in 0..calls {
        embedded += embedder.embed(next_call()).await?.len();
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{embedded} embeddings in {seconds:.2} s: {:.0} embeddings/s ({:.1} ms per call of {PER_CALL})",
        embedded as f64 / seconds,
        seconds * 1000.0 / calls as f64
    );

    let mut latencies = Vec::with_capacity(QUERIES);
    for text in turns.iter().rev().take(QUERIES) {
        let started = Instant::now();
        embedder.embed(vec![text.clone()]).await?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "{} one-text calls: p50 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        at(0.5),
        at(0.99)
    );
    Ok(())
}
