//! Durability: the real `session-svc` binary is killed with SIGKILL, at a random moment, while
//! writers are appending, 20 times over; after each restart on the same data directory every
//! acknowledged event is there exactly once, sequences are contiguous, and state (session, user
//! and app scope) is exactly what the stored events imply: nothing half-applied.

use std::{
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, AppendEventRequest, CreateSessionRequest, Event,
    EventActions, GetSessionRequest, GetUserStateRequest,
};
use adk_tests::{spawn_binary, ServerProcess};
use serde_json::{json, Value};
use tonic::transport::Channel;

const WRITERS: usize = 4;
/// At most this many acknowledged appends per cycle before the kill.
const ACKS_BEFORE_KILL: usize = 150;

/// Starts the binary on an ephemeral port and returns it with a connected client.
async fn spawn(dir: &Path) -> (ServerProcess, SessionServiceClient<Channel>) {
    let (child, channel) = spawn_binary(env!("CARGO_BIN_EXE_session-svc"), dir).await;
    (child, SessionServiceClient::new(channel))
}

fn event(writer: usize, i: usize) -> Event {
    Event {
        id: format!("w{writer}-{i}"),
        author: "writer".into(),
        actions: Some(EventActions {
            state_delta: json!({
                "n": i,
                format!("user:last_w{writer}"): i,
                format!("app:last_w{writer}"): i,
            })
            .to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What one writer has: acknowledged appends, in order, across all cycles.
type Acked = Arc<Vec<Mutex<Vec<usize>>>>;

/// Checks everything the store holds against what was acknowledged; returns, per writer, how
/// many events are stored (the next writer index continues from there).
async fn verify(client: &mut SessionServiceClient<Channel>, acked: &Acked) -> Vec<usize> {
    let user_state = client
        .get_user_state(GetUserStateRequest {
            app_name: "crash".into(),
            user_id: "u".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let user_state: Value = serde_json::from_str(&user_state.state).unwrap();
    let mut stored_counts = Vec::new();
    for w in 0..WRITERS {
        let session = client
            .get_session(GetSessionRequest {
                app_name: "crash".into(),
                user_id: "u".into(),
                session_id: format!("s{w}"),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let acked = acked[w].lock().unwrap().clone();
        let stored = session.events.len();
        // Each writer appends in order, so what is stored is exactly events 1..=stored: all the
        // acknowledged ones, plus at most the one in flight at the kill.
        let last_acked = acked.last().copied().unwrap_or(0);
        assert!(
            stored >= last_acked,
            "writer {w}: {stored} stored, {last_acked} acked"
        );
        assert!(
            stored <= last_acked + 1,
            "writer {w}: nothing beyond the in-flight append ({stored} stored, {last_acked} acked: {:?})",
            session.events.iter().map(|e| (e.sequence, e.id.as_str())).collect::<Vec<_>>()
        );
        for (k, e) in session.events.iter().enumerate() {
            assert_eq!(e.sequence, k as u64 + 1, "contiguous sequences");
            assert_eq!(
                e.id,
                format!("w{w}-{}", k + 1),
                "each event exactly once, in order"
            );
        }
        assert_eq!(session.last_sequence, stored as u64);
        if stored > 0 {
            let state: Value = serde_json::from_str(&session.state).unwrap();
            assert_eq!(
                state["n"],
                json!(stored),
                "session state is the fold of stored events"
            );
            assert_eq!(state[format!("app:last_w{w}")], json!(stored));
            assert_eq!(user_state[format!("last_w{w}")], json!(stored));
        }
        stored_counts.push(stored);
    }
    stored_counts
}

/// A small deterministic generator, seeded per run and printed, for kill moments.
fn next_random(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_appends_survive_repeated_sigkills() {
    const CYCLES: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill-moment seed: {seed}");
    let acked: Acked = Arc::new((0..WRITERS).map(|_| Mutex::new(Vec::new())).collect());
    let (mut child, client) = spawn(dir.path()).await;
    for w in 0..WRITERS {
        client
            .clone()
            .create_session(CreateSessionRequest {
                app_name: "crash".into(),
                user_id: "u".into(),
                session_id: format!("s{w}"),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let mut next = vec![1; WRITERS];
    let mut client = client;
    let mut total_verified = 0;
    for _ in 0..CYCLES {
        let total = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (mut client, acked, total) = (client.clone(), acked.clone(), total.clone());
                let first = next[w];
                tokio::spawn(async move {
                    for i in first.. {
                        let request = AppendEventRequest {
                            app_name: "crash".into(),
                            user_id: "u".into(),
                            session_id: format!("s{w}"),
                            event: Some(event(w, i)),
                            expected_last_sequence: None,
                        };
                        if client.append_event(request).await.is_err() {
                            break;
                        }
                        acked[w].lock().unwrap().push(i);
                        total.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        // Kill at a random moment: after 1 to ACKS_BEFORE_KILL acknowledged appends.
        let kill_after = 1 + next_random(&mut seed) as usize % ACKS_BEFORE_KILL;
        while total.load(Ordering::SeqCst) < kill_after {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        child.kill();
        for w in writers {
            w.await.unwrap();
        }
        let (restarted, new_client) = spawn(dir.path()).await;
        child = restarted;
        client = new_client;
        let stored = verify(&mut client, &acked).await;
        total_verified = stored.iter().sum();
        // An append in flight at the kill may have been stored without an answer: the next
        // writer index continues after whatever is stored.
        next = stored.iter().map(|n| n + 1).collect();
    }
    println!("{CYCLES} kill/restart cycles, {total_verified} events verified");
    child.kill();
}
