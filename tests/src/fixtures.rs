//! Stored data as the listings of `fixtures/` spell it, for exact comparisons.

use adk_proto::session::v1::{part::Data, session_service_client::SessionServiceClient, Session};
use prost_types::Timestamp;
use tonic::transport::Channel;

use crate::requests::get_request;

/// A memory entry as JSON, its content both as text, for people, and as its protobuf encoding
/// in hex, for an exact comparison (the listings of `fixtures/`).
pub fn memory_entry_json(m: &adk_proto::memory::v1::MemoryEntry) -> serde_json::Value {
    use prost::Message;
    let content = m.content.clone().unwrap_or_default();
    let text: String = content
        .parts
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let hex: String = content
        .encode_to_vec()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    serde_json::json!({
        "id": m.id,
        "session_id": m.session_id,
        "author": m.author,
        "timestamp": m.timestamp.map(|t| serde_json::json!({"seconds": t.seconds, "nanos": t.nanos})),
        "custom_metadata": m.custom_metadata,
        "text": text,
        "content_pb_hex": hex,
    })
}

/// Every session of the given `(app, user)` listings as the fixtures of `fixtures/` spell them:
/// each listing in its order, and each session as GetSession returns it, its state text as sent
/// (key order included) and each event's protobuf encoding in hex, for an exact comparison.
pub async fn sessions_json(
    client: &mut SessionServiceClient<Channel>,
    listings: &[(&str, &str)],
) -> serde_json::Value {
    use adk_proto::session::v1::ListSessionsRequest;
    use prost::Message;
    let time = |t: &Option<Timestamp>| t.map(|t| serde_json::json!([t.seconds, t.nanos]));
    let session_json = |s: &Session| {
        let events: Vec<String> = s
            .events
            .iter()
            .map(|e| {
                e.encode_to_vec()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        serde_json::json!({
            "id": s.id, "app_name": s.app_name, "user_id": s.user_id, "state": s.state,
            "create_time": time(&s.create_time), "last_update_time": time(&s.last_update_time),
            "last_sequence": s.last_sequence, "expire_time": time(&s.expire_time),
            "events": events,
        })
    };
    let mut out = Vec::new();
    for (app, user) in listings {
        let listed = client
            .list_sessions(ListSessionsRequest {
                app_name: (*app).into(),
                user_id: Some((*user).into()),
                page_size: 1000,
                page_token: String::new(),
                ..Default::default()
            })
            .await
            .expect("list_sessions")
            .into_inner();
        assert!(listed.next_page_token.is_empty(), "one page");
        let mut sessions = Vec::new();
        for s in &listed.sessions {
            let whole = client
                .get_session(get_request(app, user, &s.id))
                .await
                .expect("get_session")
                .into_inner();
            sessions.push(session_json(&whole));
        }
        out.push(serde_json::json!({
            "app_name": app, "user_id": user,
            "listed": listed.sessions.iter().map(session_json).collect::<Vec<_>>(),
            "sessions": sessions,
        }));
    }
    serde_json::Value::Array(out)
}
