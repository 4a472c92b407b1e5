//! What the console's HTTP API can fail with, and the one mapping to HTTP statuses: a JSON body
//! `{"error": "...", "code": "..."}` the page shows as text.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;
use tonic::Code;

use crate::error::GatewayError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// A service call failed, or the caller may not make it.
    #[error(transparent)]
    Service(#[from] GatewayError),

    /// A query parameter or body field the console cannot use.
    #[error("invalid {field}: {reason}")]
    BadRequest { field: &'static str, reason: String },

    /// A token the gateway does not know (not in its tokens file).
    #[error("the gateway does not accept this token")]
    UnknownToken,

    /// A request without a signed-in token, where the gateway requires one.
    #[error("sign in with a token first")]
    SignInRequired,

    /// Signing in to a gateway that authenticates no one (no tokens file).
    #[error("this gateway runs without a tokens file: there is nothing to sign in to")]
    NoSignIn,

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
            ConsoleError::Service(GatewayError::Service { code, .. }) => {
                (http_status(*code), code_name(*code))
            }
            ConsoleError::Service(GatewayError::Denied(_)) => {
                (StatusCode::FORBIDDEN, "PERMISSION_DENIED")
            }
            ConsoleError::Service(GatewayError::NotFound(_)) => {
                (StatusCode::NOT_FOUND, "NOT_FOUND")
            }
            ConsoleError::Service(GatewayError::Missing { .. } | GatewayError::Invalid { .. })
            | ConsoleError::BadRequest { .. }
            | ConsoleError::NoSignIn => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            ConsoleError::UnknownToken | ConsoleError::SignInRequired => {
                (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
            }
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
