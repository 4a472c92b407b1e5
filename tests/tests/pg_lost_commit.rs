//! An append whose COMMIT reached PostgreSQL but whose answer was lost: the service does not
//! run it again on its own (it cannot know whether it took effect) and answers UNAVAILABLE; the
//! client's retry with the same event id is answered with the stored event, so the event is
//! stored exactly once.
//!
//! A proxy between the service and PostgreSQL forwards everything, and when armed, cuts the
//! connection right after forwarding a `COMMIT`, before the server's answer comes back.
//!
//! Needs PostgreSQL (`ADK_TEST_POSTGRES`): ignored unless asked for (`adk_tests::prerequisite`).

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use adk_common::postgres::StoreLocation;
use adk_tests::{append_request, fresh_schema, text_event, SessionServer};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tonic::Code;

/// The simple-protocol message tokio-postgres sends to commit: `Q`, length, "COMMIT\0".
const COMMIT: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

/// The id of the event whose COMMIT is cut: the proxy cuts the COMMIT of the transaction whose
/// statements carried it, not that of another transaction (a watcher's read, say).
const EVENT_ID: &str = "lost-commit-4f1c9a";

/// Starts the proxy to `upstream`; returns its address. While `armed` is set, the first
/// COMMIT of a transaction that sent [`EVENT_ID`] is forwarded and its connection then cut
/// (and `armed` cleared).
async fn proxy(upstream: String, armed: Arc<AtomicBool>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("has an address");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&upstream)
                .await
                .expect("reaches PostgreSQL");
            tokio::spawn(relay(client, server, armed.clone()));
        }
    });
    addr
}

/// Relays one connection. Frontend messages are read whole (after the length-prefixed startup
/// message, each is a type byte and a length), so a COMMIT is seen as one message.
async fn relay(client: TcpStream, server: TcpStream, armed: Arc<AtomicBool>) {
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let swallow = Arc::new(AtomicBool::new(false));
    let answers = {
        let swallow = swallow.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n @ 1..) = server_rx.read(&mut buf).await {
                if !swallow.load(Ordering::SeqCst) && client_tx.write_all(&buf[..n]).await.is_err()
                {
                    break;
                }
            }
            // Dropping `client_tx` closes the service's side.
        })
    };
    let mut startup = [0u8; 4];
    if client_rx.read_exact(&mut startup).await.is_err() {
        return;
    }
    let mut body = vec![0u8; u32::from_be_bytes(startup) as usize - 4];
    if client_rx.read_exact(&mut body).await.is_err() {
        return;
    }
    let _ = server_tx.write_all(&startup).await;
    let _ = server_tx.write_all(&body).await;
    let mut carries_event = false;
    loop {
        let mut header = [0u8; 5];
        if client_rx.read_exact(&mut header).await.is_err() {
            break;
        }
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut message = header.to_vec();
        message.resize(1 + len, 0);
        if client_rx.read_exact(&mut message[5..]).await.is_err() {
            break;
        }
        carries_event |= message
            .windows(EVENT_ID.len())
            .any(|w| w == EVENT_ID.as_bytes());
        if message == COMMIT && carries_event && armed.swap(false, Ordering::SeqCst) {
            // Answers stop first (the service has all earlier ones: it sends COMMIT after
            // them). PostgreSQL reads the COMMIT before the end of the stream, commits, answers
            // into the void and closes; only then is the service's side closed, so the commit
            // has taken effect when the service learns of the lost connection.
            swallow.store(true, Ordering::SeqCst);
            let _ = server_tx.write_all(&message).await;
            let _ = server_tx.shutdown().await;
            let _ = answers.await;
            return;
        }
        if server_tx.write_all(&message).await.is_err() {
            break;
        }
    }
    answers.abort();
}

/// `url` with its host and port replaced by `addr`.
fn via(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let credentials = authority
        .rsplit_once('@')
        .map(|(c, _)| format!("{c}@"))
        .unwrap_or_default();
    format!("{scheme}://{credentials}{addr}/{path}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn an_append_whose_commit_answer_is_lost_is_stored_once() {
    let url = adk_tests::prerequisite::postgres();
    let config: tokio_postgres::Config = url.parse().expect("a valid connection string");
    let upstream = match (config.get_hosts().first(), config.get_ports().first()) {
        (Some(tokio_postgres::config::Host::Tcp(host)), port) => {
            format!("{host}:{}", port.copied().unwrap_or(5432))
        }
        _ => panic!("the proxy needs a TCP host in {}", adk_tests::POSTGRES_VAR),
    };
    let armed = Arc::new(AtomicBool::new(false));
    let addr = proxy(upstream, armed.clone()).await;
    let store = via(&fresh_schema(&url).await, addr);
    let server = SessionServer::start_with(|config| {
        config.store = Some(StoreLocation::Postgres(format!("{store}&sslmode=disable")));
    })
    .await;
    server.create("app", "user", "s", json!({})).await;
    let mut event = text_event("user", "hello");
    event.id = EVENT_ID.into();
    let mut client = server.client.clone();

    armed.store(true, Ordering::SeqCst);
    let lost = client
        .append_event(append_request("app", "user", "s", event.clone()))
        .await
        .expect_err("the answer to the COMMIT was lost");
    assert!(!armed.load(Ordering::SeqCst), "the proxy cut a COMMIT");
    assert_eq!(lost.code(), Code::Unavailable, "{lost:?}");

    // The COMMIT took effect, and the service did not run the append a second time.
    let session = server.get("app", "user", "s").await;
    let ids: Vec<_> = session.events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [EVENT_ID]);

    // The client's retry is recognised by its event id.
    let retried = client
        .append_event(append_request("app", "user", "s", event))
        .await
        .expect("the retry is answered")
        .into_inner();
    assert_eq!(retried.event.expect("the stored event").sequence, 1);
    assert_eq!(retried.last_sequence, 1);
    let session = server.get("app", "user", "s").await;
    assert_eq!(session.events.len(), 1);
    assert_eq!(session.last_sequence, 1);
}
