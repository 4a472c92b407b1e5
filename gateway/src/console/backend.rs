//! The console's calls to session-svc and memory-svc, each made as the browser's
//! [`Caller`] (its token goes on to the services, which decide what it may see), over the
//! gateway's one connection to each service.

use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, DeleteMemoryRequest, FlushMemoryStreamRequest,
        GenerationJob, ListMemoriesRequest, ListMemoriesResponse, ListMemoryRevisionsRequest,
        ListMemoryStreamsRequest, MemoryEntry, MemoryRevision, MemoryStream, PurgeMemoriesRequest,
        PurgeMemoriesResponse, RollbackMemoryRequest, SearchMemoryRequest,
    },
    session::v1::{
        Event, GetSessionRequest, ListEventsRequest, ListSessionsRequest, Session, SessionOrder,
        WatchEventsRequest, WatchEventsResponse, WatchSessionRequest, WatchSessionResponse,
    },
};
use tokio_stream::{Stream, StreamExt};
use tonic::Code;
use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};

use crate::{backend::Backend, caller::Caller, error::GatewayError, filters::MemoryFilters};

/// Events per ListEvents page (the service's maximum).
pub const EVENTS_PAGE: u32 = 100;

/// Revisions per ListMemoryRevisions page (the service's maximum), and the most read for
/// one memory's history.
const REVISIONS_PAGE: i32 = 100;
const MAX_REVISIONS_READ: usize = 1000;

/// Sessions per ListSessions page (the service's maximum).
const SESSIONS_PAGE: i32 = 1000;

type Result<T> = std::result::Result<T, GatewayError>;

/// One service's answer to a health check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Health {
    pub service: &'static str,
    pub endpoint: String,
    /// SERVING, NOT_SERVING, ... or UNREACHABLE.
    pub status: String,
    /// What went wrong, when the check failed.
    pub error: Option<String>,
    pub millis: u128,
}

/// The gRPC health of both services.
pub async fn health(backend: &Backend) -> Vec<Health> {
    let checks = backend
        .health()
        .map(|(service, grpc_name, endpoint, mut client)| {
            let endpoint = endpoint.to_owned();
            async move {
                let start = std::time::Instant::now();
                let answer = client
                    .check(HealthCheckRequest {
                        service: grpc_name.to_owned(),
                    })
                    .await;
                let (status, error) = match answer {
                    Ok(response) => {
                        let status = ServingStatus::try_from(response.into_inner().status)
                            .unwrap_or(ServingStatus::Unknown);
                        (status.as_str_name().to_owned(), None)
                    }
                    Err(s) if s.code() == Code::Unavailable => {
                        ("UNREACHABLE".to_owned(), Some(s.message().to_owned()))
                    }
                    Err(s) => ("ERROR".to_owned(), Some(s.message().to_owned())),
                };
                Health {
                    service,
                    endpoint,
                    status,
                    error,
                    millis: start.elapsed().as_millis(),
                }
            }
        });
    let [session, memory] = checks;
    let (session, memory) = tokio::join!(session, memory);
    vec![session, memory]
}

/// The calls of one browser.
pub struct Calls<'a> {
    pub backend: &'a Backend,
    pub caller: &'a Caller,
}

impl Calls<'_> {
    /// The apps this browser may see.
    pub async fn apps(&self) -> Result<Vec<String>> {
        self.backend.apps(self.caller).await
    }

    /// The app's sessions (of one user if given), most recently updated first (ties by user and
    /// id), up to the page that reaches `cap`: at most `cap` of them, and whether there were more.
    pub async fn newest_sessions_up_to(
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
                page_size: SESSIONS_PAGE,
                page_token,
                order: SessionOrder::NewestFirst.into(),
                ..Default::default()
            };
            let page = self
                .backend
                .session_call(
                    self.caller,
                    "ListSessions",
                    request,
                    |mut c, r| async move { c.list_sessions(r).await },
                )
                .await?;
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

    /// The session with its merged state and no events.
    pub async fn session(&self, app: &str, user: &str, id: &str) -> Result<Session> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: id.to_owned(),
            num_recent_events: Some(0),
            ..Default::default()
        };
        self.backend
            .sessions()
            .get_session(self.backend.request(self.caller, request)?)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| not_found_or(id, "GetSession", s))
    }

    /// Up to [`EVENTS_PAGE`] stored events with a sequence above `after`.
    pub async fn events(&self, app: &str, user: &str, id: &str, after: u64) -> Result<Vec<Event>> {
        let request = ListEventsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: id.to_owned(),
            after_sequence: after,
            page_size: EVENTS_PAGE as i32,
            ..Default::default()
        };
        self.backend
            .sessions()
            .list_events(self.backend.request(self.caller, request)?)
            .await
            .map(|page| page.into_inner().events)
            .map_err(|s| not_found_or(id, "ListEvents", s))
    }

    /// Stored events above the request's sequence, then live appends and partial events.
    pub async fn watch_session(
        &self,
        request: WatchSessionRequest,
    ) -> Result<impl Stream<Item = Result<WatchSessionResponse>> + Send + 'static> {
        let id = request.session_id.clone();
        let stream = self
            .backend
            .sessions()
            .watch_session(self.backend.request(self.caller, request)?)
            .await
            .map_err(|s| not_found_or(&id, "WatchSession", s))?
            .into_inner();
        Ok(stream
            .map(|item| item.map_err(|s| GatewayError::service("session-svc", "WatchSession", s))))
    }

    /// Every committed event of an app (of one user if the request names one).
    pub async fn watch_events(
        &self,
        request: WatchEventsRequest,
    ) -> Result<impl Stream<Item = Result<WatchEventsResponse>> + Send + 'static> {
        let stream = self
            .backend
            .sessions()
            .watch_events(self.backend.request(self.caller, request)?)
            .await
            .map_err(|s| GatewayError::service("session-svc", "WatchEvents", s))?
            .into_inner();
        Ok(stream
            .map(|item| item.map_err(|s| GatewayError::service("session-svc", "WatchEvents", s))))
    }

    /// One page of the user's memories that pass `filters`, in ingestion order, after
    /// `page_token`.
    pub async fn memories(
        &self,
        app: &str,
        user: &str,
        filters: MemoryFilters,
        page_size: i32,
        page_token: String,
    ) -> Result<ListMemoriesResponse> {
        let request = filters.list(ListMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            page_size,
            page_token,
            ..Default::default()
        });
        self.backend
            .memory_call(
                self.caller,
                "ListMemories",
                request,
                |mut c, r| async move { c.list_memories(r).await },
            )
            .await
    }

    /// Ranked results of `request`, best first.
    pub async fn search(&self, request: SearchMemoryRequest) -> Result<Vec<MemoryEntry>> {
        let found = self
            .backend
            .memory_call(
                self.caller,
                "SearchMemory",
                request,
                |mut c, r| async move { c.search_memory(r).await },
            )
            .await?;
        Ok(found.memories)
    }

    /// A dry run of `request` (how many memories match, and a sample), or with `force` the
    /// purge.
    pub async fn purge(&self, request: PurgeMemoriesRequest) -> Result<PurgeMemoriesResponse> {
        self.backend
            .memory_call(
                self.caller,
                "PurgeMemories",
                request,
                |mut c, r| async move { c.purge_memories(r).await },
            )
            .await
    }

    /// The revisions of the user's memory `memory_id`, oldest first, up to
    /// [`MAX_REVISIONS_READ`].
    pub async fn revisions(
        &self,
        app: &str,
        user: &str,
        memory_id: &str,
    ) -> Result<Vec<MemoryRevision>> {
        let mut revisions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListMemoryRevisionsRequest {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                memory_id: memory_id.to_owned(),
                page_size: REVISIONS_PAGE,
                page_token,
            };
            let page = self
                .backend
                .memory_call(
                    self.caller,
                    "ListMemoryRevisions",
                    request,
                    |mut c, r| async move { c.list_memory_revisions(r).await },
                )
                .await?;
            revisions.extend(page.revisions);
            if page.next_page_token.is_empty() || revisions.len() >= MAX_REVISIONS_READ {
                return Ok(revisions);
            }
            page_token = page.next_page_token;
        }
    }

    /// Restores the user's memory `memory_id` to the fact of its revision `revision_id`; the
    /// revision the rollback recorded.
    pub async fn rollback(
        &self,
        app: &str,
        user: &str,
        memory_id: String,
        revision_id: String,
    ) -> Result<Option<MemoryRevision>> {
        let request = RollbackMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            memory_id,
            revision_id,
        };
        let done = self
            .backend
            .memory_call(
                self.caller,
                "RollbackMemory",
                request,
                |mut c, r| async move { c.rollback_memory(r).await },
            )
            .await?;
        Ok(done.revision)
    }

    /// The user's event streams holding buffered events, by stream id.
    pub async fn streams(&self, app: &str, user: &str) -> Result<Vec<MemoryStream>> {
        let request = ListMemoryStreamsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
        };
        let listed = self
            .backend
            .memory_call(
                self.caller,
                "ListMemoryStreams",
                request,
                |mut c, r| async move { c.list_memory_streams(r).await },
            )
            .await?;
        Ok(listed.streams)
    }

    /// Hands the stream's buffered events to generation now: the job, or `None` when it held
    /// none.
    pub async fn flush_stream(
        &self,
        app: &str,
        user: &str,
        stream_id: String,
    ) -> Result<Option<GenerationJob>> {
        let request = FlushMemoryStreamRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            stream_id,
        };
        let flushed = self
            .backend
            .memory_call(
                self.caller,
                "FlushMemoryStream",
                request,
                |mut c, r| async move { c.flush_memory_stream(r).await },
            )
            .await?;
        Ok(flushed.job)
    }

    /// Deletes the user's memories `target` names; how many there were.
    pub async fn delete_memory(&self, app: &str, user: &str, target: Target) -> Result<u32> {
        let request = DeleteMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            target: Some(target),
        };
        let done = self
            .backend
            .memory_call(
                self.caller,
                "DeleteMemory",
                request,
                |mut c, r| async move { c.delete_memory(r).await },
            )
            .await?;
        Ok(done.deleted)
    }
}

/// NOT_FOUND about the session `id`, or what the service said.
fn not_found_or(id: &str, rpc: &'static str, status: tonic::Status) -> GatewayError {
    if status.code() == Code::NotFound {
        GatewayError::NotFound(format!("session {id:?}"))
    } else {
        GatewayError::service("session-svc", rpc, status)
    }
}
