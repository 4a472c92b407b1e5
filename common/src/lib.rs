//! Building blocks shared by `session-svc` and `memory-svc`.
//!
//! # Layout
//! - [`keys`]: order-preserving, self-delimiting encoding of composite sled keys.
//! - [`page`]: opaque page tokens and cursors that cannot leave the scope they were issued for.

pub mod keys;
pub mod page;
