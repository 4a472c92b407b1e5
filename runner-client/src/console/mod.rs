//! The web console (`runner-client console`): browse apps, users, sessions and memory, follow
//! sessions and an app's activity live, check the services' health. An HTTP server in front of
//! the two gRPC clients this crate already has; the page is plain HTML, CSS and JavaScript
//! embedded in the binary (no build step, no CDN).
//!
//! # Layout
//! - [`backend`]: the service calls, made with each browser's own token.
//! - [`logins`]: signing in (token → HttpOnly cookie), the caller of each request.
//! - [`api`]: the JSON API the page reads.
//! - [`live`]: Server-Sent Events for the live views, bounded per browser.
//! - [`error`]: [`ConsoleError`] and its HTTP mapping.
//! - `assets/`: the page.
//!
//! # Security
//! The console holds no token of its own: a browser signs in with the bearer token the
//! services know, and every call is made with it, so a token limited to some apps or users
//! sees exactly those through the console. Every response carries a strict Content Security
//! Policy (scripts from the console only, no inline code); the page writes all data with
//! `textContent`. Writes (sign-in, deleting memory) need a header only the page sends. On a
//! loopback address the console answers only requests addressed to a loopback name, so a web
//! page cannot reach it through DNS rebinding.

pub mod api;
pub mod backend;
pub mod error;
pub mod live;
pub mod logins;

use std::{net::SocketAddr, sync::Arc, time::Instant};

use axum::{
    extract::{Request, State},
    http::{header, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use tokio::{net::TcpListener, task::JoinHandle};

pub use error::ConsoleError;

use crate::error::Result;

/// What the console serves.
#[derive(Debug, Clone)]
pub struct Config {
    pub session_endpoint: String,
    pub memory_endpoint: String,
    /// CA certificate (PEM) of `https://` endpoints.
    pub ca_pem: Option<Vec<u8>>,
    /// Apps listed on the start page (the services have no call listing apps); any other app
    /// can be opened by name.
    pub apps: Vec<String>,
}

/// The console's shared state.
pub struct Console {
    services: backend::Services,
    logins: logins::Logins,
    live: Arc<live::LiveViews>,
    apps: Vec<String>,
    started: Instant,
    /// Whether to insist on a loopback `Host` (see the module docs).
    loopback_only: bool,
}

/// A running console.
pub struct Running {
    pub addr: SocketAddr,
    pub task: JoinHandle<std::io::Result<()>>,
}

/// Serves the console on `listener` in a background task.
pub fn spawn(
    listener: TcpListener,
    config: Config,
) -> Result<Running, Box<dyn std::error::Error + Send + Sync>> {
    let addr = listener.local_addr()?;
    let console = Arc::new(Console {
        services: backend::Services::connect(
            &config.session_endpoint,
            &config.memory_endpoint,
            config.ca_pem,
        )?,
        logins: logins::Logins::default(),
        live: Arc::default(),
        apps: config.apps,
        started: Instant::now(),
        loopback_only: addr.ip().is_loopback(),
    });
    let app = router(console).into_make_service_with_connect_info::<SocketAddr>();
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(Running { addr, task })
}

fn router(console: Arc<Console>) -> Router {
    let session = "/api/apps/{app}/users/{user}/sessions/{id}";
    let memory = "/api/apps/{app}/users/{user}/memories";
    Router::new()
        .route(
            "/",
            get(|| {
                asset(
                    "text/html; charset=utf-8",
                    include_str!("assets/index.html"),
                )
            }),
        )
        .route(
            "/assets/app.js",
            get(|| {
                asset(
                    "text/javascript; charset=utf-8",
                    include_str!("assets/app.js"),
                )
            }),
        )
        .route(
            "/assets/style.css",
            get(|| asset("text/css; charset=utf-8", include_str!("assets/style.css"))),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/login", post(logins::login))
        .route("/api/logout", post(logins::logout))
        .route("/api/whoami", get(logins::whoami))
        .route("/api/health", get(api::health))
        .route("/api/apps", get(api::apps))
        .route("/api/apps/{app}/users", get(api::users))
        .route("/api/apps/{app}/sessions", get(api::sessions))
        .route("/api/apps/{app}/feed", get(live::feed))
        .route(session, get(api::session))
        .route(&format!("{session}/events"), get(api::events))
        .route(&format!("{session}/live"), get(live::session))
        .route(memory, get(api::memories))
        .route(&format!("{memory}/search"), get(api::search))
        .route(&format!("{memory}/delete"), post(api::delete_memory))
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The Content Security Policy of every response: the console's own scripts and styles only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Refuses requests addressed to another host name (see the module docs) and adds the
/// security headers to every response.
async fn guard(State(console): State<Arc<Console>>, request: Request, next: Next) -> Response {
    if console.loopback_only && !addressed_to_loopback(&request) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "the console answers only to localhost",
        )
            .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn addressed_to_loopback(request: &Request) -> bool {
    let Some(host) = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    // Strip the port: "[::1]:8080", "127.0.0.1:8080", "localhost".
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
