//! The `openai` agent against a fake chat-completions server started in the test: streamed text
//! becomes partial events, a streamed `load_memory` call runs the tool and calls the model
//! again, and the requests carry the templated instruction, the session as messages, the tool
//! and the preloaded memories.

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
};

use adk_proto::{
    memory::v1::{AddMemoryRequest, MemoryEntry},
    session::v1::{part::Data, Content, Event, FunctionCall},
};
use adk_tests::{json, MemoryServer, SessionServer};
use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::Response,
    routing::post,
    Json, Router,
};
use runner_client::{
    agents::{OpenAiAgent, OpenAiConfig},
    event::function_call_part,
    event::text_part,
    memory_tools::{LOAD_MEMORY_DESCRIPTION, LOAD_MEMORY_INSTRUCTION},
    user_text, MemoryClient, Runner, RunnerError, SessionClient,
};
use serde_json::{json, Value};
use tokio_stream::StreamExt;

const APP: &str = "app";
const USER: &str = "alice";

/// What the fake model answers to one request.
enum Reply {
    /// An SSE body, delivered in small pieces that cut through events and JSON.
    Stream(Vec<Value>),
    /// An HTTP error.
    Error(StatusCode, &'static str),
}

/// A request the fake model received.
#[derive(Debug, Clone)]
struct Received {
    authorization: Option<String>,
    body: Value,
}

#[derive(Clone, Default)]
struct FakeModel {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl FakeModel {
    /// Serves the replies in order on a loopback port; returns the API base URL.
    async fn start(replies: Vec<Reply>) -> (Self, String) {
        let model = FakeModel {
            replies: Arc::new(Mutex::new(replies.into())),
            ..Default::default()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(model.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (model, format!("http://{addr}/v1/"))
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn completions(
    State(model): State<FakeModel>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    model.received.lock().unwrap().push(Received {
        authorization: headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned()),
        body: body.clone(),
    });
    if let Some(id) = unanswered_tool_call(&body) {
        // What OpenAI's endpoint answers to such a request.
        let message = format!(
            "An assistant message with 'tool_calls' must be followed by tool messages \
             responding to each 'tool_call_id'. The following tool_call_ids did not have \
             response messages: {id}"
        );
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from(
                json!({"error": {"message": message}}).to_string(),
            ))
            .unwrap();
    }
    let reply = model.replies.lock().unwrap().pop_front();
    match reply.expect("the test scripted a reply for every request") {
        Reply::Stream(chunks) => {
            let mut sse = String::from(": fake model\n\n");
            for chunk in chunks {
                sse.push_str(&format!("data: {chunk}\r\n\r\n"));
            }
            sse.push_str("data: [DONE]\n\n");
            let pieces: Vec<Result<Bytes, Infallible>> = sse
                .into_bytes()
                .chunks(7)
                .map(|piece| Ok(Bytes::copy_from_slice(piece)))
                .collect();
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(tokio_stream::iter(pieces)))
                .unwrap()
        }
        Reply::Error(status, text) => Response::builder()
            .status(status)
            .body(Body::from(text))
            .unwrap(),
    }
}

/// The id of a tool call in the request's messages that the tool messages right after it do
/// not answer.
fn unanswered_tool_call(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    for (index, message) in messages.iter().enumerate() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap_or_default();
            let answered = messages[index + 1..]
                .iter()
                .take_while(|m| m["role"] == "tool")
                .any(|m| m["tool_call_id"] == id);
            if !answered {
                return Some(id.to_owned());
            }
        }
    }
    None
}

fn text_chunk(text: &str) -> Value {
    json!({"model": "fake-model", "choices": [{"index": 0, "delta": {"content": text}}]})
}

fn finish_chunk(reason: &str) -> Value {
    json!({"model": "fake-model", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn config(endpoint: &str) -> OpenAiConfig {
    OpenAiConfig {
        name: "assistant".into(),
        endpoint: endpoint.into(),
        model: "fake-model".into(),
        api_key: None,
        instruction: String::new(),
        output_key: None,
        preload_memory: false,
    }
}

fn endpoint(addr: std::net::SocketAddr) -> String {
    format!("http://{addr}")
}

async fn collect(
    runner: &Runner,
    session: &str,
    message: &str,
    delta: Option<Value>,
) -> (Vec<Event>, Option<RunnerError>) {
    let delta = delta.and_then(|d| d.as_object().cloned());
    let mut stream = runner.run(USER, session, user_text(message), delta);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

fn texts(event: &Event) -> String {
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

#[tokio::test]
async fn streamed_text_and_a_streamed_load_memory_call_make_one_turn() {
    let sessions = SessionServer::start().await;
    let memory = MemoryServer::start(&endpoint(sessions.addr)).await;
    memory
        .client
        .clone()
        .add_memory(AddMemoryRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            memories: vec![MemoryEntry {
                content: Some(Content {
                    role: Some("user".into()),
                    parts: vec![text_part("My favorite project is Project Alpha.")],
                }),
                author: "user".into(),
                ..Default::default()
            }],
            custom_metadata: String::new(),
        })
        .await
        .unwrap();
    let (model, base_url) = FakeModel::start(vec![
        Reply::Stream(vec![
            json!({"model": "fake-model", "choices": [{"index": 0, "delta": {
                "role": "assistant",
                "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "load_memory", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {
                "tool_calls": [{"index": 0, "function": {"arguments": "{\"query\": "}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {
                "tool_calls": [{"index": 0, "function": {"arguments": "\"favorite project\"}"}}]}}]}),
            finish_chunk("tool_calls"),
        ]),
        Reply::Stream(vec![
            text_chunk("Your favorite "),
            text_chunk("project is "),
            text_chunk("Project Alpha."),
            finish_chunk("stop"),
        ]),
    ])
    .await;
    let agent = OpenAiAgent::new(OpenAiConfig {
        api_key: Some("sk-test".into()),
        instruction: "You help {user:name}.{temp:mood?}".into(),
        output_key: Some("answer".into()),
        preload_memory: true,
        ..config(&base_url)
    })
    .unwrap();
    let runner = Runner::new(
        APP,
        Arc::new(agent),
        SessionClient::connect(&endpoint(sessions.addr)).unwrap(),
    )
    .with_memory(MemoryClient::connect(&endpoint(memory.addr)).unwrap());

    let (events, error) = collect(
        &runner,
        "s",
        "What is my favorite project?",
        Some(json!({"user:name": "Alice"})),
    )
    .await;
    assert!(error.is_none(), "{error:?}");

    // What the caller saw: the call, the tool's answer, three fragments, the final reply.
    let partial: Vec<String> = events
        .iter()
        .filter(|e| e.partial == Some(true))
        .map(texts)
        .collect();
    assert_eq!(partial, ["Your favorite ", "project is ", "Project Alpha."]);
    let stored: Vec<&Event> = events.iter().filter(|e| e.partial != Some(true)).collect();
    let [call, response, answer] = stored[..] else {
        panic!("three stored events: {stored:#?}");
    };
    let Some(Data::FunctionCall(fc)) = &call.content.as_ref().unwrap().parts[0].data else {
        panic!("a function call: {call:?}");
    };
    assert_eq!(fc.id.as_deref(), Some("call_1"));
    assert_eq!(fc.name.as_deref(), Some("load_memory"));
    assert_eq!(json(&fc.args), json!({"query": "favorite project"}));
    let Some(Data::FunctionResponse(fr)) = &response.content.as_ref().unwrap().parts[0].data else {
        panic!("a function response: {response:?}");
    };
    assert_eq!(fr.id.as_deref(), Some("call_1"));
    let tool_result = json(&fr.response);
    assert_eq!(
        tool_result["memories"][0]["content"]["parts"][0]["text"],
        "My favorite project is Project Alpha."
    );
    assert_eq!(texts(answer), "Your favorite project is Project Alpha.");
    assert_eq!(answer.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(answer.model_version.as_deref(), Some("fake-model"));
    assert_eq!(
        json(&answer.actions.as_ref().unwrap().state_delta),
        json!({"answer": "Your favorite project is Project Alpha."})
    );
    for event in [call, response, answer] {
        assert_eq!(event.author, "assistant");
    }

    // What the model was sent.
    let received = model.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].authorization.as_deref(), Some("Bearer sk-test"));
    let first = &received[0].body;
    assert_eq!(first["model"], "fake-model");
    assert_eq!(first["stream"], true);
    assert_eq!(
        first["tools"],
        json!([{"type": "function", "function": {
            "name": "load_memory",
            "description": LOAD_MEMORY_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                           "required": ["query"]}
        }}])
    );
    let system = format!("You help Alice.\n\n{LOAD_MEMORY_INSTRUCTION}");
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[0], json!({"role": "system", "content": system}));
    assert_eq!(messages[1]["role"], "user");
    let preload = messages[1]["content"].as_str().unwrap();
    assert!(
        preload.starts_with(
            "The following content is from your previous conversations with the user.\n"
        ),
        "{preload}"
    );
    assert!(preload.contains("\n<PAST_CONVERSATIONS>\n"), "{preload}");
    assert!(
        preload.ends_with("\nuser: My favorite project is Project Alpha.\n</PAST_CONVERSATIONS>\n"),
        "{preload}"
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": "What is my favorite project?"})
    );

    let second = &received[1].body;
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(messages[..3], first["messages"].as_array().unwrap()[..]);
    assert_eq!(
        messages[3],
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "load_memory", "arguments": "{\"query\":\"favorite project\"}"}
        }]})
    );
    assert_eq!(messages[4]["role"], "tool");
    assert_eq!(messages[4]["tool_call_id"], "call_1");
    assert_eq!(
        json(messages[4]["content"].as_str().unwrap()),
        tool_result,
        "the model reads the tool's answer as stored"
    );

    // What the session holds: no fragments, and the output key.
    let s = sessions.get(APP, USER, "s").await;
    assert_eq!(s.events.len(), 4);
    assert_eq!(
        json(&s.state),
        json!({"user:name": "Alice", "answer": "Your favorite project is Project Alpha."})
    );
}

#[tokio::test]
async fn the_next_turn_sends_the_conversation_so_far_and_no_key_means_no_authorization() {
    let sessions = SessionServer::start().await;
    let (model, base_url) = FakeModel::start(vec![
        Reply::Stream(vec![text_chunk("Hello!"), finish_chunk("stop")]),
        Reply::Stream(vec![text_chunk("Still here."), finish_chunk("length")]),
    ])
    .await;
    let runner = Runner::new(
        APP,
        Arc::new(OpenAiAgent::new(config(&base_url)).unwrap()),
        SessionClient::connect(&endpoint(sessions.addr)).unwrap(),
    );
    let (_, error) = collect(&runner, "s", "Hi", None).await;
    assert!(error.is_none(), "{error:?}");
    let (events, error) = collect(&runner, "s", "Are you there?", None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events.last().unwrap().finish_reason.as_deref(),
        Some("MAX_TOKENS")
    );

    let received = model.received();
    assert_eq!(received[1].authorization, None);
    let body = &received[1].body;
    assert!(body.get("tools").is_none(), "no memory service, no tool");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Are you there?"},
        ]),
        "no instruction, no system message"
    );
}

#[tokio::test]
async fn model_failures_end_the_turn_with_their_reason() {
    let sessions = SessionServer::start().await;
    let (_, base_url) = FakeModel::start(vec![
        Reply::Error(StatusCode::INTERNAL_SERVER_ERROR, "model exploded"),
        Reply::Stream(vec![
            text_chunk("Half a"),
            json!({"error": {"message": "overloaded", "type": "server_error"}}),
        ]),
    ])
    .await;
    let runner = Runner::new(
        APP,
        Arc::new(OpenAiAgent::new(config(&base_url)).unwrap()),
        SessionClient::connect(&endpoint(sessions.addr)).unwrap(),
    );

    let (events, error) = collect(&runner, "s", "Hi", None).await;
    assert!(events.is_empty());
    let error = error.expect("the turn fails").to_string();
    assert!(
        error.contains("HTTP 500") && error.contains("model exploded"),
        "{error}"
    );

    let (events, error) = collect(&runner, "s", "Hi again", None).await;
    assert_eq!(events.len(), 1, "the fragment before the error was shown");
    assert!(matches!(error, Some(RunnerError::Model { reason, .. }) if reason == "overloaded"));

    let s = sessions.get(APP, USER, "s").await;
    let authors: Vec<&str> = s.events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(
        authors,
        ["user", "user"],
        "failed turns store only the user's messages"
    );

    let (_, error) = collect(
        &Runner::new(
            APP,
            Arc::new(OpenAiAgent::new(config("http://127.0.0.1:9/v1")).unwrap()),
            SessionClient::connect(&endpoint(sessions.addr)).unwrap(),
        ),
        "s",
        "Anyone?",
        None,
    )
    .await;
    let error = error.expect("nothing listens there").to_string();
    assert!(error.contains("cannot reach it"), "{error}");
}

fn load_memory_call(id: &str) -> Value {
    json!({"model": "fake-model", "choices": [{"index": 0, "delta": {
        "role": "assistant",
        "tool_calls": [{"index": 0, "id": id, "type": "function",
                        "function": {"name": "load_memory", "arguments": "{\"query\": \"project\"}"}}]}}]})
}

#[tokio::test]
async fn a_failed_tool_call_leaves_a_session_the_next_turn_can_use() {
    let sessions = SessionServer::start().await;
    let memory = MemoryServer::start(&endpoint(sessions.addr)).await;
    let memory_endpoint = endpoint(memory.addr);
    memory.shutdown().await;
    let (model, base_url) = FakeModel::start(vec![
        Reply::Stream(vec![load_memory_call("call_1"), finish_chunk("tool_calls")]),
        Reply::Stream(vec![text_chunk("My memory is down."), finish_chunk("stop")]),
        Reply::Stream(vec![text_chunk("Hello again."), finish_chunk("stop")]),
        Reply::Stream(vec![text_chunk("Still fine."), finish_chunk("stop")]),
    ])
    .await;
    let runner = Runner::new(
        APP,
        Arc::new(OpenAiAgent::new(config(&base_url)).unwrap()),
        SessionClient::connect(&endpoint(sessions.addr)).unwrap(),
    )
    .with_memory(MemoryClient::connect(&memory_endpoint).unwrap());

    // memory-svc is stopped: the call is answered with the failure, and the model goes on.
    let (events, error) = collect(&runner, "s", "Which project?", None).await;
    assert!(error.is_none(), "{error:?}");
    let stored: Vec<&Event> = events.iter().filter(|e| e.partial != Some(true)).collect();
    let [_, response, answer] = stored[..] else {
        panic!("call, response, answer: {stored:#?}");
    };
    let Some(Data::FunctionResponse(fr)) = &response.content.as_ref().unwrap().parts[0].data else {
        panic!("a function response: {response:?}");
    };
    assert_eq!(fr.id.as_deref(), Some("call_1"));
    let failure = json(&fr.response)["error"].as_str().unwrap().to_owned();
    assert!(
        failure.contains("cannot reach memory-svc"),
        "the model reads why: {failure}"
    );
    assert_eq!(texts(answer), "My memory is down.");

    // The next turn of the session works.
    let (_, error) = collect(&runner, "s", "Hello?", None).await;
    assert!(error.is_none(), "{error:?}");

    // A call left unanswered in the session (by a turn that failed before its tool answered)
    // is answered in the request, and the turn works.
    sessions
        .append(
            APP,
            USER,
            "s",
            Event {
                author: "assistant".into(),
                content: Some(Content {
                    role: Some("model".into()),
                    parts: vec![function_call_part(FunctionCall {
                        id: Some("call_2".into()),
                        name: Some("load_memory".into()),
                        args: r#"{"query": "project"}"#.into(),
                        ..Default::default()
                    })],
                }),
                ..Default::default()
            },
        )
        .await;
    let (events, error) = collect(&runner, "s", "And now?", None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(texts(events.last().unwrap()), "Still fine.");
    let received = model.received();
    assert_eq!(received.len(), 4);
    let messages = received[3].body["messages"].as_array().unwrap();
    let answered = messages
        .iter()
        .find(|m| m["tool_call_id"] == "call_2")
        .expect("the dangling call is answered");
    assert!(answered["content"]
        .as_str()
        .unwrap()
        .contains("was not answered"));
}
