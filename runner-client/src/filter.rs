//! The text syntax of memory filters, as people type them (the CLI's `--filter`, the web
//! console's filter box): a group is conditions on `custom_metadata` keys, separated by commas,
//! that must all hold; several groups are alternatives (a memory passes one group or another).
//!
//! A condition is `KEY=VALUE`, `KEY!=VALUE`, `KEY<VALUE`, `KEY<=VALUE`, `KEY>VALUE`,
//! `KEY>=VALUE`, or `KEY?` (the key is present). A value is a boolean (`true`, `false`), a
//! number (`3`, `-2.5`), an RFC 3339 time in UTC (`2026-05-01T12:00:00Z`), or else a string;
//! a string in double quotes (`"3"`, `"a, b"`) stays a string and may hold commas. `<`, `<=`,
//! `>` and `>=` compare numbers and times.
//!
//! [`json_value`] reads a condition's value given as JSON (a tool argument) by the same rules:
//! a string holding an RFC 3339 time compares as a time.

use std::time::UNIX_EPOCH;

use adk_proto::memory::v1::{
    metadata_condition::Value, MemoryFilter, MetadataCondition, MetadataConditions,
    MetadataOperator,
};
use prost_types::Timestamp;

/// The operators, longest first, so that `<=` is not read as `<`.
const OPERATORS: [(&str, MetadataOperator); 6] = [
    ("!=", MetadataOperator::NotEqual),
    ("<=", MetadataOperator::LessOrEqual),
    (">=", MetadataOperator::GreaterOrEqual),
    ("=", MetadataOperator::Equal),
    ("<", MetadataOperator::Less),
    (">", MetadataOperator::Greater),
];

/// A condition or value the syntax cannot read; the message quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(String);

/// The filter of `groups` (each one group of the text syntax) and `topics`.
pub fn memory_filter(
    groups: &[impl AsRef<str>],
    topics: &[impl AsRef<str>],
) -> Result<MemoryFilter, SyntaxError> {
    let any_of = groups
        .iter()
        .map(|group| {
            let all_of = split(group.as_ref())
                .into_iter()
                .map(|c| condition(c.trim()))
                .collect::<Result<_, _>>()?;
            Ok(MetadataConditions { all_of })
        })
        .collect::<Result<_, SyntaxError>>()?;
    Ok(MemoryFilter {
        any_of,
        topics: topics.iter().map(|t| t.as_ref().to_owned()).collect(),
    })
}

/// A group's conditions: split at commas outside double quotes.
fn split(group: &str) -> Vec<&str> {
    let (mut parts, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in group.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&group[start..]);
    parts
}

fn condition(text: &str) -> Result<MetadataCondition, SyntaxError> {
    if let Some(key) = text.strip_suffix('?') {
        return Ok(MetadataCondition {
            key: key.trim().to_owned(),
            operator: MetadataOperator::Exists.into(),
            value: None,
        });
    }
    let (at, symbol, operator) = OPERATORS
        .iter()
        .filter_map(|(symbol, op)| text.find(symbol).map(|at| (at, *symbol, *op)))
        .min_by_key(|(at, symbol, _)| (*at, std::cmp::Reverse(symbol.len())))
        .ok_or_else(|| {
            SyntaxError(format!("{text:?} is not KEY=VALUE, KEY!=VALUE, KEY<VALUE, KEY>VALUE, KEY<=VALUE, KEY>=VALUE or KEY?"))
        })?;
    let key = text[..at].trim();
    if key.is_empty() {
        return Err(SyntaxError(format!("{text:?} names no key")));
    }
    Ok(MetadataCondition {
        key: key.to_owned(),
        operator: operator.into(),
        value: Some(value(text[at + symbol.len()..].trim())),
    })
}

/// A value as typed: quoted string, boolean, number, time, else string.
fn value(text: &str) -> Value {
    if let Some(quoted) = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        return Value::StringValue(quoted.to_owned());
    }
    match text {
        "true" => return Value::BoolValue(true),
        "false" => return Value::BoolValue(false),
        _ => {}
    }
    if let Ok(n) = text.parse::<f64>() {
        if n.is_finite() {
            return Value::NumberValue(n);
        }
    }
    string_value(text)
}

/// A string value: a time if it is an RFC 3339 time, else the string.
fn string_value(text: &str) -> Value {
    match time(text) {
        Some(time) => Value::TimeValue(time),
        None => Value::StringValue(text.to_owned()),
    }
}

/// A condition's value given as JSON: a boolean, a finite number, or a string (a time if it
/// is an RFC 3339 time); `None` for anything else (null, arrays, objects).
pub fn json_value(value: &serde_json::Value) -> Option<Value> {
    match value {
        serde_json::Value::Bool(b) => Some(Value::BoolValue(*b)),
        serde_json::Value::Number(n) => {
            n.as_f64().filter(|n| n.is_finite()).map(Value::NumberValue)
        }
        serde_json::Value::String(s) => Some(string_value(s)),
        _ => None,
    }
}

/// An RFC 3339 time in UTC as a timestamp.
pub fn time(text: &str) -> Option<Timestamp> {
    let at = humantime::parse_rfc3339(text).ok()?;
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    Some(Timestamp {
        seconds: i64::try_from(since.as_secs()).ok()?,
        nanos: since.subsec_nanos() as i32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_conditions_and_values() {
        let filter = memory_filter(
            &[
                r#"color=red, n>=3,note="a, b""#.to_owned(),
                "vip?,seen<2026-05-01T12:00:00Z,ok!=false".to_owned(),
            ],
            &["pets".to_owned()],
        )
        .unwrap();
        let [first, second] = &filter.any_of[..] else {
            panic!("two groups: {filter:?}");
        };
        let c = |k: &str, op: MetadataOperator, v: Option<Value>| MetadataCondition {
            key: k.into(),
            operator: op.into(),
            value: v,
        };
        assert_eq!(
            first.all_of,
            [
                c(
                    "color",
                    MetadataOperator::Equal,
                    Some(Value::StringValue("red".into()))
                ),
                c(
                    "n",
                    MetadataOperator::GreaterOrEqual,
                    Some(Value::NumberValue(3.0))
                ),
                c(
                    "note",
                    MetadataOperator::Equal,
                    Some(Value::StringValue("a, b".into()))
                ),
            ]
        );
        assert_eq!(
            second.all_of,
            [
                c("vip", MetadataOperator::Exists, None),
                c(
                    "seen",
                    MetadataOperator::Less,
                    Some(Value::TimeValue(Timestamp {
                        seconds: 1_777_636_800,
                        nanos: 0
                    }))
                ),
                c(
                    "ok",
                    MetadataOperator::NotEqual,
                    Some(Value::BoolValue(false))
                ),
            ]
        );
        assert_eq!(filter.topics, ["pets"]);
        let none: [&str; 0] = [];
        assert!(memory_filter(&["color"], &none).is_err());
        assert!(memory_filter(&["=red"], &none).is_err());
    }

    #[test]
    fn json_values_follow_the_text_rules() {
        use serde_json::json;
        assert_eq!(json_value(&json!(true)), Some(Value::BoolValue(true)));
        assert_eq!(json_value(&json!(3)), Some(Value::NumberValue(3.0)));
        assert_eq!(
            json_value(&json!("3")),
            Some(Value::StringValue("3".into())),
            "a JSON string stays a string"
        );
        assert_eq!(
            json_value(&json!("2026-05-01T12:00:00Z")),
            Some(Value::TimeValue(Timestamp {
                seconds: 1_777_636_800,
                nanos: 0
            }))
        );
        assert_eq!(json_value(&json!(null)), None);
        assert_eq!(json_value(&json!([1])), None);
    }
}
