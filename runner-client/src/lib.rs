//! Runs agent turns the way Google ADK's Runner does (rules R1-R3 and R6 of the repository's
//! `docs/rules.md`; compaction, R4, and abort events, R5, are not offered), against session-svc
//! and memory-svc.
//!
//! ```no_run
//! # async fn demo() -> Result<(), runner_client::RunnerError> {
//! use std::sync::Arc;
//! use runner_client::{agents::RecallAgent, user_text, MemoryClient, Runner, SessionClient};
//! use tokio_stream::StreamExt;
//!
//! let runner = Runner::new(
//!     "demo",
//!     Arc::new(RecallAgent::new("recall")),
//!     SessionClient::connect("http://127.0.0.1:50051")?,
//! )
//! .with_memory(MemoryClient::connect("http://127.0.0.1:50052")?);
//! let mut events = runner.run("alice", "s1", user_text("What is my favorite project?"), None);
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`runner`]: [`Runner`], one turn end to end.
//! - [`invocation`]: [`InvocationContext`], what an agent sees and does during a turn.
//! - [`agent`]: the [`Agent`] trait.
//! - [`event`]: building the events agents emit and reading stored ones.
//! - [`agents`]: the shipped agents, `recall` and `openai`.
//! - [`template`]: `{key}` / `{key?}` instruction templating.
//! - [`memory_tools`]: `load_memory` and `preload_memory`.
//! - [`clients`]: session-svc and memory-svc calls, with errors that name the service.
//! - `append_stream`: the turn's one `AppendEvents` stream.
//! - [`json`]: protobuf messages as JSON, for output and for the model.
//! - [`filter`]: the text syntax of memory filters, and condition values given as JSON.
//! - [`error`]: [`RunnerError`], the crate's one error type.

pub mod agent;
pub mod agents;
mod append_stream;
pub mod clients;
pub mod error;
pub mod event;
pub mod filter;
pub mod invocation;
pub mod json;
pub mod memory_tools;
pub mod runner;
pub mod template;

pub use agent::Agent;
/// The attribute for implementing [`Agent`] (its method is async), so agents need no
/// dependency of their own on `async-trait`.
pub use async_trait::async_trait;
pub use clients::{Access, GenerateSource, MemoryClient, MemoryTarget, SessionClient};
pub use error::RunnerError;
pub use invocation::InvocationContext;
pub use runner::Runner;

use adk_proto::session::v1::Content;

/// A one-part text message from the user.
pub fn user_text(text: impl Into<String>) -> Content {
    Content {
        role: Some("user".into()),
        parts: vec![event::text_part(text)],
    }
}
