//! Races: optimistic concurrency under 64 writers, concurrent creation of one id, a delete
//! racing appends and watchers, and reads racing appends.

use std::time::Duration;

use adk_proto::session::v1::{
    watch_session_response::Change, DeleteSessionRequest, GetSessionRequest,
};
use adk_tests::{
    append_request, create_request, delta_event, get_request, json, state_request, text_event,
    watch_request, SessionServer, SyncMode,
};
use serde_json::json;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_writers_increment_one_counter_without_losing_an_update() {
    const WRITERS: u64 = 64;
    const INCREMENTS: u64 = 5;
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    srv.create("app", "u", "counter", json!({"count": 0})).await;
    // Every writer reads before any writes, so the first writes conflict: all but one.
    let first_reads = std::sync::Arc::new(tokio::sync::Barrier::new(WRITERS as usize));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let mut c = srv.client.clone();
            let first_reads = first_reads.clone();
            tokio::spawn(async move {
                let mut conflicts = 0u64;
                let mut done = 0;
                let mut first = true;
                while done < INCREMENTS {
                    // Read, compute, write conditionally; on a conflict read again.
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
                        delta_event(json!({"count": count + 1})),
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
    let session = srv.get("app", "u", "counter").await;
    assert_eq!(json(&session.state)["count"], json!(WRITERS * INCREMENTS));
    assert_eq!(
        session.last_sequence,
        WRITERS * INCREMENTS,
        "one event per successful increment"
    );
    assert!(
        conflicts >= WRITERS - 1,
        "{conflicts} conflicts: the first writes, all on the same sequence, conflict but one"
    );
}

#[tokio::test]
async fn concurrent_creates_of_one_id_have_exactly_one_winner() {
    let srv = SessionServer::start().await;
    let attempts: Vec<_> = (0..32)
        .map(|i| {
            let mut c = srv.client.clone();
            tokio::spawn(async move {
                c.create_session(create_request(
                    "app",
                    "u",
                    "same",
                    &json!({ "creator": i }).to_string(),
                ))
                .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, a) in attempts.into_iter().enumerate() {
        match a.await.unwrap() {
            Ok(_) => winners.push(i),
            Err(status) => assert_eq!(status.code(), Code::AlreadyExists),
        }
    }
    assert_eq!(winners.len(), 1);
    let state = json(&srv.get("app", "u", "same").await.state);
    assert_eq!(
        state["creator"],
        json!(winners[0]),
        "the winner's state, untouched by losers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_appends_and_watchers_resurrects_nothing() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "doomed", json!({})).await;
    // Every watcher reports once its watch is open, so the delete cannot overtake one.
    let (subscribed, mut all_subscribed) = tokio::sync::mpsc::channel::<()>(8);
    let watchers: Vec<_> = (0..8)
        .map(|_| {
            let mut c = srv.client.clone();
            let subscribed = subscribed.clone();
            tokio::spawn(async move {
                let mut stream = c
                    .watch_session(watch_request("app", "u", "doomed"))
                    .await
                    .unwrap()
                    .into_inner();
                subscribed.send(()).await.unwrap();
                let mut last = 0;
                loop {
                    let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
                        .await
                        .expect("the watch ends promptly after the delete");
                    match next.unwrap().map(|m| m.change) {
                        Some(Some(Change::Event(e))) => {
                            assert_eq!(e.sequence, last + 1, "no gap, no duplicate");
                            last = e.sequence;
                        }
                        Some(Some(Change::Deleted(_))) => return last,
                        other => panic!("the watch ended without the deleted marker: {other:?}"),
                    }
                }
            })
        })
        .collect();
    let appenders: Vec<_> = (0..4)
        .map(|_| {
            let mut c = srv.client.clone();
            tokio::spawn(async move {
                // Append until the delete has clearly happened (bounded), checking that once an
                // append got NOT_FOUND no later one succeeds.
                let mut after_delete = 0;
                for _ in 0..100_000 {
                    let r = c
                        .append_event(append_request(
                            "app",
                            "u",
                            "doomed",
                            text_event("user", "x"),
                        ))
                        .await;
                    match r {
                        Ok(_) if after_delete == 0 => {}
                        Ok(_) => panic!("an append succeeded after a NOT_FOUND: resurrection"),
                        Err(status) => {
                            assert_eq!(status.code(), Code::NotFound);
                            after_delete += 1;
                            if after_delete == 20 {
                                break;
                            }
                        }
                    }
                }
                after_delete
            })
        })
        .collect();
    drop(subscribed);
    for _ in 0..8 {
        all_subscribed.recv().await.unwrap();
    }
    // Some appends land before the delete, however slow the store.
    while srv.get("app", "u", "doomed").await.last_sequence < 10 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    srv.client
        .clone()
        .delete_session(DeleteSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "doomed".into(),
        })
        .await
        .unwrap();
    for a in appenders {
        assert_eq!(a.await.unwrap(), 20, "every appender saw the delete");
    }
    for w in watchers {
        assert!(
            w.await.unwrap() > 0,
            "watchers saw appends before the delete"
        );
    }
    let err = srv
        .client
        .clone()
        .get_session(state_request("app", "u", "doomed"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "the session stays deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_racing_appends_sees_the_state_of_exactly_the_events_it_returns() {
    const APPENDS: u64 = 400;
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    srv.create("app", "u", "s", json!({})).await;
    let mut writer = srv.client.clone();
    let writing = tokio::spawn(async move {
        for i in 1..=APPENDS {
            let mut e = delta_event(json!({ "n": i }));
            e.id = format!("e{i}");
            writer
                .append_event(append_request("app", "u", "s", e))
                .await
                .unwrap();
        }
    });
    // Every read while the writer runs: the state's `n` is the delta of the last event read
    // (the state is never ahead of, nor behind, the events returned with it).
    let mut c = srv.client.clone();
    let mut reads = 0;
    while !writing.is_finished() {
        let session = c
            .get_session(GetSessionRequest {
                num_recent_events: Some(1),
                ..get_request("app", "u", "s")
            })
            .await
            .unwrap()
            .into_inner();
        let n = json(&session.state).get("n").and_then(|n| n.as_u64());
        let last = session.events.last().map(|e| {
            json(&e.actions.clone().unwrap().state_delta)["n"]
                .as_u64()
                .unwrap()
        });
        assert_eq!(n, last, "state and events of one read disagree");
        assert_eq!(session.last_sequence, last.unwrap_or(0));
        reads += 1;
    }
    writing.await.unwrap();
    assert!(reads > 0);
}
