//! A session store written by session-svc at format 1 (each session's own state in a tree of
//! its own), opened by this one: every session reads back exactly as before, listings keep
//! their order, and the converted sessions take new writes as any other.
//!
//! The store is a fixture (`tests/fixtures/session_v1`, written through gRPC by that version;
//! its README says how). It is a sled store whatever the environment, so it is opened in both
//! runs of the suites.

use std::path::Path;

use adk_proto::session::v1::DeleteSessionRequest;
use adk_tests::{create_request, delta_event, json, sessions_json, SessionServer};
use serde_json::Value;
use tempfile::TempDir;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/session_v1");

/// What the previous version held: `sessions.json`.
fn expected() -> Value {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join("sessions.json"))
        .expect("reads sessions.json");
    serde_json::from_str(&text).expect("sessions.json is JSON")
}

/// The `(app, user)` listings the fixture dumped, in its order.
fn listings(expected: &Value) -> Vec<(String, String)> {
    expected
        .as_array()
        .expect("an array of listings")
        .iter()
        .map(|l| {
            let field = |name: &str| l[name].as_str().expect("a string").to_owned();
            (field("app_name"), field("user_id"))
        })
        .collect()
}

/// The fixture unpacked to a temporary directory, and a server on it.
async fn converted() -> (TempDir, SessionServer) {
    let dir = TempDir::new().expect("temp dir");
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(Path::new(FIXTURE).join("sled.tar.gz"))
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("runs tar");
    assert!(status.success(), "tar unpacks sled.tar.gz: {status}");
    let server = SessionServer::start_in(dir.path()).await;
    (dir, server)
}

async fn held(server: &SessionServer, listings: &[(String, String)]) -> Value {
    let listings: Vec<(&str, &str)> = listings
        .iter()
        .map(|(app, user)| (app.as_str(), user.as_str()))
        .collect();
    sessions_json(&mut server.client.clone(), &listings).await
}

#[tokio::test]
async fn sessions_read_back_as_before_and_after_a_restart() {
    let expected = expected();
    let listings = listings(&expected);
    let (_dir, server) = converted().await;
    assert_eq!(held(&server, &listings).await, expected);
    // The conversion ran once: a second open finds the converted store and changes nothing.
    let server = server.restart().await;
    assert_eq!(held(&server, &listings).await, expected);
}

#[tokio::test]
async fn converted_sessions_take_new_writes() {
    let (_dir, server) = converted().await;
    let mut c = server.client.clone();
    // A delta replaces one key of the moved state and keeps the others.
    server
        .append(
            "fixture",
            "lena",
            "trip",
            delta_event(serde_json::json!({"days": 4})),
        )
        .await;
    let trip = server.get("fixture", "lena", "trip").await;
    assert_eq!(
        json(&trip.state),
        serde_json::json!({"city": "Porto", "days": 4, "app:theme": "light", "user:lang": "en"})
    );
    // A deleted and re-created session starts without the state it had.
    c.delete_session(DeleteSessionRequest {
        app_name: "fixture".into(),
        user_id: "lena".into(),
        session_id: "s1".into(),
    })
    .await
    .expect("delete_session");
    c.create_session(create_request("fixture", "lena", "s1", "{}"))
        .await
        .expect("create_session");
    let s1 = server.get("fixture", "lena", "s1").await;
    assert_eq!(
        json(&s1.state),
        serde_json::json!({"app:theme": "light", "user:lang": "en"})
    );
    // The other user's session of the same id kept its own.
    let omar = server.get("fixture", "omar", "trip").await;
    assert_eq!(json(&omar.state)["city"], "Bergen");
}
