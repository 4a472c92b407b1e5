//! Several session-svc replicas on one PostgreSQL database: optimistic writers spread over two
//! replicas lose no update, and watchers on one replica see every append made through the
//! other, in order, with no gap and no duplicate.
//!
//! Needs PostgreSQL (`ADK_TEST_POSTGRES`): ignored unless asked for (`adk_tests::prerequisite`).

use std::{collections::HashSet, time::Duration};

use adk_common::postgres::StoreLocation;
use adk_proto::session::v1::{
    watch_session_response::Change, DeleteSessionRequest, WatchEventsRequest,
};
use adk_tests::{
    append_request, delta_event, fresh_schema, json, state_request, watch_request, SessionServer,
};
use serde_json::json;
use tonic::Code;

const WRITERS: u64 = 8;
const INCREMENTS: u64 = 15;
const PROMPT: Duration = Duration::from_secs(20);

/// Two replicas sharing a fresh schema.
async fn two_replicas() -> (SessionServer, SessionServer) {
    let url = adk_tests::prerequisite::postgres();
    let store = StoreLocation::Postgres(fresh_schema(&url).await);
    let a = SessionServer::start_with(|c| c.store = Some(store.clone())).await;
    let b = SessionServer::start_with(|c| c.store = Some(store)).await;
    (a, b)
}

/// The feed of app "app" (of one user unless `user` is empty), after `cursor`.
fn app_feed(user: &str, cursor: &str) -> WatchEventsRequest {
    WatchEventsRequest {
        app_name: "app".into(),
        user_id: user.into(),
        cursor: cursor.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn optimistic_writers_on_two_replicas_and_watchers_on_each_see_everything_once() {
    let (a, b) = two_replicas().await;
    a.create("app", "u", "counter", json!({"count": 0})).await;
    // Watchers subscribe before the writers start: on A for the session, on B for the app.
    let mut session_feed = a
        .client
        .clone()
        .watch_session(watch_request("app", "u", "counter"))
        .await
        .unwrap()
        .into_inner();
    let mut app_feed = b
        .client
        .clone()
        .watch_events(app_feed("", ""))
        .await
        .unwrap()
        .into_inner();

    // Every writer reads before any writes, so the first writes conflict: all but one.
    let first_reads = std::sync::Arc::new(tokio::sync::Barrier::new(WRITERS as usize));
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            // Even writers go through A, odd ones through B.
            let mut c = if i % 2 == 0 { &a } else { &b }.client.clone();
            let first_reads = first_reads.clone();
            tokio::spawn(async move {
                let mut conflicts = 0u64;
                let mut done = 0;
                let mut first = true;
                while done < INCREMENTS {
                    let session = c
                        .get_session(state_request("app", "u", "counter"))
                        .await
                        .unwrap()
                        .into_inner();
                    if std::mem::take(&mut first) {
                        first_reads.wait().await;
                    }
                    let count = json(&session.state)["count"].as_u64().unwrap();
                    let mut request = append_request(
                        "app",
                        "u",
                        "counter",
                        delta_event(json!({"count": count + 1, "writer": i})),
                    );
                    request.expected_last_sequence = Some(session.last_sequence);
                    match c.append_event(request).await {
                        Ok(_) => done += 1,
                        Err(status) if status.code() == Code::Aborted => conflicts += 1,
                        Err(status) => panic!("unexpected {status}"),
                    }
                }
                conflicts
            })
        })
        .collect();
    let mut conflicts = 0;
    for w in writers {
        conflicts += w.await.unwrap();
    }
    let total = WRITERS * INCREMENTS;
    for replica in [&a, &b] {
        let session = replica.get("app", "u", "counter").await;
        assert_eq!(
            json(&session.state)["count"],
            json!(total),
            "no lost update"
        );
        assert_eq!(session.last_sequence, total);
        let sequences: Vec<u64> = session.events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=total).collect::<Vec<_>>(), "contiguous");
    }

    // The watcher on A saw 1..=total exactly once, in order, half of them appended through B.
    for expected in 1..=total {
        let change = tokio::time::timeout(PROMPT, session_feed.message())
            .await
            .expect("an event arrives")
            .unwrap()
            .unwrap()
            .change;
        match change {
            Some(Change::Event(event)) => assert_eq!(event.sequence, expected),
            other => panic!("expected event {expected}, got {other:?}"),
        }
    }
    // The app feed on B saw every event once, in commit order (sequence order, for one session).
    let mut seen = HashSet::new();
    for expected in 1..=total {
        let item = tokio::time::timeout(PROMPT, app_feed.message())
            .await
            .expect("a feed item arrives")
            .unwrap()
            .unwrap();
        let event = item.event.unwrap();
        assert_eq!(event.sequence, expected);
        assert!(seen.insert(event.id), "no duplicate");
    }
    assert!(
        conflicts >= WRITERS - 1,
        "{conflicts} conflicts: the first writes, all on the same sequence, conflict but one"
    );

    // A deletion through B ends the watch on A.
    b.client
        .clone()
        .delete_session(DeleteSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "counter".into(),
        })
        .await
        .unwrap();
    let end = tokio::time::timeout(PROMPT, session_feed.message())
        .await
        .expect("the deletion arrives")
        .unwrap()
        .unwrap();
    assert!(matches!(end.change, Some(Change::Deleted(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn an_app_feed_resumed_on_another_replica_continues_without_gap() {
    let (a, b) = two_replicas().await;
    for id in ["s1", "s2"] {
        a.create("app", "u", id, json!({})).await;
    }
    let mut feed = a
        .client
        .clone()
        .watch_events(app_feed("", ""))
        .await
        .unwrap()
        .into_inner();
    // Appends to two sessions interleave through both replicas.
    let mut appended = Vec::new();
    for i in 0..20u64 {
        let (replica, id) = if i % 2 == 0 { (&a, "s1") } else { (&b, "s2") };
        let r = replica
            .append("app", "u", id, delta_event(json!({ "i": i })))
            .await;
        appended.push(r.event.unwrap().id);
    }
    // Read half on A, then resume on B from the last cursor.
    let mut received = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let item = tokio::time::timeout(PROMPT, feed.message())
            .await
            .expect("a feed item arrives")
            .unwrap()
            .unwrap();
        received.push(item.event.unwrap().id);
        cursor = item.cursor;
    }
    drop(feed);
    let mut resumed = b
        .client
        .clone()
        .watch_events(app_feed("", &cursor))
        .await
        .unwrap()
        .into_inner();
    for _ in 0..10 {
        let item = tokio::time::timeout(PROMPT, resumed.message())
            .await
            .expect("a feed item arrives")
            .unwrap()
            .unwrap();
        received.push(item.event.unwrap().id);
    }
    assert_eq!(received, appended, "every append once, in commit order");
}

/// Nothing is appended through the watchers' replica, so only the database's notifications
/// can wake them.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn watchers_wake_for_appends_made_only_through_the_other_replica() {
    let (a, b) = two_replicas().await;
    a.create("app", "u", "s", json!({})).await;
    let mut session_feed = a
        .client
        .clone()
        .watch_session(watch_request("app", "u", "s"))
        .await
        .unwrap()
        .into_inner();
    let mut app_feed = a
        .client
        .clone()
        .watch_events(app_feed("u", ""))
        .await
        .unwrap()
        .into_inner();
    for i in 1..=5u64 {
        b.append("app", "u", "s", delta_event(json!({ "i": i })))
            .await;
        let change = tokio::time::timeout(PROMPT, session_feed.message())
            .await
            .expect("the session watcher wakes")
            .unwrap()
            .unwrap()
            .change;
        assert!(matches!(change, Some(Change::Event(e)) if e.sequence == i));
        let item = tokio::time::timeout(PROMPT, app_feed.message())
            .await
            .expect("the app watcher wakes")
            .unwrap()
            .unwrap();
        assert_eq!(item.event.unwrap().sequence, i);
    }
}

/// A transaction left open elsewhere in the database holds back what WatchEvents may read: an
/// append committed after it began waits until it ends, then arrives without any further
/// notification; a watch started "from now" meanwhile skips what had committed before it.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn the_app_feed_waits_for_older_transactions_and_starts_exactly_now() {
    let url = adk_tests::prerequisite::postgres();
    let schema = fresh_schema(&url).await;
    let store = StoreLocation::Postgres(schema.clone());
    let srv = SessionServer::start_with(|c| c.store = Some(store)).await;
    srv.create("app", "u", "s", json!({})).await;

    // A writing transaction that stays open: its id is below every later append's.
    let (blocker, connection) = tokio_postgres::connect(&schema, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    blocker
        .batch_execute("BEGIN; SELECT pg_current_xact_id();")
        .await
        .unwrap();

    let before = srv
        .append("app", "u", "s", delta_event(json!({"i": "before"})))
        .await;
    let mut feed = srv
        .client
        .clone()
        .watch_events(app_feed("", ""))
        .await
        .unwrap()
        .into_inner();
    let after = srv
        .append("app", "u", "s", delta_event(json!({"i": "after"})))
        .await;
    assert!(
        tokio::time::timeout(Duration::from_millis(500), feed.message())
            .await
            .is_err(),
        "nothing is readable while the older transaction is open"
    );

    blocker.batch_execute("COMMIT").await.unwrap();
    drop(blocker);
    let _ = driver.await;
    let item = tokio::time::timeout(PROMPT, feed.message())
        .await
        .expect("the held-back append arrives once the older transaction ends")
        .unwrap()
        .unwrap();
    let event = item.event.unwrap();
    assert_eq!(
        event.id,
        after.event.unwrap().id,
        "from now: only the later append"
    );
    assert_ne!(event.id, before.event.unwrap().id);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), feed.message())
            .await
            .is_err(),
        "the append from before the watch is never delivered"
    );
}
