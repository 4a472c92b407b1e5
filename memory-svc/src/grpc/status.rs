//! The one place where memory-svc errors become gRPC statuses.

use tonic::{Code, Status};

use crate::{error::MemoryError, store::StoreError};

impl From<MemoryError> for Status {
    fn from(e: MemoryError) -> Self {
        let code = match &e {
            MemoryError::InvalidArgument(_) => Code::InvalidArgument,
            MemoryError::Store(StoreError::InvalidPageToken(_)) => Code::InvalidArgument,
            MemoryError::SessionNotFound { .. } => Code::NotFound,
            MemoryError::SessionServiceUnavailable { .. } => Code::Unavailable,
            MemoryError::SessionServiceFailed { .. } => Code::FailedPrecondition,
            MemoryError::Store(StoreError::Storage(e)) => e.kind().code(),
        };
        if matches!(code, Code::Internal | Code::Unavailable) {
            tracing::error!(error = %e, "request failed");
        }
        Status::new(code, e.to_string())
    }
}
