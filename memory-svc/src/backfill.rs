//! Embedding, in the background after start, the entries stored without a vector of the
//! configured model: those written without a model, or under another one (whose vectors the
//! store dropped at start, see `MemoryStore::use_model`). Entries written from then on come
//! with their vectors, so one pass over the store finds every entry left.
//!
//! Searches run meanwhile and use the vectors that are ready. Progress goes to the log and to
//! the counter `memory_backfilled_entries_total`; a model failure (an endpoint down) is
//! retried after a pause that doubles up to a minute, never skipping an entry.

use std::time::Duration;

use metrics::counter;

use crate::{embed::Embedder, store::MemoryStore};

/// Entries embedded per model call (and per store transaction).
const BATCH: usize = 64;

/// The first pause after a failure; doubled after each one, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Embeds every entry without a vector; returns the number of vectors stored.
pub async fn run<S: MemoryStore>(store: &S, embedder: &Embedder) -> u64 {
    let mut after = None;
    let (mut stored, mut pause) = (0u64, FIRST_PAUSE);
    loop {
        let batch = match store.unembedded(after.as_ref(), BATCH).await {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, ?pause, "cannot read entries to embed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
        };
        let Some(last) = batch.last().cloned() else {
            break;
        };
        let texts = batch.iter().map(|u| u.text.clone()).collect();
        let vectors = match embedder.embed(texts).await {
            Ok(vectors) => vectors,
            Err(e) => {
                tracing::warn!(error = %e, ?pause, "cannot embed stored entries; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
        };
        match store
            .put_vectors(batch.into_iter().zip(vectors).collect())
            .await
        {
            Ok(n) => {
                stored += n as u64;
                counter!("memory_backfilled_entries_total").increment(n as u64);
                tracing::info!(stored, "embedded entries stored without a vector");
                after = Some(last);
                pause = FIRST_PAUSE;
            }
            Err(e) => {
                tracing::warn!(error = %e, ?pause, "cannot store vectors; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
    if stored > 0 {
        tracing::info!(stored, "every entry has its vector");
    }
    stored
}
