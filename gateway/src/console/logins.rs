//! Who is asking: a browser signs in by posting its bearer token once; the console keeps the
//! token on the server side and hands the browser a random login id in an `HttpOnly`,
//! `SameSite=Strict` cookie. The token never reaches a URL, the page's scripts or storage.
//! Each request's caller is what the gateway makes of that token ([`Guard::caller`], as for
//! `/mcp`), checked again on every request, so a token taken out of the tokens file stops
//! working at once. Without a tokens file nobody signs in and every browser is the gateway's
//! own caller.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use axum::{
    extract::{ConnectInfo, FromRequestParts, State},
    http::{header, request::Parts, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use serde_json::json;

use super::{backend::Calls, error::ConsoleError, Console};
use crate::caller::Caller as Identity;

/// The cookie holding the login id.
const COOKIE: &str = "adk_console";

/// How long a login lasts.
const LOGIN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Logins kept at once; the oldest goes first.
const MAX_LOGINS: usize = 1024;

/// The header the page sends with every write; a cross-site form cannot send it.
pub const WRITE_HEADER: &str = "x-console-write";

/// Signed-in browsers: login id → token.
#[derive(Debug, Default)]
pub struct Logins {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl Logins {
    fn token(&self, id: &str) -> Option<String> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens
            .get(id)
            .filter(|(_, since)| since.elapsed() < LOGIN_LIFETIME)
            .map(|(token, _)| token.clone())
    }

    fn add(&self, token: String) -> String {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.retain(|_, (_, since)| since.elapsed() < LOGIN_LIFETIME);
        if tokens.len() >= MAX_LOGINS {
            let oldest = tokens
                .iter()
                .min_by_key(|(_, (_, since))| *since)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                tokens.remove(&oldest);
            }
        }
        tokens.insert(id.clone(), (token, Instant::now()));
        id
    }

    fn remove(&self, id: &str) {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

/// The login id in the request's cookie, if any.
fn login_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The browser behind a request: who it is to the services, and a key for per-browser limits.
pub struct Caller {
    console: Arc<Console>,
    identity: Identity,
    /// The login id, or the peer address before signing in.
    pub key: String,
}

impl Caller {
    /// This browser's calls to the services.
    pub fn calls(&self) -> Calls<'_> {
        Calls {
            backend: &self.console.backend,
            caller: &self.identity,
        }
    }
}

impl FromRequestParts<Arc<Console>> for Caller {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let login = login_id(&parts.headers).map(str::to_owned);
        let token = login.as_deref().and_then(|id| console.logins.token(id));
        let identity = match &token {
            Some(token) => console
                .guard
                .caller(Some(token))
                .ok_or(ConsoleError::UnknownToken)?,
            None => console
                .guard
                .caller(None)
                .ok_or(ConsoleError::SignInRequired)?,
        };
        let key = match (&login, &token) {
            (Some(id), Some(_)) => id.clone(),
            _ => parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string()),
        };
        Ok(Caller {
            console: console.clone(),
            identity,
            key,
        })
    }
}

/// A write must carry [`WRITE_HEADER`]: browsers send custom headers cross-site only after a
/// CORS preflight, which the console never answers.
pub fn check_write(headers: &HeaderMap) -> Result<(), ConsoleError> {
    headers
        .get(WRITE_HEADER)
        .map(|_| ())
        .ok_or(ConsoleError::CrossSite)
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// `POST /api/login {"token": "..."}`: checks the gateway knows the token, then sets the cookie.
pub async fn login(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Json(form): Json<LoginForm>,
) -> Result<Response, ConsoleError> {
    check_write(&headers)?;
    let token = form.token.trim().to_owned();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConsoleError::BadRequest {
            field: "token",
            reason: "a bearer token is printable ASCII without spaces".into(),
        });
    }
    if !console.guard.authenticator().is_required() {
        return Err(ConsoleError::NoSignIn);
    }
    if console.guard.caller(Some(&token)).is_none() {
        return Err(ConsoleError::UnknownToken);
    }
    let id = console.logins.add(token);
    let cookie = format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        LOGIN_LIFETIME.as_secs()
    );
    Ok(with_cookie(&cookie, Json(json!({"signed_in": true}))))
}

/// `POST /api/logout`: forgets the login.
pub async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    check_write(&headers)?;
    if let Some(id) = login_id(&headers) {
        console.logins.remove(id);
    }
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    Ok(with_cookie(&cookie, Json(json!({"signed_in": false}))))
}

/// `GET /api/whoami`: whether this browser is signed in.
pub async fn whoami(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    let signed_in = login_id(&headers)
        .and_then(|id| console.logins.token(id))
        .is_some();
    Json(json!({ "signed_in": signed_in }))
}

fn with_cookie(cookie: &str, body: impl IntoResponse) -> Response {
    match HeaderValue::from_str(cookie) {
        Ok(value) => ([(header::SET_COOKIE, value)], body).into_response(),
        // The id is hex and the attributes constant: this cannot happen.
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
