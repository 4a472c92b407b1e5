//! What an operator relies on: token authentication scoped to apps and users, TLS, graceful
//! shutdown, session expiry, and the Prometheus endpoint.

use std::time::Duration;

use adk_proto::{
    memory::v1::memory_service_client::MemoryServiceClient,
    session::v1::{
        session_service_client::SessionServiceClient, watch_session_response::Change,
        CreateSessionRequest, GetAppStateRequest, ListSessionsRequest, WatchEventsRequest,
    },
};
use adk_tests::{
    append_request, auth::Bearer, create_request, get_request, json, sample, scrape,
    search_request, text_event, watch_request, SessionServer,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
    Code, Status,
};

const TOKENS: &str = r#"{"tokens": [
    {"name": "app-a", "token": "token-for-app-a", "apps": ["a"]},
    {"name": "alice", "token": "token-for-alice", "apps": ["a"], "users": ["alice"]}
]}"#;

async fn client_with_token(
    addr: std::net::SocketAddr,
    token: Option<&'static str>,
) -> SessionServiceClient<InterceptedService<Channel, Bearer>> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    SessionServiceClient::with_interceptor(channel, Bearer(token))
}

/// A session with app state, which every token that sees the app may read.
fn create(app: &str, user: &str, id: &str) -> CreateSessionRequest {
    create_request(app, user, id, r#"{"app:shared": 1}"#)
}

#[tokio::test]
async fn tokens_confine_callers_to_their_apps_and_users() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, TOKENS).unwrap();
    let tokens_for_memory = tokens.clone();
    let srv = SessionServer::start_with(|c| c.serve.tokens_file = Some(tokens)).await;

    let mut anonymous = client_with_token(srv.addr, None).await;
    let err = anonymous
        .create_session(create("a", "alice", "s"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut forged = client_with_token(srv.addr, Some("not-a-real-token")).await;
    assert_eq!(
        forged
            .create_session(create("a", "alice", "s"))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );

    let mut app_a = client_with_token(srv.addr, Some("token-for-app-a")).await;
    app_a.create_session(create("a", "bob", "s")).await.unwrap();
    // Everything about app b is out of reach: write, read, list, watch, stream.
    let denied = |r: Result<tonic::Response<_>, Status>| {
        let err = r.map(|_: tonic::Response<()>| ()).unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{}", err.message());
    };
    denied(
        app_a
            .create_session(create("b", "bob", "s"))
            .await
            .map(|r| r.map(|_| ())),
    );
    let get_b = get_request("b", "bob", "s");
    denied(app_a.get_session(get_b).await.map(|r| r.map(|_| ())));
    let list_b = ListSessionsRequest {
        app_name: "b".into(),
        ..Default::default()
    };
    denied(app_a.list_sessions(list_b).await.map(|r| r.map(|_| ())));
    denied(
        app_a
            .get_app_state(GetAppStateRequest {
                app_name: "b".into(),
            })
            .await
            .map(|r| r.map(|_| ())),
    );
    let watch_b = watch_request("b", "bob", "s");
    denied(app_a.watch_session(watch_b).await.map(|r| r.map(|_| ())));
    let feed_b = WatchEventsRequest {
        app_name: "b".into(),
        ..Default::default()
    };
    denied(app_a.watch_events(feed_b).await.map(|r| r.map(|_| ())));
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let mut responses = app_a
        .append_events(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(append_request(
        "b",
        "bob",
        "s",
        text_event("user", "sneaky"),
    ))
    .await
    .unwrap();
    tx.send(append_request("a", "bob", "s", text_event("user", "fine")))
        .await
        .unwrap();
    assert_eq!(
        responses.message().await.unwrap().unwrap().code,
        Code::PermissionDenied as i32
    );
    assert_eq!(responses.message().await.unwrap().unwrap().code, 0);

    // A token limited to one user: that user only, and no listing across users.
    let mut alice = client_with_token(srv.addr, Some("token-for-alice")).await;
    alice
        .create_session(create("a", "alice", "mine"))
        .await
        .unwrap();
    denied(
        alice
            .create_session(create("a", "bob", "theirs"))
            .await
            .map(|r| r.map(|_| ())),
    );
    let list_all = ListSessionsRequest {
        app_name: "a".into(),
        ..Default::default()
    };
    denied(alice.list_sessions(list_all).await.map(|r| r.map(|_| ())));
    let list_mine = ListSessionsRequest {
        app_name: "a".into(),
        user_id: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(
        alice
            .list_sessions(list_mine)
            .await
            .unwrap()
            .into_inner()
            .sessions
            .len(),
        1
    );
    let app_state = alice
        .get_app_state(GetAppStateRequest {
            app_name: "a".into(),
        })
        .await
        .unwrap();
    assert_eq!(json(&app_state.into_inner().state), json!({"shared": 1}));

    // memory-svc enforces the same file.
    let memory = {
        let dir = tempfile::tempdir().unwrap();
        let mut config = memory_svc::config::Config::ephemeral(
            dir.path().to_owned(),
            format!("http://{}", srv.addr),
        );
        config.serve.tokens_file = Some(tokens_for_memory);
        (memory_svc::server::start(config).await.unwrap(), dir)
    };
    let channel = Channel::from_shared(format!("http://{}", memory.0.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let search = |app: &str| search_request(app, "bob", "x");
    let mut plain = MemoryServiceClient::new(channel.clone());
    assert_eq!(
        plain.search_memory(search("a")).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut with_token =
        MemoryServiceClient::with_interceptor(channel, Bearer(Some("token-for-app-a")));
    with_token.search_memory(search("a")).await.unwrap();
    assert_eq!(
        with_token
            .search_memory(search("b"))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    memory.0.shutdown().await.unwrap();
}

struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

/// A CA and a certificate for `localhost` signed by it.
fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

async fn tls_channel(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    identity: Option<&Pki>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some(id) = identity {
        tls = tls.identity(Identity::from_pem(&id.cert_pem, &id.key_pem));
    }
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

#[tokio::test]
async fn tls_and_mutual_tls() {
    let server_pki = pki();
    let client_pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (cert, key) = (
        write("cert.pem", &server_pki.cert_pem),
        write("key.pem", &server_pki.key_pem),
    );
    let client_ca = write("client-ca.pem", &client_pki.ca_pem);
    let srv = SessionServer::start_with(|c| {
        c.serve.tls_cert = Some(cert.clone());
        c.serve.tls_key = Some(key.clone());
    })
    .await;
    let channel = tls_channel(srv.addr, &server_pki.ca_pem, None)
        .await
        .unwrap();
    SessionServiceClient::new(channel)
        .create_session(create("a", "u", "s"))
        .await
        .unwrap();
    // A client trusting another CA refuses the server.
    let other = pki();
    let wrong = match tls_channel(srv.addr, &other.ca_pem, None).await {
        Err(_) => true,
        Ok(channel) => SessionServiceClient::new(channel)
            .create_session(create("a", "u", "t"))
            .await
            .is_err(),
    };
    assert!(wrong, "a client with the wrong CA must not get through");

    let mtls = SessionServer::start_with(|c| {
        c.serve.tls_cert = Some(cert.clone());
        c.serve.tls_key = Some(key.clone());
        c.serve.tls_client_ca = Some(client_ca.clone());
    })
    .await;
    let anonymous = match tls_channel(mtls.addr, &server_pki.ca_pem, None).await {
        Err(_) => true,
        Ok(channel) => SessionServiceClient::new(channel)
            .create_session(create("a", "u", "s"))
            .await
            .is_err(),
    };
    assert!(
        anonymous,
        "mutual TLS refuses a client without a certificate"
    );
    let channel = tls_channel(mtls.addr, &server_pki.ca_pem, Some(&client_pki))
        .await
        .unwrap();
    SessionServiceClient::new(channel)
        .create_session(create("a", "u", "s"))
        .await
        .unwrap();
}

#[tokio::test]
async fn shutdown_ends_streams_cleanly_and_keeps_every_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    let srv = SessionServer::start_in(dir.path()).await;
    srv.create("app", "u", "s", json!({})).await;
    let mut watch = srv
        .client
        .clone()
        .watch_session(watch_request("app", "u", "s"))
        .await
        .unwrap()
        .into_inner();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = srv.client.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..200 {
                    let mut e = text_event("user", "x");
                    e.id = format!("w{w}-{i}");
                    match c.append_event(append_request("app", "u", "s", e)).await {
                        Ok(_) => acked.push(format!("w{w}-{i}")),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    // Shut down while appends flow: once the watcher has seen 20 of them committed.
    for _ in 0..20 {
        let change = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("appends flow")
            .unwrap()
            .unwrap();
        assert!(matches!(change.change, Some(Change::Event(_))));
    }
    let started = std::time::Instant::now();
    srv.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "well within the grace period"
    );
    // The watch ends with OK (end of stream), not an error, after the events it had.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.message().await {
                Ok(Some(change)) => assert!(matches!(change.change, Some(Change::Event(_)))),
                Ok(None) => return true,
                Err(status) => panic!("the watch ended with an error: {status}"),
            }
        }
    })
    .await
    .unwrap();
    assert!(ended);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    // Each writer waits for an answer before its next append: of the 20 appends committed
    // before the shutdown, at most one per writer can have gone unanswered.
    assert!(acked.len() >= 16, "only {} acknowledged", acked.len());
    let srv = SessionServer::start_in(dir.path()).await;
    let stored: std::collections::HashSet<String> = srv
        .get("app", "u", "s")
        .await
        .events
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert!(
        acked.iter().all(|id| stored.contains(id)),
        "every acknowledged append survived"
    );
}

/// On PostgreSQL every replica keeps a connection listening for the others' notices. Shutdown
/// ends it (rather than leaving it to the next notice that finds no one to deliver to, which a
/// quiet channel never sends) and waits for it, so a stopped server leaves no listener behind.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn shutdown_closes_the_listening_connection() {
    let url = adk_tests::prerequisite::postgres();
    let application = format!("adk_listen_{}", std::process::id());
    let store = format!(
        "{}&application_name={application}",
        adk_tests::fresh_schema(&url).await
    );
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects to the test database");
    tokio::spawn(connection);
    let listening = || async {
        db.query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND query LIKE 'LISTEN %'",
            &[&application],
        )
        .await
        .expect("reads pg_stat_activity")
        .get::<_, i64>(0)
    };
    let srv = SessionServer::start_with(|c| {
        c.store = Some(adk_common::postgres::StoreLocation::Postgres(store));
    })
    .await;
    // The listener connects in the background, and the database ends a backend on its own
    // schedule once the client has closed the socket: both are awaited here, with a bound.
    let until = |want_open: bool| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while (listening().await > 0) != want_open {
            assert!(
                tokio::time::Instant::now() < deadline,
                "after 10 s the listening connection is still {}",
                if want_open { "missing" } else { "open" }
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    until(true).await;
    srv.create("app", "u", "s", json!({})).await;
    srv.shutdown().await;
    until(false).await;
}

/// Shutdown returns only once nothing in the process holds the store any more, so the same
/// sled directory opens again at once, every time (sled refuses a directory whose lock is still
/// held). Each round writes through the session appender and memory-svc's blocking pool first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_lets_go_of_its_data_directory() {
    const ROUNDS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let srv = SessionServer::start_in(dir.path()).await;
        let id = format!("s{round}");
        srv.create("app", "u", &id, json!({})).await;
        srv.append("app", "u", &id, text_event("user", "hi")).await;
        srv.shutdown().await;
    }
    let srv = SessionServer::start_in(dir.path()).await;
    let listed = srv
        .client
        .clone()
        .list_sessions(ListSessionsRequest {
            app_name: "app".into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.sessions.len(),
        ROUNDS,
        "every round's session was kept"
    );
    srv.shutdown().await;

    let mut memory = adk_tests::MemoryServer::start_on("http://127.0.0.1:9", None).await;
    for round in 0..ROUNDS {
        memory
            .client
            .clone()
            .add_memory(adk_proto::memory::v1::AddMemoryRequest {
                app_name: "app".into(),
                user_id: "u".into(),
                memories: vec![adk_proto::memory::v1::MemoryEntry {
                    content: text_event("user", &format!("fact number {round}")).content,
                    ..Default::default()
                }],
                custom_metadata: String::new(),
            })
            .await
            .unwrap();
        memory = memory.restart().await;
    }
    let found = memory
        .client
        .clone()
        .search_memory(search_request("app", "u", "fact"))
        .await
        .unwrap()
        .into_inner();
    assert!(!found.memories.is_empty(), "the memories were kept");
    memory.shutdown().await;
}

/// A session past its ttl is gone for every call at once, whether or not the sweeper has
/// deleted it yet. (That the sweep ends the watches of what it deletes is checked on both stores
/// in session-svc's store contract, with the sweep's clock given: watching here would have to
/// start before a real clock runs out, which a loaded machine does not promise.)
#[tokio::test]
async fn expired_sessions_vanish() {
    let srv = SessionServer::start_with(|c| c.default_session_ttl_secs = 3600).await;
    let mut c = srv.client.clone();
    let mut short = create("app", "u", "short");
    short.ttl = Some(prost_types::Duration {
        seconds: 1,
        nanos: 0,
    });
    let created = c.create_session(short).await.unwrap().into_inner();
    assert!(created.expire_time.is_some());
    let long = c
        .create_session(create("app", "u", "long"))
        .await
        .unwrap()
        .into_inner();
    let default_expiry = long.expire_time.unwrap().seconds - long.create_time.unwrap().seconds;
    assert!(
        (3599..=3601).contains(&default_expiry),
        "--default-session-ttl-secs applies"
    );

    // Invisible once expired (polled: how soon after its expiry this runs depends on the load).
    let get = get_request("app", "u", "short");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match c.get_session(get.clone()).await {
            Ok(_) => assert!(
                tokio::time::Instant::now() < deadline,
                "still visible long after its expiry"
            ),
            Err(e) => {
                assert_eq!(e.code(), Code::NotFound, "invisible once expired");
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = c
        .list_sessions(ListSessionsRequest {
            app_name: "app".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let ids: Vec<_> = listed
        .into_inner()
        .sessions
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["long"]);
    let err = c
        .append_event(append_request(
            "app",
            "u",
            "short",
            text_event("user", "late"),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = c
        .watch_session(watch_request("app", "u", "short"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    // Its name is free again, swept or not.
    c.create_session(create("app", "u", "short")).await.unwrap();
}

#[tokio::test]
async fn metrics_are_exposed_for_prometheus() {
    let srv =
        SessionServer::start_with(|c| c.serve.metrics_listen = Some(([127, 0, 0, 1], 0).into()))
            .await;
    srv.create("metrics-app", "u", "s", json!({})).await;
    for _ in 0..3 {
        srv.append("metrics-app", "u", "s", text_event("user", "hi"))
            .await;
    }
    let missing = get_request("metrics-app", "u", "nope");
    srv.client.clone().get_session(missing).await.unwrap_err();
    let _watch = srv
        .client
        .clone()
        .watch_session(watch_request("metrics-app", "u", "s"))
        .await
        .unwrap();
    let body = scrape(srv.metrics_addr().unwrap()).await;

    // Every sample line parses: `name{labels} value`.
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (_, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "bad value in {line:?}"
        );
    }
    let append = "method=\"adk.session.v1.SessionService/AppendEvent\"";
    assert!(
        sample(
            &body,
            "grpc_server_requests_total",
            &[append, "code=\"Ok\""]
        )
        .unwrap()
            >= 3.0
    );
    let get = "method=\"adk.session.v1.SessionService/GetSession\"";
    assert!(
        sample(
            &body,
            "grpc_server_requests_total",
            &[get, "code=\"NotFound\""]
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        sample(
            &body,
            "grpc_server_request_duration_seconds_count",
            &[append]
        )
        .unwrap()
            >= 3.0
    );
    assert!(sample(
        &body,
        "grpc_server_request_duration_seconds_bucket",
        &[append, "le=\"+Inf\""]
    )
    .is_some());
    if adk_tests::postgres_url().is_some() {
        let open = ["service=\"session-svc\"", "state=\"open\""];
        assert!(sample(&body, "store_pg_connections", &open).unwrap() >= 1.0);
    } else {
        assert!(sample(&body, "store_flush_batch_size_count", &[]).unwrap() >= 1.0);
        assert!(sample(&body, "store_size_bytes", &["service=\"session-svc\""]).unwrap() > 0.0);
        assert!(sample(&body, "store_sessions", &[]).unwrap() >= 1.0);
        assert!(sample(&body, "store_events", &[]).unwrap() >= 3.0);
    }
    // The recorder is per process, so this endpoint also shows memory-svc's gauge here.
    let memory = adk_tests::MemoryServer::start("http://127.0.0.1:9").await;
    memory
        .client
        .clone()
        .add_memory(adk_proto::memory::v1::AddMemoryRequest {
            app_name: "metrics-app".into(),
            user_id: "u".into(),
            memories: vec![adk_proto::memory::v1::MemoryEntry {
                content: text_event("user", "counted").content,
                ..Default::default()
            }],
            custom_metadata: String::new(),
        })
        .await
        .unwrap();
    memory
        .client
        .clone()
        .search_memory(adk_proto::memory::v1::SearchMemoryRequest {
            app_name: "metrics-app".into(),
            user_id: "u".into(),
            query: "counted".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let body = scrape(srv.metrics_addr().unwrap()).await;
    // The memory count is the sled store's gauge (PostgreSQL has its own counts), and so are
    // the journal merges; the PostgreSQL store keeps the blocks the search read.
    if adk_tests::postgres_url().is_none() {
        assert!(sample(&body, "store_memories", &[]).unwrap() >= 1.0);
        // The write's postings wait in memory for a merge; the search read them there.
        let pending = sample(&body, "memory_pending_postings", &[]);
        assert!(pending.unwrap() >= 1.0, "{body}");
    } else {
        let kept = sample(&body, "memory_block_cache_bytes", &[]);
        assert!(kept.unwrap() > 0.0, "{body}");
    }
    let watch = "method=\"adk.session.v1.SessionService/WatchSession\"";
    assert!(
        sample(&body, "grpc_server_in_flight", &[watch]).unwrap() >= 1.0,
        "open streams count"
    );
}

/// Restores the snapshot file at `file` into `data_dir` as `service` would.
fn restore(
    service: &str,
    data_dir: &std::path::Path,
    file: &std::path::Path,
) -> Result<u64, adk_common::snapshot::SnapshotError> {
    use adk_common::{snapshot::Expect, snapshot::Progress};
    let expect = Expect {
        service,
        accept_unlabelled: false,
    };
    let input = std::fs::File::open(file).unwrap();
    let progress = &mut Progress::hidden();
    // Each service restores into its own kind of database.
    match service {
        "memory-svc" => adk_common::snapshot::restore::<adk_common::kv::Restoring>(
            expect, data_dir, input, progress,
        ),
        _ => adk_common::snapshot::restore::<adk_common::sled::Restoring>(
            expect, data_dir, input, progress,
        ),
    }
}

/// Downloads a snapshot over AdminService into `path`.
async fn snapshot_to(addr: std::net::SocketAddr, path: &std::path::Path) {
    let mut client = adk_proto::admin::v1::admin_service_client::AdminServiceClient::connect(
        format!("http://{addr}"),
    )
    .await
    .unwrap();
    let mut stream = client
        .snapshot(adk_proto::admin::v1::SnapshotRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        bytes.extend(chunk.data);
    }
    std::fs::write(path, bytes).unwrap();
}

/// Backups of the PostgreSQL store are the database's own: there is no AdminService.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn the_postgres_store_has_no_admin_service() {
    use adk_proto::admin::v1::{admin_service_client::AdminServiceClient, SnapshotRequest};
    adk_tests::prerequisite::postgres();
    let srv = SessionServer::start().await;
    let status = AdminServiceClient::connect(format!("http://{}", srv.addr))
        .await
        .unwrap()
        .snapshot(SnapshotRequest {})
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
}

/// Snapshots are the sled store's (on PostgreSQL, backups are the database's own): this runs on
/// sled whatever the environment, and the PostgreSQL pass skips it (`sled_`).
#[tokio::test]
async fn sled_snapshots_taken_while_appending_restore_into_a_fresh_data_directory() {
    let srv = SessionServer::start_with(|c| c.store = None).await;
    srv.create("app", "u", "s", json!({"app:a": 1, "user:b": 2}))
        .await;
    // A writer keeps appending while the snapshot is taken, which must still be consistent: it
    // starts once 100 appends are acknowledged, and the writer stops only after 10 more are
    // acknowledged once it is complete, which the snapshot therefore cannot hold (it may hold
    // the one append in flight when it completed, stored but not yet acknowledged).
    let (acked_tx, mut acked) = tokio::sync::watch::channel(0u64);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut c = srv.client.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let e = adk_tests::delta_event(json!({ "n": n }));
                c.append_event(append_request("app", "u", "s", e))
                    .await
                    .unwrap();
                acked_tx.send_replace(n);
            }
            n
        })
    };
    acked.wait_for(|&n| n >= 100).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("session.snap");
    snapshot_to(srv.addr, &file).await;
    let after_snapshot = *acked.borrow_and_update();
    acked.wait_for(|&n| n >= after_snapshot + 10).await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let appended = writer.await.unwrap();

    let restored_dir = work.path().join("restored");
    let entries = restore("session-svc", &restored_dir, &file).unwrap();
    assert!(entries > 0);
    let restored = SessionServer::start_in(&restored_dir).await;
    let session = restored.get("app", "u", "s").await;
    let state = json(&session.state);
    assert_eq!(session.events.len() as u64, session.last_sequence);
    assert!(
        (100..=after_snapshot + 1).contains(&session.last_sequence),
        "the snapshot holds {} appends: taken after the 100th and before the {}th",
        session.last_sequence,
        after_snapshot + 2
    );
    assert!(session.last_sequence < appended);
    assert_eq!(
        state["n"],
        json!(session.last_sequence),
        "events and state from one moment"
    );
    assert_eq!(state["app:a"], json!(1));
    // The restored server is fully usable.
    let next = restored
        .append("app", "u", "s", text_event("user", "after restore"))
        .await;
    assert_eq!(next.last_sequence, session.last_sequence + 1);

    // Restoring over existing data is refused; a truncated file is detected.
    assert!(restore("session-svc", &restored_dir, &file).is_err());
    let bytes = std::fs::read(&file).unwrap();
    let truncated = work.path().join("truncated.snap");
    std::fs::write(&truncated, &bytes[..bytes.len() - 3]).unwrap();
    let err = restore("session-svc", &work.path().join("t"), &truncated);
    assert!(err.is_err());

    // memory-svc snapshots the same way.
    let memory = adk_tests::MemoryServer::start_on("http://127.0.0.1:9", None).await;
    let mut m = memory.client.clone();
    m.add_memory(adk_proto::memory::v1::AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![adk_proto::memory::v1::MemoryEntry {
            id: "fact".into(),
            content: text_event("user", "the cat is called Miso").content,
            ..Default::default()
        }],
        custom_metadata: String::new(),
    })
    .await
    .unwrap();
    let memory_file = work.path().join("memory.snap");
    snapshot_to(memory.addr, &memory_file).await;
    let memory_dir = work.path().join("memory-restored");
    restore("memory-svc", &memory_dir, &memory_file).unwrap();
    let restored_memory = {
        let config =
            memory_svc::config::Config::ephemeral(memory_dir.clone(), "http://127.0.0.1:9".into());
        memory_svc::server::start(config).await.unwrap()
    };
    let mut client = MemoryServiceClient::connect(format!("http://{}", restored_memory.addr))
        .await
        .unwrap();
    let found = client
        .search_memory(search_request("app", "u", "Miso"))
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, "fact");
    restored_memory.shutdown().await.unwrap();
}
