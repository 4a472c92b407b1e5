//! Fetches sessions from session-svc, for `AddSessionToMemory` by reference.

use std::time::Duration;

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, GetSessionRequest, Session,
};
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig},
    Code, Request,
};

use crate::error::{MemoryError, Result};

/// A lazily connected client of session-svc: memory-svc starts (and serves everything else)
/// even while session-svc is down.
#[derive(Debug, Clone)]
pub struct SessionSource {
    endpoint: String,
    client: SessionServiceClient<Channel>,
    /// `Bearer <token>`, when session-svc requires one.
    authorization: Option<MetadataValue<Ascii>>,
    max_session_bytes: usize,
}

/// How to reach session-svc securely.
#[derive(Debug, Clone)]
pub struct SessionAccess {
    /// The bearer token to present.
    pub token: Option<String>,
    /// CA certificate (PEM) for an `https://` endpoint.
    pub ca_pem: Option<Vec<u8>>,
    /// Largest session read, in bytes (encoded): the same bound as a request carrying the
    /// events itself, so a session reference cannot make the server hold more.
    pub max_session_bytes: usize,
}

impl SessionSource {
    /// A source for `endpoint` (e.g. `http://127.0.0.1:50051`); fails only on a malformed URL,
    /// token or certificate.
    pub fn new(endpoint: &str, access: SessionAccess) -> Result<Self> {
        let invalid = |reason: String| MemoryError::SessionServiceUnavailable {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let mut channel = Channel::from_shared(endpoint.to_owned())
            .map_err(|e| invalid(format!("not a valid endpoint URL: {e}")))?
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30));
        if let Some(ca) = access.ca_pem {
            channel = channel
                .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
                .map_err(|e| invalid(format!("bad TLS settings: {e}")))?;
        }
        let authorization = access
            .token
            .map(|t| format!("Bearer {}", t.trim()).parse())
            .transpose()
            .map_err(|_| invalid("the token is not a valid header value".into()))?;
        Ok(Self {
            endpoint: endpoint.to_owned(),
            client: SessionServiceClient::new(channel.connect_lazy())
                .max_decoding_message_size(access.max_session_bytes),
            max_session_bytes: access.max_session_bytes,
            authorization,
        })
    }

    /// The whole session (state and every event).
    pub async fn get(&self, app_name: &str, user_id: &str, session_id: &str) -> Result<Session> {
        let mut request = Request::new(GetSessionRequest {
            app_name: app_name.to_owned(),
            user_id: user_id.to_owned(),
            session_id: session_id.to_owned(),
            ..Default::default()
        });
        if let Some(authorization) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", authorization.clone());
        }
        match self.client.clone().get_session(request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(match status.code() {
                Code::NotFound => MemoryError::SessionNotFound {
                    session_id: session_id.to_owned(),
                },
                // The reply was larger than the decoder accepts.
                Code::OutOfRange => MemoryError::SessionTooLarge {
                    session_id: session_id.to_owned(),
                    limit: self.max_session_bytes,
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
