//! PurgeMemories through gRPC: a dry run counts and samples and deletes nothing; a forced purge
//! deletes what matches, for one user or the whole app, on sled and PostgreSQL; and a forced
//! purge the process is killed in the middle of (SIGKILL) is finished after the restart.

use std::time::Duration;

use adk_common::postgres::StoreLocation;
use adk_proto::memory::v1::{
    memory_service_client::MemoryServiceClient, metadata_condition::Value, AddMemoryRequest,
    ListMemoriesRequest, MemoryEntry, MemoryFilter, MetadataCondition, MetadataConditions,
    MetadataOperator, PurgeMemoriesRequest,
};
use adk_tests::{fresh_schema, spawn_binary, text_event, MemoryServer};
use tonic::{transport::Channel, Code};

/// Entries whose `source` is "import" when `i` is even, "chat" otherwise.
async fn write(c: &mut MemoryServiceClient<Channel>, user: &str, n: usize) {
    let memories: Vec<MemoryEntry> = (0..n)
        .map(|i| MemoryEntry {
            id: format!("{user}-{i}"),
            content: text_event("user", &format!("note {i}")).content,
            custom_metadata: format!(
                r#"{{"source": "{}"}}"#,
                if i.is_multiple_of(2) {
                    "import"
                } else {
                    "chat"
                }
            ),
            ..Default::default()
        })
        .collect();
    for chunk in memories.chunks(500) {
        c.add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: user.into(),
            memories: chunk.to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
}

fn imported() -> MemoryFilter {
    MemoryFilter {
        any_of: vec![MetadataConditions {
            all_of: vec![MetadataCondition {
                key: "source".into(),
                operator: MetadataOperator::Equal.into(),
                value: Some(Value::StringValue("import".into())),
            }],
        }],
        topics: vec![],
    }
}

/// The ids of `user`'s memories, with `filter` if given.
async fn ids(
    c: &mut MemoryServiceClient<Channel>,
    user: &str,
    filter: Option<MemoryFilter>,
) -> Vec<String> {
    let (mut ids, mut token) = (Vec::new(), String::new());
    loop {
        let page = c
            .list_memories(ListMemoriesRequest {
                app_name: "app".into(),
                user_id: user.into(),
                page_size: 100,
                page_token: token,
                filter: filter.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.extend(page.memories.into_iter().map(|m| m.id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        token = page.next_page_token;
    }
}

fn purge(user: &str, force: bool) -> PurgeMemoriesRequest {
    PurgeMemoriesRequest {
        app_name: "app".into(),
        user_id: user.into(),
        filter: Some(imported()),
        force,
        ..Default::default()
    }
}

async fn dry_run_then_force(c: &mut MemoryServiceClient<Channel>) {
    write(c, "u1", 30).await;
    write(c, "u2", 10).await;
    let dry = c
        .purge_memories(purge("u1", false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dry.count, 15);
    let sample: Vec<&str> = dry.sample.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        sample,
        (0..20)
            .step_by(2)
            .map(|i| format!("u1-{i}"))
            .collect::<Vec<_>>()
    );
    assert!(dry.operation_id.is_empty());
    let app_wide = c
        .purge_memories(purge("", false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(app_wide.count, 20);
    assert_eq!(
        ids(c, "u1", None).await.len(),
        30,
        "a dry run deletes nothing"
    );

    let forced = c
        .purge_memories(purge("u1", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(forced.count, 15);
    assert!(!forced.operation_id.is_empty());
    let left = ids(c, "u1", None).await;
    assert_eq!(
        left,
        (1..30)
            .step_by(2)
            .map(|i| format!("u1-{i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        ids(c, "u2", None).await.len(),
        10,
        "another user's memory is left alone"
    );
    let all = c
        .purge_memories(purge("", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.count, 5);
    assert_eq!(ids(c, "u2", None).await.len(), 5);

    for (request, field) in [
        (
            PurgeMemoriesRequest {
                filter: None,
                ..purge("u1", true)
            },
            "filter",
        ),
        (
            PurgeMemoriesRequest {
                filter: Some(MemoryFilter {
                    any_of: vec![MetadataConditions { all_of: vec![] }],
                    topics: vec![],
                }),
                ..purge("u1", true)
            },
            "filter.any_of[0].all_of",
        ),
        (
            PurgeMemoriesRequest {
                app_name: String::new(),
                ..purge("u1", true)
            },
            "app_name",
        ),
    ] {
        let status = c.purge_memories(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with(field), "{field}: {status:?}");
    }
}

#[tokio::test]
async fn a_dry_run_deletes_nothing_and_a_forced_purge_deletes_what_matches() {
    let server = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    dry_run_then_force(&mut server.client.clone()).await;
    server.shutdown().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_dry_run_deletes_nothing_and_a_forced_purge_deletes_what_matches_on_postgres() {
    let url = adk_tests::prerequisite::postgres();
    let server = MemoryServer::start_on(
        "http://127.0.0.1:9",
        Some(StoreLocation::Postgres(fresh_schema(&url).await)),
    )
    .await;
    dry_run_then_force(&mut server.client.clone()).await;
}

/// Killed while it deletes, the purge is taken up at the next start and finishes: every
/// memory that matched is gone, every other one is still there. (PostgreSQL with
/// `ADK_TEST_POSTGRES`, else sled.)
#[tokio::test]
async fn a_forced_purge_killed_midway_finishes_after_the_restart() {
    const N: usize = 1200;
    let dir = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_memory-svc");
    let (mut process, channel) = spawn_binary(binary, dir.path()).await;
    let mut c = MemoryServiceClient::new(channel);
    write(&mut c, "u", N).await;
    let mut purging = c.clone();
    let call = tokio::spawn(async move { purging.purge_memories(purge("u", true)).await });
    // Killed once some, not all, are deleted.
    let mut left;
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = ids(&mut c, "u", Some(imported())).await.len();
        if left < N / 2 {
            break;
        }
    }
    process.kill();
    assert!(
        left > 0,
        "the purge finished before the kill: make it larger"
    );
    assert!(call.await.unwrap().is_err(), "the call was cut short");

    let (_process, channel) = spawn_binary(binary, dir.path()).await;
    let mut c = MemoryServiceClient::new(channel);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !ids(&mut c, "u", Some(imported())).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the purge was not taken up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = ids(&mut c, "u", None).await;
    assert_eq!(
        kept,
        (1..N)
            .step_by(2)
            .map(|i| format!("u-{i}"))
            .collect::<Vec<_>>()
    );
}
