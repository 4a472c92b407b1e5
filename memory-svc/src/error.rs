//! The error type of memory-svc. The domain produces it (wrapping store failures);
//! `grpc::status` turns it into a `tonic::Status`.

use adk_common::validate::InvalidArgument;

use crate::{embed::EmbedError, generate::GenerateError, store::StoreError};

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),

    #[error("Session {session_id} not found.")]
    SessionNotFound { session_id: String },

    #[error(
        "session_ref: session {session_id} is larger than --max-request-bytes ({limit} bytes); \
         add its events with AddEventsToMemory in several calls"
    )]
    SessionTooLarge { session_id: String, limit: usize },

    #[error("session-svc at {endpoint} is unavailable: {reason}")]
    SessionServiceUnavailable { endpoint: String, reason: String },

    #[error("session-svc at {endpoint} refused the request: {reason}")]
    SessionServiceFailed { endpoint: String, reason: String },

    #[error(transparent)]
    Store(#[from] StoreError),

    #[error(transparent)]
    Embed(#[from] EmbedError),

    #[error(transparent)]
    Generate(#[from] GenerateError),

    /// A generation job the caller waited for did not succeed.
    #[error("generation job {job_id}: {source}{}", if *retrying { " (queued for a retry)" } else { " (failed)" })]
    Job {
        job_id: String,
        /// Whether the job is queued again for another attempt.
        retrying: bool,
        source: Box<MemoryError>,
    },

    #[error(
        "job_id: generation job {job_id} not found (finished jobs are deleted once \
         --generator-job-retention-seconds has passed)"
    )]
    JobNotFound { job_id: String },

    #[error("revision_id: memory {memory_id} has no revision {revision_id} (or it was pruned)")]
    RevisionNotFound {
        memory_id: String,
        revision_id: String,
    },

    #[error("mode: {mode} search needs an embedding model (memory-svc --embedder)")]
    NoEmbedder { mode: &'static str },

    /// A lock was poisoned by a thread that panicked while holding it.
    #[error("internal state poisoned by an earlier failure")]
    Poisoned,
}

pub type Result<T, E = MemoryError> = std::result::Result<T, E>;
