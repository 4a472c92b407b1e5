//! The one place where memory-svc errors become gRPC statuses.

use tonic::{Code, Status};

use crate::{error::MemoryError, store::StoreError};

impl From<MemoryError> for Status {
    fn from(e: MemoryError) -> Self {
        let code = match &e {
            MemoryError::InvalidArgument(_) => Code::InvalidArgument,
            MemoryError::Store(StoreError::InvalidPageToken(_)) => Code::InvalidArgument,
            MemoryError::SessionNotFound { .. } => Code::NotFound,
            MemoryError::SessionTooLarge { .. } => Code::InvalidArgument,
            MemoryError::SessionServiceUnavailable { .. } => Code::Unavailable,
            MemoryError::SessionServiceFailed { .. } => Code::FailedPrecondition,
            MemoryError::Store(StoreError::Durability(_)) => Code::Unavailable,
            MemoryError::Store(StoreError::Postgres(e)) if e.is_unavailable() => Code::Unavailable,
            MemoryError::Store(StoreError::Storage(sled::Error::Io(e)))
                if e.kind() == std::io::ErrorKind::StorageFull =>
            {
                Code::ResourceExhausted
            }
            MemoryError::Store(
                StoreError::Storage(_) | StoreError::Postgres(_) | StoreError::Corrupt(_),
            ) => Code::Internal,
        };
        if matches!(code, Code::Internal | Code::Unavailable) {
            tracing::error!(error = %e, "request failed");
        }
        Status::new(code, e.to_string())
    }
}
