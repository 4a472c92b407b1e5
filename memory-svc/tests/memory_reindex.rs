//! Re-indexing when the analysis changes: a store opened with another `--default-language`
//! than it was indexed with is indexed again before serving (searches then find what the new
//! language finds, and `memory_reindexed_entries_total` counts the entries), and a store
//! opened again unchanged is not. On sled, or on PostgreSQL when `ADK_TEST_POSTGRES` is set.
//!
//! One test in its own binary: the counter is process-wide, so nothing else may re-index here.

use adk_common::postgres::StoreLocation;
use adk_proto::memory::v1::{AddMemoryRequest, MemoryEntry};
use adk_tests::{
    fresh_schema, postgres_url, sample, scrape, search_request, text_memory, MemoryServer,
};
use memory_svc::config::DefaultLanguage;
use tempfile::TempDir;

/// An endpoint where nothing listens: no session is fetched by reference here.
const NO_SESSION_SVC: &str = "http://127.0.0.1:9";

/// A server on `store` whose default language is `language`, with `/metrics` served.
async fn server(store: &StoreLocation, language: &str) -> MemoryServer {
    let language = DefaultLanguage(Some(language.parse().expect("a known language")));
    MemoryServer::start_on_with(NO_SESSION_SVC, store.clone(), |config| {
        config.default_language = language;
        config.serve.metrics_listen = Some(([127, 0, 0, 1], 0).into());
    })
    .await
}

/// The entries re-indexed in this process so far.
async fn reindexed(srv: &MemoryServer) -> f64 {
    let body = scrape(srv.metrics_addr().expect("metrics are served")).await;
    sample(&body, "memory_reindexed_entries_total", &[]).unwrap_or(0.0)
}

/// The ids a search for "Häuser" finds.
async fn houses(srv: &MemoryServer) -> Vec<String> {
    let found = srv
        .client
        .clone()
        .search_memory(search_request("app", "lena", "Häuser"))
        .await
        .unwrap();
    found
        .into_inner()
        .memories
        .into_iter()
        .map(|m| m.id)
        .collect()
}

fn memory(id: &str, text: &str) -> MemoryEntry {
    text_memory(id, "Lena", text)
}

#[tokio::test]
async fn a_changed_default_language_reindexes_the_store_once() {
    let dir = TempDir::new().unwrap();
    let store = match postgres_url() {
        Some(url) => StoreLocation::Postgres(fresh_schema(&url).await),
        None => StoreLocation::Embedded(dir.path().join("memory")),
    };
    let srv = server(&store, "en").await;
    // Too short for language detection to tell: analysed in the default language.
    let turns = [
        memory(
            "haus",
            "Wir haben letztes Jahr ein altes Haus am See gekauft",
        ),
        memory("dinner", "I cooked dinner for my parents"),
    ];
    let request = AddMemoryRequest {
        app_name: "app".into(),
        user_id: "lena".into(),
        memories: turns.to_vec(),
        ..AddMemoryRequest::default()
    };
    srv.client.clone().add_memory(request).await.unwrap();
    // English Snowball leaves "häuser" as it is: no entry has that word.
    assert!(houses(&srv).await.is_empty());
    let before = reindexed(&srv).await;
    srv.shutdown().await;

    // Indexed again in German, where "Häuser" and "Haus" share a stem.
    let srv = server(&store, "de").await;
    assert_eq!(houses(&srv).await, ["haus"]);
    let after = reindexed(&srv).await;
    assert_eq!(after - before, 2.0, "{before} -> {after}");
    srv.shutdown().await;

    // Opened again with the same analysis: nothing to do.
    let srv = server(&store, "de").await;
    assert_eq!(houses(&srv).await, ["haus"]);
    assert_eq!(reindexed(&srv).await, after);
    srv.shutdown().await;
}
