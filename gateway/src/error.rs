//! The gateway's errors, and the one place they become MCP answers: a tool call that ran and
//! failed is a tool result with `isError` (its text is what a model reads to correct itself);
//! a resource or prompt that cannot be served is a JSON-RPC error.

use std::borrow::Cow;

use rmcp::{
    model::{CallToolResult, ContentBlock},
    ErrorData,
};
use tonic::Code;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A call left out what the caller's token cannot stand in for.
    #[error("{field} is required: {why}")]
    Missing {
        field: &'static str,
        why: &'static str,
    },
    /// A value the gateway refuses before asking a service; `field` is the argument's path
    /// (`filters.metadata[0][1].value`).
    #[error("{field}: {why}")]
    Invalid {
        field: Cow<'static, str>,
        why: String,
    },
    /// Outside the caller's grant.
    #[error("permission denied: {0}")]
    Denied(String),
    /// What a service answered.
    #[error("{service} {rpc} failed ({code:?}): {message}")]
    Service {
        service: &'static str,
        rpc: &'static str,
        code: Code,
        message: String,
    },
    /// A session or resource that does not exist.
    #[error("not found: {0}")]
    NotFound(String),
}

impl GatewayError {
    pub fn service(service: &'static str, rpc: &'static str, status: tonic::Status) -> Self {
        match status.code() {
            Code::PermissionDenied | Code::Unauthenticated => {
                Self::Denied(status.message().to_owned())
            }
            code => Self::Service {
                service,
                rpc,
                code,
                message: status.message().to_owned(),
            },
        }
    }

    /// The tool result a model reads.
    pub fn into_tool_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.to_string())])
    }
}

impl From<GatewayError> for ErrorData {
    fn from(e: GatewayError) -> Self {
        let message = e.to_string();
        match e {
            GatewayError::Missing { .. } | GatewayError::Invalid { .. } => {
                ErrorData::invalid_params(message, None)
            }
            GatewayError::Denied(_) => ErrorData::invalid_request(message, None),
            GatewayError::NotFound(_) => ErrorData::resource_not_found(message, None),
            GatewayError::Service { code, .. } => match code {
                Code::InvalidArgument | Code::OutOfRange => {
                    ErrorData::invalid_params(message, None)
                }
                Code::NotFound => ErrorData::resource_not_found(message, None),
                _ => ErrorData::internal_error(message, None),
            },
        }
    }
}
