//! The HTTP front door on one listener: MCP over streamable HTTP at `/mcp` (bearer tokens),
//! the web console at `/` (signed-in browsers, [`crate::console`]), both behind the same Host
//! and Origin checks ([`crate::guard`]), and `/healthz` for probes.

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

use crate::{
    backend::Backend,
    config::Http,
    console,
    guard::{front_door, Guard},
    mcp::Gateway,
};

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
    let guard = Guard::new(http, authenticator.clone());
    let router = router(guard, backend, stop.child_token())
        // The console counts a browser's live views by its address before it signs in.
        .into_make_service_with_connect_info::<SocketAddr>();
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

fn router(guard: Guard, backend: Backend, stop: CancellationToken) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        // Every request stands alone (the 2026-07-28 protocol is sessionless; older clients
        // are answered the same way), so any replica can serve any request.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        // Host and Origin are checked for every route by `front_door`.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let mcp_backend = backend.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(Gateway::new(mcp_backend.clone(), None)),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn(jsonrpc_errors))
        .layer(middleware::from_fn_with_state(guard.clone(), authenticate));
    Router::new()
        .merge(mcp)
        .merge(console::router(guard.clone(), backend))
        .layer(middleware::from_fn_with_state(guard, front_door))
        // Outside the checks: what probes and load balancers ask, by any name.
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
async fn authenticate(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    let Some(caller) = guard.caller(token.as_deref()) else {
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
    request.extensions_mut().insert(caller);
    next.run(request).await
}
