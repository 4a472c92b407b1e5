//! How the CLI prints: one JSON object per line with `--json` (see [`runner_client::json`]),
//! otherwise short lines for people. Write errors (a closed pipe) are returned, not panicked on.

use std::io::{self, Write};

use adk_proto::session::v1::{part::Data, Content, Event, Part};
use runner_client::json;
use serde_json::Value;

/// Longest tool response quoted in a human line.
const MAX_QUOTE: usize = 200;

/// `n` and the noun, singular or plural as `n` asks: "1 event", "2 events".
pub(crate) fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Prints `value` as one line of JSON.
pub(crate) fn json_line(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()
}

/// Prints `bytes` as they are.
pub(crate) fn bytes(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Prints one line of text.
pub(crate) fn line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Prints a prompt, without a line end.
pub(crate) fn prompt(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    write!(out, "{text}")?;
    out.flush()
}

/// A stored event on one line: `#seq author: what it holds`.
pub(crate) fn event_line(event: &Event) -> String {
    let sequence = if event.partial == Some(true) {
        "partial".to_owned()
    } else {
        format!("#{}", event.sequence)
    };
    format!("{sequence} {}: {}", event.author, summary(event, true))
}

/// What a content holds, for people: its text, tool calls and results.
pub(crate) fn content_summary(content: &Content) -> String {
    content
        .parts
        .iter()
        .filter_map(|p| part_summary(p, true))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What an event holds, for people: its text, tool calls and results, and state delta.
pub(crate) fn summary(event: &Event, with_text: bool) -> String {
    let mut pieces: Vec<String> = event
        .content
        .iter()
        .flat_map(|c| c.parts.iter())
        .filter_map(|p| part_summary(p, with_text))
        .collect();
    if let Some(actions) = &event.actions {
        if !actions.state_delta.is_empty() && actions.state_delta != "{}" {
            pieces.push(format!("[state_delta {}]", actions.state_delta));
        }
    }
    pieces.join(" ")
}

fn part_summary(part: &Part, with_text: bool) -> Option<String> {
    Some(match part.data.as_ref()? {
        Data::Text(_) if !with_text => return None,
        Data::Text(text) if part.thought == Some(true) => format!("(thinking) {text}"),
        Data::Text(text) => text.clone(),
        Data::FunctionCall(call) => format!(
            "[call {} {}]",
            call.name.as_deref().unwrap_or_default(),
            call.args
        ),
        Data::FunctionResponse(response) => {
            let name = response.name.as_deref().unwrap_or_default();
            let value = json::parse_json_text(&response.response);
            match value["memories"].as_array() {
                Some(memories) => format!(
                    "[{name} returned {}]",
                    count(memories.len() as u64, "memory", "memories")
                ),
                None => format!("[{name} returned {}]", quote(&response.response)),
            }
        }
        Data::InlineData(blob) => format!(
            "[{} bytes of {}]",
            blob.data.as_ref().map_or(0, Vec::len),
            blob.mime_type.as_deref().unwrap_or("data")
        ),
        Data::FileData(file) => format!("[file {}]", file.file_uri.as_deref().unwrap_or_default()),
        Data::ExecutableCode(_) => "[code]".to_owned(),
        Data::CodeExecutionResult(_) => "[code result]".to_owned(),
    })
}

fn quote(text: &str) -> String {
    if text.chars().count() <= MAX_QUOTE {
        return text.to_owned();
    }
    let mut quoted: String = text.chars().take(MAX_QUOTE).collect();
    quoted.push('…');
    quoted
}

/// Prints a turn's events for people as they arrive: streamed text fragment by fragment, then
/// one line per stored event of the agent.
#[derive(Debug, Default)]
pub(crate) struct TurnPrinter {
    /// Fragments of the current reply have been printed, without a line end yet.
    streaming: bool,
}

impl TurnPrinter {
    pub(crate) fn event(&mut self, event: &Event) -> io::Result<()> {
        let mut out = io::stdout().lock();
        if event.partial == Some(true) {
            if !self.streaming {
                write!(out, "{}: ", event.author)?;
                self.streaming = true;
            }
            write!(out, "{}", summary(event, true))?;
        } else if self.streaming {
            // The text arrived in fragments already; show only what else the event holds.
            self.streaming = false;
            let rest = summary(event, false);
            if rest.is_empty() {
                writeln!(out)?;
            } else {
                writeln!(out, "\n{}: {rest}", event.author)?;
            }
        } else {
            writeln!(out, "{}: {}", event.author, summary(event, true))?;
        }
        out.flush()
    }

    /// Ends a reply cut short (by an error) in the middle of its fragments.
    pub(crate) fn interrupted(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.streaming) {
            line("")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{Content, EventActions, FunctionCall, FunctionResponse};

    use super::*;

    #[test]
    fn events_are_summarised_on_one_line() {
        let event = Event {
            author: "recall".into(),
            sequence: 3,
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![
                    Part {
                        data: Some(Data::Text("Hi".into())),
                        ..Default::default()
                    },
                    Part {
                        data: Some(Data::FunctionCall(FunctionCall {
                            name: Some("load_memory".into()),
                            args: r#"{"query":"x"}"#.into(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    },
                    Part {
                        data: Some(Data::FunctionResponse(FunctionResponse {
                            name: Some("load_memory".into()),
                            response: r#"{"memories":[{},{}]}"#.into(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    },
                ],
            }),
            actions: Some(EventActions {
                state_delta: r#"{"k":1}"#.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            event_line(&event),
            r#"#3 recall: Hi [call load_memory {"query":"x"}] [load_memory returned 2 memories] [state_delta {"k":1}]"#
        );
        assert_eq!(
            summary(&event, false),
            r#"[call load_memory {"query":"x"}] [load_memory returned 2 memories] [state_delta {"k":1}]"#
        );
    }
}
