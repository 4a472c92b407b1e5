//! Filters of SearchMemory and ListMemories through gRPC: each metadata operator, OR of AND
//! groups, topics, kind, author and time, checked against what the written metadata says, and
//! answered identically by the sled and PostgreSQL backends.

use adk_common::postgres::StoreLocation;
use adk_proto::memory::v1::{
    delete_memory_request::Target, memory_service_client::MemoryServiceClient,
    metadata_condition::Value, AddMemoryRequest, DeleteMemoryRequest, ListMemoriesRequest,
    MemoryEntry, MemoryFilter, MemoryKind, MetadataCondition, MetadataConditions,
    MetadataOperator as Op, SearchMemoryRequest,
};
use adk_tests::{fresh_schema, search_request, text_event, ts, MemoryServer};
use tonic::{transport::Channel, Code};

const N: usize = 600;
const COLORS: [&str; 3] = ["red", "green", "blue"];
/// The time of entry `i`'s `seen` key: 2026-01-01T00:00:00Z plus `i` hours.
const T0: i64 = 1_767_225_600;

/// What entry `i` holds, as the test's own model of it.
struct Meta {
    n: usize,
    color: &'static str,
    vip: bool,
    seen: i64,
    note: bool,
    topic: Option<&'static str>,
}

fn meta(i: usize) -> Meta {
    Meta {
        n: i % 100,
        color: COLORS[i % 3],
        vip: i.is_multiple_of(50),
        seen: T0 + 3600 * i as i64,
        note: i % 97 == 1,
        topic: match i % 10 {
            0 => Some("pets"),
            1 => Some("travel"),
            _ => None,
        },
    }
}

fn rfc3339(seconds: i64) -> String {
    humantime::format_rfc3339(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds as u64),
    )
    .to_string()
}

/// Entry `i`: its metadata as `meta(i)` says, with traps: every 7th entry stores `n` as a
/// string (a number condition must not match it), every 11th has no `color`.
fn entry(i: usize) -> MemoryEntry {
    let m = meta(i);
    let mut json = serde_json::Map::new();
    if i.is_multiple_of(7) {
        json.insert("n".into(), m.n.to_string().into());
    } else {
        json.insert("n".into(), m.n.into());
    }
    if !i.is_multiple_of(11) {
        json.insert("color".into(), m.color.into());
    }
    json.insert("vip".into(), m.vip.into());
    json.insert("seen".into(), rfc3339(m.seen).into());
    if m.note {
        json.insert("note".into(), serde_json::json!({"nested": [1, 2]}));
    }
    if let Some(topic) = m.topic {
        json.insert("topic".into(), topic.into());
    }
    let words = ["garden note", "piano note", "garden piano trip"][i % 3];
    MemoryEntry {
        id: format!("m{i:03}"),
        content: text_event("user", &format!("{words} {i}")).content,
        author: if i.is_multiple_of(4) { "alice" } else { "bob" }.into(),
        timestamp: Some(ts(T0 + i as i64)),
        custom_metadata: serde_json::Value::Object(json).to_string(),
        ..Default::default()
    }
}

/// Writes the entries `meta` describes, after other versions of some of them (rewritten in
/// place) and entries since deleted, whose metadata passes most cases: the index must follow
/// rewrites and deletions.
async fn write(c: &mut MemoryServiceClient<Channel>) {
    let stale = |i: usize, n: usize| MemoryEntry {
        custom_metadata: serde_json::json!({
            "n": n, "color": "red", "vip": true, "note": 1, "topic": "pets",
            "seen": rfc3339(T0 + 3600 * 595),
        })
        .to_string(),
        ..entry(i)
    };
    let mut first: Vec<MemoryEntry> = (0..N)
        .map(|i| if i % 13 == 6 { stale(i, 5) } else { entry(i) })
        .collect();
    first.extend((0..20).map(|i| MemoryEntry {
        id: format!("gone{i}"),
        ..stale(i, 2)
    }));
    let rewrites: Vec<MemoryEntry> = (0..N).filter(|i| i % 13 == 6).map(entry).collect();
    for batch in first.chunks(100).chain([rewrites.as_slice()]) {
        c.add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: batch.to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    for i in 0..20 {
        c.delete_memory(DeleteMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            target: Some(Target::MemoryId(format!("gone{i}"))),
        })
        .await
        .unwrap();
    }
}

fn cond(key: &str, op: Op, value: Option<Value>) -> MetadataCondition {
    MetadataCondition {
        key: key.into(),
        operator: op as i32,
        value,
    }
}

fn num(n: f64) -> Option<Value> {
    Some(Value::NumberValue(n))
}

fn text(s: &str) -> Option<Value> {
    Some(Value::StringValue(s.into()))
}

fn time(seconds: i64) -> Option<Value> {
    Some(Value::TimeValue(ts(seconds)))
}

fn any_of(groups: Vec<Vec<MetadataCondition>>) -> MemoryFilter {
    MemoryFilter {
        any_of: groups
            .into_iter()
            .map(|all_of| MetadataConditions { all_of })
            .collect(),
        topics: vec![],
    }
}

/// A listing case: the request's filter fields and the entries the model says pass.
struct Case {
    name: &'static str,
    request: ListMemoriesRequest,
    expect: fn(usize) -> bool,
}

fn number(i: usize) -> Option<usize> {
    (!i.is_multiple_of(7)).then_some(meta(i).n)
}

fn color(i: usize) -> Option<&'static str> {
    (!i.is_multiple_of(11)).then_some(meta(i).color)
}

fn cases() -> Vec<Case> {
    let list = |filter: MemoryFilter| ListMemoriesRequest {
        filter: Some(filter),
        ..Default::default()
    };
    vec![
        Case {
            name: "equal number",
            request: list(any_of(vec![vec![cond("n", Op::Equal, num(5.0))]])),
            expect: |i| number(i) == Some(5),
        },
        Case {
            name: "less",
            request: list(any_of(vec![vec![cond("n", Op::Less, num(3.0))]])),
            expect: |i| number(i).is_some_and(|n| n < 3),
        },
        Case {
            name: "greater or equal and equal string",
            request: list(any_of(vec![vec![
                cond("n", Op::GreaterOrEqual, num(97.0)),
                cond("color", Op::Equal, text("red")),
            ]])),
            expect: |i| number(i).is_some_and(|n| n >= 97) && color(i) == Some("red"),
        },
        Case {
            name: "or of ands",
            request: list(any_of(vec![
                vec![
                    cond("color", Op::Equal, text("blue")),
                    cond("vip", Op::Equal, Some(Value::BoolValue(true))),
                ],
                vec![cond("n", Op::Greater, num(98.0))],
            ])),
            expect: |i| {
                (color(i) == Some("blue") && meta(i).vip) || number(i).is_some_and(|n| n > 98)
            },
        },
        Case {
            name: "exists",
            request: list(any_of(vec![vec![cond("note", Op::Exists, None)]])),
            expect: |i| meta(i).note,
        },
        Case {
            name: "not equal (an absent key passes)",
            request: list(any_of(vec![vec![
                cond("color", Op::NotEqual, text("red")),
                cond("n", Op::LessOrEqual, num(1.0)),
            ]])),
            expect: |i| color(i) != Some("red") && number(i).is_some_and(|n| n <= 1),
        },
        Case {
            name: "a group of not equal only",
            request: list(any_of(vec![
                vec![cond("color", Op::NotEqual, text("green"))],
                vec![cond("n", Op::Equal, num(4.0))],
            ])),
            expect: |i| color(i) != Some("green") || number(i) == Some(4),
        },
        Case {
            name: "time greater",
            request: list(any_of(vec![vec![cond(
                "seen",
                Op::Greater,
                time(T0 + 3600 * 590),
            )]])),
            expect: |i| i > 590,
        },
        Case {
            name: "time less or equal, time equal",
            request: list(any_of(vec![
                vec![cond("seen", Op::LessOrEqual, time(T0 + 3600 * 3))],
                vec![cond("seen", Op::Equal, time(T0 + 3600 * 300))],
            ])),
            expect: |i| i <= 3 || i == 300,
        },
        Case {
            name: "topics with a condition",
            request: list(MemoryFilter {
                topics: vec!["pets".into(), "none".into()],
                ..any_of(vec![vec![cond("n", Op::Less, num(50.0))]])
            }),
            expect: |i| meta(i).topic == Some("pets") && number(i).is_some_and(|n| n < 50),
        },
        Case {
            name: "author and time range with a condition",
            request: ListMemoriesRequest {
                author: "alice".into(),
                after_timestamp: Some(ts(T0 + 100)),
                before_timestamp: Some(ts(T0 + 400)),
                kind: MemoryKind::Raw as i32,
                ..list(any_of(vec![vec![cond("color", Op::Equal, text("green"))]]))
            },
            expect: |i| i.is_multiple_of(4) && (100..400).contains(&i) && color(i) == Some("green"),
        },
        Case {
            name: "generated only",
            request: ListMemoriesRequest {
                kind: MemoryKind::Generated as i32,
                ..list(any_of(vec![vec![cond("n", Op::Exists, None)]]))
            },
            expect: |_| false,
        },
    ]
}

async fn list_all(
    c: &mut MemoryServiceClient<Channel>,
    request: &ListMemoriesRequest,
) -> Vec<String> {
    let (mut ids, mut token) = (Vec::new(), String::new());
    loop {
        let page = c
            .list_memories(ListMemoriesRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                page_size: 7,
                page_token: token,
                ..request.clone()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.memories.len() <= 7);
        ids.extend(page.memories.into_iter().map(|m| m.id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        token = page.next_page_token;
    }
}

/// Every case's listing and searches, checked against the model; returned for comparing
/// backends.
async fn answers(c: &mut MemoryServiceClient<Channel>) -> Vec<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for case in cases() {
        let listed = list_all(c, &case.request).await;
        let expected: Vec<String> = (0..N)
            .filter(|&i| (case.expect)(i))
            .map(|i| format!("m{i:03}"))
            .collect();
        assert_eq!(listed, expected, "{}", case.name);
        out.push(listed.into_iter().map(|id| (id, 0)).collect());

        // A search ranks among the matching entries only: with a limit, it returns the best of
        // them, as many as the limit, the same as the first ones of a search without one.
        let search = |limit| SearchMemoryRequest {
            limit,
            filter: case.request.filter.clone(),
            author: case.request.author.clone(),
            after_timestamp: case.request.after_timestamp,
            before_timestamp: case.request.before_timestamp,
            kind: case.request.kind,
            ..search_request("app", "u", "garden note")
        };
        let all = c
            .search_memory(search(100))
            .await
            .unwrap()
            .into_inner()
            .memories;
        let top = c
            .search_memory(search(3))
            .await
            .unwrap()
            .into_inner()
            .memories;
        // Every entry holds "garden" or "note".
        let matching = (0..N).filter(|&i| (case.expect)(i)).count();
        for hit in &all {
            let i: usize = hit.id[1..].parse().unwrap();
            assert!((case.expect)(i), "{}: {} does not pass", case.name, hit.id);
        }
        assert_eq!(all.len(), matching.min(100), "{}", case.name);
        let ids = |hits: &[MemoryEntry]| hits.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&top),
            ids(&all[..all.len().min(3)]),
            "{}: the limit applies after filtering",
            case.name
        );
        out.push(all.into_iter().map(|m| (m.id, m.score.to_bits())).collect());
    }
    out
}

async fn rejected(c: &mut MemoryServiceClient<Channel>, filter: MemoryFilter, field: &str) {
    let status = c
        .search_memory(SearchMemoryRequest {
            filter: Some(filter.clone()),
            ..search_request("app", "u", "garden")
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with(field), "{field}: {status:?}");
    let status = c
        .list_memories(ListMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            filter: Some(filter),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with(field), "{field}: {status:?}");
}

#[tokio::test]
async fn bad_filters_are_invalid_arguments_naming_the_field() {
    let server = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    let mut c = server.client.clone();
    write(&mut c).await;
    let ok = cond("n", Op::Exists, None);
    rejected(
        &mut c,
        any_of(vec![
            vec![ok.clone()],
            vec![ok.clone(), cond("", Op::Exists, None)],
        ]),
        "filter.any_of[1].all_of[1].key",
    )
    .await;
    rejected(
        &mut c,
        any_of(vec![vec![cond(&"k".repeat(300), Op::Exists, None)]]),
        "filter.any_of[0].all_of[0].key",
    )
    .await;
    rejected(
        &mut c,
        any_of(vec![vec![ok.clone()], vec![]]),
        "filter.any_of[1].all_of",
    )
    .await;
    rejected(
        &mut c,
        any_of(vec![vec![MetadataCondition {
            operator: 42,
            ..ok.clone()
        }]]),
        "filter.any_of[0].all_of[0].operator",
    )
    .await;
    rejected(
        &mut c,
        any_of(vec![vec![cond("n", Op::Less, text("5"))]]),
        "filter.any_of[0].all_of[0].value",
    )
    .await;
    rejected(
        &mut c,
        any_of(vec![vec![cond("n", Op::Greater, num(f64::NAN))]]),
        "filter.any_of[0].all_of[0].number_value",
    )
    .await;
    rejected(&mut c, any_of(vec![vec![ok.clone(); 51]]), "filter.any_of").await;
    rejected(
        &mut c,
        MemoryFilter {
            topics: vec![String::new()],
            ..Default::default()
        },
        "filter.topics[0]",
    )
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn filters_select_what_the_metadata_says_on_sled() {
    let server = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    let mut c = server.client.clone();
    write(&mut c).await;
    let before = answers(&mut c).await;
    // The index is kept through a restart, and through rewrites and deletions.
    let server = server.restart().await;
    let mut c = server.client.clone();
    assert_eq!(answers(&mut c).await, before);
    server.shutdown().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn both_backends_filter_identically() {
    let url = adk_tests::prerequisite::postgres();
    let sled = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    let pg = MemoryServer::start_on(
        "http://127.0.0.1:9",
        Some(StoreLocation::Postgres(fresh_schema(&url).await)),
    )
    .await;
    let mut results = Vec::new();
    for server in [&sled, &pg] {
        let mut c = server.client.clone();
        write(&mut c).await;
        results.push(answers(&mut c).await);
    }
    assert_eq!(results[0], results[1]);
}
