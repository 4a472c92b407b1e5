//! The one error type of session-svc. Domain and store produce it; `grpc::status` turns it into
//! a `tonic::Status`.

use adk_common::{
    durability::FlushError, page::PageTokenError, postgres::PgError, validate::InvalidArgument,
};

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

    #[error("storage error: {0}")]
    Storage(#[from] sled::Error),

    #[error(transparent)]
    Postgres(#[from] PgError),

    #[error("stored data is corrupt: {0}")]
    Corrupt(String),

    #[error(transparent)]
    Durability(#[from] FlushError),
}

impl SessionError {
    /// A page token that cannot be used for the listing it was sent with.
    pub fn page_token(e: PageTokenError) -> Self {
        InvalidArgument::new("page_token", e.to_string()).into()
    }
}

impl From<tokio_postgres::Error> for SessionError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Postgres(e.into())
    }
}

impl From<deadpool_postgres::PoolError> for SessionError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Self::Postgres(e.into())
    }
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
