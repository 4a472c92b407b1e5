//! The [`Agent`] trait the runner drives.

use adk_proto::session::v1::Event;
use async_trait::async_trait;

use crate::{error::Result, invocation::InvocationContext};

/// Something that answers a user message by emitting events through the context.
///
/// The agent emits each event with [`InvocationContext::emit`], which returns once the event
/// is stored (or, for a partial event, forwarded), so the agent always sees the session as
/// its own events left it: state, `temp:` state and event history.
#[async_trait]
pub trait Agent: Send + Sync {
    /// The agent's name: the author of its events.
    fn name(&self) -> &str;

    /// ADK's `output_key`: the state key under which the text of the agent's final reply is
    /// saved (through the final event's state delta).
    fn output_key(&self) -> Option<&str> {
        None
    }

    /// Whether the runner keeps `event` of the session in memory when it remembers sessions
    /// (`remember_sessions`). Every event by default, as ADK's `add_session_to_memory` does.
    fn remembers(&self, _event: &Event) -> bool {
        true
    }

    /// Runs one turn. The user's message is already stored; see
    /// [`InvocationContext::user_content`].
    async fn run(&self, ctx: &mut InvocationContext) -> Result<()>;
}
