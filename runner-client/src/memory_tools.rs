//! ADK's memory tools (M5), backed by memory-svc:
//!
//! - `load_memory(query)`: a tool the model calls; its response is `{"memories": [...]}`, the
//!   search results of the invocation's (app, user) unchanged.
//! - `preload_memory`: not model-callable; before each model request, memory is searched with
//!   the user's current message and the hits are put in front of the model in a
//!   `<PAST_CONVERSATIONS>` block.

use adk_proto::memory::v1::MemoryEntry;
use serde_json::{json, Value};

use crate::{clients::MemoryClient, error::Result, event::content_text, json};

/// The tool's name, as the model calls it.
pub const LOAD_MEMORY: &str = "load_memory";

/// The tool's description, as ADK declares it.
pub const LOAD_MEMORY_DESCRIPTION: &str = "Loads the memory for the current user.";

/// The system instruction ADK adds to an agent that has the tool.
pub const LOAD_MEMORY_INSTRUCTION: &str = "You have memory. You can use it to answer questions. \
If any questions need you to look up the memory, you should call load_memory function with a \
query.";

/// JSON Schema of the tool's arguments: one required string, `query`.
pub fn load_memory_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"]
    })
}

/// Runs `load_memory(query)` for the invocation's (app, user).
pub(crate) async fn load_memory(
    memory: &MemoryClient,
    app: &str,
    user: &str,
    query: &str,
) -> Result<Value> {
    let memories = memory.search(app, user, query).await?;
    Ok(json!({ "memories": memories.iter().map(json::memory_entry).collect::<Vec<_>>() }))
}

/// The `<PAST_CONVERSATIONS>` block for these memories, or `None` when none has text.
///
/// Each memory contributes `Time: {timestamp}` (when it has one) and `{author}: {text}` (or the
/// text alone), its text being its text parts joined by spaces.
pub(crate) fn past_conversations(memories: &[MemoryEntry]) -> Option<String> {
    let mut lines = Vec::new();
    for memory in memories {
        if let Some(time) = &memory.timestamp {
            lines.push(format!("Time: {time}"));
        }
        let text = memory
            .content
            .as_ref()
            .map(|c| content_text(c, " "))
            .unwrap_or_default();
        if !text.is_empty() {
            lines.push(if memory.author.is_empty() {
                text
            } else {
                format!("{}: {text}", memory.author)
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "The following content is from your previous conversations with the user.\n\
         They may be useful for answering the user's current query.\n\
         <PAST_CONVERSATIONS>\n{}\n</PAST_CONVERSATIONS>\n",
        lines.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::Content;
    use prost_types::Timestamp;

    use super::*;
    use crate::event::text_part;

    fn entry(author: &str, texts: &[&str], seconds: Option<i64>) -> MemoryEntry {
        MemoryEntry {
            content: Some(Content {
                role: Some("user".into()),
                parts: texts.iter().map(|t| text_part(*t)).collect(),
            }),
            author: author.into(),
            timestamp: seconds.map(|seconds| Timestamp { seconds, nanos: 0 }),
            ..Default::default()
        }
    }

    #[test]
    fn past_conversations_lists_time_author_and_text() {
        let block = past_conversations(&[
            entry(
                "user",
                &["My favorite project", "is Project Alpha."],
                Some(0),
            ),
            entry("", &["Coffee, black."], None),
            entry("agent", &[], Some(60)),
        ]);
        assert_eq!(
            block.as_deref(),
            Some(
                "The following content is from your previous conversations with the user.\n\
                 They may be useful for answering the user's current query.\n\
                 <PAST_CONVERSATIONS>\n\
                 Time: 1970-01-01T00:00:00Z\n\
                 user: My favorite project is Project Alpha.\n\
                 Coffee, black.\n\
                 Time: 1970-01-01T00:01:00Z\n\
                 </PAST_CONVERSATIONS>\n"
            )
        );
    }

    #[test]
    fn no_memories_means_no_block() {
        assert_eq!(past_conversations(&[]), None);
    }
}
