//! Fetches sessions from session-svc, for `AddSessionToMemory` by reference.

use std::time::Duration;

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, GetSessionRequest, Session,
};
use tonic::{transport::Channel, Code};

use crate::error::{MemoryError, Result};

/// A lazily connected client of session-svc: memory-svc starts (and serves everything else)
/// even while session-svc is down.
#[derive(Debug, Clone)]
pub struct SessionSource {
    endpoint: String,
    client: SessionServiceClient<Channel>,
}

impl SessionSource {
    /// A source for `endpoint` (e.g. `http://127.0.0.1:50051`); fails only on a malformed URL.
    pub fn new(endpoint: &str) -> Result<Self> {
        let channel = Channel::from_shared(endpoint.to_owned())
            .map_err(|e| MemoryError::SessionServiceUnavailable {
                endpoint: endpoint.to_owned(),
                reason: format!("not a valid endpoint URL: {e}"),
            })?
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30))
            .connect_lazy();
        Ok(Self {
            endpoint: endpoint.to_owned(),
            client: SessionServiceClient::new(channel).max_decoding_message_size(usize::MAX),
        })
    }

    /// The whole session (state and every event).
    pub async fn get(&self, app_name: &str, user_id: &str, session_id: &str) -> Result<Session> {
        let request = GetSessionRequest {
            app_name: app_name.to_owned(),
            user_id: user_id.to_owned(),
            session_id: session_id.to_owned(),
            ..Default::default()
        };
        match self.client.clone().get_session(request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(match status.code() {
                Code::NotFound => MemoryError::SessionNotFound {
                    session_id: session_id.to_owned(),
                },
                Code::Unavailable | Code::DeadlineExceeded | Code::Unknown => {
                    MemoryError::SessionServiceUnavailable {
                        endpoint: self.endpoint.clone(),
                        reason: status.message().to_owned(),
                    }
                }
                code => MemoryError::SessionServiceFailed {
                    endpoint: self.endpoint.clone(),
                    reason: format!("{code:?}: {}", status.message()),
                },
            }),
        }
    }
}
