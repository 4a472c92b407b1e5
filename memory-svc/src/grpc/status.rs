//! The one place where memory-svc errors become gRPC statuses.

use tonic::{Code, Status};

use crate::{embed::EmbedError, error::MemoryError, generate::GenerateError, store::StoreError};

impl From<MemoryError> for Status {
    fn from(e: MemoryError) -> Self {
        let code = code(&e);
        if matches!(code, Code::Internal | Code::Unavailable) {
            tracing::error!(error = %e, "request failed");
        }
        Status::new(code, e.to_string())
    }
}

fn code(e: &MemoryError) -> Code {
    match e {
        MemoryError::InvalidArgument(_) => Code::InvalidArgument,
        MemoryError::Store(StoreError::InvalidPageToken(_)) => Code::InvalidArgument,
        MemoryError::SessionNotFound { .. } => Code::NotFound,
        MemoryError::SessionTooLarge { .. } => Code::InvalidArgument,
        MemoryError::SessionServiceUnavailable { .. } => Code::Unavailable,
        MemoryError::SessionServiceFailed { .. } => Code::FailedPrecondition,
        MemoryError::Store(StoreError::Storage(e)) => e.kind().code(),
        MemoryError::Store(StoreError::Model(_) | StoreError::JobEnded(_)) => {
            Code::FailedPrecondition
        }
        MemoryError::NoEmbedder { .. } => Code::FailedPrecondition,
        MemoryError::Poisoned => Code::Internal,
        MemoryError::Embed(e) => match e {
            EmbedError::Unavailable { .. } => Code::Unavailable,
            // The endpoint refuses what the configuration makes us send (key, model name).
            EmbedError::Refused { .. } | EmbedError::ModelNameMissing => Code::FailedPrecondition,
            EmbedError::Malformed { .. } | EmbedError::Inference(_) | EmbedError::Load { .. } => {
                Code::Internal
            }
        },
        MemoryError::Generate(e) => match e {
            GenerateError::Unavailable { .. } => Code::Unavailable,
            GenerateError::NotConfigured
            | GenerateError::Refused { .. }
            | GenerateError::ModelNameMissing
            | GenerateError::Topics { .. } => Code::FailedPrecondition,
            GenerateError::Malformed { .. } => Code::Internal,
        },
        MemoryError::Job { source, .. } => code(source),
        MemoryError::JobNotFound { .. } | MemoryError::RevisionNotFound { .. } => Code::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use adk_common::storage::{StorageError, StorageErrorKind};

    use super::*;

    fn storage(kind: StorageErrorKind) -> Code {
        let e = MemoryError::Store(StoreError::Storage(StorageError::new(kind, "failed")));
        Status::from(e).code()
    }

    #[test]
    fn storage_failures_map_by_kind() {
        assert_eq!(storage(StorageErrorKind::Unavailable), Code::Unavailable);
        assert_eq!(storage(StorageErrorKind::Full), Code::ResourceExhausted);
        // A write that kept losing races was not applied: the client may try again.
        assert_eq!(storage(StorageErrorKind::Conflict), Code::Aborted);
        assert_eq!(storage(StorageErrorKind::Corrupt), Code::Internal);
        let token = StoreError::InvalidPageToken(adk_common::page::PageTokenError::Malformed);
        assert_eq!(
            Status::from(MemoryError::Store(token)).code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn embedder_failures_name_the_endpoint() {
        let endpoint = "http://127.0.0.1:9/v1".to_owned();
        let reason = "connection refused".to_owned();
        let status = Status::from(MemoryError::from(EmbedError::Unavailable {
            endpoint: endpoint.clone(),
            reason: reason.clone(),
        }));
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains(&endpoint), "{status:?}");
        let refused = EmbedError::Refused { endpoint, reason };
        assert_eq!(
            Status::from(MemoryError::from(refused)).code(),
            Code::FailedPrecondition
        );
        let failed = EmbedError::Inference("zero vector".into());
        assert_eq!(
            Status::from(MemoryError::from(failed)).code(),
            Code::Internal
        );
    }
}
