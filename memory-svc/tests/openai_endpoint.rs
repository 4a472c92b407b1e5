//! `--embedder openai:BASE_URL` against a local HTTP server that stands in for an
//! OpenAI-compatible endpoint and answers as each test scripts it.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{extract::State, http::HeaderMap, http::StatusCode, routing::post, Json, Router};
use memory_svc::{
    config::Config,
    embed::{
        openai::{Endpoint, Limits, OpenAiEmbedder},
        EmbedError,
    },
    error::MemoryError,
    server,
};
use serde_json::{json, Value};
use tonic::Code;

/// How the server answers one request.
#[derive(Clone)]
enum Answer {
    /// Well-formed embeddings, listed in reverse order (each placed by its `index`).
    Embeddings,
    /// This status, with a short body.
    Status(u16),
    /// HTTP 200 with this body.
    Body(Value),
    /// Never answers.
    Hang,
}

#[derive(Default)]
struct Script {
    /// Answers for the next requests; then [`Answer::Embeddings`].
    answers: VecDeque<Answer>,
    /// Every request: its `input` and its Authorization header.
    requests: Vec<(Vec<String>, Option<String>)>,
}

type Shared = Arc<Mutex<Script>>;

/// The vector the server gives `text`: its length, 1, its first byte (not unit length).
fn vector_of(text: &str) -> Vec<f32> {
    let first = text.bytes().next().map_or(0.0, f32::from);
    vec![text.len() as f32, 1.0, first]
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

async fn embeddings(
    State(script): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let input: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap_or_default();
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let answer = {
        let mut script = script.lock().unwrap();
        script.requests.push((input.clone(), auth));
        script.answers.pop_front().unwrap_or(Answer::Embeddings)
    };
    match answer {
        Answer::Embeddings => {
            let data: Vec<Value> = input
                .iter()
                .enumerate()
                .rev()
                .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": vector_of(text)}))
                .collect();
            let model = body["model"].clone();
            (
                StatusCode::OK,
                Json(json!({"object": "list", "data": data, "model": model})),
            )
        }
        Answer::Status(code) => (
            StatusCode::from_u16(code).unwrap(),
            Json(json!({"error": {"message": format!("scripted {code}")}})),
        ),
        Answer::Body(body) => (StatusCode::OK, Json(body)),
        Answer::Hang => std::future::pending().await,
    }
}

/// A server at `http://ADDR/v1` answering as `answers` say.
async fn endpoint(answers: &[Answer]) -> (String, Shared) {
    let script = Shared::default();
    script.lock().unwrap().answers = answers.iter().cloned().collect();
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), script)
}

fn quick() -> Limits {
    Limits {
        batch: 3,
        timeout: Duration::from_millis(500),
        attempts: 3,
        first_backoff: Duration::from_millis(10),
    }
}

async fn connect(base_url: &str, api_key: Option<&str>) -> Result<OpenAiEmbedder, EmbedError> {
    let endpoint = Endpoint {
        base_url: base_url.to_owned(),
        model: "mini-embed".to_owned(),
        api_key: api_key.map(str::to_owned),
    };
    OpenAiEmbedder::connect(endpoint, quick()).await
}

fn texts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{}text {i}", "x".repeat(i)))
        .collect()
}

fn requests(script: &Shared) -> Vec<(Vec<String>, Option<String>)> {
    script.lock().unwrap().requests.clone()
}

#[tokio::test]
async fn batches_in_input_order_with_the_api_key() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, Some("sk-test")).await.unwrap();
    assert_eq!(embedder.identity().dimension, 3);
    assert_eq!(embedder.identity().fingerprint, "mini-embed");
    let input = texts(7);
    let vectors = embedder.embed(input.clone()).await.unwrap();
    let expected: Vec<Vec<f32>> = input.iter().map(|t| unit(vector_of(t))).collect();
    assert_eq!(vectors, expected);
    let sent = requests(&script);
    // The probe at connect, then batches of 3.
    let sizes: Vec<usize> = sent.iter().map(|(input, _)| input.len()).collect();
    assert_eq!(sizes, [1, 3, 3, 1]);
    assert_eq!(sent[1].0, input[..3]);
    assert!(sent
        .iter()
        .all(|(_, auth)| auth.as_deref() == Some("Bearer sk-test")));
}

#[tokio::test]
async fn no_api_key_no_authorization_header() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, None).await.unwrap();
    embedder.embed(texts(2)).await.unwrap();
    assert!(requests(&script).iter().all(|(_, auth)| auth.is_none()));
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retried() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, None).await.unwrap();
    script.lock().unwrap().answers = [Answer::Status(500), Answer::Status(429)].into();
    let vectors = embedder.embed(texts(2)).await.unwrap();
    assert_eq!(vectors.len(), 2);
    // Probe, 500, 429, success.
    assert_eq!(requests(&script).len(), 4);
}

#[tokio::test]
async fn retries_are_bounded() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, None).await.unwrap();
    script.lock().unwrap().answers = vec![Answer::Status(503); 10].into();
    let error = embedder.embed(texts(1)).await.unwrap_err();
    assert!(matches!(error, EmbedError::Unavailable { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&url) && message.contains("503"),
        "{message}"
    );
    // Probe, then the three attempts `quick()` allows.
    assert_eq!(requests(&script).len(), 1 + 3);
}

#[tokio::test]
async fn a_hanging_endpoint_times_out() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, None).await.unwrap();
    script.lock().unwrap().answers = vec![Answer::Hang; 3].into();
    let error = embedder.embed(texts(1)).await.unwrap_err();
    assert!(matches!(error, EmbedError::Unavailable { .. }), "{error}");
    assert_eq!(requests(&script).len(), 1 + 3);
}

#[tokio::test]
async fn an_endpoint_that_is_down_is_unavailable_by_name() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{addr}/v1");
    let error = connect(&url, None).await.unwrap_err();
    let status = tonic::Status::from(MemoryError::from(error));
    assert_eq!(status.code(), Code::Unavailable);
    assert!(status.message().contains(&url), "{status:?}");

    // memory-svc refuses to start on it, naming it.
    let data = tempfile::tempdir().unwrap();
    let mut config = Config::ephemeral(data.path().join("db"), "http://127.0.0.1:1".into());
    config.embedder = format!("openai:{url}").parse().unwrap();
    config.embedder_model = Some("mini-embed".into());
    let error = match server::start(config).await {
        Ok(_) => panic!("started on an endpoint that is down"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains(&url), "{error}");
}

#[tokio::test]
async fn client_errors_are_refused_without_retry() {
    let (url, script) = endpoint(&[]).await;
    let embedder = connect(&url, None).await.unwrap();
    script.lock().unwrap().answers = [Answer::Status(401)].into();
    let error = embedder.embed(texts(1)).await.unwrap_err();
    assert!(matches!(error, EmbedError::Refused { .. }), "{error}");
    assert!(error.to_string().contains("401"), "{error}");
    let status = tonic::Status::from(MemoryError::from(error));
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(requests(&script).len(), 2);
}

#[tokio::test]
async fn malformed_answers_are_refused_with_the_reason() {
    let embedding =
        |index: usize, embedding: Vec<f32>| json!({"index": index, "embedding": embedding});
    let cases = [
        (json!({"unexpected": true}), "missing field `data`"),
        (
            json!({"data": [embedding(0, vec![1.0, 0.0, 0.0])]}),
            "1 embeddings for 2 inputs",
        ),
        (
            json!({"data": [embedding(0, vec![1.0, 0.0, 0.0]), embedding(1, vec![1.0])]}),
            "data[index=1] has 1 dimensions, expected 3",
        ),
        (
            json!({"data": [embedding(0, vec![1.0, 0.0, 0.0]), embedding(0, vec![0.0, 1.0, 0.0])]}),
            "index 0 appears twice",
        ),
        (
            json!({"data": [embedding(0, vec![1.0, 0.0, 0.0]), embedding(2, vec![0.0, 1.0, 0.0])]}),
            "index 2 is out of range",
        ),
        (
            json!({"data": [embedding(0, vec![1.0, 0.0, 0.0]), embedding(1, vec![0.0, 0.0, 0.0])]}),
            "data[index=1] is a zero or non-finite vector",
        ),
    ];
    for (body, expected) in cases {
        let (url, script) = endpoint(&[]).await;
        let embedder = connect(&url, None).await.unwrap();
        script.lock().unwrap().answers = [Answer::Body(body)].into();
        let error = embedder.embed(texts(2)).await.unwrap_err();
        assert!(matches!(error, EmbedError::Malformed { .. }), "{error}");
        let message = error.to_string();
        assert!(
            message.contains(expected) && message.contains(&url),
            "{message}"
        );
        // Not retried: the same question would get the same answer.
        assert_eq!(requests(&script).len(), 2);
    }
}
