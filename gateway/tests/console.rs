//! The web console's HTTP API, served by the gateway binary in front of real servers that
//! require tokens: signing in, what a scoped token may see, writes that must come from the
//! page, the Host and Origin checks it shares with `/mcp`, and the bound on live views per
//! browser. (The page itself is tested in a real browser by `console_browser.rs`.)

use crate::console_fixture::{Fixture, A_TOKEN, B_SECRET, OPS_TOKEN};
use adk_tests::text_event;
use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};

/// A browser: a client keeping nothing but the console's login cookie it is given.
struct Browser {
    http: Client,
    console: String,
    cookie: Option<String>,
}

impl Browser {
    fn new(fixture: &Fixture) -> Self {
        Browser {
            http: Client::new(),
            console: fixture.url(),
            cookie: None,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.console));
        if let Some(cookie) = &self.cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .expect("GET");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A write as the page makes it (with the console's write header).
    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .request(reqwest::Method::POST, path)
            .header("x-console-write", "1")
            .json(&body)
            .send()
            .await
            .expect("POST");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Signs in and keeps the login cookie.
    async fn sign_in(&mut self, token: &str) {
        let response = self
            .request(reqwest::Method::POST, "/api/login")
            .header("x-console-write", "1")
            .json(&json!({ "token": token }))
            .send()
            .await
            .expect("POST /api/login");
        assert_eq!(response.status(), StatusCode::OK);
        let set_cookie = response
            .headers()
            .get(header::SET_COOKIE)
            .expect("a login cookie")
            .to_str()
            .expect("ASCII")
            .to_owned();
        assert!(
            set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
            "{set_cookie}"
        );
        assert!(
            !set_cookie.contains(token),
            "the cookie holds the token itself: {set_cookie}"
        );
        self.cookie = set_cookie.split(';').next().map(str::to_owned);
    }

    /// The first message of a live view, and the open response (dropped: the view closes).
    async fn first_message(&self, path: &str) -> (String, reqwest::Response) {
        let mut response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .expect("GET live");
        assert_eq!(response.status(), StatusCode::OK);
        let mut text = String::new();
        while !text.contains("\n\n") {
            let chunk = response
                .chunk()
                .await
                .expect("reads")
                .expect("the view sends something");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        (text, response)
    }
}

#[tokio::test]
async fn without_a_token_the_console_asks_for_one_and_refuses_unknown_ones() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    let (status, body) = browser.get("/api/apps").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = browser
        .post("/api/login", json!({"token": "not-a-token"}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    for bad in ["", "two words", "tab\there", "caf\u{e9}"] {
        let (status, body) = browser.post("/api/login", json!({ "token": bad })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
        assert!(
            body["error"].as_str().unwrap_or_default().contains("token"),
            "{body}"
        );
    }
    browser.sign_in(OPS_TOKEN).await;
    assert_eq!(
        browser.get("/api/apps").await,
        (StatusCode::OK, json!({"apps": ["a", "b"]}))
    );
    assert_eq!(
        browser.get("/api/whoami").await.1,
        json!({"signed_in": true})
    );
    let (status, _) = browser.post("/api/logout", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = browser.get("/api/apps").await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the login is forgotten on sign-out"
    );
}

#[tokio::test]
async fn a_token_scoped_to_app_a_sees_nothing_of_app_b() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(A_TOKEN).await;
    assert_eq!(browser.get("/api/apps").await.1, json!({"apps": ["a"]}));
    let (status, body) = browser.get("/api/apps/a/users").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for path in [
        "/api/apps/b/users",
        "/api/apps/b/sessions",
        "/api/apps/b/sessions?user=bob",
        "/api/apps/b/users/bob/sessions/secret-b",
        "/api/apps/b/users/bob/sessions/secret-b/events",
        "/api/apps/b/users/bob/memories",
        "/api/apps/b/users/bob/memories/search?q=secret",
    ] {
        let (status, body) = browser.get(path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert_eq!(body["code"], "PERMISSION_DENIED", "{path}: {body}");
        assert!(!body.to_string().contains(B_SECRET), "{path}: {body}");
    }
    let (status, body) = browser
        .post(
            "/api/apps/b/users/bob/memories/delete",
            json!({"session_id": "secret-b"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    for path in [
        "/api/apps/b/feed",
        "/api/apps/b/users/bob/sessions/secret-b/live",
    ] {
        let (text, _) = browser.first_message(path).await;
        assert!(
            text.starts_with("event: failure") && text.contains("may not access app"),
            "{path}: {text}"
        );
        assert!(!text.contains(B_SECRET), "{path}: {text}");
    }
}

#[tokio::test]
async fn a_session_that_does_not_exist_is_not_found_in_every_view() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    for path in [
        "/api/apps/a/users/alice/sessions/no-such-session",
        "/api/apps/a/users/alice/sessions/no-such-session/events",
    ] {
        let (status, body) = browser.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["code"], "NOT_FOUND", "{path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("no-such-session"),
            "{path}: {body}"
        );
    }
}

#[tokio::test]
async fn writes_need_the_page_header_and_name_exactly_one_target() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    // A cross-site form can post, but cannot add a header.
    let response = browser
        .request(
            reqwest::Method::POST,
            "/api/apps/a/users/alice/memories/delete",
        )
        .json(&json!({"memory_id": "m-food"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (status, body) = browser
        .post(
            "/api/apps/a/users/alice/memories/delete",
            json!({"memory_id": "m-food", "session_id": "s2"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(fixture.memory_ids().await.len(), 4, "nothing was deleted");
    let (status, body) = browser
        .post(
            "/api/apps/a/users/alice/memories/delete",
            json!({"memory_id": "m-food"}),
        )
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"deleted": 1})));
    assert_eq!(fixture.memory_ids().await.len(), 3);
}

#[tokio::test]
async fn a_rollback_needs_the_page_header_and_shows_in_the_history() {
    let fixture = Fixture::start().await;
    let fact = fixture.generated_and_updated().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let history = format!("/api/apps/a/users/alice/memories/revisions?memory_id={fact}");
    let (status, body) = browser.get(&history).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let actions = |body: &Value| -> Vec<String> {
        body["revisions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["action"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(actions(&body), ["added", "updated"]);
    let added = body["revisions"][0]["revision_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let rollback = "/api/apps/a/users/alice/memories/rollback";
    let form = json!({"memory_id": fact, "revision_id": added});
    let response = browser
        .request(reqwest::Method::POST, rollback)
        .json(&form)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (status, body) = browser
        .post(
            rollback,
            json!({"memory_id": fact, "revision_id": "latest"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("revision_id"),
        "{body}"
    );
    assert_eq!(
        actions(&browser.get(&history).await.1),
        ["added", "updated"]
    );
    let (status, body) = browser.post(rollback, form).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["revision"]["action"], "rolled_back");
    assert_eq!(body["revision"]["restored_revision_id"], added.as_str());
    assert_eq!(body["revision"]["new_fact"], "Alice lives in Berlin.");
    assert_eq!(
        actions(&browser.get(&history).await.1),
        ["added", "updated", "rolled_back"]
    );
}

#[tokio::test]
async fn search_filters_reach_the_service() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let (status, body) = browser
        .get("/api/apps/a/users/alice/memories/search?q=console&author=user")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The three entries saying it, and `m-food`, next to `m-old` in session s2, by its context.
    assert_eq!(body["memories"].as_array().map(Vec::len), Some(4), "{body}");
    let (_, body) = browser
        .get("/api/apps/a/users/alice/memories/search?q=console&author=nobody")
        .await;
    assert_eq!(body["memories"], json!([]));
    let (_, body) = browser
        .get("/api/apps/a/users/alice/memories/search?q=console&before=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(
        body["memories"],
        json!([]),
        "every entry is newer than 2000"
    );
    let (status, body) = browser
        .get("/api/apps/a/users/alice/memories/search?q=console&after=yesterday")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap_or_default().contains("after"),
        "{body}"
    );
}

#[tokio::test]
async fn the_console_and_mcp_share_the_host_and_origin_checks() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    let port = fixture.console.port();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".into(),
    ] {
        let response = browser
            .request(reqwest::Method::GET, "/")
            .header(header::HOST, host.as_str())
            .send()
            .await;
        assert_eq!(response.expect("GET").status(), StatusCode::OK, "{host}");
    }
    // What a page of another site reaches through DNS rebinding, on either route.
    for path in ["/api/apps", "/mcp"] {
        let response = browser
            .request(reqwest::Method::GET, path)
            .header(header::HOST, format!("rebound.example:{port}"))
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST, "{path}");
    }
    // The page's own origin may write; a foreign page may not, even with the write header.
    browser.sign_in(OPS_TOKEN).await;
    let delete = "/api/apps/a/users/alice/memories/delete";
    for (path, body) in [
        ("/api/login", json!({ "token": OPS_TOKEN })),
        (delete, json!({"memory_id": "m-food"})),
    ] {
        let response = browser
            .request(reqwest::Method::POST, path)
            .header("x-console-write", "1")
            .header(header::ORIGIN, "https://evil.example")
            .json(&body)
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let response = browser
        .request(reqwest::Method::POST, "/mcp")
        .header(header::ORIGIN, "https://evil.example")
        .header(header::AUTHORIZATION, format!("Bearer {OPS_TOKEN}"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("POST /mcp");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(fixture.memory_ids().await.len(), 4, "nothing was deleted");
    let response = browser
        .request(reqwest::Method::POST, delete)
        .header("x-console-write", "1")
        .header(header::ORIGIN, fixture.url())
        .json(&json!({"memory_id": "m-food"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(fixture.memory_ids().await.len(), 3);
    let page = browser
        .request(reqwest::Method::GET, "/")
        .send()
        .await
        .expect("GET /");
    let csp = page
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .expect("a CSP")
        .to_str()
        .unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
}

#[tokio::test]
async fn live_views_are_bounded_per_browser_and_end_with_the_connection() {
    let fixture = Fixture::start().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let session = "/api/apps/a/users/alice/sessions/s1/live";
    let mut open = Vec::new();
    for _ in 0..gateway::console::live::MAX_PER_BROWSER {
        let (text, response) = browser.first_message(session).await;
        assert!(text.starts_with("event: event"), "{text}");
        open.push(response);
    }
    let (text, _) = browser.first_message(session).await;
    assert!(
        text.starts_with("event: failure") && text.contains("too many live views"),
        "{text}"
    );
    // Every open view receives what is appended now.
    fixture
        .append("a", "alice", "s1", text_event("user", "to every view"))
        .await;
    for view in &mut open {
        let mut text = String::new();
        while !text.contains("to every view") {
            let chunk = view
                .chunk()
                .await
                .expect("reads")
                .expect("the view stays open");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    // Another browser is not affected.
    let mut other = Browser::new(&fixture);
    other.sign_in(OPS_TOKEN).await;
    let (text, _other_view) = other.first_message(session).await;
    assert!(!text.contains("too many"), "{text}");
    // Closing one frees its place; the service's stream ends with it.
    open.pop();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (text, response) = browser.first_message(session).await;
        if text.starts_with("event: event") {
            open.push(response);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the closed view's place never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(browser.get("/api/health").await.1["live_views"], json!(5));
    // When the browsers go, so do the service's streams.
    drop((open, _other_view));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fixture.in_flight("WatchSession").await != 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "WatchSession calls outlive their views"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(browser.get("/api/health").await.1["live_views"], json!(0));
}

#[tokio::test]
async fn sessions_come_newest_first_filtered_by_user_and_id_prefix() {
    let fixture = Fixture::start().await;
    for (user, id) in [("carol", "x-1"), ("dave", "x-2"), ("carol", "y-1")] {
        fixture.create("a", user, id, json!({})).await;
    }
    fixture
        .append("a", "carol", "x-1", text_event("user", "again"))
        .await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let ids = |body: &Value| -> Vec<String> {
        body["table"]["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| r["id"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (status, body) = browser.get("/api/apps/a/sessions").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), ["x-1", "y-1", "x-2", "s1"]);
    assert_eq!(
        ids(&browser.get("/api/apps/a/sessions?prefix=x-").await.1),
        ["x-1", "x-2"]
    );
    assert_eq!(
        ids(&browser
            .get("/api/apps/a/sessions?user=carol&prefix=y")
            .await
            .1),
        ["y-1"]
    );
    let (_, users) = browser.get("/api/apps/a/users").await;
    assert_eq!(
        users["figures"],
        json!({"sessions": 4, "users": 3, "events": 6, "truncated": false})
    );
    let order: Vec<&str> = users["table"]["rows"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["user_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        order,
        ["carol", "dave", "alice"],
        "most recently active first"
    );
}

/// `text` as a query parameter value.
fn param(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The ids of a list's or a search's memories (a search's sorted: ranks are not the point).
fn ids(body: &Value) -> Vec<String> {
    body["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn lists_and_searches_keep_what_passes_the_filters() {
    let fixture = Fixture::start().await;
    fixture.carol_with_metadata().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let list = "/api/apps/a/users/carol/memories";
    for (query, expected) in [
        (format!("filter={}", param("color=red")), vec!["c-red"]),
        (format!("filter={}", param("n>=3")), vec!["c-red", "c-vip"]),
        (format!("filter={}", param("n>1, n<5")), vec!["c-red"]),
        // One group per line: alternatives.
        (
            format!("filter={}", param("color=blue\nvip?")),
            vec!["c-blue", "c-vip"],
        ),
        (
            format!("filter={}", param("color!=red")),
            vec!["c-blue", "c-vip", "c-plain"],
        ),
        ("topics=pets".to_owned(), vec!["c-red"]),
        ("author=nobody".to_owned(), vec![]),
        (format!("before={}", param("2000-01-01T00:00:00Z")), vec![]),
        (String::new(), vec!["c-red", "c-blue", "c-vip", "c-plain"]),
    ] {
        let (status, body) = browser.get(&format!("{list}?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(ids(&body), expected, "{query}");
        assert_eq!(body["total"], json!(4), "the figure is the user's: {query}");
    }
    let (status, body) = browser
        .get(&format!("{list}/search?q=kite&filter={}", param("n>=3")))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut found = ids(&body);
    found.sort();
    assert_eq!(found, ["c-red", "c-vip"]);
    let (_, body) = browser
        .get(&format!("{list}/search?q=kite&topics=pets&author=user"))
        .await;
    assert_eq!(ids(&body), ["c-red"]);
    for (query, field) in [
        (format!("filter={}", param("color")), "filter"),
        (format!("filter={}", param("=red")), "filter"),
        ("after=yesterday".to_owned(), "after"),
    ] {
        for path in [
            format!("{list}?{query}"),
            format!("{list}/search?q=kite&{query}"),
        ] {
            let (status, body) = browser.get(&path).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
            assert!(
                body["error"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with(&format!("{field}: ")),
                "{path}: {body}"
            );
        }
    }
}

#[tokio::test]
async fn lists_and_searches_answer_as_of_a_time_and_purges_refuse_one() {
    let fixture = Fixture::start().await;
    fixture.erin_who_moved().await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let list = "/api/apps/a/users/erin/memories";
    for (query, expected) in [
        (String::new(), vec!["e-lisbon"]),
        (
            "include_superseded=true".to_owned(),
            vec!["e-berlin", "e-lisbon"],
        ),
        (
            format!("as_of={}", param("2022-06-01T00:00:00Z")),
            vec!["e-berlin"],
        ),
        (
            format!("as_of={}", param("2024-01-01T00:00:00Z")),
            vec!["e-lisbon"],
        ),
    ] {
        for path in [
            format!("{list}?{query}"),
            format!("{list}/search?q=lives&{query}"),
        ] {
            let (status, body) = browser.get(&path).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            let mut found = ids(&body);
            found.sort();
            assert_eq!(found, expected, "{path}");
        }
    }
    // The superseded fact says until when it was true.
    let (_, body) = browser
        .get(&format!("{list}?include_superseded=true"))
        .await;
    assert_eq!(
        body["memories"][0]["invalid_at"], "2024-01-01T00:00:00Z",
        "{body}"
    );
    assert!(
        body["memories"][1]
            .get("invalid_at")
            .is_none_or(Value::is_null),
        "{body}"
    );
    let (status, body) = browser.get(&format!("{list}?as_of=soon")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("as_of: "),
        "{body}"
    );
    // A purge matches whatever the validity: a bound on it is refused, not ignored.
    let purge = format!("{list}/purge");
    for (form, field) in [
        (
            json!({"author": "user", "as_of": "2022-06-01T00:00:00Z"}),
            "as_of",
        ),
        (
            json!({"author": "user", "include_superseded": true}),
            "include_superseded",
        ),
    ] {
        let (status, body) = browser.post(&purge, form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!("{field}: ")),
            "{body}"
        );
    }
    let (_, body) = browser
        .get(&format!("{list}?include_superseded=true"))
        .await;
    assert_eq!(ids(&body), ["e-berlin", "e-lisbon"], "nothing purged");
}

#[tokio::test]
async fn a_purge_is_a_dry_run_until_forced_and_a_write_of_the_page() {
    let fixture = Fixture::start().await;
    fixture.carol_with_metadata().await;
    let all = ["c-red", "c-blue", "c-vip", "c-plain"];
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let purge = "/api/apps/a/users/carol/memories/purge";
    let rule = json!({"filter": "n>=3", "force": true});
    // A cross-site form cannot add the page's header.
    let response = browser
        .request(reqwest::Method::POST, purge)
        .json(&rule)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(fixture.memory_ids_of("carol").await, all);
    // A purge without any filter is refused by memory-svc, naming the filter.
    let (status, body) = browser.post(purge, json!({"force": true})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("filter"),
        "{body}"
    );
    let (status, body) = browser
        .post(purge, json!({"filter": "n>=", "force": true}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(fixture.memory_ids_of("carol").await, all);
    // The dry run: how many, and which, and nothing deleted.
    let (status, body) = browser.post(purge, json!({"filter": "n>=3"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["count"], json!(2), "{body}");
    assert_eq!(body["deleted"], json!(false));
    let sample: Vec<&str> = body["sample"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(sample, ["c-red", "c-vip"]);
    assert_eq!(fixture.memory_ids_of("carol").await, all);
    // Forced.
    let (status, body) = browser.post(purge, rule).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["count"], json!(2), "{body}");
    assert_eq!(body["deleted"], json!(true));
    assert!(
        !body["operation_id"].as_str().unwrap_or_default().is_empty(),
        "{body}"
    );
    assert_eq!(fixture.memory_ids_of("carol").await, ["c-blue", "c-plain"]);
    assert_eq!(
        fixture.memory_ids().await.len(),
        4,
        "another user's memories stay"
    );
    // A token of app `a` purges nothing of app `b`.
    let mut scoped = Browser::new(&fixture);
    scoped.sign_in(A_TOKEN).await;
    let (status, body) = scoped
        .post(
            "/api/apps/b/users/bob/memories/purge",
            json!({"author": "user"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "PERMISSION_DENIED", "{body}");
}

#[tokio::test]
async fn event_streams_are_listed_and_flushed_by_a_write_of_the_page() {
    let fixture = Fixture::start().await;
    fixture.streamed("dave", "chat", &["d1", "d2"]).await;
    let mut browser = Browser::new(&fixture);
    browser.sign_in(OPS_TOKEN).await;
    let streams = "/api/apps/a/users/dave/memories/streams";
    let flush = "/api/apps/a/users/dave/memories/streams/flush";
    let (status, body) = browser.get(streams).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["streams"].as_array().expect("a list");
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(
        (&listed[0]["stream_id"], &listed[0]["buffered"]),
        (&json!("chat"), &json!(2))
    );
    assert!(listed[0]["last_append_time"].is_string(), "{body}");
    // A cross-site form cannot add the page's header.
    let response = browser
        .request(reqwest::Method::POST, flush)
        .json(&json!({"stream_id": "chat"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (status, body) = browser.post(flush, json!({"stream_id": ""})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("stream_id"),
        "{body}"
    );
    assert_eq!(
        browser.get(streams).await.1["streams"][0]["buffered"],
        json!(2)
    );

    let (status, body) = browser.post(flush, json!({"stream_id": "chat"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        !body["job"]["id"].as_str().unwrap_or_default().is_empty(),
        "{body}"
    );
    assert!(body["job"]["state"].is_string(), "{body}");
    assert_eq!(browser.get(streams).await.1, json!({"streams": []}));
    let (status, body) = browser.post(flush, json!({"stream_id": "chat"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"job": null}));

    // A token of app `a` sees no stream of app `b`.
    let mut scoped = Browser::new(&fixture);
    scoped.sign_in(A_TOKEN).await;
    let (status, body) = scoped.get("/api/apps/b/users/bob/memories/streams").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}
