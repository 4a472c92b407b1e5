//! Durability of memory: the real `memory-svc` binary is killed with SIGKILL at random moments
//! while writers ingest batches of events and delete some of them, 20 times over. After each
//! restart every acknowledged batch is there whole, every acknowledged delete holds, and no
//! unacknowledged batch is there in part; and searches find exactly what is there, although
//! the last writes' postings were likely still in the index journal when the process died.

use std::{
    collections::HashSet,
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, memory_service_client::MemoryServiceClient,
        AddEventsToMemoryRequest, DeleteMemoryRequest, ListMemoriesRequest, SearchMemoryRequest,
    },
    session::v1::{part::Data, Content, Event, Part},
};
use adk_tests::{spawn_binary_with, ServerProcess};
use tonic::transport::Channel;

const WRITERS: usize = 3;
const BATCH: usize = 5;
const CYCLES: usize = 20;

async fn spawn(dir: &Path, flags: &[&str]) -> (ServerProcess, MemoryServiceClient<Channel>) {
    let (child, channel) = spawn_binary_with(env!("CARGO_BIN_EXE_memory-svc"), dir, flags).await;
    (child, MemoryServiceClient::new(channel))
}

fn event(id: &str) -> Event {
    Event {
        id: id.into(),
        author: "user".into(),
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![Part {
                data: Some(Data::Text(format!("note {id}"))),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// What the writers were told happened.
#[derive(Default)]
struct Acknowledged {
    /// Batches (by number) whose AddEventsToMemory returned OK.
    added: HashSet<usize>,
    /// Batches whose first entry's delete returned OK.
    deleted: HashSet<usize>,
}

fn batch_ids(batch: usize) -> Vec<String> {
    (0..BATCH).map(|k| format!("b{batch}-{k}")).collect()
}

async fn stored_ids(client: &mut MemoryServiceClient<Channel>) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_memories(ListMemoriesRequest {
                app_name: "crash".into(),
                user_id: "u".into(),
                page_size: 100,
                page_token: token,
                kind: 0,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.extend(page.memories.into_iter().map(|m| m.id));
        token = page.next_page_token;
        if token.is_empty() {
            return ids;
        }
    }
}

/// The ids of the entries a search for batch `batch`'s own word finds (among them, as context,
/// may be neighbours from other batches, which are left out).
async fn found_ids(client: &mut MemoryServiceClient<Channel>, batch: usize) -> HashSet<String> {
    let hits = client
        .search_memory(SearchMemoryRequest {
            app_name: "crash".into(),
            user_id: "u".into(),
            query: format!("b{batch}"),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    let own = format!("b{batch}-");
    hits.into_iter()
        .map(|m| m.id)
        .filter(|id| id.starts_with(&own))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_ingestion_and_deletes_survive_repeated_sigkills() {
    sigkill_cycles(&[]).await;
}

/// The same with a memory budget so small that merges start after a few hundred postings and
/// take a few records each, and writes wait for one another: the kills fall mid-merge too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkills_under_a_small_memory_budget() {
    sigkill_cycles(&["--memory-budget", "262144"]).await;
}

async fn sigkill_cycles(flags: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let next_batch = Arc::new(AtomicUsize::new(0));
    let (mut child, mut client) = spawn(dir.path(), flags).await;
    let mut checked = 0;
    for cycle in 0..CYCLES {
        let first_batch = next_batch.load(Ordering::SeqCst);
        let done = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (mut c, acked, next, done) = (
                    client.clone(),
                    acked.clone(),
                    next_batch.clone(),
                    done.clone(),
                );
                tokio::spawn(async move {
                    loop {
                        let batch = next.fetch_add(1, Ordering::SeqCst);
                        let request = AddEventsToMemoryRequest {
                            app_name: "crash".into(),
                            user_id: "u".into(),
                            session_id: format!("s{}", batch % 7),
                            events: batch_ids(batch).iter().map(|id| event(id)).collect(),
                            custom_metadata: String::new(),
                        };
                        if c.add_events_to_memory(request).await.is_err() {
                            return;
                        }
                        acked.lock().unwrap().added.insert(batch);
                        done.fetch_add(1, Ordering::SeqCst);
                        // Every third batch loses its first entry again.
                        if batch % 3 == 0 {
                            let delete = DeleteMemoryRequest {
                                app_name: "crash".into(),
                                user_id: "u".into(),
                                target: Some(Target::MemoryId(batch_ids(batch)[0].clone())),
                            };
                            if c.delete_memory(delete).await.is_err() {
                                return;
                            }
                            acked.lock().unwrap().deleted.insert(batch);
                        }
                    }
                })
            })
            .collect();
        // Kill after a varying number of acknowledged batches.
        let kill_after = 1 + (cycle * 7) % 25;
        while done.load(Ordering::SeqCst) < kill_after {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        child.kill();
        for w in writers {
            w.await.unwrap();
        }
        let (restarted, new_client) = spawn(dir.path(), flags).await;
        child = restarted;
        client = new_client;

        let stored = stored_ids(&mut client).await;
        {
            let acked = acked.lock().unwrap();
            for batch in 0..next_batch.load(Ordering::SeqCst) {
                let ids = batch_ids(batch);
                let present: Vec<bool> = ids.iter().map(|id| stored.contains(id)).collect();
                // A batch is one transaction: apart from its deleted first entry, all or nothing.
                assert!(
                    present[1..].iter().all(|p| *p == present[1]),
                    "batch {batch} is partly stored: {present:?}"
                );
                if acked.added.contains(&batch) {
                    assert!(present[1], "acknowledged batch {batch} is missing");
                }
                if acked.deleted.contains(&batch) {
                    assert!(
                        !present[0],
                        "acknowledged delete of batch {batch} was undone"
                    );
                } else if acked.added.contains(&batch) && batch % 3 != 0 {
                    assert!(present[0], "batch {batch} lost an entry nobody deleted");
                }
            }
            checked = stored.len();
        }
        // The batches of this cycle: their postings were the last written before the kill.
        for batch in first_batch..next_batch.load(Ordering::SeqCst) {
            let there = batch_ids(batch)
                .into_iter()
                .filter(|id| stored.contains(id))
                .collect::<HashSet<_>>();
            assert_eq!(found_ids(&mut client, batch).await, there, "batch {batch}");
        }
    }
    println!("{CYCLES} kill/restart cycles; {checked} memories verified at the end");
    child.kill();
}
