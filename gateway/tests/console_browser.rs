//! The web console in a real headless browser (Chromium driven over WebDriver by
//! chromedriver), served by the gateway binary in front of real servers: signing in, browsing, live follow,
//! the activity feed, memory search, deletion and a generated fact's rollback, filters and purges,
//! event streams listed and flushed, escaping of hostile text, scoped tokens, and large
//! sessions and apps. Screenshots go to `target/console-screenshots/`; with
//! `ADK_CONSOLE_UPDATE_DOCS=1` the session view also replaces `docs/console.png`.
//!
//! Needs `chromium` and `chromium-driver` (Debian packages); `.ci/run` installs them and runs
//! this suite with `--ignored`.

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use crate::console_fixture::{Fixture, Memories, A_TOKEN, B_SECRET, HOSTILE, OPS_TOKEN, SCRIPT};
use adk_proto::{
    memory::v1::{ListMemoryRevisionsRequest, ListMemoryStreamsRequest, RevisionAction},
    session::v1::{AppendEventRequest, Event},
};
use adk_tests::{append_request, create_request, text_event};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long the page may take to show something.
const PATIENCE: Duration = Duration::from_secs(15);

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: tokio::process::Child,
    port: u16,
}

impl Driver {
    async fn start() -> Self {
        let mut child = tokio::process::Command::new("chromedriver")
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        // "ChromeDriver was started successfully on port 40943."
        let port = loop {
            let line = lines
                .next_line()
                .await
                .expect("reads chromedriver's output")
                .expect("chromedriver announces its port");
            if let Some(rest) = line.split(" on port ").nth(1) {
                if line.contains("started successfully") {
                    break rest.trim_end_matches('.').parse().expect("a port number");
                }
            }
        };
        Driver { child, port }
    }

    async fn browser(&self, profile: &std::path::Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), json!({ "args": args }));
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a browser session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("creates the screenshot directory");
    dir
}

async fn screenshot(browser: &Client, name: &str) {
    let png = browser.screenshot().await.expect("takes a screenshot");
    std::fs::write(screenshots().join(format!("{name}.png")), &png).expect("writes it");
    if name == "session" && std::env::var_os("ADK_CONSOLE_UPDATE_DOCS").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/console.png");
        std::fs::write(docs, &png).expect("writes docs/console.png");
    }
}

/// Runs `script` (a function body returning a value) until it returns something truthy.
async fn until(browser: &Client, what: &str, script: &str, args: Vec<Value>) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let value = browser
            .execute(script, args.clone())
            .await
            .expect("script runs");
        let truthy = !matches!(&value, Value::Null | Value::Bool(false))
            && value != json!(0)
            && value != json!("");
        if truthy {
            return value;
        }
        if Instant::now() > deadline {
            let text = browser
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            panic!("timed out waiting for {what}; the page shows:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until some element matching `css` has exactly `text` as its text.
async fn until_text(browser: &Client, css: &str, text: &str) {
    until(
        browser,
        &format!("{css} with text {text:?}"),
        "return [...document.querySelectorAll(arguments[0])].some(e => e.textContent === arguments[1])",
        vec![json!(css), json!(text)],
    )
    .await;
}

async fn text_of(browser: &Client, css: &str) -> String {
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .text()
        .await
        .expect("element text")
}

async fn go(browser: &Client, url: &str) {
    browser.goto(url).await.expect("navigates");
}

/// Waits until the confirmation dialog is open (`open`) or closed.
async fn confirmation(browser: &Client, open: bool) {
    let (what, script) = if open {
        (
            "the confirmation",
            "return document.getElementById('confirm').open",
        )
    } else {
        (
            "the dialog closed",
            "return !document.getElementById('confirm').open",
        )
    };
    until(browser, what, script, vec![]).await;
}

async fn click(browser: &Client, css: &str) {
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .click()
        .await
        .expect("clicks");
}

/// Fails if the page shows a JavaScript non-value ("null", "undefined") as text: a child or
/// field the page forgot to leave out.
async fn no_stray_values(browser: &Client, page: &str) {
    let text = browser
        .execute("return document.body.innerText", vec![])
        .await
        .expect("reads the page");
    let text = text.as_str().unwrap_or_default();
    let stray: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| matches!(*word, "null" | "undefined" | "NaN"))
        .collect();
    assert!(stray.is_empty(), "the {page} page shows {stray:?}:\n{text}");
}

/// Signs in from a fresh load of the start page.
async fn sign_in(browser: &Client, console: &str, token: &str) {
    go(browser, &format!("{console}/?sign-in")).await;
    let input = browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#token"))
        .await
        .expect("the sign-in form: the services require a token");
    input.send_keys(token).await.expect("types");
    click(browser, "#login button[type=submit]").await;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#health"))
        .await
        .expect("the home page after signing in");
}

/// Appends `count` events to a session over one AppendEvents stream.
async fn append_many(fixture: &Fixture, app: &str, user: &str, id: &str, count: usize) {
    let requests: Vec<AppendEventRequest> = (1..=count)
        .map(|i| {
            append_request(
                app,
                user,
                id,
                text_event("agent", &format!("bulk event {i}")),
            )
        })
        .collect();
    let mut responses = fixture
        .sessions
        .clone()
        .append_events(tokio_stream::iter(requests))
        .await
        .expect("append_events")
        .into_inner();
    let mut acknowledged = 0;
    while let Some(response) = responses.message().await.expect("a response") {
        assert_eq!(response.code, 0, "append failed: {}", response.message);
        acknowledged += 1;
    }
    assert_eq!(acknowledged, count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver; .ci/run runs it"]
async fn the_console_in_a_browser() {
    let fixture = Fixture::start().await;
    let console = fixture.url();
    let driver = Driver::start().await;
    let profile = tempfile::TempDir::new().expect("profile dir");
    let browser = driver.browser(profile.path()).await;

    // Signing in: the services require tokens, so the console asks for one.
    go(&browser, &format!("{console}/")).await;
    text_of(&browser, "#login h1").await;
    no_stray_values(&browser, "sign-in").await;
    // A plain prompt, not the services' refusal of a call without a token.
    let prompt = text_of(&browser, "#login").await;
    assert!(
        prompt.contains("sign in with the bearer token") && !prompt.contains("Unauthenticated"),
        "{prompt}"
    );
    screenshot(&browser, "sign-in").await;
    sign_in(&browser, &console, OPS_TOKEN).await;
    until(
        &browser,
        "both services SERVING",
        "return document.querySelectorAll('#health .status-SERVING').length === 2",
        vec![],
    )
    .await;
    until_text(&browser, "#apps a", "a").await;
    until_text(&browser, "#apps a", "b").await;
    no_stray_values(&browser, "home").await;

    // Apps → users → sessions → a session.
    click(&browser, "#apps a[href='#/app/a']").await;
    until_text(&browser, "#users a", "alice").await;
    no_stray_values(&browser, "app").await;
    click(&browser, "#users a[href='#/app/a/user/alice']").await;
    until_text(&browser, "#sessions a", "s1").await;
    no_stray_values(&browser, "user").await;
    click(&browser, "#sessions a").await;
    until_text(&browser, "#events .text", "What is my favourite project?").await;

    // Function calls and responses, state deltas, state split by scope.
    until_text(&browser, "#events .part-label", "call load_memory").await;
    until_text(&browser, "#events .part-label", "response load_memory").await;
    until_text(&browser, "#events .part-label", "state delta").await;
    let state = |scope: &str| {
        format!("return JSON.parse(document.querySelector('#state-{scope} pre').textContent)")
    };
    assert_eq!(
        browser.execute(&state("app"), vec![]).await.unwrap(),
        json!({"plan": "pro"})
    );
    assert_eq!(
        browser.execute(&state("user"), vec![]).await.unwrap(),
        json!({"lang": "en", "visits": 3})
    );
    assert_eq!(
        browser.execute(&state("session"), vec![]).await.unwrap(),
        json!({"topic": "console", "answered": true})
    );

    // Hostile text is text: no element is made of it, no script ran.
    until_text(&browser, "#events .text", HOSTILE).await;
    until_text(&browser, "#events .text", SCRIPT).await;
    let injected = browser
        .execute(
            "return document.querySelectorAll('#events img, #events script').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(injected, json!(0), "hostile text became elements");
    assert_eq!(browser.title().await.unwrap(), "ADK console");
    assert!(browser.get_alert_text().await.is_err(), "an alert is open");

    // Live: an event appended through gRPC appears without a reload; partial fragments show
    // as they stream and give way to the final event.
    until_text(&browser, "#live-status", "live").await;
    browser
        .execute("window.notReloaded = true", vec![])
        .await
        .unwrap();
    assert_eq!(
        fixture.in_flight("WatchSession").await,
        1.0,
        "the page follows the session"
    );
    let partial = |text: &str| Event {
        partial: Some(true),
        ..text_event("helper", text)
    };
    fixture
        .append("a", "alice", "s1", partial("Your favourite "))
        .await;
    fixture
        .append("a", "alice", "s1", partial("project is the console"))
        .await;
    until_text(
        &browser,
        "#events .event.partial .text",
        "Your favourite project is the console",
    )
    .await;
    until_text(&browser, "#events .badge.partial", "partial").await;
    fixture
        .append(
            "a",
            "alice",
            "s1",
            text_event("helper", "Your favourite project is the console."),
        )
        .await;
    until_text(
        &browser,
        "#events .text",
        "Your favourite project is the console.",
    )
    .await;
    until(
        &browser,
        "the partial row gone",
        "return document.querySelectorAll('#events .event.partial').length === 0",
        vec![],
    )
    .await;
    fixture
        .append("a", "alice", "s1", text_event("user", "live hello"))
        .await;
    until_text(&browser, "#events .text", "live hello").await;
    no_stray_values(&browser, "session").await;
    assert_eq!(
        browser
            .execute("return window.notReloaded", vec![])
            .await
            .unwrap(),
        json!(true)
    );
    screenshot(&browser, "session").await;

    // Closing the view (the tab navigates away) cancels the WatchSession call.
    go(&browser, "about:blank").await;
    let deadline = Instant::now() + PATIENCE;
    while fixture.in_flight("WatchSession").await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "WatchSession still in flight after the page closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The app's activity feed: live, and resumed after leaving and coming back.
    go(&browser, &format!("{console}/#/app/a/feed")).await;
    until_text(&browser, "#live-status", "live").await;
    fixture
        .append("a", "alice", "s1", text_event("user", "feed one"))
        .await;
    until_text(&browser, "#feed .text", "feed one").await;
    go(&browser, "about:blank").await;
    fixture
        .append("a", "alice", "s1", text_event("user", "feed while away"))
        .await;
    go(&browser, &format!("{console}/#/app/a/feed")).await;
    until_text(&browser, "#feed .text", "feed while away").await;
    until_text(&browser, "#feed .text", "feed one").await;
    let order = browser
        .execute(
            "return [...document.querySelectorAll('#feed .text')].map(e => e.textContent)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        order,
        json!(["feed while away", "feed one"]),
        "newest first, nothing twice"
    );
    screenshot(&browser, "feed").await;
    no_stray_values(&browser, "feed").await;

    // Memory: ranked search results.
    go(&browser, &format!("{console}/#/app/a/user/alice/memory")).await;
    until_text(&browser, "#memory-total", "4").await;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#search-q"))
        .await
        .unwrap()
        .send_keys("console")
        .await
        .unwrap();
    click(&browser, "#search button[type=submit]").await;
    until(
        &browser,
        "search results",
        "return document.querySelectorAll('#results tbody tr').length",
        vec![],
    )
    .await;
    let ranked = browser
        .execute(
            "return [...document.querySelectorAll('#results tbody tr')].map(r => [r.dataset.id, Number(r.querySelector('.score').textContent)])",
            vec![],
        )
        .await
        .unwrap();
    let ranked: Vec<(String, f64)> = serde_json::from_value(ranked).unwrap();
    assert_eq!(
        ranked.first().map(|r| r.0.as_str()),
        Some("m-best"),
        "{ranked:?}"
    );
    // The three entries about the console, and m-food, next to one of them in its session
    // (found by its context).
    assert_eq!(ranked.len(), 4, "{ranked:?}");
    assert!(
        ranked.windows(2).all(|w| w[0].1 >= w[1].1),
        "best first: {ranked:?}"
    );
    assert!(ranked.iter().all(|r| r.1 > 0.0), "scores shown: {ranked:?}");
    screenshot(&browser, "memory-search").await;
    no_stray_values(&browser, "memory").await;

    // Deleting needs a confirmation: cancelling deletes nothing.
    click(&browser, "#memories tr[data-id='m-food'] .delete-entry").await;
    confirmation(&browser, true).await;
    screenshot(&browser, "memory-delete-confirm").await;
    click(&browser, "#confirm-cancel").await;
    confirmation(&browser, false).await;
    assert!(
        fixture.memory_ids().await.contains(&"m-food".to_owned()),
        "cancel deleted it"
    );
    click(&browser, "#memories tr[data-id='m-food'] .delete-entry").await;
    confirmation(&browser, true).await;
    click(&browser, "#confirm-ok").await;
    until_text(&browser, "#memory-message .notice", "Deleted 1 entry.").await;
    assert!(
        !fixture.memory_ids().await.contains(&"m-food".to_owned()),
        "not deleted"
    );
    until(
        &browser,
        "the list without the entry",
        "return !document.querySelector(\"#memories tr[data-id='m-food']\")",
        vec![],
    )
    .await;
    // A session's entries, from a search result.
    click(&browser, "#results tr[data-id='m-best'] .delete-session").await;
    confirmation(&browser, true).await;
    click(&browser, "#confirm-ok").await;
    until_text(&browser, "#memory-message .notice", "Deleted 2 entries.").await;
    assert_eq!(fixture.memory_ids().await, vec!["m-old".to_owned()]);

    // A page whose answers come late never replaces the page opened after it: the home page's
    // list of apps is held back half a second while the memory page is opened again.
    browser
        .execute(
            "const fetchNow = window.fetch;
             window.fetch = (path, options) => fetchNow(path, options).then((reply) =>
               path !== '/api/apps' ? reply : new Promise((done) => setTimeout(() => {
                 done(reply);
                 setTimeout(() => { window.lateAnswerSettled = true; }, 300);
               }, 500)));
             const memory = location.hash;
             location.hash = '#/';
             setTimeout(() => { location.hash = memory; }, 100);",
            vec![],
        )
        .await
        .expect("navigates");
    until(
        &browser,
        "the home page's late answer",
        "return window.lateAnswerSettled === true",
        vec![],
    )
    .await;
    let shown = browser
        .execute(
            "return [!!document.getElementById('memories'), !!document.getElementById('apps')]",
            vec![],
        )
        .await
        .expect("script runs");
    assert_eq!(shown, json!([true, false]), "the memory page stays");

    // A generated fact's history, and a rollback through the page.
    let fact = fixture.generated_and_updated().await;
    let memories = fixture.memories.clone();
    // The page shows the memory page already: reloaded, it lists the facts just generated.
    browser.refresh().await.expect("reloads");
    until_text(&browser, "#memories .memory-text", "Alice lives in Lisbon.").await;
    click(
        &browser,
        &format!("#memories tr[data-id='{fact}'] .history"),
    )
    .await;
    let listed = until(
        &browser,
        "the memory's two revisions",
        "const rows = [...document.querySelectorAll('#revisions tbody tr')]
             .map(r => [r.dataset.revision, r.querySelector('.action').textContent]);
         return rows.length === 2 && rows;",
        vec![],
    )
    .await;
    let listed: Vec<(String, String)> = serde_json::from_value(listed).unwrap();
    assert_eq!(
        listed.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["added", "updated"]
    );
    let added = listed[0].0.clone();
    screenshot(&browser, "memory-history").await;
    // Rolling back needs a confirmation too: cancelling changes nothing.
    let button = format!("#revisions tr[data-revision='{added}'] .rollback");
    click(&browser, &button).await;
    confirmation(&browser, true).await;
    assert_eq!(text_of(&browser, "#confirm-ok").await, "Roll back");
    click(&browser, "#confirm-cancel").await;
    confirmation(&browser, false).await;
    let history = |memories: Memories| {
        let fact = fact.clone();
        async move {
            let mut memories = memories;
            memories
                .list_memory_revisions(ListMemoryRevisionsRequest {
                    app_name: "a".into(),
                    user_id: "alice".into(),
                    memory_id: fact,
                    ..Default::default()
                })
                .await
                .expect("list_memory_revisions")
                .into_inner()
                .revisions
        }
    };
    assert_eq!(
        history(memories.clone()).await.len(),
        2,
        "cancel rolled back"
    );
    click(&browser, &button).await;
    confirmation(&browser, true).await;
    click(&browser, "#confirm-ok").await;
    until_text(
        &browser,
        "#memory-message .notice",
        &format!("Rolled memory {fact} back to revision {added}."),
    )
    .await;
    until_text(&browser, "#memories .memory-text", "Alice lives in Berlin.").await;
    until_text(
        &browser,
        "#revisions .action",
        &format!("rolled back (to {added})"),
    )
    .await;
    let revisions = history(memories.clone()).await;
    let last = revisions.last().expect("revisions");
    assert_eq!(revisions.len(), 3);
    assert_eq!(last.action, RevisionAction::RolledBack as i32);
    assert_eq!(last.restored_revision_id, added);
    assert_eq!(last.new_fact, "Alice lives in Berlin.");
    screenshot(&browser, "memory-rolled-back").await;

    // A 10,000-event session: paged, one page of rows in the page at a time.
    fixture.create("a", "bulk", "big", json!({})).await;
    append_many(&fixture, "a", "bulk", "big", 10_000).await;
    go(
        &browser,
        &format!("{console}/#/app/a/user/bulk/session/big"),
    )
    .await;
    until_text(
        &browser,
        "#event-pager .page-info",
        "Page 100 of 100 (10000 events)",
    )
    .await;
    until_text(&browser, "#events .text", "bulk event 10000").await;
    let rows = "return document.querySelectorAll('#events .event').length";
    assert_eq!(browser.execute(rows, vec![]).await.unwrap(), json!(100));
    click(&browser, "#event-pager button:first-child").await;
    until_text(
        &browser,
        "#event-pager .page-info",
        "Page 1 of 100 (10000 events)",
    )
    .await;
    until_text(
        &browser,
        "#events .event:first-child .meta span:first-child",
        "#1",
    )
    .await;
    assert_eq!(browser.execute(rows, vec![]).await.unwrap(), json!(100));
    screenshot(&browser, "big-session").await;
    no_stray_values(&browser, "big session").await;

    // 1,000 sessions: newest first, paged, filtered by id prefix and user.
    let ids: Vec<usize> = (0..1000).collect();
    for chunk in ids.chunks(50) {
        futures::future::join_all(chunk.iter().map(|&i| {
            let mut sessions = fixture.sessions.clone();
            async move {
                sessions
                    .create_session(create_request(
                        "a",
                        &format!("user-{}", i % 10),
                        &format!("many-{i:04}"),
                        "",
                    ))
                    .await
                    .expect("create_session")
            }
        }))
        .await;
    }
    fixture
        .append("a", "user-3", "many-0003", text_event("user", "touch"))
        .await;
    go(&browser, &format!("{console}/#/app/a/sessions")).await;
    until_text(&browser, ".page-info", "Page 1 of 21 (1002 in all)").await;
    let first = "return document.querySelector('#sessions tbody tr td a').textContent";
    assert_eq!(
        browser.execute(first, vec![]).await.unwrap(),
        json!("many-0003"),
        "the last updated first"
    );
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('#sessions tbody tr').length",
                vec![]
            )
            .await
            .unwrap(),
        json!(50)
    );
    screenshot(&browser, "sessions").await;
    no_stray_values(&browser, "sessions").await;
    // Sessions created in the same concurrent batch have no set order: touch one to know
    // which is the newest of user-7's.
    fixture
        .append("a", "user-7", "many-0917", text_event("user", "touch"))
        .await;
    go(
        &browser,
        &format!("{console}/#/app/a/sessions?user=user-7&prefix=many-09"),
    )
    .await;
    until_text(&browser, ".page-info", "Page 1 of 1 (10 in all)").await;
    assert_eq!(
        browser.execute(first, vec![]).await.unwrap(),
        json!("many-0917")
    );
    go(&browser, &format!("{console}/#/app/a")).await;
    until_text(&browser, "#figures .figure", "1002").await;
    no_stray_values(&browser, "app figures").await;

    // Every list says when it has nothing in it.
    fixture.create("a", "alice", "quiet", json!({})).await;
    for (page, says) in [
        (
            "#/app/nope",
            "App nope has no sessions yet (an app exists once a session is created in it).",
        ),
        (
            "#/app/a?prefix=zzz",
            "No user of a has an id starting with \"zzz\".",
        ),
        ("#/app/a/user/nobody", "User nobody has no sessions in a."),
        ("#/app/nope/sessions", "App nope has no sessions yet."),
        (
            "#/app/nope/feed",
            "No activity yet: events of nope appear here, newest first, as they are appended.",
        ),
        (
            "#/app/a/user/nobody/memory",
            "User nobody has no memories in a.",
        ),
        (
            "#/app/a/user/alice/session/quiet",
            "No events yet: they appear here as they are appended.",
        ),
    ] {
        go(&browser, &format!("{console}/{page}")).await;
        until_text(&browser, ".empty", says).await;
        no_stray_values(&browser, page).await;
    }
    // The empty session fills as events are appended.
    until_text(&browser, "#live-status", "live").await;
    fixture
        .append("a", "alice", "quiet", text_event("user", "first words"))
        .await;
    until_text(&browser, "#events .text", "first words").await;
    until(
        &browser,
        "the empty state gone",
        "return !document.querySelector('#events .empty')",
        vec![],
    )
    .await;
    screenshot(&browser, "empty-states").await;

    // A token scoped to app `a` does not see app `b` through the console.
    click(&browser, "#logout").await;
    sign_in(&browser, &console, A_TOKEN).await;
    until_text(&browser, "#apps a", "a").await;
    let apps = browser
        .execute(
            "return [...document.querySelectorAll('#apps a')].map(a => a.textContent)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(apps, json!(["a"]));
    go(&browser, &format!("{console}/#/app/b")).await;
    until(
        &browser,
        "the refusal",
        "return document.querySelector('.error')?.textContent.includes('may not access app')",
        vec![],
    )
    .await;
    go(
        &browser,
        &format!("{console}/#/app/b/user/bob/session/secret-b"),
    )
    .await;
    until(
        &browser,
        "the refusal",
        "return document.querySelector('.error')?.textContent.includes('may not access app')",
        vec![],
    )
    .await;
    go(&browser, &format!("{console}/#/app/b/feed")).await;
    until(
        &browser,
        "the refusal",
        "return document.querySelector('.error')?.textContent.includes('may not access app')",
        vec![],
    )
    .await;
    let shown = browser
        .execute("return document.body.innerText", vec![])
        .await
        .unwrap();
    assert!(!shown.as_str().unwrap_or_default().contains(B_SECRET));
    screenshot(&browser, "scoped-token").await;
    no_stray_values(&browser, "refusal").await;

    browser.close().await.expect("closes the browser");
}

/// The `data-id`s of the rows of `css`.
async fn row_ids(browser: &Client, css: &str) -> Vec<String> {
    let ids = browser
        .execute(
            "return [...document.querySelectorAll(arguments[0])].map(r => r.dataset.id)",
            vec![json!(css)],
        )
        .await
        .expect("script runs");
    serde_json::from_value(ids).expect("ids")
}

async fn type_into(browser: &Client, css: &str, text: &str) {
    let field = browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"));
    field.clear().await.expect("clears");
    field.send_keys(text).await.expect("types");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver; .ci/run runs it"]
async fn memory_filters_and_a_purge_in_a_browser() {
    let fixture = Fixture::start().await;
    fixture.carol_with_metadata().await;
    let all = ["c-red", "c-blue", "c-vip", "c-plain"];
    let console = fixture.url();
    let driver = Driver::start().await;
    let profile = tempfile::TempDir::new().expect("profile dir");
    let browser = driver.browser(profile.path()).await;
    sign_in(&browser, &console, OPS_TOKEN).await;
    go(&browser, &format!("{console}/#/app/a/user/carol/memory")).await;
    until_text(&browser, "#memory-total", "4").await;

    // A filtered search, then the list with the same filters.
    type_into(&browser, "#filter-conditions", "n>=3").await;
    type_into(&browser, "#search-q", "kite").await;
    click(&browser, "#search button[type=submit]").await;
    until(
        &browser,
        "filtered search results",
        "return document.querySelectorAll('#results tbody tr').length === 2",
        vec![],
    )
    .await;
    let mut found = row_ids(&browser, "#results tbody tr").await;
    found.sort();
    assert_eq!(found, ["c-red", "c-vip"]);
    click(&browser, "#filter-apply").await;
    until(
        &browser,
        "the filtered list",
        "return document.querySelectorAll('#memories tbody tr').length === 2",
        vec![],
    )
    .await;
    assert_eq!(
        row_ids(&browser, "#memories tbody tr").await,
        ["c-red", "c-vip"]
    );
    assert_eq!(text_of(&browser, "#memory-total").await, "4");
    screenshot(&browser, "memory-filtered").await;
    no_stray_values(&browser, "filtered memory").await;

    // The purge: a dry run first, which deletes nothing.
    click(&browser, "#purge-dry-run").await;
    until_text(
        &browser,
        "#purge-count",
        "2 memories of carol match; nothing is deleted yet.",
    )
    .await;
    assert_eq!(
        row_ids(&browser, "#purge-sample tbody tr").await,
        ["c-red", "c-vip"]
    );
    assert_eq!(fixture.memory_ids_of("carol").await, all);
    screenshot(&browser, "memory-purge-dry-run").await;
    // Cancelling the confirmation deletes nothing either.
    click(&browser, "#purge-confirm").await;
    confirmation(&browser, true).await;
    assert_eq!(text_of(&browser, "#confirm-ok").await, "Purge");
    click(&browser, "#confirm-cancel").await;
    confirmation(&browser, false).await;
    assert_eq!(fixture.memory_ids_of("carol").await, all, "cancel purged");
    // Confirmed: those memories go, and the page says so.
    click(&browser, "#purge-confirm").await;
    confirmation(&browser, true).await;
    click(&browser, "#confirm-ok").await;
    until(
        &browser,
        "the purge's result",
        "return document.querySelector('#memory-message .notice')?.textContent.startsWith('Purged 2 memories (operation ')",
        vec![],
    )
    .await;
    assert_eq!(fixture.memory_ids_of("carol").await, ["c-blue", "c-plain"]);
    until_text(
        &browser,
        "#memory-list .empty",
        "No memory passes these filters.",
    )
    .await;
    until_text(
        &browser,
        "#search-results .empty",
        "Nothing in memory matches.",
    )
    .await;
    until(
        &browser,
        "the dry run's preview gone",
        "return !document.querySelector('#purge-confirm')",
        vec![],
    )
    .await;
    screenshot(&browser, "memory-purged").await;
    no_stray_values(&browser, "purged memory").await;

    // A filter the syntax cannot read: the page says which field, and nothing is deleted.
    type_into(&browser, "#filter-conditions", "color").await;
    click(&browser, "#purge-dry-run").await;
    until(
        &browser,
        "the refusal",
        "return document.querySelector('#purge-preview .error')?.textContent.startsWith('filter: ')",
        vec![],
    )
    .await;
    assert_eq!(fixture.memory_ids_of("carol").await, ["c-blue", "c-plain"]);

    browser.close().await.expect("closes the browser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromium-driver; .ci/run runs it"]
async fn event_streams_flushed_from_the_memory_page() {
    let fixture = Fixture::start().await;
    fixture.streamed("erin", "chat", &["e1", "e2"]).await;
    fixture.streamed("erin", "notes", &["n1"]).await;
    let console = fixture.url();
    let driver = Driver::start().await;
    let profile = tempfile::TempDir::new().expect("profile dir");
    let browser = driver.browser(profile.path()).await;
    sign_in(&browser, &console, OPS_TOKEN).await;
    go(&browser, &format!("{console}/#/app/a/user/erin/memory")).await;
    let streams = || async {
        let listed = browser
            .execute(
                "return [...document.querySelectorAll('#stream-list tbody tr')].map(r => [r.dataset.stream, r.querySelector('.buffered').textContent])",
                vec![],
            )
            .await
            .expect("script runs");
        serde_json::from_value::<Vec<(String, String)>>(listed).expect("rows")
    };
    until(
        &browser,
        "the streams",
        "return document.querySelectorAll('#stream-list tbody tr').length === 2",
        vec![],
    )
    .await;
    assert_eq!(
        streams().await,
        [("chat".into(), "2".into()), ("notes".into(), "1".into())]
    );
    screenshot(&browser, "memory-streams").await;
    no_stray_values(&browser, "memory streams").await;

    // A stream's Flush button: no confirmation, the job shown, the stream gone from the list.
    click(&browser, "#stream-list tr[data-stream=chat] button.flush").await;
    until(
        &browser,
        "the flush's job",
        "return document.querySelector('#stream-result .notice')?.textContent.startsWith('Stream chat handed to generation: job ')",
        vec![],
    )
    .await;
    until(
        &browser,
        "chat gone from the list",
        "return document.querySelectorAll('#stream-list tbody tr').length === 1",
        vec![],
    )
    .await;
    assert_eq!(streams().await, [("notes".into(), "1".into())]);

    // A stream flushed by id; then again, when it holds nothing.
    type_into(&browser, "#stream-id", "notes").await;
    click(&browser, "#stream-flush button[type=submit]").await;
    until(
        &browser,
        "the second flush's job",
        "return document.querySelector('#stream-result .notice')?.textContent.startsWith('Stream notes handed to generation: job ')",
        vec![],
    )
    .await;
    until_text(
        &browser,
        "#streams .empty",
        "No stream holds events waiting for generation.",
    )
    .await;
    click(&browser, "#stream-flush button[type=submit]").await;
    until_text(
        &browser,
        "#stream-result .notice",
        "Stream notes holds no events; nothing to generate from.",
    )
    .await;
    let left = fixture
        .memories
        .clone()
        .list_memory_streams(ListMemoryStreamsRequest {
            app_name: "a".into(),
            user_id: "erin".into(),
        })
        .await
        .expect("list_memory_streams")
        .into_inner();
    assert!(left.streams.is_empty(), "{left:?}");
    no_stray_values(&browser, "flushed streams").await;

    browser.close().await.expect("closes the browser");
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; .ci/run runs it"]
async fn superseded_memories_show_when_asked_for_in_a_browser() {
    let fixture = Fixture::start().await;
    fixture.erin_who_moved().await;
    let console = fixture.url();
    let driver = Driver::start().await;
    let profile = tempfile::TempDir::new().expect("profile dir");
    let browser = driver.browser(profile.path()).await;
    sign_in(&browser, &console, OPS_TOKEN).await;
    go(&browser, &format!("{console}/#/app/a/user/erin/memory")).await;
    until_text(&browser, "#memory-total", "1").await;
    assert_eq!(row_ids(&browser, "#memories tbody tr").await, ["e-lisbon"]);
    click(&browser, "#filter-superseded").await;
    click(&browser, "#filter-apply").await;
    until(
        &browser,
        "the list with superseded memories",
        "return document.querySelectorAll('#memories tbody tr').length === 2",
        vec![],
    )
    .await;
    assert_eq!(
        row_ids(&browser, "#memories tbody tr").await,
        ["e-berlin", "e-lisbon"]
    );
    let badges = until(
        &browser,
        "the superseded mark",
        "return [...document.querySelectorAll('#memories .superseded')].map(b => b.textContent)",
        vec![],
    )
    .await;
    assert_eq!(badges.as_array().map(Vec::len), Some(1), "{badges}");
    assert!(
        badges[0]
            .as_str()
            .unwrap_or_default()
            .starts_with("superseded "),
        "{badges}"
    );
    screenshot(&browser, "memory-superseded").await;
    no_stray_values(&browser, "superseded memory").await;
}
