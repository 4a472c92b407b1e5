//! Checks of an incoming event: every JSON text field must hold a JSON object, timestamps must
//! be well-formed, and the server-assigned `sequence` must not be forced by the client.

use adk_common::validate::{self, identifier, json_object_text, timestamp, InvalidArgument};
use adk_proto::session::v1::Event;

/// Checks everything about `event` except its state delta (parsed separately by the caller).
pub fn check(event: &Event) -> Result<(), InvalidArgument> {
    if !event.id.is_empty() {
        identifier("event.id", &event.id)?;
    }
    if event.sequence != 0 {
        return Err(InvalidArgument::new(
            "event.sequence",
            "is assigned by the server and must be 0 on append",
        ));
    }
    timestamp("event.timestamp", event.timestamp.as_ref())?;
    for (field, text) in [
        ("event.custom_metadata", &event.custom_metadata),
        ("event.usage_metadata", &event.usage_metadata),
        ("event.grounding_metadata", &event.grounding_metadata),
        ("event.citation_metadata", &event.citation_metadata),
        ("event.extra", &event.extra),
    ] {
        json_object_text(field, text)?;
    }
    if let Some(content) = &event.content {
        validate::content("event.content", content)?;
    }
    if let Some(actions) = &event.actions {
        for (field, text) in [
            (
                "event.actions.requested_auth_configs",
                &actions.requested_auth_configs,
            ),
            (
                "event.actions.requested_tool_confirmations",
                &actions.requested_tool_confirmations,
            ),
            ("event.actions.agent_state", &actions.agent_state),
            ("event.actions.extra", &actions.extra),
        ] {
            json_object_text(field, text)?;
        }
        if let Some(compaction) = &actions.compaction {
            timestamp(
                "event.actions.compaction.start_timestamp",
                compaction.start_timestamp.as_ref(),
            )?;
            timestamp(
                "event.actions.compaction.end_timestamp",
                compaction.end_timestamp.as_ref(),
            )?;
            if let Some(content) = &compaction.compacted_content {
                validate::content("event.actions.compaction.compacted_content", content)?;
            }
        }
    }
    Ok(())
}
