//! Writes the session store fixture of `tests/fixtures/session_v1` through gRPC, then lists what
//! the server holds as JSON: the data the conversion suite (`tests/tests/session_conversion.rs`)
//! expects to find, unchanged, once a newer session-svc opens the store.
//!
//! Usage: `session_fixture ENDPOINT OUT.json` against a running session-svc with an empty store
//! (see `tests/fixtures/session_v1/README.md` for the whole procedure).

use adk_proto::session::v1::{session_service_client::SessionServiceClient, DeleteSessionRequest};
use adk_tests::{append_request, create_request, delta_event, sessions_json, text_event, ts};
use serde_json::{json, Value};
use tonic::transport::Channel;

type Client = SessionServiceClient<Channel>;
type Failure = Box<dyn std::error::Error>;

/// The listings the fixture holds, as `sessions_json` lists them.
const LISTINGS: &[(&str, &str)] = &[
    ("fixture", "lena"),
    ("fixture", "omar"),
    ("fixture", "nobody"),
    ("other", "lena"),
];

async fn create(
    c: &mut Client,
    app: &str,
    user: &str,
    id: &str,
    state: Value,
) -> Result<(), Failure> {
    c.create_session(create_request(app, user, id, &state.to_string()))
        .await?;
    Ok(())
}

/// An event at `seconds`, with a text and, unless null, a state delta.
async fn append(
    c: &mut Client,
    (app, user, id): (&str, &str, &str),
    seconds: i64,
    text: &str,
    delta: Value,
) -> Result<(), Failure> {
    let mut event = if delta.is_null() {
        text_event("user", text)
    } else {
        let mut event = delta_event(delta);
        event.content = text_event("agent", text).content;
        event
    };
    event.id = format!("{id}-{seconds}");
    event.timestamp = Some(ts(seconds));
    c.append_event(append_request(app, user, id, event)).await?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let [_, endpoint, out] = args.as_slice() else {
        return Err("usage: session_fixture ENDPOINT OUT.json".into());
    };
    let mut c = Client::connect(endpoint.clone()).await?;

    // Every scope in the initial state (a temp: key, never stored), then deltas to each.
    let trip = ("fixture", "lena", "trip");
    create(
        &mut c,
        "fixture",
        "lena",
        "trip",
        json!({"city": "Lisbon", "app:theme": "dark", "user:lang": "pt", "temp:draft": 1}),
    )
    .await?;
    append(
        &mut c,
        trip,
        1_700_000_000,
        "Three days in Lisbon?",
        json!({"days": 3}),
    )
    .await?;
    append(
        &mut c,
        trip,
        1_700_000_060,
        "Porto instead.",
        json!({"city": "Porto", "user:lang": "en", "temp:x": true}),
    )
    .await?;
    append(&mut c, trip, 1_700_000_120, "Thanks!", Value::Null).await?;

    // Ids that extend one another, keys that JSON escapes, values of every JSON kind.
    create(&mut c, "fixture", "lena", "s1", json!({"n": 1})).await?;
    create(
        &mut c,
        "fixture",
        "lena",
        "s10",
        json!({"n": 10, "say \"hi\"\n": "tab\there", "list": [1, {"a": null}], "f": 1.5e300}),
    )
    .await?;
    create(&mut c, "fixture", "lena", "bare", json!({})).await?;
    // Deleted: its state must not come back.
    create(&mut c, "fixture", "lena", "gone", json!({"x": 1})).await?;
    c.delete_session(DeleteSessionRequest {
        app_name: "fixture".into(),
        user_id: "lena".into(),
        session_id: "gone".into(),
    })
    .await?;

    // The same session id for another user and in another app.
    create(&mut c, "fixture", "omar", "trip", json!({"city": "Oslo"})).await?;
    append(
        &mut c,
        ("fixture", "omar", "trip"),
        1_700_000_030,
        "Bergen, then.",
        json!({"city": "Bergen", "app:theme": "light"}),
    )
    .await?;
    create(&mut c, "other", "lena", "trip", json!({"k": [1, 2]})).await?;

    let listing = sessions_json(&mut c, LISTINGS).await;
    std::fs::write(out, serde_json::to_string_pretty(&listing)? + "\n")?;
    Ok(())
}
