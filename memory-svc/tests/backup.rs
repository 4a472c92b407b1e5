//! The `snapshot` and `restore` commands of the real binary: a snapshot names its service and
//! another service's is refused, a failed restore leaves nothing behind so that the retry
//! succeeds, snapshots of the first format need `--accept-unlabelled`, and both commands show
//! their progress.

use std::{
    path::Path,
    process::{Command, Output},
};

use adk_proto::memory::v1::{AddMemoryRequest, MemoryEntry, SearchMemoryRequest};
use adk_tests::{text_event, MemoryServer, SessionServer};
use memory_svc::config::Config;

/// Runs the memory-svc binary with `args`.
fn memory_svc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memory-svc"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Snapshots the server at `addr` into `file` with the binary.
fn snapshot(addr: std::net::SocketAddr, file: &Path) -> Output {
    let endpoint = format!("http://{addr}");
    let out = memory_svc(&["snapshot", "--endpoint", &endpoint, "--output", path(file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// The entries of `dir` (a directory beside the restore target).
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// The binary runs while this test waits for it: the servers need threads of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_refuses_other_snapshots_and_leaves_nothing_behind_when_it_fails() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();

    // Snapshots are the sled store's, whatever the environment says.
    let sessions = SessionServer::start_with(|c| c.store = None).await;
    sessions
        .create("app", "u", "s", serde_json::json!({"k": 1}))
        .await;
    let memory = MemoryServer::start_on("http://127.0.0.1:9", None).await;
    memory
        .client
        .clone()
        .add_memory(AddMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            memories: vec![MemoryEntry {
                id: "fact".into(),
                content: text_event("user", "the cat is called Miso").content,
                ..Default::default()
            }],
            custom_metadata: String::new(),
        })
        .await
        .unwrap();

    let session_file = work.join("session.snap");
    snapshot(sessions.addr, &session_file);
    let memory_file = work.join("memory.snap");
    let taken = snapshot(memory.addr, &memory_file);
    let said = String::from_utf8_lossy(&taken.stdout).into_owned();
    assert!(
        said.starts_with("snapshot of memory-svc at http://"),
        "{said}"
    );
    assert!(stderr(&taken).contains("(100%)"), "{}", stderr(&taken));

    // Another service's snapshot is refused, and nothing is created.
    let target = work.join("restored");
    let refused = memory_svc(&[
        "restore",
        "--input",
        path(&session_file),
        "--data-dir",
        path(&target),
    ]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(
            "this is a snapshot of session-svc, not of memory-svc: restore it with session-svc"
        ),
        "{}",
        stderr(&refused)
    );
    assert_eq!(entries(work), ["memory.snap", "session.snap"]);

    // A truncated snapshot fails and leaves nothing behind...
    let bytes = std::fs::read(&memory_file).unwrap();
    let truncated = work.join("truncated.snap");
    std::fs::write(&truncated, &bytes[..bytes.len() - 3]).unwrap();
    let failed = memory_svc(&[
        "restore",
        "--input",
        path(&truncated),
        "--data-dir",
        path(&target),
    ]);
    assert!(!failed.status.success());
    assert!(stderr(&failed).contains("truncated"), "{}", stderr(&failed));
    assert_eq!(
        entries(work),
        ["memory.snap", "session.snap", "truncated.snap"]
    );

    // ...so the retry with the whole file succeeds.
    let restored = memory_svc(&[
        "restore",
        "--input",
        path(&memory_file),
        "--data-dir",
        path(&target),
    ]);
    assert!(restored.status.success(), "{}", stderr(&restored));
    assert!(
        stderr(&restored).contains("restoring: ") && stderr(&restored).contains("(100%)"),
        "{}",
        stderr(&restored)
    );
    // Sizes in a unit that shows them: a small snapshot is not "0.0 MiB of 0.0 MiB".
    assert!(!stderr(&restored).contains("0.0 "), "{}", stderr(&restored));
    let running = memory_svc::server::start(Config::ephemeral(
        target.clone(),
        "http://127.0.0.1:9".into(),
    ))
    .await
    .unwrap();
    let found = adk_proto::memory::v1::memory_service_client::MemoryServiceClient::connect(
        format!("http://{}", running.addr),
    )
    .await
    .unwrap()
    .search_memory(SearchMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        query: "Miso".into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .memories;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, "fact");
    running.shutdown().await.unwrap();
}

#[test]
fn snapshots_of_the_first_format_need_accept_unlabelled() {
    let work = tempfile::tempdir().unwrap();
    // `ADKSNAP1`, then only the final record (an empty store): length 10, field 3 (the entry
    // count) of 8 bytes, 0.
    let legacy = work.path().join("legacy.snap");
    let mut bytes = b"ADKSNAP1".to_vec();
    bytes.extend([10, 0x1a, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
    std::fs::write(&legacy, bytes).unwrap();
    let target = work.path().join("restored");

    let refused = memory_svc(&[
        "restore",
        "--input",
        path(&legacy),
        "--data-dir",
        path(&target),
    ]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(
            "this snapshot does not say which service took it (it is in the first snapshot \
             format); if you are sure it is a memory-svc snapshot, restore it with \
             --accept-unlabelled"
        ),
        "{}",
        stderr(&refused)
    );
    assert!(!target.exists());

    let accepted = memory_svc(&[
        "restore",
        "--input",
        path(&legacy),
        "--data-dir",
        path(&target),
        "--accept-unlabelled",
    ]);
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert_eq!(
        String::from_utf8_lossy(&accepted.stdout).trim(),
        format!("restored 0 entries into {}", target.display())
    );
}
