//! Building blocks shared by `session-svc` and `memory-svc`.
//!
//! # Layout
//! - [`auth`]: bearer tokens scoped to apps and users.
//! - [`durability`]: group commit, so concurrent writers share one flush to disk.
//! - [`keys`]: order-preserving, self-delimiting encoding of composite sled keys.
//! - [`load`]: load shedding beyond a concurrency limit.
//! - [`metrics`]: Prometheus metrics of every RPC and the `/metrics` endpoint.
//! - [`postgres`]: `--store`, PostgreSQL connection pool, schema migrations, LISTEN.
//! - [`page`]: opaque page tokens and cursors that cannot leave the scope they were issued for.
//! - [`snapshot`]: online backups (snapshot format, AdminService, snapshot/restore commands).
//! - [`storage`]: storage failures by kind, mapped to gRPC status codes in one place.
//! - [`rpc`]: per-request access checks and log spans.
//! - [`server`]: logging setup, reflection, shutdown signal.
//! - [`validate`]: checks of identifiers, JSON text fields and page sizes.

pub mod auth;
pub mod durability;
pub mod keys;
pub mod load;
pub mod metrics;
pub mod page;
pub mod postgres;
pub mod rpc;
pub mod server;
pub mod snapshot;
pub mod storage;
pub mod validate;
