//! Clients of session-svc and memory-svc: the calls the runner and the CLI make, with every
//! failure turned into a [`RunnerError`] that names the service and its address.
//!
//! Channels connect lazily, so building a client never fails on a service that is down; the
//! first call does, with [`RunnerError::Unreachable`]. An endpoint may omit its scheme
//! (`127.0.0.1:50051`, as grpcurl takes it): `http://` is assumed, `https://` with a CA
//! certificate.

use std::{error::Error as _, time::Duration};

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        memory_service_client::MemoryServiceClient, AddSessionToMemoryRequest, DeleteMemoryRequest,
        EventList, GenerateMemoriesRequest, GenerateOptions, GenerationJob,
        GetGenerationJobRequest, ListMemoriesRequest, ListMemoriesResponse,
        ListMemoryRevisionsRequest, MemoryEntry, MemoryKind, MemoryRevision, SearchMemoryRequest,
        SearchMode, SessionRef,
    },
    session::v1::{
        session_service_client::SessionServiceClient, AppendEventRequest, AppendEventResponse,
        CreateSessionRequest, DeleteSessionRequest, Event, GetAppStateRequest, GetSessionRequest,
        ListEventsRequest, ListSessionsRequest, Session, WatchEventsRequest, WatchEventsResponse,
        WatchSessionRequest, WatchSessionResponse,
    },
};
use tokio_stream::Stream;
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig},
    Code, Request, Status, Streaming,
};

use crate::error::{Result, RunnerError, NO_SUCH_HOST};

/// Largest message accepted from or sent to a service: well above the largest event
/// session-svc accepts (`--max-event-bytes`, 16 MiB by default), so that a page of events
/// holding several of them can be read.
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Sessions, events or memories fetched per page (the services' maximum).
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
        let mut channel = Channel::from_shared(with_scheme(endpoint, access))
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

    /// The error for a failed `rpc`: transport failures mean the service is not there, and an
    /// UNIMPLEMENTED status without a message (gRPC's answer for a service the server does not
    /// have) means another server answers at the address.
    pub(crate) fn error(&self, rpc: &'static str, status: Status) -> RunnerError {
        if status.code() == Code::Unimplemented && status.message().is_empty() {
            return RunnerError::WrongService {
                service: self.service,
                endpoint: self.endpoint.clone(),
                rpc,
            };
        }
        // The connection was made (a transport error, not a status a server sent) and the
        // answer was not HTTP/2.
        if status.source().is_some() && status.message().starts_with("h2 protocol error") {
            return RunnerError::NotGrpc {
                service: self.service,
                endpoint: self.endpoint.clone(),
                reason: status.message().to_owned(),
            };
        }
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

/// A channel to the service at `endpoint` with `access`'s TLS settings, connecting lazily, for
/// callers that make their own gRPC clients over it (the gateway presents each caller's token
/// on each call, over one connection).
pub fn channel(endpoint: &str, access: &Access) -> Result<Channel> {
    Remote::channel("service", endpoint, access).map(|(_, channel)| channel)
}

/// `endpoint` with a scheme: as given when it has one, else `https://` when a CA certificate
/// is given and `http://` otherwise.
fn with_scheme(endpoint: &str, access: &Access) -> String {
    if endpoint.contains("://") {
        endpoint.to_owned()
    } else if access.ca_pem.is_some() {
        format!("https://{endpoint}")
    } else {
        format!("http://{endpoint}")
    }
}

/// The gRPC services a server at `endpoint` offers, as its reflection service lists them;
/// `None` when it cannot say (no reflection, unreachable...). For telling a user which server
/// answered where another was expected.
pub async fn services_at(endpoint: &str, access: &Access) -> Option<Vec<String>> {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let (remote, channel) = Remote::channel("reflection", endpoint, access).ok()?;
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(remote.request(tokio_stream::once(request)))
        .await
        .ok()?
        .into_inner();
    match responses.message().await.ok()??.message_response? {
        MessageResponse::ListServicesResponse(list) => {
            Some(list.service.into_iter().map(|s| s.name).collect())
        }
        _ => None,
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
        // hyper-util's connector: the name did not resolve (the I/O error under it is the
        // resolver's "failed to lookup address information: ...").
        if source.to_string() == "dns error" {
            let detail = source.source().map(|e| e.to_string()).unwrap_or_default();
            return Some(format!(
                "{NO_SUCH_HOST} (the name does not resolve: {detail})"
            ));
        }
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
        Ok(Self::over(remote, channel))
    }

    /// A client on a connection made already (the console's, shared by every browser, each
    /// with its own token in `remote`).
    pub(crate) fn over(remote: Remote, channel: Channel) -> Self {
        let client = SessionServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Self { remote, client }
    }

    /// Asks for the app's state and forgets it: whether the service answers for `app` at all
    /// with this client's token (an error says why not).
    pub(crate) async fn probe_app(&self, app: &str) -> Result<()> {
        let request = GetAppStateRequest {
            app_name: app.to_owned(),
        };
        self.client
            .clone()
            .get_app_state(self.remote.request(request))
            .await
            .map(drop)
            .map_err(|s| self.remote.error("GetAppState", s))
    }

    /// The address this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.remote.endpoint
    }

    /// The whole session, or `None` when it does not exist.
    ///
    /// The session (state and metadata) comes first, without events; its events then come page
    /// by page through ListEvents, up to the session's `last_sequence` at that moment, so the
    /// state and the events match and no single message has to hold a large session.
    pub async fn get(&self, app: &str, user: &str, session: &str) -> Result<Option<Session>> {
        let Some(mut found) = self.get_without_events(app, user, session).await? else {
            return Ok(None);
        };
        found.events = self.events(app, user, session, found.last_sequence).await?;
        Ok(Some(found))
    }

    /// The session's state and metadata without its events, or `None` when it does not exist.
    pub async fn get_without_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
    ) -> Result<Option<Session>> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            num_recent_events: Some(0),
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

    /// The session's stored events up to sequence `last`, in order. A page too large for one
    /// message (events of many megabytes each) is fetched again in smaller pages.
    async fn events(&self, app: &str, user: &str, session: &str, last: u64) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut page_size = LIST_PAGE;
        let mut after = 0;
        while after < last {
            let page = match self
                .page_of_events(app, user, session, after, page_size)
                .await
            {
                Ok(page) => page,
                Err(status) if too_large(&status) && page_size > 1 => {
                    page_size /= 2;
                    continue;
                }
                Err(status) => return Err(self.events_error(session, status)),
            };
            let Some(next) = page.last().map(|e| e.sequence) else {
                break;
            };
            events.extend(page.into_iter().filter(|e| e.sequence <= last));
            after = next;
        }
        Ok(events)
    }

    /// Up to `page_size` stored events of the session with a sequence above `after`, in order.
    pub async fn events_after(
        &self,
        app: &str,
        user: &str,
        session: &str,
        after: u64,
        page_size: i32,
    ) -> Result<Vec<Event>> {
        self.page_of_events(app, user, session, after, page_size)
            .await
            .map_err(|status| self.events_error(session, status))
    }

    async fn page_of_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
        after: u64,
        page_size: i32,
    ) -> std::result::Result<Vec<Event>, Status> {
        let request = ListEventsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            after_sequence: after,
            page_size,
            page_token: String::new(),
            ..Default::default()
        };
        let page = self
            .client
            .clone()
            .list_events(self.remote.request(request))
            .await?;
        Ok(page.into_inner().events)
    }

    fn events_error(&self, session: &str, status: Status) -> RunnerError {
        if status.code() == Code::NotFound {
            RunnerError::SessionNotFound {
                session_id: session.to_owned(),
            }
        } else {
            self.remote.error("ListEvents", status)
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
        Ok(self.list_up_to(app, user, usize::MAX).await?.0)
    }

    /// [`Self::list`], stopping after the page that reaches `cap` sessions: at most `cap` of
    /// them, and whether there were more.
    pub async fn list_up_to(
        &self,
        app: &str,
        user: Option<&str>,
        cap: usize,
    ) -> Result<(Vec<Session>, bool)> {
        let mut sessions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListSessionsRequest {
                app_name: app.to_owned(),
                user_id: user.map(str::to_owned),
                page_size: LIST_PAGE,
                page_token,
                ..Default::default()
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
                return Ok((sessions, false));
            }
            if sessions.len() >= cap {
                sessions.truncate(cap);
                return Ok((sessions, true));
            }
            page_token = page.next_page_token;
        }
    }

    /// Deletes the session and its events; returns whether there was one.
    ///
    /// DeleteSession does not say (it is idempotent), so the session is looked up first; a
    /// session created between the two calls is deleted and reported as absent.
    pub async fn delete(&self, app: &str, user: &str, session: &str) -> Result<bool> {
        let existed = self.get_without_events(app, user, session).await?.is_some();
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
        Ok(existed)
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

/// Whether `status` says a message exceeded a size limit (the client's decoding limit is
/// OUT_OF_RANGE in tonic, a server's RESOURCE_EXHAUSTED).
fn too_large(status: &Status) -> bool {
    let message = status.message();
    matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted)
        && (message.contains("too large") || message.contains("larger than max"))
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
        Ok(Self::over(remote, channel))
    }

    /// A client on a connection made already (see [`SessionClient::over`]).
    pub(crate) fn over(remote: Remote, channel: Channel) -> Self {
        let client = MemoryServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Self { remote, client }
    }

    /// The best matches for `query` in the (app, user)'s memory, best first: the query's
    /// language detected by memory-svc, ranked in AUTO mode.
    pub async fn search(&self, app: &str, user: &str, query: &str) -> Result<Vec<MemoryEntry>> {
        self.search_with(app, user, query, "", SearchMode::Unspecified)
            .await
    }

    /// [`Self::search`] with the query in `language` (an ISO 639-1 code; empty: detected),
    /// ranked as `mode` says.
    pub async fn search_with(
        &self,
        app: &str,
        user: &str,
        query: &str,
        language: &str,
        mode: SearchMode,
    ) -> Result<Vec<MemoryEntry>> {
        let request = SearchMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            query: query.to_owned(),
            language: language.to_owned(),
            mode: mode.into(),
            ..Default::default()
        };
        self.search_request(request).await
    }

    /// The entries `request` finds, best first.
    pub async fn search_request(&self, request: SearchMemoryRequest) -> Result<Vec<MemoryEntry>> {
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
            generate: None,
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

    /// [`Self::add_session`] with the session's events given: only these are in memory then.
    pub async fn add_session_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
        events: Vec<Event>,
    ) -> Result<u32> {
        let request = AddSessionToMemoryRequest {
            source: Some(Source::Session(Session {
                id: session.to_owned(),
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                events,
                ..Default::default()
            })),
            generate: None,
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

    /// Has memory-svc generate memories of the (app, user) from `source`: queued (see
    /// [`MemoryClient::job`]), or run before answering with `wait`.
    pub async fn generate(
        &self,
        app: &str,
        user: &str,
        source: GenerateSource,
        wait: bool,
    ) -> Result<GenerationJob> {
        use adk_proto::memory::v1::generate_memories_request::Source as From;
        let source = match source {
            GenerateSource::Session(session_id) => From::SessionRef(SessionRef {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                session_id,
            }),
            GenerateSource::Events(events) => From::Events(EventList { events }),
        };
        let request = GenerateMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            source: Some(source),
            options: Some(GenerateOptions {
                wait,
                ..Default::default()
            }),
        };
        self.client
            .clone()
            .generate_memories(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("GenerateMemories", s))?
            .into_inner()
            .job
            .ok_or_else(|| {
                let missing = Status::internal("the answer holds no job");
                self.remote.error("GenerateMemories", missing)
            })
    }

    /// The generation job `job_id` of the (app, user), as it stands.
    pub async fn job(&self, app: &str, user: &str, job_id: &str) -> Result<GenerationJob> {
        let request = GetGenerationJobRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            job_id: job_id.to_owned(),
        };
        self.client
            .clone()
            .get_generation_job(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("GetGenerationJob", s))
    }

    /// Every change generation made to the (app, user)'s memories (to `memory_id` only, when
    /// given), oldest first.
    pub async fn revisions(
        &self,
        app: &str,
        user: &str,
        memory_id: Option<&str>,
    ) -> Result<Vec<MemoryRevision>> {
        let mut revisions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListMemoryRevisionsRequest {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                memory_id: memory_id.unwrap_or_default().to_owned(),
                page_size: LIST_PAGE,
                page_token,
            };
            let page = self
                .client
                .clone()
                .list_memory_revisions(self.remote.request(request))
                .await
                .map_err(|s| self.remote.error("ListMemoryRevisions", s))?
                .into_inner();
            revisions.extend(page.revisions);
            if page.next_page_token.is_empty() {
                return Ok(revisions);
            }
            page_token = page.next_page_token;
        }
    }

    /// Every memory of the (app, user), in ingestion order.
    pub async fn list(&self, app: &str, user: &str) -> Result<Vec<MemoryEntry>> {
        self.list_of_kind(app, user, MemoryKind::Unspecified).await
    }

    /// [`Self::list`], of one kind only (`Unspecified`: both kinds).
    pub async fn list_of_kind(
        &self,
        app: &str,
        user: &str,
        kind: MemoryKind,
    ) -> Result<Vec<MemoryEntry>> {
        let mut memories = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = self
                .page_of_kind(app, user, LIST_PAGE, page_token, kind)
                .await?;
            memories.extend(page.memories);
            if page.next_page_token.is_empty() {
                return Ok(memories);
            }
            page_token = page.next_page_token;
        }
    }

    /// One page of the (app, user)'s memories, in ingestion order, after `page_token`.
    pub async fn page(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
    ) -> Result<ListMemoriesResponse> {
        self.page_of_kind(app, user, page_size, page_token, MemoryKind::Unspecified)
            .await
    }

    async fn page_of_kind(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
        kind: MemoryKind,
    ) -> Result<ListMemoriesResponse> {
        let request = ListMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            page_size,
            page_token,
            kind: kind.into(),
        };
        self.client
            .clone()
            .list_memories(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("ListMemories", s))
    }

    /// Deletes the (app, user)'s memories that `target` names; returns how many there were.
    pub async fn delete(&self, app: &str, user: &str, target: MemoryTarget) -> Result<u32> {
        let request = DeleteMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            target: Some(match target {
                MemoryTarget::Id(id) => Target::MemoryId(id),
                MemoryTarget::Session(id) => Target::SessionId(id),
                MemoryTarget::All => Target::All(true),
            }),
        };
        Ok(self
            .client
            .clone()
            .delete_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("DeleteMemory", s))?
            .into_inner()
            .deleted)
    }
}

/// What [`MemoryClient::generate`] generates memories from.
#[derive(Debug, Clone, PartialEq)]
pub enum GenerateSource {
    /// A session, which memory-svc fetches from session-svc.
    Session(String),
    /// These events.
    Events(Vec<Event>),
}

/// Which memories [`MemoryClient::delete`] deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryTarget {
    /// The entry with this id (which is then never ingested again).
    Id(String),
    /// Every entry that came from this session.
    Session(String),
    /// Every entry of the user.
    All,
}
