//! The `--filter` syntax of `memory search` and `memory list`: one `--filter` is a group of
//! conditions on `custom_metadata` keys, separated by commas, that must all hold; several
//! `--filter` flags are alternatives (a memory passes one group or another).
//!
//! A condition is `KEY=VALUE`, `KEY!=VALUE`, `KEY<VALUE`, `KEY<=VALUE`, `KEY>VALUE`,
//! `KEY>=VALUE`, or `KEY?` (the key is present). A value is a boolean (`true`, `false`), a
//! number (`3`, `-2.5`), an RFC 3339 time in UTC (`2026-05-01T12:00:00Z`), or else a string;
//! a string in double quotes (`"3"`, `"a, b"`) stays a string and may hold commas. `<`, `<=`,
//! `>` and `>=` compare numbers and times.

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

/// The filter of `--filter` groups and `--topic` flags.
pub(super) fn memory_filter(groups: &[String], topics: &[String]) -> Result<MemoryFilter, String> {
    let any_of = groups
        .iter()
        .map(|group| {
            let all_of = split(group)
                .into_iter()
                .map(|c| condition(c.trim()))
                .collect::<Result<_, _>>()?;
            Ok(MetadataConditions { all_of })
        })
        .collect::<Result<_, String>>()?;
    Ok(MemoryFilter {
        any_of,
        topics: topics.to_vec(),
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

fn condition(text: &str) -> Result<MetadataCondition, String> {
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
            format!("--filter: {text:?} is not KEY=VALUE, KEY!=VALUE, KEY<VALUE, KEY>VALUE, KEY<=VALUE, KEY>=VALUE or KEY?")
        })?;
    let key = text[..at].trim();
    if key.is_empty() {
        return Err(format!("--filter: {text:?} names no key"));
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
    if let Some(time) = time(text) {
        return Value::TimeValue(time);
    }
    Value::StringValue(text.to_owned())
}

/// An RFC 3339 time in UTC as a timestamp.
pub(super) fn time(text: &str) -> Option<Timestamp> {
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
        assert!(memory_filter(&["color".to_owned()], &[]).is_err());
        assert!(memory_filter(&["=red".to_owned()], &[]).is_err());
    }
}
