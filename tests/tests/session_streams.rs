//! session-svc's streaming RPCs: AppendEvents (in order, errors in-band), WatchSession (replay
//! then live, no gap, no duplicate, deletion marker, slow watchers) and WatchEvents (app feed with
//! resumable cursors and a retention window).

use std::time::Duration;

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, watch_session_response::Change,
    AppendEventRequest, DeleteSessionRequest, Event, WatchEventsRequest, WatchEventsResponse,
    WatchSessionRequest,
};
use adk_tests::{append_request, delta_event, live, text_event, SessionServer, SyncMode};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, StreamExt};
use tonic::{transport::Channel, Code, Streaming};

/// How long a test waits for something that should arrive promptly.
const PROMPT: Duration = Duration::from_secs(10);
/// How long a test waits to be sure something does not arrive.
const QUIET: Duration = Duration::from_millis(300);

fn watch_request(session: &str, after: u64, include_partial: bool) -> WatchSessionRequest {
    WatchSessionRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: session.into(),
        after_sequence: after,
        include_partial,
    }
}

async fn watch(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    after: u64,
    include_partial: bool,
) -> Streaming<adk_proto::session::v1::WatchSessionResponse> {
    c.watch_session(watch_request(session, after, include_partial))
        .await
        .expect("watch_session")
        .into_inner()
}

/// The next change of a watch, failing the test if none comes promptly.
async fn next_change(
    stream: &mut Streaming<adk_proto::session::v1::WatchSessionResponse>,
) -> Change {
    tokio::time::timeout(PROMPT, stream.message())
        .await
        .expect("a change arrives")
        .expect("stream ok")
        .expect("stream open")
        .change
        .expect("change set")
}

async fn next_event(stream: &mut Streaming<adk_proto::session::v1::WatchSessionResponse>) -> Event {
    match next_change(stream).await {
        Change::Event(e) => e,
        other => panic!("expected an event, got {other:?}"),
    }
}

#[tokio::test]
async fn append_events_answers_in_order_and_reports_errors_in_band() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let (tx, rx) = mpsc::channel(8);
    let mut responses = srv
        .client
        .clone()
        .append_events(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut bad = delta_event(json!({}));
    bad.custom_metadata = "[not an object]".into();
    let mut stale = append_request("app", "u", "s", delta_event(json!({"n": 3})));
    stale.expected_last_sequence = Some(0);
    let mut conditional = append_request("app", "u", "s", delta_event(json!({"n": 4})));
    conditional.expected_last_sequence = Some(2);
    let requests = vec![
        append_request("app", "u", "s", delta_event(json!({"n": 1}))),
        append_request("app", "u", "s", bad),
        append_request("app", "u", "s", delta_event(json!({"n": 2}))),
        stale,
        append_request("app", "missing", "s", text_event("user", "hi")),
        conditional,
    ];
    for r in requests {
        tx.send(r).await.unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..6 {
        let r = tokio::time::timeout(PROMPT, responses.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push((
            r.code,
            r.event.map(|e| e.sequence),
            r.last_sequence,
            r.message,
        ));
    }
    assert_eq!((got[0].0, got[0].1, got[0].2), (0, Some(1), 1));
    assert_eq!(got[1].0, Code::InvalidArgument as i32);
    assert!(got[1].3.contains("event.custom_metadata"), "{}", got[1].3);
    assert_eq!((got[2].0, got[2].1, got[2].2), (0, Some(2), 2));
    assert_eq!(
        (got[3].0, got[3].1, got[3].2),
        (Code::Aborted as i32, None, 2),
        "conflict names the current sequence"
    );
    assert_eq!(got[4].0, Code::NotFound as i32);
    assert_eq!(
        (got[5].0, got[5].1),
        (0, Some(3)),
        "the stream stays usable after errors"
    );
    drop(tx);
    assert!(
        responses.message().await.unwrap().is_none(),
        "ends when the client closes"
    );
    assert_eq!(srv.get("app", "u", "s").await.last_sequence, 3);
}

#[tokio::test]
async fn watch_session_replays_after_a_sequence_then_follows_live() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    for i in 1..=3 {
        srv.append("app", "u", "s", text_event("user", &format!("m{i}")))
            .await;
    }
    let mut stream = watch(&mut srv.client.clone(), "s", 1, false).await;
    assert_eq!(next_event(&mut stream).await.sequence, 2);
    assert_eq!(next_event(&mut stream).await.sequence, 3);
    for i in 4..=5 {
        srv.append("app", "u", "s", text_event("user", &format!("m{i}")))
            .await;
    }
    assert_eq!(next_event(&mut stream).await.sequence, 4);
    assert_eq!(next_event(&mut stream).await.sequence, 5);
    assert!(
        tokio::time::timeout(QUIET, stream.message()).await.is_err(),
        "nothing more"
    );

    let err = srv
        .client
        .clone()
        .watch_session(watch_request("missing", 0, false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn watchers_joining_during_concurrent_appends_see_every_event_once_in_order() {
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = 60;
    const TOTAL: u64 = WRITERS * PER_WRITER;
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    srv.create("app", "u", "s", json!({})).await;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut c = srv.client.clone();
            tokio::spawn(async move {
                for i in 0..PER_WRITER {
                    let e = delta_event(json!({ format!("w{w}"): i }));
                    c.append_event(append_request("app", "u", "s", e))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    // Watchers subscribe at different moments of the write burst, each from the start.
    let mut watchers = Vec::new();
    for k in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(5 * k)).await;
        let mut c = srv.client.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = watch(&mut c, "s", 0, false).await;
            let mut seqs = Vec::new();
            while (seqs.len() as u64) < TOTAL {
                seqs.push(next_event(&mut stream).await.sequence);
            }
            seqs
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    for w in watchers {
        assert_eq!(w.await.unwrap(), (1..=TOTAL).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn partial_events_reach_only_watchers_that_ask_for_them() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut with = watch(&mut srv.client.clone(), "s", 0, true).await;
    let mut without = watch(&mut srv.client.clone(), "s", 0, false).await;
    // Partial events are live only: once `with` relays one, it is past its (empty) replay.
    live::until_live(&srv.client, ("app", "u", "s"), &mut with).await;
    let mut partial = text_event("agent", "Hel");
    partial.partial = Some(true);
    srv.append("app", "u", "s", partial.clone()).await;
    srv.append("app", "u", "s", text_event("agent", "Hello"))
        .await;

    let mut first = next_event(&mut with).await;
    while live::is_probe(&first) {
        first = next_event(&mut with).await;
    }
    assert_eq!((first.partial, first.sequence), (Some(true), 0));
    assert_eq!(first.content, partial.content);
    assert_eq!(next_event(&mut with).await.sequence, 1);
    // Neither the probes nor the fragment reach the watcher that did not ask for partials.
    let only = next_event(&mut without).await;
    assert_eq!((only.partial, only.sequence), (None, 1));
    assert!(srv
        .get("app", "u", "s")
        .await
        .events
        .iter()
        .all(|e| e.partial.is_none()));
}

#[tokio::test]
async fn deleting_the_session_ends_watches_with_a_marker() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    srv.append("app", "u", "s", text_event("user", "hi")).await;
    let mut stream = watch(&mut srv.client.clone(), "s", 0, true).await;
    assert_eq!(next_event(&mut stream).await.sequence, 1);
    srv.client
        .clone()
        .delete_session(DeleteSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
        })
        .await
        .unwrap();
    assert!(matches!(next_change(&mut stream).await, Change::Deleted(_)));
    let end = tokio::time::timeout(PROMPT, stream.message())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "the stream ends after the marker");

    // A new session of the same name is a new watch target, not a continuation.
    srv.create("app", "u", "s", json!({})).await;
    let mut fresh = watch(&mut srv.client.clone(), "s", 0, false).await;
    srv.append("app", "u", "s", text_event("user", "again"))
        .await;
    assert_eq!(next_event(&mut fresh).await.sequence, 1);
}

#[tokio::test]
async fn a_slow_watcher_is_caught_up_from_the_store_without_losses() {
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    srv.create("app", "u", "s", json!({})).await;
    let mut stream = watch(&mut srv.client.clone(), "s", 0, false).await;
    // The watcher reads nothing while 1,000 events are appended.
    let (tx, rx) = mpsc::channel(64);
    let mut responses = srv
        .client
        .clone()
        .append_events(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let body = "x".repeat(1024);
    let feeder = tokio::spawn(async move {
        for _ in 0..1000 {
            tx.send(append_request("app", "u", "s", text_event("agent", &body)))
                .await
                .unwrap();
        }
    });
    for _ in 0..1000 {
        assert_eq!(responses.message().await.unwrap().unwrap().code, 0);
    }
    feeder.await.unwrap();
    let mut seqs = Vec::new();
    for _ in 0..1000 {
        seqs.push(next_event(&mut stream).await.sequence);
    }
    assert_eq!(seqs, (1..=1000).collect::<Vec<_>>());
}

fn feed_request(app: &str, user: &str, cursor: &str) -> WatchEventsRequest {
    WatchEventsRequest {
        app_name: app.into(),
        user_id: user.into(),
        cursor: cursor.into(),
    }
}

async fn next_feed(stream: &mut Streaming<WatchEventsResponse>) -> WatchEventsResponse {
    tokio::time::timeout(PROMPT, stream.message())
        .await
        .expect("a feed item arrives")
        .expect("stream ok")
        .expect("stream open")
}

#[tokio::test]
async fn watch_events_follows_an_app_and_resumes_from_a_cursor() {
    let srv = SessionServer::start().await;
    for (user, id) in [("u1", "a"), ("u2", "b")] {
        srv.create("app", user, id, json!({})).await;
    }
    srv.create("other", "u1", "a", json!({})).await;
    srv.append("app", "u1", "a", text_event("user", "before the watch"))
        .await;

    let mut all = srv
        .client
        .clone()
        .watch_events(feed_request("app", "", ""))
        .await
        .unwrap()
        .into_inner();
    let mut only_u2 = srv
        .client
        .clone()
        .watch_events(feed_request("app", "u2", ""))
        .await
        .unwrap()
        .into_inner();
    srv.append("other", "u1", "a", text_event("user", "another app"))
        .await;
    srv.append("app", "u1", "a", text_event("user", "one"))
        .await;
    srv.append("app", "u2", "b", text_event("user", "two"))
        .await;
    srv.append("app", "u1", "a", text_event("user", "three"))
        .await;

    let first = next_feed(&mut all).await;
    assert_eq!(
        (first.user_id.as_str(), first.session_id.as_str()),
        ("u1", "a")
    );
    assert_eq!(
        first.event.unwrap().sequence,
        2,
        "from now: the earlier event is not replayed"
    );
    let second = next_feed(&mut all).await;
    assert_eq!(second.user_id, "u2");
    let u2 = next_feed(&mut only_u2).await;
    assert_eq!(
        (u2.user_id.as_str(), u2.cursor.as_str()),
        ("u2", second.cursor.as_str())
    );
    assert!(
        tokio::time::timeout(QUIET, only_u2.message())
            .await
            .is_err(),
        "u1's events are filtered out"
    );
    drop(all);

    // Reconnecting with the cursor of `second` resumes exactly after it, including what was
    // appended while nobody watched.
    srv.append("app", "u2", "b", text_event("user", "four"))
        .await;
    let mut resumed = srv
        .client
        .clone()
        .watch_events(feed_request("app", "", &second.cursor))
        .await
        .unwrap()
        .into_inner();
    let texts =
        |r: &WatchEventsResponse| match &r.event.as_ref().unwrap().content.as_ref().unwrap().parts
            [0]
        .data
        {
            Some(adk_proto::session::v1::part::Data::Text(t)) => t.clone(),
            other => panic!("{other:?}"),
        };
    assert_eq!(texts(&next_feed(&mut resumed).await), "three");
    assert_eq!(texts(&next_feed(&mut resumed).await), "four");

    for (app, cursor) in [("other", second.cursor.as_str()), ("app", "garbage!")] {
        let err = srv
            .client
            .clone()
            .watch_events(feed_request(app, "", cursor))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{app} {cursor}");
        assert!(err.message().contains("cursor"));
    }
}

#[tokio::test]
async fn cursors_older_than_the_retention_window_are_out_of_range() {
    let srv = SessionServer::start_with(|c| c.change_retention_secs = 2).await;
    srv.create("app", "u", "s", json!({})).await;
    let mut feed = srv
        .client
        .clone()
        .watch_events(feed_request("app", "", ""))
        .await
        .unwrap()
        .into_inner();
    srv.append("app", "u", "s", text_event("user", "old")).await;
    let old = next_feed(&mut feed).await;
    drop(feed);
    srv.append("app", "u", "s", text_event("user", "newer"))
        .await;
    // Within the window the cursor resumes.
    let mut again = srv
        .client
        .clone()
        .watch_events(feed_request("app", "", &old.cursor))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next_feed(&mut again).await.event.unwrap().sequence, 2);
    drop(again);

    // Past the window (2 s, trimmed every 500 ms) the same cursor is refused, not silently gapped.
    // When the trim runs depends on the machine's load: until it has, resuming still works and
    // must deliver the very next event.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let err = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match srv
            .client
            .clone()
            .watch_events(feed_request("app", "", &old.cursor))
            .await
        {
            Err(err) => break err,
            Ok(resumed) => {
                let mut resumed = resumed.into_inner();
                assert_eq!(next_feed(&mut resumed).await.event.unwrap().sequence, 2);
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the cursor was never refused: the feed is not trimmed"
                );
            }
        }
    };
    assert_eq!(err.code(), Code::OutOfRange, "{}", err.message());
    // A fresh subscription works and sees new events.
    let mut fresh = srv
        .client
        .clone()
        .watch_events(feed_request("app", "", ""))
        .await
        .unwrap()
        .into_inner();
    srv.append("app", "u", "s", text_event("user", "latest"))
        .await;
    assert_eq!(next_feed(&mut fresh).await.event.unwrap().sequence, 3);
}

#[tokio::test]
async fn a_broken_request_stream_does_not_disturb_other_streams() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let (tx, rx) = mpsc::channel::<AppendEventRequest>(1);
    let mut responses = srv
        .client
        .clone()
        .append_events(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(append_request("app", "u", "s", text_event("user", "one")))
        .await
        .unwrap();
    assert_eq!(responses.message().await.unwrap().unwrap().code, 0);
    drop(responses);
    drop(tx);
    let r = srv.append("app", "u", "s", text_event("user", "two")).await;
    assert_eq!(r.last_sequence, 2);
    let stream = tokio_stream::iter(vec![append_request(
        "app",
        "u",
        "s",
        text_event("user", "three"),
    )]);
    let mut again = srv
        .client
        .clone()
        .append_events(stream)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.next().await.unwrap().unwrap().last_sequence, 3);
}
