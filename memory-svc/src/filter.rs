//! Filters of searches and listings: conditions on an entry's `custom_metadata` keys combined
//! as an OR of AND groups, and its topics. [`Filter::parse`] is the one place a request's
//! `MemoryFilter` is checked; [`Filter::admits`] is the one place an entry is tested against it.
//! The stores narrow a filter's candidates with their metadata indexes (see
//! [`crate::store::metadata`]) and test each candidate here, so both answer alike.

use std::{cmp::Ordering, time::UNIX_EPOCH};

use adk_common::validate::{timestamp, InvalidArgument};
use adk_proto::memory::v1::{metadata_condition, MemoryFilter, MetadataOperator};
use serde_json::{Map, Value as Json};

/// The longest metadata key a condition may name, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The most groups a filter may hold.
pub const MAX_GROUPS: usize = 10;
/// The most conditions a filter may hold, over all its groups.
pub const MAX_CONDITIONS: usize = 50;
/// The most topics a filter may name.
pub const MAX_TOPICS: usize = 50;
/// The metadata key that holds a memory's topic.
pub const TOPIC_KEY: &str = "topic";

/// A checked filter. The default admits every entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// An entry passes when every condition of one group holds; empty: no condition.
    pub any_of: Vec<Vec<Condition>>,
    /// An entry passes when its `topic` key holds one of these strings; empty: any.
    pub topics: Vec<String>,
}

/// A condition on one top-level metadata key.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub key: String,
    pub test: Test,
}

/// What a condition asks of a key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Equal(Value),
    /// Not [`Test::Equal`]: an absent key passes.
    NotEqual(Value),
    /// A number or time value within the bounds.
    Range {
        low: std::ops::Bound<Ordered>,
        high: std::ops::Bound<Ordered>,
    },
    Exists,
}

/// A value a condition compares with.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Number(f64),
    Bool(bool),
    /// An RFC 3339 time, nanoseconds since the epoch.
    Time(i128),
}

/// A value with an order: what range conditions compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ordered {
    Number(f64),
    /// Nanoseconds since the epoch.
    Time(i128),
}

impl Filter {
    /// Whether the filter tests nothing.
    pub fn is_empty(&self) -> bool {
        self.any_of.is_empty() && self.topics.is_empty()
    }

    /// Checks the request's `filter` (named `field` in errors): every group holds 1 or more
    /// conditions, at most [`MAX_GROUPS`] groups and [`MAX_CONDITIONS`] conditions, each with a
    /// key of 1 to [`MAX_KEY_BYTES`] bytes, a known operator and a value of a type it compares.
    pub fn parse(field: &str, filter: Option<MemoryFilter>) -> Result<Self, InvalidArgument> {
        let Some(filter) = filter else {
            return Ok(Self::default());
        };
        if filter.any_of.len() > MAX_GROUPS {
            return Err(InvalidArgument::new(
                format!("{field}.any_of"),
                format!("must hold at most {MAX_GROUPS} groups"),
            ));
        }
        let total: usize = filter.any_of.iter().map(|g| g.all_of.len()).sum();
        if total > MAX_CONDITIONS {
            return Err(InvalidArgument::new(
                format!("{field}.any_of"),
                format!("must hold at most {MAX_CONDITIONS} conditions in all, not {total}"),
            ));
        }
        let mut any_of = Vec::with_capacity(filter.any_of.len());
        for (g, group) in filter.any_of.into_iter().enumerate() {
            let at = format!("{field}.any_of[{g}].all_of");
            if group.all_of.is_empty() {
                return Err(InvalidArgument::new(at, "must hold at least one condition"));
            }
            let conditions = group
                .all_of
                .into_iter()
                .enumerate()
                .map(|(c, condition)| Condition::parse(&format!("{at}[{c}]"), condition))
                .collect::<Result<_, _>>()?;
            any_of.push(conditions);
        }
        if filter.topics.len() > MAX_TOPICS {
            return Err(InvalidArgument::new(
                format!("{field}.topics"),
                format!("must name at most {MAX_TOPICS} topics"),
            ));
        }
        for (i, topic) in filter.topics.iter().enumerate() {
            if topic.is_empty() {
                return Err(InvalidArgument::new(
                    format!("{field}.topics[{i}]"),
                    "must not be empty",
                ));
            }
        }
        Ok(Self {
            any_of,
            topics: filter.topics,
        })
    }

    /// Whether an entry with this `custom_metadata` text passes. Metadata that is not a JSON
    /// object has no keys.
    pub fn admits(&self, custom_metadata: &str) -> bool {
        if self.is_empty() {
            return true;
        }
        let metadata = metadata_object(custom_metadata);
        let metadata = metadata.as_ref();
        let get = |key: &str| metadata.and_then(|m| m.get(key));
        let topic = self.topics.is_empty()
            || matches!(get(TOPIC_KEY), Some(Json::String(t)) if self.topics.contains(t));
        topic
            && (self.any_of.is_empty()
                || self
                    .any_of
                    .iter()
                    .any(|group| group.iter().all(|c| c.test.holds(get(&c.key)))))
    }
}

/// The JSON object of a metadata text, if it is one.
pub fn metadata_object(custom_metadata: &str) -> Option<Map<String, Json>> {
    if custom_metadata.is_empty() {
        return None;
    }
    match serde_json::from_str(custom_metadata) {
        Ok(Json::Object(map)) => Some(map),
        _ => None,
    }
}

/// The time a JSON string holds, as nanoseconds since the epoch, if it is an RFC 3339 time in
/// UTC (`2026-05-01T12:00:00Z`, with or without fractions of a second).
pub fn time_of(text: &str) -> Option<i128> {
    let at = humantime::parse_rfc3339(text).ok()?;
    Some(match at.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    })
}

impl Condition {
    fn parse(
        at: &str,
        condition: adk_proto::memory::v1::MetadataCondition,
    ) -> Result<Self, InvalidArgument> {
        use metadata_condition::Value as V;
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let key = condition.key;
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(InvalidArgument::new(
                format!("{at}.key"),
                format!("must have 1 to {MAX_KEY_BYTES} bytes"),
            ));
        }
        let operator = MetadataOperator::try_from(condition.operator).map_err(|_| {
            InvalidArgument::new(
                format!("{at}.operator"),
                format!("unknown operator {}", condition.operator),
            )
        })?;
        let value = match condition.value {
            None => None,
            Some(V::StringValue(s)) => Some(Value::String(s)),
            Some(V::NumberValue(n)) if !n.is_finite() => {
                return Err(InvalidArgument::new(
                    format!("{at}.number_value"),
                    "must be a finite number",
                ))
            }
            Some(V::NumberValue(n)) => Some(Value::Number(n)),
            Some(V::BoolValue(b)) => Some(Value::Bool(b)),
            Some(V::TimeValue(t)) => {
                timestamp(&format!("{at}.time_value"), Some(&t))?;
                Some(Value::Time(
                    i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos),
                ))
            }
        };
        let test = match (operator, value) {
            (MetadataOperator::Unspecified, _) => {
                return Err(InvalidArgument::new(
                    format!("{at}.operator"),
                    "is required",
                ))
            }
            (MetadataOperator::Exists, None) => Test::Exists,
            (MetadataOperator::Exists, Some(_)) => {
                return Err(InvalidArgument::new(
                    format!("{at}.value"),
                    "must be absent for METADATA_OPERATOR_EXISTS",
                ))
            }
            (_, None) => {
                return Err(InvalidArgument::new(
                    format!("{at}.value"),
                    format!("is required for {}", operator.as_str_name()),
                ))
            }
            (MetadataOperator::Equal, Some(v)) => Test::Equal(v),
            (MetadataOperator::NotEqual, Some(v)) => Test::NotEqual(v),
            (op, Some(v)) => {
                let bound = match v {
                    Value::Number(n) => Ordered::Number(n),
                    Value::Time(t) => Ordered::Time(t),
                    Value::String(_) | Value::Bool(_) => {
                        return Err(InvalidArgument::new(
                            format!("{at}.value"),
                            format!(
                                "{} compares numbers and times: give a number_value or a \
                                 time_value",
                                op.as_str_name()
                            ),
                        ))
                    }
                };
                let (low, high) = match op {
                    MetadataOperator::Less => (Unbounded, Excluded(bound)),
                    MetadataOperator::LessOrEqual => (Unbounded, Included(bound)),
                    MetadataOperator::Greater => (Excluded(bound), Unbounded),
                    _ => (Included(bound), Unbounded),
                };
                Test::Range { low, high }
            }
        };
        Ok(Self { key, test })
    }
}

impl Test {
    /// Whether a key's value (`None`: absent) passes.
    pub fn holds(&self, value: Option<&Json>) -> bool {
        match self {
            Test::Exists => value.is_some(),
            Test::Equal(v) => value.is_some_and(|j| v.equals(j)),
            Test::NotEqual(v) => !value.is_some_and(|j| v.equals(j)),
            Test::Range { low, high } => value.is_some_and(|j| {
                let Some(bound) = low_or_high(low, high) else {
                    return false;
                };
                let Some(value) = bound.same_type(j) else {
                    return false;
                };
                let above = match low {
                    std::ops::Bound::Included(b) => value.cmp_to(b) != Some(Ordering::Less),
                    std::ops::Bound::Excluded(b) => value.cmp_to(b) == Some(Ordering::Greater),
                    std::ops::Bound::Unbounded => true,
                };
                let below = match high {
                    std::ops::Bound::Included(b) => value.cmp_to(b) != Some(Ordering::Greater),
                    std::ops::Bound::Excluded(b) => value.cmp_to(b) == Some(Ordering::Less),
                    std::ops::Bound::Unbounded => true,
                };
                above && below
            }),
        }
    }
}

/// One of a range's bounds (they have one type).
fn low_or_high<'a>(
    low: &'a std::ops::Bound<Ordered>,
    high: &'a std::ops::Bound<Ordered>,
) -> Option<&'a Ordered> {
    match (low, high) {
        (std::ops::Bound::Included(b) | std::ops::Bound::Excluded(b), _)
        | (_, std::ops::Bound::Included(b) | std::ops::Bound::Excluded(b)) => Some(b),
        _ => None,
    }
}

impl Value {
    /// Whether a JSON value equals this one: a string, a number, a boolean of the same value,
    /// or for a time, a string holding the same instant.
    fn equals(&self, json: &Json) -> bool {
        match (self, json) {
            (Value::String(s), Json::String(j)) => s == j,
            (Value::Number(n), Json::Number(j)) => j.as_f64() == Some(*n),
            (Value::Bool(b), Json::Bool(j)) => b == j,
            (Value::Time(t), Json::String(j)) => time_of(j) == Some(*t),
            _ => false,
        }
    }
}

impl Ordered {
    /// A JSON value as a value of this one's type, if it is one.
    fn same_type(&self, json: &Json) -> Option<Ordered> {
        match (self, json) {
            (Ordered::Number(_), Json::Number(n)) => n.as_f64().map(Ordered::Number),
            (Ordered::Time(_), Json::String(s)) => time_of(s).map(Ordered::Time),
            _ => None,
        }
    }

    fn cmp_to(&self, other: &Ordered) -> Option<Ordering> {
        match (self, other) {
            (Ordered::Number(a), Ordered::Number(b)) => a.partial_cmp(b),
            (Ordered::Time(a), Ordered::Time(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use adk_proto::memory::v1::{MetadataCondition, MetadataConditions};
    use metadata_condition::Value as V;

    use super::*;

    fn condition(key: &str, operator: MetadataOperator, value: Option<V>) -> MetadataCondition {
        MetadataCondition {
            key: key.into(),
            operator: operator as i32,
            value,
        }
    }

    fn filter(groups: Vec<Vec<MetadataCondition>>) -> Result<Filter, InvalidArgument> {
        Filter::parse(
            "filter",
            Some(MemoryFilter {
                any_of: groups
                    .into_iter()
                    .map(|all_of| MetadataConditions { all_of })
                    .collect(),
                topics: vec![],
            }),
        )
    }

    fn field(e: InvalidArgument) -> String {
        e.to_string()
    }

    #[test]
    fn bad_filters_name_their_field() {
        use MetadataOperator as Op;
        let ok = condition("a", Op::Exists, None);
        let cases = [
            (
                vec![vec![ok.clone()], vec![condition("", Op::Exists, None)]],
                "filter.any_of[1].all_of[0].key",
            ),
            (vec![vec![ok.clone()], vec![]], "filter.any_of[1].all_of"),
            (
                vec![vec![condition(
                    "a",
                    Op::Less,
                    Some(V::StringValue("x".into())),
                )]],
                "filter.any_of[0].all_of[0].value",
            ),
            (
                vec![vec![MetadataCondition {
                    operator: 99,
                    ..ok.clone()
                }]],
                "filter.any_of[0].all_of[0].operator",
            ),
            (
                vec![vec![condition("a", Op::Equal, None)]],
                "filter.any_of[0].all_of[0].value",
            ),
            (
                vec![vec![condition(&"k".repeat(257), Op::Exists, None)]],
                "filter.any_of[0].all_of[0].key",
            ),
            (vec![vec![ok.clone(); 51]], "filter.any_of"),
        ];
        for (groups, expected) in cases {
            let e = filter(groups).expect_err(expected);
            assert!(field(e).starts_with(expected), "{expected}");
        }
    }

    #[test]
    fn conditions_compare_by_type() {
        use MetadataOperator as Op;
        let meta = r#"{"n": 5, "s": "x", "b": true, "t": "2026-05-01T12:00:00Z", "topic": "pets"}"#;
        let holds = |c: MetadataCondition| filter(vec![vec![c]]).unwrap().admits(meta);
        assert!(holds(condition("n", Op::Equal, Some(V::NumberValue(5.0)))));
        assert!(holds(condition("n", Op::Less, Some(V::NumberValue(6.0)))));
        assert!(!holds(condition("n", Op::Less, Some(V::NumberValue(5.0)))));
        assert!(holds(condition(
            "n",
            Op::LessOrEqual,
            Some(V::NumberValue(5.0))
        )));
        assert!(holds(condition(
            "n",
            Op::GreaterOrEqual,
            Some(V::NumberValue(5.0))
        )));
        assert!(!holds(condition(
            "s",
            Op::Greater,
            Some(V::NumberValue(0.0))
        )));
        assert!(holds(condition(
            "s",
            Op::Equal,
            Some(V::StringValue("x".into()))
        )));
        assert!(!holds(condition(
            "n",
            Op::Equal,
            Some(V::StringValue("5".into()))
        )));
        assert!(holds(condition("b", Op::Equal, Some(V::BoolValue(true)))));
        assert!(holds(condition(
            "s",
            Op::NotEqual,
            Some(V::StringValue("y".into()))
        )));
        assert!(holds(condition(
            "gone",
            Op::NotEqual,
            Some(V::StringValue("y".into()))
        )));
        assert!(holds(condition(
            "gone",
            Op::NotEqual,
            Some(V::StringValue("y".into()))
        )));
        assert!(holds(condition("b", Op::Exists, None)));
        assert!(!holds(condition("gone", Op::Exists, None)));
        let t = |seconds| Some(V::TimeValue(prost_types::Timestamp { seconds, nanos: 0 }));
        // 2026-05-01T12:00:00Z
        assert!(holds(condition("t", Op::Equal, t(1_777_636_800))));
        assert!(holds(condition("t", Op::Greater, t(1_777_636_799))));
        assert!(!holds(condition("t", Op::Greater, t(1_777_636_800))));
        let topics = Filter {
            topics: vec!["pets".into()],
            ..Filter::default()
        };
        assert!(topics.admits(meta));
        assert!(!topics.admits("{}"));
        assert!(!topics.admits("not json"));
    }
}
