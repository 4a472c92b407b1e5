//! The binary logs its configuration readably when it starts: settings for people, no Rust
//! debug dump.

use std::io::{BufRead, BufReader};

#[test]
fn the_startup_log_shows_the_configuration_readably() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_session-svc"));
    // Flags fall back to SESSION_SVC_* variables: none may leak in.
    for (name, _) in std::env::vars() {
        if name.starts_with("SESSION_SVC_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--sync",
            "periodic",
            "--data-dir",
        ])
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the server starts");
    let stderr = child.stderr.take().expect("piped");
    let line = BufReader::new(stderr)
        .lines()
        .map(|line| line.expect("reads stderr"))
        .find(|line| line.contains("starting"));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("a starting line");
    let expected = format!(
        "starting: listen 127.0.0.1:0, store embedded:{} (durability periodic), events up to 16 MiB, \
         change feed kept 86400 s, sessions kept until deleted, TLS off, tokens off, metrics off, \
         at most 1024 calls at once, 10 s shutdown grace",
        dir.path().display()
    );
    assert!(line.ends_with(&expected), "{line}");
}
