//! Validity in time through gRPC, on sled and on PostgreSQL: a fact contradicted by a later
//! one is kept with its validity closed (a move from Berlin to Lisbon leaves two facts whose
//! validity adjoins), searches and listings answer what was valid now, at an `as_of` time, or
//! with superseded facts too, alongside the other filters; written entries are valid from what
//! the write says; bad times are INVALID_ARGUMENT naming their field. A local HTTP server
//! stands in for the generation model.

use adk_common::postgres::StoreLocation;
use adk_proto::{
    memory::v1::{
        generate_memories_request, memory_service_client::MemoryServiceClient,
        AddEventsToMemoryRequest, AddMemoryRequest, EventList, ExtractedFact, FactList,
        GenerateMemoriesRequest, GenerateOptions, GenerationJob, ListMemoriesRequest,
        ListMemoryRevisionsRequest, MemoryEntry, MemoryFilter, MemoryKind, MemoryRevision,
        PurgeMemoriesRequest, RevisionAction, RollbackMemoryRequest, SearchMemoryRequest,
    },
    session::v1::{part::Data, Event},
};
use adk_tests::{
    chat_model::{decisions, model, prompt, requests, script, Answer},
    fresh_schema, text_event, text_memory, ts, MemoryServer,
};
use prost_types::Timestamp;
use serde_json::json;
use tempfile::TempDir;
use tonic::{transport::Channel, Code};

type Client = MemoryServiceClient<Channel>;

const NO_SESSION_SVC: &str = "http://127.0.0.1:9";

/// 2024-01-10T09:00:00Z: when the user said they live in Berlin.
const BERLIN_SAID: i64 = 1_704_877_200;
/// 2025-05-01T00:00:00Z: when they moved to Lisbon, as the later conversation says.
const MOVED: i64 = 1_746_057_600;
/// 2025-06-01T12:00:00Z: when they said so.
const LISBON_SAID: i64 = 1_748_779_200;

/// Where a test's server keeps its memories.
enum Backend {
    Sled,
    Postgres,
}

/// A server with the stand-in model at `base_url`, on `backend` (the directory keeps a sled
/// store while the server runs).
async fn server(base_url: &str, backend: Backend) -> (Option<TempDir>, MemoryServer) {
    let (dir, store) = match backend {
        Backend::Sled => {
            let dir = TempDir::new().expect("temp dir");
            let store = StoreLocation::Embedded(dir.path().join("memory"));
            (Some(dir), store)
        }
        Backend::Postgres => {
            let url = adk_tests::prerequisite::postgres();
            (None, StoreLocation::Postgres(fresh_schema(&url).await))
        }
    };
    let url = base_url.to_owned();
    let server = MemoryServer::start_on_with(NO_SESSION_SVC, store, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
    })
    .await;
    (dir, server)
}

fn event(id: &str, text: &str, seconds: i64) -> Event {
    Event {
        id: id.into(),
        timestamp: Some(ts(seconds)),
        ..text_event("user", text)
    }
}

/// An extraction answer: (topic, fact, source event ids, valid_from as the model says it).
fn facts_since(items: &[(&str, &str, &[&str], Option<&str>)]) -> Answer {
    let facts: Vec<_> = items
        .iter()
        .map(|(topic, fact, ids, since)| {
            json!({"topic": topic, "fact": fact, "source_event_ids": ids, "valid_from": since})
        })
        .collect();
    Answer::Content(json!({ "facts": facts }))
}

async fn generate(c: &mut Client, events: Vec<Event>) -> GenerationJob {
    c.generate_memories(GenerateMemoriesRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        source: Some(generate_memories_request::Source::Events(EventList {
            events,
        })),
        options: Some(GenerateOptions {
            wait: true,
            ..Default::default()
        }),
    })
    .await
    .expect("generation succeeds")
    .into_inner()
    .job
    .expect("a job")
}

fn text(m: &MemoryEntry) -> String {
    match m.content.as_ref().map(|c| &c.parts[0].data) {
        Some(Some(Data::Text(t))) => t.clone(),
        _ => String::new(),
    }
}

/// A search of the user's memory: the texts found, best first.
async fn search(c: &mut Client, request: SearchMemoryRequest) -> Vec<String> {
    let request = SearchMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        ..request
    };
    let found = c.search_memory(request).await.expect("search").into_inner();
    found.memories.iter().map(text).collect()
}

fn query(text: &str) -> SearchMemoryRequest {
    SearchMemoryRequest {
        query: text.into(),
        ..Default::default()
    }
}

fn as_of(seconds: i64) -> Option<Timestamp> {
    Some(ts(seconds))
}

/// The user's memories a listing returns, in ingestion order.
async fn list(c: &mut Client, request: ListMemoriesRequest) -> Vec<MemoryEntry> {
    let request = ListMemoriesRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        page_size: 100,
        ..request
    };
    c.list_memories(request)
        .await
        .expect("list")
        .into_inner()
        .memories
}

async fn revisions(c: &mut Client, memory_id: &str) -> Vec<MemoryRevision> {
    c.list_memory_revisions(ListMemoryRevisionsRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memory_id: memory_id.into(),
        page_size: 100,
        page_token: String::new(),
    })
    .await
    .expect("revisions")
    .into_inner()
    .revisions
}

/// Berlin, then Lisbon: the second conversation supersedes the first fact, which is kept with
/// its validity closed where Lisbon's begins.
async fn a_move_leaves_adjoining_validity(backend: Backend) {
    let (url, model) = model(vec![facts_since(&[(
        "personal_facts",
        "Alice lives in Berlin.",
        &["e1"],
        None,
    )])])
    .await;
    let (_dir, srv) = server(&url, backend).await;
    let mut c = srv.client.clone();
    let first = generate(
        &mut c,
        vec![event("e1", "I live in Berlin, in Kreuzberg.", BERLIN_SAID)],
    )
    .await;
    assert_eq!((first.added, first.invalidated), (1, 0), "{first:?}");
    let berlin = list(&mut c, ListMemoriesRequest::default()).await;
    assert_eq!(berlin.len(), 1);
    let berlin_id = berlin[0].id.clone();
    // No time from the model: the time of the event that states it.
    assert_eq!(berlin[0].valid_from, as_of(BERLIN_SAID));
    assert_eq!(berlin[0].invalid_at, None);

    script(
        &model,
        vec![
            facts_since(&[(
                "personal_facts",
                "Alice lives in Lisbon.",
                &["e2"],
                Some("2025-05-01T00:00:00Z"),
            )]),
            decisions(&[(0, "supersede", &berlin_id, "Alice lives in Lisbon.")]),
        ],
    );
    let second = generate(
        &mut c,
        vec![event(
            "e2",
            "We moved to Lisbon on the first of May!",
            LISBON_SAID,
        )],
    )
    .await;
    assert_eq!(
        (
            second.added,
            second.updated,
            second.invalidated,
            second.deleted
        ),
        (1, 0, 1, 0),
        "{second:?}"
    );
    let sent = requests(&model);
    let extraction = prompt(&sent[1]);
    assert!(
        extraction.contains("[e2, 2025-06-01T12:00:00Z] user:"),
        "the model reads each turn's time: {extraction}"
    );
    let consolidation = prompt(&sent[2]);
    assert!(
        consolidation.contains(&format!(
            "{berlin_id}: Alice lives in Berlin. (since 2024-01-10T09:00:00Z)"
        )),
        "{consolidation}"
    );

    // Both facts are kept; their validity adjoins.
    let all = list(
        &mut c,
        ListMemoriesRequest {
            include_superseded: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(all.len(), 2, "{all:?}");
    let (old, new) = (&all[0], &all[1]);
    assert_eq!(
        (text(old).as_str(), text(new).as_str()),
        ("Alice lives in Berlin.", "Alice lives in Lisbon.")
    );
    assert_eq!(old.id, berlin_id);
    assert_eq!(old.valid_from, as_of(BERLIN_SAID));
    assert_eq!(new.valid_from, as_of(MOVED));
    assert_eq!(
        old.invalid_at, new.valid_from,
        "Berlin ends where Lisbon begins"
    );
    assert_eq!(new.invalid_at, None);

    // What was valid then, now, and both.
    let lives = "where does Alice live";
    assert_eq!(
        search(&mut c, query(lives)).await,
        ["Alice lives in Lisbon."]
    );
    for (seconds, expected) in [
        (BERLIN_SAID - 1, vec![]),
        (BERLIN_SAID, vec!["Alice lives in Berlin."]),
        (MOVED - 1, vec!["Alice lives in Berlin."]),
        (MOVED, vec!["Alice lives in Lisbon."]),
        (LISBON_SAID, vec!["Alice lives in Lisbon."]),
    ] {
        let request = SearchMemoryRequest {
            as_of: as_of(seconds),
            ..query(lives)
        };
        assert_eq!(search(&mut c, request).await, expected, "as of {seconds}");
        let listed = list(
            &mut c,
            ListMemoriesRequest {
                as_of: as_of(seconds),
                ..Default::default()
            },
        )
        .await;
        assert_eq!(
            listed.iter().map(text).collect::<Vec<_>>(),
            expected,
            "listed as of {seconds}"
        );
    }
    let mut both = search(
        &mut c,
        SearchMemoryRequest {
            include_superseded: true,
            ..query(lives)
        },
    )
    .await;
    both.sort();
    assert_eq!(both, ["Alice lives in Berlin.", "Alice lives in Lisbon."]);
    let listed = list(&mut c, ListMemoriesRequest::default()).await;
    assert_eq!(
        listed.iter().map(text).collect::<Vec<_>>(),
        ["Alice lives in Lisbon."]
    );

    // Alongside the other filters: a topic and a kind.
    let personal = || {
        Some(MemoryFilter {
            topics: vec!["personal_facts".into()],
            ..Default::default()
        })
    };
    let filtered = |as_of| SearchMemoryRequest {
        filter: personal(),
        kind: MemoryKind::Generated as i32,
        as_of,
        ..query(lives)
    };
    assert_eq!(
        search(&mut c, filtered(None)).await,
        ["Alice lives in Lisbon."]
    );
    assert_eq!(
        search(&mut c, filtered(as_of(BERLIN_SAID))).await,
        ["Alice lives in Berlin."]
    );
    let raw = SearchMemoryRequest {
        kind: MemoryKind::Raw as i32,
        include_superseded: true,
        ..query(lives)
    };
    assert!(search(&mut c, raw).await.is_empty());

    // The old fact's history records the invalidation.
    let history = revisions(&mut c, &berlin_id).await;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0].action, RevisionAction::Added as i32);
    assert_eq!(history[0].valid_from, as_of(BERLIN_SAID));
    let invalidated = &history[1];
    assert_eq!(invalidated.action, RevisionAction::Invalidated as i32);
    assert_eq!(invalidated.previous_fact, "Alice lives in Berlin.");
    assert_eq!(invalidated.new_fact, "Alice lives in Berlin.");
    assert_eq!(invalidated.superseded_by, new.id);
    assert_eq!(invalidated.invalid_at, as_of(MOVED));
    assert_eq!(invalidated.job_id, second.id);
    let added = revisions(&mut c, &new.id).await;
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].valid_from, as_of(MOVED));

    // A purge matches superseded facts too (a dry run deletes nothing).
    let purge = c
        .purge_memories(PurgeMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            kind: MemoryKind::Generated as i32,
            ..Default::default()
        })
        .await
        .expect("purge dry run")
        .into_inner();
    assert_eq!(purge.count, 2, "{purge:?}");

    // A superseded fact is no candidate for consolidation: only what is valid now is.
    script(
        &model,
        vec![
            facts_since(&[("personal_facts", "Alice lives near the sea.", &["e3"], None)]),
            decisions(&[(0, "keep", &new.id, "")]),
        ],
    );
    generate(
        &mut c,
        vec![event(
            "e3",
            "Alice lives near the sea now.",
            LISBON_SAID + 60,
        )],
    )
    .await;
    let consolidation = prompt(&requests(&model)[4]);
    assert!(consolidation.contains(&new.id), "{consolidation}");
    assert!(!consolidation.contains(&berlin_id), "{consolidation}");

    // An invalidation is no revision to roll back to; rolling back to the addition makes the
    // fact valid again, from where it began.
    let rollback = |revision_id: &str| RollbackMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memory_id: berlin_id.clone(),
        revision_id: revision_id.into(),
    };
    let refused = c
        .rollback_memory(rollback(&invalidated.revision_id))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().starts_with("revision_id"), "{refused:?}");
    let restored = c
        .rollback_memory(rollback(&history[0].revision_id))
        .await
        .expect("rollback")
        .into_inner()
        .revision
        .expect("a revision");
    assert_eq!(restored.valid_from, as_of(BERLIN_SAID));
    let listed = list(&mut c, ListMemoriesRequest::default()).await;
    let berlin = listed
        .iter()
        .find(|m| m.id == berlin_id)
        .expect("valid again");
    assert_eq!(
        (berlin.valid_from, berlin.invalid_at),
        (as_of(BERLIN_SAID), None)
    );
    srv.shutdown().await;
}

/// Entries written directly or ingested are valid from what the write says; bad times are
/// refused, naming their field, and write nothing.
async fn written_entries_are_valid_from_what_the_write_says(backend: Backend) {
    let (url, _model) = model(vec![]).await;
    let (_dir, srv) = server(&url, backend).await;
    let mut c = srv.client.clone();
    let memory = |id: &str, text: &str| MemoryEntry {
        timestamp: Some(ts(2_000)),
        ..text_memory(id, "user", text)
    };
    c.add_memory(AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![
            MemoryEntry {
                valid_from: as_of(1_000),
                invalid_at: as_of(3_000),
                ..memory("given", "The office was on Main Street.")
            },
            memory("stamped", "The office is on Harbour Road."),
        ],
        custom_metadata: String::new(),
    })
    .await
    .expect("add_memory");
    c.add_events_to_memory(AddEventsToMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        events: vec![event("turn", "Our office is getting a new roof.", 2_500)],
        custom_metadata: String::new(),
    })
    .await
    .expect("add_events_to_memory");
    let all = list(
        &mut c,
        ListMemoriesRequest {
            include_superseded: true,
            ..Default::default()
        },
    )
    .await;
    let validity: Vec<_> = all
        .iter()
        .map(|m| (m.id.as_str(), m.valid_from, m.invalid_at))
        .collect();
    assert_eq!(
        validity,
        [
            ("given", as_of(1_000), as_of(3_000)),
            ("stamped", as_of(2_000), None),
            ("turn", as_of(2_500), None),
        ]
    );
    let office = |as_of| SearchMemoryRequest {
        as_of,
        ..query("office")
    };
    let mut then = search(&mut c, office(as_of(2_600))).await;
    then.sort();
    assert_eq!(
        then,
        [
            "Our office is getting a new roof.",
            "The office is on Harbour Road.",
            "The office was on Main Street."
        ]
    );
    assert_eq!(
        search(&mut c, office(as_of(1_500))).await,
        ["The office was on Main Street."]
    );
    assert_eq!(
        search(&mut c, office(None)).await.len(),
        2,
        "Main Street ended"
    );

    // Bad times.
    let bad = Some(Timestamp {
        seconds: 5,
        nanos: -1,
    });
    let status = c
        .search_memory(SearchMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            as_of: bad,
            ..query("office")
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("as_of"), "{status:?}");
    let status = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            as_of: bad,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("as_of"), "{status:?}");
    for (entry, field) in [
        (
            MemoryEntry {
                valid_from: as_of(3_000),
                invalid_at: as_of(3_000),
                ..memory("ok", "fine")
            },
            "memories[1].invalid_at",
        ),
        (
            MemoryEntry {
                invalid_at: as_of(1_999),
                ..memory("ok", "fine")
            },
            "memories[1].invalid_at",
        ),
        (
            MemoryEntry {
                valid_from: bad,
                ..memory("ok", "fine")
            },
            "memories[1].valid_from",
        ),
    ] {
        let status = c
            .add_memory(AddMemoryRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                memories: vec![memory("first", "written first"), entry],
                custom_metadata: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with(field), "{field}: {status:?}");
    }
    let status = c
        .generate_memories(GenerateMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            source: Some(generate_memories_request::Source::Facts(FactList {
                facts: vec![ExtractedFact {
                    text: "A fact.".into(),
                    valid_from: bad,
                    ..Default::default()
                }],
            })),
            options: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().starts_with("facts.facts[0].valid_from"),
        "{status:?}"
    );
    // Nothing of the refused writes was stored.
    let after = list(
        &mut c,
        ListMemoriesRequest {
            include_superseded: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(after.len(), 3);
    srv.shutdown().await;
}

/// A fact given to GenerateMemories is valid from its valid_from, or from its generation.
async fn given_facts_are_valid_from_their_time(backend: Backend) {
    let (url, _model) = model(vec![]).await;
    let (_dir, srv) = server(&url, backend).await;
    let mut c = srv.client.clone();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    c.generate_memories(GenerateMemoriesRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        source: Some(generate_memories_request::Source::Facts(FactList {
            facts: vec![
                ExtractedFact {
                    text: "The user learned to sail in 2019.".into(),
                    valid_from: as_of(1_546_300_800),
                    ..Default::default()
                },
                ExtractedFact {
                    text: "The user owns a red kayak.".into(),
                    ..Default::default()
                },
            ],
        })),
        options: Some(GenerateOptions {
            wait: true,
            disable_consolidation: true,
            ..Default::default()
        }),
    })
    .await
    .expect("generation");
    let listed = list(&mut c, ListMemoriesRequest::default()).await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].valid_from, as_of(1_546_300_800));
    let generated = listed[1].valid_from.expect("valid from its generation");
    assert!(generated.seconds >= before, "{generated:?}");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_a_move_leaves_adjoining_validity() {
    a_move_leaves_adjoining_validity(Backend::Sled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_written_entries_are_valid_from_what_the_write_says() {
    written_entries_are_valid_from_what_the_write_says(Backend::Sled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_given_facts_are_valid_from_their_time() {
    given_facts_are_valid_from_their_time(Backend::Sled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_a_move_leaves_adjoining_validity() {
    a_move_leaves_adjoining_validity(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_written_entries_are_valid_from_what_the_write_says() {
    written_entries_are_valid_from_what_the_write_says(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_given_facts_are_valid_from_their_time() {
    given_facts_are_valid_from_their_time(Backend::Postgres).await;
}
