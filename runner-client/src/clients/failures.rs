//! What a failed call means: the [`RunnerError`] for a status, telling a service that is not
//! there, another server at its address and a server that is not gRPC from an error the service
//! sent; and whether a status says a message was too large.

use std::error::Error as _;

use tonic::{Code, Status};

use super::remote::Remote;
use crate::error::{RunnerError, NO_SUCH_HOST};

impl Remote {
    /// The error for a failed `rpc`: transport failures mean the service is not there, and an
    /// UNIMPLEMENTED status without a message (gRPC's answer for a service the server does not
    /// have) means another server answers at the address.
    pub(crate) fn error(&self, rpc: &'static str, status: Status) -> RunnerError {
        if status.code() == Code::Unimplemented && status.message().is_empty() {
            return RunnerError::WrongService {
                service: self.service,
                endpoint: self.endpoint.clone(),
                rpc,
            };
        }
        // The connection was made (a transport error, not a status a server sent) and the
        // answer was not HTTP/2.
        if status.source().is_some() && status.message().starts_with("h2 protocol error") {
            return RunnerError::NotGrpc {
                service: self.service,
                endpoint: self.endpoint.clone(),
                reason: status.message().to_owned(),
            };
        }
        match unreachable_reason(&status) {
            Some(reason) => RunnerError::Unreachable {
                service: self.service,
                endpoint: self.endpoint.clone(),
                reason,
            },
            None => RunnerError::Service {
                service: self.service,
                endpoint: self.endpoint.clone(),
                rpc,
                code: status.code(),
                message: status.message().to_owned(),
            },
        }
    }
}

/// Why a call never reached a server, when that is what `status` says: tonic reports transport
/// failures as UNAVAILABLE with the underlying error as the source (a server's own UNAVAILABLE
/// has none). The innermost I/O error is the useful part ("connection refused").
fn unreachable_reason(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    let mut source = status.source()?;
    let mut reason = source.to_string();
    loop {
        // hyper-util's connector: the name did not resolve (the I/O error under it is the
        // resolver's "failed to lookup address information: ...").
        if source.to_string() == "dns error" {
            let detail = source.source().map(|e| e.to_string()).unwrap_or_default();
            return Some(format!(
                "{NO_SUCH_HOST} (the name does not resolve: {detail})"
            ));
        }
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return Some(match io.kind() {
                ConnectionRefused | ConnectionReset | TimedOut | HostUnreachable
                | NetworkUnreachable | AddrNotAvailable => io.kind().to_string(),
                _ => io.to_string(),
            });
        }
        match source.source() {
            Some(next) => {
                reason = next.to_string();
                source = next;
            }
            None => return Some(reason),
        }
    }
}

/// Whether `status` says a message exceeded a size limit (the client's decoding limit is
/// OUT_OF_RANGE in tonic, a server's RESOURCE_EXHAUSTED).
pub(super) fn too_large(status: &Status) -> bool {
    let message = status.message();
    matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted)
        && (message.contains("too large") || message.contains("larger than max"))
}
