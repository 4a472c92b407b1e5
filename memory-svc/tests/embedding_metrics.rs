//! memory-svc's embedding metrics, counted exactly. The metrics recorder belongs to the
//! process, so this binary holds one test and runs one server: every call it counts is that
//! server's.
//!
//! A local HTTP server stands in for an OpenAI-compatible endpoint (every text gets the same
//! unit vector).

use adk_common::postgres::StoreLocation;
use adk_proto::memory::v1::{AddMemoryRequest, SearchMemoryRequest, SearchMode};
use adk_tests::{sample, scrape, text_memory, MemoryServer};
use axum::{routing::post, Json, Router};
use serde_json::{json, Value};

async fn embeddings(Json(body): Json<Value>) -> Json<Value> {
    let inputs = body["input"].as_array().map_or(0, Vec::len);
    let data: Vec<Value> = (0..inputs)
        .map(|index| json!({"index": index, "embedding": [1.0, 0.0, 0.0]}))
        .collect();
    Json(json!({"data": data}))
}

#[tokio::test]
async fn each_call_to_the_model_is_counted_with_its_texts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = Router::new().route("/v1/embeddings", post(embeddings));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let server = MemoryServer::start_with("http://127.0.0.1:1", move |config| {
        config.store = Some(StoreLocation::Embedded(dir.path().join("sled")));
        config.embedder = format!("openai:{url}").parse().unwrap();
        config.embedder_model = Some("unit".into());
        config.serve.metrics_listen = Some(([127, 0, 0, 1], 0).into());
    })
    .await;
    let mut client = server.client.clone();
    client
        .add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: ["one", "two", "three"]
                .map(|text| text_memory("", "", text))
                .to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    // The second search finds the query's embedding in the cache: no call.
    for _ in 0..2 {
        client
            .search_memory(SearchMemoryRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                query: "a question".into(),
                mode: SearchMode::Semantic.into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let body = scrape(server.metrics_addr().expect("metrics are served")).await;
    let openai = ["embedder=\"openai\""];
    let texts = sample(&body, "memory_embedded_texts_total", &openai);
    assert_eq!(texts, Some(4.0), "three entries and one query: {body}");
    let calls = sample(&body, "memory_embedding_duration_seconds_count", &openai);
    assert_eq!(calls, Some(2.0), "the write and the first search: {body}");
    server.shutdown().await;
}
