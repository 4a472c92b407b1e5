//! The gateway's HTTP front door against real session-svc and memory-svc (in-process, port 0):
//! authentication, scopes, the start-up refusal, and a tool round trip over plain JSON-RPC.

use std::{io::Write, path::PathBuf};

use adk_tests::{MemoryServer, SessionServer};
use gateway::{
    backend::Backend,
    config::Http,
    http::{start, Running, StartError},
};
use reqwest::{header, StatusCode};
use runner_client::Access;
use serde_json::{json, Value};

const TOKENS: &str = r#"{"tokens": [
    {"name": "alice", "token": "alice-token-0001", "apps": ["demo"], "users": ["alice"]},
    {"name": "team", "token": "team-token-0003", "apps": ["demo", "other"], "users": ["alice", "bob"]},
    {"name": "ops", "token": "ops-token-0004", "apps": ["*"]}
]}"#;

const VERSION: &str = "2025-06-18";

struct Stack {
    _session: SessionServer,
    _memory: MemoryServer,
    gateway: Option<Running>,
    url: String,
    backend: Backend,
    tokens: PathBuf,
    _dir: tempfile::TempDir,
}

fn http(listen: &str, tokens: Option<PathBuf>) -> Http {
    Http {
        listen: listen.parse().unwrap(),
        tokens_file: tokens,
        allow_unauthenticated: false,
        allowed_hosts: vec![],
        allowed_origins: vec![],
        log_format: "plain".into(),
    }
}

async fn stack() -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::File::create(&tokens)
        .unwrap()
        .write_all(TOKENS.as_bytes())
        .unwrap();
    let session = SessionServer::start_with(|c| c.serve.tokens_file = Some(tokens.clone())).await;
    let session_endpoint = format!("http://{}", session.addr);
    let memory = MemoryServer::start_with(&session_endpoint, |c| {
        c.serve.tokens_file = Some(tokens.clone())
    })
    .await;
    let backend = Backend::connect(
        &session_endpoint,
        &format!("http://{}", memory.addr),
        &Access::default(),
    )
    .unwrap();
    let gateway = start(&http("127.0.0.1:0", Some(tokens.clone())), backend.clone())
        .await
        .unwrap();
    Stack {
        url: format!("http://{}/mcp", gateway.addr),
        gateway: Some(gateway),
        _session: session,
        _memory: memory,
        backend,
        tokens,
        _dir: dir,
    }
}

/// An HTTP client (reqwest is built here without a TLS provider of its own: ring's, as the
/// rest of the workspace uses).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// One JSON-RPC request with `token`; the HTTP status and the parsed reply (if JSON).
async fn rpc(url: &str, token: Option<&str>, body: Value) -> (StatusCode, Value) {
    let mut request = client()
        .post(url)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_token_is_401_with_a_challenge() {
    let stack = stack().await;
    let response = client()
        .post(&stack.url)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .json(&call("list_apps", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let challenge = response.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    let (status, _) = rpc(
        &stack.url,
        Some("no-such-token"),
        call("list_apps", json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_token_acts_for_its_user_only() {
    let stack = stack().await;
    let alice = Some("alice-token-0001");
    let (_, added) = rpc(
        &stack.url,
        alice,
        call("add_memory", json!({"text": "Alice collects enamel pins"})),
    )
    .await;
    assert_eq!(added["result"]["isError"], false, "{added}");
    let (_, found) = rpc(
        &stack.url,
        alice,
        call("search_memory", json!({"query": "enamel pins"})),
    )
    .await;
    assert!(
        text(&found).contains("Alice collects enamel pins"),
        "{found}"
    );
    assert_eq!(
        found["result"]["structuredContent"]["memories"][0]["id"],
        added["result"]["structuredContent"]["id"]
    );

    for (name, arguments) in [
        ("search_memory", json!({"query": "pins", "user_id": "bob"})),
        ("add_memory", json!({"text": "planted", "user_id": "bob"})),
        ("list_memories", json!({"app_name": "other"})),
    ] {
        let (_, refused) = rpc(&stack.url, alice, call(name, arguments)).await;
        assert_eq!(refused["result"]["isError"], true, "{name}: {refused}");
        assert!(text(&refused).contains("permission denied"), "{refused}");
    }
    let (_, read) = rpc(
        &stack.url,
        alice,
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
               "params": {"uri": "adk://apps/demo/users/bob/memory"}}),
    )
    .await;
    assert!(read["error"]["message"]
        .as_str()
        .unwrap()
        .contains("permission denied"));

    // Nothing reached bob: read with a token that may.
    let (_, bobs) = rpc(
        &stack.url,
        Some("ops-token-0004"),
        call(
            "list_memories",
            json!({"app_name": "demo", "user_id": "bob"}),
        ),
    )
    .await;
    assert_eq!(bobs["result"]["structuredContent"]["memories"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_several_apps_or_users_must_name_them() {
    let stack = stack().await;
    let team = Some("team-token-0003");
    let (_, no_app) = rpc(&stack.url, team, call("list_memories", json!({}))).await;
    assert!(text(&no_app).contains("app_name is required"), "{no_app}");
    let (_, no_user) = rpc(
        &stack.url,
        team,
        call("list_memories", json!({"app_name": "demo"})),
    )
    .await;
    assert!(text(&no_user).contains("user_id is required"), "{no_user}");
    let (_, named) = rpc(
        &stack.url,
        team,
        call(
            "list_memories",
            json!({"app_name": "demo", "user_id": "bob"}),
        ),
    )
    .await;
    assert_eq!(named["result"]["isError"], false, "{named}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_apps_shows_only_the_tokens_apps() {
    let stack = stack().await;
    let ops = Some("ops-token-0004");
    for app in ["demo", "secret"] {
        let (_, created) = rpc(
            &stack.url,
            ops,
            call(
                "create_session",
                json!({"app_name": app, "user_id": "alice"}),
            ),
        )
        .await;
        assert_eq!(created["result"]["isError"], false, "{created}");
    }
    let (_, all) = rpc(&stack.url, ops, call("list_apps", json!({}))).await;
    assert_eq!(
        all["result"]["structuredContent"]["app_names"],
        json!(["demo", "secret"])
    );
    let (_, alices) = rpc(
        &stack.url,
        Some("alice-token-0001"),
        call("list_apps", json!({})),
    )
    .await;
    assert_eq!(
        alices["result"]["structuredContent"]["app_names"],
        json!(["demo"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tokens_beyond_loopback_is_refused_at_start() {
    let stack = stack().await;
    let refused = start(&http("0.0.0.0:0", None), stack.backend.clone()).await;
    assert!(
        matches!(refused, Err(StartError::Unauthenticated(_))),
        "{refused:?}"
    );
    let mut allowed = http("0.0.0.0:0", None);
    allowed.allow_unauthenticated = true;
    start(&allowed, stack.backend.clone())
        .await
        .unwrap()
        .stop()
        .await
        .unwrap();
    let with_tokens = start(
        &http("0.0.0.0:0", Some(stack.tokens.clone())),
        stack.backend.clone(),
    )
    .await
    .unwrap();
    with_tokens.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused() {
    let mut stack = stack().await;
    let response = client()
        .post(&stack.url)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::ORIGIN, "https://evil.example")
        .bearer_auth("alice-token-0001")
        .json(&call("list_apps", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    stack.gateway.take().unwrap().stop().await.unwrap();
}
