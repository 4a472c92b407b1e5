//! Who may call what: every RPC of every service, in one table. For each row, a missing or
//! unknown token is `UNAUTHENTICATED`; a token for another app, or for another user of the same
//! app, is `PERMISSION_DENIED` and writes nothing (the whole store is read back with a token for
//! every app and compared); the right token succeeds.
//!
//! The RPCs the table must cover are read from the contract's descriptor set, so an RPC added to
//! a `.proto` file without a row here fails the suite. Runs on sled, or on PostgreSQL when
//! `ADK_TEST_POSTGRES` names a database (where the AdminService is not served at all).

use std::collections::BTreeSet;

use adk_proto::{
    admin::v1::{admin_service_client::AdminServiceClient, SnapshotRequest},
    memory::v1::{
        add_session_to_memory_request, delete_memory_request::Target, generate_memories_request,
        memory_service_client::MemoryServiceClient, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, AppendMemoryStreamRequest, DeleteMemoryRequest, EventList,
        FlushMemoryStreamRequest, GenerateMemoriesRequest, GenerateOptions,
        GetGenerationJobRequest, ListMemoriesRequest, ListMemoryRevisionsRequest,
        ListMemoryStreamsRequest, MemoryKind, PurgeMemoriesRequest, RollbackMemoryRequest,
        SessionRef,
    },
    session::v1::{
        session_service_client::SessionServiceClient, DeleteSessionRequest, Event,
        GetAppStateRequest, GetUserStateRequest, ListAppsRequest, ListEventsRequest,
        ListSessionsRequest, Session, WatchEventsRequest,
    },
};
use adk_tests::{
    append_request, auth::contract_rpcs, auth::Bearer, chat_model, create_request, get_request,
    postgres_url, search_request, text_event, text_memory, watch_request, MemoryServer,
    SessionServer,
};
use futures::future::BoxFuture;
use tonic::{service::interceptor::InterceptedService, transport::Channel, Code, Response, Status};

const APP: &str = "a";
const USER: &str = "alice";
/// The session every row reads or writes (rows that delete have targets of their own).
const SESSION: &str = "s1";

/// alice of app a: the right token for whatever names alice.
const ALICE: &str = "token-alice";
/// bob of app a: another user of the same app.
const BOB: &str = "token-bob";
/// Every user of app a.
const APP_A: &str = "token-app-a";
/// Every user of app b: another app.
const APP_B: &str = "token-app-b";
/// Every app: whole-store operations, and the read-back.
const OPS: &str = "token-ops";
/// In no tokens file.
const UNKNOWN: &str = "token-unknown";

const TOKENS: &str = r#"{"tokens": [
    {"name": "alice", "token": "token-alice", "apps": ["a"], "users": ["alice"]},
    {"name": "bob", "token": "token-bob", "apps": ["a"], "users": ["bob"]},
    {"name": "app-a", "token": "token-app-a", "apps": ["a"]},
    {"name": "app-b", "token": "token-app-b", "apps": ["b"]},
    {"name": "ops", "token": "token-ops", "apps": ["*"]}
]}"#;

/// What a row's request reaches, and so which tokens may make it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scope {
    /// One user of one app (alice of a).
    User,
    /// Every user of one app: a token limited to some users may not.
    AllUsers,
    /// What an app shares with all its users (app state): any user's token of the app may.
    App,
    /// The whole store (snapshots): only a token for every app may.
    Store,
    /// A listing filtered by the caller's grant (the apps it may see): any known token may ask
    /// (what each sees is tests/tests/list_apps.rs's concern).
    Granted,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Allowed,
    Unauthenticated,
    Denied,
}

impl Scope {
    /// Each caller (its token, or none) and what it must get.
    fn cases(self) -> Vec<(Option<&'static str>, Expect)> {
        use Expect::*;
        let mut cases = vec![(None, Unauthenticated), (Some(UNKNOWN), Unauthenticated)];
        if self == Scope::Granted {
            cases.extend([(Some(APP_B), Allowed), (Some(ALICE), Allowed)]);
            return cases;
        }
        cases.push((Some(APP_B), Denied));
        cases.extend(match self {
            Scope::User => vec![(Some(BOB), Denied), (Some(ALICE), Allowed)],
            Scope::AllUsers => vec![(Some(ALICE), Denied), (Some(APP_A), Allowed)],
            Scope::App => vec![(Some(BOB), Allowed), (Some(ALICE), Allowed)],
            Scope::Store => vec![
                (Some(ALICE), Denied),
                (Some(APP_A), Denied),
                (Some(OPS), Allowed),
            ],
            Scope::Granted => Vec::new(),
        });
        cases
    }
}

type Intercepted = InterceptedService<Channel, Bearer>;

/// One caller: a token (or none) on connections to both servers.
struct Caller {
    token: Option<&'static str>,
    session_channel: Channel,
    memory_channel: Channel,
}

impl Caller {
    fn sessions(&self) -> SessionServiceClient<Intercepted> {
        SessionServiceClient::with_interceptor(self.session_channel.clone(), Bearer(self.token))
    }

    fn memories(&self) -> MemoryServiceClient<Intercepted> {
        MemoryServiceClient::with_interceptor(self.memory_channel.clone(), Bearer(self.token))
    }

    fn admin(&self, server: Server) -> AdminServiceClient<Intercepted> {
        let channel = match server {
            Server::Session => self.session_channel.clone(),
            Server::Memory => self.memory_channel.clone(),
        };
        AdminServiceClient::with_interceptor(channel, Bearer(self.token))
    }
}

#[derive(Clone, Copy)]
enum Server {
    Session,
    Memory,
}

/// What the setup made that rows name.
struct Made {
    job_id: String,
    generated_id: String,
    /// The revision that added the generated memory.
    revision_id: String,
}

type Call = for<'a> fn(&'a Caller, &'a Made) -> BoxFuture<'a, Result<(), Status>>;

struct Row {
    /// `package.Service/Method`, as the descriptor set names it.
    rpc: &'static str,
    /// Which form of the request, where a method has several.
    form: &'static str,
    scope: Scope,
    call: Call,
}

fn row(rpc: &'static str, form: &'static str, scope: Scope, call: Call) -> Row {
    Row {
        rpc,
        form,
        scope,
        call,
    }
}

/// An event with an id, which generated memories cite as their source.
fn event(id: &str, text: &str) -> Event {
    Event {
        id: id.into(),
        ..text_event("user", text)
    }
}

fn generate_request(text: &str) -> GenerateMemoriesRequest {
    GenerateMemoriesRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        source: Some(generate_memories_request::Source::Events(EventList {
            events: vec![event("e1", text)],
        })),
        options: Some(GenerateOptions {
            wait: true,
            disable_consolidation: true,
            ..Default::default()
        }),
    }
}

/// A forced purge of `user`'s memories (every user's with ""), by an author no memory has.
fn purge_request(user: &str) -> PurgeMemoriesRequest {
    PurgeMemoriesRequest {
        app_name: APP.into(),
        user_id: user.into(),
        author: "nobody".into(),
        force: true,
        ..Default::default()
    }
}

/// The stand-in model's answer to one generation.
fn extracted() -> chat_model::Answer {
    chat_model::facts(&[("preferences", "Alice drinks tea", &["e1"])])
}

/// The table: one row per form of every RPC of the three services.
fn rows() -> Vec<Row> {
    use Scope::*;
    vec![
        row(
            "adk.session.v1.SessionService/CreateSession",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = create_request(APP, USER, "created", "{}");
                    c.sessions().create_session(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/GetSession",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = get_request(APP, USER, SESSION);
                    c.sessions().get_session(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/ListSessions",
            "one user",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = ListSessionsRequest {
                        app_name: APP.into(),
                        user_id: Some(USER.into()),
                        ..Default::default()
                    };
                    c.sessions().list_sessions(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/ListSessions",
            "all users",
            AllUsers,
            |c, _| {
                Box::pin(async move {
                    let request = ListSessionsRequest {
                        app_name: APP.into(),
                        ..Default::default()
                    };
                    c.sessions().list_sessions(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/DeleteSession",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = DeleteSessionRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        session_id: "doomed".into(),
                    };
                    c.sessions().delete_session(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/AppendEvent",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = append_request(APP, USER, SESSION, text_event("user", "one"));
                    c.sessions().append_event(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/AppendEvents",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = append_request(APP, USER, SESSION, text_event("user", "two"));
                    let mut responses = c
                        .sessions()
                        .append_events(tokio_stream::iter([request]))
                        .await?
                        .into_inner();
                    let response = responses
                        .message()
                        .await?
                        .ok_or_else(|| Status::internal("the stream ended without a response"))?;
                    match response.code {
                        0 => Ok(()),
                        code => Err(Status::new(Code::from(code), response.message)),
                    }
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/ListEvents",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = ListEventsRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        session_id: SESSION.into(),
                        ..Default::default()
                    };
                    c.sessions().list_events(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/WatchSession",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = watch_request(APP, USER, SESSION);
                    c.sessions().watch_session(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/WatchEvents",
            "one user",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = WatchEventsRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        ..Default::default()
                    };
                    c.sessions().watch_events(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/WatchEvents",
            "all users",
            AllUsers,
            |c, _| {
                Box::pin(async move {
                    let request = WatchEventsRequest {
                        app_name: APP.into(),
                        ..Default::default()
                    };
                    c.sessions().watch_events(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/GetUserState",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = GetUserStateRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                    };
                    c.sessions().get_user_state(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/GetAppState",
            "",
            App,
            |c, _| {
                Box::pin(async move {
                    let request = GetAppStateRequest {
                        app_name: APP.into(),
                    };
                    c.sessions().get_app_state(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.session.v1.SessionService/ListApps",
            "",
            Granted,
            |c, _| {
                Box::pin(async move {
                    let request = ListAppsRequest {};
                    c.sessions().list_apps(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/AddSessionToMemory",
            "session",
            User,
            |c, _| {
                Box::pin(async move {
                    let session = Session {
                        id: "inline".into(),
                        app_name: APP.into(),
                        user_id: USER.into(),
                        events: vec![event("i1", "an inline session")],
                        ..Default::default()
                    };
                    let request = AddSessionToMemoryRequest {
                        source: Some(add_session_to_memory_request::Source::Session(session)),
                        generate: None,
                    };
                    c.memories().add_session_to_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/AddSessionToMemory",
            "session_ref",
            User,
            |c, _| {
                Box::pin(async move {
                    let reference = SessionRef {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        session_id: SESSION.into(),
                    };
                    let request = AddSessionToMemoryRequest {
                        source: Some(add_session_to_memory_request::Source::SessionRef(reference)),
                        generate: None,
                    };
                    c.memories().add_session_to_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/AddEventsToMemory",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = AddEventsToMemoryRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        session_id: SESSION.into(),
                        events: vec![event("x1", "events added to memory")],
                        ..Default::default()
                    };
                    c.memories().add_events_to_memory(request).await.map(drop)
                })
            },
        ),
        row("adk.memory.v1.MemoryService/AddMemory", "", User, |c, _| {
            Box::pin(async move {
                let request = AddMemoryRequest {
                    app_name: APP.into(),
                    user_id: USER.into(),
                    memories: vec![text_memory("", "user", "a memory added directly")],
                    ..Default::default()
                };
                c.memories().add_memory(request).await.map(drop)
            })
        }),
        row(
            "adk.memory.v1.MemoryService/SearchMemory",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = search_request(APP, USER, "tea");
                    c.memories().search_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/DeleteMemory",
            "memory_id",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = DeleteMemoryRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        target: Some(Target::MemoryId("doomed-memory".into())),
                    };
                    c.memories().delete_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/DeleteMemory",
            "session_id",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = DeleteMemoryRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        target: Some(Target::SessionId("inline".into())),
                    };
                    c.memories().delete_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/ListMemories",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = ListMemoriesRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        ..Default::default()
                    };
                    c.memories().list_memories(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/GenerateMemories",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = generate_request("I drink tea every morning");
                    c.memories().generate_memories(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/GetGenerationJob",
            "",
            User,
            |c, made| {
                Box::pin(async move {
                    let request = GetGenerationJobRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        job_id: made.job_id.clone(),
                    };
                    c.memories().get_generation_job(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/ListMemoryRevisions",
            "",
            User,
            |c, made| {
                Box::pin(async move {
                    let request = ListMemoryRevisionsRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        memory_id: made.generated_id.clone(),
                        ..Default::default()
                    };
                    c.memories().list_memory_revisions(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/RollbackMemory",
            "",
            User,
            |c, made| {
                Box::pin(async move {
                    let request = RollbackMemoryRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        memory_id: made.generated_id.clone(),
                        revision_id: made.revision_id.clone(),
                    };
                    c.memories().rollback_memory(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/PurgeMemories",
            "user_id",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = purge_request(USER);
                    c.memories().purge_memories(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/PurgeMemories",
            "every user",
            AllUsers,
            |c, _| {
                Box::pin(async move {
                    let request = purge_request("");
                    c.memories().purge_memories(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/AppendMemoryStream",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    // One event of the default trigger count of 20: buffered, nothing generated.
                    let request = AppendMemoryStreamRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        stream_id: SESSION.into(),
                        events: vec![event("streamed", "I drink tea")],
                    };
                    c.memories().append_memory_stream(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/FlushMemoryStream",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    // A stream that holds nothing: no job, so the model is not called.
                    let request = FlushMemoryStreamRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                        stream_id: "empty".into(),
                    };
                    c.memories().flush_memory_stream(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.memory.v1.MemoryService/ListMemoryStreams",
            "",
            User,
            |c, _| {
                Box::pin(async move {
                    let request = ListMemoryStreamsRequest {
                        app_name: APP.into(),
                        user_id: USER.into(),
                    };
                    c.memories().list_memory_streams(request).await.map(drop)
                })
            },
        ),
        row(
            "adk.admin.v1.AdminService/Snapshot",
            "session-svc",
            Store,
            |c, _| Box::pin(snapshot(c, Server::Session)),
        ),
        row(
            "adk.admin.v1.AdminService/Snapshot",
            "memory-svc",
            Store,
            |c, _| Box::pin(snapshot(c, Server::Memory)),
        ),
    ]
}

/// Opens a snapshot stream and reads its first chunk.
async fn snapshot(c: &Caller, server: Server) -> Result<(), Status> {
    let mut chunks = c
        .admin(server)
        .snapshot(SnapshotRequest {})
        .await?
        .into_inner();
    chunks.message().await.map(drop)
}

/// Everything both stores hold that any row could write, read with a token for every app.
async fn read_back(ops: &Caller) -> String {
    let mut out = Vec::new();
    let mut sessions = ops.sessions();
    for app in [APP, "b"] {
        let listed = sessions
            .list_sessions(ListSessionsRequest {
                app_name: app.into(),
                page_size: 1000,
                ..Default::default()
            })
            .await
            .expect("lists sessions")
            .into_inner();
        for s in listed.sessions {
            let whole = sessions
                .get_session(get_request(app, &s.user_id, &s.id))
                .await
                .expect("gets a listed session");
            out.push(format!("{:?}", whole.into_inner()));
        }
        let app_state = GetAppStateRequest {
            app_name: app.into(),
        };
        let app_state = sessions.get_app_state(app_state).await;
        out.push(format!(
            "{:?}",
            app_state.map(Response::into_inner).map_err(|s| s.code())
        ));
        for user in [USER, "bob"] {
            let user_state = GetUserStateRequest {
                app_name: app.into(),
                user_id: user.into(),
            };
            let user_state = sessions.get_user_state(user_state).await;
            out.push(format!(
                "{:?}",
                user_state.map(Response::into_inner).map_err(|s| s.code())
            ));
        }
    }
    let mut memories = ops.memories();
    for (app, user) in [(APP, USER), (APP, "bob"), ("b", USER)] {
        for kind in [MemoryKind::Raw, MemoryKind::Generated] {
            let listed = memories
                .list_memories(ListMemoriesRequest {
                    app_name: app.into(),
                    user_id: user.into(),
                    page_size: 1000,
                    kind: kind as i32,
                    ..Default::default()
                })
                .await
                .expect("lists memories")
                .into_inner();
            for m in listed.memories {
                let revisions = memories
                    .list_memory_revisions(ListMemoryRevisionsRequest {
                        app_name: app.into(),
                        user_id: user.into(),
                        memory_id: m.id.clone(),
                        page_size: 1000,
                        ..Default::default()
                    })
                    .await
                    .expect("lists revisions")
                    .into_inner();
                out.push(format!("{m:?} {revisions:?}"));
            }
        }
    }
    out.join("\n")
}

fn outcome(result: &Result<(), Status>) -> Option<Code> {
    result.as_ref().err().map(Status::code)
}

#[tokio::test]
async fn every_rpc_admits_exactly_its_callers() {
    // The table covers the contract: every RPC of every service has a row, and every row an RPC.
    let rows = rows();
    let covered: BTreeSet<String> = rows.iter().map(|r| r.rpc.to_owned()).collect();
    let contract: BTreeSet<String> = contract_rpcs().into_iter().collect();
    let without_row: Vec<_> = contract.difference(&covered).collect();
    let without_rpc: Vec<_> = covered.difference(&contract).collect();
    assert!(
        without_row.is_empty() && without_rpc.is_empty(),
        "RPCs of the contract without a row here: {without_row:?}; rows of no RPC: {without_rpc:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, TOKENS).unwrap();
    let session_token = dir.path().join("session-token");
    std::fs::write(&session_token, OPS).unwrap();
    let (model_url, script) = chat_model::model(vec![]).await;
    let session_tokens = tokens.clone();
    let sessions = SessionServer::start_with(|c| c.serve.tokens_file = Some(session_tokens)).await;
    let memories = MemoryServer::start_with(&format!("http://{}", sessions.addr), |c| {
        c.serve.tokens_file = Some(tokens);
        c.session_token_file = Some(session_token);
        c.generator = format!("openai:{model_url}").parse().unwrap();
        c.generator_model = Some("stand-in".into());
    })
    .await;
    let caller = |token| Caller {
        token,
        session_channel: Channel::from_shared(format!("http://{}", sessions.addr))
            .unwrap()
            .connect_lazy(),
        memory_channel: Channel::from_shared(format!("http://{}", memories.addr))
            .unwrap()
            .connect_lazy(),
    };

    // What the rows read, and the targets of the rows that delete.
    let alice = caller(Some(ALICE));
    let mut s = alice.sessions();
    for id in [SESSION, "doomed"] {
        s.create_session(create_request(
            APP,
            USER,
            id,
            r#"{"user:tz": "CET", "app:v": 1}"#,
        ))
        .await
        .unwrap();
    }
    s.append_event(append_request(APP, USER, SESSION, event("e0", "tea")))
        .await
        .unwrap();
    let bob = caller(Some(BOB));
    bob.sessions()
        .create_session(create_request(APP, "bob", "theirs", "{}"))
        .await
        .unwrap();
    let mut m = alice.memories();
    m.add_memory(AddMemoryRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        memories: vec![
            text_memory("kept-memory", "user", "green tea"),
            text_memory("doomed-memory", "user", "black tea"),
        ],
        ..Default::default()
    })
    .await
    .unwrap();
    // One answer for the setup's generation and one for the row's allowed call; a refusal that
    // reached the model would find it silent.
    chat_model::script(&script, vec![extracted(), extracted()]);
    let job = m
        .generate_memories(generate_request("I drink tea"))
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    let generated = m
        .list_memories(ListMemoriesRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            kind: MemoryKind::Generated as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(generated.len(), 1, "{job:?}");
    let revisions = m
        .list_memory_revisions(ListMemoryRevisionsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            memory_id: generated[0].id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .revisions;
    let made = Made {
        job_id: job.id,
        generated_id: generated[0].id.clone(),
        revision_id: revisions[0].revision_id.clone(),
    };

    let ops = caller(Some(OPS));
    let admin_served = postgres_url().is_none();
    let mut failures = Vec::new();
    for row in &rows {
        let name = format!("{} ({})", row.rpc, row.form);
        let before = read_back(&ops).await;
        let mut refused = Vec::new();
        for (token, expect) in row.scope.cases() {
            // The refusals come first: by the first allowed call, none may have written.
            if expect == Expect::Allowed && !refused.is_empty() {
                if read_back(&ops).await != before {
                    failures.push(format!("{name} refused {refused:?} but the store changed"));
                }
                refused.clear();
            }
            let result = (row.call)(&caller(token), &made).await;
            let want = match expect {
                _ if row.scope == Scope::Store && !admin_served => Some(Code::Unimplemented),
                Expect::Allowed => None,
                Expect::Unauthenticated => Some(Code::Unauthenticated),
                Expect::Denied => Some(Code::PermissionDenied),
            };
            if outcome(&result) != want {
                failures.push(format!(
                    "{name} with token {token:?}: want {want:?}, got {result:?}"
                ));
            }
            if expect != Expect::Allowed {
                refused.push(token);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    sessions.shutdown().await;
    memories.shutdown().await;
}
