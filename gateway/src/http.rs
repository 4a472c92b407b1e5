//! The HTTP front door: MCP over streamable HTTP at `/mcp`, behind bearer-token
//! authentication, with the MCP spec's Host and Origin checks (no DNS rebinding, no calls from
//! foreign web pages), and `/healthz` for probes.

use std::{io, net::SocketAddr, sync::Arc};

use adk_common::serve::auth::Authenticator;
use axum::{
    body::Body,
    extract::{Request, State},
    http::{header, HeaderValue, Method, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use rmcp::{
    model::ClientJsonRpcMessage,
    transport::streamable_http_server::{
        session::never::NeverSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    },
};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::{backend::Backend, caller::Caller, config::Http, mcp::Gateway};

/// Largest request body `/mcp` reads: a batch of tool calls at their largest, with room.
const MAX_BODY_BYTES: usize = 1 << 20;

/// Why the gateway would not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "refusing to serve {0} without --tokens-file: anyone who reaches it could read and write \
         every user's memory (pass --allow-unauthenticated to do so anyway)"
    )]
    Unauthenticated(SocketAddr),
    #[error(transparent)]
    Tokens(#[from] adk_common::serve::auth::TokensFileError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
}

/// A gateway serving HTTP until [`Running::stop`].
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    pub authenticator: Authenticator,
    stop: CancellationToken,
    task: JoinHandle<io::Result<()>>,
}

impl Running {
    /// Stops accepting requests and waits for those in flight.
    pub async fn stop(self) -> io::Result<()> {
        self.stop.cancel();
        self.task.await.unwrap_or_else(|e| Err(io::Error::other(e)))
    }
}

/// Binds `http.listen` and serves until stopped.
pub async fn start(http: &Http, backend: Backend) -> Result<Running, StartError> {
    let authenticator = match &http.tokens_file {
        Some(path) => Authenticator::from_file(path)?,
        None if http.listen.ip().is_loopback() || http.allow_unauthenticated => {
            Authenticator::open()
        }
        None => return Err(StartError::Unauthenticated(http.listen)),
    };
    let listener = TcpListener::bind(http.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: http.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: http.listen,
        source,
    })?;
    let stop = CancellationToken::new();
    let router = router(http, backend, authenticator.clone(), stop.child_token());
    let shutdown = stop.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    });
    Ok(Running {
        addr,
        authenticator,
        stop,
        task,
    })
}

fn router(
    http: &Http,
    backend: Backend,
    authenticator: Authenticator,
    stop: CancellationToken,
) -> Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        // Every request stands alone (the 2026-07-28 protocol is sessionless; older clients
        // are answered the same way), so any replica can serve any request.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    config = if http.listen.ip().is_loopback() || !http.allowed_hosts.is_empty() {
        let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
        hosts.extend(http.allowed_hosts.iter().cloned());
        config.with_allowed_hosts(hosts)
    } else {
        // Beyond loopback without named hosts: tokens (required there) protect it instead.
        config.disable_allowed_hosts()
    };
    config = if http.allowed_origins.is_empty() {
        config.enforce_origin_validation()
    } else {
        config.with_allowed_origins(http.allowed_origins.iter().cloned())
    };
    let mcp = StreamableHttpService::new(
        move || Ok(Gateway::new(backend.clone(), None)),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn(jsonrpc_errors))
        .layer(middleware::from_fn_with_state(authenticator, authenticate))
        // Outside authentication: what probes and load balancers ask.
        .route("/healthz", get(|| async { "ok\n" }))
}

/// Answers a POST whose body is not a JSON-RPC message with a JSON-RPC error (400, as the
/// streamable HTTP transport asks), where the SDK would answer with plain text: `-32700` for
/// text that is not JSON, `-32600` for JSON that is not a request, notification or response.
/// A body over [`MAX_BODY_BYTES`] is `413`.
async fn jsonrpc_errors(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is too large\n",
        )
            .into_response();
    };
    let refusal = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Err(e) => Some((-32700, format!("Parse error: {e}"), serde_json::Value::Null)),
        Ok(value) => match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
            Err(e) => Some((
                -32600,
                format!("Invalid Request: {e}"),
                value.get("id").cloned().unwrap_or_default(),
            )),
            Ok(_) => None,
        },
    };
    if let Some((code, message, id)) = refusal {
        let error = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}
        });
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Turns the bearer token into the request's [`Caller`], or answers 401 with the challenge
/// MCP clients expect.
async fn authenticate(
    State(authenticator): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    let Some(grant) = authenticator.authenticate(token.as_deref()) else {
        let challenge = match token {
            None => r#"Bearer realm="adk-gateway""#,
            Some(_) => r#"Bearer realm="adk-gateway", error="invalid_token""#,
        };
        let mut response = (
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required\n",
        )
            .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
        return response;
    };
    // With tokens on, the caller's own token goes on to the services, which check it again.
    let passed_on = token.filter(|_| authenticator.is_required());
    request
        .extensions_mut()
        .insert(Caller::with_token(grant, passed_on));
    next.run(request).await
}
