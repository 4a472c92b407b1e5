//! The gateway's HTTP front door against real session-svc and memory-svc (in-process, port 0):
//! authentication, scopes, the start-up refusal, and tool round trips over plain JSON-RPC.

use std::{io::Write, path::PathBuf};

use adk_tests::{chat_model, MemoryServer, SessionServer};
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
    stack_generating_with(None).await
}

/// A stack whose memory-svc generates with the stand-in model at `model`, if given.
async fn stack_generating_with(model: Option<&str>) -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::File::create(&tokens)
        .unwrap()
        .write_all(TOKENS.as_bytes())
        .unwrap();
    let session = SessionServer::start_with(|c| c.serve.tokens_file = Some(tokens.clone())).await;
    let session_endpoint = format!("http://{}", session.addr);
    let memory = MemoryServer::start_with(&session_endpoint, |c| {
        c.serve.tokens_file = Some(tokens.clone());
        if let Some(url) = model {
            c.generator = format!("openai:{url}").parse().unwrap();
            c.generator_model = Some("stand-in".into());
        }
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

/// The ids of a tool's structured `memories` (or `sample`).
fn ids(reply: &Value, field: &str) -> Vec<String> {
    reply["result"]["structuredContent"][field]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_tools_filter_and_purge_with_a_dry_run_first() {
    let stack = stack().await;
    let alice = Some("alice-token-0001");
    let mut added = Vec::new();
    for (text, metadata) in [
        (
            "Alice flies a red kite",
            json!({"color": "red", "n": 3, "topic": "toys"}),
        ),
        ("Alice flies a blue kite", json!({"color": "blue", "n": 1})),
        (
            "Alice flies a green kite",
            json!({"n": 5, "seen": "2026-05-01T12:00:00Z"}),
        ),
    ] {
        let (_, reply) = rpc(
            &stack.url,
            alice,
            call("add_memory", json!({"text": text, "metadata": metadata})),
        )
        .await;
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        added.push(
            reply["result"]["structuredContent"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let [red, blue, green] = [added[0].as_str(), added[1].as_str(), added[2].as_str()];
    let at_least_3 = json!([[{"key": "n", "op": ">=", "value": 3}]]);

    let (_, found) = rpc(
        &stack.url,
        alice,
        call(
            "search_memory",
            json!({"query": "kite", "filters": {"metadata": [[{"key": "color", "op": "=", "value": "red"}]]}}),
        ),
    )
    .await;
    assert_eq!(ids(&found, "memories"), [red], "{found}");
    for (filters, expected) in [
        (json!({"metadata": at_least_3}), vec![red, green]),
        (json!({"topics": ["toys"]}), vec![red]),
        // Alternatives, a time, presence, and a string that stays a string.
        (
            json!({"metadata": [
                [{"key": "seen", "op": "<", "value": "2026-06-01T00:00:00Z"}],
                [{"key": "color", "op": "exists"}, {"key": "n", "op": "<", "value": 2}],
            ]}),
            vec![blue, green],
        ),
        (
            json!({"metadata": [[{"key": "n", "op": "=", "value": "3"}]]}),
            vec![],
        ),
        (json!({"author": "nobody"}), vec![]),
    ] {
        let (_, listed) = rpc(
            &stack.url,
            alice,
            call("list_memories", json!({ "filters": filters })),
        )
        .await;
        assert_eq!(listed["result"]["isError"], false, "{filters}: {listed}");
        assert_eq!(ids(&listed, "memories"), expected, "{filters}");
    }

    // Bad arguments name the field.
    for (arguments, field) in [
        (
            json!({"query": "kite", "filters": {"metadata": [[{"key": "n", "op": "<"}]]}}),
            "filters.metadata[0][0].value",
        ),
        (
            json!({"query": "kite", "filters": {"metadata": [[{"key": "n", "op": "exists", "value": 1}]]}}),
            "filters.metadata[0][0].value",
        ),
        (
            json!({"query": "kite", "filters": {"metadata": [[{"key": "n", "op": "~", "value": 1}]]}}),
            "filters.metadata[0][0].op",
        ),
        (
            json!({"query": "kite", "filters": {"metadata": [[], [{"key": "", "op": "exists"}]]}}),
            "filters.metadata[1][0].key",
        ),
        (
            json!({"query": "kite", "filters": {"metadata": [[{"key": "n", "op": "=", "value": [1]}]]}}),
            "filters.metadata[0][0].value",
        ),
        (
            json!({"query": "kite", "filters": {"colour": "red"}}),
            "filters.colour",
        ),
        (
            json!({"query": "kite", "filters": {"after": "last week"}}),
            "filters.after",
        ),
    ] {
        let (_, refused) = rpc(&stack.url, alice, call("search_memory", arguments.clone())).await;
        assert_eq!(refused["result"]["isError"], true, "{arguments}: {refused}");
        assert!(
            text(&refused).contains(&format!("{field}: ")),
            "{arguments}: {}",
            text(&refused)
        );
    }

    // The purge tool is destructive, and a dry run unless forced.
    let (_, tools) = rpc(
        &stack.url,
        alice,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let purge = tools["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "purge_memories"))
        .expect("a purge_memories tool");
    assert_eq!(purge["annotations"]["destructiveHint"], true, "{purge}");
    assert_eq!(
        purge["inputSchema"]["required"],
        json!(["filters"]),
        "{purge}"
    );
    assert_eq!(
        purge["inputSchema"]["$defs"]["Condition"]["required"],
        json!(["key", "op"]),
        "a condition of \"exists\" has no value: {purge}"
    );
    let all = || async {
        let (_, listed) = rpc(&stack.url, alice, call("list_memories", json!({}))).await;
        ids(&listed, "memories")
    };
    let (_, everything) = rpc(
        &stack.url,
        alice,
        call("purge_memories", json!({"filters": {}})),
    )
    .await;
    assert_eq!(everything["result"]["isError"], true, "{everything}");
    assert!(text(&everything).contains("filter"), "{everything}");
    let (_, dry) = rpc(
        &stack.url,
        alice,
        call(
            "purge_memories",
            json!({"filters": {"metadata": at_least_3}}),
        ),
    )
    .await;
    assert_eq!(dry["result"]["isError"], false, "{dry}");
    assert_eq!(dry["result"]["structuredContent"]["count"], 2, "{dry}");
    assert_eq!(dry["result"]["structuredContent"]["deleted"], false);
    assert_eq!(ids(&dry, "sample"), [red, green]);
    assert!(text(&dry).contains("nothing was deleted"), "{dry}");
    assert_eq!(all().await, added, "a dry run deletes nothing");
    let (_, forced) = rpc(
        &stack.url,
        alice,
        call(
            "purge_memories",
            json!({"filters": {"metadata": at_least_3}, "force": true}),
        ),
    )
    .await;
    assert_eq!(forced["result"]["isError"], false, "{forced}");
    assert_eq!(
        forced["result"]["structuredContent"]["count"], 2,
        "{forced}"
    );
    assert_eq!(forced["result"]["structuredContent"]["deleted"], true);
    assert_eq!(all().await, [blue]);
    // Another user's memories are out of reach.
    let (_, refused) = rpc(
        &stack.url,
        alice,
        call(
            "purge_memories",
            json!({"filters": {"author": "user"}, "user_id": "bob", "force": true}),
        ),
    )
    .await;
    assert!(text(&refused).contains("permission denied"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_tools_buffer_a_turn_once_per_event_id_and_flush_to_a_job() {
    let (model_url, model) = chat_model::model(vec![chat_model::facts(&[])]).await;
    let stack = stack_generating_with(Some(&model_url)).await;
    let alice = Some("alice-token-0001");
    let (_, tools) = rpc(
        &stack.url,
        alice,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let tool = |name: &str| {
        tools["result"]["tools"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("a {name} tool: {tools}"))
    };
    let append = tool("append_memory_stream");
    assert_eq!(
        append["inputSchema"]["required"],
        json!(["stream_id", "text"]),
        "{append}"
    );
    for name in ["append_memory_stream", "flush_memory_stream"] {
        let annotations = &tool(name)["annotations"];
        assert_ne!(
            annotations["destructiveHint"], true,
            "{name}: {annotations}"
        );
        assert_ne!(annotations["idempotentHint"], true, "{name}: {annotations}");
    }

    let turn = json!({"stream_id": "chat", "text": "I moved to Lisbon.", "event_id": "t1"});
    let (_, first) = rpc(
        &stack.url,
        alice,
        call("append_memory_stream", turn.clone()),
    )
    .await;
    assert_eq!(first["result"]["isError"], false, "{first}");
    assert_eq!(
        first["result"]["structuredContent"],
        json!({"event_id": "t1", "appended": 1, "buffered": 1, "job_id": null})
    );
    let (_, again) = rpc(&stack.url, alice, call("append_memory_stream", turn)).await;
    assert_eq!(
        again["result"]["structuredContent"],
        json!({"event_id": "t1", "appended": 0, "buffered": 1, "job_id": null}),
        "the same event id is buffered once: {again}"
    );
    assert!(text(&again).contains("already"), "{again}");
    let (_, refused) = rpc(
        &stack.url,
        alice,
        call(
            "append_memory_stream",
            json!({"stream_id": "chat", "text": " "}),
        ),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("text: "), "{refused}");

    let (_, flushed) = rpc(
        &stack.url,
        alice,
        call("flush_memory_stream", json!({"stream_id": "chat"})),
    )
    .await;
    assert_eq!(flushed["result"]["isError"], false, "{flushed}");
    let job_id = flushed["result"]["structuredContent"]["job_id"]
        .as_str()
        .expect("the flush started a job")
        .to_owned();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while chat_model::requests(&model).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {job_id} never asked the model"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let asked = chat_model::requests(&model);
    let prompt = chat_model::prompt(&asked[0]);
    assert_eq!(prompt.matches("I moved to Lisbon.").count(), 1, "{prompt}");
    let (_, empty) = rpc(
        &stack.url,
        alice,
        call("flush_memory_stream", json!({"stream_id": "chat"})),
    )
    .await;
    assert_eq!(
        empty["result"]["structuredContent"],
        json!({"job_id": null}),
        "{empty}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_tools_are_hidden_without_a_generator() {
    let stack = stack().await;
    let (_, tools) = rpc(
        &stack.url,
        Some("alice-token-0001"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"search_memory"), "{names:?}");
    for hidden in [
        "generate_memories",
        "append_memory_stream",
        "flush_memory_stream",
    ] {
        assert!(!names.contains(&hidden), "{hidden}: {names:?}");
    }
    let (_, refused) = rpc(
        &stack.url,
        Some("alice-token-0001"),
        call("flush_memory_stream", json!({"stream_id": "chat"})),
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("flush_memory_stream needs memory-svc --generator")),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_tools_answer_as_of_a_time() {
    use adk_proto::memory::v1::{
        memory_service_client::MemoryServiceClient, AddMemoryRequest, MemoryEntry,
    };
    let stack = stack().await;
    let alice = Some("alice-token-0001");
    // A move, written over gRPC (add_memory writes facts valid from now): Berlin from 2020
    // until 2024, Lisbon since.
    let at = |seconds: i64| Some(prost_types::Timestamp { seconds, nanos: 0 });
    let fact = |id: &str, text: &str| MemoryEntry {
        id: id.into(),
        content: Some(adk_proto::session::v1::Content {
            role: Some("user".into()),
            parts: vec![runner_client::event::text_part(text)],
        }),
        author: "user".into(),
        ..Default::default()
    };
    let mut request = tonic::Request::new(AddMemoryRequest {
        app_name: "demo".into(),
        user_id: "alice".into(),
        memories: vec![
            MemoryEntry {
                valid_from: at(1_577_836_800),
                invalid_at: at(1_704_067_200),
                ..fact("m-berlin", "Alice lives in Berlin")
            },
            MemoryEntry {
                valid_from: at(1_704_067_200),
                ..fact("m-lisbon", "Alice lives in Lisbon")
            },
        ],
        custom_metadata: String::new(),
    });
    request
        .metadata_mut()
        .insert("authorization", "Bearer alice-token-0001".parse().unwrap());
    MemoryServiceClient::connect(format!("http://{}", stack._memory.addr))
        .await
        .unwrap()
        .add_memory(request)
        .await
        .unwrap();
    for (arguments, expected) in [
        (json!({"query": "lives"}), vec!["m-lisbon"]),
        (
            json!({"query": "lives", "as_of": "2022-06-01T00:00:00Z"}),
            vec!["m-berlin"],
        ),
        (
            json!({"query": "lives", "include_superseded": true}),
            vec!["m-berlin", "m-lisbon"],
        ),
    ] {
        for tool in ["search_memory", "list_memories"] {
            let (_, reply) = rpc(&stack.url, alice, call(tool, arguments.clone())).await;
            assert_eq!(
                reply["result"]["isError"], false,
                "{tool} {arguments}: {reply}"
            );
            let mut found = ids(&reply, "memories");
            found.sort();
            assert_eq!(found, expected, "{tool} {arguments}");
        }
    }
    // The model reads that the old fact no longer holds.
    let (_, reply) = rpc(
        &stack.url,
        alice,
        call(
            "search_memory",
            json!({"query": "Berlin", "include_superseded": true}),
        ),
    )
    .await;
    assert!(
        text(&reply).contains("superseded since 2024-01-01"),
        "{}",
        text(&reply)
    );
    let (_, refused) = rpc(
        &stack.url,
        alice,
        call("search_memory", json!({"query": "lives", "as_of": "soon"})),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("as_of: "), "{}", text(&refused));
}
