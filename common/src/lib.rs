//! Building blocks shared by `session-svc` and `memory-svc`.
//!
//! # Layout
//! - [`auth`]: bearer tokens (in clear or hashed) scoped to apps and users, reloadable.
//! - [`cache`]: the size of sled's page cache (flag, else a share of the cgroup memory limit).
//! - [`durability`]: group commit, so concurrent writers share one flush to disk.
//! - [`hooks`]: what a server needs from its store (sled or PostgreSQL), built once per kind.
//! - [`keys`]: order-preserving, self-delimiting encoding of composite sled keys.
//! - [`load`]: load shedding beyond a concurrency limit.
//! - [`metrics`]: Prometheus metrics of every RPC and the `/metrics` endpoint.
//! - [`postgres`]: `--store`, PostgreSQL connection pool (TLS: `sslmode`, `sslrootcert`),
//!   schema migrations, the database health check, LISTEN.
//! - [`page`]: opaque page tokens and cursors that cannot leave the scope they were issued for.
//! - [`snapshot`]: online backups (snapshot format, AdminService, snapshot/restore commands).
//! - [`storage`]: storage failures by kind, mapped to gRPC status codes in one place.
//! - [`rpc`]: per-request access checks and log spans.
//! - [`server`]: logging setup, serving beside health and reflection, background tasks,
//!   signals (stop, reload the tokens file).
//! - [`validate`]: checks of identifiers, JSON text fields and page sizes.
//! - [`versions`]: the stored layout version of a store (sled format, PostgreSQL schema), and
//!   the rule refusing one newer than the binary knows.

pub mod auth;
pub mod cache;
pub mod durability;
pub mod hooks;
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
pub mod versions;
