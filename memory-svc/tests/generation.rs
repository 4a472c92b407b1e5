//! Memory generation (`--generator openai:BASE_URL`) through gRPC, against a local HTTP server
//! that stands in for an OpenAI-compatible chat model and answers as each test scripts it. The
//! servers run on sled, or on PostgreSQL when `ADK_TEST_POSTGRES` names a database.

use std::{sync::Arc, time::Duration};

use tokio::sync::Notify;

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request, delete_memory_request::Target, generate_memories_request,
        memory_service_client::MemoryServiceClient, AddSessionToMemoryRequest, DeleteMemoryRequest,
        EventList, ExtractedFact, FactList, GenerateMemoriesRequest, GenerateOptions,
        GenerationJob, GenerationState, GetGenerationJobRequest, ListMemoriesRequest,
        ListMemoryRevisionsRequest, MemoryEntry, MemoryKind, MemoryRevision, RevisionAction,
        RollbackMemoryRequest, SearchMemoryRequest,
    },
    session::v1::{part::Data, Content, Event, Part, Session},
};
use adk_tests::{
    chat_model::{decisions, facts, model, prompt, requests, script, Answer},
    spawn_binary_with, MemoryServer,
};
use serde_json::{json, Value};
use tonic::{transport::Channel, Code};

const NO_SESSION_SVC: &str = "http://127.0.0.1:1";

async fn server(base_url: &str) -> MemoryServer {
    let url = base_url.to_owned();
    MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
    })
    .await
}

fn event(id: &str, author: &str, text: &str) -> Event {
    Event {
        id: id.into(),
        author: author.into(),
        content: Some(Content {
            role: Some(author.into()),
            parts: vec![Part {
                data: Some(Data::Text(text.into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

fn generate(events: Vec<Event>, options: GenerateOptions) -> GenerateMemoriesRequest {
    GenerateMemoriesRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        source: Some(generate_memories_request::Source::Events(EventList {
            events,
        })),
        options: Some(options),
    }
}

fn wait() -> GenerateOptions {
    GenerateOptions {
        wait: true,
        ..Default::default()
    }
}

async fn run(c: &mut MemoryServiceClient<Channel>, events: Vec<Event>) -> GenerationJob {
    c.generate_memories(generate(events, wait()))
        .await
        .expect("generation succeeds")
        .into_inner()
        .job
        .unwrap()
}

fn text(m: &MemoryEntry) -> String {
    match &m.content.as_ref().unwrap().parts[0].data {
        Some(Data::Text(t)) => t.clone(),
        _ => String::new(),
    }
}

async fn listed(c: &mut MemoryServiceClient<Channel>, kind: MemoryKind) -> Vec<MemoryEntry> {
    c.list_memories(ListMemoriesRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        page_size: 100,
        page_token: String::new(),
        kind: kind as i32,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .memories
}

/// The generated memories' texts, sorted.
async fn generated(c: &mut MemoryServiceClient<Channel>) -> Vec<String> {
    let mut texts: Vec<String> = listed(c, MemoryKind::Generated)
        .await
        .iter()
        .map(text)
        .collect();
    texts.sort();
    texts
}

async fn revisions(c: &mut MemoryServiceClient<Channel>, memory_id: &str) -> Vec<MemoryRevision> {
    c.list_memory_revisions(ListMemoryRevisionsRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memory_id: memory_id.into(),
        page_size: 100,
        page_token: String::new(),
    })
    .await
    .unwrap()
    .into_inner()
    .revisions
}

async fn search(
    c: &mut MemoryServiceClient<Channel>,
    query: &str,
    kind: MemoryKind,
) -> Vec<String> {
    c.search_memory(SearchMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        query: query.into(),
        kind: kind as i32,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .memories
    .iter()
    .map(text)
    .collect()
}

async fn job(c: &mut MemoryServiceClient<Channel>, id: &str) -> GenerationJob {
    users_job(c, "u", id).await
}

async fn users_job(c: &mut MemoryServiceClient<Channel>, user: &str, id: &str) -> GenerationJob {
    c.get_generation_job(GetGenerationJobRequest {
        app_name: "app".into(),
        user_id: user.into(),
        job_id: id.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

/// Polls the job until it has left the queue (a background job has no other signal).
async fn finished(c: &mut MemoryServiceClient<Channel>, id: &str) -> GenerationJob {
    users_finished(c, "u", id).await
}

async fn users_finished(
    c: &mut MemoryServiceClient<Channel>,
    user: &str,
    id: &str,
) -> GenerationJob {
    for _ in 0..600 {
        let job = users_job(c, user, id).await;
        if job.state == GenerationState::Succeeded as i32
            || job.state == GenerationState::Failed as i32
        {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("job {id} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_are_extracted_into_generated_memories() {
    let (url, model) = model(vec![facts(&[
        ("preferences", "The user prefers window seats.", &["e1"]),
        (
            "relationships",
            "The user's daughter Mia starts school in September.",
            &["e2", "e3"],
        ),
    ])])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    let job = run(
        &mut c,
        vec![
            event("e1", "user", "Book me a window seat, as always."),
            event("e2", "user", "Mia starts school in September."),
            event(
                "e3",
                "model",
                "Noted: Mia, your daughter, starts in September.",
            ),
        ],
    )
    .await;
    assert_eq!(job.state, GenerationState::Succeeded as i32, "{job:?}");
    assert_eq!(
        (job.added, job.updated, job.deleted, job.kept, job.attempts),
        (2, 0, 0, 0, 1)
    );

    // The model was asked once (no memory to consolidate with), for structured output, with
    // the turns and the topics.
    let sent = requests(&model);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["model"], "stand-in");
    assert_eq!(sent[0]["response_format"]["type"], "json_schema");
    let p = prompt(&sent[0]);
    assert!(
        p.contains("[e2, time unknown] user: Mia starts school in September."),
        "{p}"
    );
    assert!(
        p.contains("- preferences:") && p.contains("- relationships:"),
        "{p}"
    );

    // Ordinary memories, marked in their metadata; no raw entries were written.
    let memories = listed(&mut c, MemoryKind::Generated).await;
    assert_eq!(memories.len(), 2);
    let mia = memories.iter().find(|m| text(m).contains("Mia")).unwrap();
    let metadata: Value = serde_json::from_str(&mia.custom_metadata).unwrap();
    assert_eq!(metadata["kind"], "generated");
    assert_eq!(metadata["topic"], "relationships");
    assert_eq!(metadata["source_event_ids"], json!(["e2", "e3"]));
    assert_eq!(metadata["job_id"], job.id.as_str());
    assert!(listed(&mut c, MemoryKind::Raw).await.is_empty());
    assert_eq!(listed(&mut c, MemoryKind::Unspecified).await.len(), 2);
    assert_eq!(
        search(&mut c, "window seat", MemoryKind::Generated).await,
        ["The user prefers window seats."]
    );
    assert!(search(&mut c, "window seat", MemoryKind::Raw)
        .await
        .is_empty());

    // Each addition is a revision.
    let added = revisions(&mut c, &mia.id).await;
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].action, RevisionAction::Added as i32);
    assert_eq!(added[0].previous_fact, "");
    assert_eq!(added[0].new_fact, text(mia));
    assert_eq!(added[0].source_event_ids, ["e2", "e3"]);
    assert_eq!(added[0].job_id, job.id);
    assert_eq!(revisions(&mut c, "").await.len(), 2);

    // DeleteMemory works on them.
    let deleted = c
        .delete_memory(DeleteMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            target: Some(Target::MemoryId(mia.id.clone())),
        })
        .await
        .unwrap()
        .into_inner()
        .deleted;
    assert_eq!(deleted, 1);
    assert_eq!(generated(&mut c).await, ["The user prefers window seats."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_adds_updates_supersedes_and_keeps() {
    let (url, model) = model(vec![facts(&[
        (
            "preferences",
            "The user prefers window seats on flights.",
            &["a1"],
        ),
        ("plans", "The user plans a trip to Lisbon in May.", &["a1"]),
        ("personal_facts", "The user lives in Berlin.", &["a2"]),
    ])])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    run(
        &mut c,
        vec![
            event(
                "a1",
                "user",
                "Window seat for my Lisbon trip in May, please.",
            ),
            event("a2", "user", "I live in Berlin."),
        ],
    )
    .await;
    let ids: std::collections::HashMap<String, String> = listed(&mut c, MemoryKind::Generated)
        .await
        .iter()
        .map(|m| (text(m), m.id.clone()))
        .collect();
    let (seats, trip, home) = (
        &ids["The user prefers window seats on flights."],
        &ids["The user plans a trip to Lisbon in May."],
        &ids["The user lives in Berlin."],
    );

    // A later conversation: the seat preference changes, the trip is off, Berlin is still
    // true, and there is something new.
    script(
        &model,
        vec![
            facts(&[
                (
                    "preferences",
                    "The user now prefers aisle seats on flights.",
                    &["b1"],
                ),
                (
                    "plans",
                    "The user cancelled the Lisbon trip in May.",
                    &["b2"],
                ),
                ("personal_facts", "The user lives in Berlin.", &["b3"]),
                (
                    "relationships",
                    "The user has a sister called Ana.",
                    &["b3"],
                ),
            ]),
            decisions(&[
                (
                    0,
                    "update",
                    seats,
                    "The user prefers aisle seats on flights.",
                ),
                (
                    1,
                    "supersede",
                    trip,
                    "The user cancelled the Lisbon trip in May.",
                ),
                (2, "keep", home, ""),
                (3, "add", "", "The user has a sister called Ana."),
            ]),
        ],
    );
    let job = run(
        &mut c,
        vec![
            event(
                "b1",
                "user",
                "Aisle seats from now on; window seats are too cramped.",
            ),
            event("b2", "user", "The Lisbon trip in May is off."),
            event("b3", "user", "My sister Ana visits me in Berlin."),
        ],
    )
    .await;
    assert_eq!(
        (
            job.added,
            job.updated,
            job.deleted,
            job.kept,
            job.invalidated
        ),
        (2, 1, 0, 1, 1),
        "{job:?}"
    );
    // The trip is no longer valid (kept as history); the cancellation is.
    assert_eq!(
        generated(&mut c).await,
        [
            "The user cancelled the Lisbon trip in May.",
            "The user has a sister called Ana.",
            "The user lives in Berlin.",
            "The user prefers aisle seats on flights.",
        ]
    );
    // The update kept the memory's id.
    assert!(listed(&mut c, MemoryKind::Generated)
        .await
        .iter()
        .any(|m| &m.id == seats));

    // Consolidation saw the new facts and only the memories the search found for them.
    let sent = requests(&model);
    assert_eq!(sent.len(), 3);
    let p = prompt(&sent[2]);
    for id in [seats, trip, home] {
        assert!(p.contains(id.as_str()), "{id} missing from {p}");
    }
    assert!(p.contains("3: The user has a sister called Ana."), "{p}");
    assert!(
        !p.contains("Aisle seats from now on"),
        "raw turns are not sent again: {p}"
    );

    let seat_history = revisions(&mut c, seats).await;
    assert_eq!(seat_history.len(), 2);
    assert_eq!(seat_history[1].action, RevisionAction::Updated as i32);
    assert_eq!(
        seat_history[1].previous_fact,
        "The user prefers window seats on flights."
    );
    assert_eq!(
        seat_history[1].new_fact,
        "The user prefers aisle seats on flights."
    );
    assert_eq!(seat_history[1].source_event_ids, ["b1"]);
    let trip_history = revisions(&mut c, trip).await;
    assert_eq!(trip_history[1].action, RevisionAction::Invalidated as i32);
    assert_eq!(
        trip_history[1].previous_fact,
        "The user plans a trip to Lisbon in May."
    );
    assert_eq!(trip_history[1].new_fact, trip_history[1].previous_fact);
    assert!(trip_history[1].invalid_at.is_some());
    assert_eq!(
        revisions(&mut c, home).await.len(),
        1,
        "keep changes nothing"
    );
    // Paging through all of them.
    let first = c
        .list_memory_revisions(ListMemoryRevisionsRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            page_size: 4,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.revisions.len(), 4);
    let rest = c
        .list_memory_revisions(ListMemoryRevisionsRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            page_size: 4,
            page_token: first.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.revisions.len(), 3);
    assert_eq!(rest.next_page_token, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_consolidation_adds_every_fact_in_one_call() {
    let fact = ("preferences", "The user likes green tea.", &["t1"][..]);
    let (url, model) = model(vec![facts(&[fact]), facts(&[fact])]).await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    run(&mut c, vec![event("t1", "user", "Green tea, please.")]).await;
    let options = GenerateOptions {
        wait: true,
        disable_consolidation: true,
        ..Default::default()
    };
    c.generate_memories(generate(
        vec![event("t1", "user", "Green tea, please.")],
        options,
    ))
    .await
    .unwrap();
    assert_eq!(requests(&model).len(), 2, "no consolidation call");
    assert_eq!(
        generated(&mut c).await,
        ["The user likes green tea.", "The user likes green tea."]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_fail_the_job_and_write_nothing() {
    let (url, model) = model(vec![facts(&[(
        "preferences",
        "The user prefers window seats.",
        &["m0"],
    )])])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    run(&mut c, vec![event("m0", "user", "Window seat.")]).await;
    let seats = listed(&mut c, MemoryKind::Generated).await[0].id.clone();
    let good_fact = || facts(&[("preferences", "The user prefers aisle seats.", &["m1"])]);
    let cases: Vec<(Vec<Answer>, &str)> = vec![
        (
            vec![Answer::Text("Sure! Here are the facts".into())],
            "content is not JSON",
        ),
        (
            vec![Answer::Content(json!({"memories": []}))],
            "do not follow the schema",
        ),
        (
            vec![facts(&[("hobbies", "The user knits.", &["m1"])])],
            "facts[0].topic \"hobbies\" is not one of",
        ),
        (
            vec![facts(&[("preferences", "The user knits.", &["nope"])])],
            "names \"nope\", not an event",
        ),
        (
            vec![facts(&[("preferences", "  ", &["m1"])])],
            "facts[0].fact must have",
        ),
        (
            vec![
                good_fact(),
                decisions(&[(0, "update", "no-such-memory", "x")]),
            ],
            "not an existing memory",
        ),
        (
            vec![good_fact(), decisions(&[(0, "merge", &seats, "x")])],
            "is not add, update",
        ),
        (vec![good_fact(), decisions(&[])], "fact 0 has no decision"),
        (
            vec![
                good_fact(),
                decisions(&[(0, "keep", "", ""), (0, "supersede", &seats, "x")]),
            ],
            "decided twice",
        ),
        (
            vec![good_fact(), decisions(&[(0, "update", &seats, "")])],
            "needs a text",
        ),
        (
            vec![good_fact(), decisions(&[(0, "supersede", &seats, "")])],
            "needs a text",
        ),
        (
            vec![Answer::Content(json!({"facts": [{
                "topic": "preferences", "fact": "The user knits.",
                "source_event_ids": ["m1"], "valid_from": "last spring",
            }]}))],
            "facts[0].valid_from \"last spring\" is not an RFC 3339 time",
        ),
    ];
    for (answers, expected) in cases {
        script(&model, answers);
        let err = c
            .generate_memories(generate(
                vec![event("m1", "user", "Aisle, please.")],
                wait(),
            ))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{expected}: {err:?}");
        assert!(
            err.message().contains("answered malformed output"),
            "{err:?}"
        );
        assert!(err.message().contains(expected), "{expected}: {err:?}");
        assert!(err.message().contains("(failed)"), "{err:?}");
        // The job failed for good, saying why; nothing was written.
        let id = err
            .message()
            .split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches(':');
        let failed = job(&mut c, id).await;
        assert_eq!(failed.state, GenerationState::Failed as i32);
        assert!(failed.error.contains(expected), "{failed:?}");
        assert_eq!(generated(&mut c).await, ["The user prefers window seats."]);
        assert_eq!(revisions(&mut c, "").await.len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_is_down_is_unavailable_by_name_and_the_job_is_retried() {
    // Nothing listens on port 1.
    let srv = server("http://127.0.0.1:1/v1").await;
    let mut c = srv.client.clone();
    let err = c
        .generate_memories(generate(vec![event("d1", "user", "Hello")], wait()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message()
            .contains("the generation model at http://127.0.0.1:1/v1 is unavailable"),
        "{err:?}"
    );
    assert!(err.message().contains("(queued for a retry)"), "{err:?}");
    let id = err
        .message()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .trim_end_matches(':');
    let queued = job(&mut c, id).await;
    assert_eq!(queued.state, GenerationState::Pending as i32);
    assert_eq!(queued.attempts, 1);
    assert!(queued.error.contains("127.0.0.1:1"), "{queued:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_and_background_jobs_complete() {
    let (url, model) = model(vec![
        Answer::Status(503),
        facts(&[("plans", "The user runs a marathon in October.", &["r1"])]),
    ])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    let queued = c
        .generate_memories(generate(
            vec![event("r1", "user", "Marathon in October!")],
            GenerateOptions::default(),
        ))
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    assert_eq!(queued.state, GenerationState::Pending as i32);
    let done = finished(&mut c, &queued.id).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    assert_eq!(done.added, 1);
    assert_eq!(requests(&model).len(), 2);
    assert_eq!(
        generated(&mut c).await,
        ["The user runs a marathon in October."]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_memories_are_not_returned_and_are_removed() {
    let (url, _model) = model(vec![
        facts(&[("plans", "The user collects stamps.", &["x2"])]),
        facts(&[("plans", "The user is in Paris this week.", &["x1"])]),
    ])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    // The lasting memory first: the short one's life need only outlast the listing just after
    // its job, not another job.
    let forever = GenerateOptions {
        wait: true,
        disable_consolidation: true,
        ..Default::default()
    };
    c.generate_memories(generate(
        vec![event("x2", "user", "I collect stamps.")],
        forever,
    ))
    .await
    .unwrap();
    let short = GenerateOptions {
        wait: true,
        disable_consolidation: true,
        ttl: Some(prost_types::Duration {
            seconds: 2,
            nanos: 0,
        }),
        ..Default::default()
    };
    c.generate_memories(generate(
        vec![event("x1", "user", "In Paris this week.")],
        short,
    ))
    .await
    .unwrap();
    let memories = listed(&mut c, MemoryKind::Generated).await;
    let paris = memories
        .iter()
        .find(|m| text(m).contains("Paris"))
        .unwrap()
        .clone();
    let metadata: Value = serde_json::from_str(&paris.custom_metadata).unwrap();
    let expire: prost_types::Timestamp = metadata["expire_time"].as_str().unwrap().parse().unwrap();
    let until_expired = expire.seconds - paris.timestamp.unwrap().seconds;
    assert!((1..=3).contains(&until_expired), "{metadata}");

    // Once expired, it is neither searched nor listed, and the sweep removes it.
    let mut hidden = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !generated(&mut c).await.iter().any(|t| t.contains("Paris")) {
            hidden = true;
            break;
        }
    }
    assert!(hidden, "the expired memory is still listed");
    assert!(search(&mut c, "Paris week", MemoryKind::Unspecified)
        .await
        .is_empty());
    swept(&mut c, "app", &paris.id).await;
    assert_eq!(generated(&mut c).await, ["The user collects stamps."]);
}

fn fact(text: &str, topic: &str, custom_metadata: &str) -> ExtractedFact {
    ExtractedFact {
        text: text.into(),
        topic: topic.into(),
        custom_metadata: custom_metadata.into(),
        valid_from: None,
    }
}

fn given(facts: Vec<ExtractedFact>, options: GenerateOptions) -> GenerateMemoriesRequest {
    GenerateMemoriesRequest {
        source: Some(generate_memories_request::Source::Facts(FactList { facts })),
        ..generate(vec![], options)
    }
}

/// The structured-output schema a model request asked for: "facts" (extraction) or
/// "decisions" (consolidation).
fn schema_name(request: &Value) -> &str {
    request["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_facts_are_consolidated_without_extraction() {
    // Nothing scripted: any call to the model would fail the job.
    let (url, model) = model(vec![]).await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    let job = c
        .generate_memories(given(
            vec![
                fact(
                    "The user lives in Berlin.",
                    "personal_facts",
                    r#"{"source": "crm", "kind": "raw"}"#,
                ),
                fact("  The user plays the cello.  ", "", ""),
            ],
            wait(),
        ))
        .await
        .expect("generation succeeds")
        .into_inner()
        .job
        .unwrap();
    assert_eq!(job.state, GenerationState::Succeeded as i32, "{job:?}");
    assert_eq!(
        (job.added, job.updated, job.deleted, job.kept),
        (2, 0, 0, 0)
    );
    // No memory to consolidate with yet: the model was not asked anything.
    assert_eq!(requests(&model), Vec::<Value>::new());
    let memories = listed(&mut c, MemoryKind::Generated).await;
    let berlin = memories
        .iter()
        .find(|m| text(m) == "The user lives in Berlin.")
        .expect("the first fact is a generated memory");
    assert_eq!(berlin.author, "memory");
    let metadata: Value = serde_json::from_str(&berlin.custom_metadata).unwrap();
    // The caller's keys are kept beside generation's own, which win.
    assert_eq!(metadata["source"], "crm");
    assert_eq!(metadata["kind"], "generated");
    assert_eq!(metadata["topic"], "personal_facts");
    assert_eq!(metadata["job_id"], job.id.as_str());
    assert_eq!(metadata["source_event_ids"], json!([]));
    let cello = memories
        .iter()
        .find(|m| text(m) == "The user plays the cello.")
        .expect("the second fact, trimmed, is a generated memory");
    let metadata: Value = serde_json::from_str(&cello.custom_metadata).unwrap();
    assert!(metadata.get("topic").is_none(), "{metadata}");
    let history = revisions(&mut c, &berlin.id).await;
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0].action, RevisionAction::Added as i32);
    assert_eq!(history[0].new_fact, "The user lives in Berlin.");
    assert_eq!(history[0].job_id, job.id);

    // A contradicting fact: consolidated against the memory the search finds, in one call.
    script(
        &model,
        vec![decisions(&[(
            0,
            "update",
            &berlin.id,
            "The user lives in Lisbon.",
        )])],
    );
    let job = c
        .generate_memories(given(
            vec![fact("The user moved from Berlin to Lisbon.", "", "")],
            wait(),
        ))
        .await
        .expect("generation succeeds")
        .into_inner()
        .job
        .unwrap();
    assert_eq!(
        (job.added, job.updated, job.deleted, job.kept),
        (0, 1, 0, 0)
    );
    let asked = requests(&model);
    assert_eq!(
        asked.iter().map(schema_name).collect::<Vec<_>>(),
        ["decisions"]
    );
    let prompt = prompt(&asked[0]);
    assert!(
        prompt.contains(&format!("{}: The user lives in Berlin.", berlin.id)),
        "{prompt}"
    );
    assert!(
        prompt.contains("0: The user moved from Berlin to Lisbon."),
        "{prompt}"
    );
    assert_eq!(
        generated(&mut c).await,
        ["The user lives in Lisbon.", "The user plays the cello."]
    );
    let history = revisions(&mut c, &berlin.id).await;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1].action, RevisionAction::Updated as i32);
    assert_eq!(history[1].previous_fact, "The user lives in Berlin.");
    assert_eq!(history[1].new_fact, "The user lives in Lisbon.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_facts_are_checked_and_bad_ones_write_nothing() {
    let (url, model) = model(vec![]).await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    let ok = || fact("The user is vegetarian.", "preferences", "");
    let long = "x".repeat(1001);
    let cases: Vec<(GenerateMemoriesRequest, &str)> = vec![
        (given(vec![], wait()), "facts.facts"),
        (given(vec![ok(); 51], wait()), "facts.facts"),
        (
            given(vec![ok(), fact("  ", "", "")], wait()),
            "facts.facts[1].text",
        ),
        (
            given(vec![ok(), fact(&long, "", "")], wait()),
            "facts.facts[1].text",
        ),
        (
            given(vec![fact("The user sails.", "hobbies", "")], wait()),
            "facts.facts[0].topic",
        ),
        (
            given(vec![fact("The user sails.", "", "[1]")], wait()),
            "facts.facts[0].custom_metadata",
        ),
        (
            given(
                vec![ok()],
                GenerateOptions {
                    allowed_topics: vec!["preferences".into()],
                    ..wait()
                },
            ),
            "options.allowed_topics",
        ),
    ];
    for (request, field) in cases {
        let err = c.generate_memories(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(err.message().starts_with(field), "{field}: {err:?}");
    }
    assert_eq!(generated(&mut c).await, Vec::<String>::new());
    assert_eq!(revisions(&mut c, "").await, Vec::new());
    assert_eq!(requests(&model), Vec::<Value>::new());
}

fn rollback(memory_id: &str, revision_id: &str) -> RollbackMemoryRequest {
    RollbackMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memory_id: memory_id.into(),
        revision_id: revision_id.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_restores_a_fact_and_records_itself() {
    let (url, model) = model(vec![
        facts(&[("personal_facts", "The user lives in Berlin.", &["e1"])]),
        facts(&[("personal_facts", "The user lives in Lisbon.", &["e2"])]),
    ])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    run(&mut c, vec![event("e1", "user", "I live in Berlin.")]).await;
    let id = listed(&mut c, MemoryKind::Generated).await[0].id.clone();
    script(
        &model,
        vec![decisions(&[(
            0,
            "update",
            &id,
            "The user lives in Lisbon.",
        )])],
    );
    run(&mut c, vec![event("e2", "user", "I moved to Lisbon.")]).await;
    let history = revisions(&mut c, &id).await;
    let (added, updated) = (&history[0], &history[1]);
    assert_ne!(added.revision_id, updated.revision_id);

    // The consolidation was wrong: back to Berlin.
    let rolled = c
        .rollback_memory(rollback(&id, &added.revision_id))
        .await
        .expect("rollback succeeds")
        .into_inner()
        .revision
        .unwrap();
    assert_eq!(rolled.action, RevisionAction::RolledBack as i32);
    assert_eq!(rolled.memory_id, id);
    assert_eq!(rolled.previous_fact, "The user lives in Lisbon.");
    assert_eq!(rolled.new_fact, "The user lives in Berlin.");
    assert_eq!(rolled.restored_revision_id, added.revision_id);
    assert_eq!(rolled.source_event_ids, ["e1"]);
    assert_eq!(rolled.job_id, "");
    assert_eq!(
        revisions(&mut c, &id).await,
        [added.clone(), updated.clone(), rolled.clone()]
    );
    let memories = listed(&mut c, MemoryKind::Generated).await;
    assert_eq!((memories.len(), memories[0].id.as_str()), (1, id.as_str()));
    assert_eq!(text(&memories[0]), "The user lives in Berlin.");
    let metadata: Value = serde_json::from_str(&memories[0].custom_metadata).unwrap();
    assert_eq!(metadata["kind"], "generated");
    assert_eq!(metadata["topic"], "personal_facts");
    assert_eq!(
        search(&mut c, "Berlin", MemoryKind::Generated).await,
        ["The user lives in Berlin."]
    );

    // A superseded memory comes back, valid again.
    script(
        &model,
        vec![
            facts(&[("personal_facts", "The user has no fixed home.", &["e3"])]),
            decisions(&[(0, "supersede", &id, "The user has no fixed home.")]),
        ],
    );
    run(&mut c, vec![event("e3", "user", "I gave up my flat.")]).await;
    assert_eq!(generated(&mut c).await, ["The user has no fixed home."]);
    let invalidated = revisions(&mut c, &id).await.pop().unwrap();
    assert_eq!(invalidated.action, RevisionAction::Invalidated as i32);
    let rolled = c
        .rollback_memory(rollback(&id, &updated.revision_id))
        .await
        .expect("rollback of a superseded memory succeeds")
        .into_inner()
        .revision
        .unwrap();
    assert_eq!(
        (rolled.previous_fact.as_str(), rolled.new_fact.as_str()),
        ("The user lives in Berlin.", "The user lives in Lisbon.")
    );
    let both = ["The user has no fixed home.", "The user lives in Lisbon."];
    assert_eq!(generated(&mut c).await, both);

    // Bad requests change nothing.
    let before = revisions(&mut c, &id).await;
    let cases = [
        (
            rollback(&id, &invalidated.revision_id),
            Code::InvalidArgument,
            "revision_id",
        ),
        (rollback(&id, "first"), Code::InvalidArgument, "revision_id"),
        (rollback(&id, ""), Code::InvalidArgument, "revision_id"),
        (
            rollback("", &added.revision_id),
            Code::InvalidArgument,
            "memory_id",
        ),
        (rollback(&id, "999999999999"), Code::NotFound, "revision_id"),
        (
            rollback("another", &added.revision_id),
            Code::NotFound,
            "revision_id",
        ),
    ];
    for (request, code, field) in cases {
        let err = c.rollback_memory(request).await.unwrap_err();
        assert_eq!(err.code(), code, "{err:?}");
        assert!(err.message().starts_with(field), "{err:?}");
    }
    assert_eq!(revisions(&mut c, &id).await, before);
    assert_eq!(generated(&mut c).await, both);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_past_the_retention_are_pruned_but_the_last() {
    let (url, model) = model(vec![facts(&[(
        "preferences",
        "The user drinks tea.",
        &["e1"],
    )])])
    .await;
    let srv = MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.revision_retention =
            memory_svc::config::Retention(Some(Duration::from_millis(1500)));
    })
    .await;
    let mut c = srv.client.clone();
    run(&mut c, vec![event("e1", "user", "Tea, please.")]).await;
    let id = listed(&mut c, MemoryKind::Generated).await[0].id.clone();
    script(
        &model,
        vec![
            facts(&[("preferences", "The user drinks green tea.", &["e2"])]),
            decisions(&[(0, "update", &id, "The user drinks green tea.")]),
        ],
    );
    run(&mut c, vec![event("e2", "user", "Green tea now.")]).await;
    let last = revisions(&mut c, &id).await.pop().unwrap();
    for _ in 0..200 {
        let kept = revisions(&mut c, &id).await;
        if kept.len() == 1 {
            assert_eq!(kept, std::slice::from_ref(&last));
            // The last revision stays however old it gets.
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert_eq!(revisions(&mut c, &id).await, [last]);
            assert_eq!(generated(&mut c).await, ["The user drinks green tea."]);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the first revision was not pruned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_session_to_memory_generates_too_and_requests_are_checked() {
    let (url, _model) = model(vec![facts(&[(
        "preferences",
        "The user is vegetarian.",
        &["s1"],
    )])])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    let session = Session {
        id: "sess".into(),
        app_name: "app".into(),
        user_id: "u".into(),
        events: vec![event("s1", "user", "I am vegetarian.")],
        ..Default::default()
    };
    let response = c
        .add_session_to_memory(AddSessionToMemoryRequest {
            source: Some(add_session_to_memory_request::Source::Session(
                session.clone(),
            )),
            generate: Some(wait()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.entries, 1);
    assert_eq!(response.generation.unwrap().added, 1);
    assert_eq!(
        search(&mut c, "vegetarian", MemoryKind::Raw).await,
        ["I am vegetarian."]
    );
    assert_eq!(
        search(&mut c, "vegetarian", MemoryKind::Generated).await,
        ["The user is vegetarian."]
    );
    assert_eq!(
        search(&mut c, "vegetarian", MemoryKind::Unspecified)
            .await
            .len(),
        2
    );

    let bad_topic = GenerateOptions {
        allowed_topics: vec!["hobbies".into()],
        ..Default::default()
    };
    let err = c
        .generate_memories(generate(vec![event("s2", "user", "x")], bad_topic))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("options.allowed_topics[0]"),
        "{err:?}"
    );
    let mut other = generate(vec![], wait());
    other.source = Some(generate_memories_request::Source::Session(Session {
        user_id: "someone-else".into(),
        ..session
    }));
    let err = c.generate_memories(other).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("session"), "{err:?}");
    let err = c
        .get_generation_job(GetGenerationJobRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            job_id: "missing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Without --generator, generation is refused and nothing else changes.
    let plain = MemoryServer::start(NO_SESSION_SVC).await;
    let err = plain
        .client
        .clone()
        .generate_memories(generate(vec![event("s3", "user", "x")], wait()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("--generator"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_survives_sigkill_and_completes_after_restart() {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let (url, model) = model(vec![Answer::Hang(arrived.clone())]).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--generator",
        &format!("openai:{url}"),
        "--generator-model",
        "stand-in",
        "--generator-lease-seconds",
        "1",
    ];
    let binary = env!("CARGO_BIN_EXE_memory-svc");
    let (mut child, channel) = spawn_binary_with(binary, dir.path(), &flags).await;
    let mut c = MemoryServiceClient::new(channel);
    let queued = c
        .generate_memories(generate(
            vec![event("k1", "user", "My passport expires in June.")],
            GenerateOptions::default(),
        ))
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    // The job is running (the model has its request) when the process dies.
    arrived.notified().await;
    child.kill();

    script(
        &model,
        vec![facts(&[(
            "personal_facts",
            "The user's passport expires in June.",
            &["k1"],
        )])],
    );
    let (_child, channel) = spawn_binary_with(binary, dir.path(), &flags).await;
    let mut c = MemoryServiceClient::new(channel);
    let done = finished(&mut c, &queued.id).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    assert_eq!(done.attempts, 2, "the killed attempt counts");
    assert_eq!(
        generated(&mut c).await,
        ["The user's passport expires in June."]
    );
    assert_eq!(requests(&model).len(), 2);
}

/// A delete of all a user's memories ends the user's generation jobs in the same operation:
/// the job running then writes nothing after it, the one queued never runs (the model is never
/// called for it), and another user's job runs as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_all_memories_ends_the_users_jobs() {
    let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let held = Answer::Held {
        arrived: arrived.clone(),
        release: release.clone(),
        then: Box::new(facts(&[(
            "personal_facts",
            "The user's passport expires in June.",
            &["k1"],
        )])),
    };
    let other = facts(&[("personal_facts", "The user plays the cello.", &["v1"])]);
    let (url, model) = model(vec![held, other]).await;
    // One worker: the second job of the user waits in the queue while the first runs.
    let server = MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.generator_workers = 1;
    })
    .await;
    let mut c = server.client.clone();
    let queue = |user: &str, id: &str, text: &str| {
        let mut request = generate(vec![event(id, "user", text)], GenerateOptions::default());
        request.user_id = user.into();
        let mut c = c.clone();
        async move {
            let response = c.generate_memories(request).await.unwrap().into_inner();
            response.job.unwrap().id
        }
    };
    let running = queue("u", "k1", "My passport expires in June.").await;
    arrived.notified().await;
    let queued = queue("u", "k2", "I moved to Lisbon.").await;
    let others = queue("v", "v1", "I play the cello.").await;

    c.delete_memory(DeleteMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        target: Some(Target::All(true)),
    })
    .await
    .unwrap();
    for id in [&running, &queued] {
        let ended = job(&mut c, id).await;
        assert_eq!(ended.state, GenerationState::Failed as i32, "{ended:?}");
        assert!(ended.error.contains("deleted"), "{ended:?}");
    }
    // The running job's answer arrives after the delete: its write is refused.
    release.notify_one();
    let done = users_finished(&mut c, "v", &others).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    assert!(generated(&mut c).await.is_empty());
    let ended = job(&mut c, &running).await;
    assert!(ended.error.contains("deleted"), "{ended:?}");
    assert_eq!(
        requests(&model).len(),
        2,
        "the queued job never reached the model"
    );
    let listed = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "v".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn replicas_on_one_database_never_run_a_job_twice() {
    let url = adk_tests::prerequisite::postgres();
    const JOBS: usize = 8;
    let answers = (0..JOBS)
        .map(|_| Answer::Content(json!({"facts": []})))
        .collect();
    let (base_url, model) = model(answers).await;
    let store: adk_common::postgres::StoreLocation =
        adk_tests::fresh_schema(&url).await.parse().unwrap();
    let configure = |config: &mut memory_svc::config::Config| {
        config.generator = format!("openai:{base_url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.generator_workers = 3;
    };
    let a = MemoryServer::start_on_with(NO_SESSION_SVC, store.clone(), configure).await;
    let b = MemoryServer::start_on_with(NO_SESSION_SVC, store, configure).await;
    let mut ids = Vec::new();
    for i in 0..JOBS {
        let mut c = if i % 2 == 0 {
            a.client.clone()
        } else {
            b.client.clone()
        };
        let queued = c
            .generate_memories(generate(
                vec![event(&format!("j{i}"), "user", "Hello")],
                GenerateOptions::default(),
            ))
            .await
            .unwrap()
            .into_inner()
            .job
            .unwrap();
        ids.push(queued.id);
    }
    for id in &ids {
        let done = finished(&mut a.client.clone(), id).await;
        assert_eq!(
            (done.state, done.attempts),
            (GenerationState::Succeeded as i32, 1),
            "{done:?}"
        );
    }
    // Six workers in two processes, and each job's events went to the model exactly once.
    let mut asked: Vec<String> = requests(&model)
        .iter()
        .map(|r| prompt(r).lines().last().unwrap().to_owned())
        .collect();
    asked.sort();
    let mut expected: Vec<String> = (0..JOBS)
        .map(|i| format!("[j{i}, time unknown] user: Hello"))
        .collect();
    expected.sort();
    assert_eq!(asked, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_memory_claiming_to_be_generated_stays_raw() {
    let (url, _model) = model(vec![facts(&[(
        "preferences",
        "The user likes green tea.",
        &["g1"],
    )])])
    .await;
    let srv = server(&url).await;
    let mut c = srv.client.clone();
    run(&mut c, vec![event("g1", "user", "I like green tea.")]).await;
    // A direct write whose metadata says what a generated memory's says, already expired.
    let claims = json!({
        "kind": "generated",
        "expire_time": "2001-01-01T00:00:00Z",
        "topic": "preferences",
    })
    .to_string();
    c.add_memory(adk_proto::memory::v1::AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![MemoryEntry {
            id: "forged".into(),
            author: "memory".into(),
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(Data::Text("The user likes black tea.".into())),
                    ..Default::default()
                }],
            }),
            custom_metadata: claims.clone(),
            ..Default::default()
        }],
        custom_metadata: String::new(),
    })
    .await
    .unwrap();

    // It is raw, it does not expire, and its metadata comes back as written.
    assert_eq!(generated(&mut c).await, ["The user likes green tea."]);
    let raw = listed(&mut c, MemoryKind::Raw).await;
    assert_eq!(raw.len(), 1, "{raw:?}");
    assert_eq!(raw[0].id, "forged");
    assert_eq!(
        serde_json::from_str::<Value>(&raw[0].custom_metadata).unwrap(),
        serde_json::from_str::<Value>(&claims).unwrap()
    );
    assert_eq!(
        search(&mut c, "tea", MemoryKind::Generated).await,
        ["The user likes green tea."]
    );
    assert_eq!(
        search(&mut c, "tea", MemoryKind::Raw).await,
        ["The user likes black tea."]
    );
    // The generated memory still says what it is in its metadata.
    let fact = &listed(&mut c, MemoryKind::Generated).await[0];
    let metadata: Value = serde_json::from_str(&fact.custom_metadata).unwrap();
    assert_eq!(metadata["kind"], "generated", "{metadata}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_pruned_after_the_retention() {
    let (url, _model) = model(vec![Answer::Content(json!({"facts": []}))]).await;
    let poll = memory_svc::generate::JobRetry::default().poll;
    let pruning = MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.generator_job_retention_seconds = 0;
    })
    .await;
    let mut c = pruning.client.clone();
    let done = run(&mut c, vec![event("r2", "user", "Hello")]).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32);
    // Past its retention, the next poll of a worker deletes it.
    let mut gone = None;
    for _ in 0..100 {
        let asked = c
            .get_generation_job(GetGenerationJobRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                job_id: done.id.clone(),
            })
            .await;
        if let Err(status) = asked {
            gone = Some(status);
            break;
        }
        tokio::time::sleep(poll / 10).await;
    }
    let status = gone.expect("the finished job was not pruned");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(
        status.message().contains(&done.id)
            && status
                .message()
                .contains("--generator-job-retention-seconds"),
        "{status:?}"
    );
}

/// Seconds from a memory's timestamp to the `expire_time` its metadata states.
fn lifetime(m: &MemoryEntry) -> i64 {
    let metadata: Value = serde_json::from_str(&m.custom_metadata).unwrap();
    let expire: prost_types::Timestamp = metadata["expire_time"].as_str().unwrap().parse().unwrap();
    expire.seconds - m.timestamp.unwrap().seconds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_lifetimes_apply_per_app_and_action() {
    let (url, model) = model(vec![]).await;
    let srv = MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.memory_ttl = ["app:created=2s", "*:generated=1h", "app:updated=3s"]
            .map(|rule| rule.parse().unwrap())
            .to_vec();
    })
    .await;
    let mut c = srv.client.clone();
    let note = |app: &str, id: &str, text: &str| adk_proto::memory::v1::AddMemoryRequest {
        app_name: app.into(),
        user_id: "u".into(),
        memories: vec![MemoryEntry {
            id: id.into(),
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(Data::Text(text.into())),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }],
        custom_metadata: String::new(),
    };
    // Created: expires in app, not in an app without a rule.
    c.add_memory(note("app", "tea", "The user likes green tea."))
        .await
        .unwrap();
    c.add_memory(note("keep", "lasting", "A lasting note."))
        .await
        .unwrap();
    // Generated: every app's hour; updated: the app's 3 s; a request's TTL wins.
    c.generate_memories(given(
        vec![fact("The user lives in Berlin.", "", "")],
        wait(),
    ))
    .await
    .unwrap();
    let berlin = listed(&mut c, MemoryKind::Generated).await[0].clone();
    assert!((3590..=3610).contains(&lifetime(&berlin)), "{berlin:?}");
    let two_hours = GenerateOptions {
        ttl: Some(prost_types::Duration {
            seconds: 7200,
            nanos: 0,
        }),
        disable_consolidation: true,
        ..wait()
    };
    c.generate_memories(given(vec![fact("The user has a cat.", "", "")], two_hours))
        .await
        .unwrap();
    script(
        &model,
        vec![decisions(&[(
            0,
            "update",
            &berlin.id,
            "The user lives in Lisbon.",
        )])],
    );
    c.generate_memories(given(
        vec![fact("The user moved from Berlin to Lisbon.", "", "")],
        wait(),
    ))
    .await
    .unwrap();
    let memories = listed(&mut c, MemoryKind::Generated).await;
    let of = |text: &str| memories.iter().find(|m| self::text(m) == text).unwrap();
    assert!((2..=4).contains(&lifetime(of("The user lives in Lisbon."))));
    assert!((7190..=7210).contains(&lifetime(of("The user has a cat."))));
    let updated = revisions(&mut c, &berlin.id).await;
    assert_eq!(updated.len(), 2, "{updated:?}");

    // Past their lifetimes, the note and the updated fact are neither listed nor searched, and
    // the workers' sweep removes them; the others stay.
    let mut hidden = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if listed(&mut c, MemoryKind::Raw).await.is_empty()
            && generated(&mut c).await == ["The user has a cat."]
        {
            hidden = true;
            break;
        }
    }
    assert!(hidden, "the memories past their lifetimes are still listed");
    assert!(search(&mut c, "green tea Lisbon", MemoryKind::Unspecified)
        .await
        .is_empty());
    swept(&mut c, "app", "tea").await;
    let kept = c
        .list_memories(ListMemoriesRequest {
            app_name: "keep".into(),
            user_id: "u".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(
        kept.iter().map(text).collect::<Vec<_>>(),
        ["A lasting note."]
    );
}

/// Waits until the sweep has removed the memory `id` of (`app`, "u"): a removal tombstones the
/// id, so events with that id are no longer added, in any session. Until then each probe adds
/// one to a session of its own (the sweep removes those too, by their id).
async fn swept(c: &mut MemoryServiceClient<Channel>, app: &str, id: &str) {
    for probe in 0..100 {
        let added = c
            .add_events_to_memory(adk_proto::memory::v1::AddEventsToMemoryRequest {
                app_name: app.into(),
                user_id: "u".into(),
                session_id: format!("probe-{probe}"),
                events: vec![event(id, "user", "probe")],
                custom_metadata: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .entries;
        if added == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("memory {id} of app {app} was not swept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_expire_without_a_generation_model_too() {
    let srv = MemoryServer::start_with(NO_SESSION_SVC, |config| {
        config.memory_ttl = vec!["*:created=1s".parse().unwrap()];
    })
    .await;
    let mut c = srv.client.clone();
    c.add_memory(adk_proto::memory::v1::AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![MemoryEntry {
            id: "brief".into(),
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(Data::Text("A brief note.".into())),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }],
        custom_metadata: String::new(),
    })
    .await
    .unwrap();
    assert_eq!(listed(&mut c, MemoryKind::Raw).await.len(), 1);
    swept(&mut c, "app", "brief").await;
    assert!(listed(&mut c, MemoryKind::Unspecified).await.is_empty());
}
