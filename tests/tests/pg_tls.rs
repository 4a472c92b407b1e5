//! TLS to PostgreSQL: both services reach a server that admits TLS connections only, with each
//! `sslmode`, and refuse to start when the server's certificate does not pass the mode's check.
//!
//! Each test starts a cluster of its own (see `adk_tests::pg_cluster`) with a certificate for
//! `localhost` signed by a CA made here. Needs PostgreSQL installed and `ADK_TEST_POSTGRES` set,
//! so it is ignored unless asked for (`adk_tests::prerequisite`).

use std::{path::PathBuf, time::Duration};

use adk_common::postgres::StoreLocation;
use adk_proto::session::v1::WatchSessionRequest;
use adk_tests::{
    pg_cluster::{Cluster, ClusterOptions},
    text_event, MemoryServer, SessionServer,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::json;
use tempfile::TempDir;

/// A CA certificate (PEM) and the server's certificate and key, valid for `localhost` only.
struct Pki {
    ca_pem: String,
    server: (String, String),
}

fn pki(ca_name: &str) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server: (cert.pem(), key.serialize_pem()),
    }
}

/// A cluster admitting TLS connections only, the CA's file, and the directory holding it.
async fn tls_only_cluster() -> (Cluster, PathBuf, TempDir) {
    adk_tests::prerequisite::postgres();
    let pki = pki("database CA");
    let cluster = Cluster::start(ClusterOptions {
        tls: Some(pki.server),
        tls_only: true,
    })
    .await;
    let dir = TempDir::new().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, pki.ca_pem).unwrap();
    (cluster, ca_file, dir)
}

/// Starts session-svc on `url` (with `ca_file` as `--pg-ca-file`); the error text if it does
/// not start.
async fn session_start(url: String, ca_file: Option<PathBuf>) -> Result<(), String> {
    let dir = TempDir::new().unwrap();
    let mut config = session_svc::config::Config::ephemeral(dir.path().to_owned());
    config.store = Some(url.parse::<StoreLocation>()?);
    config.serve.pg_ca_file = ca_file;
    let running = session_svc::server::start(config)
        .await
        .map_err(|e| e.to_string())?;
    running.shutdown().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn verify_full_with_the_ca_serves_both_services_and_the_notifications() {
    let (cluster, ca_file, _dir) = tls_only_cluster().await;
    let store = StoreLocation::Postgres(cluster.url_to("localhost", "sslmode=verify-full"));
    let with_ca = |c: &mut session_svc::config::Config| {
        c.store = Some(store.clone());
        c.serve.pg_ca_file = Some(ca_file.clone());
    };
    let a = SessionServer::start_with(with_ca).await;
    let b = SessionServer::start_with(with_ca).await;
    a.create("app", "u", "s", json!({})).await;
    // A watcher on A sees an append made through B: B's notification reached A's LISTEN
    // connection, itself over TLS (the server admits nothing else).
    let mut feed = a
        .client
        .clone()
        .watch_session(WatchSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence: 0,
            include_partial: false,
        })
        .await
        .unwrap()
        .into_inner();
    b.append("app", "u", "s", text_event("user", "over TLS"))
        .await;
    let change = tokio::time::timeout(Duration::from_secs(20), feed.message())
        .await
        .expect("the watcher on the other replica hears of the append")
        .unwrap()
        .expect("a change");
    assert!(format!("{change:?}").contains("over TLS"), "{change:?}");
    assert_eq!(a.get("app", "u", "s").await.events.len(), 1);

    // memory-svc reads the same flag through the same code.
    let memory = MemoryServer::start_with(&format!("http://{}", a.addr), |c| {
        c.store = Some(StoreLocation::Postgres(
            cluster.url_to("localhost", "sslmode=verify-full"),
        ));
        c.serve.pg_ca_file = Some(ca_file.clone());
    })
    .await;
    memory.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn verify_full_refuses_a_missing_or_wrong_ca_and_a_wrong_host() {
    let (cluster, ca_file, dir) = tls_only_cluster().await;
    // The root certificate in the connection string works as the flag does.
    let in_url = format!(
        "sslmode=verify-full&sslrootcert={}",
        ca_file.display().to_string().replace('/', "%2F")
    );
    session_start(cluster.url_to("localhost", &in_url), None)
        .await
        .expect("starts with sslrootcert in the connection string");

    let no_ca = session_start(cluster.url_to("localhost", "sslmode=verify-full"), None)
        .await
        .unwrap_err();
    assert!(no_ca.contains("needs a root certificate"), "{no_ca}");

    let other_ca = dir.path().join("other-ca.pem");
    std::fs::write(&other_ca, pki("another CA").ca_pem).unwrap();
    let wrong_ca = session_start(
        cluster.url_to("localhost", "sslmode=verify-full"),
        Some(other_ca),
    )
    .await
    .unwrap_err();
    assert!(wrong_ca.contains("UnknownIssuer"), "{wrong_ca}");

    // The certificate names `localhost`, not 127.0.0.1: verify-full refuses, verify-ca (the
    // chain only) accepts.
    let wrong_host = session_start(
        cluster.url_to("127.0.0.1", "sslmode=verify-full"),
        Some(ca_file.clone()),
    )
    .await
    .unwrap_err();
    assert!(wrong_host.contains("not valid for name"), "{wrong_host}");
    session_start(
        cluster.url_to("127.0.0.1", "sslmode=verify-ca"),
        Some(ca_file.clone()),
    )
    .await
    .expect("verify-ca does not check the host name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn require_and_prefer_encrypt_without_a_ca_and_disable_is_refused_clearly() {
    let (cluster, _ca_file, _dir) = tls_only_cluster().await;
    session_start(cluster.url("sslmode=require"), None)
        .await
        .expect("require needs no root certificate");
    session_start(cluster.url(""), None)
        .await
        .expect("the default, prefer, uses TLS when the server offers it");
    let disabled = session_start(cluster.url("sslmode=disable"), None)
        .await
        .unwrap_err();
    assert!(
        disabled.contains("no pg_hba.conf entry") && disabled.contains("no encryption"),
        "{disabled}"
    );
}
