//! Hostile input and load: every bad request gets a clear status, writes nothing, and the
//! server keeps serving; many watchers at once; disconnected streams free their resources.

use std::time::Duration;

use adk_proto::{
    memory::v1::{AddMemoryRequest, ListMemoriesRequest, SearchMemoryRequest},
    session::v1::{
        CreateSessionRequest, GetSessionRequest, ListEventsRequest, ListSessionsRequest,
        WatchEventsRequest,
    },
};
use adk_tests::{
    append_request, create_request, delta_event, get_request, json, sample, scrape, search_request,
    text_event, text_memory, watch_request, MemoryServer, SessionServer,
};
use serde_json::json;
use tonic::Code;

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn malformed_requests_get_clear_statuses_and_change_nothing() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({"k": 0})).await;
    let mut c = srv.client.clone();
    let create =
        |app: &str, user: &str, id: &str, state: String| create_request(app, user, id, &state);
    let huge = "x".repeat(100_000);
    let cases: Vec<(CreateSessionRequest, Code, &str)> = vec![
        (
            create(&huge, "u", "s2", String::new()),
            Code::InvalidArgument,
            "app_name",
        ),
        (
            create("app", "u\u{0}", "s2", String::new()),
            Code::InvalidArgument,
            "user_id",
        ),
        (
            create("app", "u", "s\u{1b}[2J", String::new()),
            Code::InvalidArgument,
            "session_id",
        ),
        (
            create("app", "u", "s2", format!("{{\"deep\": {}}}", nested(1000))),
            Code::InvalidArgument,
            "state",
        ),
        (
            create("app", "u", "s2", "{\"a\": 1} trailing".into()),
            Code::InvalidArgument,
            "state",
        ),
        (
            create("app", "u", "s2", "\u{feff}{}".into()),
            Code::InvalidArgument,
            "state",
        ),
    ];
    for (request, code, field) in cases {
        let err = c.create_session(request).await.unwrap_err();
        assert_eq!(err.code(), code, "{}", err.message());
        assert!(
            err.message().contains(field),
            "{:?} should name {field}",
            err.message()
        );
    }

    // Deeply nested values inside an event delta, and as the event's metadata.
    let mut deep = delta_event(json!({}));
    deep.actions.as_mut().unwrap().state_delta = format!("{{\"k\": {}}}", nested(1000));
    let err = c
        .append_event(append_request("app", "u", "s", deep))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let mut deep_meta = text_event("user", "x");
    deep_meta.custom_metadata = format!("{{\"m\": {}}}", nested(1000));
    let err = c
        .append_event(append_request("app", "u", "s", deep_meta))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Cursors and tokens that were never issued, or issued elsewhere.
    for token in ["", "AAAA", "////", "not base64 at all", &"A".repeat(10_000)] {
        let r = c
            .list_sessions(ListSessionsRequest {
                app_name: "app".into(),
                user_id: None,
                page_size: 5,
                page_token: token.into(),
                ..Default::default()
            })
            .await;
        assert!(
            token.is_empty() || r.unwrap_err().code() == Code::InvalidArgument,
            "{token:.20}"
        );
        let r = c
            .list_events(ListEventsRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                after_sequence: 0,
                page_size: 5,
                page_token: token.into(),
                ..Default::default()
            })
            .await;
        assert!(token.is_empty() || r.unwrap_err().code() == Code::InvalidArgument);
        let r = c
            .watch_events(WatchEventsRequest {
                app_name: "app".into(),
                user_id: String::new(),
                cursor: token.into(),
            })
            .await;
        assert!(token.is_empty() || r.unwrap_err().code() == Code::InvalidArgument);
    }
    for size in [-1, i32::MIN] {
        let r = c
            .list_sessions(ListSessionsRequest {
                app_name: "app".into(),
                user_id: None,
                page_size: size,
                page_token: String::new(),
                ..Default::default()
            })
            .await;
        assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
    }
    let r = c
        .get_session(GetSessionRequest {
            num_recent_events: Some(i32::MIN),
            ..get_request("app", "u", "s")
        })
        .await;
    assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);

    // Nothing was written, and the server still serves.
    let session = srv.get("app", "u", "s").await;
    assert!(session.events.is_empty());
    assert_eq!(json(&session.state), json!({"k": 0}));
    let listed = c
        .list_sessions(ListSessionsRequest {
            app_name: "app".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.sessions.len(), 1);
}

#[tokio::test]
async fn a_state_of_100_000_keys_is_stored_and_read_back() {
    let srv = SessionServer::start().await;
    let state: serde_json::Map<String, serde_json::Value> = (0..100_000)
        .map(|i| (format!("key-{i}"), json!(i)))
        .collect();
    let session = srv
        .create("app", "u", "big", serde_json::Value::Object(state))
        .await;
    assert_eq!(json(&session.state).as_object().unwrap().len(), 100_000);
    let delta = delta_event(json!({"key-99999": "changed"}));
    srv.append("app", "u", "big", delta).await;
    assert_eq!(
        json(&srv.get("app", "u", "big").await.state)["key-99999"],
        json!("changed")
    );
}

#[tokio::test]
async fn memory_refuses_hostile_queries_and_identifiers() {
    let srv = MemoryServer::start("http://127.0.0.1:9").await;
    let mut c = srv.client.clone();
    let search = |app: &str, query: String, limit: i32| SearchMemoryRequest {
        limit,
        ..search_request(app, "u", &query)
    };
    c.add_memory(AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![
            text_memory("spot", "user", "the spot is marked"),
            text_memory("crab", "user", "crab season"),
            text_memory("note", "user", "a footnote"),
        ],
        ..Default::default()
    })
    .await
    .unwrap();
    // Huge and odd queries are answered, not refused or crashed on: beside the oddity, each
    // names a word of one stored memory, which it finds, and no other.
    for (query, expected) in [
        (format!("{} spot", "x".repeat(1 << 20)), "spot"),
        ("\u{0}\u{1}\u{2} crab".into(), "crab"),
        (format!("{} season", "🦀".repeat(10_000)), "crab"),
        (format!("{} footnote", nested(5000)), "note"),
    ] {
        let found = c
            .search_memory(search("app", query.clone(), 0))
            .await
            .unwrap()
            .into_inner();
        let ids: Vec<&str> = found.memories.iter().map(|m| m.id.as_str()).collect();
        let shown: String = query.chars().take(20).collect();
        assert_eq!(ids, [expected], "{shown:?}...");
    }
    assert_eq!(
        c.search_memory(search("app", "x".into(), i32::MIN))
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    assert_eq!(
        c.search_memory(search(&"a".repeat(300), "x".into(), 0))
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let r = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            page_size: -5,
            page_token: String::new(),
            kind: 0,
            ..Default::default()
        })
        .await;
    assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watchers_all_see_an_append_and_leave_nothing_behind() {
    let srv =
        SessionServer::start_with(|c| c.serve.metrics_listen = Some(([127, 0, 0, 1], 0).into()))
            .await;
    srv.create("crowd", "u", "s", json!({})).await;
    let mut streams = Vec::new();
    // A few connections, many streams each, as clients of a busy app would open.
    for chunk in 0..10 {
        let client = srv.connect().await;
        for _ in 0..100 {
            let mut c = client.clone();
            streams.push(tokio::spawn(async move {
                let mut stream = c
                    .watch_session(watch_request("crowd", "u", "s"))
                    .await
                    .unwrap()
                    .into_inner();
                let first = tokio::time::timeout(Duration::from_secs(30), stream.message())
                    .await
                    .expect("the event arrives")
                    .unwrap()
                    .unwrap();
                (chunk, first.change.is_some())
            }));
        }
    }
    // Let every watch reach the live phase, then append once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    srv.append("crowd", "u", "s", text_event("user", "hello, everyone"))
        .await;
    let mut received = 0;
    for s in streams {
        let (_, got) = s.await.unwrap();
        received += usize::from(got);
    }
    assert_eq!(received, 1000);

    // Every stream was dropped by its client: none stays open on the server.
    let metrics = srv.metrics_addr().unwrap();
    let mut open = f64::MAX;
    for _ in 0..50 {
        open = open_watches(metrics).await;
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        open, 0.0,
        "watch streams still open on the server after their clients left"
    );
}

/// The server's count of WatchSession calls in flight, from its metrics endpoint (which must
/// report it: a missing gauge is no proof that nothing is open).
async fn open_watches(metrics: std::net::SocketAddr) -> f64 {
    let watch = "method=\"adk.session.v1.SessionService/WatchSession\"";
    sample(&scrape(metrics).await, "grpc_server_in_flight", &[watch])
        .expect("the in-flight gauge of WatchSession is reported")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_shed_with_resource_exhausted_and_nothing_acknowledged_is_lost() {
    let srv = SessionServer::start_with(|c| c.serve.max_concurrent_requests = 2).await;
    srv.create("app", "u", "s", json!({})).await;
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let mut c = srv.client.clone();
            tokio::spawn(async move {
                let mut e = text_event("user", "burst");
                e.id = format!("e{i}");
                c.append_event(append_request("app", "u", "s", e))
                    .await
                    .map(|_| format!("e{i}"))
                    .map_err(|status| status.code())
            })
        })
        .collect();
    let (mut acked, mut shed) = (std::collections::HashSet::new(), 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(id) => {
                acked.insert(id);
            }
            Err(code) => {
                assert_eq!(code, Code::ResourceExhausted);
                shed += 1;
            }
        }
    }
    assert!(shed > 0, "200 concurrent appends against 2 slots shed some");
    assert!(!acked.is_empty());
    let stored: std::collections::HashSet<String> = srv
        .get("app", "u", "s")
        .await
        .events
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(stored, acked, "exactly the acknowledged appends are stored");
    let mut health = tonic_health::pb::health_client::HealthClient::new(
        tonic::transport::Channel::from_shared(format!("http://{}", srv.addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "adk.session.v1.SessionService".into(),
        })
        .await
        .unwrap();
    assert_eq!(status.into_inner().status, 1, "SERVING");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_and_cancellation_leave_each_append_whole_or_absent() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut c = srv.client.clone();
    let mut expired = 0;
    for i in 0..300u64 {
        let mut e = delta_event(json!({ "last": i }));
        e.id = format!("e{i}");
        let mut request = tonic::Request::new(append_request("app", "u", "s", e));
        // From no time at all to a few fsyncs' worth: some calls are cut off mid-way.
        request.set_timeout(Duration::from_micros(250 * (i % 8)));
        if c.append_event(request).await.is_err() {
            expired += 1;
        }
    }
    assert!(expired > 0, "some appends ran out of time");
    let session = srv.get("app", "u", "s").await;
    let mut seen = std::collections::HashSet::new();
    for (k, e) in session.events.iter().enumerate() {
        assert_eq!(e.sequence, k as u64 + 1, "contiguous");
        assert!(seen.insert(e.id.clone()), "each event once");
    }
    // The state is exactly what the stored events say: no delta applied without its event.
    let last = session
        .events
        .last()
        .map(|e| json(&e.actions.clone().unwrap().state_delta)["last"].clone());
    assert_eq!(json(&session.state).get("last").cloned(), last);
}
