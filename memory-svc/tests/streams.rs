//! Event streams (AppendMemoryStream, FlushMemoryStream) through gRPC, against a local HTTP
//! server standing in for the generation model: a stream hands its events to generation once
//! after its trigger count, after its quiet time, or when flushed; an event id is buffered once;
//! bad input writes nothing; and a stream killed (SIGKILL) with events buffered, or right after
//! its trigger, generates exactly once after the restart; a stream's buffer is listed
//! (ListMemoryStreams), and deleting all of a user drops it. The servers run on sled, or on
//! PostgreSQL when `ADK_TEST_POSTGRES` names a database.

use std::time::Duration;

use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, memory_service_client::MemoryServiceClient,
        AppendMemoryStreamRequest, AppendMemoryStreamResponse, DeleteMemoryRequest,
        FlushMemoryStreamRequest, GenerationJob, GenerationState, GetGenerationJobRequest,
        ListMemoriesRequest, ListMemoryStreamsRequest, MemoryKind,
    },
    session::v1::{part::Data, Content, Event, Part},
};
use adk_tests::{
    chat_model::{facts, model, prompt, requests, Shared},
    sample, scrape, spawn_binary_with, MemoryServer,
};
use tonic::{transport::Channel, Code};

const NO_SESSION_SVC: &str = "http://127.0.0.1:1";

/// How long a test waits for what it expects to happen.
const DEADLINE: Duration = Duration::from_secs(60);

/// A server generating with the stand-in at `base_url`, streams triggering after `events`
/// events or `quiet` of quiet.
async fn server(base_url: &str, events: &str, quiet: &str) -> MemoryServer {
    let (url, events, quiet) = (base_url.to_owned(), events.to_owned(), quiet.to_owned());
    MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.stream_trigger_events = vec![events.parse().unwrap()];
        config.stream_quiet = vec![quiet.parse().unwrap()];
        config.serve.metrics_listen = Some(([127, 0, 0, 1], 0).into());
    })
    .await
}

fn event(id: &str, text: &str) -> Event {
    Event {
        id: id.into(),
        author: "user".into(),
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

fn append_request(stream: &str, events: Vec<Event>) -> AppendMemoryStreamRequest {
    AppendMemoryStreamRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        stream_id: stream.into(),
        events,
    }
}

async fn append(
    c: &mut MemoryServiceClient<Channel>,
    stream: &str,
    events: Vec<Event>,
) -> AppendMemoryStreamResponse {
    c.append_memory_stream(append_request(stream, events))
        .await
        .expect("the append succeeds")
        .into_inner()
}

async fn flush(c: &mut MemoryServiceClient<Channel>, stream: &str) -> Option<GenerationJob> {
    c.flush_memory_stream(FlushMemoryStreamRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        stream_id: stream.into(),
    })
    .await
    .expect("the flush succeeds")
    .into_inner()
    .job
}

/// The job once it has ended.
async fn finished(c: &mut MemoryServiceClient<Channel>, id: &str) -> GenerationJob {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let job = c
            .get_generation_job(GetGenerationJobRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                job_id: id.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if job.state == GenerationState::Succeeded as i32
            || job.state == GenerationState::Failed as i32
        {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {id} did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The generated memories' texts, sorted.
async fn generated(c: &mut MemoryServiceClient<Channel>) -> Vec<String> {
    let memories = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            page_size: 100,
            kind: MemoryKind::Generated as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    let mut texts: Vec<String> = memories
        .iter()
        .filter_map(|m| match &m.content.as_ref()?.parts.first()?.data {
            Some(Data::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    texts.sort();
    texts
}

/// Waits until the generated memories are `expected`.
async fn generated_become(c: &mut MemoryServiceClient<Channel>, expected: &[&str]) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while generated(c).await != expected {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the generated memories are {:?}, not {expected:?}",
            generated(c).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The texts of `events` in the one extraction the model was asked for, each once.
fn extracted_once(model: &Shared, texts: &[&str]) {
    let asked = requests(model);
    assert_eq!(asked.len(), 1, "one extraction: {asked:#?}");
    let prompt = prompt(&asked[0]);
    for text in texts {
        assert_eq!(prompt.matches(text).count(), 1, "{text} in {prompt}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trigger_count_of_events_starts_one_generation() {
    let (url, model) = model(vec![facts(&[(
        "personal_facts",
        "The user lives in Lisbon.",
        &["a1", "a3"],
    )])])
    .await;
    let server = server(&url, "3", "1h").await;
    let mut c = server.client.clone();
    let first = append(
        &mut c,
        "s1",
        vec![
            event("a1", "I moved to Lisbon."),
            event("a2", "It is sunny."),
        ],
    )
    .await;
    assert_eq!((first.appended, first.buffered), (2, 2));
    assert!(first.job.is_none());
    // a2 again, and a1 twice in one call: only a3 is new, and it is the third event.
    let third = append(
        &mut c,
        "s1",
        vec![
            event("a2", "It is sunny."),
            event("a3", "I love my flat there."),
            event("a3", "I love my flat there."),
        ],
    )
    .await;
    assert_eq!((third.appended, third.buffered), (1, 0));
    let job = third.job.expect("the third event triggers generation");
    let done = finished(&mut c, &job.id).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    assert_eq!(done.added, 1);
    assert_eq!(generated(&mut c).await, ["The user lives in Lisbon."]);
    extracted_once(
        &model,
        &[
            "I moved to Lisbon.",
            "It is sunny.",
            "I love my flat there.",
        ],
    );

    // The events handed over are remembered: sent again, they are not buffered.
    let again = append(&mut c, "s1", vec![event("a1", "I moved to Lisbon.")]).await;
    assert_eq!((again.appended, again.buffered), (0, 0));
    assert!(flush(&mut c, "s1").await.is_none(), "nothing is buffered");
    // Another stream of the user has a buffer of its own.
    let other = append(&mut c, "s2", vec![event("a1", "I moved to Lisbon.")]).await;
    assert_eq!((other.appended, other.buffered), (1, 1));
    assert_eq!(requests(&model).len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_stream_starts_generation_by_itself() {
    let (url, model) = model(vec![facts(&[(
        "personal_facts",
        "The user has a dog called Rex.",
        &["q1"],
    )])])
    .await;
    let server = server(&url, "100", "300ms").await;
    let mut c = server.client.clone();
    let appended = append(
        &mut c,
        "quiet",
        vec![event("q1", "My dog Rex"), event("q2", "is five.")],
    )
    .await;
    assert_eq!((appended.appended, appended.buffered), (2, 2));
    generated_become(&mut c, &["The user has a dog called Rex."]).await;
    extracted_once(&model, &["My dog Rex", "is five."]);
    assert!(
        flush(&mut c, "quiet").await.is_none(),
        "the buffer was handed over"
    );
    let metrics = scrape(server.metrics_addr().expect("metrics are served")).await;
    assert_eq!(
        sample(
            &metrics,
            "memory_stream_triggers_total",
            &[r#"reason="quiet""#]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        sample(&metrics, "memory_stream_events_total", &[]).is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_starts_generation_now_and_bad_input_writes_nothing() {
    let (url, model) = model(vec![facts(&[(
        "personal_facts",
        "The user is allergic to nuts.",
        &["f1"],
    )])])
    .await;
    let server = server(&url, "100", "1h").await;
    let mut c = server.client.clone();
    assert!(
        flush(&mut c, "f").await.is_none(),
        "an unknown stream holds nothing"
    );
    append(&mut c, "f", vec![event("f1", "I am allergic to nuts.")]).await;

    let big = "x".repeat(memory_svc::streams::MAX_EVENT_BYTES);
    let many: Vec<Event> = (0..=memory_svc::streams::MAX_APPEND_EVENTS)
        .map(|i| event(&format!("m{i}"), "many"))
        .collect();
    for (request, field) in [
        (
            append_request("f", vec![event("f2", "fine"), event("", "no id")]),
            "events[1].id",
        ),
        (append_request("f", vec![]), "events"),
        (append_request("f", many), "events"),
        (
            append_request("f", vec![event("f2", "fine"), event("f3", &big)]),
            "events[1]",
        ),
        (append_request("", vec![event("f2", "fine")]), "stream_id"),
        (
            AppendMemoryStreamRequest {
                user_id: String::new(),
                ..append_request("f", vec![event("f2", "fine")])
            },
            "user_id",
        ),
    ] {
        let status = c.append_memory_stream(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(&format!("{field}: ")),
            "{field}: {status:?}"
        );
    }
    // None of the refused events was buffered, f2 included.
    let job = flush(&mut c, "f").await.expect("a flush hands f1 over");
    assert!(flush(&mut c, "f").await.is_none(), "the buffer is empty");
    let done = finished(&mut c, &job.id).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    extracted_once(&model, &["I am allergic to nuts."]);
    assert!(!prompt(&requests(&model)[0]).contains("fine"));
    assert_eq!(generated(&mut c).await, ["The user is allergic to nuts."]);
    server.shutdown().await;

    // Without --generator, streams are refused.
    let plain = MemoryServer::start(NO_SESSION_SVC).await;
    let status = plain
        .client
        .clone()
        .append_memory_stream(append_request("f", vec![event("f1", "x")]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("--generator"), "{status:?}");
    plain.shutdown().await;
}

/// The flags of a server process generating with the model at `url`.
fn flags<'a>(url: &'a str, events: &'a str, quiet: &'a str) -> Vec<String> {
    [
        "--generator",
        &format!("openai:{url}"),
        "--generator-model",
        "stand-in",
        "--generator-lease-seconds",
        "1",
        "--stream-trigger-events",
        events,
        "--stream-quiet",
        quiet,
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn spawn(
    dir: &std::path::Path,
    flags: &[String],
) -> (adk_tests::ServerProcess, MemoryServiceClient<Channel>) {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let binary = env!("CARGO_BIN_EXE_memory-svc");
    let (process, channel) = spawn_binary_with(binary, dir, &flags).await;
    (process, MemoryServiceClient::new(channel))
}

/// Killed with events buffered, the stream keeps them (acknowledged is durable), its quiet timer
/// runs again from the stored time of its last event, and it generates once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_buffered_when_killed_generate_once_after_the_restart() {
    let (url, model) = model(vec![facts(&[(
        "personal_facts",
        "The user works as a nurse.",
        &["k1"],
    )])])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut process, mut c) = spawn(dir.path(), &flags(&url, "10", "1h")).await;
    let appended = append(
        &mut c,
        "s",
        vec![
            event("k1", "I work as a nurse."),
            event("k2", "Night shifts."),
        ],
    )
    .await;
    assert_eq!((appended.appended, appended.buffered), (2, 2));
    process.kill();

    let (_process, mut c) = spawn(dir.path(), &flags(&url, "10", "300ms")).await;
    generated_become(&mut c, &["The user works as a nurse."]).await;
    extracted_once(&model, &["I work as a nurse.", "Night shifts."]);
    assert!(
        flush(&mut c, "s").await.is_none(),
        "the buffer was handed over"
    );
    let again = append(&mut c, "s", vec![event("k2", "Night shifts.")]).await;
    assert_eq!((again.appended, again.buffered), (0, 0));
    assert_eq!(requests(&model).len(), 1);
}

/// Killed right after its trigger (the job queued, its model unreachable so far), the stream
/// has handed its events over exactly once: the restarted process runs that job, and nothing
/// triggers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_killed_right_after_its_trigger_generates_once_after_the_restart() {
    let (url, model) = model(vec![facts(&[(
        "personal_facts",
        "The user plays the cello.",
        &["t1"],
    )])])
    .await;
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: the job cannot reach a model before the kill.
    let (mut process, mut c) = spawn(dir.path(), &flags("http://127.0.0.1:1/v1", "2", "1h")).await;
    let appended = append(
        &mut c,
        "s",
        vec![
            event("t1", "I play the cello."),
            event("t2", "Every evening."),
        ],
    )
    .await;
    let job = appended.job.expect("the second event triggers generation");
    process.kill();

    let (_process, mut c) = spawn(dir.path(), &flags(&url, "2", "300ms")).await;
    let done = finished(&mut c, &job.id).await;
    assert_eq!(done.state, GenerationState::Succeeded as i32, "{done:?}");
    assert_eq!(generated(&mut c).await, ["The user plays the cello."]);
    extracted_once(&model, &["I play the cello.", "Every evening."]);
    assert!(
        flush(&mut c, "s").await.is_none(),
        "nothing is left to hand over"
    );
    let again = append(&mut c, "s", vec![event("t1", "I play the cello.")]).await;
    assert_eq!((again.appended, again.buffered), (0, 0));
    assert_eq!(requests(&model).len(), 1);
}

/// The ids of handed-off events are kept with their job: pruned with it, an id is new again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handed_off_ids_go_when_their_job_is_pruned() {
    let (url, _model) = model(vec![facts(&[])]).await;
    let server = MemoryServer::start_with(NO_SESSION_SVC, move |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
        config.stream_trigger_events = vec!["1".parse().unwrap()];
        config.generator_job_retention_seconds = 0;
    })
    .await;
    let mut c = server.client.clone();
    let job = append(&mut c, "p", vec![event("p1", "Hello")])
        .await
        .job
        .expect("one event triggers");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let asked = c
            .get_generation_job(GetGenerationJobRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                job_id: job.id.clone(),
            })
            .await;
        if asked.is_err_and(|status| status.code() == Code::NotFound) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job was not pruned"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = append(&mut c, "p", vec![event("p1", "Hello")]).await;
    assert_eq!(again.appended, 1, "the pruned job's event ids went with it");
    server.shutdown().await;
}

/// The user's streams with buffered events: (stream id, events).
async fn listed(c: &mut MemoryServiceClient<Channel>, user: &str) -> Vec<(String, u32)> {
    c.list_memory_streams(ListMemoryStreamsRequest {
        app_name: "app".into(),
        user_id: user.into(),
    })
    .await
    .expect("the listing succeeds")
    .into_inner()
    .streams
    .into_iter()
    .map(|s| {
        assert!(s.last_append_time.is_some(), "{s:?}");
        (s.stream_id, s.buffered)
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_listed_and_deleting_all_of_a_user_drops_them() {
    let (url, model) = model(vec![facts(&[])]).await;
    let server = server(&url, "3", "1h").await;
    let mut c = server.client.clone();
    append(&mut c, "b", vec![event("b1", "I moved to Lisbon.")]).await;
    append(
        &mut c,
        "a",
        vec![
            event("a1", "My sister is Ana."),
            event("a2", "She is a nurse."),
        ],
    )
    .await;
    let mut other = append_request("a", vec![event("a1", "Not the same user.")]);
    other.user_id = "v".into();
    c.append_memory_stream(other).await.unwrap();
    assert_eq!(
        listed(&mut c, "u").await,
        [("a".to_owned(), 2), ("b".to_owned(), 1)],
        "by stream id"
    );
    // A stream handed over in full is not listed.
    let job = append(
        &mut c,
        "c",
        (1..=3).map(|i| event(&format!("c{i}"), "Hi")).collect(),
    )
    .await
    .job
    .expect("three events trigger");
    finished(&mut c, &job.id).await;
    assert_eq!(listed(&mut c, "u").await.len(), 2);
    assert_eq!(requests(&model).len(), 1);
    let status = c
        .list_memory_streams(ListMemoryStreamsRequest {
            app_name: "app".into(),
            user_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("user_id: "), "{status:?}");

    c.delete_memory(DeleteMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        target: Some(Target::All(true)),
    })
    .await
    .unwrap();
    assert_eq!(listed(&mut c, "u").await, []);
    for stream in ["a", "b", "c"] {
        assert!(
            flush(&mut c, stream).await.is_none(),
            "{stream} holds nothing"
        );
    }
    assert_eq!(
        listed(&mut c, "v").await,
        [("a".to_owned(), 1)],
        "another user's stays"
    );
    // The ids the streams remembered went too: an event sent again is new.
    let again = append(&mut c, "c", vec![event("c1", "Hi")]).await;
    assert_eq!((again.appended, again.buffered), (1, 1));
    assert_eq!(requests(&model).len(), 1, "no extraction after the delete");
    server.shutdown().await;
}
