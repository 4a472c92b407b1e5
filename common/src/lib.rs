//! Building blocks shared by `session-svc` and `memory-svc`, in folders by what needs them:
//! serving code, code of each kind of store, and beside them the pieces every kind of store and
//! server uses.
//!
//! # Layout
//! - [`serve`]: serving a service beside health, reflection and metrics; the flags every server
//!   has, bearer tokens, per-request access checks, load shedding, the hooks a server takes from
//!   its store, the AdminService, stopping on a signal.
//! - [`sled`]: session-svc's embedded database: its page cache, format versions, its errors,
//!   waiting for its lock at shutdown.
//! - [`kv`]: memory-svc's embedded database: named trees of byte keys in one redb file.
//! - [`postgres`]: `--store`, the connection pool (TLS: `sslmode`, `sslrootcert`), schema
//!   migrations, the database health check, LISTEN, its errors.
//! - [`durability`]: group commit, and the sync modes of the embedded stores.
//! - [`snapshot`]: online backups of the embedded stores (the file format, the snapshot and
//!   restore commands).
//! - [`keys`]: composite keys that sort as their components.
//! - [`file_lock`]: waiting for an embedded database's file lock at shutdown.
//! - [`stopping`]: the signal that tells long-running work the server is stopping.
//! - [`metrics`]: Prometheus metrics of every RPC and the `/metrics` endpoint.
//! - [`storage`]: storage failures by kind, mapped to gRPC status codes in one place.
//! - [`versions`]: the rule refusing a store whose layout is newer than the binary knows.
//! - [`page`]: opaque page tokens and cursors that cannot leave the scope they were issued for.
//! - [`validate`]: checks of identifiers, JSON text fields and page sizes.
//!
//! `serve` uses the stores' modules and the rest; `sled`, `kv` and `postgres` use only the
//! storage-neutral modules; of those, `metrics` uses `stopping`, `durability` uses `metrics`,
//! `snapshot` and `versions` use `storage`.

pub mod durability;
pub mod file_lock;
pub mod keys;
pub mod kv;
pub mod metrics;
pub mod page;
pub mod postgres;
pub mod serve;
pub mod sled;
pub mod snapshot;
pub mod stopping;
pub mod storage;
pub mod validate;
pub mod versions;

/// An error of any kind, for the edges where only its message matters (startup, shutdown).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Implements `From` every storage failure (sled, PostgreSQL, a failed flush) for a domain error
/// type whose variant `$variant` holds a [`storage::StorageError`]: each becomes the kind of
/// failure it is, without naming its backend. The calling crate depends on `sled`,
/// `tokio-postgres` and `deadpool-postgres`, as a service with both backends does.
#[macro_export]
macro_rules! storage_failures {
    ($error:ty, $variant:path) => {
        $crate::storage_failures!(
            @each $error, $variant;
            ::sled::Error,
            $crate::kv::Error,
            $crate::postgres::PgError,
            ::tokio_postgres::Error,
            ::deadpool_postgres::PoolError,
            $crate::durability::FlushError
        );
    };
    (@each $error:ty, $variant:path; $($failure:ty),*) => {$(
        impl From<$failure> for $error {
            fn from(e: $failure) -> Self {
                $variant(e.into())
            }
        }
    )*};
}
