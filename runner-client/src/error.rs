//! The one error type of the crate: what can stop a turn or a service call.

use tonic::Code;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Nothing answered at the service's address (refused, timed out, no such host...).
    #[error(
        "cannot reach {service} at {endpoint}: {reason}{}",
        running_hint(reason)
    )]
    Unreachable {
        service: &'static str,
        endpoint: String,
        reason: String,
    },

    /// The service answered with an error status.
    #[error("{service} at {endpoint} failed {rpc} with {code:?}: {message}")]
    Service {
        service: &'static str,
        endpoint: String,
        rpc: &'static str,
        code: Code,
        message: String,
    },

    /// Something answers at the service's address, but not in gRPC: it broke HTTP/2 (an HTTP/1
    /// server answers plain HTTP/2 with bytes that are not HTTP/2 frames).
    #[error(
        "the server at {endpoint} does not speak gRPC ({reason}): an HTTP/1 server answers \
         there, not {service}"
    )]
    NotGrpc {
        service: &'static str,
        endpoint: String,
        reason: String,
    },

    /// Another server answers at the service's address: it does not know the service's calls.
    #[error("the server at {endpoint} is not {service}: it does not offer {rpc}")]
    WrongService {
        service: &'static str,
        endpoint: String,
        rpc: &'static str,
    },

    /// The session does not exist (where the runner does not create it).
    #[error("session {session_id} not found")]
    SessionNotFound { session_id: String },

    /// Another writer appended to the session during the turn (optimistic concurrency).
    #[error(
        "session {session_id} was modified by another writer during the turn: expected \
         last_sequence {expected_sequence}, it is now {current_sequence}; reload it and run the \
         turn again"
    )]
    Conflict {
        session_id: String,
        expected_sequence: u64,
        current_sequence: u64,
    },

    /// An endpoint address that is not a usable URL.
    #[error("invalid endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    /// The new message cannot start a turn (R2).
    #[error("invalid message: {0}")]
    InvalidMessage(&'static str),

    /// An instruction names a state key that is not set, without `?` (ADK's KeyError text).
    #[error("Context variable not found: `{0}`.")]
    MissingStateKey(String),

    /// A memory tool was used by a runner that has no memory service.
    #[error("{tool} needs a memory service, and none is configured")]
    NoMemoryService { tool: &'static str },

    /// A field a service returned is not the JSON it should be.
    #[error("{field} returned by {service} is not a JSON object: {reason}")]
    BadJson {
        service: &'static str,
        field: &'static str,
        reason: String,
    },

    /// The model endpoint failed or answered something unusable.
    #[error("model endpoint {endpoint}: {reason}")]
    Model { endpoint: String, reason: String },

    /// The agent could not complete the turn.
    #[error("agent {agent}: {reason}")]
    Agent { agent: String, reason: String },

    /// The consumer of the turn's events went away, so the turn stopped.
    #[error("the turn was abandoned by its caller")]
    Cancelled,
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;

/// What to check when a service cannot be reached: whether it runs, unless the address does
/// not even resolve (then the name is what is wrong).
fn running_hint(reason: &str) -> &'static str {
    if reason.starts_with(NO_SUCH_HOST) {
        ""
    } else {
        " — is it running?"
    }
}

/// The start of [`RunnerError::Unreachable`]'s reason when the host name does not resolve.
pub(crate) const NO_SUCH_HOST: &str = "no such host";
