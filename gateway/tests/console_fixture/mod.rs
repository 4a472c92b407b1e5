//! What the console suites share: both services requiring tokens (memory-svc generating
//! memories with a local stand-in for the chat model), the gateway binary in front of them with
//! the same tokens file, gRPC clients presenting a token, and the data the pages show.

use std::net::SocketAddr;

use adk_proto::{
    memory::v1::{
        generate_memories_request, memory_service_client::MemoryServiceClient, AddMemoryRequest,
        AppendMemoryStreamRequest, ExtractedFact, FactList, GenerateMemoriesRequest,
        GenerateOptions, MemoryEntry,
    },
    session::v1::{
        part::Data, session_service_client::SessionServiceClient, Content, Event, EventActions,
        FunctionCall, FunctionResponse, Part,
    },
};
use adk_tests::{
    append_request, chat_model, create_request, text_event, text_memory, MemoryServer,
    SessionServer,
};
use tonic::{
    metadata::{Ascii, MetadataValue},
    service::{interceptor::InterceptedService, Interceptor},
    transport::Channel,
    Request, Status,
};

/// Sees every app.
pub const OPS_TOKEN: &str = "ops-token-0123456789";
/// Sees app `a` only.
pub const A_TOKEN: &str = "a-token-0123456789";
/// The text of a hostile event: must show as text, never as markup.
pub const HOSTILE: &str = "<img src=x onerror=alert(1)>";
/// The text of another hostile event.
pub const SCRIPT: &str = "<script>document.title='pwned'</script>";
/// Only a token that may see app `b` may read this.
pub const B_SECRET: &str = "the secret of app b";

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct Bearer(MetadataValue<Ascii>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

pub type Sessions = SessionServiceClient<InterceptedService<Channel, Bearer>>;
pub type Memories = MemoryServiceClient<InterceptedService<Channel, Bearer>>;

pub struct Fixture {
    pub session: SessionServer,
    _memory: MemoryServer,
    /// The gateway process, killed when the fixture is dropped.
    _gateway: tokio::process::Child,
    pub console: SocketAddr,
    pub sessions: Sessions,
    pub memories: Memories,
    /// The stand-in generation model's script.
    model: chat_model::Shared,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Both services (tokens required, session-svc with `/metrics`) and the gateway serving
    /// the console on a free loopback port, with [`Fixture::seed`] data.
    pub async fn start() -> Self {
        // reqwest (used to talk HTTP to the console and /metrics) needs a TLS provider even
        // for plain HTTP; ring is the one tonic already links. Another test may have done it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::TempDir::new().expect("temp dir");
        let tokens = dir.path().join("tokens.json");
        let file = serde_json::json!({"tokens": [
            {"name": "ops", "token": OPS_TOKEN, "apps": ["*"]},
            {"name": "a-only", "token": A_TOKEN, "apps": ["a"]},
        ]});
        std::fs::write(&tokens, file.to_string()).expect("writes the tokens file");
        let session_tokens = tokens.clone();
        let session = SessionServer::start_with(|c| {
            c.serve.tokens_file = Some(session_tokens);
            c.serve.metrics_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        })
        .await;
        let endpoint = format!("http://{}", session.addr);
        let (model_url, model) = chat_model::model(vec![]).await;
        let memory = MemoryServer::start_with(&endpoint, |c| {
            c.serve.tokens_file = Some(tokens);
            c.generator = format!("openai:{model_url}")
                .parse()
                .expect("a generator URL");
            c.generator_model = Some("stand-in".into());
        })
        .await;
        let (gateway, console) = start_gateway(&[
            "--listen",
            "127.0.0.1:0",
            "--session-endpoint",
            &endpoint,
            "--memory-endpoint",
            &format!("http://{}", memory.addr),
            "--tokens-file",
            &dir.path().join("tokens.json").display().to_string(),
        ])
        .await;
        let bearer = Bearer(format!("Bearer {OPS_TOKEN}").parse().expect("header value"));
        let channel = |addr: SocketAddr| {
            Channel::from_shared(format!("http://{addr}"))
                .expect("address")
                .connect_lazy()
        };
        let fixture = Fixture {
            sessions: SessionServiceClient::with_interceptor(channel(session.addr), bearer.clone()),
            memories: MemoryServiceClient::with_interceptor(channel(memory.addr), bearer),
            console,
            model,
            _gateway: gateway,
            session,
            _memory: memory,
            _dir: dir,
        };
        fixture.seed().await;
        fixture
    }

    /// `http://127.0.0.1:PORT` of the console.
    pub fn url(&self) -> String {
        format!("http://{}", self.console)
    }

    pub async fn create(&self, app: &str, user: &str, id: &str, state: serde_json::Value) {
        self.sessions
            .clone()
            .create_session(create_request(app, user, id, &state.to_string()))
            .await
            .expect("create_session");
    }

    pub async fn append(&self, app: &str, user: &str, id: &str, event: Event) {
        self.sessions
            .clone()
            .append_event(append_request(app, user, id, event))
            .await
            .expect("append_event");
    }

    /// App `a`: alice's session `s1` (text, a tool call and its response, state in all three
    /// scopes, hostile text) and her memories; app `b`: bob's session with [`B_SECRET`].
    async fn seed(&self) {
        self.create(
            "a",
            "alice",
            "s1",
            serde_json::json!({"app:plan": "pro", "user:lang": "en", "topic": "console"}),
        )
        .await;
        self.append(
            "a",
            "alice",
            "s1",
            text_event("user", "What is my favourite project?"),
        )
        .await;
        let call = Event {
            author: "helper".into(),
            invocation_id: "e-1".into(),
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![Part {
                    data: Some(Data::FunctionCall(FunctionCall {
                        name: Some("load_memory".into()),
                        args: r#"{"query":"favourite project"}"#.into(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        };
        self.append("a", "alice", "s1", call).await;
        let response = Event {
            author: "helper".into(),
            invocation_id: "e-1".into(),
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(Data::FunctionResponse(FunctionResponse {
                        name: Some("load_memory".into()),
                        response: r#"{"memories":["the console"]}"#.into(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            }),
            actions: Some(EventActions {
                state_delta: r#"{"answered": true, "user:visits": 3}"#.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.append("a", "alice", "s1", response).await;
        self.append("a", "alice", "s1", text_event("user", HOSTILE))
            .await;
        self.append("a", "alice", "s1", text_event("user", SCRIPT))
            .await;

        self.create("b", "bob", "secret-b", serde_json::json!({}))
            .await;
        self.append("b", "bob", "secret-b", text_event("user", B_SECRET))
            .await;

        let memory = |id: &str, text: &str, session: &str| MemoryEntry {
            session_id: session.into(),
            ..text_memory(id, "user", text)
        };
        self.memories
            .clone()
            .add_memory(AddMemoryRequest {
                app_name: "a".into(),
                user_id: "alice".into(),
                memories: vec![
                    memory(
                        "m-best",
                        "console console: the web console is my favourite project",
                        "s1",
                    ),
                    memory("m-some", "I opened the console once", "s1"),
                    memory("m-food", "my favourite food is pizza", "s2"),
                    memory("m-old", "an old note about the console", "s2"),
                ],
                custom_metadata: String::new(),
            })
            .await
            .expect("add_memory");
    }

    /// Carol's memories in app `a`, with metadata for the filters: `c-red` (color red, n 3,
    /// topic pets), `c-blue` (color blue, n 1), `c-vip` (vip, n 5) and `c-plain` (none), all
    /// by the user and all about kites.
    /// Erin's move: Berlin from 2020 until 2024 (superseded), Lisbon since.
    pub async fn erin_who_moved(&self) {
        let at = |seconds: i64| Some(prost_types::Timestamp { seconds, nanos: 0 });
        self.memories
            .clone()
            .add_memory(AddMemoryRequest {
                app_name: "a".into(),
                user_id: "erin".into(),
                memories: vec![
                    MemoryEntry {
                        valid_from: at(1_577_836_800),
                        invalid_at: at(1_704_067_200),
                        ..text_memory("e-berlin", "user", "erin lives in Berlin")
                    },
                    MemoryEntry {
                        valid_from: at(1_704_067_200),
                        ..text_memory("e-lisbon", "user", "erin lives in Lisbon")
                    },
                ],
                custom_metadata: String::new(),
            })
            .await
            .expect("add_memory");
    }

    pub async fn carol_with_metadata(&self) {
        let memory = |id: &str, text: &str, metadata: serde_json::Value| MemoryEntry {
            custom_metadata: if metadata.is_null() {
                String::new()
            } else {
                metadata.to_string()
            },
            ..text_memory(id, "user", text)
        };
        self.memories
            .clone()
            .add_memory(AddMemoryRequest {
                app_name: "a".into(),
                user_id: "carol".into(),
                memories: vec![
                    memory(
                        "c-red",
                        "carol flies a red kite",
                        serde_json::json!({"color": "red", "n": 3, "topic": "pets"}),
                    ),
                    memory(
                        "c-blue",
                        "carol flies a blue kite",
                        serde_json::json!({"color": "blue", "n": 1}),
                    ),
                    memory(
                        "c-vip",
                        "carol flies a golden kite",
                        serde_json::json!({"vip": true, "n": 5}),
                    ),
                    memory(
                        "c-plain",
                        "carol flies a plain kite",
                        serde_json::Value::Null,
                    ),
                ],
                custom_metadata: String::new(),
            })
            .await
            .expect("add_memory");
    }

    /// Buffers one event per id of `ids` (its text says its id) in `user`'s event stream
    /// `stream` of app `a`, and scripts the stand-in model's answer to their extraction (no
    /// facts): a flush then makes a job that succeeds.
    pub async fn streamed(&self, user: &str, stream: &str, ids: &[&str]) {
        chat_model::script(&self.model, vec![chat_model::facts(&[])]);
        let events = ids
            .iter()
            .map(|id| Event {
                id: (*id).into(),
                ..text_event("user", &format!("streamed {id}"))
            })
            .collect();
        self.memories
            .clone()
            .append_memory_stream(AppendMemoryStreamRequest {
                app_name: "a".into(),
                user_id: user.into(),
                stream_id: stream.into(),
                events,
            })
            .await
            .expect("append_memory_stream");
    }

    /// The ids of `user`'s memories in app `a`, in ingestion order.
    pub async fn memory_ids_of(&self, user: &str) -> Vec<String> {
        let page = self
            .memories
            .clone()
            .list_memories(adk_proto::memory::v1::ListMemoriesRequest {
                app_name: "a".into(),
                user_id: user.into(),
                page_size: 100,
                ..Default::default()
            })
            .await
            .expect("list_memories")
            .into_inner();
        page.memories.into_iter().map(|m| m.id).collect()
    }

    /// A generated memory of alice in app `a` with two revisions: added (`Alice lives in
    /// Berlin.`, a given fact, so no model call) and updated (`Alice lives in Lisbon.`, as the
    /// stand-in model decides). Returns its id.
    pub async fn generated_and_updated(&self) -> String {
        let generate = |text: &str| GenerateMemoriesRequest {
            app_name: "a".into(),
            user_id: "alice".into(),
            source: Some(generate_memories_request::Source::Facts(FactList {
                facts: vec![ExtractedFact {
                    text: text.into(),
                    ..Default::default()
                }],
            })),
            options: Some(GenerateOptions {
                wait: true,
                ..Default::default()
            }),
        };
        let before = self.memory_ids().await;
        let mut memories = self.memories.clone();
        memories
            .generate_memories(generate("Alice lives in Berlin."))
            .await
            .expect("the first fact is generated");
        let id = self
            .memory_ids()
            .await
            .into_iter()
            .find(|id| !before.contains(id))
            .expect("a generated memory");
        chat_model::script(
            &self.model,
            vec![chat_model::decisions(&[(
                0,
                "update",
                &id,
                "Alice lives in Lisbon.",
            )])],
        );
        memories
            .generate_memories(generate("Alice moved from Berlin to Lisbon."))
            .await
            .expect("the second fact updates the first");
        id
    }

    /// The ids of alice's memories in app `a`.
    pub async fn memory_ids(&self) -> Vec<String> {
        self.memory_ids_of("alice").await
    }

    /// The value of session-svc's in-flight gauge of `method`, which must be reported (a
    /// missing gauge is no proof that nothing is in flight).
    pub async fn in_flight(&self, method: &str) -> f64 {
        let addr = self.session.metrics_addr().expect("metrics are on");
        let label = format!("method=\"adk.session.v1.SessionService/{method}\"");
        adk_tests::sample(
            &adk_tests::scrape(addr).await,
            "grpc_server_in_flight",
            &[&label],
        )
        .unwrap_or_else(|| panic!("session-svc reports no in-flight gauge of {method}"))
    }
}

/// Starts the gateway binary with `flags` and waits for its ready line: the process and the
/// address it listens on.
async fn start_gateway(flags: &[&str]) -> (tokio::process::Child, SocketAddr) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the gateway starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let line = tokio::io::BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("reads the gateway's output")
        .expect("the gateway prints its ready line");
    // "gateway listening on <addr>"
    let addr = line
        .strip_prefix("gateway listening on ")
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, addr)
}
