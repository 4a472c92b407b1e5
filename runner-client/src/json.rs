//! Protobuf messages as JSON values, for people and scripts (`--json` output) and for the model
//! (`load_memory` results).
//!
//! Field names are those of the `.proto` files. Fields that carry JSON text on the wire (state,
//! deltas, arguments, metadata...) appear as the JSON they hold, not as strings; text that does
//! not parse is kept as a string. As in protobuf's own JSON mapping, fields at their default
//! (empty, zero, unset) are left out, timestamps are RFC 3339 and bytes are base64.

use adk_proto::{
    memory::v1::{MemoryEntry, MemoryRevision, MemoryStream, RevisionAction},
    session::v1::{
        part::Data, Content, Event, EventActions, EventCompaction, Part, Session,
        WatchEventsResponse,
    },
};
use base64::Engine as _;
use prost_types::Timestamp;
use serde_json::{Map, Value};

/// Builds one JSON object, skipping fields at their default.
#[derive(Default)]
struct Object(Map<String, Value>);

impl Object {
    fn str(mut self, key: &str, value: &str) -> Self {
        if !value.is_empty() {
            self.0.insert(key.into(), value.into());
        }
        self
    }

    fn opt_str(mut self, key: &str, value: Option<&String>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.into(), v.as_str().into());
        }
        self
    }

    fn opt_bool(mut self, key: &str, value: Option<bool>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.into(), v.into());
        }
        self
    }

    fn bytes(mut self, key: &str, value: Option<&Vec<u8>>) -> Self {
        if let Some(v) = value {
            let encoded = base64::engine::general_purpose::STANDARD.encode(v);
            self.0.insert(key.into(), encoded.into());
        }
        self
    }

    fn uint(mut self, key: &str, value: u64) -> Self {
        if value != 0 {
            self.0.insert(key.into(), value.into());
        }
        self
    }

    fn float(mut self, key: &str, value: f64) -> Self {
        if value != 0.0 {
            self.0.insert(key.into(), value.into());
        }
        self
    }

    /// A field holding JSON text.
    fn json(mut self, key: &str, text: &str) -> Self {
        if !text.is_empty() {
            self.0.insert(key.into(), parse_json_text(text));
        }
        self
    }

    fn time(mut self, key: &str, value: Option<&Timestamp>) -> Self {
        if let Some(t) = value {
            self.0.insert(key.into(), t.to_string().into());
        }
        self
    }

    fn value(mut self, key: &str, value: Option<Value>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.into(), v);
        }
        self
    }

    fn list(mut self, key: &str, values: Vec<Value>) -> Self {
        if !values.is_empty() {
            self.0.insert(key.into(), values.into());
        }
        self
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// The JSON a JSON-text field holds, or the text itself if it is not JSON.
pub fn parse_json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A session with its (possibly empty) list of events.
pub fn session(s: &Session) -> Value {
    Object::default()
        .str("id", &s.id)
        .str("app_name", &s.app_name)
        .str("user_id", &s.user_id)
        .json("state", &s.state)
        .list("events", s.events.iter().map(event).collect())
        .time("create_time", s.create_time.as_ref())
        .time("last_update_time", s.last_update_time.as_ref())
        .uint("last_sequence", s.last_sequence)
        .time("expire_time", s.expire_time.as_ref())
        .done()
}

/// One event.
pub fn event(e: &Event) -> Value {
    Object::default()
        .str("id", &e.id)
        .str("invocation_id", &e.invocation_id)
        .str("author", &e.author)
        .value("content", e.content.as_ref().map(content))
        .value("actions", e.actions.as_ref().map(actions))
        .opt_str("branch", e.branch.as_ref())
        .time("timestamp", e.timestamp.as_ref())
        .opt_bool("partial", e.partial)
        .opt_bool("turn_complete", e.turn_complete)
        .opt_str("error_code", e.error_code.as_ref())
        .opt_str("error_message", e.error_message.as_ref())
        .opt_bool("interrupted", e.interrupted)
        .list(
            "long_running_tool_ids",
            e.long_running_tool_ids
                .iter()
                .map(|id| id.as_str().into())
                .collect(),
        )
        .json("custom_metadata", &e.custom_metadata)
        .json("usage_metadata", &e.usage_metadata)
        .json("grounding_metadata", &e.grounding_metadata)
        .json("citation_metadata", &e.citation_metadata)
        .opt_str("model_version", e.model_version.as_ref())
        .opt_str("finish_reason", e.finish_reason.as_ref())
        .uint("sequence", e.sequence)
        .json("extra", &e.extra)
        .done()
}

/// One message of an app's event feed.
pub fn app_event(m: &WatchEventsResponse) -> Value {
    Object::default()
        .str("user_id", &m.user_id)
        .str("session_id", &m.session_id)
        .value("event", m.event.as_ref().map(event))
        .str("cursor", &m.cursor)
        .done()
}

/// A revision's action in lower case: `added`, `updated`, `deleted`, `rolled_back`.
pub fn revision_action(action: i32) -> String {
    RevisionAction::try_from(action)
        .map_or("unknown", |a| {
            a.as_str_name().trim_start_matches("REVISION_ACTION_")
        })
        .to_lowercase()
}

/// One revision of a generated memory, every field present.
pub fn memory_revision(r: &MemoryRevision) -> Value {
    serde_json::json!({
        "revision_id": r.revision_id, "memory_id": r.memory_id,
        "action": revision_action(r.action), "previous_fact": r.previous_fact,
        "new_fact": r.new_fact, "source_event_ids": r.source_event_ids, "job_id": r.job_id,
        "restored_revision_id": r.restored_revision_id,
        "create_time": r.create_time.as_ref().map(Timestamp::to_string),
        "valid_from": r.valid_from.as_ref().map(Timestamp::to_string),
        "invalid_at": r.invalid_at.as_ref().map(Timestamp::to_string),
        "superseded_by": r.superseded_by,
    })
}

/// An event stream holding buffered events. `buffered` is always there (a number a page
/// shows).
pub fn memory_stream(s: &MemoryStream) -> Value {
    let mut object = Object::default()
        .str("stream_id", &s.stream_id)
        .time("last_append_time", s.last_append_time.as_ref());
    object.0.insert("buffered".into(), s.buffered.into());
    object.done()
}

/// One memory entry (a search result carries its score).
pub fn memory_entry(m: &MemoryEntry) -> Value {
    Object::default()
        .str("id", &m.id)
        .value("content", m.content.as_ref().map(content))
        .str("author", &m.author)
        .time("timestamp", m.timestamp.as_ref())
        .json("custom_metadata", &m.custom_metadata)
        .str("session_id", &m.session_id)
        .float("score", m.score)
        .time("valid_from", m.valid_from.as_ref())
        .time("invalid_at", m.invalid_at.as_ref())
        .done()
}

fn content(c: &Content) -> Value {
    Object::default()
        .opt_str("role", c.role.as_ref())
        .list("parts", c.parts.iter().map(part).collect())
        .done()
}

fn part(p: &Part) -> Value {
    let object = match &p.data {
        None => Object::default(),
        Some(Data::Text(text)) => Object::default().value("text", Some(text.as_str().into())),
        Some(Data::InlineData(b)) => Object::default().value(
            "inline_data",
            Some(
                Object::default()
                    .bytes("data", b.data.as_ref())
                    .opt_str("mime_type", b.mime_type.as_ref())
                    .opt_str("display_name", b.display_name.as_ref())
                    .done(),
            ),
        ),
        Some(Data::FileData(f)) => Object::default().value(
            "file_data",
            Some(
                Object::default()
                    .opt_str("file_uri", f.file_uri.as_ref())
                    .opt_str("mime_type", f.mime_type.as_ref())
                    .opt_str("display_name", f.display_name.as_ref())
                    .done(),
            ),
        ),
        Some(Data::FunctionCall(c)) => Object::default().value(
            "function_call",
            Some(
                Object::default()
                    .opt_str("id", c.id.as_ref())
                    .opt_str("name", c.name.as_ref())
                    .json("args", &c.args)
                    .opt_bool("will_continue", c.will_continue)
                    .json("extra", &c.extra)
                    .done(),
            ),
        ),
        Some(Data::FunctionResponse(r)) => Object::default().value(
            "function_response",
            Some(
                Object::default()
                    .opt_str("id", r.id.as_ref())
                    .opt_str("name", r.name.as_ref())
                    .json("response", &r.response)
                    .opt_bool("will_continue", r.will_continue)
                    .json("extra", &r.extra)
                    .done(),
            ),
        ),
        Some(Data::ExecutableCode(c)) => Object::default().value(
            "executable_code",
            Some(
                Object::default()
                    .opt_str("code", c.code.as_ref())
                    .opt_str("language", c.language.as_ref())
                    .opt_str("id", c.id.as_ref())
                    .done(),
            ),
        ),
        Some(Data::CodeExecutionResult(r)) => Object::default().value(
            "code_execution_result",
            Some(
                Object::default()
                    .opt_str("outcome", r.outcome.as_ref())
                    .opt_str("output", r.output.as_ref())
                    .opt_str("id", r.id.as_ref())
                    .done(),
            ),
        ),
    };
    object
        .opt_bool("thought", p.thought)
        .bytes("thought_signature", p.thought_signature.as_ref())
        .json("extra", &p.extra)
        .done()
}

fn actions(a: &EventActions) -> Value {
    let artifact_delta: Map<String, Value> = a
        .artifact_delta
        .iter()
        .map(|(k, v)| (k.clone(), (*v).into()))
        .collect();
    Object::default()
        .opt_bool("skip_summarization", a.skip_summarization)
        .json("state_delta", &a.state_delta)
        .value(
            "artifact_delta",
            (!artifact_delta.is_empty()).then_some(Value::Object(artifact_delta)),
        )
        .opt_str("transfer_to_agent", a.transfer_to_agent.as_ref())
        .opt_str("transfer_reason", a.transfer_reason.as_ref())
        .opt_bool("escalate", a.escalate)
        .json("requested_auth_configs", &a.requested_auth_configs)
        .json(
            "requested_tool_confirmations",
            &a.requested_tool_confirmations,
        )
        .value("compaction", a.compaction.as_ref().map(compaction))
        .opt_bool("end_of_agent", a.end_of_agent)
        .json("agent_state", &a.agent_state)
        .opt_str(
            "rewind_before_invocation_id",
            a.rewind_before_invocation_id.as_ref(),
        )
        .json("extra", &a.extra)
        .done()
}

fn compaction(c: &EventCompaction) -> Value {
    Object::default()
        .time("start_timestamp", c.start_timestamp.as_ref())
        .time("end_timestamp", c.end_timestamp.as_ref())
        .value(
            "compacted_content",
            c.compacted_content.as_ref().map(content),
        )
        .done()
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{Blob, FunctionCall};
    use serde_json::json;

    use super::*;

    #[test]
    fn events_keep_proto_names_and_json_text_becomes_json() {
        let e = Event {
            id: "ev-1".into(),
            author: "recall".into(),
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![
                    Part {
                        data: Some(Data::FunctionCall(FunctionCall {
                            id: Some("adk-1".into()),
                            name: Some("load_memory".into()),
                            args: r#"{"query": "favorite project", "big": 9007199254740993}"#
                                .into(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    },
                    Part {
                        data: Some(Data::InlineData(Blob {
                            data: Some(vec![0xfb, 0xff]),
                            mime_type: Some("image/png".into()),
                            display_name: None,
                        })),
                        thought: Some(false),
                        ..Default::default()
                    },
                ],
            }),
            actions: Some(EventActions {
                state_delta: r#"{"k": 1}"#.into(),
                ..Default::default()
            }),
            timestamp: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 500_000_000,
            }),
            partial: Some(false),
            custom_metadata: "not json".into(),
            sequence: 3,
            ..Default::default()
        };
        assert_eq!(
            event(&e),
            json!({
                "id": "ev-1",
                "author": "recall",
                "content": {"role": "model", "parts": [
                    {"function_call": {"id": "adk-1", "name": "load_memory",
                                       "args": {"query": "favorite project",
                                                "big": 9007199254740993u64}}},
                    {"inline_data": {"data": "+/8=", "mime_type": "image/png"}, "thought": false}
                ]},
                "actions": {"state_delta": {"k": 1}},
                "timestamp": "2023-11-14T22:13:20.500Z",
                "partial": false,
                "custom_metadata": "not json",
                "sequence": 3
            })
        );
    }
}
