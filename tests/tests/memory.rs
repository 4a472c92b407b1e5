//! memory-svc over gRPC: ADK's memory rules (M1), ranking, multilingual matching, isolation,
//! persistence, and sessions fetched by reference from a real session-svc.

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        memory_service_client::MemoryServiceClient, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, DeleteMemoryRequest, ListMemoriesRequest, MemoryEntry,
        SessionRef,
    },
    session::v1::{part::Data, Content, Event, Part, Session},
};
use adk_tests::{search_request, text_event, text_memory, ts, MemoryServer, SessionServer};
use serde_json::json;
use tonic::{transport::Channel, Code};

/// An endpoint where nothing listens, for tests that do not resolve session references.
const NO_SESSION_SVC: &str = "http://127.0.0.1:9";

fn event(id: &str, author: &str, text: &str, seconds: i64) -> Event {
    let mut e = text_event(author, text);
    e.id = id.into();
    e.timestamp = Some(ts(seconds));
    e
}

fn session(app: &str, user: &str, id: &str, events: Vec<Event>) -> Session {
    Session {
        id: id.into(),
        app_name: app.into(),
        user_id: user.into(),
        events,
        ..Default::default()
    }
}

async fn add_session(c: &mut MemoryServiceClient<Channel>, s: Session) -> u32 {
    c.add_session_to_memory(AddSessionToMemoryRequest {
        source: Some(Source::Session(s)),
        generate: None,
    })
    .await
    .expect("add_session_to_memory")
    .into_inner()
    .entries
}

async fn add_events(
    c: &mut MemoryServiceClient<Channel>,
    app: &str,
    user: &str,
    session_id: &str,
    events: Vec<Event>,
) -> u32 {
    c.add_events_to_memory(AddEventsToMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session_id.into(),
        events,
        custom_metadata: String::new(),
    })
    .await
    .expect("add_events_to_memory")
    .into_inner()
    .entries
}

async fn search(
    c: &mut MemoryServiceClient<Channel>,
    app: &str,
    user: &str,
    query: &str,
) -> Vec<MemoryEntry> {
    c.search_memory(search_request(app, user, query))
        .await
        .expect("search_memory")
        .into_inner()
        .memories
}

fn ids(entries: &[MemoryEntry]) -> Vec<&str> {
    entries.iter().map(|m| m.id.as_str()).collect()
}

async fn delete(
    c: &mut MemoryServiceClient<Channel>,
    app: &str,
    user: &str,
    target: Target,
) -> u32 {
    c.delete_memory(DeleteMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        target: Some(target),
    })
    .await
    .expect("delete_memory")
    .into_inner()
    .deleted
}

#[tokio::test]
async fn m1_2_only_events_with_content_are_remembered_and_readding_replaces() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let mut no_content = event("e0", "agent", "", 1);
    no_content.content = None;
    let mut empty_parts = event("e1", "agent", "", 2);
    empty_parts.content = Some(Content {
        role: Some("model".into()),
        parts: vec![],
    });
    let mut call_only = event("e2", "agent", "", 3);
    call_only.content = Some(Content {
        role: Some("model".into()),
        parts: vec![Part {
            data: Some(Data::FunctionCall(Default::default())),
            ..Default::default()
        }],
    });
    let events = vec![
        no_content,
        empty_parts,
        call_only,
        event("e3", "user", "I love hiking in the Alps", 4),
        event("e4", "agent", "Hiking is great exercise", 5),
    ];
    assert_eq!(
        add_session(&mut c, session("app", "u", "s1", events)).await,
        3
    );
    let found = search(&mut c, "app", "u", "hiking").await;
    // The two turns saying it, then the function call before them, which has the first of
    // them as context.
    assert_eq!(ids(&found[2..]), ["e2"]);
    assert!(found.iter().all(|m| m.session_id == "s1" && m.score > 0.0));
    let e3 = found.iter().find(|m| m.id == "e3").unwrap();
    assert_eq!((e3.author.as_str(), e3.timestamp), ("user", Some(ts(4))));

    // Re-adding the session with fewer events shrinks its memory (idempotent replace).
    let fewer = vec![event("e4", "agent", "Hiking is great exercise", 5)];
    assert_eq!(
        add_session(&mut c, session("app", "u", "s1", fewer.clone())).await,
        1
    );
    assert_eq!(
        add_session(&mut c, session("app", "u", "s1", fewer)).await,
        1
    );
    assert_eq!(ids(&search(&mut c, "app", "u", "hiking").await), ["e4"]);
    assert!(search(&mut c, "app", "u", "alps").await.is_empty());
}

#[tokio::test]
async fn m1_3_added_events_append_and_the_first_copy_of_an_id_wins() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    assert_eq!(
        add_events(
            &mut c,
            "app",
            "u",
            "s",
            vec![event("a", "user", "first words", 1)]
        )
        .await,
        1
    );
    let again = vec![
        event("a", "user", "rewritten words", 2),
        event("b", "user", "more words", 3),
    ];
    assert_eq!(add_events(&mut c, "app", "u", "s", again).await, 1);
    // `b` continues the session after `a`, whose words are its context.
    assert_eq!(ids(&search(&mut c, "app", "u", "first").await), ["a", "b"]);
    assert!(search(&mut c, "app", "u", "rewritten").await.is_empty());
    // Without a session id the events go to a bucket of their own.
    assert_eq!(
        add_events(
            &mut c,
            "app",
            "u",
            "",
            vec![event("a", "user", "elsewhere", 4)]
        )
        .await,
        1
    );
    assert_eq!(
        search(&mut c, "app", "u", "elsewhere").await[0].session_id,
        ""
    );
}

#[tokio::test]
async fn m1_6_deleted_ids_are_not_ingested_again() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let events = vec![
        event("keep", "user", "apple pie", 1),
        event("drop", "user", "apple tart", 2),
    ];
    add_session(&mut c, session("app", "u", "s1", events.clone())).await;
    add_events(
        &mut c,
        "app",
        "u",
        "s2",
        vec![event("drop", "user", "apple tart again", 3)],
    )
    .await;
    assert_eq!(
        delete(&mut c, "app", "u", Target::MemoryId("drop".into())).await,
        2
    );
    assert_eq!(
        delete(&mut c, "app", "u", Target::MemoryId("never".into())).await,
        0
    );

    add_session(&mut c, session("app", "u", "s1", events)).await;
    add_events(
        &mut c,
        "app",
        "u",
        "s3",
        vec![event("drop", "user", "apple crumble", 4)],
    )
    .await;
    assert_eq!(ids(&search(&mut c, "app", "u", "apple").await), ["keep"]);

    assert_eq!(
        delete(&mut c, "app", "u", Target::SessionId("s1".into())).await,
        1
    );
    assert!(search(&mut c, "app", "u", "apple").await.is_empty());

    add_events(
        &mut c,
        "app",
        "u",
        "s4",
        vec![
            event("x", "user", "banana", 5),
            event("y", "user", "banana split", 6),
        ],
    )
    .await;
    assert_eq!(delete(&mut c, "app", "u", Target::All(true)).await, 2);
    assert!(search(&mut c, "app", "u", "banana").await.is_empty());
}

#[tokio::test]
async fn memory_is_confined_to_one_app_and_user_and_names_never_alias() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    for (app, user) in [("a/b", "c"), ("a", "b/c"), ("a", "b"), ("other", "b")] {
        let text = format!("secret of {app} {user}");
        add_events(
            &mut c,
            app,
            user,
            "s",
            vec![event(&format!("{app}|{user}"), "user", &text, 1)],
        )
        .await;
    }
    for (app, user) in [("a/b", "c"), ("a", "b/c"), ("a", "b"), ("other", "b")] {
        assert_eq!(
            ids(&search(&mut c, app, user, "secret").await),
            [format!("{app}|{user}")]
        );
    }
    delete(&mut c, "a", "b", Target::All(true)).await;
    assert_eq!(search(&mut c, "a", "b/c", "secret").await.len(), 1);
    assert_eq!(search(&mut c, "a/b", "c", "secret").await.len(), 1);
}

#[tokio::test]
async fn ranking_is_bm25_with_ties_in_ingestion_order() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let events = vec![
        event("common-1", "user", "the weather is nice", 1),
        event("common-2", "user", "the weather is cold", 2),
        event("common-3", "user", "weather report today", 2),
        event("common-4", "user", "what weather tomorrow", 2),
        event("rare", "user", "the zeppelin flew over", 3),
        event("both", "user", "zeppelin weather", 4),
        event("repeat", "user", "zeppelin zeppelin zeppelin", 5),
        event("tie-a", "user", "tulips bloom", 6),
        event("tie-b", "user", "tulips bloom", 7),
    ];
    // One session each: no entry has another as context.
    for e in events {
        let id = e.id.clone();
        add_session(&mut c, session("app", "u", &id, vec![e])).await;
    }
    let found = search(&mut c, "app", "u", "zeppelin weather").await;
    assert_eq!(found[0].id, "both", "matches both terms");
    let pos = |id: &str| found.iter().position(|m| m.id == id).unwrap();
    assert!(pos("repeat") < pos("rare"), "more occurrences rank higher");
    assert!(pos("rare") < pos("common-1"), "the rarer term weighs more");
    assert!(found.windows(2).all(|w| w[0].score >= w[1].score));
    assert_eq!(
        ids(&search(&mut c, "app", "u", "tulips").await),
        ["tie-a", "tie-b"]
    );
    assert!(search(&mut c, "app", "u", "").await.is_empty());
    assert!(search(&mut c, "app", "u", " ,.!? ").await.is_empty());
}

#[tokio::test]
async fn limit_defaults_to_10_caps_at_100_and_refuses_negatives() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let events = (0..120)
        .map(|i| event(&format!("e{i}"), "user", "note about rust", i))
        .collect();
    add_events(&mut c, "app", "u", "s", events).await;
    assert_eq!(search(&mut c, "app", "u", "rust").await.len(), 10);
    for (limit, want) in [(5, 5), (100, 100), (1000, 100)] {
        let mut req = search_request("app", "u", "rust");
        req.limit = limit;
        assert_eq!(
            c.search_memory(req)
                .await
                .unwrap()
                .into_inner()
                .memories
                .len(),
            want
        );
    }
    let mut req = search_request("app", "u", "rust");
    req.limit = -1;
    let err = c.search_memory(req).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("limit"));
}

#[tokio::test]
async fn time_range_and_author_filters() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let events = vec![
        event("t10", "user", "coffee order", 10),
        event("t20", "agent", "coffee brewed", 20),
        event("t30", "user", "coffee spilled", 30),
    ];
    add_session(&mut c, session("app", "u", "s", events)).await;
    let mut req = search_request("app", "u", "coffee");
    req.after_timestamp = Some(ts(20));
    req.before_timestamp = Some(ts(30));
    assert_eq!(
        ids(&c.search_memory(req).await.unwrap().into_inner().memories),
        ["t20"]
    );
    let mut req = search_request("app", "u", "coffee");
    req.author = "user".into();
    let mut got: Vec<String> = c
        .search_memory(req)
        .await
        .unwrap()
        .into_inner()
        .memories
        .into_iter()
        .map(|m| m.id)
        .collect();
    got.sort();
    assert_eq!(got, ["t10", "t30"]);
}

#[tokio::test]
async fn multilingual_matching() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let texts = [
        ("en", "I write Python every day"),
        ("ja", "私はPythonでADKを使っています"),
        ("zh", "我的朋友叫山田太郎"),
        ("ko", "저는 서울에서 살아요"),
        ("ru", "Москва — столица России"),
        ("el", "Η Αθήνα είναι όμορφη"),
        ("fr", "Le café était délicieux"),
        ("nfd", "Cafe\u{301} au lait"),
    ];
    let events = texts
        .iter()
        .enumerate()
        .map(|(i, (id, t))| event(id, "user", t, i as i64))
        .collect::<Vec<_>>();
    // One session each: no entry has another as context.
    for e in events {
        let id = e.id.clone();
        add_session(&mut c, session("app", "u", &id, vec![e])).await;
    }
    let found = |q: &'static str| {
        let mut c = c.clone();
        async move {
            let mut got: Vec<String> = search(&mut c, "app", "u", q)
                .await
                .into_iter()
                .map(|m| m.id)
                .collect();
            got.sort();
            got
        }
    };
    assert_eq!(
        found("python").await,
        ["en", "ja"],
        "case-insensitive, Latin inside Japanese"
    );
    assert_eq!(found("ADK").await, ["ja"]);
    assert!(
        found("thon").await.is_empty(),
        "a partial ASCII word never matches"
    );
    assert_eq!(found("太郎").await, ["zh"], "CJK by substring");
    assert_eq!(found("使って").await, ["ja"]);
    assert_eq!(
        found("서울").await,
        ["ko"],
        "Korean with a particle attached"
    );
    assert_eq!(found("москва").await, ["ru"]);
    assert_eq!(found("ΑΘΉΝΑ").await, ["el"]);
    assert_eq!(found("délicieux").await, ["fr"]);
    // NFC query finds NFD text and the reverse.
    assert_eq!(found("café").await, ["fr", "nfd"]);
    assert_eq!(found("cafe\u{301}").await, ["fr", "nfd"]);
}

#[tokio::test]
async fn add_memory_assigns_ids_and_merges_metadata() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let fact = |id: &str, text: &str, metadata: &str| MemoryEntry {
        custom_metadata: metadata.into(),
        ..text_memory(id, "user", text)
    };
    let ids = c
        .add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: vec![
                fact("", "prefers tea", ""),
                fact("pet", "has a cat", r#"{"topic": "pets"}"#),
            ],
            custom_metadata: r#"{"source": "profile", "topic": "general"}"#.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .ids;
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0].len(), 36);
    assert_eq!(ids[1], "pet");
    let cat = search(&mut c, "app", "u", "cat").await;
    let metadata: serde_json::Value = serde_json::from_str(&cat[0].custom_metadata).unwrap();
    assert_eq!(metadata, json!({"source": "profile", "topic": "pets"}));

    let err = c
        .add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: vec![MemoryEntry {
                id: "empty".into(),
                ..Default::default()
            }],
            custom_metadata: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("memories[0].content"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn list_memories_pages_in_ingestion_order() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let events = (0..45)
        .map(|i| event(&format!("e{i:02}"), "user", "x", i))
        .collect();
    add_events(&mut c, "app", "u", "s", events).await;
    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let page = c
            .list_memories(ListMemoriesRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                page_size: 20,
                page_token: token,
                kind: 0,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        seen.extend(page.memories.into_iter().map(|m| m.id));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(
        seen,
        (0..45).map(|i| format!("e{i:02}")).collect::<Vec<_>>()
    );
    let err = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "other".into(),
            page_size: 20,
            page_token: "AAAA".into(),
            kind: 0,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn bad_requests_name_the_field_and_write_nothing() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let err = c
        .add_session_to_memory(AddSessionToMemoryRequest {
            source: None,
            generate: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("source"));

    let mut bad = event("ok", "user", "visible words", 1);
    bad.content.as_mut().unwrap().parts.push(Part {
        data: Some(Data::FunctionCall(adk_proto::session::v1::FunctionCall {
            args: "not json".into(),
            ..Default::default()
        })),
        ..Default::default()
    });
    let err = c
        .add_events_to_memory(AddEventsToMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            events: vec![event("fine", "user", "visible words", 0), bad],
            custom_metadata: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("events[1].content.parts[1].function_call.args"),
        "{}",
        err.message()
    );
    assert!(
        search(&mut c, "app", "u", "visible").await.is_empty(),
        "nothing written"
    );

    for (app, user) in [("", "u"), ("app", "")] {
        let err = c
            .search_memory(search_request(app, user, "x"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
    }
    let err = c
        .delete_memory(DeleteMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            target: None,
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("target"));
}

#[tokio::test]
async fn memory_survives_a_restart() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    add_session(
        &mut c,
        session(
            "app",
            "u",
            "s",
            vec![event("a", "user", "durable memory", 1)],
        ),
    )
    .await;
    delete(&mut c, "app", "u", Target::MemoryId("a".into())).await;
    add_events(
        &mut c,
        "app",
        "u",
        "s2",
        vec![event("b", "user", "durable thought", 2)],
    )
    .await;
    let srv = srv.restart().await;
    let mut c = srv.client.clone();
    assert_eq!(ids(&search(&mut c, "app", "u", "durable").await), ["b"]);
    add_session(
        &mut c,
        session(
            "app",
            "u",
            "s",
            vec![event("a", "user", "durable memory", 1)],
        ),
    )
    .await;
    assert_eq!(
        ids(&search(&mut c, "app", "u", "durable").await),
        ["b"],
        "tombstone persisted"
    );
}

#[tokio::test]
async fn concurrent_writers_and_readers() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let writers = (0..4).map(|w| {
        let mut c = srv.client.clone();
        tokio::spawn(async move {
            for i in 0..25 {
                let e = event(
                    &format!("w{w}-{i}"),
                    "user",
                    &format!("shared topic writer{w}"),
                    i,
                );
                add_events(&mut c, "app", "u", &format!("s{w}"), vec![e]).await;
            }
        })
    });
    let readers = (0..2).map(|_| {
        let mut c = srv.client.clone();
        tokio::spawn(async move {
            let mut last = 0;
            for _ in 0..25 {
                let mut req = search_request("app", "u", "shared");
                req.limit = 100;
                let n = c
                    .search_memory(req)
                    .await
                    .unwrap()
                    .into_inner()
                    .memories
                    .len();
                assert!(
                    n >= last,
                    "results never shrink while writers only add: {last} then {n}"
                );
                last = n;
            }
        })
    });
    let tasks: Vec<_> = writers.chain(readers).collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut c = srv.client.clone();
    let mut req = search_request("app", "u", "shared");
    req.limit = 100;
    assert_eq!(
        c.search_memory(req)
            .await
            .unwrap()
            .into_inner()
            .memories
            .len(),
        100
    );
    assert_eq!(search(&mut c, "app", "u", "writer3").await.len(), 10);
}

#[tokio::test]
async fn sessions_by_reference_come_from_session_svc() {
    let sessions = SessionServer::start().await;
    sessions.create("app", "u", "s1", json!({})).await;
    sessions
        .append(
            "app",
            "u",
            "s1",
            text_event("user", "My favorite project is Project Alpha."),
        )
        .await;
    sessions
        .append("app", "u", "s1", text_event("agent", "Noted!"))
        .await;
    let srv = MemoryServer::start(&format!("http://{}", sessions.addr)).await;
    let mut c = srv.client.clone();
    let by_ref = |id: &str| AddSessionToMemoryRequest {
        source: Some(Source::SessionRef(SessionRef {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: id.into(),
        })),
        generate: None,
    };
    let added = c
        .add_session_to_memory(by_ref("s1"))
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(added, 2);
    let found = search(&mut c, "app", "u", "favorite project").await;
    assert_eq!(found[0].session_id, "s1");
    assert_eq!(found[0].author, "user");

    let err = c
        .add_session_to_memory(by_ref("missing"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let orphan = MemoryServer::start(NO_SESSION_SVC).await;
    let err = orphan
        .client
        .clone()
        .add_session_to_memory(by_ref("s1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains(NO_SESSION_SVC), "{}", err.message());
}

/// A session reference makes the server read no more than a request may carry.
#[tokio::test]
async fn sessions_by_reference_are_bounded_by_the_request_limit() {
    let sessions = SessionServer::start().await;
    sessions.create("app", "u", "big", json!({})).await;
    for i in 0..8 {
        let text = format!("chunk {i} {}", "x".repeat(4000));
        sessions
            .append("app", "u", "big", text_event("user", &text))
            .await;
    }
    let srv = MemoryServer::start_with(&format!("http://{}", sessions.addr), |c| {
        c.max_request_bytes = 16 << 10;
    })
    .await;
    let err = srv
        .client
        .clone()
        .add_session_to_memory(AddSessionToMemoryRequest {
            source: Some(Source::SessionRef(SessionRef {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "big".into(),
            })),
            generate: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("session_ref"), "{}", err.message());
}

#[tokio::test]
async fn reflection_describes_every_memory_rpc() {
    use prost::Message;
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };

    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let channel = Channel::from_shared(format!("http://{}", srv.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            server_reflection_request::MessageRequest::FileContainingSymbol(
                "adk.memory.v1.MemoryService".into(),
            ),
        ),
    };
    let reply = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::once(request))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap()
        .unwrap();
    let Some(MessageResponse::FileDescriptorResponse(files)) = reply.message_response else {
        panic!("unexpected reflection reply {reply:?}");
    };
    let methods: Vec<String> = files
        .file_descriptor_proto
        .iter()
        .map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap())
        .flat_map(|file| file.service)
        .filter(|service| service.name() == "MemoryService")
        .flat_map(|service| service.method)
        .map(|method| method.name().to_owned())
        .collect();
    assert_eq!(
        methods,
        [
            "AddSessionToMemory",
            "AddEventsToMemory",
            "AddMemory",
            "SearchMemory",
            "DeleteMemory",
            "ListMemories",
            "GenerateMemories",
            "GetGenerationJob",
            "ListMemoryRevisions",
            "RollbackMemory",
            "PurgeMemories",
            "AppendMemoryStream",
            "FlushMemoryStream",
            "ListMemoryStreams",
        ]
    );
}

/// One memory RPC with `pad` as the bulk of its request.
type PaddedCall = for<'a> fn(
    &'a mut MemoryServiceClient<Channel>,
    String,
) -> futures::future::BoxFuture<'a, Result<(), tonic::Status>>;

/// Every memory RPC, each with a request whose size is mostly `pad`.
fn padded_calls() -> Vec<(&'static str, PaddedCall)> {
    use adk_proto::memory::v1::{
        generate_memories_request, AppendMemoryStreamRequest, EventList, FlushMemoryStreamRequest,
        GenerateMemoriesRequest, GetGenerationJobRequest, ListMemoryRevisionsRequest,
        ListMemoryStreamsRequest, PurgeMemoriesRequest, RollbackMemoryRequest,
    };
    vec![
        ("AddSessionToMemory", |c, pad| {
            let s = session("app", "u", "s", vec![event("e1", "user", &pad, 1)]);
            Box::pin(async move {
                c.add_session_to_memory(AddSessionToMemoryRequest {
                    source: Some(Source::Session(s)),
                    generate: None,
                })
                .await
                .map(drop)
            })
        }),
        ("AddEventsToMemory", |c, pad| {
            Box::pin(async move {
                c.add_events_to_memory(AddEventsToMemoryRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    session_id: "s".into(),
                    events: vec![event("e2", "user", &pad, 2)],
                    ..Default::default()
                })
                .await
                .map(drop)
            })
        }),
        ("AddMemory", |c, pad| {
            Box::pin(async move {
                c.add_memory(AddMemoryRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    memories: vec![text_memory("m", "user", &pad)],
                    ..Default::default()
                })
                .await
                .map(drop)
            })
        }),
        ("SearchMemory", |c, pad| {
            Box::pin(async move {
                c.search_memory(search_request("app", "u", &pad))
                    .await
                    .map(drop)
            })
        }),
        ("DeleteMemory", |c, pad| {
            Box::pin(async move {
                c.delete_memory(DeleteMemoryRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    target: Some(Target::MemoryId(pad)),
                })
                .await
                .map(drop)
            })
        }),
        ("ListMemories", |c, pad| {
            Box::pin(async move {
                c.list_memories(ListMemoriesRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    page_token: pad,
                    ..Default::default()
                })
                .await
                .map(drop)
            })
        }),
        ("GenerateMemories", |c, pad| {
            Box::pin(async move {
                let events = vec![event("e3", "user", &pad, 3)];
                c.generate_memories(GenerateMemoriesRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    source: Some(generate_memories_request::Source::Events(EventList {
                        events,
                    })),
                    options: None,
                })
                .await
                .map(drop)
            })
        }),
        ("GetGenerationJob", |c, pad| {
            Box::pin(async move {
                c.get_generation_job(GetGenerationJobRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    job_id: pad,
                })
                .await
                .map(drop)
            })
        }),
        ("ListMemoryRevisions", |c, pad| {
            Box::pin(async move {
                c.list_memory_revisions(ListMemoryRevisionsRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    memory_id: pad,
                    ..Default::default()
                })
                .await
                .map(drop)
            })
        }),
        ("RollbackMemory", |c, pad| {
            Box::pin(async move {
                c.rollback_memory(RollbackMemoryRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    memory_id: pad,
                    revision_id: "1".into(),
                })
                .await
                .map(drop)
            })
        }),
        ("PurgeMemories", |c, pad| {
            Box::pin(async move {
                c.purge_memories(PurgeMemoriesRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    author: pad,
                    ..Default::default()
                })
                .await
                .map(drop)
            })
        }),
        ("AppendMemoryStream", |c, pad| {
            Box::pin(async move {
                c.append_memory_stream(AppendMemoryStreamRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    stream_id: "s".into(),
                    events: vec![event("e3", "user", &pad, 3)],
                })
                .await
                .map(drop)
            })
        }),
        ("FlushMemoryStream", |c, pad| {
            Box::pin(async move {
                c.flush_memory_stream(FlushMemoryStreamRequest {
                    app_name: "app".into(),
                    user_id: "u".into(),
                    stream_id: pad,
                })
                .await
                .map(drop)
            })
        }),
        ("ListMemoryStreams", |c, pad| {
            Box::pin(async move {
                c.list_memory_streams(ListMemoryStreamsRequest {
                    app_name: "app".into(),
                    user_id: pad,
                })
                .await
                .map(drop)
            })
        }),
    ]
}

/// `--max-request-bytes` bounds every memory RPC, not only sessions read by reference: a request
/// over it is refused whole, before anything is written, and one under it is not refused for
/// its size.
#[tokio::test]
async fn every_memory_rpc_is_bounded_by_the_request_limit() {
    const LIMIT: usize = 16 << 10;
    let calls = padded_calls();
    let covered: Vec<String> = calls
        .iter()
        .map(|(method, _)| format!("adk.memory.v1.MemoryService/{method}"))
        .collect();
    let contract: Vec<String> = adk_tests::auth::contract_rpcs()
        .into_iter()
        .filter(|rpc| rpc.starts_with("adk.memory.v1.MemoryService/"))
        .collect();
    let mut sorted = covered.clone();
    sorted.sort();
    assert_eq!(sorted, contract, "every memory RPC has a padded call here");

    let srv = MemoryServer::start_with(NO_SESSION_SVC, |c| c.max_request_bytes = LIMIT).await;
    let mut c = srv.client.clone();
    for (method, call) in &calls {
        let Err(err) = call(&mut c, "x".repeat(LIMIT)).await else {
            panic!("{method} accepted a request over the limit");
        };
        assert_eq!(err.code(), Code::OutOfRange, "{method}: {err:?}");
        assert!(
            err.message().contains(&LIMIT.to_string()),
            "{method}: {err:?}"
        );
    }
    let listed = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.memories.is_empty(), "{:?}", listed.memories);
    for (method, call) in &calls {
        if let Err(err) = call(&mut c, "x".repeat(LIMIT / 4)).await {
            assert_ne!(err.code(), Code::OutOfRange, "{method}: {err:?}");
        }
    }
}
