//! The services behind the gateway: one connection to each, shared by every caller, with each
//! call carrying its caller's token.

use std::future::Future;

use adk_proto::{
    memory::v1::memory_service_client::MemoryServiceClient,
    session::v1::{session_service_client::SessionServiceClient, ListAppsRequest},
};
use runner_client::{clients::channel, Access};
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::Channel,
    Request, Response, Status,
};
use tonic_health::pb::health_client::HealthClient;

use crate::{caller::Caller, error::GatewayError};

/// Largest reply accepted from a service: a session read with its recent events may hold
/// large events (session-svc accepts up to 16 MiB each).
const MAX_MESSAGE_BYTES: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct Backend {
    session: Channel,
    memory: Channel,
    session_endpoint: String,
    memory_endpoint: String,
    /// The gateway's own token (`--token-file`), for callers that bring none.
    own_token: Option<String>,
}

impl Backend {
    pub fn connect(
        session_endpoint: &str,
        memory_endpoint: &str,
        access: &Access,
    ) -> Result<Self, runner_client::RunnerError> {
        Ok(Self {
            session: channel(session_endpoint, access)?,
            memory: channel(memory_endpoint, access)?,
            session_endpoint: session_endpoint.to_owned(),
            memory_endpoint: memory_endpoint.to_owned(),
            own_token: access.token.clone(),
        })
    }

    pub fn sessions(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::new(self.session.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn memory(&self) -> MemoryServiceClient<Channel> {
        MemoryServiceClient::new(self.memory.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Each service's name, gRPC service name, address and health client (the health
    /// service needs no token).
    pub fn health(&self) -> [(&'static str, &'static str, &str, HealthClient<Channel>); 2] {
        [
            (
                "session-svc",
                "adk.session.v1.SessionService",
                &self.session_endpoint,
                HealthClient::new(self.session.clone()),
            ),
            (
                "memory-svc",
                "adk.memory.v1.MemoryService",
                &self.memory_endpoint,
                HealthClient::new(self.memory.clone()),
            ),
        ]
    }

    /// One session-svc call as `caller`: `call` makes the `rpc` with the client and the
    /// request (which carries the caller's token); a failure names the service and the RPC.
    pub async fn session_call<T, R, F>(
        &self,
        caller: &Caller,
        rpc: &'static str,
        message: T,
        call: impl FnOnce(SessionServiceClient<Channel>, Request<T>) -> F,
    ) -> Result<R, GatewayError>
    where
        F: Future<Output = Result<Response<R>, Status>>,
    {
        let request = self.request(caller, message)?;
        call(self.sessions(), request)
            .await
            .map(Response::into_inner)
            .map_err(|s| GatewayError::service("session-svc", rpc, s))
    }

    /// One memory-svc call as `caller`, as [`Backend::session_call`].
    pub async fn memory_call<T, R, F>(
        &self,
        caller: &Caller,
        rpc: &'static str,
        message: T,
        call: impl FnOnce(MemoryServiceClient<Channel>, Request<T>) -> F,
    ) -> Result<R, GatewayError>
    where
        F: Future<Output = Result<Response<R>, Status>>,
    {
        let request = self.request(caller, message)?;
        call(self.memory(), request)
            .await
            .map(Response::into_inner)
            .map_err(|s| GatewayError::service("memory-svc", rpc, s))
    }

    /// The apps with sessions the caller may use: what session-svc's ListApps answers for
    /// the caller's token, within the caller's grant.
    pub async fn apps(&self, caller: &Caller) -> Result<Vec<String>, GatewayError> {
        let mut apps = self
            .session_call(
                caller,
                "ListApps",
                ListAppsRequest {},
                |mut c, r| async move { c.list_apps(r).await },
            )
            .await?
            .app_names;
        apps.retain(|app| caller.grant().check_app(app).is_ok());
        Ok(apps)
    }

    /// `message` as a request carrying the caller's token, or the gateway's own.
    pub fn request<T>(&self, caller: &Caller, message: T) -> Result<Request<T>, GatewayError> {
        let mut request = Request::new(message);
        if let Some(token) = caller.token.as_deref().or(self.own_token.as_deref()) {
            let value: MetadataValue<Ascii> =
                format!("Bearer {}", token.trim()).parse().map_err(|_| {
                    GatewayError::Denied("the token is not a valid header value".into())
                })?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}
