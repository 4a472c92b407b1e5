//! Writes the memory store fixture of `tests/fixtures/memory_v1` through gRPC, then lists what
//! the server holds as JSON: the data the conversion suite (`tests/tests/memory_conversion.rs`)
//! expects to find, unchanged, once a newer memory-svc opens the store.
//!
//! Usage: `memory_fixture ENDPOINT OUT.json` against a running memory-svc with an empty store
//! (see `tests/fixtures/memory_v1/README.md` for the whole procedure).

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        memory_service_client::MemoryServiceClient, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, DeleteMemoryRequest, ListMemoriesRequest, MemoryEntry,
    },
    session::v1::{part::Data, Content, Event, Part, Session},
};
use adk_tests::memory_entry_json;
use prost_types::Timestamp;
use serde_json::{json, Value};
use tonic::transport::Channel;

type Client = MemoryServiceClient<Channel>;
type Failure = Box<dyn std::error::Error>;

/// Where every entry is written: one app, two users.
const APP: &str = "fixture";
const LENA: &str = "lena";
const OMAR: &str = "omar";

/// Seconds of the first turn (2023-11-14); turns follow one minute apart.
const START: i64 = 1_700_000_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let (Some(endpoint), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: memory_fixture ENDPOINT OUT.json".into());
    };
    let mut c = MemoryServiceClient::connect(endpoint).await?;
    write(&mut c).await?;
    let listing = json!({
        "app_name": APP,
        "scopes": [
            {"user_id": LENA, "entries": list(&mut c, LENA).await?},
            {"user_id": OMAR, "entries": list(&mut c, OMAR).await?},
        ],
        "tombstones": [{"user_id": LENA, "id": "k2", "session_id": "s-kitchen"}],
    });
    std::fs::write(out, serde_json::to_string_pretty(&listing)? + "\n")?;
    Ok(())
}

/// Everything the fixture holds, in ingestion order.
async fn write(c: &mut Client) -> Result<(), Failure> {
    let turns = |session: &str, first: i64, turns: &[(&str, &str, &str)]| Session {
        id: session.into(),
        app_name: APP.into(),
        user_id: LENA.into(),
        events: turns
            .iter()
            .zip(first..)
            .map(|(&(id, author, text), minute)| event(id, author, text, START + 60 * minute))
            .collect(),
        ..Default::default()
    };
    add_session(
        c,
        turns(
            "s-weekend",
            0,
            &[
                ("w1", "Marco", "How was your weekend?"),
                (
                    "w2",
                    "Lena",
                    "I injured my knee playing football on Saturday.",
                ),
                ("w3", "Marco", "Ouch, I hope you feel better soon."),
            ],
        ),
    )
    .await?;
    add_session(
        c,
        turns(
            "s-jobs",
            10,
            &[
                ("j1", "Marco", "Did you hear back after the interview?"),
                ("j2", "Lena", "They offered it to me!"),
                ("j3", "Marco", "Congratulations, that is wonderful news."),
            ],
        ),
    )
    .await?;
    let kitchen = turns(
        "s-kitchen",
        20,
        &[
            (
                "k1",
                "Lena",
                "I cooked a big pot of lentil curry for the whole family.",
            ),
            ("k2", "Marco", "My bank PIN is 4321, please forget it."),
            ("k3", "Marco", "I'm afraid of spiders."),
        ],
    );
    add_session(c, kitchen).await?;
    c.delete_memory(DeleteMemoryRequest {
        app_name: APP.into(),
        user_id: LENA.into(),
        target: Some(Target::MemoryId("k2".into())),
    })
    .await?;
    c.add_events_to_memory(AddEventsToMemoryRequest {
        app_name: APP.into(),
        user_id: LENA.into(),
        session_id: "s-notes".into(),
        events: vec![
            event("n1", "Lena", "Москва — столица России", START + 60 * 30),
            event(
                "n2",
                "Lena",
                "私はPythonでADKを使っています",
                START + 60 * 31,
            ),
        ],
        custom_metadata: r#"{"channel": "chat"}"#.into(),
    })
    .await?;
    c.add_memory(AddMemoryRequest {
        app_name: APP.into(),
        user_id: LENA.into(),
        memories: vec![
            fact(
                "Lena",
                "garden",
                "Planted tomatoes and basil in the backyard",
                r#"{"topic": "gardening", "rating": 5}"#,
                Some(START + 60 * 40),
            ),
            // No timestamp: the entry has no time.
            fact("Lena", "tea", "Prefers tea over coffee", "", None),
        ],
        custom_metadata: r#"{"source": "profile"}"#.into(),
    })
    .await?;
    // Another user of the same app, reusing an id and a session id of the first.
    let weekend = Session {
        id: "s-weekend".into(),
        app_name: APP.into(),
        user_id: OMAR.into(),
        events: vec![event("w1", "Omar", "We sailed along the coast.", START)],
        ..Default::default()
    };
    add_session(c, weekend).await?;
    c.add_memory(AddMemoryRequest {
        app_name: APP.into(),
        user_id: OMAR.into(),
        memories: vec![fact(
            "Omar",
            "sea",
            "Grew up by the sea",
            r#"{"topic": "childhood"}"#,
            Some(START + 60),
        )],
        custom_metadata: String::new(),
    })
    .await?;
    Ok(())
}

fn event(id: &str, author: &str, text: &str, seconds: i64) -> Event {
    Event {
        id: id.into(),
        author: author.into(),
        invocation_id: "fixture".into(),
        timestamp: Some(Timestamp { seconds, nanos: 0 }),
        content: Some(text_content(
            if author == "Lena" { "user" } else { "model" },
            text,
        )),
        ..Default::default()
    }
}

fn fact(author: &str, id: &str, text: &str, metadata: &str, seconds: Option<i64>) -> MemoryEntry {
    MemoryEntry {
        id: id.into(),
        content: Some(text_content("user", text)),
        author: author.into(),
        timestamp: seconds.map(|seconds| Timestamp { seconds, nanos: 0 }),
        custom_metadata: metadata.into(),
        ..Default::default()
    }
}

fn text_content(role: &str, text: &str) -> Content {
    Content {
        role: Some(role.into()),
        parts: vec![Part {
            data: Some(Data::Text(text.into())),
            ..Default::default()
        }],
    }
}

async fn add_session(c: &mut Client, session: Session) -> Result<(), Failure> {
    c.add_session_to_memory(AddSessionToMemoryRequest {
        source: Some(Source::Session(session)),
        generate: None,
    })
    .await?;
    Ok(())
}

/// Every entry of `user`, in ingestion order, as JSON.
async fn list(c: &mut Client, user: &str) -> Result<Vec<Value>, Failure> {
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
            .await?
            .into_inner();
        entries.extend(page.memories.iter().map(memory_entry_json));
        token = page.next_page_token;
        if token.is_empty() {
            return Ok(entries);
        }
    }
}
