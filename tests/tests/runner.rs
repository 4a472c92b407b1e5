//! runner-client against real servers: ADK's Runner rules (R1-R3, R6), `temp:` state, templating,
//! output_key, optimistic concurrency over the turn's AppendEvents stream, partial events for
//! live watchers, and the end-to-end memory scenario with the `recall` agent.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use adk_proto::session::v1::{
    part::Data, session_service_client::SessionServiceClient, watch_session_response::Change,
    Content, Event, EventActions, WatchSessionRequest,
};
use adk_tests::{append_request, json, live, text_event, MemoryServer, SessionServer};
use runner_client::{
    agents::RecallAgent,
    async_trait,
    event::{partial_text_event, text_event as agent_text},
    user_text, Access, Agent, InvocationContext, MemoryClient, Runner, RunnerError, SessionClient,
};
use serde_json::{json, Value};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

const APP: &str = "app";
const USER: &str = "alice";

fn endpoint(addr: std::net::SocketAddr) -> String {
    format!("http://{addr}")
}

fn runner_of(sessions: &SessionServer, agent: impl Agent + 'static) -> Runner {
    let client = SessionClient::connect(&endpoint(sessions.addr)).unwrap();
    Runner::new(APP, Arc::new(agent), client)
}

fn recall_runner(sessions: &SessionServer, memory: &MemoryServer) -> Runner {
    runner_of(sessions, RecallAgent::new("recall"))
        .with_memory(MemoryClient::connect(&endpoint(memory.addr)).unwrap())
}

/// Runs a turn and collects what it yields (the error, if any, last).
async fn turn(
    runner: &Runner,
    session: &str,
    message: Content,
    delta: Option<Value>,
) -> (Vec<Event>, Option<RunnerError>) {
    let delta = delta.map(|d| match d {
        Value::Object(map) => map,
        _ => panic!("a delta is an object"),
    });
    let mut stream = runner.run(USER, session, message, delta);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

async fn ok_turn(runner: &Runner, session: &str, text: &str) -> Vec<Event> {
    let (events, error) = turn(runner, session, user_text(text), None).await;
    assert!(error.is_none(), "turn failed: {error:?}");
    events
}

fn text_of(event: &Event) -> String {
    event
        .content
        .iter()
        .flat_map(|c| c.parts.iter())
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn delta_of(event: &Event) -> Value {
    match event.actions.as_ref().map(|a| a.state_delta.as_str()) {
        None | Some("") => json!({}),
        Some(text) => json(text),
    }
}

#[tokio::test]
async fn favourite_project_is_recalled_in_another_session_through_load_memory() {
    let sessions = SessionServer::start().await;
    let memory = MemoryServer::start(&endpoint(sessions.addr)).await;
    let runner = recall_runner(&sessions, &memory);

    let told = ok_turn(&runner, "a", "My favorite project is Project Alpha.").await;
    assert_eq!(told.len(), 1);
    assert_eq!(text_of(&told[0]), "Noted.");
    let entries = MemoryClient::connect(&endpoint(memory.addr))
        .unwrap()
        .add_session(APP, USER, "a")
        .await
        .unwrap();
    assert_eq!(entries, 2, "the statement and the acknowledgement");

    let asked = ok_turn(&runner, "b", "What is my favorite project?").await;
    assert_eq!(asked.len(), 3, "{asked:#?}");
    let answer = text_of(&asked[2]);
    assert!(answer.contains("Project Alpha"), "{answer}");

    let b = sessions.get(APP, USER, "b").await;
    assert_eq!(b.last_sequence, 4);
    let [user, call, response, reply] = &b.events[..] else {
        panic!("session b holds exactly four events: {:#?}", b.events);
    };
    assert_eq!(user.author, "user");
    assert_eq!(text_of(user), "What is my favorite project?");
    assert!(user.invocation_id.starts_with("e-"));
    for (event, sequence) in [(user, 1), (call, 2), (response, 3), (reply, 4)] {
        assert_eq!(event.sequence, sequence);
        assert_eq!(event.invocation_id, user.invocation_id);
    }
    for event in [call, response, reply] {
        assert_eq!(event.author, "recall");
    }

    let Some(Data::FunctionCall(fc)) = &call.content.as_ref().unwrap().parts[0].data else {
        panic!("a function call: {call:?}");
    };
    assert_eq!(fc.name.as_deref(), Some("load_memory"));
    assert_eq!(
        json(&fc.args),
        json!({"query": "What is my favorite project?"})
    );

    let Some(Data::FunctionResponse(fr)) = &response.content.as_ref().unwrap().parts[0].data else {
        panic!("a function response: {response:?}");
    };
    assert_eq!(fr.name.as_deref(), Some("load_memory"));
    assert_eq!(fr.id, fc.id, "the response answers the call");
    assert_eq!(
        response.content.as_ref().unwrap().role.as_deref(),
        Some("user")
    );
    let memories = json(&fr.response)["memories"].clone();
    assert_eq!(
        memories[0]["content"]["parts"][0]["text"],
        "My favorite project is Project Alpha."
    );
    assert_eq!(memories[0]["session_id"], "a");

    assert_eq!(text_of(reply), answer);
    assert_eq!(asked[2], *reply, "the caller got the events as stored");
}

#[tokio::test]
async fn the_session_is_created_once_and_the_message_becomes_a_user_message() {
    let sessions = SessionServer::start().await;
    let runner = runner_of(&sessions, RecallAgent::new("recall"));
    let mut message = user_text("Hello.");
    message.role = Some("model".into());
    let (_, error) = turn(&runner, "new", message, Some(json!({"greeted": true}))).await;
    assert!(error.is_none(), "{error:?}");
    ok_turn(&runner, "new", "Again.").await;

    let s = sessions.get(APP, USER, "new").await;
    assert_eq!(json(&s.state), json!({"greeted": true}));
    assert_eq!(s.events.len(), 4);
    let first = &s.events[0];
    assert_eq!(
        first.content.as_ref().unwrap().role.as_deref(),
        Some("user")
    );
    assert_eq!(
        delta_of(first),
        json!({"greeted": true}),
        "R2: the delta rides on the user event"
    );
    assert_ne!(s.events[0].invocation_id, s.events[2].invocation_id);

    let (events, error) = turn(&runner, "new", Content::default(), None).await;
    assert!(events.is_empty());
    assert!(
        matches!(error, Some(RunnerError::InvalidMessage(_))),
        "{error:?}"
    );
}

/// An agent that looks at the state, sets temp and session keys, and reports what it saw.
struct StateProbe {
    seen: Arc<Mutex<Vec<Value>>>,
}

#[async_trait]
impl Agent for StateProbe {
    fn name(&self) -> &str {
        "probe"
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<(), RunnerError> {
        let record = |ctx: &InvocationContext| Value::Object(ctx.state().clone());
        self.seen.lock().unwrap().push(record(ctx));
        let mut event = agent_text("setting state");
        event.actions = Some(EventActions {
            state_delta: json!({"temp:scratch": "t1", "count": 1, "user:seen": true}).to_string(),
            ..Default::default()
        });
        let stored = ctx.emit(event).await?;
        assert_eq!(
            delta_of(&stored),
            json!({"count": 1, "user:seen": true}),
            "S6.2: temp keys are trimmed from the stored event"
        );
        self.seen.lock().unwrap().push(record(ctx));
        let rendered = ctx.render("{temp:mood?}/{temp:scratch?}/{count}/{user:seen}/{missing?}")?;
        ctx.emit(agent_text(rendered)).await?;
        Ok(())
    }
}

#[tokio::test]
async fn temp_state_is_visible_during_the_invocation_only() {
    let sessions = SessionServer::start().await;
    sessions
        .create(APP, USER, "s", json!({"app:theme": "dark"}))
        .await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runner = runner_of(&sessions, StateProbe { seen: seen.clone() });

    let (events, error) = turn(
        &runner,
        "s",
        user_text("go"),
        Some(json!({"temp:mood": "happy", "topic": "state"})),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events[1]), "happy/t1/1/true/");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[0],
            json!({"app:theme": "dark", "temp:mood": "happy", "topic": "state"})
        );
        assert_eq!(
            seen[1],
            json!({"app:theme": "dark", "temp:mood": "happy", "topic": "state",
                   "temp:scratch": "t1", "count": 1, "user:seen": true})
        );
    }

    let s = sessions.get(APP, USER, "s").await;
    assert_eq!(
        json(&s.state),
        json!({"app:theme": "dark", "topic": "state", "count": 1, "user:seen": true}),
        "temp keys are never stored"
    );
    for event in &s.events {
        let delta = delta_of(event);
        assert!(
            delta
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("temp:")),
            "{delta}"
        );
    }

    // The next invocation starts without the previous one's temp keys.
    ok_turn(&runner, "s", "again").await;
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[2],
        json!({"app:theme": "dark", "topic": "state", "count": 1, "user:seen": true})
    );
}

/// An agent whose instruction names a key the state does not have.
struct Templated;

#[async_trait]
impl Agent for Templated {
    fn name(&self) -> &str {
        "templated"
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<(), RunnerError> {
        let instruction = ctx.render("You help {user:name}.")?;
        ctx.emit(agent_text(instruction)).await?;
        Ok(())
    }
}

#[tokio::test]
async fn a_missing_template_key_fails_the_turn_and_an_optional_one_does_not() {
    let sessions = SessionServer::start().await;
    let runner = runner_of(&sessions, Templated);
    let (events, error) = turn(&runner, "s", user_text("hi"), None).await;
    assert!(events.is_empty());
    let error = error.expect("the turn fails");
    assert!(matches!(&error, RunnerError::MissingStateKey(k) if k == "user:name"));
    assert_eq!(
        error.to_string(),
        "Context variable not found: `user:name`."
    );

    let (events, error) = turn(
        &runner,
        "s",
        user_text("hi"),
        Some(json!({"user:name": "Alice"})),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events[0]), "You help Alice.");
}

#[tokio::test]
async fn output_key_saves_the_final_reply_in_state() {
    let sessions = SessionServer::start().await;
    let memory = MemoryServer::start(&endpoint(sessions.addr)).await;
    let runner = runner_of(
        &sessions,
        RecallAgent::new("recall").with_output_key("last_reply"),
    )
    .with_memory(MemoryClient::connect(&endpoint(memory.addr)).unwrap());

    let events = ok_turn(&runner, "s", "I like tea.").await;
    assert_eq!(delta_of(&events[0]), json!({"last_reply": "Noted."}));
    let events = ok_turn(&runner, "s", "What do I like?").await;
    assert_eq!(events.len(), 3);
    assert_eq!(
        delta_of(&events[0]),
        json!({}),
        "a function call is not a final reply"
    );
    assert_eq!(
        delta_of(&events[1]),
        json!({}),
        "nor is a function response"
    );
    let answer = text_of(&events[2]);
    assert_eq!(delta_of(&events[2]), json!({"last_reply": answer}));
    let s = sessions.get(APP, USER, "s").await;
    assert_eq!(json(&s.state), json!({"last_reply": answer}));
}

/// An agent during whose turn someone else appends to the session.
struct Interrupted {
    other_writer: SessionServiceClient<Channel>,
}

#[async_trait]
impl Agent for Interrupted {
    fn name(&self) -> &str {
        "slow"
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<(), RunnerError> {
        let request = append_request(
            APP,
            USER,
            ctx.session_id(),
            text_event("other", "meanwhile"),
        );
        self.other_writer
            .clone()
            .append_event(request)
            .await
            .expect("the other writer appends");
        ctx.emit(agent_text("too late")).await?;
        Ok(())
    }
}

#[tokio::test]
async fn another_writer_during_the_turn_is_a_conflict() {
    let sessions = SessionServer::start().await;
    sessions.create(APP, USER, "s", json!({})).await;
    let runner = runner_of(
        &sessions,
        Interrupted {
            other_writer: sessions.connect().await,
        },
    );

    let (events, error) = turn(&runner, "s", user_text("hi"), None).await;
    assert!(events.is_empty(), "{events:?}");
    match error {
        Some(RunnerError::Conflict {
            session_id,
            expected_sequence,
            current_sequence,
        }) => {
            assert_eq!(session_id, "s");
            assert_eq!(expected_sequence, 1);
            assert_eq!(current_sequence, 2);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let s = sessions.get(APP, USER, "s").await;
    let authors: Vec<&str> = s.events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(
        authors,
        ["user", "other"],
        "the agent's event was not stored"
    );
}

/// An agent that streams its reply.
struct Streaming;

#[async_trait]
impl Agent for Streaming {
    fn name(&self) -> &str {
        "streamer"
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<(), RunnerError> {
        for piece in ["Hel", "lo ", "there"] {
            ctx.emit(partial_text_event(piece)).await?;
        }
        ctx.emit(agent_text("Hello there")).await?;
        Ok(())
    }
}

#[tokio::test]
async fn partial_events_reach_the_caller_and_live_watchers_but_are_not_stored() {
    let sessions = SessionServer::start().await;
    sessions.create(APP, USER, "s", json!({})).await;
    let mut watch = sessions
        .client
        .clone()
        .watch_session(WatchSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s".into(),
            after_sequence: 0,
            include_partial: true,
        })
        .await
        .unwrap()
        .into_inner();
    // Partial events are live only: the turn starts once the watcher relays one.
    live::until_live(&sessions.client, (APP, USER, "s"), &mut watch).await;
    let runner = runner_of(&sessions, Streaming);

    let events = ok_turn(&runner, "s", "hi").await;
    let partial: Vec<String> = events
        .iter()
        .filter(|e| e.partial == Some(true))
        .map(text_of)
        .collect();
    assert_eq!(partial, ["Hel", "lo ", "there"]);
    assert_eq!(events.len(), 4);
    assert_eq!(events[3].sequence, 2);

    let mut watched = Vec::new();
    while watched.len() < 5 {
        let change = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("the watcher hears of the turn")
            .unwrap()
            .unwrap();
        if let Some(Change::Event(e)) = change.change {
            if !live::is_probe(&e) {
                watched.push((e.partial == Some(true), text_of(&e)));
            }
        }
    }
    assert_eq!(
        watched,
        [
            (false, "hi".to_owned()),
            (true, "Hel".to_owned()),
            (true, "lo ".to_owned()),
            (true, "there".to_owned()),
            (false, "Hello there".to_owned()),
        ]
    );
    let s = sessions.get(APP, USER, "s").await;
    assert_eq!(
        s.events.len(),
        2,
        "only the user's message and the final reply are stored"
    );
}

#[tokio::test]
async fn remembering_adds_the_session_to_memory_after_the_turn() {
    let sessions = SessionServer::start().await;
    let memory = MemoryServer::start(&endpoint(sessions.addr)).await;
    let memory_client = MemoryClient::connect(&endpoint(memory.addr)).unwrap();
    let runner = recall_runner(&sessions, &memory).remember_sessions(true);
    ok_turn(&runner, "s", "The cat is called Miso.").await;
    let found = memory_client.search(APP, USER, "cat").await.unwrap();
    // The user's message; the recall agent does not remember its acknowledgement.
    assert_eq!(found.len(), 1);
    assert!(found.iter().all(|m| m.session_id == "s"));
    assert_eq!(found[0].author, "user");

    let forgetful = runner_of(&sessions, RecallAgent::new("recall")).remember_sessions(true);
    let (_, error) = turn(&forgetful, "t", user_text("hi"), None).await;
    assert!(
        matches!(error, Some(RunnerError::NoMemoryService { .. })),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_service_that_is_down_is_named_in_the_error() {
    // Nothing listens on port 9 of the loopback.
    let client = SessionClient::connect("http://127.0.0.1:9").unwrap();
    let runner = Runner::new(APP, Arc::new(RecallAgent::new("recall")), client);
    let (_, error) = turn(&runner, "s", user_text("hi"), None).await;
    let error = error.expect("the turn fails");
    assert!(
        matches!(error, RunnerError::Unreachable { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "cannot reach session-svc at http://127.0.0.1:9: connection refused — is it running?"
    );
}

#[tokio::test]
async fn a_token_is_presented_to_services_that_require_one() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(
        &tokens,
        r#"{"tokens": [{"name": "runner", "token": "runner-s3cr3t", "apps": ["app"]}]}"#,
    )
    .unwrap();
    let sessions = SessionServer::start_with(|c| c.serve.tokens_file = Some(tokens)).await;
    let access = Access {
        token: Some("runner-s3cr3t\n".into()),
        ca_pem: None,
    };
    let with_token = Runner::new(
        APP,
        Arc::new(RecallAgent::new("recall")),
        SessionClient::connect_with(&endpoint(sessions.addr), &access).unwrap(),
    );
    let events = ok_turn(&with_token, "s", "Hi.").await;
    assert_eq!(text_of(&events[0]), "Noted.");

    let without = runner_of(&sessions, RecallAgent::new("recall"));
    let (_, error) = turn(&without, "s", user_text("Hi."), None).await;
    assert!(
        matches!(
            error,
            Some(RunnerError::Service {
                code: tonic::Code::Unauthenticated,
                ..
            })
        ),
        "{error:?}"
    );
}
