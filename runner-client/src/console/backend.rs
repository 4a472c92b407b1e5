//! The console's calls to session-svc and memory-svc, made with the token of the browser that
//! asked: the services decide what each browser may see, so the console never shows more than
//! the token allows. One connection per service is shared by every browser.

use adk_proto::session::v1::{Event, Session};
use tonic::{transport::Channel, Code};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
};

use crate::{
    clients::Remote,
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
    /// Session calls as this browser.
    pub session: SessionClient,
    /// Memory calls as this browser.
    pub memory: MemoryClient,
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

    /// The session with its merged state and no events; [`RunnerError::SessionNotFound`] if
    /// there is none.
    pub async fn find_session(&self, app: &str, user: &str, id: &str) -> Result<Session> {
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
}
