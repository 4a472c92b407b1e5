//! The chat-completions `messages` of a session: the system instruction, then each stored
//! event as the message the model said or heard (user and model text, the model's tool calls,
//! the tool results).

use adk_proto::session::v1::{part::Data, Event};
use serde_json::{json, Value};

use crate::event::content_text;

/// The messages for the next model request.
///
/// `system` (when not empty) comes first. `preload` (the `<PAST_CONVERSATIONS>` block) is a
/// transient user message placed just before the user message of `invocation_id`, the message
/// it was searched for; it is never stored.
pub(crate) fn chat_messages(
    events: &[Event],
    system: &str,
    invocation_id: &str,
    preload: Option<&str>,
) -> Vec<Value> {
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    let mut preload = preload;
    for event in events {
        let Some(content) = &event.content else {
            continue;
        };
        let mut tool_calls = Vec::new();
        let mut tool_results = Vec::new();
        for (index, part) in content.parts.iter().enumerate() {
            match &part.data {
                Some(Data::FunctionCall(call)) => tool_calls.push(json!({
                    "id": call_id(call.id.as_deref(), event, index),
                    "type": "function",
                    "function": {
                        "name": call.name.as_deref().unwrap_or_default(),
                        "arguments": if call.args.is_empty() { "{}" } else { call.args.as_str() },
                    },
                })),
                Some(Data::FunctionResponse(response)) => tool_results.push(json!({
                    "role": "tool",
                    "tool_call_id": call_id(response.id.as_deref(), event, index),
                    "content": if response.response.is_empty() { "{}" } else { response.response.as_str() },
                })),
                _ => {}
            }
        }
        let text = content_text(content, "");
        if !tool_results.is_empty() {
            messages.extend(tool_results);
        } else if !tool_calls.is_empty() {
            let text = (!text.is_empty()).then_some(text);
            messages.push(json!({"role": "assistant", "content": text, "tool_calls": tool_calls}));
        } else if !text.is_empty() {
            if event.author == "user" {
                if event.invocation_id == invocation_id {
                    if let Some(block) = preload.take() {
                        messages.push(json!({"role": "user", "content": block}));
                    }
                }
                messages.push(json!({"role": "user", "content": text}));
            } else {
                messages.push(json!({"role": "assistant", "content": text}));
            }
        }
    }
    pair_tool_calls(messages)
}

/// The tool result a call gets when the session holds none for it.
pub(crate) const UNANSWERED: &str =
    r#"{"error": "the tool call was not answered: the turn that made it failed"}"#;

/// `messages` with every tool call answered right after the assistant message making it, as
/// chat-completions endpoints require: a call whose result the session lacks (its turn failed
/// before the tool answered) is answered with [`UNANSWERED`], and a tool result whose call is
/// not the one just made is dropped.
fn pair_tool_calls(messages: Vec<Value>) -> Vec<Value> {
    let mut paired = Vec::with_capacity(messages.len());
    // Ids of the last assistant message's calls that have no result yet, in call order.
    let mut pending: Vec<String> = Vec::new();
    for message in messages {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            if let Some(position) = pending.iter().position(|p| p == id) {
                pending.remove(position);
                paired.push(message);
            }
            continue;
        }
        answer_pending(&mut paired, &mut pending);
        if let Some(calls) = message["tool_calls"].as_array() {
            pending = calls
                .iter()
                .filter_map(|c| c["id"].as_str().map(str::to_owned))
                .collect();
        }
        paired.push(message);
    }
    answer_pending(&mut paired, &mut pending);
    paired
}

fn answer_pending(messages: &mut Vec<Value>, pending: &mut Vec<String>) {
    for id in pending.drain(..) {
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": UNANSWERED}));
    }
}

/// A call's id. Calls this runner stores always have one; for others, a stand-in made from the
/// invocation and the part's position pairs a call with the response at the same position.
fn call_id(id: Option<&str>, event: &Event, index: usize) -> String {
    match id {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("call-{}-{index}", event.invocation_id),
    }
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{Content, FunctionCall, FunctionResponse, Part};

    use super::*;
    use crate::event::{function_call_part, text_event, text_part};

    fn event(author: &str, invocation: &str, role: &str, parts: Vec<Part>) -> Event {
        Event {
            author: author.into(),
            invocation_id: invocation.into(),
            content: Some(Content {
                role: Some(role.into()),
                parts,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_session_becomes_chat_messages() {
        let mut answer = text_event("Hello!");
        answer.author = "assistant".into();
        let events = vec![
            event("user", "e-1", "user", vec![text_part("Hi")]),
            answer,
            event("user", "e-2", "user", vec![text_part("Favourite?")]),
            event(
                "assistant",
                "e-2",
                "model",
                vec![function_call_part(FunctionCall {
                    id: Some("call_1".into()),
                    name: Some("load_memory".into()),
                    args: r#"{"query":"favourite"}"#.into(),
                    ..Default::default()
                })],
            ),
            event(
                "assistant",
                "e-2",
                "user",
                vec![Part {
                    data: Some(Data::FunctionResponse(FunctionResponse {
                        id: Some("call_1".into()),
                        name: Some("load_memory".into()),
                        response: r#"{"memories":[]}"#.into(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            ),
            Event::default(),
        ];
        assert_eq!(
            chat_messages(&events, "Be brief.", "e-2", Some("<PAST_CONVERSATIONS>")),
            vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": "Hi"}),
                json!({"role": "assistant", "content": "Hello!"}),
                json!({"role": "user", "content": "<PAST_CONVERSATIONS>"}),
                json!({"role": "user", "content": "Favourite?"}),
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "load_memory", "arguments": "{\"query\":\"favourite\"}"}
                }]}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"memories\":[]}"}),
            ]
        );
        assert_eq!(chat_messages(&[], "", "e-3", None), Vec::<Value>::new());
    }

    fn call(id: &str) -> Part {
        function_call_part(FunctionCall {
            id: Some(id.into()),
            name: Some("load_memory".into()),
            args: "{}".into(),
            ..Default::default()
        })
    }

    fn response(id: &str) -> Part {
        Part {
            data: Some(Data::FunctionResponse(FunctionResponse {
                id: Some(id.into()),
                name: Some("load_memory".into()),
                response: "{}".into(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn unanswered_calls_are_answered_and_stray_results_dropped() {
        let events = vec![
            event("user", "e-1", "user", vec![text_part("Favourite?")]),
            event("assistant", "e-1", "model", vec![call("a"), call("b")]),
            event("assistant", "e-1", "user", vec![response("b")]),
            event("user", "e-2", "user", vec![text_part("Again?")]),
            event("assistant", "e-2", "user", vec![response("x")]),
            event("assistant", "e-2", "model", vec![call("c")]),
        ];
        let tool = |id: &str, content: &str| json!({"role": "tool", "tool_call_id": id, "content": content});
        let calls = |ids: &[&str]| {
            let calls: Vec<Value> = ids
                .iter()
                .map(|id| {
                    json!({"id": id, "type": "function",
                           "function": {"name": "load_memory", "arguments": "{}"}})
                })
                .collect();
            json!({"role": "assistant", "content": null, "tool_calls": calls})
        };
        assert_eq!(
            chat_messages(&events, "", "e-2", None),
            vec![
                json!({"role": "user", "content": "Favourite?"}),
                calls(&["a", "b"]),
                tool("b", "{}"),
                tool("a", UNANSWERED),
                json!({"role": "user", "content": "Again?"}),
                calls(&["c"]),
                tool("c", UNANSWERED),
            ]
        );
    }
}
