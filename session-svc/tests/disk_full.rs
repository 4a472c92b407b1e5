//! A full disk: session-svc answers with a clear status instead of hanging, turns NOT_SERVING,
//! refuses further writes at once, and after the disk has room again a restart finds every
//! acknowledged event, uncorrupted. The disk is a small tmpfs mounted for the test: this needs
//! root, so the test is ignored unless asked for (`--ignored`, as `.ci/run` does), and then fails
//! without it.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use adk_proto::session::v1::{
    part::Data, session_service_client::SessionServiceClient, AppendEventRequest, Content,
    CreateSessionRequest, Event, GetSessionRequest, Part,
};
use adk_tests::{spawn_binary, ServerProcess};
use tonic::{transport::Channel, Code};
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

/// A tmpfs of a given size, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(path: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(path).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(path.to_owned()))
    }

    fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

async fn spawn(dir: &Path) -> (ServerProcess, Channel) {
    spawn_binary(env!("CARGO_BIN_EXE_session-svc"), dir).await
}

fn append(i: usize) -> AppendEventRequest {
    AppendEventRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        event: Some(Event {
            id: format!("e{i}"),
            author: "user".into(),
            content: Some(Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(Data::Text("x".repeat(20_000))),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        expected_last_sequence: None,
    }
}

async fn serving(channel: &Channel) -> bool {
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "adk.session.v1.SessionService".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    status == 1
}

fn get() -> GetSessionRequest {
    GetSessionRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (mounts a tmpfs)"]
async fn a_full_disk_is_reported_and_nothing_acknowledged_is_lost() {
    assert!(
        adk_tests::postgres_url().is_none(),
        "a full disk is the sled store's concern (the database's otherwise): run this suite \
         without {}",
        adk_tests::POSTGRES_VAR
    );
    let scratch = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(&scratch.path().join("disk"), "8M")
        .expect("this test needs root, to mount a tmpfs");
    let data = disk.0.join("data");
    let (mut child, channel) = spawn(&data).await;
    let mut client = SessionServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
    client
        .create_session(CreateSessionRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    let mut acked = 0;
    let failure = loop {
        match tokio::time::timeout(
            Duration::from_secs(20),
            client.append_event(append(acked + 1)),
        )
        .await
        {
            Ok(Ok(_)) => acked += 1,
            Ok(Err(status)) => break status,
            Err(_) => panic!("an append hung on the full disk"),
        }
        assert!(acked < 10_000, "an 8 MB disk never filled up");
    };
    assert!(
        matches!(failure.code(), Code::ResourceExhausted | Code::Unavailable),
        "{failure:?}"
    );
    assert!(failure.message().contains("space"), "{}", failure.message());
    assert!(acked > 10, "the disk held some events first");

    // From now on writes are refused at once, health says so, and reads go on.
    let started = Instant::now();
    let refused = client.append_event(append(acked + 1)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(
        refused.message().contains("restart"),
        "{}",
        refused.message()
    );
    assert!(
        !serving(&channel).await,
        "health is NOT_SERVING after the disk failed"
    );
    // sled itself refuses every operation after an I/O error, reads included: they too get an
    // answer, not a hang.
    let read = tokio::time::timeout(Duration::from_secs(5), client.get_session(get()))
        .await
        .expect("reads answer");
    match read {
        Ok(session) => assert!(session.into_inner().events.len() >= acked),
        Err(status) => assert!(
            matches!(status.code(), Code::ResourceExhausted | Code::Unavailable),
            "{status:?}"
        ),
    }

    // Room again, and a restart (what an orchestrator does on failing health).
    disk.grow("64M");
    child.kill();
    let (mut child, channel) = spawn(&data).await;
    let mut client = SessionServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
    assert!(serving(&channel).await);
    let session = client.get_session(get()).await.unwrap().into_inner();
    assert!(
        session.events.len() >= acked,
        "every acknowledged event survived"
    );
    for (k, e) in session.events.iter().enumerate() {
        assert_eq!(
            (e.sequence, e.id.clone()),
            (k as u64 + 1, format!("e{}", k + 1))
        );
    }
    let next = session.events.len() + 1;
    let appended = client
        .append_event(append(next))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(appended.last_sequence, next as u64);
    child.kill();
}

#[test]
fn an_unusable_data_directory_stops_the_server_with_a_message_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_session-svc"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(file.join("data"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "no ready line");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot open the data directory") && stderr.contains("a-file/data"),
        "{stderr}"
    );
}
