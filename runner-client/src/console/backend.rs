//! The console's calls to session-svc and memory-svc, made with the token of the browser that
//! asked: the services decide what each browser may see, so the console never shows more than
//! the token allows. One connection per service is shared by every browser.

use adk_proto::{
    memory::v1::{ListMemoriesResponse, MemoryEntry, SearchMemoryRequest},
    session::v1::{
        Event, Session, WatchEventsRequest, WatchEventsResponse, WatchSessionRequest,
        WatchSessionResponse,
    },
};
use tokio_stream::Stream;
use tonic::{transport::Channel, Code};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
};

use crate::{
    clients::{MemoryTarget, Remote},
    error::{Result, RunnerError},
    Access, MemoryClient, SessionClient,
};

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
            session: SessionClient::over(self.session.0.with_token(token)?, self.session.1.clone()),
            memory: MemoryClient::over(self.memory.0.with_token(token)?, self.memory.1.clone()),
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
    session: SessionClient,
    memory: MemoryClient,
}

impl Backend {
    /// Whether the services accept this token at all (any answer but UNAUTHENTICATED: the
    /// probe names no real app, so PERMISSION_DENIED or INVALID_ARGUMENT still mean "known").
    pub async fn token_is_known(&self) -> Result<bool> {
        match self.session.probe_app("").await {
            Ok(()) => Ok(true),
            Err(RunnerError::Service {
                code: Code::Unauthenticated,
                ..
            }) => Ok(false),
            Err(e @ RunnerError::Unreachable { .. }) => Err(e),
            Err(_) => Ok(true),
        }
    }

    /// Whether the token may see the app at all (the app-wide check, which a token limited to
    /// some users of the app passes too).
    pub async fn app_visible(&self, app: &str) -> Result<bool> {
        match self.session.probe_app(app).await {
            Ok(()) => Ok(true),
            Err(RunnerError::Service {
                code: Code::PermissionDenied,
                ..
            }) => Ok(false),
            Err(e) => Err(e),
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
        self.session.list_up_to(app, user, cap).await
    }

    /// The session with its merged state and no events.
    pub async fn session(&self, app: &str, user: &str, id: &str) -> Result<Session> {
        self.session
            .get_without_events(app, user, id)
            .await?
            .ok_or_else(|| RunnerError::SessionNotFound {
                session_id: id.to_owned(),
            })
    }

    /// Up to [`EVENTS_PAGE`] stored events with a sequence above `after`.
    pub async fn events(&self, app: &str, user: &str, id: &str, after: u64) -> Result<Vec<Event>> {
        self.session
            .events_after(app, user, id, after, EVENTS_PAGE as i32)
            .await
    }

    /// Stored events after `request.after_sequence`, then live ones (partials included if asked).
    pub async fn watch_session(
        &self,
        request: WatchSessionRequest,
    ) -> Result<impl Stream<Item = Result<WatchSessionResponse>> + Send + Unpin + 'static> {
        self.session.watch_session(request).await
    }

    /// Every committed event of the app (of one user, if the request names one).
    pub async fn watch_events(
        &self,
        request: WatchEventsRequest,
    ) -> Result<impl Stream<Item = Result<WatchEventsResponse>> + Send + Unpin + 'static> {
        self.session.watch_events(request).await
    }

    /// One page of the user's memories, in ingestion order.
    pub async fn memories(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
    ) -> Result<ListMemoriesResponse> {
        self.memory.page(app, user, page_size, page_token).await
    }

    /// Ranked search, best first.
    pub async fn search(&self, request: SearchMemoryRequest) -> Result<Vec<MemoryEntry>> {
        self.memory.search_request(request).await
    }

    /// Deletes one entry or every entry of a session; returns how many went.
    pub async fn delete_memory(&self, app: &str, user: &str, target: MemoryTarget) -> Result<u32> {
        self.memory.delete(app, user, target).await
    }
}
