//! The one error type of session-svc. Domain and store produce it; `grpc::status` turns it into
//! a `tonic::Status`.

use adk_common::{page::PageTokenError, storage::StorageError, validate::InvalidArgument};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),

    #[error("{field} is {size} bytes; the limit is {limit} bytes")]
    TooLarge {
        field: &'static str,
        size: usize,
        limit: usize,
    },

    #[error("Session {session_id} not found.")]
    SessionNotFound { session_id: String },

    #[error("Session with id {session_id} already exists.")]
    SessionExists { session_id: String },

    #[error("event {event_id} was already appended to this session with a different payload")]
    EventIdTaken { event_id: String },

    #[error(
        "expected_last_sequence is {expected} but the session's last_sequence is {current}: \
         the session was modified since it was loaded"
    )]
    Stale { expected: u64, current: u64 },

    #[error(
        "cursor position {position} is older than the change feed's retention window \
         (oldest retained position: {oldest})"
    )]
    CursorExpired { position: u64, oldest: u64 },

    /// The storage failed; its kind says what that means for the caller.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl SessionError {
    /// A page token that cannot be used for the listing it was sent with.
    pub fn page_token(e: PageTokenError) -> Self {
        InvalidArgument::new("page_token", e.to_string()).into()
    }

    /// Stored bytes that cannot be decoded; `what` says which.
    pub fn corrupt(what: impl std::fmt::Display) -> Self {
        Self::Storage(StorageError::corrupt(what))
    }
}

adk_common::storage_failures!(SessionError, SessionError::Storage);

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
