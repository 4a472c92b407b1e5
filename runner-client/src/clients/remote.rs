//! Where a service lives and how to reach it: [`Access`] (TLS and token), endpoints without a
//! scheme, and [`Remote`], which makes the channel and puts the token on each request.

use std::time::Duration;

use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig},
    Request,
};

use crate::error::{Result, RunnerError};

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
