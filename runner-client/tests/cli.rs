//! The `runner-client` binary against servers booted in this process: `run` (people and
//! `--json`), `memory`, `sessions`, `watch` (and its reconnection), large events, help and
//! completions, and the messages when a service is down or another answers.

use std::{
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

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
        .args(["--session", "a", "run", "--remember", "--json"])
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
async fn memory_search_in_the_language_it_names() {
    let s = servers().await;
    let told = "Wir haben letztes Jahr ein altes Haus am See gekauft";
    ok(s.cli().args(["--session", "a", "run", "--remember", told])).await;
    let search = |language: &str| {
        let mut command = s.cli();
        command.args(["memory", "search", "Häuser", "--language", language]);
        command
    };
    // German Snowball gives "Häuser" the stem of "Haus"; English leaves the word as it is.
    let found = ok(&mut search("de")).await;
    let first = found.lines().next().unwrap_or_default();
    assert!(
        first.contains(&format!("user: {told}  (session a)")),
        "{found}"
    );
    let english = output(&mut search("en")).await;
    assert!(
        english.ok && english.stdout.is_empty(),
        "{}",
        english.stdout
    );
    assert!(english.stderr.contains("nothing in memory matches"));
    let unknown = output(&mut search("klingon")).await;
    assert!(!unknown.ok);
    assert!(unknown.stderr.contains("language"), "{}", unknown.stderr);
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
    s.sessions.create("demo", "alice", "one", json!({})).await;
    s.sessions
        .append("demo", "alice", "one", adk_tests::text_event("user", "Hi."))
        .await;
    let people = ok(s.cli().args(["sessions", "list"])).await;
    assert!(
        people
            .lines()
            .any(|l| l.starts_with("one  user alice  1 event  ")),
        "one event is \"1 event\": {people}"
    );

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

    let deleted = ok(s.cli().args(["--session", "s1", "sessions", "delete"])).await;
    assert_eq!(deleted.trim(), "deleted session s1");
    let again = ok(s.cli().args(["--session", "s1", "sessions", "delete"])).await;
    assert_eq!(
        again.trim(),
        "there was no session s1 of user alice in app demo: nothing deleted"
    );
    let again = ok(s
        .cli()
        .args(["--session", "s1", "sessions", "delete", "--json"]))
    .await;
    assert_eq!(
        json_lines(&again),
        [json!({"deleted": "s1", "existed": false})]
    );
    let listed = json_lines(&ok(s.cli().args(["sessions", "list", "--json"])).await);
    let ids: Vec<&str> = listed.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s2", "one"]);
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
    let unknown = "http://no-such-host.invalid:50051";
    let nameless = output(cli(unknown, &s.memory_endpoint).args(["sessions", "list"])).await;
    assert!(!nameless.ok);
    assert!(
        nameless.stderr.starts_with(&format!(
            "runner-client: cannot reach session-svc at {unknown}: no such host (the name does \
             not resolve: "
        )) && !nameless.stderr.contains("is it running"),
        "{}",
        nameless.stderr
    );

    let down = output(cli(NOWHERE, &s.memory_endpoint).args(["sessions", "list"])).await;
    assert!(!down.ok);
    assert_eq!(
        down.stderr.trim(),
        "runner-client: cannot reach session-svc at http://127.0.0.1:9: connection refused — is it running?"
    );
    assert!(down.stdout.is_empty());

    // A tool that fails does not end the turn: the agent is told, and says so.
    let down = output(cli(&s.session_endpoint, NOWHERE).args([
        "--session",
        "q",
        "run",
        "What did I say?",
    ]))
    .await;
    assert!(down.ok, "{}", down.stderr);
    assert!(
        down.stdout.contains(
            "I could not look in my memory (load_memory failed: cannot reach memory-svc at http://127.0.0.1:9: connection refused — is it running?)"
        ),
        "{}",
        down.stdout
    );
    // ...and the session can go on.
    let next = ok(cli(&s.session_endpoint, &s.memory_endpoint).args([
        "--session",
        "q",
        "run",
        "What did I say?",
    ]))
    .await;
    assert_eq!(
        next.lines().last(),
        Some("recall: I don't remember anything about that."),
        "{next}"
    );
    let session = s.sessions.get("demo", "alice", "q").await;
    assert_eq!(session.events.len(), 8, "two whole turns");

    let usage = output(cli(&s.session_endpoint, NOWHERE).args(["sessions", "get"])).await;
    assert!(!usage.ok);
    assert!(usage.stderr.contains("needs --session"), "{}", usage.stderr);
}

#[tokio::test]
async fn endpoints_without_a_scheme_and_the_wrong_service_at_an_endpoint() {
    let s = servers().await;
    let bare = s.session_endpoint.trim_start_matches("http://").to_owned();
    let listed = ok(cli(&bare, &s.memory_endpoint).args(["sessions", "list", "--json"])).await;
    assert!(listed.is_empty(), "{listed}");

    // memory-svc where session-svc should be: one on sled, whatever store the environment
    // picks for the others, since only sled stores serve the AdminService as well.
    let memory = MemoryServer::start_on(&s.session_endpoint, None).await;
    let memory_endpoint = format!("http://{}", memory.addr);
    let wrong = output(cli(&memory_endpoint, &memory_endpoint).args(["sessions", "list"])).await;
    assert!(!wrong.ok);
    assert_eq!(
        wrong.stderr.trim(),
        format!(
            "runner-client: the server at {memory_endpoint} is not session-svc: it does not offer \
             ListSessions; it offers adk.memory.v1.MemoryService (memory-svc), \
             adk.admin.v1.AdminService"
        )
    );
}

#[tokio::test]
async fn an_http1_server_at_an_endpoint_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers as web servers answer HTTP/2's preface.
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut connection in listener.incoming().flatten() {
            let _ = connection.read(&mut [0u8; 1024]);
            let _ = connection.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let endpoint = format!("http://{addr}");
    let wrong = output(cli(&endpoint, NOWHERE).args(["sessions", "list"])).await;
    assert!(!wrong.ok);
    assert_eq!(
        wrong.stderr.trim(),
        format!(
            "runner-client: the server at {endpoint} does not speak gRPC: an HTTP/1 server \
             answers there (\"HTTP/1.1 400 Bad Request\"), not session-svc"
        )
    );
}

#[tokio::test]
async fn memory_list_and_search_with_filters() {
    use adk_proto::memory::v1::{AddMemoryRequest, MemoryEntry};
    let s = servers().await;
    let memories = (0..6)
        .map(|i| MemoryEntry {
            id: format!("m{i}"),
            content: adk_tests::text_event("user", &format!("a note about tea {i}")).content,
            author: if i % 2 == 0 { "alice" } else { "bob" }.into(),
            custom_metadata: json!({
                "n": i,
                "color": if i % 2 == 0 { "red" } else { "blue" },
                "seen": format!("2026-05-0{}T12:00:00Z", i + 1),
                "label": if i == 4 { "a, b" } else { "c" },
            })
            .to_string(),
            ..Default::default()
        })
        .collect();
    s._memory
        .client
        .clone()
        .add_memory(AddMemoryRequest {
            app_name: "demo".into(),
            user_id: "alice".into(),
            memories,
            ..Default::default()
        })
        .await
        .unwrap();
    let ids = |args: &[&str]| {
        let mut command = s.cli();
        command.args(["memory"]).args(args).arg("--json");
        async move {
            json_lines(&ok(&mut command).await)
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids(&["list", "--filter", "color=red, n>=2"]).await,
        ["m2", "m4"]
    );
    assert_eq!(
        ids(&["list", "--filter", "n<1", "--filter", r#"label="a, b""#]).await,
        ["m0", "m4"]
    );
    assert_eq!(
        ids(&[
            "list",
            "--filter",
            "seen>2026-05-04T00:00:00Z,color!=red",
            "--author",
            "bob"
        ])
        .await,
        ["m3", "m5"]
    );
    assert_eq!(
        ids(&[
            "list",
            "--filter",
            "label?",
            "--after",
            "2026-01-01T00:00:00Z"
        ])
        .await
        .len(),
        0
    );
    let mut found = ids(&["search", "tea", "--filter", "n>3"]).await;
    found.sort();
    assert_eq!(found, ["m4", "m5"]);
    let bad = output(s.cli().args(["memory", "list", "--filter", "n<red"])).await;
    assert!(!bad.ok);
    assert!(
        bad.stderr.contains("filter.any_of[0].all_of[0].value"),
        "{}",
        bad.stderr
    );
    let typo = output(s.cli().args(["memory", "list", "--filter", "color"])).await;
    assert!(!typo.ok);
    assert!(typo.stderr.contains("--filter"), "{}", typo.stderr);
}

#[tokio::test]
async fn memory_add_list_and_search_in_time() {
    let s = servers().await;
    let add = |text: &str, args: &[&str]| {
        let mut command = s.cli();
        command
            .args(["memory", "add", text])
            .args(args)
            .arg("--json");
        async move { json_lines(&ok(&mut command).await)[0]["id"].clone() }
    };
    let berlin = add(
        "Alice lives in Berlin.",
        &[
            "--id",
            "berlin",
            "--valid-from",
            "2024-01-10T09:00:00Z",
            "--invalid-at",
            "2025-05-01T00:00:00Z",
        ],
    )
    .await;
    assert_eq!(berlin, "berlin");
    add(
        "Alice lives in Lisbon.",
        &["--id", "lisbon", "--valid-from", "2025-05-01T00:00:00Z"],
    )
    .await;
    let listed = |args: &[&str]| {
        let mut command = s.cli();
        command.args(["memory"]).args(args).arg("--json");
        async move { json_lines(&ok(&mut command).await) }
    };
    let now = listed(&["list"]).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0]["id"], "lisbon");
    assert_eq!(now[0]["valid_from"], "2025-05-01T00:00:00Z");
    let all = listed(&["list", "--include-superseded"]).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["invalid_at"], "2025-05-01T00:00:00Z");
    let then = listed(&["search", "Alice", "--as-of", "2024-06-01T00:00:00Z"]).await;
    assert_eq!(then.len(), 1);
    assert_eq!(then[0]["id"], "berlin");
    let text = ok(s.cli().args(["memory", "list", "--include-superseded"])).await;
    assert!(
        text.contains("Alice lives in Berlin.  (valid until 2025-05-01T00:00:00Z)"),
        "{text}"
    );
    let bad = output(s.cli().args(["memory", "list", "--as-of", "last May"])).await;
    assert!(!bad.ok);
    assert!(bad.stderr.contains("--as-of"), "{}", bad.stderr);
    let backwards = output(s.cli().args([
        "memory",
        "add",
        "A fact.",
        "--valid-from",
        "2025-01-01T00:00:00Z",
        "--invalid-at",
        "2024-01-01T00:00:00Z",
    ]))
    .await;
    assert!(!backwards.ok);
    assert!(
        backwards.stderr.contains("memories[0].invalid_at"),
        "{}",
        backwards.stderr
    );
}

#[tokio::test]
async fn memory_purge_is_a_dry_run_unless_forced() {
    let s = servers().await;
    for text in ["I like tea.", "I live in Lyon.", "I like coffee."] {
        ok(s.cli().args(["--session", "a", "run", "--remember", text])).await;
    }
    let unmatched = [
        "memory",
        "purge",
        "--filter",
        "source?",
        "--after",
        "2000-01-01T00:00:00Z",
    ];
    // No entry has a `source` key: nothing matches.
    let none = ok(s.cli().args(unmatched)).await;
    assert_eq!(
        none.lines().next().unwrap(),
        "0 memories match; nothing deleted (--force deletes them)"
    );
    let dry = ok(s.cli().args(["memory", "purge", "--author", "user"])).await;
    assert_eq!(dry.lines().count(), 4, "{dry}");
    assert!(
        dry.starts_with("3 memories match; nothing deleted"),
        "{dry}"
    );
    assert_eq!(
        json_lines(&ok(s.cli().args(["memory", "list", "--json"])).await).len(),
        3
    );
    let forced = json_lines(
        &ok(s.cli().args([
            "memory",
            "purge",
            "--author",
            "user",
            "--all-users",
            "--force",
            "--json",
        ]))
        .await,
    );
    assert_eq!(forced[0]["count"], 3);
    assert_eq!(forced[0]["deleted"], true);
    let left = output(s.cli().args(["memory", "list"])).await;
    assert!(left.ok && left.stdout.is_empty());
    let unfiltered = output(s.cli().args(["memory", "purge", "--force"])).await;
    assert!(!unfiltered.ok);
    assert!(
        unfiltered.stderr.contains("filter"),
        "{}",
        unfiltered.stderr
    );
}

#[tokio::test]
async fn memory_list_and_delete() {
    let s = servers().await;
    for (session, text) in [
        ("a", "I like tea."),
        ("b", "I live in Lyon."),
        ("b", "I cycle to work."),
        ("c", "I read at night."),
    ] {
        ok(s.cli()
            .args(["--session", session, "run", "--remember", text]))
        .await;
    }
    let listed = json_lines(&ok(s.cli().args(["memory", "list", "--json"])).await);
    let sessions: Vec<&str> = listed
        .iter()
        .map(|m| m["session_id"].as_str().unwrap())
        .collect();
    // The recall agent's acknowledgements are not remembered.
    assert_eq!(sessions, ["a", "b", "b", "c"], "{listed:?}");
    let people = ok(s.cli().args(["memory", "list"])).await;
    let first_id = listed[0]["id"].as_str().unwrap();
    assert_eq!(
        people.lines().next().unwrap(),
        format!("{first_id}  user: I like tea.  (session a)")
    );

    let one = ok(s.cli().args(["memory", "delete", "--id", first_id])).await;
    assert_eq!(one.trim(), "deleted 1 memory");
    let session = ok(s.cli().args(["--session", "b", "memory", "delete"])).await;
    assert_eq!(session.trim(), "deleted 2 memories");
    let all = ok(s.cli().args(["memory", "delete", "--all", "--json"])).await;
    assert_eq!(json_lines(&all), [json!({"deleted": 1})]);
    let none = output(s.cli().args(["memory", "list"])).await;
    assert!(none.ok && none.stdout.is_empty());
    assert_eq!(none.stderr.trim(), "no memories of user alice in app demo");
    let usage = output(s.cli().args(["memory", "delete"])).await;
    assert!(!usage.ok);
    assert!(
        usage.stderr.contains("needs --id, --all or --session"),
        "{}",
        usage.stderr
    );
}

#[tokio::test]
async fn help_lists_a_commands_own_flags_first_and_completions_are_printed() {
    let help = ok(cli(NOWHERE, NOWHERE).args(["sessions", "list", "--help"])).await;
    assert!(!help.contains("--model"), "no agent flags: {help}");
    let own = help.find("Options:").expect("own options");
    let global = help.find("Global options:").expect("global options");
    assert!(own < global, "{help}");

    let help = ok(cli(NOWHERE, NOWHERE).args(["run", "--help"])).await;
    let model = help.find("--model <MODEL>").expect("run takes --model");
    assert!(model < help.find("Global options:").unwrap(), "{help}");

    let help = ok(cli(NOWHERE, NOWHERE).args(["completions", "--help"])).await;
    assert!(!help.contains("Global options"), "{help}");

    let bash = ok(cli(NOWHERE, NOWHERE).args(["completions", "bash"])).await;
    assert!(bash.contains("complete -F _runner__client"), "{bash}");
    let zsh = ok(cli(NOWHERE, NOWHERE).args(["completions", "zsh"])).await;
    assert!(zsh.starts_with("#compdef runner-client"), "{zsh}");
    let fish = ok(cli(NOWHERE, NOWHERE).args(["completions", "fish"])).await;
    assert!(fish.contains("complete -c runner-client"), "{fish}");
}

/// A text event of `bytes` bytes.
fn big_event(bytes: usize) -> adk_proto::session::v1::Event {
    adk_tests::text_event("user", &"x".repeat(bytes))
}

#[tokio::test]
async fn sessions_with_events_of_many_megabytes_are_read_and_continued() {
    let s = servers().await;
    s.sessions.create("demo", "alice", "big", json!({})).await;
    for bytes in [5 << 20, 15 << 20] {
        s.sessions
            .append("demo", "alice", "big", big_event(bytes))
            .await;
    }
    let got = json_lines(
        &ok(s
            .cli()
            .args(["--session", "big", "sessions", "get", "--json"]))
        .await,
    );
    let texts: Vec<usize> = got[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"]["parts"][0]["text"].as_str().unwrap().len())
        .collect();
    assert_eq!(texts, [5 << 20, 15 << 20]);

    // A turn loads the whole session.
    let told = ok(s.cli().args(["--session", "big", "run", "Noted?"])).await;
    assert!(told.starts_with("recall: "), "{told}");
}

/// A TCP relay on a loopback port of its own, forwarding each connection to the current backend
/// (none: the connection is closed at once). A server behind it can restart on another port and
/// still be found at the relay's address, which nobody else can take meanwhile.
struct Relay {
    addr: std::net::SocketAddr,
    backend: Arc<Mutex<Option<std::net::SocketAddr>>>,
}

impl Relay {
    async fn start(backend: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let backend = Arc::new(Mutex::new(Some(backend)));
        let current = backend.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Some(target) = *current.lock().unwrap() else {
                    continue;
                };
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self { addr, backend }
    }

    fn point_at(&self, backend: Option<std::net::SocketAddr>) {
        *self.backend.lock().unwrap() = backend;
    }
}

#[tokio::test]
async fn watch_reconnects_after_a_restart_and_gives_up_when_the_server_stays_away() {
    let s = servers().await;
    s.sessions.create("demo", "alice", "w", json!({})).await;
    let relay = Relay::start(s.sessions.addr).await;
    // Long enough for a restart on a busy machine; the give-up at the end waits this long.
    let relayed = format!("http://{}", relay.addr);
    let mut watcher = cli(&relayed, &s.memory_endpoint)
        .args(["--session", "w", "watch", "--json", "--give-up-after", "15"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let mut lines = BufReader::new(watcher.stdout.take().expect("piped")).lines();
    let mut errors = BufReader::new(watcher.stderr.take().expect("piped")).lines();
    ok(cli(&relayed, &s.memory_endpoint).args(["--session", "w", "run", "Hello."])).await;
    assert_eq!(next_sequence(&mut lines).await, 1);
    assert_eq!(next_sequence(&mut lines).await, 2);

    let Servers {
        sessions,
        _memory: memory,
        memory_endpoint,
        ..
    } = s;
    let sessions = sessions.restart().await;
    relay.point_at(Some(sessions.addr));
    ok(cli(&relayed, &memory_endpoint).args(["--session", "w", "run", "Again."])).await;
    // Resumed after #2: nothing twice, nothing missed.
    assert_eq!(next_sequence(&mut lines).await, 3);
    assert_eq!(next_sequence(&mut lines).await, 4);

    sessions.shutdown().await;
    relay.point_at(None);
    let status = tokio::time::timeout(Duration::from_secs(60), watcher.wait())
        .await
        .expect("watch gives up")
        .unwrap();
    assert!(!status.success());
    let mut stderr = Vec::new();
    while let Some(line) = errors.next_line().await.unwrap() {
        stderr.push(line);
    }
    let stderr = stderr.join("\n");
    assert!(
        stderr.contains(&format!(
            "the stream from session-svc at {relayed} ended; reconnecting in 0.2 s, resuming after #2"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("runner-client: reconnected"), "{stderr}");
    assert!(
        stderr.contains("resuming after #4") && stderr.contains("gave up reconnecting after 15 s"),
        "{stderr}"
    );
    drop(memory);
}

/// The sequence of the next event `watch --json` prints.
async fn next_sequence(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("an event line arrives")
        .unwrap()
        .expect("watch still running");
    serde_json::from_str::<Value>(&line).unwrap()["sequence"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_generate_then_a_later_turn_updates_a_fact_with_a_revision() {
    use adk_proto::memory::v1::ListMemoryRevisionsRequest;
    use adk_tests::chat_model::{decisions, facts, model, script};

    let (url, stand_in) = model(vec![]).await;
    let sessions = SessionServer::start().await;
    let session_endpoint = format!("http://{}", sessions.addr);
    let memory = MemoryServer::start_with(&session_endpoint, |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
    })
    .await;
    let cli = || cli(&session_endpoint, &format!("http://{}", memory.addr));

    ok(cli().args(["--session", "trip", "run"]).arg(
        "Book a window seat to Lisbon, as always. My daughter Mia starts school in September.",
    ))
    .await;
    let told = sessions.get("demo", "alice", "trip").await.events[0]
        .id
        .clone();
    script(
        &stand_in,
        vec![facts(&[
            (
                "preferences",
                "Alice prefers window seats.",
                &[told.as_str()],
            ),
            (
                "relationships",
                "Alice's daughter Mia starts school in September.",
                &[told.as_str()],
            ),
        ])],
    );
    // Queued, then waited for with `memory job --wait`.
    let queued = ok(cli().args([
        "--session",
        "trip",
        "memory",
        "generate",
        "--no-wait",
        "--json",
    ]))
    .await;
    let job = json_lines(&queued)[0]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let generated = ok(cli().args(["memory", "job", &job, "--wait"])).await;
    assert_eq!(
        generated.trim(),
        format!("job {job}: succeeded: 2 added, 0 updated, 0 superseded, 0 already known")
    );
    // The turn was not added to memory: the generated facts are all there is.
    let raw = output(cli().args(["memory", "list", "--kind", "raw"])).await;
    assert!(raw.ok && raw.stdout.is_empty(), "{}", raw.stdout);
    let found = ok(cli().args([
        "memory",
        "search",
        "--kind",
        "generated",
        "--json",
        "window seats",
    ]))
    .await;
    assert_eq!(
        json_lines(&found)[0]["content"]["parts"][0]["text"],
        "Alice prefers window seats."
    );
    let found = ok(cli().args(["memory", "search", "--kind", "raw", "window seats"])).await;
    assert!(found.is_empty(), "{found}");
    let listed =
        json_lines(&ok(cli().args(["memory", "list", "--kind", "generated", "--json"])).await);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let seats = listed
        .iter()
        .find(|m| m["content"]["parts"][0]["text"] == "Alice prefers window seats.")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A later session, generated after the turn: the seat preference changed.
    script(
        &stand_in,
        vec![
            facts(&[("preferences", "Alice now prefers aisle seats.", &[])]),
            decisions(&[(0, "update", &seats, "Alice prefers aisle seats.")]),
        ],
    );
    ok(cli()
        .args(["--session", "later", "run", "--generate"])
        .arg("Aisle seats from now on, please: window seats are too cramped."))
    .await;
    let mut c = memory.client.clone();
    let mut revisions = Vec::new();
    for _ in 0..200 {
        revisions = c
            .list_memory_revisions(ListMemoryRevisionsRequest {
                app_name: "demo".into(),
                user_id: "alice".into(),
                memory_id: seats.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .revisions;
        if revisions.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        revisions.len(),
        2,
        "the later turn's generation did not update the memory"
    );
    let (added, updated) = (&revisions[0].revision_id, &revisions[1].revision_id);
    let history = ok(cli().args(["memory", "revisions", "--id", &seats])).await;
    assert_eq!(
        history.lines().collect::<Vec<_>>(),
        [
            format!("{added}  {seats}  added        \"Alice prefers window seats.\""),
            format!(
                "{updated}  {seats}  updated      \"Alice prefers window seats.\" -> \"Alice prefers aisle seats.\""
            ),
        ]
    );

    // The update was wrong: rolled back to the revision that added the fact.
    let rolled = json_lines(&ok(cli().args(["memory", "rollback", &seats, added, "--json"])).await);
    assert_eq!(rolled[0]["action"], "rolled_back");
    assert_eq!(rolled[0]["restored_revision_id"], added.as_str());
    assert_eq!(rolled[0]["previous_fact"], "Alice prefers aisle seats.");
    assert_eq!(rolled[0]["new_fact"], "Alice prefers window seats.");
    let found = ok(cli().args(["memory", "search", "--kind", "generated", "seats"])).await;
    assert!(found.contains("Alice prefers window seats."), "{found}");
    assert!(!found.contains("aisle"), "{found}");
    let refused = output(cli().args(["memory", "rollback", &seats, "no-such-revision"])).await;
    assert!(!refused.ok);
    assert!(refused.stderr.contains("revision_id"), "{}", refused.stderr);
}

#[tokio::test]
async fn logs_written_to_a_file_hold_no_colour_codes() {
    let s = servers().await;
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("err.txt");
    let file = std::fs::File::create(&path).unwrap();
    let status = s
        .cli()
        .args(["sessions", "list"])
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(file)
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let logged = std::fs::read_to_string(&path).unwrap();
    assert!(logged.contains("DEBUG"), "debug lines are logged: {logged}");
    assert!(
        !logged.contains('\u{1b}'),
        "escape codes in a file: {logged:?}"
    );
}

#[tokio::test]
async fn watch_waits_for_a_session_that_does_not_exist_yet_when_asked() {
    let s = servers().await;
    let missing = output(s.cli().args(["--session", "later", "watch"])).await;
    assert!(!missing.ok);
    assert_eq!(
        missing.stderr.trim(),
        "runner-client: session later not found (watch --wait waits for it to be created)"
    );

    let mut watcher = s
        .cli()
        .args(["--session", "later", "watch", "--wait", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch starts");
    // Told it waits before the session exists: the session is created only after that.
    let mut stderr = BufReader::new(watcher.stderr.take().expect("piped")).lines();
    let said = tokio::time::timeout(Duration::from_secs(20), stderr.next_line())
        .await
        .expect("watch says it waits")
        .unwrap();
    assert_eq!(
        said.as_deref(),
        Some("runner-client: session later does not exist yet; waiting for it")
    );
    ok(s.cli().args(["--session", "later", "run", "Hello."])).await;
    let mut lines = BufReader::new(watcher.stdout.take().expect("piped")).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the first event arrives")
        .unwrap()
        .expect("watch still running");
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["sequence"], 1);
    assert_eq!(first["author"], "user");
}

#[tokio::test]
async fn memory_list_says_what_tool_call_entries_hold() {
    let s = servers().await;
    ok(s.cli().args(["--session", "a", "run", "I live in Lyon."])).await;
    ok(s.cli().args(["--session", "a", "run", "Where do I live?"])).await;
    // The whole session, as ADK's add_session_to_memory stores it.
    ok(s.cli().args(["--session", "a", "memory", "add-session"])).await;
    let people = ok(s.cli().args(["memory", "list"])).await;
    let texts: Vec<&str> = people
        .lines()
        .map(|line| {
            let (_id, rest) = line.split_once("  ").unwrap();
            rest.trim_end_matches("  (session a)")
        })
        .collect();
    assert_eq!(
        texts,
        [
            "user: I live in Lyon.",
            "recall: Noted.",
            "user: Where do I live?",
            "recall: [call load_memory {\"query\":\"Where do I live?\"}]",
            "recall: [load_memory returned 0 memories]",
            "recall: I don't remember anything about that.",
        ],
        "{people}"
    );
}

#[tokio::test]
async fn the_recall_agent_remembers_no_acknowledgement_or_tool_call() {
    let s = servers().await;
    for text in ["I live in Lyon.", "Where do I live?"] {
        ok(s.cli().args(["--session", "a", "run", "--remember", text])).await;
    }
    let people = ok(s.cli().args(["memory", "list"])).await;
    let texts: Vec<&str> = people
        .lines()
        .map(|line| {
            let (_id, rest) = line.split_once("  ").unwrap();
            rest.trim_end_matches("  (session a)")
        })
        .collect();
    assert_eq!(
        texts,
        [
            "user: I live in Lyon.",
            "user: Where do I live?",
            "recall: You told me: \"I live in Lyon.\"",
        ],
        "{people}"
    );
}

#[tokio::test]
async fn memory_stream_append_buffers_each_event_once_and_flush_starts_generation() {
    use adk_tests::chat_model::{facts, model, requests};

    let (url, stand_in) = model(vec![facts(&[(
        "preferences",
        "Alice drinks green tea.",
        &["e1"],
    )])])
    .await;
    let memory = MemoryServer::start_with("http://127.0.0.1:1", |config| {
        config.generator = format!("openai:{url}").parse().unwrap();
        config.generator_model = Some("stand-in".into());
    })
    .await;
    let cli = || cli("http://127.0.0.1:1", &format!("http://{}", memory.addr));
    let append = |id: &'static str, text: &'static str| {
        let mut command = cli();
        command.args([
            "--session",
            "chat",
            "memory",
            "stream",
            "append",
            "--id",
            id,
            text,
        ]);
        command
    };
    let first = ok(&mut append("e1", "I drink green tea.")).await;
    assert_eq!(first, "event e1 buffered; stream chat holds 1 event\n");
    let again = ok(&mut append("e1", "I drink green tea.")).await;
    assert_eq!(again, "event e1 already held; stream chat holds 1 event\n");
    let listed = ok(cli().args(["memory", "stream", "list"])).await;
    assert!(listed.starts_with("chat  1 event  20"), "{listed}");
    let listed = json_lines(&ok(cli().args(["--json", "memory", "stream", "list"])).await);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (&listed[0]["stream_id"], &listed[0]["buffered"]),
        (&json!("chat"), &json!(1))
    );
    let flushed = json_lines(
        &ok(cli().args(["--json", "memory", "stream", "flush", "--stream", "chat"])).await,
    );
    let job = flushed[0]["job_id"].as_str().expect("a job").to_owned();
    let done = ok(cli().args(["memory", "job", &job, "--wait"])).await;
    assert!(done.contains("succeeded: 1 added"), "{done}");
    assert_eq!(requests(&stand_in).len(), 1);
    let empty = ok(cli().args(["--session", "chat", "memory", "stream", "flush"])).await;
    assert_eq!(
        empty,
        "stream chat holds no events: nothing to generate from\n"
    );
    let none = ok(cli().args(["--json", "memory", "stream", "list"])).await;
    assert_eq!(none, "", "a stream handed over is not listed");
}
