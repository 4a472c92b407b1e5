//! Storage failures as the transport sees them: what kind of failure it was, never which backend
//! it came from.
//!
//! Each store (sled, PostgreSQL) turns its own errors into a [`StorageError`] at its boundary,
//! saying what the failure means for the caller; the gRPC layer maps [`StorageErrorKind`] to a
//! status code once, in [`StorageErrorKind::code`], without knowing any storage type.

use std::fmt;

use tonic::Code;

/// What a storage failure means to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageErrorKind {
    /// The storage cannot be reached or takes no more writes (database down, a failed flush):
    /// the same call may succeed later, or on another replica.
    Unavailable,
    /// The disk is full.
    Full,
    /// Stored bytes that cannot be read back.
    Corrupt,
    /// The write lost a race with another writer and was not applied; running it again may
    /// succeed.
    Conflict,
    /// Anything else: a defect or a failure nobody can act on.
    Internal,
}

impl StorageErrorKind {
    /// The gRPC status code a failure of this kind is answered with.
    pub fn code(self) -> Code {
        match self {
            Self::Unavailable => Code::Unavailable,
            Self::Full => Code::ResourceExhausted,
            Self::Conflict => Code::Aborted,
            Self::Corrupt | Self::Internal => Code::Internal,
        }
    }
}

/// A storage failure: its kind and a message for the client and the log.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StorageError {
    kind: StorageErrorKind,
    message: String,
}

impl StorageError {
    pub fn new(kind: StorageErrorKind, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
        }
    }

    /// Stored bytes that cannot be decoded; `what` says which.
    pub fn corrupt(what: impl fmt::Display) -> Self {
        Self::new(
            StorageErrorKind::Corrupt,
            format!("stored data is corrupt: {what}"),
        )
    }

    pub fn kind(&self) -> StorageErrorKind {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_data_names_what_could_not_be_read() {
        let e = StorageError::corrupt("event 3");
        assert_eq!(e.kind().code(), Code::Internal);
        assert_eq!(e.to_string(), "stored data is corrupt: event 3");
    }
}
