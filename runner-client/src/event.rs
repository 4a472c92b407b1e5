//! Building and reading events: the events agents emit (text, streamed fragments, function
//! calls), and what the runner reads from stored ones (text, calls, whether a reply is final).

use adk_proto::session::v1::{part::Data, Content, Event, FunctionCall, Part};

/// A model-authored text event (final unless marked partial).
pub fn text_event(text: impl Into<String>) -> Event {
    Event {
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![text_part(text)],
        }),
        ..Default::default()
    }
}

/// A streaming fragment of a model reply: shown and watched live, never stored.
pub fn partial_text_event(text: impl Into<String>) -> Event {
    Event {
        partial: Some(true),
        ..text_event(text)
    }
}

/// A text part.
pub fn text_part(text: impl Into<String>) -> Part {
    Part {
        data: Some(Data::Text(text.into())),
        ..Default::default()
    }
}

/// A function-call part.
pub fn function_call_part(call: FunctionCall) -> Part {
    Part {
        data: Some(Data::FunctionCall(call)),
        ..Default::default()
    }
}

/// A fresh function-call id, as ADK gives calls a model left without one.
pub fn new_function_call_id() -> String {
    format!("adk-{}", uuid::Uuid::new_v4())
}

/// The concatenated text of a content's non-thought parts.
pub fn content_text(content: &Content, separator: &str) -> String {
    let texts: Vec<&str> = content
        .parts
        .iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    texts.join(separator)
}

/// The function calls in an event, in order.
pub fn function_calls(event: &Event) -> impl Iterator<Item = &FunctionCall> {
    parts(event).filter_map(|p| match &p.data {
        Some(Data::FunctionCall(c)) => Some(c),
        _ => None,
    })
}

fn parts(event: &Event) -> impl Iterator<Item = &Part> {
    event.content.iter().flat_map(|c| c.parts.iter())
}

/// ADK's `Event.is_final_response`: the event ends the agent's reply (it calls no tool,
/// answers no call and is not a fragment).
pub fn is_final_response(event: &Event) -> bool {
    if event.actions.as_ref().and_then(|a| a.skip_summarization) == Some(true)
        || !event.long_running_tool_ids.is_empty()
    {
        return true;
    }
    let last_is_code_result = event
        .content
        .as_ref()
        .and_then(|c| c.parts.last())
        .is_some_and(|p| matches!(p.data, Some(Data::CodeExecutionResult(_))));
    event.partial != Some(true)
        && !last_is_code_result
        && !parts(event).any(|p| {
            matches!(
                p.data,
                Some(Data::FunctionCall(_)) | Some(Data::FunctionResponse(_))
            )
        })
}
