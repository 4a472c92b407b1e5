//! Connections to the servers and the requests the scenarios send: the ~1 KB event and its
//! AppendEvent request, sessions to append to, the events to ingest into memory and the timed
//! search.

use std::time::SystemTime;

use adk_proto::{
    memory::v1::{memory_service_client::MemoryServiceClient, SearchMemoryRequest},
    session::v1::{
        part, session_service_client::SessionServiceClient, AppendEventRequest, Content,
        CreateSessionRequest, Event, EventActions, Part,
    },
};
use tonic::transport::Channel;

use crate::{server::Server, text::Corpus, Result, APP};

fn now_ts() -> prost_types::Timestamp {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Connections to a server; workers use them round-robin.
pub fn session_clients(server: &Server, n: usize) -> Vec<SessionServiceClient<Channel>> {
    (0..n.max(1))
        .map(|_| {
            let ch = Channel::from_shared(format!("http://{}", server.addr))
                .unwrap()
                .tcp_nodelay(true)
                .connect_lazy();
            SessionServiceClient::new(ch)
                .max_decoding_message_size(512 << 20)
                .max_encoding_message_size(512 << 20)
        })
        .collect()
}

pub fn memory_clients(server: &Server, n: usize) -> Vec<MemoryServiceClient<Channel>> {
    (0..n.max(1))
        .map(|_| {
            let ch = Channel::from_shared(format!("http://{}", server.addr))
                .unwrap()
                .tcp_nodelay(true)
                .connect_lazy();
            MemoryServiceClient::new(ch)
                .max_decoding_message_size(512 << 20)
                .max_encoding_message_size(512 << 20)
        })
        .collect()
}

/// Connections for `concurrency` workers: one each, at most 8.
pub fn conns_for(concurrency: usize) -> usize {
    concurrency.clamp(1, 8)
}

/// The ~1 KB event every append scenario sends (id and timestamp set per call).
pub fn template_event(corpus: &Corpus, seed: u64) -> Event {
    let text = corpus.text_of_bytes(seed, 1000);
    Event {
        invocation_id: format!("inv-{seed}"),
        author: "model".into(),
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![Part {
                data: Some(part::Data::Text(text)),
                ..Default::default()
            }],
        }),
        actions: Some(EventActions::default()),
        ..Default::default()
    }
}

/// An AppendEvent of `template` as event `i` of (user, session), with a state delta in every
/// scope.
pub fn append_request(
    template: &Event,
    user: &str,
    session: &str,
    worker: usize,
    i: u64,
) -> AppendEventRequest {
    let mut event = template.clone();
    event.id = format!("{session}-{i}");
    event.timestamp = Some(now_ts());
    if let Some(actions) = event.actions.as_mut() {
        actions.state_delta = format!(
            r#"{{"app:last_writer":{worker},"user:turns":{i},"turn":{i},"last_topic":"topic-{}","temp:scratch":1}}"#,
            i % 97
        );
    }
    AppendEventRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: session.into(),
        event: Some(event),
        expected_last_sequence: None,
    }
}

/// Creates (user, session) in `app` with state in every scope.
pub async fn create_session(
    client: &mut SessionServiceClient<Channel>,
    app: &str,
    user: &str,
    session: &str,
) -> Result<()> {
    client
        .create_session(CreateSessionRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session.into(),
            state: r#"{"app:theme":"dark","user:name":"bench","turn":0}"#.into(),
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// Events `m{i}` for each `i` of `range`, with the texts `text(i)`, to ingest.
pub fn memory_events(text: impl Fn(u64) -> String, range: std::ops::Range<u64>) -> Vec<Event> {
    let ts = now_ts();
    range
        .map(|i| Event {
            id: format!("m{i}"),
            author: if i % 2 == 0 {
                "user".into()
            } else {
                "model".into()
            },
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(part::Data::Text(text(i))),
                    ..Default::default()
                }],
            }),
            timestamp: Some(ts),
            ..Default::default()
        })
        .collect()
}

/// The search the `search` scenario times: the 10 best of `user`'s memories for `query`.
pub fn search_request(user: &str, query: String) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: APP.into(),
        user_id: user.into(),
        query,
        limit: 10,
        ..Default::default()
    }
}
