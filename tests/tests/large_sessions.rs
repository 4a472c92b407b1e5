//! Large events and large sessions (#15): events up to the server's 16 MiB limit come back, and
//! a session far larger than any message limit is read in replies bounded by
//! `max_reply_event_bytes`, GetSession first and ListEvents for the rest.

use adk_proto::session::v1::{
    part::Data, session_service_client::SessionServiceClient, Event, GetSessionRequest,
    ListEventsRequest,
};
use adk_tests::{get_request, text_event, SessionServer};
use prost::Message;
use serde_json::json;
use tonic::transport::Channel;

const MIB: usize = 1 << 20;

/// A client with the limits the project's clients use: the server's largest request (a 16 MiB
/// event plus 1 MiB), far below the sessions these tests read.
async fn bounded_client(srv: &SessionServer) -> SessionServiceClient<Channel> {
    SessionServiceClient::connect(format!("http://{}", srv.addr))
        .await
        .expect("client connects")
        .max_decoding_message_size(17 * MIB)
        .max_encoding_message_size(17 * MIB)
}

fn text_of(event: &Event) -> &str {
    match event.content.as_ref().and_then(|c| c.parts.first()) {
        Some(part) => match &part.data {
            Some(Data::Text(text)) => text,
            _ => "",
        },
        None => "",
    }
}

/// A `len`-byte text, different for each `i`.
fn big_text(i: usize, len: usize) -> String {
    let head = format!("event {i}: ");
    format!("{head}{}", "x".repeat(len - head.len()))
}

fn get(id: &str, budget: u64) -> GetSessionRequest {
    GetSessionRequest {
        max_reply_event_bytes: budget,
        ..get_request("app", "u", id)
    }
}

fn list(id: &str, after: u64, token: String, budget: u64) -> ListEventsRequest {
    ListEventsRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: id.into(),
        after_sequence: after,
        page_size: 100,
        page_token: token,
        max_reply_event_bytes: budget,
    }
}

fn event_bytes(events: &[Event]) -> usize {
    events.iter().map(Message::encoded_len).sum()
}

/// Reads a whole session the way a bounded client does: GetSession, then ListEvents after the
/// last event returned until `last_sequence`. Checks every reply against `budget` (one event
/// may exceed it alone) and returns the events and the number of replies.
async fn read_bounded(
    client: &mut SessionServiceClient<Channel>,
    id: &str,
    budget: usize,
) -> (Vec<Event>, usize) {
    let session = client
        .get_session(get(id, budget as u64))
        .await
        .expect("get_session")
        .into_inner();
    let within = |events: &[Event]| events.len() == 1 || event_bytes(events) <= budget;
    assert!(within(&session.events), "GetSession reply over budget");
    let last_sequence = session.last_sequence;
    let mut events = session.events;
    let mut replies = 1;
    let mut token = String::new();
    while events.last().map(|e| e.sequence) < Some(last_sequence) {
        let after = events.last().map_or(0, |e| e.sequence);
        let page = client
            .list_events(list(id, after, std::mem::take(&mut token), budget as u64))
            .await
            .expect("list_events")
            .into_inner();
        replies += 1;
        assert!(
            !page.events.is_empty(),
            "a page before the end holds events"
        );
        assert!(within(&page.events), "ListEvents page over budget");
        events.extend(page.events);
        token = page.next_page_token;
    }
    (events, replies)
}

#[tokio::test]
async fn events_of_5_and_15_mib_are_stored_and_read_back() {
    let srv = SessionServer::start().await;
    let mut client = bounded_client(&srv).await;
    srv.create("app", "u", "big", json!({})).await;
    let sizes = [5 * MIB, 15 * MIB];
    for (i, size) in sizes.iter().enumerate() {
        srv.append("app", "u", "big", text_event("user", &big_text(i, *size)))
            .await;
    }
    let (events, replies) = read_bounded(&mut client, "big", 4 * MIB).await;
    assert_eq!(
        replies, 2,
        "one event per reply: each exceeds the budget alone"
    );
    assert_eq!(events.len(), 2);
    for (i, size) in sizes.iter().enumerate() {
        assert_eq!(text_of(&events[i]), big_text(i, *size));
    }
}

#[tokio::test]
async fn a_120_mib_session_is_read_in_bounded_replies() {
    let srv = SessionServer::start().await;
    let mut client = bounded_client(&srv).await;
    srv.create("app", "u", "huge", json!({})).await;
    // 124 events of just under 1 MiB: 4 fit in a 4 MiB reply, 123.5 MiB in all.
    let (count, size) = (124, MIB - 4096);
    for i in 0..count {
        srv.append("app", "u", "huge", text_event("user", &big_text(i, size)))
            .await;
    }
    // Without a budget the reply is one message of the whole session: more than any client
    // accepts.
    let whole = client.get_session(get("huge", 0)).await;
    assert_eq!(
        whole.expect_err("a 120 MiB reply").code(),
        tonic::Code::OutOfRange
    );

    let (events, replies) = read_bounded(&mut client, "huge", 4 * MIB).await;
    assert!(event_bytes(&events) > 120 * MIB);
    assert_eq!(replies, count.div_ceil(4));
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=count as u64).collect::<Vec<_>>());
    for (i, event) in events.iter().enumerate() {
        assert_eq!(text_of(event), big_text(i, size), "event {i}");
    }

    // A window of recent events is read the same way, starting where the window starts.
    let recent = client
        .get_session(GetSessionRequest {
            num_recent_events: Some(10),
            ..get("huge", 4 * MIB as u64)
        })
        .await
        .expect("get_session")
        .into_inner();
    let sequences: Vec<u64> = recent.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, vec![115, 116, 117, 118]);
}

#[tokio::test]
async fn a_byte_bound_keeps_page_size_and_tokens_for_small_events() {
    let srv = SessionServer::start().await;
    let mut client = bounded_client(&srv).await;
    srv.create("app", "u", "small", json!({})).await;
    for i in 0..150 {
        srv.append("app", "u", "small", text_event("user", &format!("m{i}")))
            .await;
    }
    let first = client
        .list_events(list("small", 0, String::new(), 4 * MIB as u64))
        .await
        .expect("list_events")
        .into_inner();
    assert_eq!(first.events.len(), 100);
    assert!(!first.next_page_token.is_empty());
    let second = client
        .list_events(list("small", 0, first.next_page_token, 4 * MIB as u64))
        .await
        .expect("list_events")
        .into_inner();
    let sequences: Vec<u64> = second.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (101..=150).collect::<Vec<_>>());
    assert!(second.next_page_token.is_empty());

    // A budget that ends inside a page: the token resumes right after the last event returned.
    let one_event = first.events[0].encoded_len() as u64;
    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let page = client
            .list_events(list("small", 0, token, one_event * 7))
            .await
            .expect("list_events")
            .into_inner();
        assert!(page.events.len() <= 7);
        seen.extend(page.events.iter().map(|e| e.sequence));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, (1..=150).collect::<Vec<_>>());
}
