//! `openai`: an agent backed by any OpenAI-compatible chat-completions endpoint (llama.cpp,
//! Ollama, vLLM, or a hosted one), streamed, with the `load_memory` tool.
//!
//! Each model call is built from the session (see [`messages`]) under the templated
//! instruction. Streamed text becomes partial events as it arrives. When the model calls tools,
//! the calls become one function-call event, the runner's tools answer with a function-response
//! event, and the model is called again; the text of the reply that calls no tool is the final,
//! stored event.

mod messages;
mod sse;

use std::collections::BTreeMap;

use adk_proto::session::v1::{Content, Event, FunctionCall};
use async_trait::async_trait;
use serde_json::{json, Value};
use tokio_stream::StreamExt as _;

use crate::{
    agent::Agent,
    error::{Result, RunnerError},
    event::{function_call_part, new_function_call_id, partial_text_event, text_event, text_part},
    invocation::InvocationContext,
    memory_tools::{
        load_memory_parameters, LOAD_MEMORY, LOAD_MEMORY_DESCRIPTION, LOAD_MEMORY_INSTRUCTION,
    },
};

/// Model calls one turn may make; a model that keeps calling tools is stopped there.
const MAX_MODEL_CALLS: usize = 10;

/// Longest error body from the endpoint quoted in an error.
const MAX_ERROR_BODY: usize = 2_000;

/// How to reach the model and what the agent is.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The agent's name, the author of its events.
    pub name: String,
    /// Base URL of the API, e.g. `http://127.0.0.1:11434/v1`; `/chat/completions` is appended.
    pub endpoint: String,
    pub model: String,
    /// Sent as a bearer token when set.
    pub api_key: Option<String>,
    /// The system instruction, templated from state on every model call.
    pub instruction: String,
    pub output_key: Option<String>,
    /// Put memories matching the user's message in front of the model on every call.
    pub preload_memory: bool,
}

/// The chat-completions agent.
#[derive(Debug, Clone)]
pub struct OpenAiAgent {
    config: OpenAiConfig,
    url: String,
    http: reqwest::Client,
}

impl OpenAiAgent {
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let url = format!("{}/chat/completions", config.endpoint.trim_end_matches('/'));
        if let Err(e) = reqwest::Url::parse(&url) {
            return Err(RunnerError::InvalidEndpoint {
                endpoint: config.endpoint.clone(),
                reason: e.to_string(),
            });
        }
        // reqwest is built without a TLS crypto provider of its own: it uses the process-wide
        // one, ring, which the gRPC side links already (no second crypto library to compile).
        // An error only means a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http =
            reqwest::Client::builder()
                .build()
                .map_err(|e| RunnerError::InvalidEndpoint {
                    endpoint: config.endpoint.clone(),
                    reason: format!("{:#}", anyhow::Error::new(e)),
                })?;
        Ok(Self { config, url, http })
    }

    /// The request body of the next model call.
    async fn request_body(&self, ctx: &InvocationContext) -> Result<Value> {
        let mut system = ctx.render(&self.config.instruction)?;
        let tools = ctx.has_memory();
        if tools {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(LOAD_MEMORY_INSTRUCTION);
        }
        let preload = if self.config.preload_memory {
            ctx.preload_memory().await
        } else {
            None
        };
        let messages = messages::chat_messages(
            ctx.events(),
            &system,
            ctx.invocation_id(),
            preload.as_deref(),
        );
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": true,
        });
        if tools {
            body["tools"] = json!([{
                "type": "function",
                "function": {
                    "name": LOAD_MEMORY,
                    "description": LOAD_MEMORY_DESCRIPTION,
                    "parameters": load_memory_parameters(),
                },
            }]);
        }
        Ok(body)
    }

    /// One streamed model call: text deltas are emitted as partial events as they arrive.
    async fn call_model(&self, ctx: &mut InvocationContext, body: &Value) -> Result<Reply> {
        let mut request = self.http.post(&self.url).json(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.error(format!("cannot reach it: {:#}", anyhow::Error::new(e))))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let body: String = body.chars().take(MAX_ERROR_BODY).collect();
            return Err(self.error(format!("HTTP {status}: {body}")));
        }
        let mut reply = Reply::default();
        let mut decoder = sse::SseDecoder::default();
        let mut bytes = response.bytes_stream();
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| {
                self.error(format!("the stream broke: {:#}", anyhow::Error::new(e)))
            })?;
            for data in decoder.push(&chunk) {
                if self.on_chunk(ctx, &mut reply, &data).await? {
                    return Ok(reply);
                }
            }
        }
        if let Some(data) = decoder.finish() {
            self.on_chunk(ctx, &mut reply, &data).await?;
        }
        Ok(reply)
    }

    /// Applies one SSE `data` payload to the reply; true at the end of the stream (`[DONE]`).
    async fn on_chunk(
        &self,
        ctx: &mut InvocationContext,
        reply: &mut Reply,
        data: &str,
    ) -> Result<bool> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| self.error(format!("unreadable stream chunk ({e}): {data}")))?;
        if let Some(error) = chunk.get("error") {
            let message = error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(self.error(message));
        }
        if let Some(model) = chunk["model"].as_str() {
            reply.model = Some(model.to_owned());
        }
        let choice = &chunk["choices"][0];
        if let Some(reason) = choice["finish_reason"].as_str() {
            reply.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        for (position, call) in delta["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            // Streamed calls arrive in pieces keyed by index: the id and name first, then the
            // arguments a few characters at a time.
            let index = call["index"].as_u64().unwrap_or(position as u64);
            let pending = reply.tool_calls.entry(index).or_default();
            if let Some(id) = call["id"].as_str().filter(|id| !id.is_empty()) {
                pending.id = Some(id.to_owned());
            }
            if let Some(name) = call["function"]["name"].as_str() {
                pending.name.push_str(name);
            }
            if let Some(arguments) = call["function"]["arguments"].as_str() {
                pending.arguments.push_str(arguments);
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            reply.text.push_str(text);
            ctx.emit(partial_text_event(text)).await?;
        }
        Ok(false)
    }

    fn error(&self, reason: String) -> RunnerError {
        RunnerError::Model {
            endpoint: self.url.clone(),
            reason,
        }
    }
}

/// What one model call produced.
#[derive(Debug, Default)]
struct Reply {
    text: String,
    tool_calls: BTreeMap<u64, PendingCall>,
    finish_reason: Option<String>,
    model: Option<String>,
}

/// A tool call being assembled from stream pieces.
#[derive(Debug, Default)]
struct PendingCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl PendingCall {
    fn into_function_call(self) -> FunctionCall {
        // Arguments that are not a JSON object cannot be stored (the contract requires one);
        // the call is kept with no arguments, and the tool's error tells the model what it
        // missed.
        let args = match serde_json::from_str::<Value>(&self.arguments) {
            Ok(Value::Object(args)) => Value::Object(args).to_string(),
            _ => "{}".to_owned(),
        };
        FunctionCall {
            id: Some(self.id.unwrap_or_else(new_function_call_id)),
            name: Some(self.name),
            args,
            ..Default::default()
        }
    }
}

/// ADK's finish reasons (genai's enum names) for chat-completions ones.
fn finish_reason(reason: &str) -> String {
    match reason {
        "stop" => "STOP".into(),
        "length" => "MAX_TOKENS".into(),
        "content_filter" => "SAFETY".into(),
        other => other.to_uppercase(),
    }
}

#[async_trait]
impl Agent for OpenAiAgent {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn output_key(&self) -> Option<&str> {
        self.config.output_key.as_deref()
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<()> {
        for _ in 0..MAX_MODEL_CALLS {
            let body = self.request_body(ctx).await?;
            let reply = self.call_model(ctx, &body).await?;
            if reply.tool_calls.is_empty() {
                let mut event = text_event(reply.text);
                event.finish_reason = reply.finish_reason.as_deref().map(finish_reason);
                event.model_version = reply.model;
                ctx.emit(event).await?;
                return Ok(());
            }
            let mut parts = Vec::new();
            if !reply.text.is_empty() {
                parts.push(text_part(reply.text));
            }
            parts.extend(
                reply
                    .tool_calls
                    .into_values()
                    .map(|call| function_call_part(call.into_function_call())),
            );
            let call_event = ctx
                .emit(Event {
                    content: Some(Content {
                        role: Some("model".into()),
                        parts,
                    }),
                    model_version: reply.model,
                    ..Default::default()
                })
                .await?;
            ctx.call_tools(&call_event).await?;
        }
        Err(RunnerError::Agent {
            agent: self.config.name.clone(),
            reason: format!("no final answer after {MAX_MODEL_CALLS} model calls"),
        })
    }
}
