//! The one place where session-svc errors become gRPC statuses.

use tonic::{Code, Status};

use crate::error::SessionError;

/// Metadata key carrying the session's current last_sequence on an ABORTED append, so a client
/// can reload or retry without parsing the message.
pub const LAST_SEQUENCE_METADATA: &str = "adk-last-sequence";

impl From<SessionError> for Status {
    fn from(e: SessionError) -> Self {
        let code = match &e {
            SessionError::InvalidArgument(_) => Code::InvalidArgument,
            SessionError::TooLarge { .. } => Code::ResourceExhausted,
            SessionError::SessionNotFound { .. } => Code::NotFound,
            SessionError::SessionExists { .. } | SessionError::EventIdTaken { .. } => {
                Code::AlreadyExists
            }
            SessionError::Stale { .. } => Code::Aborted,
            SessionError::CursorExpired { .. } => Code::OutOfRange,
            SessionError::Storage(e) => e.kind().code(),
        };
        if matches!(code, Code::Internal | Code::Unavailable) {
            tracing::error!(error = %e, "request failed");
        }
        let mut status = Status::new(code, e.to_string());
        if let SessionError::Stale { current, .. } = e {
            status
                .metadata_mut()
                .insert(LAST_SEQUENCE_METADATA, current.into());
        }
        status
    }
}
