//! The contract of [`SessionStore`], as tests every backend must pass: [`session_store_suite!`]
//! runs each of them on a fresh store of one backend (sled always, PostgreSQL when
//! `ADK_TEST_POSTGRES` names a database). A behaviour both stores share is tested here, once;
//! the gRPC suites in `tests/` check the rules the domain adds on top.

use std::time::{Duration, SystemTime};

use adk_proto::session::v1::{Event, Session};
use prost_types::Timestamp;
use serde_json::{json, Value};

use super::{
    Append, Changes, EventWindow, NewSession, Page, SessionKey, SessionOrder, SessionQuery,
    SessionStore,
};
use crate::{error::SessionError, state::ScopedDelta};

/// Declares one `#[tokio::test]` per contract test, each on the store `$open` gives: an async
/// expression of type `(guard, store)`, the guard kept alive during the test (a temporary
/// directory, say). With `needs_postgres` the tests are ignored unless asked for
/// (`--include-ignored`, as the PostgreSQL pass does), and `$open` fails without a database.
macro_rules! session_store_suite {
    ($open:expr $(, $needs:ident)?) => {
        $crate::store::contract::session_store_suite!(
            @tests ($($needs)?) $open;
            creates_and_gets_sessions,
            appends_in_sequence,
            a_retry_returns_the_stored_event,
            a_taken_event_id_is_refused,
            a_stale_expected_sequence_is_refused,
            state_scopes_merge,
            shared_keys_keep_the_last_write,
            lists_sessions_in_order_and_pages,
            lists_sessions_newest_first_from_an_offset_with_a_count,
            listed_sessions_carry_their_own_state,
            lists_events_in_pages,
            delete_keeps_app_and_user_state,
            the_change_feed_orders_appends_per_app,
            sweeps_expired_sessions,
            create_answers_with_the_session_even_if_it_has_expired,
            sweeping_ends_the_watches_of_expired_sessions,
            lists_the_apps_with_sessions,
            replies_with_stored_events_decode_as_the_generated_ones,
        );
    };
    (@tests () $open:expr; $($test:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let (_guard, store) = $open.await;
            $crate::store::contract::$test(store).await;
        }
    )*};
    (@tests (needs_postgres) $open:expr; $($test:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
        async fn $test() {
            let (_guard, store) = $open.await;
            $crate::store::contract::$test(store).await;
        }
    )*};
}

pub(crate) use session_store_suite;

const APP: &str = "app";

fn key_of(user_id: &str, session_id: &str) -> SessionKey {
    SessionKey {
        app_name: APP.into(),
        user_id: user_id.into(),
        session_id: session_id.into(),
    }
}

/// A session of the test user.
fn key(session_id: &str) -> SessionKey {
    key_of("user", session_id)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

/// Entries from (name, JSON value) pairs.
fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

fn new_session(key: &SessionKey, created: i64) -> NewSession {
    NewSession {
        key: key.clone(),
        create_time: at(created),
        expire_time: None,
        state: ScopedDelta::default(),
    }
}

fn event(id: &str, seconds: i64) -> Event {
    Event {
        id: id.into(),
        invocation_id: "inv".into(),
        author: "user".into(),
        timestamp: Some(at(seconds)),
        ..Default::default()
    }
}

fn append_of(id: &str, seconds: i64) -> Append {
    Append {
        event: event(id, seconds),
        timestamp_given: true,
        delta: ScopedDelta::default(),
        expected_last_sequence: None,
    }
}

// The calls below fail the test on error.

async fn create(store: &impl SessionStore, key: &SessionKey, created: i64) -> Session {
    store.create(new_session(key, created)).await.unwrap()
}

/// Appends event `id` at `seconds`; returns its sequence.
async fn append(store: &impl SessionStore, key: &SessionKey, id: &str, seconds: i64) -> u64 {
    store
        .append(key, append_of(id, seconds))
        .await
        .unwrap()
        .event
        .sequence
}

async fn get_all(store: &impl SessionStore, key: &SessionKey) -> Option<Session> {
    store.get(key, EventWindow::default()).await.unwrap()
}

fn ids(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

fn state_of(session: &Session) -> Value {
    serde_json::from_str(&session.state).unwrap()
}

/// A page of a listing in the default order, without offset or count.
async fn list_page(
    store: &impl SessionStore,
    app_name: &str,
    user_id: Option<&str>,
    page_size: usize,
    page_token: &str,
) -> crate::error::Result<Page<Session>> {
    let query = SessionQuery::page(app_name, user_id, page_size, page_token);
    Ok(store.list(query).await?.page)
}

/// Every page of a listing, following its tokens; each page holds at most `page_size` items.
async fn pages<T, F, Fut>(page_size: usize, mut read: F) -> Vec<Vec<T>>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<Page<T>>>,
{
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = read(token).await.unwrap();
        assert!(page.items.len() <= page_size);
        pages.push(page.items);
        if page.next_page_token.is_empty() {
            return pages;
        }
        token = page.next_page_token;
    }
}

pub async fn creates_and_gets_sessions<S: SessionStore>(store: S) {
    let k = key("s1");
    assert_eq!(store.get(&k, EventWindow::NONE).await.unwrap(), None);
    let created = create(&store, &k, 100).await;
    assert_eq!(
        (created.id.as_str(), created.app_name.as_str()),
        ("s1", APP)
    );
    assert_eq!(created.user_id, "user");
    assert_eq!(created.last_sequence, 0);
    assert_eq!(created.create_time, Some(at(100)));
    assert_eq!(created.last_update_time, Some(at(100)));
    assert!(created.events.is_empty());

    assert_eq!(
        store.get(&k, EventWindow::NONE).await.unwrap(),
        Some(created.clone())
    );
    let again = store.create(new_session(&k, 200)).await.unwrap_err();
    assert!(
        matches!(&again, SessionError::SessionExists { session_id } if session_id == "s1"),
        "{again:?}"
    );
    // The refused create changed nothing, and names are per user.
    assert_eq!(get_all(&store, &k).await, Some(created));
    assert_eq!(get_all(&store, &key_of("other", "s1")).await, None);
}

pub async fn appends_in_sequence<S: SessionStore>(store: S) {
    let k = key("s");
    create(&store, &k, 100).await;
    let first = store.append(&k, append_of("e1", 110)).await.unwrap();
    assert_eq!(first.event.sequence, 1);
    assert_eq!(first.last_sequence, 1);
    assert_eq!(first.last_update_time, at(110));
    assert_eq!(first.event.id, "e1");
    assert_eq!(append(&store, &k, "e2", 120).await, 2);
    assert_eq!(append(&store, &k, "e3", 130).await, 3);

    let session = get_all(&store, &k).await.unwrap();
    assert_eq!(ids(&session.events), ["e1", "e2", "e3"]);
    let sequences: Vec<u64> = session.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [1, 2, 3]);
    assert_eq!(session.last_sequence, 3);
    assert_eq!(session.last_update_time, Some(at(130)));

    let recent = EventWindow {
        num_recent: Some(2),
        after: None,
    };
    let session = store.get(&k, recent).await.unwrap().unwrap();
    assert_eq!(ids(&session.events), ["e2", "e3"]);
    let after = EventWindow {
        num_recent: None,
        after: Some(at(120)),
    };
    let session = store.get(&k, after).await.unwrap().unwrap();
    assert_eq!(ids(&session.events), ["e2", "e3"]);

    let missing = store
        .append(&key("nope"), append_of("e", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, SessionError::SessionNotFound { .. }),
        "{missing:?}"
    );
}

pub async fn a_retry_returns_the_stored_event<S: SessionStore>(store: S) {
    let k = key("s");
    create(&store, &k, 100).await;
    let first = store.append(&k, append_of("e1", 110)).await.unwrap();
    append(&store, &k, "e2", 120).await;

    let retry = store.append(&k, append_of("e1", 110)).await.unwrap();
    assert_eq!(retry.event, first.event);
    assert_eq!(retry.last_sequence, 2);
    assert_eq!(retry.change, 0);
    // A timestamp the server filled in is not compared: the retry got a new one.
    let mut untimed = append_of("e1", 999);
    untimed.timestamp_given = false;
    let retry = store.append(&k, untimed).await.unwrap();
    assert_eq!(retry.event, first.event);
    // A retried conditional append gets its event back even though the session moved on.
    let mut conditional = append_of("e1", 110);
    conditional.expected_last_sequence = Some(0);
    assert_eq!(
        store.append(&k, conditional).await.unwrap().event,
        first.event
    );

    let session = get_all(&store, &k).await.unwrap();
    assert_eq!(ids(&session.events), ["e1", "e2"]);
}

pub async fn a_taken_event_id_is_refused<S: SessionStore>(store: S) {
    let k = key("s");
    create(&store, &k, 100).await;
    append(&store, &k, "e1", 110).await;
    let mut other = append_of("e1", 110);
    other.event.author = "model".into();
    let refused = store.append(&k, other).await.unwrap_err();
    assert!(
        matches!(&refused, SessionError::EventIdTaken { event_id } if event_id == "e1"),
        "{refused:?}"
    );
    // A different timestamp is a different payload when the client gave it.
    let refused = store.append(&k, append_of("e1", 111)).await.unwrap_err();
    assert!(
        matches!(refused, SessionError::EventIdTaken { .. }),
        "{refused:?}"
    );
    // Event ids are per session.
    let k2 = key("s2");
    create(&store, &k2, 100).await;
    assert_eq!(append(&store, &k2, "e1", 110).await, 1);
    assert_eq!(get_all(&store, &k).await.unwrap().last_sequence, 1);
}

pub async fn a_stale_expected_sequence_is_refused<S: SessionStore>(store: S) {
    let k = key("s");
    create(&store, &k, 100).await;
    let mut first = append_of("e1", 110);
    first.expected_last_sequence = Some(0);
    assert_eq!(store.append(&k, first).await.unwrap().last_sequence, 1);

    let mut stale = append_of("e2", 120);
    stale.expected_last_sequence = Some(0);
    let refused = store.append(&k, stale.clone()).await.unwrap_err();
    assert!(
        matches!(
            refused,
            SessionError::Stale {
                expected: 0,
                current: 1
            }
        ),
        "{refused:?}"
    );
    assert_eq!(get_all(&store, &k).await.unwrap().last_sequence, 1);

    stale.expected_last_sequence = Some(1);
    assert_eq!(store.append(&k, stale).await.unwrap().last_sequence, 2);
}

pub async fn state_scopes_merge<S: SessionStore>(store: S) {
    let k = key("s");
    let mut new = new_session(&k, 100);
    new.state = ScopedDelta {
        app: entries(&[("a", "1")]),
        user: entries(&[("u", "\"x\"")]),
        session: entries(&[("s", "true"), ("t", "2")]),
    };
    let created = store.create(new).await.unwrap();
    let expected = json!({"s": true, "t": 2, "app:a": 1, "user:u": "x"});
    assert_eq!(state_of(&created), expected);

    let mut with_delta = append_of("e1", 110);
    with_delta.delta = ScopedDelta {
        app: entries(&[("a", "10"), ("b", "null")]),
        user: Vec::new(),
        session: entries(&[("s", "false")]),
    };
    store.append(&k, with_delta).await.unwrap();
    let session = get_all(&store, &k).await.unwrap();
    let expected = json!({"s": false, "t": 2, "app:a": 10, "app:b": null, "user:u": "x"});
    assert_eq!(state_of(&session), expected);

    // App state is shared by the app's users, user state by the user's sessions.
    let same_user = create(&store, &key("s2"), 120).await;
    assert_eq!(
        state_of(&same_user),
        json!({"app:a": 10, "app:b": null, "user:u": "x"})
    );
    let other_user = create(&store, &key_of("other", "s3"), 130).await;
    assert_eq!(state_of(&other_user), json!({"app:a": 10, "app:b": null}));
    let other_app = NewSession {
        key: SessionKey {
            app_name: "other-app".into(),
            ..key("s4")
        },
        ..new_session(&key("s4"), 140)
    };
    assert_eq!(state_of(&store.create(other_app).await.unwrap()), json!({}));

    let user = store.user_state(APP, "user").await.unwrap();
    assert_eq!(user, entries(&[("u", "\"x\"")]));
    let mut app = store.app_state(APP).await.unwrap();
    app.sort();
    assert_eq!(app, entries(&[("a", "10"), ("b", "null")]));
    assert!(store.user_state(APP, "nobody").await.unwrap().is_empty());
}

pub async fn shared_keys_keep_the_last_write<S: SessionStore>(store: S) {
    // Sessions of one user take turns writing the same `app:` and `user:` keys: each write
    // replaces the one before, whichever session made it, in every view of the state.
    let sessions = [key("s1"), key("s2"), key("s3")];
    for k in &sessions {
        create(&store, k, 100).await;
    }
    for turn in 0..9_i64 {
        let value = turn.to_string();
        let mut next = append_of(&format!("e{turn}"), 110 + turn);
        next.delta = ScopedDelta {
            app: entries(&[("k", &value)]),
            user: entries(&[("k", &value)]),
            session: Vec::new(),
        };
        let writer = &sessions[usize::try_from(turn).unwrap() % sessions.len()];
        store.append(writer, next).await.unwrap();
        for k in &sessions {
            let session = get_all(&store, k).await.unwrap();
            assert_eq!(
                state_of(&session),
                json!({"app:k": turn, "user:k": turn}),
                "{} after turn {turn}",
                k.session_id
            );
        }
    }
    let listed = list_page(&store, APP, Some("user"), 10, "").await.unwrap();
    assert_eq!(listed.items.len(), sessions.len());
    for session in &listed.items {
        assert_eq!(state_of(session), json!({"app:k": 8, "user:k": 8}));
    }
    assert_eq!(store.app_state(APP).await.unwrap(), entries(&[("k", "8")]));
    assert_eq!(
        store.user_state(APP, "user").await.unwrap(),
        entries(&[("k", "8")])
    );
}

pub async fn lists_sessions_in_order_and_pages<S: SessionStore>(store: S) {
    // Ordered by (last_update_time, user_id, id).
    create(&store, &key_of("u2", "c"), 300).await;
    create(&store, &key_of("u1", "b"), 300).await;
    create(&store, &key_of("u1", "a"), 300).await;
    create(&store, &key_of("u1", "d"), 100).await;
    let moved = key_of("u2", "e");
    create(&store, &moved, 50).await;
    // An append moves its session to its event's time.
    append(&store, &moved, "e1", 400).await;
    create(&store, &key_of("u1", "x"), 200).await;
    // Expired, not swept yet: listed nowhere.
    let gone = NewSession {
        expire_time: Some(at(150)),
        ..new_session(&key_of("u1", "expired"), 120)
    };
    store.create(gone).await.unwrap();

    let listed = |user: Option<&'static str>, page_size: usize| {
        let store = store.clone();
        async move {
            pages(page_size, |token| {
                let store = store.clone();
                async move { list_page(&store, APP, user, page_size, &token).await }
            })
            .await
        }
    };
    let names = |pages: &[Vec<Session>]| -> Vec<String> {
        pages
            .iter()
            .flatten()
            .map(|s| format!("{}/{}", s.user_id, s.id))
            .collect()
    };

    let all = listed(None, 1000).await;
    assert_eq!(
        names(&all),
        ["u1/d", "u1/x", "u1/a", "u1/b", "u2/c", "u2/e"]
    );
    assert!(all.iter().flatten().all(|s| s.events.is_empty()));
    let moved_session = all.iter().flatten().find(|s| s.id == "e").unwrap();
    assert_eq!(moved_session.last_sequence, 1);
    assert_eq!(moved_session.last_update_time, Some(at(400)));

    let paged = listed(None, 4).await;
    assert_eq!(paged[0].len(), 4);
    assert_eq!(names(&paged), names(&all));
    let paged = listed(None, 1).await;
    assert!(paged.len() >= 6);
    assert_eq!(names(&paged), names(&all));

    // A user's listing, in pages (the index) and whole (the sled store reads it otherwise).
    let u1 = listed(Some("u1"), 3).await;
    assert_eq!(names(&u1), ["u1/d", "u1/x", "u1/a", "u1/b"]);
    for page_size in [4, 1000] {
        let whole = listed(Some("u1"), page_size).await;
        assert_eq!(whole.len(), 1);
        assert_eq!(names(&whole), names(&u1));
    }
    assert_eq!(names(&listed(Some("u2"), 1000).await), ["u2/c", "u2/e"]);
    assert!(names(&listed(Some("nobody"), 3).await).is_empty());
    assert!(names(
        &pages(10, |token| {
            let store = store.clone();
            async move { list_page(&store, "other-app", None, 10, &token).await }
        })
        .await
    )
    .is_empty());
}

pub async fn lists_sessions_newest_first_from_an_offset_with_a_count<S: SessionStore>(store: S) {
    // Three sessions updated at once (300), which stay ordered by (user, id) in both orders.
    create(&store, &key_of("u2", "c"), 300).await;
    create(&store, &key_of("u1", "b"), 300).await;
    create(&store, &key_of("u1", "a"), 300).await;
    create(&store, &key_of("u1", "d"), 100).await;
    create(&store, &key_of("u2", "e"), 50).await;
    append(&store, &key_of("u2", "e"), "e1", 400).await;
    create(&store, &key_of("u1", "x"), 200).await;
    let gone = NewSession {
        expire_time: Some(at(150)),
        ..new_session(&key_of("u1", "expired"), 120)
    };
    store.create(gone).await.unwrap();

    // Every page from `offset` on, following the tokens, and the count of each page.
    let listed = |user: Option<&'static str>, order, offset, page_size| {
        let store = store.clone();
        async move {
            let (mut names, mut counts, mut token) = (Vec::new(), Vec::new(), String::new());
            loop {
                let query = SessionQuery {
                    order,
                    offset,
                    count: true,
                    ..SessionQuery::page(APP, user, page_size, &token)
                };
                let listed = store.list(query).await.unwrap();
                assert!(listed.page.items.len() <= page_size);
                names.extend(
                    listed
                        .page
                        .items
                        .iter()
                        .map(|s| format!("{}/{}", s.user_id, s.id)),
                );
                counts.push(listed.total_size);
                if listed.page.next_page_token.is_empty() {
                    return (names, counts);
                }
                token = listed.page.next_page_token;
            }
        }
    };
    let newest = ["u2/e", "u1/a", "u1/b", "u2/c", "u1/x", "u1/d"];
    // Ties keep (user, id) ascending: the oldest-first listing is not the reverse.
    let oldest = ["u1/d", "u1/x", "u1/a", "u1/b", "u2/c", "u2/e"];
    for page_size in [1, 2, 4, 1000] {
        let (names, counts) = listed(None, SessionOrder::NewestFirst, 0, page_size).await;
        assert_eq!(names, newest, "page size {page_size}");
        // The count is the whole listing's on every page, the expired session not in it.
        assert!(counts.iter().all(|&c| c == Some(6)), "{counts:?}");
        for offset in [1, 3, 6, 9] {
            let (names, _) = listed(None, SessionOrder::NewestFirst, offset, page_size).await;
            assert_eq!(
                names,
                newest[offset.min(6)..],
                "offset {offset}, size {page_size}"
            );
            let (names, _) = listed(None, SessionOrder::OldestFirst, offset, page_size).await;
            assert_eq!(
                names,
                oldest[offset.min(6)..],
                "offset {offset}, size {page_size}"
            );
        }
    }
    // A user's listing: whole (within one page) and through the index (several pages).
    let u1_newest = ["u1/a", "u1/b", "u1/x", "u1/d"];
    for page_size in [1, 2, 3, 4, 1000] {
        for offset in [0, 1, 4, 5] {
            let (names, counts) =
                listed(Some("u1"), SessionOrder::NewestFirst, offset, page_size).await;
            assert_eq!(
                names,
                u1_newest[offset.min(4)..],
                "offset {offset}, size {page_size}"
            );
            assert!(counts.iter().all(|&c| c == Some(4)), "{counts:?}");
        }
    }
    let (names, counts) = listed(Some("nobody"), SessionOrder::NewestFirst, 0, 10).await;
    assert!(names.is_empty());
    assert_eq!(counts, [Some(0)]);
    // No count unless asked for.
    let plain = store
        .list(SessionQuery::page(APP, None, 2, ""))
        .await
        .unwrap();
    assert_eq!(plain.total_size, None);
}

/// Every listing, whole or in pages, of one user or of the app, shows each session with its
/// own session state (and the app's and its user's): ids that extend one another ("s1",
/// "s10") and a session without state included.
pub async fn listed_sessions_carry_their_own_state<S: SessionStore>(store: S) {
    let ids = ["s1", "s10", "s2", "bare"];
    for (i, id) in ids.iter().enumerate() {
        let mut new = new_session(&key(id), 100 + i as i64);
        if *id != "bare" {
            new.state = ScopedDelta {
                app: entries(&[("a", "1")]),
                user: entries(&[("u", "2")]),
                session: entries(&[("id", &format!("\"{id}\"")), ("n", &i.to_string())]),
            };
        }
        store.create(new).await.unwrap();
    }
    let mut other = new_session(&key_of("other", "s1"), 90);
    other.state.session = entries(&[("id", "\"theirs\"")]);
    store.create(other).await.unwrap();

    let expected = |s: &Session| match s.id.as_str() {
        "bare" => json!({"app:a": 1, "user:u": 2}),
        _ if s.user_id == "other" => json!({"id": "theirs", "app:a": 1}),
        id => {
            let n = ids.iter().position(|x| *x == id).unwrap();
            json!({"id": id, "n": n, "app:a": 1, "user:u": 2})
        }
    };
    for (user, page_size) in [
        (Some("user"), 1000),
        (Some("user"), 3),
        (None, 1000),
        (None, 2),
    ] {
        let listed = pages(page_size, |token| {
            let store = store.clone();
            async move { list_page(&store, APP, user, page_size, &token).await }
        })
        .await;
        let sessions: Vec<&Session> = listed.iter().flatten().collect();
        assert_eq!(sessions.len(), if user.is_some() { 4 } else { 5 });
        for s in sessions {
            assert_eq!(
                state_of(s),
                expected(s),
                "{}/{} ({page_size})",
                s.user_id,
                s.id
            );
        }
    }
}

pub async fn lists_events_in_pages<S: SessionStore>(store: S) {
    let k = key("s");
    create(&store, &k, 100).await;
    for (i, id) in ["e1", "e2", "e3", "e4", "e5"].into_iter().enumerate() {
        append(&store, &k, id, 110 + i as i64).await;
    }
    let read = |after: u64, page_size: usize| {
        let (store, k) = (store.clone(), k.clone());
        async move {
            pages(page_size, |token| {
                let (store, k) = (store.clone(), k.clone());
                async move { store.list_events(&k, after, page_size, &token).await }
            })
            .await
        }
    };
    let all = read(0, 100).await;
    assert_eq!(all.len(), 1);
    assert_eq!(ids(&all[0]), ["e1", "e2", "e3", "e4", "e5"]);

    let paged = read(1, 2).await;
    assert_eq!(ids(&paged[0]), ["e2", "e3"]);
    assert_eq!(ids(&paged[1]), ["e4", "e5"]);
    let flat: Vec<Event> = paged.into_iter().flatten().collect();
    assert_eq!(ids(&flat), ["e2", "e3", "e4", "e5"]);
    let sequences: Vec<u64> = flat.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [2, 3, 4, 5]);

    let past_end = store.list_events(&k, 5, 10, "").await.unwrap();
    assert!(past_end.items.is_empty());
    assert_eq!(past_end.next_page_token, "");

    // A token belongs to its session.
    let first = store.list_events(&k, 0, 1, "").await.unwrap();
    create(&store, &key("s2"), 100).await;
    let foreign = store
        .list_events(&key("s2"), 0, 1, &first.next_page_token)
        .await
        .unwrap_err();
    assert!(
        matches!(&foreign, SessionError::InvalidArgument(e) if e.field == "page_token"),
        "{foreign:?}"
    );

    let missing = store
        .list_events(&key("nope"), 0, 10, "")
        .await
        .unwrap_err();
    assert!(
        matches!(missing, SessionError::SessionNotFound { .. }),
        "{missing:?}"
    );
}

pub async fn delete_keeps_app_and_user_state<S: SessionStore>(store: S) {
    let k = key("s");
    let mut new = new_session(&k, 100);
    new.state = ScopedDelta {
        app: entries(&[("a", "1")]),
        user: entries(&[("u", "2")]),
        session: entries(&[("s", "3")]),
    };
    store.create(new).await.unwrap();
    append(&store, &k, "e1", 110).await;

    store.delete(&k).await.unwrap();
    assert_eq!(get_all(&store, &k).await, None);
    // Deleting what is gone is a no-op.
    store.delete(&k).await.unwrap();
    store.delete(&key("never")).await.unwrap();
    assert_eq!(store.app_state(APP).await.unwrap(), entries(&[("a", "1")]));
    assert_eq!(
        store.user_state(APP, "user").await.unwrap(),
        entries(&[("u", "2")])
    );
    assert!(names_listed(&store).await.is_empty());

    // The name can be used again, and nothing of the old session comes back.
    let again = create(&store, &k, 200).await;
    assert_eq!(again.last_sequence, 0);
    assert_eq!(state_of(&again), json!({"app:a": 1, "user:u": 2}));
    assert_eq!(append(&store, &k, "e1", 210).await, 1);
    assert_eq!(ids(&get_all(&store, &k).await.unwrap().events), ["e1"]);
}

async fn names_listed(store: &impl SessionStore) -> Vec<String> {
    let page = list_page(store, APP, None, 1000, "").await.unwrap();
    page.items.into_iter().map(|s| s.id).collect()
}

pub async fn the_change_feed_orders_appends_per_app<S: SessionStore>(store: S) {
    assert!(store.changes(APP, 0, 10).await.unwrap().items.is_empty());

    let (a, b) = (key("a"), key_of("other", "b"));
    create(&store, &a, 100).await;
    create(&store, &b, 100).await;
    let mut positions = Vec::new();
    for (k, id) in [(&a, "a1"), (&b, "b1"), (&a, "a2")] {
        positions.push(store.append(k, append_of(id, 110)).await.unwrap().change);
    }
    assert!(positions.windows(2).all(|p| p[0] < p[1]), "{positions:?}");
    // A retry writes nothing to the feed.
    store.append(&a, append_of("a1", 110)).await.unwrap();

    let changes = readable_through(&store, positions[2]).await;
    assert!(changes.oldest <= positions[0]);
    assert!(changes.unreadable.is_empty());
    let seen: Vec<(u64, &str, &str, &str)> = changes
        .items
        .iter()
        .map(|c| {
            let event = c.event.as_ref().unwrap();
            (
                c.position,
                c.user_id.as_str(),
                c.session_id.as_str(),
                event.id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (positions[0], "user", "a", "a1"),
            (positions[1], "other", "b", "b1"),
            (positions[2], "user", "a", "a2")
        ]
    );
    let later = store.changes(APP, positions[0], 1).await.unwrap();
    let later: Vec<u64> = later.items.iter().map(|c| c.position).collect();
    assert_eq!(later, [positions[1]]);
    assert!(store
        .changes(APP, positions[2], 10)
        .await
        .unwrap()
        .items
        .is_empty());
    // Each app has its own feed.
    assert!(store
        .changes("other-app", 0, 10)
        .await
        .unwrap()
        .items
        .is_empty());

    // A deleted session's changes keep their positions, without their events.
    store.delete(&b).await.unwrap();
    let changes = store.changes(APP, 0, 10).await.unwrap();
    let events: Vec<(u64, Option<&str>)> = changes
        .items
        .iter()
        .map(|c| (c.position, c.event.as_ref().map(|e| e.id.as_str())))
        .collect();
    assert_eq!(
        events,
        [
            (positions[0], Some("a1")),
            (positions[1], None),
            (positions[2], Some("a2"))
        ]
    );

    // Trimming forgets changes committed before the cutoff; positions go on.
    let future = SystemTime::now() + Duration::from_secs(60);
    assert_eq!(store.trim_changes(future.into()).await.unwrap(), 3);
    let trimmed = store.changes(APP, 0, 10).await.unwrap();
    assert!(trimmed.items.is_empty());
    assert!(trimmed.oldest > positions[2]);
    let next = store.append(&a, append_of("a3", 120)).await.unwrap().change;
    assert!(next > positions[2]);
}

/// The app's changes once every position up to `position` is readable. A shared store reads
/// only below its oldest open transaction (any transaction of the database, another test's
/// say), so committed changes may stay unreadable until those end: the feed is read again
/// until they are, as a watcher does.
async fn readable_through(store: &impl SessionStore, position: u64) -> Changes {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let changes = store.changes(APP, 0, 10).await.unwrap();
        if changes.head >= position {
            return changes;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "position {position} never became readable: {changes:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn sweeps_expired_sessions<S: SessionStore>(store: S) {
    let now = SystemTime::now();
    let from_now = |seconds: u64| Timestamp::from(now + Duration::from_secs(seconds));
    let (short, long, forever) = (key("short"), key("long"), key("forever"));
    for (k, expire) in [
        (&short, Some(from_now(100))),
        (&long, Some(from_now(200))),
        (&forever, None),
    ] {
        let new = NewSession {
            expire_time: expire,
            ..new_session(k, 100)
        };
        store.create(new).await.unwrap();
    }
    // The sweep deletes by the clock it is given.
    assert!(store
        .sweep_expired(from_now(50), 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.sweep_expired(from_now(150), 10).await.unwrap(),
        std::slice::from_ref(&short)
    );
    assert!(store
        .get(&short, EventWindow::NONE)
        .await
        .unwrap()
        .is_none());
    assert!(store.get(&long, EventWindow::NONE).await.unwrap().is_some());
    assert_eq!(
        store.sweep_expired(from_now(1000), 10).await.unwrap(),
        std::slice::from_ref(&long)
    );
    assert!(store
        .sweep_expired(from_now(1000), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store.get(&long, EventWindow::NONE).await.unwrap().is_none());
    assert!(store
        .get(&forever, EventWindow::NONE)
        .await
        .unwrap()
        .is_some());
}

/// Create answers with the session it stored, even one already past its expiry when the answer
/// is made (a short ttl on a slow database): never "not found" for the session it just made.
pub async fn create_answers_with_the_session_even_if_it_has_expired<S: SessionStore>(store: S) {
    let brief = key("brief");
    let new = NewSession {
        expire_time: Some(at(150)),
        ..new_session(&brief, 100)
    };
    let created = store.create(new).await.unwrap();
    assert_eq!(created.id, "brief");
    assert_eq!(created.expire_time, Some(at(150)));
    assert!(
        store
            .get(&brief, EventWindow::NONE)
            .await
            .unwrap()
            .is_none(),
        "invisible afterwards"
    );
}

/// The sweep's part that the domain adds: watchers of a swept session are told it is gone. Run
/// at a clock given to the sweep, so the session is surely live while the watch starts.
pub async fn sweeping_ends_the_watches_of_expired_sessions<S: SessionStore>(store: S) {
    use adk_proto::session::v1::{CreateSessionRequest, WatchSessionRequest};

    use crate::sessions::{Limits, SessionChange, Sessions};

    let shutdown = adk_common::stopping::Shutdown::new();
    let sessions = Sessions::new(
        store,
        Limits {
            max_event_bytes: 1 << 20,
            change_retention: Duration::from_secs(3600),
            default_ttl: None,
        },
        shutdown.signal(),
    );
    sessions
        .create(CreateSessionRequest {
            app_name: APP.into(),
            user_id: "user".into(),
            session_id: "brief".into(),
            ttl: Some(prost_types::Duration {
                seconds: 3600,
                nanos: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut watch = sessions
        .watch_session(WatchSessionRequest {
            app_name: APP.into(),
            user_id: "user".into(),
            session_id: "brief".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let in_hours =
        |hours: u64| Timestamp::from(SystemTime::now() + Duration::from_secs(hours * 3600));
    assert_eq!(sessions.sweep_expired(crate::time::now()).await.unwrap(), 0);
    assert_eq!(sessions.sweep_expired(in_hours(2)).await.unwrap(), 1);
    // Bounded so that a watch left open fails the test instead of hanging it.
    let change = tokio::time::timeout(Duration::from_secs(30), watch.recv())
        .await
        .expect("the sweep ends the watch");
    assert_eq!(change.unwrap().unwrap(), SessionChange::Deleted);
    assert!(watch.recv().await.is_none(), "nothing follows the deletion");
}

pub(crate) async fn lists_the_apps_with_sessions(store: impl SessionStore) {
    assert!(store.apps().await.unwrap().is_empty());
    // Names that share a prefix, or extend it with bytes below and above the next app's, stay
    // apart.
    for app in ["b", "a", "a/b", "a-", "ab", "a"] {
        for user in ["u1", "u2"] {
            let key = SessionKey {
                app_name: app.into(),
                user_id: user.into(),
                session_id: format!("s-{user}"),
            };
            if store.get(&key, EventWindow::NONE).await.unwrap().is_none() {
                create(&store, &key, 1).await;
            }
        }
    }
    assert_eq!(store.apps().await.unwrap(), ["a", "a-", "a/b", "ab", "b"]);
    for user in ["u1", "u2"] {
        let key = SessionKey {
            app_name: "ab".into(),
            user_id: user.into(),
            session_id: format!("s-{user}"),
        };
        store.delete(&key).await.unwrap();
    }
    assert_eq!(store.apps().await.unwrap(), ["a", "a-", "a/b", "b"]);
}

/// An event with every field of `Event` set (nested messages included).
fn full_event(id: &str, seconds: i64) -> Event {
    use std::collections::HashMap;

    use adk_proto::session::v1::{
        part::Data, Blob, Content, EventActions, EventCompaction, FunctionCall, Part,
    };

    let text = |t: &str| Part {
        data: Some(Data::Text(t.into())),
        thought: Some(false),
        thought_signature: Some(vec![1, 2, 3]),
        extra: r#"{"video_metadata":{}}"#.into(),
    };
    Event {
        id: id.into(),
        invocation_id: "inv-full".into(),
        author: "model".into(),
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![
                text("héllo\u{0} wörld"),
                Part {
                    data: Some(Data::FunctionCall(FunctionCall {
                        id: Some("call-1".into()),
                        name: Some("lookup".into()),
                        args: r#"{"q":"x"}"#.into(),
                        will_continue: Some(true),
                        extra: "{}".into(),
                    })),
                    ..Default::default()
                },
                Part {
                    data: Some(Data::InlineData(Blob {
                        data: Some(vec![0, 255, 7]),
                        mime_type: Some("image/png".into()),
                        display_name: None,
                    })),
                    ..Default::default()
                },
            ],
        }),
        actions: Some(EventActions {
            skip_summarization: Some(true),
            state_delta: r#"{"k":1}"#.into(),
            artifact_delta: HashMap::from([("a.txt".into(), 2), ("b.png".into(), 0)]),
            transfer_to_agent: Some("helper".into()),
            escalate: Some(false),
            compaction: Some(EventCompaction {
                start_timestamp: Some(at(1)),
                end_timestamp: Some(at(2)),
                compacted_content: Some(Content {
                    role: None,
                    parts: vec![text("summary")],
                }),
            }),
            removed_state_keys: vec!["user:gone".into()],
            ..Default::default()
        }),
        branch: Some("root.child".into()),
        timestamp: Some(Timestamp {
            seconds,
            nanos: 123_456_789,
        }),
        partial: None,
        turn_complete: Some(true),
        error_code: Some("E".into()),
        error_message: Some("m".into()),
        interrupted: Some(false),
        long_running_tool_ids: vec!["call-1".into(), "call-2".into()],
        custom_metadata: r#"{"c":[1,2]}"#.into(),
        usage_metadata: r#"{"total_token_count":7}"#.into(),
        grounding_metadata: "{}".into(),
        citation_metadata: "{}".into(),
        model_version: Some("m-1".into()),
        finish_reason: Some("STOP".into()),
        sequence: 0,
        extra: r#"{"output":"x"}"#.into(),
    }
}

/// GetSession and ListEvents answer with the events' stored bytes (`grpc::reply`): a client
/// decodes those replies to exactly the `Session` and `ListEventsResponse` the generated
/// handlers build from decoded events, whatever the window, byte bound or page.
pub async fn replies_with_stored_events_decode_as_the_generated_ones<S: SessionStore>(store: S) {
    use std::sync::Arc;

    use adk_common::serve::auth::Grant;
    use adk_proto::session::v1::{
        session_service_server::SessionService, GetSessionRequest, ListEventsRequest,
        ListEventsResponse,
    };
    use prost::Message;
    use tonic::Request;

    use crate::{
        grpc::SessionGrpc,
        sessions::{Limits, Sessions},
    };

    let k = key("s");
    create(&store, &k, 100).await;
    for i in 0..5 {
        let mut append = append_of(&format!("e{i}"), 110 + i);
        if i % 2 == 0 {
            append.event = full_event(&format!("e{i}"), 110 + i);
        }
        store.append(&k, append).await.unwrap();
    }
    let shutdown = adk_common::stopping::Shutdown::new();
    let handlers = SessionGrpc::new(Arc::new(Sessions::new(
        store,
        Limits {
            max_event_bytes: 1 << 20,
            change_retention: Duration::from_secs(3600),
            default_ttl: None,
        },
        shutdown.signal(),
    )));
    fn granted<T>(message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.extensions_mut().insert(Grant::all());
        request
    }
    let get = |window: fn(&mut GetSessionRequest)| {
        let mut request = GetSessionRequest {
            app_name: APP.into(),
            user_id: "user".into(),
            session_id: "s".into(),
            ..Default::default()
        };
        window(&mut request);
        request
    };
    let gets = [
        get(|_| {}),
        get(|r| r.num_recent_events = Some(2)),
        get(|r| r.after_timestamp = Some(at(112))),
        get(|r| r.max_reply_event_bytes = 1),
    ];
    for request in gets {
        let reply = handlers
            .get_session_reply(granted(request.clone()))
            .await
            .unwrap()
            .into_inner();
        let generated = handlers
            .get_session(granted(request.clone()))
            .await
            .unwrap()
            .into_inner();
        assert!(!generated.events.is_empty(), "{request:?}");
        let decoded = Session::decode(reply.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, generated, "{request:?}");
    }

    let mut page_token = String::new();
    let mut pages = 0;
    loop {
        let request = ListEventsRequest {
            app_name: APP.into(),
            user_id: "user".into(),
            session_id: "s".into(),
            page_size: 2,
            page_token: page_token.clone(),
            ..Default::default()
        };
        let reply = handlers
            .list_events_reply(granted(request.clone()))
            .await
            .unwrap()
            .into_inner();
        let generated = handlers
            .list_events(granted(request))
            .await
            .unwrap()
            .into_inner();
        let decoded = ListEventsResponse::decode(reply.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, generated);
        pages += 1;
        page_token = generated.next_page_token;
        if page_token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
}
