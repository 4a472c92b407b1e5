//! The tokens file of the real `session-svc` binary: a token given by its SHA-256 admits its
//! holder, and SIGHUP makes the server read the file again without a restart. Calls from then on
//! see the new tokens; streams opened before keep the identity they were opened with.

use std::time::{Duration, Instant};

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, watch_session_response::Change,
    CreateSessionRequest, ListSessionsRequest, WatchSessionRequest,
};
use adk_tests::{append_request, spawn_binary_with, text_event};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{transport::Channel, Code, Request, Status};

const FIRST: &str = "first-token-for-the-reload-test";
const SECOND: &str = "second-token-for-the-reload-test";

/// `printf %s TOKEN | sha256sum`, as the documentation tells operators to write one.
fn sha256_hex(token: &str) -> String {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"printf %s "$0" | sha256sum"#)
        .arg(token)
        .output()
        .expect("sha256sum runs");
    let text = String::from_utf8(output.stdout).expect("hex output");
    text.split_whitespace().next().expect("a hash").to_owned()
}

fn with_token<T>(token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    request
}

async fn list(client: &mut SessionServiceClient<Channel>, token: &str) -> Result<(), Status> {
    client
        .list_sessions(with_token(
            token,
            ListSessionsRequest {
                app_name: "app".into(),
                user_id: Some("u".into()),
                ..Default::default()
            },
        ))
        .await
        .map(|_| ())
}

#[tokio::test]
async fn hashed_tokens_and_reload_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(
        &tokens,
        format!(
            r#"{{"tokens": [{{"name": "first", "token_sha256": "{}", "apps": ["app"]}}]}}"#,
            sha256_hex(FIRST)
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let tokens_flag = format!("--tokens-file={}", tokens.display());
    let (server, channel) = spawn_binary_with(
        env!("CARGO_BIN_EXE_session-svc"),
        &data,
        &[tokens_flag.as_str()],
    )
    .await;
    let mut client = SessionServiceClient::new(channel);

    // The hashed token admits its holder; the hash itself is no token.
    assert_eq!(
        list(&mut client, &sha256_hex(FIRST))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    client
        .create_session(with_token(
            FIRST,
            CreateSessionRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();

    // Streams opened with the first token, before the reload.
    let mut watch = client
        .watch_session(with_token(
            FIRST,
            WatchSessionRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                session_id: "s".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let (appends, requests) = tokio::sync::mpsc::channel(4);
    let mut replies = client
        .append_events(with_token(FIRST, ReceiverStream::new(requests)))
        .await
        .unwrap()
        .into_inner();

    // The file now names only the second token; SIGHUP reloads it.
    std::fs::write(
        &tokens,
        format!(r#"{{"tokens": [{{"name": "second", "token": "{SECOND}", "apps": ["app"]}}]}}"#),
    )
    .unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    // The signal is handled asynchronously: wait until the new token is in force.
    let deadline = Instant::now() + Duration::from_secs(10);
    while list(&mut client, SECOND).await.is_err() {
        assert!(Instant::now() < deadline, "the new token is never accepted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        list(&mut client, FIRST).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    // The streams opened before keep their identity: an append through the old stream succeeds
    // and reaches the old watcher.
    appends
        .send(append_request(
            "app",
            "u",
            "s",
            text_event("model", "after"),
        ))
        .await
        .unwrap();
    let reply = replies.message().await.unwrap().expect("a reply");
    assert_eq!((reply.code, reply.last_sequence), (0, 1), "{reply:?}");
    let change = watch.message().await.unwrap().expect("a change");
    let Some(Change::Event(event)) = change.change else {
        panic!("unexpected change {change:?}");
    };
    assert_eq!(event.sequence, 1);
}
