//! session-svc: a gRPC session service with the semantics of Google ADK's SessionService.
//!
//! # Layout
//! - [`config`]: command-line flags with environment fallbacks.
//! - [`grpc`]: tonic handlers (thin) and the mapping of errors to statuses.
//! - [`sessions`]: the domain: request checks and ADK's rules, free of transport types.
//! - [`hub`]: in-process change notifications for watchers.
//! - [`state`]: splitting state deltas by scope and merging scopes back.
//! - [`event`]: checks of incoming events.
//! - [`store`]: the storage trait and its two implementations, sled (embedded, one process)
//!   and PostgreSQL (shared by any number of replicas).
//! - [`time`]: the current time and the order of protobuf timestamps.
//! - [`server`]: opening the store and running the server (see `adk_common::serve`).
//! - [`error`]: the one error type.

pub mod config;
pub mod error;
pub mod event;
pub mod grpc;
pub mod hub;
pub mod server;
pub mod sessions;
pub mod state;
pub mod store;
pub mod time;
