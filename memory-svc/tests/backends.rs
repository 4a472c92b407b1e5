//! The sled and PostgreSQL backends answer alike: the same writes, then the same searches and
//! listings, give identical results on both, scores included to the last bit.
//!
//! Needs PostgreSQL (`ADK_TEST_POSTGRES`): ignored unless asked for (`adk_tests::prerequisite`).

use adk_common::postgres::StoreLocation;
use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, memory_service_client::MemoryServiceClient,
        AddEventsToMemoryRequest, AddMemoryRequest, DeleteMemoryRequest, ListMemoriesRequest,
        MemoryEntry, SearchMemoryRequest,
    },
    session::v1::Event,
};
use adk_tests::{fresh_schema, search_request, text_event, ts, MemoryServer};
use tonic::transport::Channel;

/// A small deterministic corpus: Zipf-like words, so some are in most entries and some in few.
fn corpus(n: usize) -> Vec<Event> {
    const WORDS: &[&str] = &[
        "the",
        "my",
        "is",
        "project",
        "favourite",
        "rust",
        "garden",
        "piano",
        "tokyo",
        "東京",
        "の",
        "trip",
        "budget",
        "deadline",
        "recipe",
        "tomato",
        "sourdough",
        "marathon",
        "violin",
        "kyoto",
        "database",
        "replica",
        "memory",
        "session",
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| {
            let len = 3 + (next() % 12) as usize;
            let words: Vec<&str> = (0..len)
                .map(|_| {
                    // Squaring skews the choice towards the first words.
                    let r = (next() % 1000) as f64 / 1000.0;
                    WORDS[((r * r) * WORDS.len() as f64) as usize]
                })
                .collect();
            let mut event = text_event(if i % 3 == 0 { "user" } else { "agent" }, &words.join(" "));
            event.id = format!("e{i}");
            event.timestamp = Some(ts(1_700_000_000 + i as i64));
            event
        })
        .collect()
}

async fn write(c: &mut MemoryServiceClient<Channel>, events: &[Event]) {
    for (i, chunk) in events.chunks(40).enumerate() {
        c.add_events_to_memory(AddEventsToMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: format!("s{}", i % 3),
            events: chunk.to_vec(),
            custom_metadata: String::new(),
        })
        .await
        .unwrap();
    }
    // Rewrites in place, a deletion that tombstones, and a direct memory.
    c.add_memory(AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![MemoryEntry {
            id: "e5".into(),
            session_id: "s0".into(),
            content: text_event("user", "my favourite tomato recipe").content,
            ..Default::default()
        }],
        ..Default::default()
    })
    .await
    .unwrap();
    c.delete_memory(DeleteMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        target: Some(Target::MemoryId("e7".into())),
    })
    .await
    .unwrap();
    // Overwrites in place all over the ingestion order, with other words (so that blocks lose
    // and gain postings in their middle), then deletions by id and of a whole session.
    let overwrites = events
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 23 == 4)
        .map(|(i, e)| MemoryEntry {
            id: e.id.clone(),
            session_id: format!("s{}", (i / 40) % 3),
            content: text_event("user", &format!("tomato violin deadline {}", e.id)).content,
            ..Default::default()
        })
        .collect();
    c.add_memory(AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: overwrites,
        ..Default::default()
    })
    .await
    .unwrap();
    for target in (0..events.len())
        .filter(|i| i % 31 == 9)
        .map(|i| Target::MemoryId(format!("e{i}")))
        .chain([Target::SessionId("s2".into())])
    {
        c.delete_memory(DeleteMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            target: Some(target),
        })
        .await
        .unwrap();
    }
}

async fn answers(c: &mut MemoryServiceClient<Channel>) -> Vec<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for (query, author) in [
        ("the", ""),
        ("favourite project", ""),
        ("東京 trip budget", ""),
        ("the my is rust", "agent"),
        ("sourdough marathon violin", ""),
        ("what is my favourite recipe with tomato", "user"),
        ("tomato violin deadline", ""),
        ("my project", ""),
    ] {
        let hits = c
            .search_memory(SearchMemoryRequest {
                limit: 25,
                author: author.into(),
                ..search_request("app", "u", query)
            })
            .await
            .unwrap()
            .into_inner()
            .memories;
        // Scores compared bit for bit.
        out.push(
            hits.into_iter()
                .map(|m| (m.id, m.score.to_bits()))
                .collect(),
        );
    }
    let mut token = String::new();
    let mut listed = Vec::new();
    loop {
        let page = c
            .list_memories(ListMemoriesRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                page_size: 37,
                page_token: token,
                kind: 0,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        listed.extend(page.memories.into_iter().map(|m| (m.id, 0)));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    out.push(listed);
    out
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn both_backends_rank_and_list_identically() {
    let url = adk_tests::prerequisite::postgres();
    // Enough entries for several posting blocks per term on both backends.
    let events = corpus(1_100);
    let sled = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    let pg = MemoryServer::start_on(
        "http://127.0.0.1:9",
        Some(StoreLocation::Postgres(fresh_schema(&url).await)),
    )
    .await;
    let mut results = Vec::new();
    for server in [&sled, &pg] {
        let mut c = server.client.clone();
        write(&mut c, &events).await;
        results.push(answers(&mut c).await);
    }
    assert!(results[0].iter().all(|hits| !hits.is_empty()));
    assert_eq!(results[0], results[1]);
}
