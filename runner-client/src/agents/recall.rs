//! `recall`: a deterministic, model-free agent for tests and demos that exercises the same
//! paths as a model would.
//!
//! - A statement is acknowledged ("Noted.").
//! - A question (text ending with `?`) is answered from memory: the agent emits a real
//!   `load_memory` function call, the runner's tool answers it with a function-response event,
//!   and the reply quotes the best memory that is a statement (earlier questions and the agent's
//!   own replies are memories too, but they answer nothing).
//! - Remembering a session keeps neither its acknowledgements nor its tool calls and results:
//!   they hold no fact, and took 31 of 77 top-5 search results in a 16-fact trial (see
//!   [`RecallAgent::remembers`]).

use adk_proto::session::v1::{part::Data, Content, Event, FunctionCall};
use async_trait::async_trait;
use serde_json::{json, Value};

use crate::{
    agent::Agent,
    error::{Result, RunnerError},
    event::{content_text, function_call_part, new_function_call_id, text_event},
    invocation::InvocationContext,
    memory_tools::LOAD_MEMORY,
};

/// The reply to a statement.
pub const ACKNOWLEDGEMENT: &str = "Noted.";

/// The reply to a question nothing in memory answers.
pub const NOTHING_REMEMBERED: &str = "I don't remember anything about that.";

/// The deterministic agent.
#[derive(Debug, Clone)]
pub struct RecallAgent {
    name: String,
    output_key: Option<String>,
}

impl RecallAgent {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            output_key: None,
        }
    }

    /// Saves each reply's text in the state under `key`.
    pub fn with_output_key(mut self, key: impl Into<String>) -> Self {
        self.output_key = Some(key.into());
        self
    }

    /// The reply drawn from a `load_memory` response.
    fn answer(&self, response: &Value) -> String {
        if let Some(error) = response["error"].as_str() {
            return format!("I could not look in my memory ({error}).");
        }
        let best = response["memories"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["author"].as_str() != Some(self.name.as_str()))
            .map(memory_text)
            .find(|text| !text.is_empty() && !text.ends_with('?'));
        match best {
            Some(text) => format!("You told me: \"{text}\""),
            None => NOTHING_REMEMBERED.to_owned(),
        }
    }
}

/// A memory's text parts (in `load_memory`'s JSON form) joined by spaces.
fn memory_text(memory: &Value) -> String {
    let texts: Vec<&str> = memory["content"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    texts.join(" ").trim().to_owned()
}

#[async_trait]
impl Agent for RecallAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn output_key(&self) -> Option<&str> {
        self.output_key.as_deref()
    }

    /// Not its acknowledgements, tool calls or tool results.
    fn remembers(&self, event: &Event) -> bool {
        let Some(content) = &event.content else {
            return false;
        };
        let tool = content.parts.iter().any(|p| {
            matches!(
                p.data,
                Some(Data::FunctionCall(_) | Data::FunctionResponse(_))
            )
        });
        let acknowledgement =
            event.author == self.name && content_text(content, " ").trim() == ACKNOWLEDGEMENT;
        !tool && !acknowledgement
    }

    async fn run(&self, ctx: &mut InvocationContext) -> Result<()> {
        let text = content_text(ctx.user_content(), " ").trim().to_owned();
        if !text.ends_with('?') {
            ctx.emit(text_event(ACKNOWLEDGEMENT)).await?;
            return Ok(());
        }
        let call = FunctionCall {
            id: Some(new_function_call_id()),
            name: Some(LOAD_MEMORY.into()),
            args: json!({ "query": text }).to_string(),
            ..Default::default()
        };
        let call_event = ctx
            .emit(Event {
                content: Some(Content {
                    role: Some("model".into()),
                    parts: vec![function_call_part(call)],
                }),
                ..Default::default()
            })
            .await?;
        let response_event = ctx.call_tools(&call_event).await?;
        let response = response_event
            .content
            .iter()
            .flat_map(|c| c.parts.iter())
            .find_map(|p| match &p.data {
                Some(Data::FunctionResponse(r)) => serde_json::from_str::<Value>(&r.response).ok(),
                _ => None,
            })
            .ok_or_else(|| RunnerError::Agent {
                agent: self.name.clone(),
                reason: "load_memory gave no response".into(),
            })?;
        ctx.emit(text_event(self.answer(&response))).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(author: &str, text: &str) -> Value {
        json!({"author": author, "content": {"role": "user", "parts": [{"text": text}]}})
    }

    #[test]
    fn answers_from_the_best_statement() {
        let agent = RecallAgent::new("recall");
        let response = json!({"memories": [
            memory("user", "What is my favorite project?"),
            memory("recall", "You told me: \"nothing\""),
            memory("user", "My favorite project is Project Alpha."),
            memory("user", "My favorite colour is green."),
        ]});
        assert_eq!(
            agent.answer(&response),
            "You told me: \"My favorite project is Project Alpha.\""
        );
        assert_eq!(agent.answer(&json!({"memories": []})), NOTHING_REMEMBERED);
        assert_eq!(
            agent.answer(&json!({"error": "x"})),
            "I could not look in my memory (x)."
        );
    }
}
