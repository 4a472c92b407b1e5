//! A memory store written by the previous version of memory-svc (before language-aware,
//! field-aware and context-aware ranking), opened by this one: every entry is kept exactly as
//! it was, valid from its timestamp, deleted ids stay deleted, and search ranks with the
//! current analysis.
//!
//! The stores are fixtures (`tests/fixtures/memory_v1`, written through gRPC by that version;
//! its README says how): a sled data directory, and a PostgreSQL schema dump loaded into a
//! fresh schema of the database `ADK_TEST_POSTGRES` names (those tests are ignored unless asked
//! for: `adk_tests::prerequisite`). The sled fixture is a sled store whatever the environment,
//! so the PostgreSQL pass skips its tests (`sled_`).

use std::path::Path;

use adk_common::postgres::StoreLocation;
use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, memory_service_client::MemoryServiceClient,
        AddEventsToMemoryRequest, AddSessionToMemoryRequest, ListMemoriesRequest, MemoryEntry,
        SearchMemoryRequest,
    },
    session::v1::{part::Data, Content, Event, Part, Session},
};
use adk_tests::{memory_entry_json, restore_schema, MemoryServer};
use serde_json::Value;
use tempfile::TempDir;
use tonic::transport::Channel;

/// An endpoint where nothing listens: no session is fetched by reference here.
const NO_SESSION_SVC: &str = "http://127.0.0.1:9";

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/memory_v1");

/// The schema `postgres.sql` was dumped from (see `make.sh`).
const DUMPED_SCHEMA: &str = "adk_memory_fixture_v1";

const APP: &str = "fixture";

type Client = MemoryServiceClient<Channel>;

/// What the previous version held: `entries.json`.
fn expected() -> Value {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join("entries.json"))
        .expect("reads entries.json");
    serde_json::from_str(&text).expect("entries.json is JSON")
}

/// A converted store and the server on it.
struct Converted {
    /// Keeps the unpacked sled directory while the server runs.
    _dir: Option<TempDir>,
    location: StoreLocation,
    server: MemoryServer,
}

impl Converted {
    /// The sled fixture, unpacked to a temporary directory.
    async fn sled() -> Self {
        let dir = TempDir::new().expect("temp dir");
        let store = dir.path().join("memory");
        std::fs::create_dir(&store).expect("creates the store directory");
        let status = std::process::Command::new("tar")
            .arg("-xzf")
            .arg(Path::new(FIXTURE).join("sled.tar.gz"))
            .arg("-C")
            .arg(&store)
            .status()
            .expect("runs tar");
        assert!(status.success(), "tar unpacks sled.tar.gz: {status}");
        let location = StoreLocation::Embedded(store);
        let server = MemoryServer::start_on(NO_SESSION_SVC, Some(location.clone())).await;
        Self {
            _dir: Some(dir),
            location,
            server,
        }
    }

    /// The PostgreSQL fixture, loaded into a fresh schema.
    async fn postgres() -> Self {
        let url = adk_tests::prerequisite::postgres();
        let dump = std::fs::read_to_string(Path::new(FIXTURE).join("postgres.sql"))
            .expect("reads postgres.sql");
        let location = StoreLocation::Postgres(restore_schema(&url, &dump, DUMPED_SCHEMA).await);
        let server = MemoryServer::start_on(NO_SESSION_SVC, Some(location.clone())).await;
        Self {
            _dir: None,
            location,
            server,
        }
    }

    fn client(&self) -> Client {
        self.server.client.clone()
    }

    /// Stops the server and starts a new one on the same store.
    async fn restart(self) -> Self {
        self.server.shutdown().await;
        let server = MemoryServer::start_on(NO_SESSION_SVC, Some(self.location.clone())).await;
        Self { server, ..self }
    }
}

/// Every entry of `user`, in ingestion order, as the fixture listing spells it.
async fn list(c: &mut Client, user: &str) -> Vec<Value> {
    let (mut entries, mut token) = (Vec::new(), String::new());
    loop {
        let page = c
            .list_memories(ListMemoriesRequest {
                app_name: APP.into(),
                user_id: user.into(),
                page_size: 100,
                page_token: token,
                kind: 0,
                ..Default::default()
            })
            .await
            .expect("list_memories")
            .into_inner();
        entries.extend(page.memories.iter().map(memory_entry_json));
        token = page.next_page_token;
        if token.is_empty() {
            return entries;
        }
    }
}

async fn search(c: &mut Client, user: &str, query: &str) -> Vec<MemoryEntry> {
    c.search_memory(SearchMemoryRequest {
        app_name: APP.into(),
        user_id: user.into(),
        query: query.into(),
        ..Default::default()
    })
    .await
    .expect("search_memory")
    .into_inner()
    .memories
}

async fn ids(c: &mut Client, user: &str, query: &str) -> Vec<String> {
    search(c, user, query)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect()
}

/// Every entry of every user is listed exactly as the previous version listed it, again after
/// a restart (the conversion ran once and changed nothing else).
async fn entries_are_kept(store: Converted) {
    let expected = expected();
    let scopes = expected["scopes"].as_array().expect("scopes");
    let mut c = store.client();
    for scope in scopes {
        let user = scope["user_id"].as_str().expect("user_id");
        assert_eq!(
            Value::from(list(&mut c, user).await),
            scope["entries"],
            "{user}"
        );
    }
    let store = store.restart().await;
    let mut c = store.client();
    for scope in scopes {
        let user = scope["user_id"].as_str().expect("user_id");
        assert_eq!(
            Value::from(list(&mut c, user).await),
            scope["entries"],
            "{user}"
        );
    }
}

/// Every entry of every user is valid from its timestamp (an entry without one, since ever)
/// and still valid: listed as of now, and as of its own timestamp.
async fn entries_are_valid_from_their_timestamps(store: Converted) {
    let expected = expected();
    let mut c = store.client();
    for scope in expected["scopes"].as_array().expect("scopes") {
        let user = scope["user_id"].as_str().expect("user_id");
        let listing = |as_of, include_superseded| ListMemoriesRequest {
            app_name: APP.into(),
            user_id: user.into(),
            page_size: 100,
            as_of,
            include_superseded,
            ..Default::default()
        };
        let now = c
            .list_memories(listing(None, false))
            .await
            .expect("list_memories")
            .into_inner()
            .memories;
        assert_eq!(
            now.len(),
            scope["entries"].as_array().expect("entries").len()
        );
        let every = c
            .list_memories(listing(None, true))
            .await
            .expect("list_memories")
            .into_inner()
            .memories;
        assert_eq!(every, now, "{user}: nothing is superseded");
        for m in &now {
            assert_eq!(m.valid_from, m.timestamp, "{}", m.id);
            assert_eq!(m.invalid_at, None, "{}", m.id);
            if let Some(at) = m.timestamp {
                let then = c
                    .list_memories(listing(Some(at), false))
                    .await
                    .expect("list_memories")
                    .into_inner()
                    .memories;
                assert!(then.iter().any(|e| e.id == m.id), "{} as of itself", m.id);
            }
        }
    }
}

/// Deleted ids stay deleted: neither found nor ingested again.
async fn tombstones_hold(store: Converted) {
    let expected = expected();
    let mut c = store.client();
    for tombstone in expected["tombstones"].as_array().expect("tombstones") {
        let user = tombstone["user_id"].as_str().expect("user_id");
        let id = tombstone["id"].as_str().expect("id");
        let session_id = tombstone["session_id"].as_str().expect("session_id");
        assert!(
            list(&mut c, user).await.iter().all(|e| e["id"] != id),
            "{id} is not listed"
        );
        assert!(ids(&mut c, user, "PIN 4321").await.is_empty());

        let text = |t: &str| Content {
            role: Some("model".into()),
            parts: vec![Part {
                data: Some(Data::Text(t.into())),
                ..Default::default()
            }],
        };
        let again = Event {
            id: id.into(),
            author: "Marco".into(),
            content: Some(text("My bank PIN is 4321, please forget it.")),
            ..Default::default()
        };
        let added = c
            .add_events_to_memory(AddEventsToMemoryRequest {
                app_name: APP.into(),
                user_id: user.into(),
                session_id: "elsewhere".into(),
                events: vec![again.clone()],
                custom_metadata: String::new(),
            })
            .await
            .expect("add_events_to_memory")
            .into_inner()
            .entries;
        assert_eq!(added, 0, "{id} is not ingested again");
        let kept = Event {
            id: "after-conversion".into(),
            author: "Lena".into(),
            content: Some(text("A new turn")),
            ..Default::default()
        };
        let entries = c
            .add_session_to_memory(AddSessionToMemoryRequest {
                source: Some(Source::Session(Session {
                    id: session_id.into(),
                    app_name: APP.into(),
                    user_id: user.into(),
                    events: vec![again, kept],
                    ..Default::default()
                })),
                generate: None,
            })
            .await
            .expect("add_session_to_memory")
            .into_inner()
            .entries;
        assert_eq!(
            entries, 1,
            "only the new turn of {session_id} is remembered"
        );
        assert!(ids(&mut c, user, "PIN 4321").await.is_empty());
        assert_eq!(ids(&mut c, user, "new turn").await, ["after-conversion"]);
    }
}

/// Words found before the conversion are found after it.
async fn old_matches_are_found(store: Converted) {
    let mut c = store.client();
    assert_eq!(ids(&mut c, "lena", "injured").await[0], "w2");
    // n1 and n2 are neighbours: each may also be found, lower, by the other's words.
    assert_eq!(ids(&mut c, "lena", "москва").await[0], "n1");
    assert_eq!(ids(&mut c, "lena", "使って").await[0], "n2");
    assert_eq!(ids(&mut c, "omar", "sailed").await, ["w1"]);
    assert_eq!(ids(&mut c, "omar", "sea").await, ["sea"]);
}

/// Search on the converted store ranks with the current analysis: stems, the author and
/// custom_metadata fields, and the neighbouring turns of a session; again after a restart.
async fn search_uses_the_current_analysis(store: Converted) {
    let store = {
        let mut c = store.client();
        check_current_analysis(&mut c).await;
        store.restart().await
    };
    check_current_analysis(&mut store.client()).await;
}

async fn check_current_analysis(c: &mut Client) {
    assert_eq!(
        ids(c, "lena", "cooking").await.first().map(String::as_str),
        Some("k1")
    );
    let mut marco: Vec<String> = ids(c, "lena", "Marco").await.into_iter().take(5).collect();
    marco.sort();
    assert_eq!(marco, ["j1", "j3", "k3", "w1", "w3"], "Marco's turns first");
    assert_eq!(
        ids(c, "lena", "gardening")
            .await
            .first()
            .map(String::as_str),
        Some("garden")
    );
    assert_eq!(ids(c, "omar", "childhood").await, ["sea"]);
    let hits = search(c, "lena", "interview").await;
    let reply = hits
        .iter()
        .find(|m| m.id == "j2")
        .expect("the reply j2 is found");
    let text: String = reply
        .content
        .iter()
        .flat_map(|c| &c.parts)
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "They offered it to me!");
    // The other user's memory is not reached by this user's words.
    assert!(ids(c, "omar", "interview").await.is_empty());
}

#[tokio::test]
async fn sled_entries_are_kept() {
    entries_are_kept(Converted::sled().await).await;
}

#[tokio::test]
async fn sled_entries_are_valid_from_their_timestamps() {
    entries_are_valid_from_their_timestamps(Converted::sled().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_entries_are_valid_from_their_timestamps() {
    entries_are_valid_from_their_timestamps(Converted::postgres().await).await;
}

#[tokio::test]
async fn sled_tombstones_hold() {
    tombstones_hold(Converted::sled().await).await;
}

#[tokio::test]
async fn sled_old_matches_are_found() {
    old_matches_are_found(Converted::sled().await).await;
}

#[tokio::test]
async fn sled_search_uses_the_current_analysis() {
    search_uses_the_current_analysis(Converted::sled().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_entries_are_kept() {
    entries_are_kept(Converted::postgres().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_tombstones_hold() {
    tombstones_hold(Converted::postgres().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_old_matches_are_found() {
    old_matches_are_found(Converted::postgres().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn postgres_search_uses_the_current_analysis() {
    search_uses_the_current_analysis(Converted::postgres().await).await;
}
