//! Clients of session-svc and memory-svc: the calls the runner and the CLI make, with every
//! failure turned into a [`RunnerError`] that names the service and its address.
//!
//! Channels connect lazily, so building a client never fails on a service that is down; the
//! first call does, with [`RunnerError::Unreachable`].

use std::{error::Error as _, time::Duration};

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, memory_service_client::MemoryServiceClient,
        AddSessionToMemoryRequest, MemoryEntry, SearchMemoryRequest, SessionRef,
    },
    session::v1::{
        session_service_client::SessionServiceClient, AppendEventRequest, AppendEventResponse,
        CreateSessionRequest, DeleteSessionRequest, GetSessionRequest, ListSessionsRequest,
        Session, WatchEventsRequest, WatchEventsResponse, WatchSessionRequest,
        WatchSessionResponse,
    },
};
use tokio_stream::Stream;
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig},
    Code, Request, Status, Streaming,
};

use crate::error::{Result, RunnerError};

/// Largest message accepted from a service: a session with all its events can be large.
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Sessions fetched per ListSessions page (the service's maximum).
const LIST_PAGE: i32 = 100;

/// How to reach services that require TLS or a token (see the servers' `--tls-cert` and
/// `--tokens-file`). The default is plain connections without a token.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Bearer token presented on every call.
    pub token: Option<String>,
    /// CA certificate (PEM) that signed the services' certificates, for `https://` endpoints.
    pub ca_pem: Option<Vec<u8>>,
}

/// Where a service lives (for error messages) and what to present to it.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    pub(crate) service: &'static str,
    pub(crate) endpoint: String,
    /// `Bearer <token>`, when the service requires one.
    authorization: Option<MetadataValue<Ascii>>,
}

impl Remote {
    pub(crate) fn channel(
        service: &'static str,
        endpoint: &str,
        access: &Access,
    ) -> Result<(Self, Channel)> {
        let invalid = |reason: String| RunnerError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let mut channel = Channel::from_shared(endpoint.to_owned())
            .map_err(|e| invalid(e.to_string()))?
            .connect_timeout(Duration::from_secs(5));
        if let Some(ca) = &access.ca_pem {
            channel = channel
                .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
                .map_err(|e| invalid(format!("bad TLS settings: {e}")))?;
        }
        let remote = Remote {
            service,
            endpoint: endpoint.to_owned(),
            authorization: None,
        }
        .with_token(access.token.as_deref())?;
        Ok((remote, channel.connect_lazy()))
    }

    /// The same service, presenting `token` (none: no token).
    pub(crate) fn with_token(&self, token: Option<&str>) -> Result<Self> {
        let authorization = token
            .map(|t| format!("Bearer {}", t.trim()).parse())
            .transpose()
            .map_err(|_| RunnerError::InvalidEndpoint {
                endpoint: self.endpoint.clone(),
                reason: "the token is not a valid header value".into(),
            })?;
        Ok(Self {
            authorization,
            ..self.clone()
        })
    }

    /// `message` as a request carrying the token, if any.
    pub(crate) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(authorization) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", authorization.clone());
        }
        request
    }

    /// The error for a failed `rpc`: transport failures mean the service is not there.
    pub(crate) fn error(&self, rpc: &'static str, status: Status) -> RunnerError {
        match unreachable_reason(&status) {
            Some(reason) => RunnerError::Unreachable {
                service: self.service,
                endpoint: self.endpoint.clone(),
                reason,
            },
            None => RunnerError::Service {
                service: self.service,
                endpoint: self.endpoint.clone(),
                rpc,
                code: status.code(),
                message: status.message().to_owned(),
            },
        }
    }
}

/// Why a call never reached a server, when that is what `status` says: tonic reports transport
/// failures as UNAVAILABLE with the underlying error as the source (a server's own UNAVAILABLE
/// has none). The innermost I/O error is the useful part ("connection refused").
fn unreachable_reason(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    let mut source = status.source()?;
    let mut reason = source.to_string();
    loop {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return Some(match io.kind() {
                ConnectionRefused | ConnectionReset | TimedOut | HostUnreachable
                | NetworkUnreachable | AddrNotAvailable => io.kind().to_string(),
                _ => io.to_string(),
            });
        }
        match source.source() {
            Some(next) => {
                reason = next.to_string();
                source = next;
            }
            None => return Some(reason),
        }
    }
}

/// A client of session-svc.
#[derive(Debug, Clone)]
pub struct SessionClient {
    remote: Remote,
    client: SessionServiceClient<Channel>,
}

impl SessionClient {
    /// A client of the session-svc at `endpoint` (e.g. `http://127.0.0.1:50051`).
    pub fn connect(endpoint: &str) -> Result<Self> {
        Self::connect_with(endpoint, &Access::default())
    }

    /// A client of a session-svc that requires TLS or a token.
    pub fn connect_with(endpoint: &str, access: &Access) -> Result<Self> {
        let (remote, channel) = Remote::channel("session-svc", endpoint, access)?;
        let client = SessionServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { remote, client })
    }

    /// The address this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.remote.endpoint
    }

    /// The whole session, or `None` when it does not exist.
    pub async fn get(&self, app: &str, user: &str, session: &str) -> Result<Option<Session>> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            ..Default::default()
        };
        match self
            .client
            .clone()
            .get_session(self.remote.request(request))
            .await
        {
            Ok(response) => Ok(Some(response.into_inner())),
            Err(status) if status.code() == Code::NotFound => Ok(None),
            Err(status) => Err(self.remote.error("GetSession", status)),
        }
    }

    /// The session, created empty when it does not exist yet (R1: auto-create).
    pub async fn get_or_create(&self, app: &str, user: &str, session: &str) -> Result<Session> {
        if let Some(found) = self.get(app, user, session).await? {
            return Ok(found);
        }
        let request = CreateSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            ..Default::default()
        };
        match self
            .client
            .clone()
            .create_session(self.remote.request(request))
            .await
        {
            Ok(response) => Ok(response.into_inner()),
            // Another runner created it between our get and create: use theirs.
            Err(status) if status.code() == Code::AlreadyExists => self
                .get(app, user, session)
                .await?
                .ok_or_else(|| RunnerError::SessionNotFound {
                    session_id: session.to_owned(),
                }),
            Err(status) => Err(self.remote.error("CreateSession", status)),
        }
    }

    /// Every session of the app (of one user when `user` is given), without events, in the
    /// service's order (least recently updated first).
    pub async fn list(&self, app: &str, user: Option<&str>) -> Result<Vec<Session>> {
        let mut sessions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListSessionsRequest {
                app_name: app.to_owned(),
                user_id: user.map(str::to_owned),
                page_size: LIST_PAGE,
                page_token,
            };
            let page = self
                .client
                .clone()
                .list_sessions(self.remote.request(request))
                .await
                .map_err(|s| self.remote.error("ListSessions", s))?
                .into_inner();
            sessions.extend(page.sessions);
            if page.next_page_token.is_empty() {
                return Ok(sessions);
            }
            page_token = page.next_page_token;
        }
    }

    /// Deletes the session and its events (nothing happens when it does not exist).
    pub async fn delete(&self, app: &str, user: &str, session: &str) -> Result<()> {
        let request = DeleteSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
        };
        self.client
            .clone()
            .delete_session(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("DeleteSession", s))?;
        Ok(())
    }

    /// Opens an AppendEvents stream fed by `requests`.
    pub(crate) async fn append_events(
        &self,
        requests: impl Stream<Item = AppendEventRequest> + Send + 'static,
    ) -> Result<Streaming<AppendEventResponse>> {
        self.client
            .clone()
            .append_events(self.remote.request(requests))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("AppendEvents", s))
    }

    /// The error for a failure reported inside the AppendEvents stream.
    pub(crate) fn append_error(&self, status: Status) -> RunnerError {
        self.remote.error("AppendEvents", status)
    }

    /// Stored events of the session with a sequence above `after_sequence`, then live appends
    /// (and live partial events if `include_partial`).
    pub async fn watch_session(
        &self,
        request: WatchSessionRequest,
    ) -> Result<impl Stream<Item = Result<WatchSessionResponse>> + Send + Unpin + 'static> {
        let session_id = request.session_id.clone();
        let stream = match self
            .client
            .clone()
            .watch_session(self.remote.request(request))
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::NotFound => {
                return Err(RunnerError::SessionNotFound { session_id })
            }
            Err(status) => return Err(self.remote.error("WatchSession", status)),
        };
        Ok(self.follow("WatchSession", stream))
    }

    /// Every committed event of an app (of one user if the request names one), each with a
    /// cursor to resume after it.
    pub async fn watch_events(
        &self,
        request: WatchEventsRequest,
    ) -> Result<impl Stream<Item = Result<WatchEventsResponse>> + Send + Unpin + 'static> {
        let stream = self
            .client
            .clone()
            .watch_events(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("WatchEvents", s))?
            .into_inner();
        Ok(self.follow("WatchEvents", stream))
    }

    fn follow<T>(
        &self,
        rpc: &'static str,
        stream: Streaming<T>,
    ) -> impl Stream<Item = Result<T>> + Send + Unpin + 'static
    where
        T: Send + 'static,
    {
        use tokio_stream::StreamExt as _;
        let remote = self.remote.clone();
        stream.map(move |item| item.map_err(|s| remote.error(rpc, s)))
    }
}

/// A client of memory-svc.
#[derive(Debug, Clone)]
pub struct MemoryClient {
    remote: Remote,
    client: MemoryServiceClient<Channel>,
}

impl MemoryClient {
    /// A client of the memory-svc at `endpoint` (e.g. `http://127.0.0.1:50052`).
    pub fn connect(endpoint: &str) -> Result<Self> {
        Self::connect_with(endpoint, &Access::default())
    }

    /// A client of a memory-svc that requires TLS or a token.
    pub fn connect_with(endpoint: &str, access: &Access) -> Result<Self> {
        let (remote, channel) = Remote::channel("memory-svc", endpoint, access)?;
        let client = MemoryServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { remote, client })
    }

    /// The best matches for `query` in the (app, user)'s memory, best first.
    pub async fn search(&self, app: &str, user: &str, query: &str) -> Result<Vec<MemoryEntry>> {
        let request = SearchMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            query: query.to_owned(),
            ..Default::default()
        };
        Ok(self
            .client
            .clone()
            .search_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("SearchMemory", s))?
            .into_inner()
            .memories)
    }

    /// Makes memory-svc (re)ingest the session, fetched from session-svc by reference; returns
    /// how many entries the session now has in memory.
    pub async fn add_session(&self, app: &str, user: &str, session: &str) -> Result<u32> {
        let request = AddSessionToMemoryRequest {
            source: Some(Source::SessionRef(SessionRef {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                session_id: session.to_owned(),
            })),
        };
        Ok(self
            .client
            .clone()
            .add_session_to_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("AddSessionToMemory", s))?
            .into_inner()
            .entries)
    }
}
