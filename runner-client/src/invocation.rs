//! What an agent sees and does during one invocation (ADK's InvocationContext): the session as
//! it stands, the state including `temp:` keys, the memory tools, and [`InvocationContext::emit`],
//! which stores an event and hands it to the caller.

use adk_proto::session::v1::{
    part::Data, Content, Event, EventActions, FunctionCall, FunctionResponse, Part,
};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::{
    append_stream::AppendStream,
    clients::MemoryClient,
    error::{Result, RunnerError},
    event::{content_text, function_calls, is_final_response},
    memory_tools, template,
};

/// The state of one invocation, owned by the runner and lent to the agent.
pub struct InvocationContext {
    pub(crate) app_name: String,
    pub(crate) user_id: String,
    pub(crate) session_id: String,
    pub(crate) invocation_id: String,
    pub(crate) agent_name: String,
    pub(crate) output_key: Option<String>,
    pub(crate) user_content: Content,
    /// The session's stored events, this invocation's included.
    pub(crate) events: Vec<Event>,
    /// The merged session state plus this invocation's `temp:` keys.
    pub(crate) state: Map<String, Value>,
    pub(crate) memory: Option<MemoryClient>,
    pub(crate) stream: AppendStream,
    /// Where the caller reads the invocation's events.
    pub(crate) caller: mpsc::Sender<Result<Event>>,
}

impl InvocationContext {
    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// `"e-" + uuid4`, stamped on every event of the invocation.
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// The user's message that started the invocation (role `user`).
    pub fn user_content(&self) -> &Content {
        &self.user_content
    }

    /// The session's events in order, including those stored so far by this invocation.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The session state as the agent sees it: merged scopes (`app:`, `user:`, session) plus
    /// the `temp:` keys set during this invocation, which are never stored.
    pub fn state(&self) -> &Map<String, Value> {
        &self.state
    }

    /// `template` with `{key}` / `{key?}` replaced from [`Self::state`] (see [`template`]).
    pub fn render(&self, template: &str) -> Result<String> {
        template::render(template, &self.state)
    }

    /// Whether the memory tools are available.
    pub fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Emits an event of the invocation and returns it as stored.
    ///
    /// Missing ids, timestamps, invocation id and author (the agent) are filled in. A partial
    /// event goes to the caller and to the session's live watchers, and is not stored. Any
    /// other event is stored first, conditional on no other writer having appended meanwhile
    /// ([`RunnerError::Conflict`] otherwise); its `temp:` keys are applied to [`Self::state`]
    /// only, the rest of its delta as stored. The agent's final reply also records
    /// [`crate::Agent::output_key`].
    pub async fn emit(&mut self, mut event: Event) -> Result<Event> {
        if event.id.is_empty() {
            event.id = uuid::Uuid::new_v4().to_string();
        }
        if event.invocation_id.is_empty() {
            event.invocation_id = self.invocation_id.clone();
        }
        if event.author.is_empty() {
            event.author = self.agent_name.clone();
        }
        if event.timestamp.is_none() {
            event.timestamp = Some(std::time::SystemTime::now().into());
        }
        if event.partial == Some(true) {
            self.yield_to_caller(event.clone()).await?;
            self.stream.forward_partial(event.clone()).await?;
            return Ok(event);
        }
        let stored = self.store(event).await?;
        self.yield_to_caller(stored.clone()).await?;
        Ok(stored)
    }

    /// Stores a complete event and applies it to the in-memory session; returns it as stored.
    pub(crate) async fn store(&mut self, mut event: Event) -> Result<Event> {
        let mut delta = state_delta(&event, "the agent")?;
        if let Some((key, text)) = self.output_key_value(&event) {
            delta.insert(key, Value::String(text));
            event
                .actions
                .get_or_insert_with(EventActions::default)
                .state_delta = Value::Object(delta.clone()).to_string();
        }
        // S6.2: temp keys reach the in-memory state only; the server trims them from the event.
        for (key, value) in delta.into_iter().filter(|(k, _)| k.starts_with("temp:")) {
            self.state.insert(key, value);
        }
        let stored = self.stream.store(event).await?;
        // S6.6: the stored delta, with its prefixes, is what a fresh load would show.
        self.state.extend(state_delta(&stored, "session-svc")?);
        self.events.push(stored.clone());
        Ok(stored)
    }

    /// Runs the function calls of `call_event` (as emitted) and emits their responses as one
    /// event, as ADK's function-calling flow does; returns that event.
    ///
    /// Every call is answered, so the stored session never holds a call without a response: a
    /// call the runner has no tool for, and a tool that fails (memory-svc down, say), get an
    /// `{"error": ...}` response the model can read, rather than ending the turn with the call
    /// unanswered (which the next model request could not include).
    pub async fn call_tools(&mut self, call_event: &Event) -> Result<Event> {
        let calls: Vec<FunctionCall> = function_calls(call_event).cloned().collect();
        let mut parts = Vec::with_capacity(calls.len());
        for call in calls {
            let name = call.name.clone().unwrap_or_default();
            let response = match name.as_str() {
                memory_tools::LOAD_MEMORY => match load_memory_query(&call.args) {
                    Some(query) => match self.load_memory(&query).await {
                        Ok(response) => response,
                        Err(e) => {
                            tracing::warn!(error = %e, "load_memory failed; the model is told");
                            json!({"error": format!("load_memory failed: {e}")})
                        }
                    },
                    None => json!({"error": "load_memory takes one string argument, `query`"}),
                },
                _ => json!({"error": format!("there is no tool named {name:?}")}),
            };
            parts.push(Part {
                data: Some(Data::FunctionResponse(FunctionResponse {
                    id: call.id.clone(),
                    name: Some(name),
                    response: response.to_string(),
                    ..Default::default()
                })),
                ..Default::default()
            });
        }
        self.emit(Event {
            content: Some(Content {
                role: Some("user".into()),
                parts,
            }),
            ..Default::default()
        })
        .await
    }

    /// The `load_memory` tool: `{"memories": [...]}` for `query` in this (app, user)'s memory.
    pub async fn load_memory(&self, query: &str) -> Result<Value> {
        let memory = self.memory.as_ref().ok_or(RunnerError::NoMemoryService {
            tool: memory_tools::LOAD_MEMORY,
        })?;
        memory_tools::load_memory(memory, &self.app_name, &self.user_id, query).await
    }

    /// The `preload_memory` behaviour: the `<PAST_CONVERSATIONS>` block of memories matching the
    /// user's current message, if there are any. As in ADK, a failed search is logged and
    /// skipped: the model can answer without it.
    pub async fn preload_memory(&self) -> Option<String> {
        let memory = self.memory.as_ref()?;
        let query = content_text(&self.user_content, " ");
        if query.is_empty() {
            return None;
        }
        match memory.search(&self.app_name, &self.user_id, &query).await {
            Ok(memories) => memory_tools::past_conversations(&memories),
            Err(e) => {
                tracing::warn!(error = %e, "preload_memory: memory search failed");
                None
            }
        }
    }

    async fn yield_to_caller(&self, event: Event) -> Result<()> {
        self.caller
            .send(Ok(event))
            .await
            .map_err(|_| RunnerError::Cancelled)
    }

    /// ADK's output_key: the state key and the text of the agent's final reply, for an event
    /// that is one.
    fn output_key_value(&self, event: &Event) -> Option<(String, String)> {
        let key = self.output_key.as_ref()?;
        let content = event.content.as_ref()?;
        if event.author != self.agent_name || !is_final_response(event) || content.parts.is_empty()
        {
            return None;
        }
        Some((key.clone(), content_text(content, "")))
    }
}

/// The state delta an event carries (empty when it has none).
fn state_delta(event: &Event, source: &'static str) -> Result<Map<String, Value>> {
    let text = event
        .actions
        .as_ref()
        .map(|a| a.state_delta.as_str())
        .unwrap_or_default();
    if text.is_empty() {
        return Ok(Map::new());
    }
    serde_json::from_str(text).map_err(|e| RunnerError::BadJson {
        service: source,
        field: "event.actions.state_delta",
        reason: e.to_string(),
    })
}

/// The `query` argument of a load_memory call.
fn load_memory_query(args: &str) -> Option<String> {
    let args: Value = serde_json::from_str(args).ok()?;
    args.get("query")?.as_str().map(str::to_owned)
}
