//! Small builders of requests, events, entries and timestamps.

use adk_proto::memory::v1::{MemoryEntry, SearchMemoryRequest};
use adk_proto::session::v1::{
    part::Data, AppendEventRequest, Content, CreateSessionRequest, Event, EventActions,
    GetSessionRequest, Part, WatchSessionRequest,
};
use prost_types::Timestamp;

/// A CreateSessionRequest with `state` as its text (any text: refusals are tested too), no
/// time to live.
pub fn create_request(app: &str, user: &str, id: &str, state: &str) -> CreateSessionRequest {
    CreateSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        state: state.into(),
        ..Default::default()
    }
}

/// A GetSessionRequest for the whole session (every event, no reply budget).
pub fn get_request(app: &str, user: &str, id: &str) -> GetSessionRequest {
    GetSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

/// A GetSessionRequest for the session's state and last sequence, without events.
pub fn state_request(app: &str, user: &str, id: &str) -> GetSessionRequest {
    GetSessionRequest {
        num_recent_events: Some(0),
        ..get_request(app, user, id)
    }
}

/// A WatchSessionRequest from the first event on, without partial events.
pub fn watch_request(app: &str, user: &str, id: &str) -> WatchSessionRequest {
    WatchSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

/// A SearchMemoryRequest with the server's default limit and no filter.
pub fn search_request(app: &str, user: &str, query: &str) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        ..Default::default()
    }
}

/// An AppendEventRequest without concurrency check.
pub fn append_request(app: &str, user: &str, id: &str, event: Event) -> AppendEventRequest {
    AppendEventRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        event: Some(event),
        expected_last_sequence: None,
    }
}

/// A text event by `author`.
pub fn text_event(author: &str, text: &str) -> Event {
    Event {
        author: author.into(),
        invocation_id: "e-test".into(),
        content: Some(Content {
            role: Some(if author == "user" { "user" } else { "model" }.into()),
            parts: vec![Part {
                data: Some(Data::Text(text.into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// A memory entry `id` by `author` holding `text` (an empty id: the server makes one).
pub fn text_memory(id: &str, author: &str, text: &str) -> MemoryEntry {
    MemoryEntry {
        id: id.into(),
        author: author.into(),
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![Part {
                data: Some(Data::Text(text.into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// An event whose only effect is a state delta.
pub fn delta_event(delta: serde_json::Value) -> Event {
    Event {
        author: "agent".into(),
        actions: Some(EventActions {
            state_delta: delta.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A timestamp `seconds` after the epoch.
pub fn ts(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

/// Parses a JSON text field of a response.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("valid JSON")
}
