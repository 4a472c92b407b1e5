//! The [`Runner`]: runs one agent turn the way ADK's Runner does (R1-R3, R6), against
//! session-svc and memory-svc.
//!
//! A turn: the message is checked and made a `user` message (R1); the session is loaded, or
//! created, once (R1); the user's event is stored with the turn's state delta (R2); the agent
//! runs and every event it emits is stored (partial ones only forwarded) over one
//! `AppendEvents` stream, each append conditional on the session not having moved (R3); then,
//! if asked, the session is added to memory (memory is never written otherwise, R6).

use std::sync::Arc;

use adk_proto::session::v1::{part::Data, Content, Event, EventActions};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, Stream};

use crate::{
    agent::Agent,
    append_stream::AppendStream,
    clients::{GenerateSource, MemoryClient, SessionClient},
    error::{Result, RunnerError},
    invocation::InvocationContext,
};

/// Events the runner buffers ahead of a slow reader of the turn.
const CALLER_BUFFER: usize = 64;

/// Runs turns of one agent of one app. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    app_name: String,
    agent: Arc<dyn Agent>,
    sessions: SessionClient,
    memory: Option<MemoryClient>,
    remember: bool,
    generate: bool,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("app_name", &self.app_name)
            .field("agent", &self.agent.name())
            .field("sessions", &self.sessions.endpoint())
            .field("remember", &self.remember)
            .field("generate", &self.generate)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner of `agent` for `app_name`, storing sessions in `sessions`. Without a memory
    /// service (see [`Runner::with_memory`]) the memory tools are unavailable.
    pub fn new(
        app_name: impl Into<String>,
        agent: Arc<dyn Agent>,
        sessions: SessionClient,
    ) -> Self {
        Self {
            app_name: app_name.into(),
            agent,
            sessions,
            memory: None,
            remember: false,
            generate: false,
        }
    }

    /// Gives the agent `load_memory` and `preload_memory`, backed by `memory`.
    pub fn with_memory(mut self, memory: MemoryClient) -> Self {
        self.memory = Some(memory);
        self
    }

    /// After each successful turn, has memory-svc ingest the session (AddSessionToMemory by
    /// reference). Needs [`Runner::with_memory`].
    pub fn remember_sessions(mut self, remember: bool) -> Self {
        self.remember = remember;
        self
    }

    /// After each successful turn, has memory-svc generate memories from the turn's events
    /// (GenerateMemories, in the background; needs memory-svc `--generator`). Needs
    /// [`Runner::with_memory`].
    pub fn generate_memories(mut self, generate: bool) -> Self {
        self.generate = generate;
        self
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn agent_name(&self) -> &str {
        self.agent.name()
    }

    /// Runs one turn: `new_message` from `user_id` in session `session_id` (created if needed),
    /// with `state_delta` stored on the user's event.
    ///
    /// The stream yields the agent's events as they happen: partial ones (streamed text) and
    /// stored ones (with their sequence); the user's own event is stored but not yielded, as in
    /// ADK. A failure is the last item. Dropping the stream abandons the turn at its next
    /// event.
    pub fn run(
        &self,
        user_id: &str,
        session_id: &str,
        new_message: Content,
        state_delta: Option<Map<String, Value>>,
    ) -> impl Stream<Item = Result<Event>> + Send + Unpin + 'static {
        let (caller, events) = mpsc::channel(CALLER_BUFFER);
        let runner = self.clone();
        let (user_id, session_id) = (user_id.to_owned(), session_id.to_owned());
        tokio::spawn(async move {
            let turn = runner.turn(
                caller.clone(),
                user_id,
                session_id,
                new_message,
                state_delta,
            );
            if let Err(e) = turn.await {
                // The caller may be gone already; then nobody needs the error.
                let _ = caller.send(Err(e)).await;
            }
        });
        ReceiverStream::new(events)
    }

    async fn turn(
        self,
        caller: mpsc::Sender<Result<Event>>,
        user_id: String,
        session_id: String,
        new_message: Content,
        state_delta: Option<Map<String, Value>>,
    ) -> Result<()> {
        let user_content = user_message(new_message)?;
        if (self.remember || self.generate) && self.memory.is_none() {
            return Err(RunnerError::NoMemoryService {
                tool: "remembering sessions",
            });
        }
        let session = self
            .sessions
            .get_or_create(&self.app_name, &user_id, &session_id)
            .await?;
        let state = parse_state(&session.state)?;
        // The events before this turn; generation reads only the turn's own.
        let earlier = session.events.len();
        let stream = AppendStream::open(
            &self.sessions,
            &self.app_name,
            &user_id,
            &session.id,
            session.last_sequence,
        )
        .await?;
        let invocation_id = format!("e-{}", uuid::Uuid::new_v4());
        let mut ctx = InvocationContext {
            app_name: self.app_name.clone(),
            user_id: user_id.clone(),
            session_id: session.id.clone(),
            invocation_id: invocation_id.clone(),
            agent_name: self.agent.name().to_owned(),
            output_key: self.agent.output_key().map(str::to_owned),
            user_content: user_content.clone(),
            events: session.events,
            state,
            memory: self.memory.clone(),
            stream,
            caller,
        };
        let actions = state_delta.map(|delta| EventActions {
            state_delta: Value::Object(delta).to_string(),
            ..Default::default()
        });
        ctx.store(Event {
            id: uuid::Uuid::new_v4().to_string(),
            invocation_id,
            author: "user".into(),
            content: Some(user_content),
            actions,
            timestamp: Some(std::time::SystemTime::now().into()),
            ..Default::default()
        })
        .await?;
        self.agent.run(&mut ctx).await?;
        let session_id = ctx.session_id.clone();
        ctx.stream.finish().await?;
        if let Some(memory) = &self.memory {
            if self.remember {
                if ctx.events.iter().all(|e| self.agent.remembers(e)) {
                    memory
                        .add_session(&self.app_name, &user_id, &session_id)
                        .await?;
                } else {
                    let kept = ctx
                        .events
                        .iter()
                        .filter(|e| self.agent.remembers(e))
                        .cloned()
                        .collect();
                    memory
                        .add_session_events(&self.app_name, &user_id, &session_id, kept)
                        .await?;
                }
            }
            if self.generate {
                let turn = ctx.events.split_off(earlier.min(ctx.events.len()));
                memory
                    .generate(
                        &self.app_name,
                        &user_id,
                        GenerateSource::Events(turn),
                        false,
                    )
                    .await?;
            }
        }
        Ok(())
    }
}

/// R1/R2: the message as a `user` message, refused when it cannot start a turn.
fn user_message(mut message: Content) -> Result<Content> {
    if message.parts.is_empty() {
        return Err(RunnerError::InvalidMessage("No parts in the new_message."));
    }
    if message
        .parts
        .iter()
        .any(|p| matches!(p.data, Some(Data::FunctionCall(_))))
    {
        return Err(RunnerError::InvalidMessage(
            "User message cannot contain function calls.",
        ));
    }
    message.role = Some("user".into());
    Ok(message)
}

fn parse_state(text: &str) -> Result<Map<String, Value>> {
    if text.is_empty() {
        return Ok(Map::new());
    }
    serde_json::from_str(text).map_err(|e| RunnerError::BadJson {
        service: "session-svc",
        field: "session.state",
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{FunctionCall, Part};

    use super::*;
    use crate::event::{function_call_part, text_part};

    #[test]
    fn messages_become_user_messages_and_bad_ones_are_refused() {
        let message = user_message(Content {
            role: Some("model".into()),
            parts: vec![text_part("hi")],
        })
        .unwrap();
        assert_eq!(message.role.as_deref(), Some("user"));
        assert_eq!(message.parts, vec![text_part("hi")]);

        let empty = user_message(Content::default()).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "invalid message: No parts in the new_message."
        );
        let call = user_message(Content {
            role: None,
            parts: vec![Part::default(), function_call_part(FunctionCall::default())],
        });
        assert!(
            matches!(call, Err(RunnerError::InvalidMessage(m)) if m.contains("function calls"))
        );
    }
}
