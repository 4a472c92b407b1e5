//! PostgreSQL going away under load: restarted (`pg_ctl restart -m fast`, `-m immediate`), the
//! services' connections terminated (`pg_terminate_backend`, the LISTEN connections included),
//! and stopped for a while. Two session-svc replicas serve writers and watchers throughout, and
//! a memory-svc shares the database.
//!
//! Expected, and checked: every failed call is UNAVAILABLE; while the database is down a call
//! fails at once and health is NOT_SERVING; everything recovers by itself; the watchers on both
//! replicas see every event once, in order; every acknowledged append is stored once.
//!
//! Runs on a cluster of its own (`adk_tests::pg_cluster`); needs PostgreSQL installed and
//! `ADK_TEST_POSTGRES` set, so it is ignored unless asked for (`adk_tests::prerequisite`).

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use adk_common::postgres::StoreLocation;
use adk_proto::{
    memory::v1::SearchMemoryRequest,
    session::v1::{
        session_service_client::SessionServiceClient, watch_session_response::Change,
        WatchEventsRequest, WatchSessionRequest,
    },
};
use adk_tests::{
    append_request,
    pg_cluster::{Cluster, ClusterOptions, StopMode},
    text_event, MemoryServer, SessionServer,
};
use serde_json::json;
use tonic::{transport::Channel, Code};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
};

const WRITERS: usize = 4;
/// Appends acknowledged between two faults (the load is running, and has recovered).
const PROGRESS: usize = 40;
/// Far longer than any step should take: a hang fails the test instead of stalling it.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the writers did: the ids of acknowledged appends, and any failure that was not
/// UNAVAILABLE.
#[derive(Default)]
struct Ledger {
    acked: Mutex<Vec<String>>,
    /// When each was acknowledged, in order.
    times: Mutex<Vec<std::time::Instant>>,
    count: AtomicUsize,
    unavailable: AtomicUsize,
    unexpected: Mutex<Vec<String>>,
}

/// Appends events with ids `w{writer}-{n}` to session "s", alternating replicas, until `stop`;
/// an append that fails is sent again with the same id until it is acknowledged.
async fn writer(
    writer: usize,
    replicas: [SessionServiceClient<Channel>; 2],
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let id = format!("w{writer}-{n}");
        let mut attempt = 0;
        loop {
            let mut client = replicas[(n + attempt) % 2].clone();
            let mut event = text_event("user", &id);
            event.id = id.clone();
            match client
                .append_event(append_request("app", "u", "s", event))
                .await
            {
                Ok(_) => break,
                Err(status) => {
                    ledger.unavailable.fetch_add(1, Ordering::SeqCst);
                    if status.code() != Code::Unavailable {
                        ledger
                            .unexpected
                            .lock()
                            .unwrap()
                            .push(format!("{id}: {status}"));
                    }
                    attempt += 1;
                    // The load's own pace while the database is away.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        {
            let mut times = ledger.times.lock().unwrap();
            times.push(std::time::Instant::now());
            ledger.acked.lock().unwrap().push(id);
            ledger.count.fetch_add(1, Ordering::SeqCst);
        }
        n += 1;
    }
}

/// Waits until `PROGRESS` more appends than `from` have been acknowledged; returns the count.
/// Prints the longest pause between two acknowledgements since `from` (a figure for
/// RELIABILITY.md, not a check).
async fn progress(ledger: &Ledger, from: usize, what: &str) -> usize {
    let done = tokio::time::timeout(PATIENCE, async {
        loop {
            let now = ledger.count.load(Ordering::SeqCst);
            if now >= from + PROGRESS {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no progress {what}"));
    let times = ledger.times.lock().unwrap();
    let window = &times[from.saturating_sub(1)..];
    let pause = window.windows(2).map(|w| w[1] - w[0]).max();
    eprintln!("{what}: longest pause between acknowledgements {pause:?}");
    done
}

async fn health(channel: Channel, service: &str) -> Option<ServingStatus> {
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner().status())
}

/// Waits until the health of `service` at `addr` is `want`.
async fn health_becomes(addr: std::net::SocketAddr, service: &str, want: ServingStatus) {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, async {
        while health(channel.clone(), service).await != Some(want) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{service} at {addr} never {want:?}"));
}

/// The number of the services' connections waiting in LISTEN.
async fn listeners(superuser: &tokio_postgres::Client) -> i64 {
    superuser
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' \
             AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Waits until both replicas' LISTEN connections are up.
async fn listening_again(superuser: &tokio_postgres::Client) {
    tokio::time::timeout(PATIENCE, async {
        while listeners(superuser).await != 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("both replicas listen again");
}

async fn superuser(cluster: &Cluster) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&cluster.url("sslmode=disable"), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn restarts_crashes_and_killed_connections_lose_nothing_and_heal_by_themselves() {
    adk_tests::prerequisite::postgres();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let store = StoreLocation::Postgres(cluster.url(""));
    let a = SessionServer::start_with(|c| c.store = Some(store.clone())).await;
    let b = SessionServer::start_with(|c| c.store = Some(store.clone())).await;
    let memory = MemoryServer::start_with(&format!("http://{}", a.addr), |c| {
        c.store = Some(store.clone())
    })
    .await;
    a.create("app", "u", "s", json!({})).await;

    // Watchers: the session on each replica, the app feed on A. Each records what it saw.
    let mut watched = Vec::new();
    for replica in [&a, &b] {
        let mut stream = replica
            .client
            .clone()
            .watch_session(WatchSessionRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                after_sequence: 0,
                include_partial: false,
            })
            .await
            .unwrap()
            .into_inner();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(message) = stream.message().await.transpose() {
                match message.map(|m| m.change) {
                    Ok(Some(Change::Event(e))) => record.lock().unwrap().push((e.sequence, e.id)),
                    other => return format!("{other:?}"),
                }
            }
            "ended".to_owned()
        });
        watched.push((seen, task));
    }
    let mut feed = a
        .client
        .clone()
        .watch_events(WatchEventsRequest {
            app_name: "app".into(),
            user_id: String::new(),
            cursor: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let feed_seen = Arc::new(Mutex::new(Vec::new()));
    let feed_record = feed_seen.clone();
    let feed_task = tokio::spawn(async move {
        while let Some(message) = feed.message().await.transpose() {
            match message {
                Ok(m) => feed_record
                    .lock()
                    .unwrap()
                    .push(m.event.map(|e| e.id).unwrap_or_default()),
                Err(status) => return format!("{status}"),
            }
        }
        "ended".to_owned()
    });

    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            tokio::spawn(writer(
                w,
                [a.client.clone(), b.client.clone()],
                ledger.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let mut done = progress(&ledger, 0, "at the start").await;

    let took = std::time::Instant::now();
    cluster.restart(StopMode::Fast).await;
    eprintln!("pg_ctl restart -m fast took {:?}", took.elapsed());
    done = progress(&ledger, done, "after restart -m fast").await;

    let took = std::time::Instant::now();
    cluster.restart(StopMode::Immediate).await;
    eprintln!("pg_ctl restart -m immediate took {:?}", took.elapsed());
    done = progress(&ledger, done, "after restart -m immediate").await;

    // Every connection of the services, the LISTEN ones included (one per replica, back since
    // the restarts).
    let db = superuser(&cluster).await;
    listening_again(&db).await;
    let terminated: i64 = db
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(terminated >= 3, "terminated {terminated} connections");
    done = progress(&ledger, done, "after pg_terminate_backend").await;
    listening_again(&db).await;
    drop(db);

    // Down for a while: calls fail at once with UNAVAILABLE, health turns NOT_SERVING.
    cluster.stop(StopMode::Fast).await;
    let down = std::time::Instant::now();
    let session_service = "adk.session.v1.SessionService";
    let memory_service = "adk.memory.v1.MemoryService";
    health_becomes(a.addr, session_service, ServingStatus::NotServing).await;
    health_becomes(b.addr, session_service, ServingStatus::NotServing).await;
    health_becomes(memory.addr, memory_service, ServingStatus::NotServing).await;
    eprintln!("all three NOT_SERVING {:?} after the stop", down.elapsed());
    let asked = std::time::Instant::now();
    let read = tokio::time::timeout(
        PATIENCE,
        a.client
            .clone()
            .get_session(adk_proto::session::v1::GetSessionRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                ..Default::default()
            }),
    )
    .await
    .expect("a read while the database is down fails, it does not hang");
    assert_eq!(read.unwrap_err().code(), Code::Unavailable);
    eprintln!(
        "GetSession while down: UNAVAILABLE after {:?}",
        asked.elapsed()
    );
    let search = tokio::time::timeout(
        PATIENCE,
        memory.client.clone().search_memory(SearchMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            query: "anything".into(),
            ..Default::default()
        }),
    )
    .await
    .expect("a search while the database is down fails, it does not hang");
    assert_eq!(search.unwrap_err().code(), Code::Unavailable);
    cluster.start_again().await;
    let up = std::time::Instant::now();
    health_becomes(a.addr, session_service, ServingStatus::Serving).await;
    health_becomes(b.addr, session_service, ServingStatus::Serving).await;
    health_becomes(memory.addr, memory_service, ServingStatus::Serving).await;
    eprintln!("all three SERVING {:?} after the start", up.elapsed());
    progress(&ledger, done, "after stop and start").await;

    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    let unexpected = ledger.unexpected.lock().unwrap().clone();
    assert!(
        unexpected.is_empty(),
        "failures other than UNAVAILABLE: {unexpected:?}"
    );

    // Every acknowledged append is stored, once, in a contiguous sequence.
    let acked: HashSet<String> = ledger.acked.lock().unwrap().iter().cloned().collect();
    let stored = a.get("app", "u", "s").await.events;
    let ids: Vec<&str> = stored.iter().map(|e| e.id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an event stored twice");
    assert_eq!(unique.len(), acked.len(), "stored vs acknowledged");
    assert!(acked.iter().all(|id| unique.contains(id.as_str())));
    let sequences: Vec<u64> = stored.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=stored.len() as u64).collect::<Vec<_>>());

    // The watchers on both replicas saw exactly that, in order; the app feed each event once.
    let total = stored.len();
    for (i, (seen, task)) in watched.iter().enumerate() {
        tokio::time::timeout(PATIENCE, async {
            while seen.lock().unwrap().len() < total && !task.is_finished() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("watcher {i} stalled"));
        let seen = seen.lock().unwrap().clone();
        let expected: Vec<(u64, String)> =
            stored.iter().map(|e| (e.sequence, e.id.clone())).collect();
        assert_eq!(seen, expected, "watcher {i}");
    }
    tokio::time::timeout(PATIENCE, async {
        while feed_seen.lock().unwrap().len() < total && !feed_task.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the app feed stalled");
    let feed_ids = feed_seen.lock().unwrap().clone();
    let feed_unique: HashSet<&str> = feed_ids.iter().map(String::as_str).collect();
    assert_eq!(
        feed_ids.len(),
        total,
        "app feed: {} of {total}",
        feed_ids.len()
    );
    assert_eq!(feed_unique, unique, "app feed");
    eprintln!(
        "{total} appends acknowledged and stored once across four faults; {} attempts failed \
         (UNAVAILABLE) and were sent again",
        ledger.unavailable.load(Ordering::SeqCst)
    );
    for (_, task) in watched {
        task.abort();
    }
    feed_task.abort();
    memory.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
}
