//! The web console at `/`: browse apps, users, sessions and memory, follow sessions and an
//! app's activity live, check the services' health. Thin handlers over the gateway's
//! [`Backend`]; the page is plain HTML, CSS and JavaScript embedded in the binary (no build
//! step, no CDN).
//!
//! # Layout
//! - [`backend`]: the service calls, made as the browser's caller.
//! - [`logins`]: signing in (token → HttpOnly cookie), the caller of each request.
//! - [`api`]: the JSON API the page reads.
//! - [`live`]: Server-Sent Events for the live views, bounded per browser.
//! - [`error`]: [`ConsoleError`] and its HTTP mapping.
//! - `assets/`: the page.
//!
//! # Security
//! A browser is a caller like an MCP client: it signs in with a bearer token of the tokens
//! file, which decides what it sees ([`crate::guard::Guard::caller`], the same rule as `/mcp`),
//! and every call carries that token on to the services. The gateway's Host and Origin checks
//! ([`crate::guard`]) come first. Every response carries a strict Content Security Policy
//! (scripts from the gateway only, no inline code); the page writes all data with
//! `textContent`. Writes (sign-in, deleting, purging or rolling back memory, flushing an event
//! stream) need a header only the page sends.

pub mod api;
pub mod backend;
pub mod error;
pub mod live;
pub mod logins;

use std::{sync::Arc, time::Instant};

use axum::{
    extract::Request,
    http::{header, HeaderValue},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};

pub use error::ConsoleError;

use crate::{backend::Backend, guard::Guard};

/// The console's shared state.
pub struct Console {
    backend: Backend,
    guard: Guard,
    logins: logins::Logins,
    live: Arc<live::LiveViews>,
    started: Instant,
}

/// The console's routes: the page, its assets and its API.
pub fn router(guard: Guard, backend: Backend) -> Router {
    let console = Arc::new(Console {
        backend,
        guard,
        logins: logins::Logins::default(),
        live: Arc::default(),
        started: Instant::now(),
    });
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
        .route(&format!("{memory}/purge"), post(api::purge))
        .route(&format!("{memory}/revisions"), get(api::revisions))
        .route(&format!("{memory}/rollback"), post(api::rollback))
        .route(&format!("{memory}/streams"), get(api::streams))
        .route(&format!("{memory}/streams/flush"), post(api::flush_stream))
        .layer(middleware::from_fn(security_headers))
        .with_state(console)
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The Content Security Policy of every response: the console's own scripts and styles only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Adds the security headers to every console response.
async fn security_headers(request: Request, next: Next) -> Response {
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
