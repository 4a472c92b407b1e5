//! Input checks shared by both services: identifiers, JSON text fields, message content,
//! timestamps and page sizes.
//!
//! Every failure names the offending field, so a client sees exactly what to fix.

use std::collections::BTreeMap;

use adk_proto::session::v1::{part::Data, Content};
use prost_types::Timestamp;
use serde_json::value::RawValue;

/// The longest identifier (app name, user id, session id, memory id) accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Page size when a request leaves it at 0.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// Largest page a listing returns; larger requests are served this many.
pub const MAX_PAGE_SIZE: usize = 100;

/// A request field that is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidArgument {
    pub field: String,
    pub reason: String,
}

impl InvalidArgument {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The deepest nesting of arrays and objects accepted in a JSON field. Values are stored as
/// text and never walked here, but clients that parse them back (Python's `json`, many others)
/// recurse per level.
pub const MAX_JSON_DEPTH: usize = 128;

/// A JSON object whose values are kept as the exact text they were sent as.
pub type JsonObject = BTreeMap<String, Box<RawValue>>;

/// Checks a required identifier: non-empty, at most [`MAX_ID_BYTES`], no control characters.
pub fn identifier<'a>(field: &str, value: &'a str) -> Result<&'a str, InvalidArgument> {
    if value.is_empty() {
        return Err(InvalidArgument::new(field, "must not be empty"));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(InvalidArgument::new(
            field,
            format!("is {} bytes; the limit is {MAX_ID_BYTES}", value.len()),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(InvalidArgument::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value)
}

/// Parses a JSON-object text field; an empty string is an empty object.
pub fn json_object(field: &str, text: &str) -> Result<JsonObject, InvalidArgument> {
    if text.is_empty() {
        return Ok(JsonObject::new());
    }
    check_depth(field, text)?;
    serde_json::from_str(text)
        .map_err(|e| InvalidArgument::new(field, format!("is not a JSON object: {e}")))
}

/// Checks that a text field holds one valid JSON object (or is empty), without keeping it.
pub fn json_object_text(field: &str, text: &str) -> Result<(), InvalidArgument> {
    if text.is_empty() {
        return Ok(());
    }
    check_depth(field, text)?;
    let value: &RawValue = serde_json::from_str(text)
        .map_err(|e| InvalidArgument::new(field, format!("is not valid JSON: {e}")))?;
    if !value.get().starts_with('{') {
        return Err(InvalidArgument::new(field, "must be a JSON object"));
    }
    Ok(())
}

/// Refuses JSON text nested deeper than [`MAX_JSON_DEPTH`] (a linear scan; brackets inside
/// strings do not count).
fn check_depth(field: &str, text: &str) -> Result<(), InvalidArgument> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(InvalidArgument::new(
                        field,
                        format!("is nested deeper than {MAX_JSON_DEPTH} levels"),
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Resolves a requested page size: 0 means [`DEFAULT_PAGE_SIZE`], larger than
/// [`MAX_PAGE_SIZE`] is served as the maximum, negative is an error.
pub fn page_size(field: &str, requested: i32) -> Result<usize, InvalidArgument> {
    page_size_up_to(field, requested, MAX_PAGE_SIZE)
}

/// [`page_size`] for a listing whose pages may hold up to `max` items.
pub fn page_size_up_to(field: &str, requested: i32, max: usize) -> Result<usize, InvalidArgument> {
    match requested {
        0 => Ok(DEFAULT_PAGE_SIZE),
        n if n < 0 => Err(InvalidArgument::new(field, "must not be negative")),
        n => Ok((n as usize).min(max)),
    }
}

/// Checks the JSON fields of every part of a content.
pub fn content(field: &str, content: &Content) -> Result<(), InvalidArgument> {
    for (i, part) in content.parts.iter().enumerate() {
        let at = |name: &str| format!("{field}.parts[{i}].{name}");
        json_object_text(&at("extra"), &part.extra)?;
        match &part.data {
            Some(Data::FunctionCall(call)) => {
                json_object_text(&at("function_call.args"), &call.args)?;
                json_object_text(&at("function_call.extra"), &call.extra)?;
            }
            Some(Data::FunctionResponse(response)) => {
                json_object_text(&at("function_response.response"), &response.response)?;
                json_object_text(&at("function_response.extra"), &response.extra)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A timestamp, if present, must have nanos in 0..1e9.
pub fn timestamp(field: &str, t: Option<&Timestamp>) -> Result<(), InvalidArgument> {
    match t {
        Some(t) if !(0..1_000_000_000).contains(&t.nanos) => Err(InvalidArgument::new(
            field,
            "nanos must be between 0 and 999,999,999",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert!(identifier("app_name", "my-app/ü").is_ok());
        assert_eq!(identifier("app_name", "").unwrap_err().field, "app_name");
        assert!(identifier("user_id", "a\nb").is_err());
        assert!(identifier("user_id", &"x".repeat(MAX_ID_BYTES + 1)).is_err());
    }

    #[test]
    fn json_objects_keep_value_text() {
        let obj = json_object("state", r#"{"n": 1, "big": 9007199254740993, "f": 1.0}"#).unwrap();
        assert_eq!(obj["big"].get(), "9007199254740993");
        assert_eq!(obj["f"].get(), "1.0");
        assert!(json_object("state", "").unwrap().is_empty());
        assert!(json_object("state", "[1]").is_err());
        assert!(json_object("state", "{").is_err());
        assert!(json_object_text("custom_metadata", r#"{"a":[1]}"#).is_ok());
        assert!(json_object_text("custom_metadata", "3").is_err());
        assert!(json_object_text("custom_metadata", "nope").is_err());
    }

    #[test]
    fn nesting_is_limited() {
        let nested = |n: usize| format!("{{\"k\": {}1{}}}", "[".repeat(n), "]".repeat(n));
        assert!(json_object("state", &nested(MAX_JSON_DEPTH - 1)).is_ok());
        let err = json_object("state", &nested(MAX_JSON_DEPTH)).unwrap_err();
        assert_eq!(err.field, "state");
        assert!(json_object_text("m", &nested(1000)).is_err());
        // Brackets inside strings, escaped quotes included, are text.
        let text = format!("{{\"s\": \"\\\"{}\"}}", "[".repeat(1000));
        assert!(json_object("state", &text).is_ok());
    }

    #[test]
    fn page_sizes() {
        assert_eq!(page_size("page_size", 0), Ok(DEFAULT_PAGE_SIZE));
        assert_eq!(page_size("page_size", 7), Ok(7));
        assert_eq!(page_size("page_size", 1000), Ok(MAX_PAGE_SIZE));
        assert!(page_size("page_size", -1).is_err());
    }
}
