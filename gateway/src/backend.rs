//! The services behind the gateway: one connection to each, shared by every caller, with each
//! call carrying its caller's token.

use adk_proto::{
    memory::v1::memory_service_client::MemoryServiceClient,
    session::v1::session_service_client::SessionServiceClient,
};
use runner_client::{clients::channel, Access};
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::Channel,
    Request,
};

use crate::{caller::Caller, error::GatewayError};

/// Largest reply accepted from a service: a session read with its recent events may hold
/// large events (session-svc accepts up to 16 MiB each).
const MAX_MESSAGE_BYTES: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct Backend {
    session: Channel,
    memory: Channel,
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
            own_token: access.token.clone(),
        })
    }

    pub fn sessions(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::new(self.session.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub fn memory(&self) -> MemoryServiceClient<Channel> {
        MemoryServiceClient::new(self.memory.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
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
