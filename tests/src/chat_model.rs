//! A local HTTP server standing in for an OpenAI-compatible chat model
//! (`POST /v1/chat/completions`): it answers as a test scripts it, keeps every request, and
//! reports token usage counted as a quarter of the characters.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{extract::State, http::StatusCode, routing::post, Json, Router};
use serde_json::{json, Value};

/// How the stand-in answers one request.
pub enum Answer {
    /// A completion whose content is this JSON.
    Content(Value),
    /// A completion whose content is this text (not necessarily JSON).
    Text(String),
    /// This HTTP status.
    Status(u16),
    /// Never answers; `arrived` is notified.
    Hang(Arc<tokio::sync::Notify>),
    /// Notifies `arrived`, then gives `then` (content or text) once `release` is notified.
    Held {
        arrived: Arc<tokio::sync::Notify>,
        release: Arc<tokio::sync::Notify>,
        then: Box<Answer>,
    },
}

#[derive(Default)]
pub struct Script {
    answers: VecDeque<Answer>,
    /// Every request body, in order.
    requests: Vec<Value>,
    /// The completion tokens of every answer given, in order.
    completions: Vec<usize>,
}

pub type Shared = Arc<Mutex<Script>>;

/// Tokens as the stand-in counts them: a quarter of the characters, rounded up.
pub fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

async fn chat(State(script): State<Shared>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let answer = {
        let mut script = script.lock().unwrap();
        script.requests.push(body.clone());
        script.answers.pop_front()
    };
    let prompt: usize = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| tokens(m["content"].as_str().unwrap_or_default()))
        .sum();
    let content = match answer {
        Some(Answer::Content(value)) => value.to_string(),
        Some(Answer::Text(text)) => text,
        Some(Answer::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap();
            return (status, Json(json!({"error": {"message": "scripted"}})));
        }
        Some(Answer::Hang(arrived)) => {
            arrived.notify_one();
            std::future::pending::<()>().await;
            unreachable!()
        }
        Some(Answer::Held {
            arrived,
            release,
            then,
        }) => {
            arrived.notify_one();
            release.notified().await;
            match *then {
                Answer::Content(value) => value.to_string(),
                Answer::Text(text) => text,
                _ => panic!("a held answer is content or text"),
            }
        }
        None => {
            return (
                StatusCode::IM_A_TEAPOT,
                Json(json!({"error": "unscripted call"})),
            )
        }
    };
    let completion = tokens(&content);
    script.lock().unwrap().completions.push(completion);
    (
        StatusCode::OK,
        Json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        })),
    )
}

/// A stand-in model; its base URL and script.
pub async fn model(answers: Vec<Answer>) -> (String, Shared) {
    let script = Shared::default();
    script.lock().unwrap().answers.extend(answers);
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), script)
}

pub fn script(shared: &Shared, answers: Vec<Answer>) {
    shared.lock().unwrap().answers.extend(answers);
}

pub fn requests(shared: &Shared) -> Vec<Value> {
    shared.lock().unwrap().requests.clone()
}

/// The completion tokens of every answer given so far.
pub fn completions(shared: &Shared) -> Vec<usize> {
    shared.lock().unwrap().completions.clone()
}

/// The user message of a request.
pub fn prompt(request: &Value) -> String {
    request["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub fn facts(items: &[(&str, &str, &[&str])]) -> Answer {
    let facts: Vec<Value> = items
        .iter()
        .map(|(topic, fact, ids)| json!({"topic": topic, "fact": fact, "source_event_ids": ids}))
        .collect();
    Answer::Content(json!({ "facts": facts }))
}

pub fn decisions(items: &[(usize, &str, &str, &str)]) -> Answer {
    let decisions: Vec<Value> = items
        .iter()
        .map(|(fact, action, id, text)| {
            json!({"fact": fact, "action": action, "memory_id": id, "text": text})
        })
        .collect();
    Answer::Content(json!({ "decisions": decisions }))
}
