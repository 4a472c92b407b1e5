//! The console's calls to session-svc and memory-svc, made with the token of the browser that
//! asked: the services decide what each browser may see, so the console never shows more than
//! the token allows. One connection per service is shared by every browser.

use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, memory_service_client::MemoryServiceClient,
        DeleteMemoryRequest, ListMemoriesRequest, ListMemoriesResponse, MemoryEntry,
        SearchMemoryRequest,
    },
    session::v1::{
        session_service_client::SessionServiceClient, Event, GetAppStateRequest, GetSessionRequest,
        ListEventsRequest, ListSessionsRequest, Session, WatchEventsRequest, WatchEventsResponse,
        WatchSessionRequest, WatchSessionResponse,
    },
};
use tonic::{transport::Channel, Code, Streaming};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
};

use crate::{
    clients::{Remote, MAX_MESSAGE_BYTES},
    error::{Result, RunnerError},
    Access,
};

/// Sessions per ListSessions page (the service's maximum).
const LIST_PAGE: i32 = 100;

/// Events per ListEvents page (the service's maximum).
pub const EVENTS_PAGE: u32 = 100;

/// The two services, reached without a token until [`Services::acting_for`] picks one.
#[derive(Debug, Clone)]
pub struct Services {
    session: (Remote, Channel),
    memory: (Remote, Channel),
}

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

impl Services {
    /// Lazy connections to both services (nothing is dialled before the first call).
    pub fn connect(
        session_endpoint: &str,
        memory_endpoint: &str,
        ca_pem: Option<Vec<u8>>,
    ) -> Result<Self> {
        let access = Access {
            token: None,
            ca_pem,
        };
        Ok(Self {
            session: Remote::channel("session-svc", session_endpoint, &access)?,
            memory: Remote::channel("memory-svc", memory_endpoint, &access)?,
        })
    }

    /// The calls of one browser, presenting its token (`None`: no token).
    pub fn acting_for(&self, token: Option<&str>) -> Result<Backend> {
        Ok(Backend {
            session_remote: self.session.0.with_token(token)?,
            session: SessionServiceClient::new(self.session.1.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            memory_remote: self.memory.0.with_token(token)?,
            memory: MemoryServiceClient::new(self.memory.1.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
        })
    }

    /// The gRPC health of both services (the health service needs no token).
    pub async fn health(&self) -> [Health; 2] {
        let (session, memory) = tokio::join!(
            check(&self.session, "adk.session.v1.SessionService"),
            check(&self.memory, "adk.memory.v1.MemoryService"),
        );
        [session, memory]
    }
}

async fn check((remote, channel): &(Remote, Channel), service_name: &str) -> Health {
    let start = std::time::Instant::now();
    let request = HealthCheckRequest {
        service: service_name.to_owned(),
    };
    let answer = HealthClient::new(channel.clone()).check(request).await;
    let millis = start.elapsed().as_millis();
    let (status, error) = match answer {
        Ok(response) => {
            let status = ServingStatus::try_from(response.into_inner().status)
                .unwrap_or(ServingStatus::Unknown);
            (status.as_str_name().to_owned(), None)
        }
        Err(status) => match remote.error("Check", status) {
            e @ RunnerError::Unreachable { .. } => ("UNREACHABLE".to_owned(), Some(e.to_string())),
            e => ("ERROR".to_owned(), Some(e.to_string())),
        },
    };
    Health {
        service: remote.service,
        endpoint: remote.endpoint.clone(),
        status,
        error,
        millis,
    }
}

/// The calls of one browser (see [`Services::acting_for`]).
#[derive(Debug, Clone)]
pub struct Backend {
    session_remote: Remote,
    session: SessionServiceClient<Channel>,
    memory_remote: Remote,
    memory: MemoryServiceClient<Channel>,
}

/// What memory to delete.
#[derive(Debug, Clone)]
pub enum MemoryTarget {
    Entry(String),
    Session(String),
}

impl Backend {
    /// Whether the services accept this token at all (any answer but UNAUTHENTICATED: the
    /// probe names no real app, so PERMISSION_DENIED or INVALID_ARGUMENT still mean "known").
    pub async fn token_is_known(&self) -> Result<bool> {
        let request = GetAppStateRequest {
            app_name: String::new(),
        };
        match self
            .session
            .clone()
            .get_app_state(self.session_remote.request(request))
            .await
        {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::Unauthenticated => Ok(false),
            Err(status) => match self.session_remote.error("GetAppState", status) {
                e @ RunnerError::Unreachable { .. } => Err(e),
                _ => Ok(true),
            },
        }
    }

    /// Whether the token may see the app at all (the app-wide check, which a token limited to
    /// some users of the app passes too).
    pub async fn app_visible(&self, app: &str) -> Result<bool> {
        let request = GetAppStateRequest {
            app_name: app.to_owned(),
        };
        match self
            .session
            .clone()
            .get_app_state(self.session_remote.request(request))
            .await
        {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::PermissionDenied => Ok(false),
            Err(status) => Err(self.session_remote.error("GetAppState", status)),
        }
    }

    /// The sessions of the app (of one user, if given), without events, in the service's
    /// order (least recently updated first); at most `cap` of them, and whether there were more.
    pub async fn sessions(
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
            };
            let page = self
                .session
                .clone()
                .list_sessions(self.session_remote.request(request))
                .await
                .map_err(|s| self.session_remote.error("ListSessions", s))?
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

    /// The session with its merged state and no events.
    pub async fn session(&self, app: &str, user: &str, id: &str) -> Result<Session> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: id.to_owned(),
            num_recent_events: Some(0),
            after_timestamp: None,
            ..Default::default()
        };
        self.session
            .clone()
            .get_session(self.session_remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.session_remote.error("GetSession", s))
    }

    /// Up to [`EVENTS_PAGE`] stored events with a sequence above `after`.
    pub async fn events(&self, app: &str, user: &str, id: &str, after: u64) -> Result<Vec<Event>> {
        let request = ListEventsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: id.to_owned(),
            after_sequence: after,
            page_size: EVENTS_PAGE as i32,
            page_token: String::new(),
            ..Default::default()
        };
        self.session
            .clone()
            .list_events(self.session_remote.request(request))
            .await
            .map(|r| r.into_inner().events)
            .map_err(|s| self.session_remote.error("ListEvents", s))
    }

    /// Stored events after `request.after_sequence`, then live ones (partials included if asked).
    pub async fn watch_session(
        &self,
        request: WatchSessionRequest,
    ) -> Result<Streaming<WatchSessionResponse>> {
        self.session
            .clone()
            .watch_session(self.session_remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.session_remote.error("WatchSession", s))
    }

    /// Every committed event of the app (of one user, if the request names one).
    pub async fn watch_events(
        &self,
        request: WatchEventsRequest,
    ) -> Result<Streaming<WatchEventsResponse>> {
        self.session
            .clone()
            .watch_events(self.session_remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.session_remote.error("WatchEvents", s))
    }

    /// The error for a failure inside a stream of session-svc.
    pub fn stream_error(&self, rpc: &'static str, status: tonic::Status) -> RunnerError {
        self.session_remote.error(rpc, status)
    }

    /// One page of the user's memories, in ingestion order.
    pub async fn memories(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
    ) -> Result<ListMemoriesResponse> {
        let request = ListMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            page_size,
            page_token,
        };
        self.memory
            .clone()
            .list_memories(self.memory_remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.memory_remote.error("ListMemories", s))
    }

    /// Ranked search, best first.
    pub async fn search(&self, request: SearchMemoryRequest) -> Result<Vec<MemoryEntry>> {
        self.memory
            .clone()
            .search_memory(self.memory_remote.request(request))
            .await
            .map(|r| r.into_inner().memories)
            .map_err(|s| self.memory_remote.error("SearchMemory", s))
    }

    /// Deletes one entry or every entry of a session; returns how many went.
    pub async fn delete_memory(&self, app: &str, user: &str, target: MemoryTarget) -> Result<u32> {
        let request = DeleteMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            target: Some(match target {
                MemoryTarget::Entry(id) => Target::MemoryId(id),
                MemoryTarget::Session(id) => Target::SessionId(id),
            }),
        };
        self.memory
            .clone()
            .delete_memory(self.memory_remote.request(request))
            .await
            .map(|r| r.into_inner().deleted)
            .map_err(|s| self.memory_remote.error("DeleteMemory", s))
    }
}
