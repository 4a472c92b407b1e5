//! Building blocks shared by `session-svc` and `memory-svc`.
//!
//! # Layout
//! - [`durability`]: group commit, so concurrent writers share one flush to disk.
//! - [`keys`]: order-preserving, self-delimiting encoding of composite sled keys.
//! - [`page`]: opaque page tokens and cursors that cannot leave the scope they were issued for.
//! - [`server`]: logging setup, reflection, shutdown signal.
//! - [`validate`]: checks of identifiers, JSON text fields and page sizes.

pub mod durability;
pub mod keys;
pub mod page;
pub mod server;
pub mod validate;
