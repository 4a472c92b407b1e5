//! Clients of session-svc and memory-svc: the calls the runner and the CLI make, with every
//! failure turned into a [`RunnerError`](crate::RunnerError) that names the service and its
//! address.
//!
//! Channels connect lazily, so building a client never fails on a service that is down; the
//! first call does, with [`RunnerError::Unreachable`](crate::RunnerError::Unreachable). An
//! endpoint may omit its scheme (`127.0.0.1:50051`, as grpcurl takes it): `http://` is assumed,
//! `https://` with a CA certificate.
//!
//! - `session`: [`SessionClient`].
//! - `memory`: [`MemoryClient`] and what its generation and deletion take.
//! - `remote`: [`Access`], where a service lives and the token it is shown, and [`channel`].
//! - `failures`: which [`RunnerError`](crate::RunnerError) a failed call is.
//! - `reflection`: [`services_at`], the services a server offers.

mod failures;
mod memory;
mod reflection;
mod remote;
mod session;

pub use memory::{GenerateSource, MemoryClient, MemoryTarget};
pub use reflection::services_at;
pub use remote::{channel, Access};
pub use session::SessionClient;

/// Largest message accepted from or sent to a service: well above the largest event
/// session-svc accepts (`--max-event-bytes`, 16 MiB by default), so that a page of events
/// holding several of them can be read.
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Sessions, events or memories fetched per page (the services' maximum).
const LIST_PAGE: i32 = 100;
