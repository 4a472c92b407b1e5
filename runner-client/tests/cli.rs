//! The `runner-client` binary against servers booted in this process: `run` (people and
//! `--json`), `memory`, `sessions`, `watch`, and the message when a service is down.

use std::{process::Stdio, time::Duration};

use adk_tests::{MemoryServer, SessionServer};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

/// Where nothing listens.
const NOWHERE: &str = "http://127.0.0.1:9";

/// The binary with endpoints, app and user set, and no RUNNER_* setting from the environment.
fn cli(sessions: &str, memory: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_runner-client"));
    for (name, _) in std::env::vars() {
        if name.starts_with("RUNNER_") {
            command.env_remove(name);
        }
    }
    command
        .args(["--session-endpoint", sessions, "--memory-endpoint", memory])
        .args(["--app", "demo", "--user", "alice"])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn output(command: &mut Command) -> Output {
    let out = command.output().await.expect("the binary runs");
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Runs a command that must succeed; returns its stdout.
async fn ok(command: &mut Command) -> String {
    let out = output(command).await;
    assert!(out.ok, "failed: {}", out.stderr);
    out.stdout
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

struct Servers {
    sessions: SessionServer,
    _memory: MemoryServer,
    session_endpoint: String,
    memory_endpoint: String,
}

async fn servers() -> Servers {
    let sessions = SessionServer::start().await;
    let session_endpoint = format!("http://{}", sessions.addr);
    let memory = MemoryServer::start(&session_endpoint).await;
    let memory_endpoint = format!("http://{}", memory.addr);
    Servers {
        sessions,
        _memory: memory,
        session_endpoint,
        memory_endpoint,
    }
}

impl Servers {
    fn cli(&self) -> Command {
        cli(&self.session_endpoint, &self.memory_endpoint)
    }
}

#[tokio::test]
async fn run_remember_and_recall_in_json_and_for_people() {
    let s = servers().await;
    let told = ok(s
        .cli()
        .args(["--session", "a", "--remember", "run", "--json"])
        .arg("My favorite project is Project Alpha."))
    .await;
    let told = json_lines(&told);
    assert_eq!(told.len(), 1);
    assert_eq!(told[0]["author"], "recall");
    assert_eq!(told[0]["sequence"], 2);
    assert_eq!(
        told[0]["content"],
        json!({"role": "model", "parts": [{"text": "Noted."}]})
    );

    let asked = ok(s.cli().args([
        "--session",
        "b",
        "run",
        "--json",
        "What is my favorite project?",
    ]))
    .await;
    let asked = json_lines(&asked);
    assert_eq!(asked.len(), 3);
    let call = &asked[0]["content"]["parts"][0]["function_call"];
    assert_eq!(call["name"], "load_memory");
    assert_eq!(
        call["args"],
        json!({"query": "What is my favorite project?"}),
        "JSON text fields print as JSON"
    );
    let response = &asked[1]["content"]["parts"][0]["function_response"]["response"];
    assert_eq!(
        response["memories"][0]["content"]["parts"][0]["text"],
        "My favorite project is Project Alpha."
    );
    assert!(asked[2]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Project Alpha"));

    let people = ok(s
        .cli()
        .args(["--session", "c", "run", "Which project is my favorite?"]))
    .await;
    let lines: Vec<&str> = people.lines().collect();
    assert_eq!(lines.len(), 3, "{people}");
    assert!(
        lines[0].starts_with("recall: [call load_memory "),
        "{people}"
    );
    assert!(
        lines[1].starts_with("recall: [load_memory returned "),
        "{people}"
    );
    assert_eq!(
        lines[2],
        "recall: You told me: \"My favorite project is Project Alpha.\""
    );

    let found = ok(s.cli().args(["memory", "search", "favorite project"])).await;
    assert!(
        found.contains("user: My favorite project is Project Alpha."),
        "{found}"
    );
    let added = ok(s
        .cli()
        .args(["--session", "b", "memory", "add-session", "--json"]))
    .await;
    assert_eq!(
        json_lines(&added),
        [json!({"session_id": "b", "entries": 4})]
    );
}

#[tokio::test]
async fn sessions_list_get_and_delete() {
    let s = servers().await;
    for session in ["s1", "s2"] {
        ok(s.cli().args([
            "--session",
            session,
            "run",
            "--state-delta",
            r#"{"topic": 1}"#,
            "Hi.",
        ]))
        .await;
    }
    let listed = json_lines(&ok(s.cli().args(["sessions", "list", "--json"])).await);
    let ids: Vec<&str> = listed.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s1", "s2"]);
    assert_eq!(listed[0]["state"], json!({"topic": 1}));
    assert_eq!(listed[0]["last_sequence"], 2);

    let people = ok(s.cli().args(["sessions", "list"])).await;
    assert_eq!(people.lines().count(), 2);
    assert!(people.starts_with("s1  user alice  2 events"), "{people}");

    let got = ok(s.cli().args(["--session", "s1", "sessions", "get"])).await;
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        [
            "session s1 of user alice in app demo",
            r#"state {"topic":1}"#,
            r#"#1 user: Hi. [state_delta {"topic":1}]"#,
            "#2 recall: Noted.",
        ]
    );

    ok(s.cli().args(["--session", "s1", "sessions", "delete"])).await;
    let listed = json_lines(&ok(s.cli().args(["sessions", "list", "--json"])).await);
    assert_eq!(listed.len(), 1);
    let gone = output(s.cli().args(["--session", "s1", "sessions", "get"])).await;
    assert!(!gone.ok);
    assert_eq!(gone.stderr.trim(), "runner-client: session s1 not found");
}

#[tokio::test]
async fn watch_prints_events_as_they_are_appended() {
    let s = servers().await;
    s.sessions.create("demo", "alice", "w", json!({})).await;
    let mut watcher = s
        .cli()
        .args(["--session", "w", "watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch starts");
    let mut lines = BufReader::new(watcher.stdout.take().expect("piped")).lines();
    // The watch replays stored events, so the turn may start before the watch subscribes.
    ok(s.cli().args(["--session", "w", "run", "Hello."])).await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("an event line arrives")
            .unwrap()
            .expect("watch still running");
        seen.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(seen[0]["author"], "user");
    assert_eq!(seen[0]["sequence"], 1);
    assert_eq!(seen[1]["author"], "recall");
    assert_eq!(seen[1]["sequence"], 2);

    ok(s.cli().args(["--session", "w", "sessions", "delete"])).await;
    let end = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the deletion is reported")
        .unwrap();
    assert_eq!(end.as_deref(), Some(r#"{"deleted":{}}"#));
    let status = tokio::time::timeout(Duration::from_secs(20), watcher.wait())
        .await
        .expect("watch ends with the session")
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_service_that_is_down_is_named_with_a_hint_and_a_failure_status() {
    let s = servers().await;
    let down = output(cli(NOWHERE, &s.memory_endpoint).args(["sessions", "list"])).await;
    assert!(!down.ok);
    assert_eq!(
        down.stderr.trim(),
        "runner-client: cannot reach session-svc at http://127.0.0.1:9: connection refused — is it running?"
    );
    assert!(down.stdout.is_empty());

    let down = output(cli(&s.session_endpoint, NOWHERE).args([
        "--session",
        "q",
        "run",
        "What did I say?",
    ]))
    .await;
    assert!(!down.ok);
    assert!(
        down.stderr.contains(
            "runner-client: cannot reach memory-svc at http://127.0.0.1:9: connection refused — is it running?"
        ),
        "{}",
        down.stderr
    );

    let usage = output(cli(&s.session_endpoint, NOWHERE).args(["sessions", "get"])).await;
    assert!(!usage.ok);
    assert!(usage.stderr.contains("needs --session"), "{}", usage.stderr);
}
