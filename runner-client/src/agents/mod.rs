//! The agents shipped with the runner.
//!
//! - [`recall`]: deterministic and model-free, for tests and demos.
//! - [`openai`]: any OpenAI-compatible chat-completions endpoint, with tool calling.

pub mod openai;
pub mod recall;

pub use openai::{OpenAiAgent, OpenAiConfig};
pub use recall::RecallAgent;
