//! What the console's HTTP API can fail with, and the one mapping to HTTP statuses: a JSON body
//! `{"error": "...", "code": "..."}` the page shows as text.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;
use tonic::Code;

use crate::RunnerError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// A service call failed (or the service is not there).
    #[error(transparent)]
    Service(#[from] RunnerError),

    /// A query parameter or body field the console cannot use.
    #[error("invalid {field}: {reason}")]
    BadRequest { field: &'static str, reason: String },

    /// The signed-in token is unknown to the services.
    #[error("the services do not accept this token")]
    UnknownToken,

    /// A write without the console's own request header (not sent by the page: cross-site).
    #[error("writes must come from the console page (header x-console-write missing)")]
    CrossSite,

    /// This browser already has as many live views open as allowed.
    #[error(
        "too many live views open: at most {limit} per browser and {total} in all; close \
         another tab"
    )]
    TooManyLiveViews { limit: usize, total: usize },
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            ConsoleError::Service(RunnerError::Service { code, .. }) => {
                (http_status(*code), code_name(*code))
            }
            ConsoleError::Service(RunnerError::Unreachable { .. }) => {
                (StatusCode::BAD_GATEWAY, "UNAVAILABLE")
            }
            ConsoleError::Service(RunnerError::SessionNotFound { .. }) => {
                (StatusCode::NOT_FOUND, "NOT_FOUND")
            }
            ConsoleError::Service(_) => (StatusCode::BAD_GATEWAY, "INTERNAL"),
            ConsoleError::BadRequest { .. } => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            ConsoleError::UnknownToken => (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
            ConsoleError::CrossSite => (StatusCode::FORBIDDEN, "CROSS_SITE"),
            ConsoleError::TooManyLiveViews { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "RESOURCE_EXHAUSTED")
            }
        };
        (
            status,
            Json(json!({"error": self.to_string(), "code": code})),
        )
            .into_response()
    }
}

fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => {
            StatusCode::BAD_REQUEST
        }
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_GATEWAY,
    }
}

/// The gRPC code as the page shows it (protobuf's SCREAMING_CASE names).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
