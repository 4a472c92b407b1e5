//! The vectors a local model gives texts: each line of stdin is one text as a JSON string, each
//! line of stdout its vector as a JSON array, in the same order. For trying ranking ideas on
//! real vectors outside the service (`bench/recall/semantic_variants.py`); the texts are
//! embedded in calls of 100, as memory-svc's ingestion would.
//!
//! ```text
//! cargo build --release -p memory-svc --example embed_texts
//! target/release/examples/embed_texts MODEL_DIR < texts.jsonl > vectors.jsonl
//! ```

use std::{
    io::{BufRead, BufWriter, Write},
    path::PathBuf,
};

use memory_svc::embed::{Embedder, EmbedderOptions, EmbedderSpec};

const PER_CALL: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    memory_svc::embed::local::configure_threads();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: embed_texts MODEL_DIR < texts.jsonl")?,
    );
    let mut texts = Vec::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let text: String = serde_json::from_str(&line?)
            .map_err(|e| format!("line {}: not a JSON string: {e}", n + 1))?;
        texts.push(text);
    }
    let options = EmbedderOptions {
        spec: EmbedderSpec::Local(dir),
        ..Default::default()
    };
    let embedder = Embedder::open(options).await?.ok_or("no model")?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for call in texts.chunks(PER_CALL) {
        for vector in embedder.embed(call.to_vec()).await? {
            serde_json::to_writer(&mut out, &vector)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(())
}
