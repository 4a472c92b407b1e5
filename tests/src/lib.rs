//! Test harness: boots the services in-process on an ephemeral loopback port with a fresh
//! store, and offers small builders for requests.
//!
//! Where a suite lives: a suite that boots one program and talks only to it lives in that
//! program's crate (`session-svc/tests/`, `memory-svc/tests/`, `runner-client/tests/`), and
//! the gateway's suites (MCP and the console) in `gateway/tests/`; a suite that needs several
//! programs (both services, replicas, the runner with its servers), or the stored fixtures of
//! `fixtures/`, lives here in `tests/`. Every suite boots its servers through this harness.
//!
//! The store is a sled database in a temporary directory, or, when the environment variable
//! `ADK_TEST_POSTGRES` holds a PostgreSQL connection string, a fresh schema in that database
//! for each server: the same suites then run against the PostgreSQL backend.
//!
//! Helpers panic on failure: they run only inside tests, where a panic is the failure report.
//!
//! # Layout
//! - `servers`: session-svc and memory-svc in this process ([`SessionServer`],
//!   [`MemoryServer`]).
//! - `binaries`: the server binaries as processes.
//! - `postgres`: the database the suites run against, and fresh schemas in it.
//! - `requests`: builders of requests, events and entries.
//! - `fixtures`: stored data as the listings of `fixtures/` spell it.
//! - `metrics`: reading `/metrics`.
//! - [`auth`]: callers with bearer tokens, and every RPC of the contract.
//! - [`live`]: knowing when a watch is live.
//! - [`prerequisite`]: what a test needs from the machine, and how a missing one shows.
//! - [`chat_model`], [`pg_cluster`]: a stand-in chat model, a throwaway PostgreSQL cluster.
//! - [`flag_docs`]: the flag reference of `docs/operations.md` checked against the flags.

pub mod auth;
pub mod chat_model;
pub mod flag_docs;
pub mod live;
pub mod pg_cluster;
pub mod prerequisite;

mod binaries;
mod fixtures;
mod metrics;
mod postgres;
mod requests;
mod servers;

pub use adk_common::durability::SyncMode;

pub use binaries::*;
pub use fixtures::*;
pub use metrics::*;
pub use postgres::*;
pub use requests::*;
pub use servers::*;
