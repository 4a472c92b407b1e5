//! session-svc against ADK's session rules (S0-S8 in docs/rules.md), over gRPC.

use adk_proto::session::v1::{
    part::Data, Blob, Content, DeleteSessionRequest, Event, EventActions, EventCompaction,
    FunctionCall, FunctionResponse, GetAppStateRequest, GetUserStateRequest, ListEventsRequest,
    ListSessionsRequest, ListSessionsResponse, Part, SessionOrder,
};
use adk_tests::{
    append_request, create_request, delta_event, get_request, json, text_event, ts, SessionServer,
    SyncMode,
};
use serde_json::json;
use tonic::Code;

fn list_request(app: &str, user: Option<&str>, page_size: i32, token: &str) -> ListSessionsRequest {
    ListSessionsRequest {
        app_name: app.into(),
        user_id: user.map(Into::into),
        page_size,
        page_token: token.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn s1_3_initial_state_is_split_by_scope_and_merged_on_read() {
    let srv = SessionServer::start().await;
    let created = srv
        .create(
            "app",
            "u1",
            "s1",
            json!({"app:k": 1, "user:k": 2, "temp:k": 3, "k": 4}),
        )
        .await;
    assert_eq!(
        json(&created.state),
        json!({"k": 4, "app:k": 1, "user:k": 2})
    );

    let same_user = srv.create("app", "u1", "s2", json!({})).await;
    assert_eq!(json(&same_user.state), json!({"app:k": 1, "user:k": 2}));
    let other_user = srv.create("app", "u2", "s3", json!({})).await;
    assert_eq!(json(&other_user.state), json!({"app:k": 1}));
    let other_app = srv.create("app2", "u1", "s4", json!({})).await;
    assert_eq!(json(&other_app.state), json!({}));

    assert_eq!(srv.get("app", "u1", "s1").await.state, created.state);
}

#[tokio::test]
async fn s1_1_session_ids_are_stripped_or_generated() {
    let srv = SessionServer::start().await;
    let padded = srv.create("app", "u", "  order-42\n", json!({})).await;
    assert_eq!(padded.id, "order-42");
    assert_eq!(srv.get("app", "u", " order-42 ").await.id, "order-42");

    let blank = srv.create("app", "u", "   ", json!({})).await;
    assert_eq!(blank.id.len(), 36, "a uuid4: {}", blank.id);
    let generated = srv.create("app", "u", "", json!({})).await;
    assert_ne!(generated.id, blank.id);
}

#[tokio::test]
async fn s1_2_duplicate_id_is_already_exists_but_other_users_may_reuse_it() {
    let srv = SessionServer::start().await;
    srv.create("app", "u1", "s", json!({"k": 1})).await;
    let err = srv
        .client
        .clone()
        .create_session(create_request("app", "u1", "s", r#"{"app:x": 1}"#))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(err.message(), "Session with id s already exists.");
    // The refused create wrote nothing, not even its app state.
    let app_state = srv
        .client
        .clone()
        .get_app_state(GetAppStateRequest {
            app_name: "app".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(json(&app_state.state), json!({}));

    srv.create("app", "u2", "s", json!({})).await;
    srv.create("app2", "u1", "s", json!({})).await;
    assert_eq!(
        json(&srv.get("app", "u1", "s").await.state),
        json!({"k": 1})
    );
}

#[tokio::test]
async fn s2_1_missing_session_is_not_found_and_lookup_uses_the_full_triple() {
    let srv = SessionServer::start().await;
    srv.create("app", "u1", "s1", json!({})).await;
    for (app, user, id) in [
        ("app", "u2", "s1"),
        ("app2", "u1", "s1"),
        ("app", "u1", "nope"),
    ] {
        let err = srv
            .client
            .clone()
            .get_session(get_request(app, user, id))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{app}/{user}/{id}");
    }
}

#[tokio::test]
async fn s2_3_s2_4_num_recent_events_and_inclusive_after_timestamp() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    for t in 1..=5 {
        let mut e = text_event("user", &format!("m{t}"));
        e.timestamp = Some(ts(t));
        srv.append("app", "u", "s", e).await;
    }
    let cases: [(Option<i32>, Option<i64>, &[i64]); 7] = [
        (None, None, &[1, 2, 3, 4, 5]),
        (Some(3), None, &[3, 4, 5]),
        (None, Some(4), &[4, 5]),
        (Some(3), Some(4), &[4, 5]),
        (Some(2), Some(2), &[4, 5]),
        (None, Some(50), &[]),
        (Some(0), None, &[]),
    ];
    for (n, after, want) in cases {
        let mut req = get_request("app", "u", "s");
        req.num_recent_events = n;
        req.after_timestamp = after.map(ts);
        let got = srv
            .client
            .clone()
            .get_session(req)
            .await
            .unwrap()
            .into_inner();
        let seconds: Vec<i64> = got
            .events
            .iter()
            .map(|e| e.timestamp.unwrap().seconds)
            .collect();
        assert_eq!(seconds, want, "num_recent_events={n:?} after={after:?}");
        assert_eq!(got.last_sequence, 5);
    }
    let mut req = get_request("app", "u", "s");
    req.num_recent_events = Some(10);
    assert_eq!(
        srv.client
            .clone()
            .get_session(req)
            .await
            .unwrap()
            .into_inner()
            .events
            .len(),
        5
    );
}

#[tokio::test]
async fn s2_3_last_events_of_a_10000_event_session() {
    // Durability is not under test here; periodic flushing keeps the setup quick.
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    srv.create("app", "u", "long", json!({})).await;
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let client = srv.client.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..1250 {
                let e = delta_event(json!({ format!("w{worker}"): i }));
                client
                    .clone()
                    .append_event(append_request("app", "u", "long", e))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut req = get_request("app", "u", "long");
    req.num_recent_events = Some(10);
    let got = srv
        .client
        .clone()
        .get_session(req)
        .await
        .unwrap()
        .into_inner();
    let seqs: Vec<u64> = got.events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, (9991..=10000).collect::<Vec<_>>());
    assert_eq!(got.last_sequence, 10_000);
    let state = json(&got.state);
    for w in 0..8 {
        assert_eq!(state[format!("w{w}")], json!(1249));
    }
}

#[tokio::test]
async fn s4_list_filters_by_user_merges_state_and_drops_events() {
    let srv = SessionServer::start().await;
    srv.create("app", "u1", "a", json!({"user:name": "one", "k": "a"}))
        .await;
    srv.create("app", "u2", "b", json!({"user:name": "two", "app:v": 1}))
        .await;
    srv.append("app", "u1", "a", text_event("user", "hello"))
        .await;
    srv.create("other", "u1", "c", json!({})).await;

    let all = srv
        .client
        .clone()
        .list_sessions(list_request("app", None, 0, ""))
        .await
        .unwrap();
    let all = all.into_inner().sessions;
    assert_eq!(
        all.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["b", "a"]
    );
    assert!(all.iter().all(|s| s.events.is_empty()));
    assert_eq!(
        json(&all[1].state),
        json!({"k": "a", "user:name": "one", "app:v": 1})
    );
    assert_eq!(json(&all[0].state), json!({"user:name": "two", "app:v": 1}));
    assert_eq!(all[1].last_sequence, 1);

    let u1 = srv
        .client
        .clone()
        .list_sessions(list_request("app", Some("u1"), 0, ""))
        .await;
    assert_eq!(u1.unwrap().into_inner().sessions.len(), 1);
    let empty_user = srv
        .client
        .clone()
        .list_sessions(list_request("app", Some(""), 0, ""))
        .await;
    assert!(
        empty_user.unwrap().into_inner().sessions.is_empty(),
        "S4.1: \"\" is a filter"
    );
    let unknown = srv
        .client
        .clone()
        .list_sessions(list_request("nope", None, 0, ""))
        .await;
    assert!(unknown.unwrap().into_inner().sessions.is_empty());
}

#[tokio::test]
async fn s4_4_s6_8_list_order_follows_last_update_time_even_backwards() {
    let srv = SessionServer::start().await;
    for id in ["a", "b", "c"] {
        srv.create("app", "u", id, json!({})).await;
    }
    srv.append("app", "u", "a", text_event("user", "x")).await;
    let ids = |r: adk_proto::session::v1::ListSessionsResponse| {
        r.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>()
    };
    let listed = srv
        .client
        .clone()
        .list_sessions(list_request("app", None, 0, ""))
        .await
        .unwrap();
    assert_eq!(ids(listed.into_inner()), ["b", "c", "a"]);

    // S6.8: last_update_time is the event's timestamp, even an older one.
    let mut old = text_event("user", "from the past");
    old.timestamp = Some(ts(1_000));
    let resp = srv.append("app", "u", "a", old).await;
    assert_eq!(resp.last_update_time, Some(ts(1_000)));
    assert_eq!(
        srv.get("app", "u", "a").await.last_update_time,
        Some(ts(1_000))
    );
    let listed = srv
        .client
        .clone()
        .list_sessions(list_request("app", None, 0, ""))
        .await
        .unwrap();
    assert_eq!(ids(listed.into_inner()), ["a", "b", "c"]);

    // Ties on time are ordered by user id, then session id.
    for (user, id) in [("u2", "z"), ("u1", "y"), ("u1", "x")] {
        srv.create("tie", user, id, json!({})).await;
        let mut e = text_event("user", "same time");
        e.timestamp = Some(ts(5));
        srv.append("tie", user, id, e).await;
    }
    let listed = srv
        .client
        .clone()
        .list_sessions(list_request("tie", None, 0, ""))
        .await
        .unwrap();
    assert_eq!(ids(listed.into_inner()), ["x", "y", "z"]);
}

/// ADK TypeScript's listSessions: newest first, from an offset, with the listing's size.
#[tokio::test]
async fn s4_4_newest_first_from_an_offset_with_the_total_size() {
    let srv = SessionServer::start().await;
    // s1..s4 updated at 4, 3, 3, 1 seconds: s2 and s3 tie, and stay in id order.
    for (id, second) in [("s1", 4), ("s2", 3), ("s3", 3), ("s4", 1)] {
        srv.create("app", "u", id, json!({})).await;
        let mut e = text_event("user", "hello");
        e.timestamp = Some(ts(second * 1_000));
        srv.append("app", "u", id, e).await;
    }
    srv.create("app", "other", "s5", json!({})).await;
    let list = |user: Option<&str>, order: SessionOrder, offset: i32, page_size: i32| {
        let mut client = srv.client.clone();
        let request = ListSessionsRequest {
            order: order.into(),
            offset,
            include_total_size: true,
            ..list_request("app", user, page_size, "")
        };
        async move { client.list_sessions(request).await }
    };
    let ids =
        |r: &ListSessionsResponse| r.sessions.iter().map(|s| s.id.clone()).collect::<Vec<_>>();

    let newest = list(Some("u"), SessionOrder::NewestFirst, 0, 0)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&newest), ["s1", "s2", "s3", "s4"]);
    assert_eq!(newest.total_size, Some(4));
    let page = list(Some("u"), SessionOrder::NewestFirst, 1, 2)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&page), ["s2", "s3"]);
    assert_eq!(page.total_size, Some(4));
    // The next page resumes after the token; the offset is not applied again.
    let rest = srv
        .client
        .clone()
        .list_sessions(ListSessionsRequest {
            order: SessionOrder::NewestFirst.into(),
            offset: 1,
            ..list_request("app", Some("u"), 2, &page.next_page_token)
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&rest), ["s4"]);
    assert_eq!(rest.total_size, None, "counted only when asked for");
    let oldest = list(None, SessionOrder::Unspecified, 2, 0)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&oldest), ["s3", "s1", "s5"]);
    assert_eq!(oldest.total_size, Some(5));
    let beyond = list(None, SessionOrder::OldestFirst, 9, 0)
        .await
        .unwrap()
        .into_inner();
    assert!(beyond.sessions.is_empty());
    assert_eq!(beyond.total_size, Some(5));

    let negative = list(Some("u"), SessionOrder::NewestFirst, -1, 0)
        .await
        .unwrap_err();
    assert_eq!(negative.code(), Code::InvalidArgument);
    assert!(
        negative.message().contains("offset"),
        "{}",
        negative.message()
    );
    let mut unknown = srv.client.clone();
    let unknown = unknown
        .list_sessions(ListSessionsRequest {
            order: 7,
            ..list_request("app", None, 0, "")
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::InvalidArgument);
    assert!(unknown.message().contains("order"), "{}", unknown.message());
}

#[tokio::test]
async fn s4_pagination_through_250_sessions() {
    let srv = SessionServer::start_with(|c| c.serve.sync = SyncMode::Periodic).await;
    for i in 0..250 {
        let user = if i % 2 == 0 { "even" } else { "odd" };
        srv.create("app", user, &format!("s{i:03}"), json!({"i": i}))
            .await;
    }
    for (user, page_size, want) in [(None, 20, 250), (None, 100, 250), (Some("odd"), 30, 125)] {
        let mut token = String::new();
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            let resp = srv
                .client
                .clone()
                .list_sessions(list_request("app", user, page_size, &token))
                .await
                .unwrap()
                .into_inner();
            assert!(resp.sessions.len() <= page_size as usize);
            pages += 1;
            seen.extend(
                resp.sessions
                    .into_iter()
                    .map(|s| (s.last_update_time.unwrap(), s.id)),
            );
            token = resp.next_page_token;
            if token.is_empty() {
                break;
            }
        }
        assert_eq!(seen.len(), want, "{user:?} page_size={page_size}");
        assert_eq!(pages, want.div_ceil(page_size as usize));
        let mut sorted = seen.clone();
        sorted.sort_by_key(|(t, id)| (t.seconds, t.nanos, id.clone()));
        sorted.dedup();
        assert_eq!(seen, sorted, "in order, without duplicates");
    }
    // ListSessions pages go up to 1,000 (a whole-list read is one round trip per 1,000);
    // a page size above that is served as 1,000.
    let all = srv
        .client
        .clone()
        .list_sessions(list_request("app", None, 1000, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (all.sessions.len(), all.next_page_token.as_str()),
        (250, "")
    );
    for i in 0..1001 {
        srv.create("many", "u", &format!("s{i:04}"), json!({}))
            .await;
    }
    let big = srv
        .client
        .clone()
        .list_sessions(list_request("many", None, 5000, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(big.sessions.len(), 1000);
    assert!(!big.next_page_token.is_empty());
}

#[tokio::test]
async fn s5_delete_is_idempotent_scoped_and_keeps_app_and_user_state() {
    let srv = SessionServer::start().await;
    srv.create("app", "u1", "s", json!({"app:a": 1, "user:b": 2, "c": 3}))
        .await;
    srv.create("app", "u2", "s", json!({})).await;
    srv.append("app", "u1", "s", text_event("user", "hello"))
        .await;
    let delete = |user: &str| DeleteSessionRequest {
        app_name: "app".into(),
        user_id: user.into(),
        session_id: "s".into(),
    };
    srv.client
        .clone()
        .delete_session(delete("u1"))
        .await
        .unwrap();
    srv.client
        .clone()
        .delete_session(delete("u1"))
        .await
        .unwrap();
    srv.client
        .clone()
        .delete_session(DeleteSessionRequest {
            app_name: "never".into(),
            user_id: "x".into(),
            session_id: "y".into(),
        })
        .await
        .unwrap();

    let err = srv
        .client
        .clone()
        .get_session(get_request("app", "u1", "s"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    srv.get("app", "u2", "s").await;

    // A new session of the same name starts empty, with the shared scopes intact.
    let again = srv.create("app", "u1", "s", json!({})).await;
    assert_eq!(json(&again.state), json!({"app:a": 1, "user:b": 2}));
    assert_eq!(again.last_sequence, 0);
    assert!(srv.get("app", "u1", "s").await.events.is_empty());
    let appended = srv
        .append("app", "u1", "s", text_event("user", "hello"))
        .await;
    assert_eq!(appended.last_sequence, 1, "the old event id is free again");
}

#[tokio::test]
async fn s6_1_partial_events_are_neither_stored_nor_applied() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut partial = delta_event(json!({"k": 1, "app:k": 1, "temp:k": 1}));
    partial.partial = Some(true);
    let resp = srv.append("app", "u", "s", partial.clone()).await;
    assert_eq!(resp.event, Some(partial), "answered as sent");
    assert_eq!(resp.last_sequence, 0);
    let got = srv.get("app", "u", "s").await;
    assert!(got.events.is_empty());
    assert_eq!(json(&got.state), json!({}));
}

#[tokio::test]
async fn s6_2_temp_state_is_never_stored() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let resp = srv
        .append("app", "u", "s", delta_event(json!({"temp:t": 1, "k": 2})))
        .await;
    let stored = resp.event.unwrap();
    assert_eq!(json(&stored.actions.unwrap().state_delta), json!({"k": 2}));
    let got = srv.get("app", "u", "s").await;
    assert_eq!(json(&got.state), json!({"k": 2}));
    assert_eq!(
        json(&got.events[0].actions.clone().unwrap().state_delta),
        json!({"k": 2})
    );
}

#[tokio::test]
async fn s0_5_deltas_replace_shallowly_and_null_is_stored() {
    let srv = SessionServer::start().await;
    srv.create(
        "app",
        "u",
        "s",
        json!({"d": {"a": 1, "b": 2}, "flag": true, "app:d": {"x": 1}}),
    )
    .await;
    srv.append(
        "app",
        "u",
        "s",
        delta_event(json!({"d": {"c": 3}, "app:d": {"y": 2}})),
    )
    .await;
    srv.append(
        "app",
        "u",
        "s",
        delta_event(json!({"gone": null, "user:n": null})),
    )
    .await;
    let state = json(&srv.get("app", "u", "s").await.state);
    assert_eq!(
        state,
        json!({"d": {"c": 3}, "flag": true, "gone": null, "app:d": {"y": 2}, "user:n": null})
    );
}

/// An event that removes `keys` (ADK Java's `State.REMOVED`) and sets `delta`.
fn removal_event(delta: serde_json::Value, keys: &[&str]) -> Event {
    let mut event = delta_event(delta);
    if let Some(actions) = event.actions.as_mut() {
        actions.removed_state_keys = keys.iter().map(|k| (*k).to_owned()).collect();
    }
    event
}

#[tokio::test]
async fn s0_7_removed_keys_are_gone_from_every_scope_they_name() {
    let srv = SessionServer::start().await;
    let start = json!({"k": 1, "keep": 2, "app:a": 3, "app:b": 4, "user:u": 5});
    srv.create("app", "u1", "s1", start).await;
    srv.create("app", "u1", "s2", json!({"k": "other session"}))
        .await;
    let appended = srv
        .append(
            "app",
            "u1",
            "s1",
            removal_event(
                json!({"n": 6}),
                &["k", "app:a", "user:u", "temp:t", "never-set"],
            ),
        )
        .await;
    let stored = appended.event.and_then(|e| e.actions).unwrap_or_default();
    assert_eq!(
        stored.removed_state_keys,
        ["k", "app:a", "user:u", "never-set"],
        "the stored event keeps its removals but for temp: keys"
    );
    let session = srv.get("app", "u1", "s1").await;
    assert_eq!(json(&session.state), json!({"keep": 2, "n": 6, "app:b": 4}));
    let removals = session.events[0].actions.clone().unwrap_or_default();
    assert_eq!(removals.removed_state_keys, stored.removed_state_keys);
    assert_eq!(
        json(&srv.get("app", "u1", "s2").await.state),
        json!({"k": "other session", "app:b": 4}),
        "another session keeps its own key of the same name"
    );

    // A removed key can be set again, and the shared scopes read the same everywhere.
    srv.append("app", "u1", "s2", delta_event(json!({"app:a": "back"})))
        .await;
    assert_eq!(
        json(&srv.get("app", "u1", "s1").await.state),
        json!({"keep": 2, "n": 6, "app:a": "back", "app:b": 4})
    );
    let mut client = srv.client.clone();
    let user_state = client
        .get_user_state(GetUserStateRequest {
            app_name: "app".into(),
            user_id: "u1".into(),
        })
        .await
        .expect("get_user_state")
        .into_inner();
    assert_eq!(json(&user_state.state), json!({}));
}

#[tokio::test]
async fn s0_7_a_key_both_set_and_removed_is_refused_and_nothing_is_written() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({"k": 1})).await;
    for (delta, keys) in [
        (json!({"k": 2}), vec!["k"]),
        (json!({"n": 1}), vec!["app:"]),
        (json!({"n": 1}), vec![""]),
    ] {
        let err = srv
            .client
            .clone()
            .append_event(append_request("app", "u", "s", removal_event(delta, &keys)))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{keys:?}: {err:?}");
        assert!(
            err.message().contains("removed_state_keys"),
            "names the field: {}",
            err.message()
        );
    }
    let session = srv.get("app", "u", "s").await;
    assert_eq!(json(&session.state), json!({"k": 1}));
    assert!(session.events.is_empty());
}

#[tokio::test]
async fn s6_6_scopes_are_shared_exactly_as_far_as_their_prefix_says() {
    let srv = SessionServer::start().await;
    for (user, id) in [("u1", "a"), ("u1", "b"), ("u2", "c")] {
        srv.create("app", user, id, json!({})).await;
    }
    srv.append(
        "app",
        "u1",
        "a",
        delta_event(json!({"app:x": 1, "user:y": 2, "z": 3})),
    )
    .await;
    assert_eq!(
        json(&srv.get("app", "u1", "a").await.state),
        json!({"app:x": 1, "user:y": 2, "z": 3})
    );
    assert_eq!(
        json(&srv.get("app", "u1", "b").await.state),
        json!({"app:x": 1, "user:y": 2})
    );
    assert_eq!(
        json(&srv.get("app", "u2", "c").await.state),
        json!({"app:x": 1})
    );
}

#[tokio::test]
async fn s6_4_same_event_retried_is_returned_and_not_reapplied() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut event = delta_event(json!({"app:hits": 1, "temp:t": 1}));
    event.id = "ev-1".into();
    let first = srv.append("app", "u", "s", event.clone()).await;
    srv.append("app", "u", "s", text_event("user", "later"))
        .await;

    // A retry carrying the same payload, even with a stale expected_last_sequence, gets the
    // stored event back, with the session's current last_sequence.
    let mut retry = append_request("app", "u", "s", event.clone());
    retry.expected_last_sequence = Some(0);
    let again = srv
        .client
        .clone()
        .append_event(retry)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.event, first.event);
    assert_eq!(again.last_sequence, 2);
    assert_eq!(srv.get("app", "u", "s").await.events.len(), 2);

    let mut other = event.clone();
    other.author = "someone else".into();
    let err = srv
        .client
        .clone()
        .append_event(append_request("app", "u", "s", other))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(err.message().contains("ev-1"), "{}", err.message());

    // Without a client timestamp, the server's timestamp is not part of the comparison.
    let mut untimed = text_event("user", "no clock");
    untimed.id = "ev-2".into();
    let a = srv.append("app", "u", "s", untimed.clone()).await;
    let b = srv.append("app", "u", "s", untimed).await;
    assert_eq!(a.event, b.event);
    assert_eq!(srv.get("app", "u", "s").await.last_sequence, 3);
}

#[tokio::test]
async fn s6_5_expected_last_sequence_detects_stale_writers() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let mut req = append_request("app", "u", "s", delta_event(json!({"n": 1})));
    req.expected_last_sequence = Some(0);
    let ok = srv
        .client
        .clone()
        .append_event(req)
        .await
        .unwrap()
        .into_inner();
    assert_eq!((ok.last_sequence, ok.event.unwrap().sequence), (1, 1));

    let mut stale = append_request("app", "u", "s", delta_event(json!({"n": 2})));
    stale.expected_last_sequence = Some(0);
    let err = srv.client.clone().append_event(stale).await.unwrap_err();
    assert_eq!(err.code(), Code::Aborted);
    assert!(
        err.message().contains("last_sequence is 1"),
        "{}",
        err.message()
    );
    assert_eq!(err.metadata().get("adk-last-sequence").unwrap(), "1");
    assert_eq!(
        json(&srv.get("app", "u", "s").await.state),
        json!({"n": 1}),
        "nothing applied"
    );

    // Two writers from the same snapshot: exactly one wins.
    let mut wins = 0;
    let results = futures::future::join_all((0..2).map(|i| {
        let mut client = srv.client.clone();
        async move {
            let mut req = append_request("app", "u", "s", delta_event(json!({"n": 10 + i})));
            req.expected_last_sequence = Some(1);
            client.append_event(req).await
        }
    }))
    .await;
    for r in results {
        match r {
            Ok(_) => wins += 1,
            Err(e) => assert_eq!(e.code(), Code::Aborted),
        }
    }
    assert_eq!(wins, 1);
}

#[tokio::test]
async fn s6_7_events_round_trip_with_every_field_and_exact_numbers() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    let part = |data| Part {
        data: Some(data),
        ..Default::default()
    };
    let event = Event {
        id: "ev-full".into(),
        invocation_id: "e-123".into(),
        author: "agent".into(),
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![
                Part {
                    data: Some(Data::Text("thinking".into())),
                    thought: Some(true),
                    thought_signature: Some(vec![0xfb, 0xff, 0x00]),
                    extra: r#"{"video_metadata":{"fps":2.0}}"#.into(),
                },
                part(Data::InlineData(Blob {
                    data: Some(vec![0, 1, 2, 255]),
                    mime_type: Some("image/png".into()),
                    display_name: None,
                })),
                part(Data::FunctionCall(FunctionCall {
                    id: Some("call-1".into()),
                    name: Some("lookup".into()),
                    args: r#"{"n": 9007199254740993, "f": 1.0, "nested": {"l": [1, {"x": null}]}}"#
                        .into(),
                    will_continue: None,
                    extra: String::new(),
                })),
                part(Data::FunctionResponse(FunctionResponse {
                    id: Some("call-1".into()),
                    name: Some("lookup".into()),
                    response: r#"{"result": "ok"}"#.into(),
                    will_continue: Some(false),
                    extra: r#"{"scheduling":"SILENT"}"#.into(),
                })),
            ],
        }),
        actions: Some(EventActions {
            skip_summarization: Some(false),
            state_delta: r#"{"count": 1.0, "big": 18446744073709551616}"#.into(),
            artifact_delta: [("a.png".to_owned(), 3)].into(),
            transfer_to_agent: Some("helper".into()),
            escalate: Some(true),
            requested_tool_confirmations: r#"{"call-1": {"hint": "sure?", "confirmed": false}}"#
                .into(),
            compaction: Some(EventCompaction {
                start_timestamp: Some(ts(1)),
                end_timestamp: Some(ts(2)),
                compacted_content: Some(Content {
                    role: Some("model".into()),
                    parts: vec![part(Data::Text("summary".into()))],
                }),
            }),
            end_of_agent: Some(true),
            agent_state: r#"{"step": 2}"#.into(),
            extra: r#"{"route": ["a", 1, true]}"#.into(),
            ..Default::default()
        }),
        branch: Some("root.child".into()),
        timestamp: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 500_000_000,
        }),
        partial: Some(false),
        turn_complete: Some(true),
        error_code: Some("E1".into()),
        error_message: Some("oops".into()),
        interrupted: Some(false),
        long_running_tool_ids: vec!["call-1".into(), "call-2".into()],
        custom_metadata: r#"{"trace": "abc"}"#.into(),
        usage_metadata: r#"{"prompt_token_count": 12}"#.into(),
        grounding_metadata: r#"{"web_search_queries": ["q"]}"#.into(),
        citation_metadata: r#"{"citations": []}"#.into(),
        model_version: Some("m-1".into()),
        finish_reason: Some("STOP".into()),
        sequence: 0,
        extra: r#"{"node_info": {"path": ""}, "output": 12345678901234567890.5}"#.into(),
    };
    let resp = srv.append("app", "u", "s", event.clone()).await;
    let mut expected = event;
    expected.sequence = 1;
    assert_eq!(resp.event.as_ref(), Some(&expected));
    assert_eq!(srv.get("app", "u", "s").await.events, vec![expected]);
    // Values come back as the exact text they were sent as: no 1.0 -> 1, no rounding of 2^64.
    assert_eq!(
        srv.get("app", "u", "s").await.state,
        r#"{"big":18446744073709551616,"count":1.0}"#
    );
}

#[tokio::test]
async fn s7_user_and_app_state_without_prefixes() {
    let srv = SessionServer::start().await;
    srv.create(
        "app",
        "u1",
        "s",
        json!({"app:theme": "dark", "user:profile": {"name": "A"}, "k": 1}),
    )
    .await;
    let user = srv
        .client
        .clone()
        .get_user_state(GetUserStateRequest {
            app_name: "app".into(),
            user_id: "u1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(json(&user.state), json!({"profile": {"name": "A"}}));
    let nobody = srv
        .client
        .clone()
        .get_user_state(GetUserStateRequest {
            app_name: "app".into(),
            user_id: "u2".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(json(&nobody.state), json!({}));
    let app = srv
        .client
        .clone()
        .get_app_state(GetAppStateRequest {
            app_name: "app".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(json(&app.state), json!({"theme": "dark"}));
}

#[tokio::test]
async fn list_events_pages_by_sequence() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({})).await;
    for i in 0..45 {
        srv.append("app", "u", "s", text_event("user", &format!("m{i}")))
            .await;
    }
    let list = |after: u64, page_size: i32, token: String| ListEventsRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence: after,
        page_size,
        page_token: token,
        ..Default::default()
    };
    let mut token = String::new();
    let mut seqs = Vec::new();
    loop {
        let resp = srv
            .client
            .clone()
            .list_events(list(5, 0, token))
            .await
            .unwrap()
            .into_inner();
        assert!(resp.events.len() <= 20);
        seqs.extend(resp.events.iter().map(|e| e.sequence));
        token = resp.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seqs, (6..=45).collect::<Vec<_>>());
    let tail = srv
        .client
        .clone()
        .list_events(list(45, 10, String::new()))
        .await
        .unwrap();
    assert!(tail.into_inner().events.is_empty());
    let far = srv
        .client
        .clone()
        .list_events(list(u64::MAX, 10, String::new()))
        .await
        .unwrap();
    assert!(far.into_inner().events.is_empty());
}

#[tokio::test]
async fn identifiers_never_alias_across_apps_users_and_sessions() {
    let srv = SessionServer::start().await;
    srv.create(
        "a/b",
        "c",
        "s",
        json!({"who": "a/b+c", "user:u": 1, "app:a": 1}),
    )
    .await;
    srv.create("a", "b/c", "s", json!({"who": "a+b/c"})).await;
    srv.create("a", "b", "c/s", json!({"who": "a+b+c/s"})).await;
    srv.create("ab", "x", "s", json!({})).await;
    assert_eq!(json(&srv.get("a/b", "c", "s").await.state)["who"], "a/b+c");
    assert_eq!(
        json(&srv.get("a", "b/c", "s").await.state),
        json!({"who": "a+b/c"})
    );
    assert_eq!(
        json(&srv.get("a", "b", "c/s").await.state),
        json!({"who": "a+b+c/s"})
    );
    let listed = srv
        .client
        .clone()
        .list_sessions(list_request("a", None, 0, ""))
        .await
        .unwrap();
    let mut ids: Vec<_> = listed
        .into_inner()
        .sessions
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["c/s", "s"]);
}

#[tokio::test]
async fn everything_survives_a_restart() {
    let srv = SessionServer::start().await;
    srv.create("app", "u", "s", json!({"app:a": 1, "user:b": 2, "c": 3}))
        .await;
    for i in 0..5 {
        srv.append("app", "u", "s", delta_event(json!({"c": i})))
            .await;
    }
    let before = srv.get("app", "u", "s").await;
    let srv = srv.restart().await;
    assert_eq!(srv.get("app", "u", "s").await, before);
    let resp = srv
        .append("app", "u", "s", text_event("user", "after restart"))
        .await;
    assert_eq!(resp.last_sequence, 6);
}
