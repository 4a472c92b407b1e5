//! The metadata index both stores keep, so that a selective [`Filter`] reads only the entries
//! it may admit: one index key per top-level `custom_metadata` key of an entry, holding the
//! key's value in an order-preserving encoding (so that a number or time range is one range of
//! keys), pointing at the entry's seq.
//!
//! [`values`] is what an entry is indexed under; [`Plan`] turns a filter into index ranges and
//! combines what they find. The stores only store the values and read the ranges, so both find
//! the same candidates. Candidates are a superset of what the filter admits (a long string is
//! indexed by its first bytes, ranges include their ends): each is still tested by
//! [`Filter::admits`].

use std::{collections::BTreeSet, ops::Bound};

use adk_common::keys::{prefix_end, Key};
use serde_json::Value as Json;

use crate::filter::{metadata_object, time_of, Filter, Ordered, Test, Value, TOPIC_KEY};

/// Type tags, the first component of an encoded value.
const STRING: u64 = 1;
const NUMBER: u64 = 2;
const BOOL: u64 = 3;
const TIME: u64 = 4;
/// null, arrays and objects: found by `exists` only.
const OTHER: u64 = 5;

/// The longest string prefix indexed, in bytes; longer values are indexed by it.
const STRING_PREFIX: usize = 256;

/// The index values of an entry's metadata: (key, encoded value) pairs, a string holding an
/// RFC 3339 time indexed as both.
pub fn values(custom_metadata: &str) -> Vec<(String, Vec<u8>)> {
    let Some(metadata) = metadata_object(custom_metadata) else {
        return Vec::new();
    };
    let mut values = Vec::with_capacity(metadata.len());
    for (key, value) in metadata {
        match &value {
            Json::String(s) => {
                if let Some(t) = time_of(s) {
                    values.push((key.clone(), time(t)));
                }
                values.push((key, string(s)));
            }
            Json::Number(n) => match n.as_f64() {
                Some(n) => values.push((key, number(n))),
                None => values.push((key, tag(OTHER).into_vec())),
            },
            Json::Bool(b) => values.push((key, tag(BOOL).u64(u64::from(*b)).into_vec())),
            _ => values.push((key, tag(OTHER).into_vec())),
        }
    }
    values
}

fn tag(t: u64) -> Key {
    Key::new().u64(t)
}

fn string(s: &str) -> Vec<u8> {
    let mut end = s.len().min(STRING_PREFIX);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    tag(STRING).str(&s[..end]).into_vec()
}

/// A float as a u64 with the same order (negative numbers' bits inverted, positive ones' sign
/// bit set); -0 and 0 encode alike.
fn number(n: f64) -> Vec<u8> {
    let n = if n == 0.0 { 0.0 } else { n };
    let bits = n.to_bits();
    let ordered = if n.is_sign_negative() {
        !bits
    } else {
        bits | (1 << 63)
    };
    tag(NUMBER).u64(ordered).into_vec()
}

fn time(nanos: i128) -> Vec<u8> {
    let seconds = nanos.div_euclid(1_000_000_000) as i64;
    let rest = nanos.rem_euclid(1_000_000_000) as u64;
    tag(TIME)
        .u64((seconds as u64) ^ (1 << 63))
        .u64(rest)
        .into_vec()
}

fn ordered(o: &Ordered) -> Vec<u8> {
    match o {
        Ordered::Number(n) => number(*n),
        Ordered::Time(t) => time(*t),
    }
}

/// One range of a key's index values: `low <= value < high`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    pub key: String,
    pub low: Vec<u8>,
    pub high: Vec<u8>,
}

impl Scan {
    /// The values equal to `encoded` (for a string: those that share its indexed prefix).
    fn equal(key: &str, encoded: Vec<u8>) -> Self {
        let high = prefix_end(&encoded);
        Self {
            key: key.to_owned(),
            low: encoded,
            high,
        }
    }

    /// Every value of the key.
    fn any(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            low: Vec::new(),
            high: vec![0xFF; 9],
        }
    }

    /// What a condition's test reads, if the index can narrow it (`not equal` cannot).
    fn of(key: &str, test: &Test) -> Option<Self> {
        match test {
            Test::Exists => Some(Self::any(key)),
            Test::NotEqual(_) => None,
            Test::Equal(value) => Some(Self::equal(
                key,
                match value {
                    Value::String(s) => string(s),
                    Value::Number(n) => number(*n),
                    Value::Bool(b) => tag(BOOL).u64(u64::from(*b)).into_vec(),
                    Value::Time(t) => time(*t),
                },
            )),
            Test::Range { low, high } => {
                let kind = match (low, high) {
                    (Bound::Included(b) | Bound::Excluded(b), _)
                    | (_, Bound::Included(b) | Bound::Excluded(b)) => *b,
                    _ => return None,
                };
                let t = match kind {
                    Ordered::Number(_) => NUMBER,
                    Ordered::Time(_) => TIME,
                };
                // Both ends included: the filter tests the bounds' exact meaning.
                let low = match low {
                    Bound::Included(b) | Bound::Excluded(b) => ordered(b),
                    Bound::Unbounded => tag(t).into_vec(),
                };
                let high = match high {
                    Bound::Included(b) | Bound::Excluded(b) => prefix_end(&ordered(b)),
                    Bound::Unbounded => prefix_end(tag(t).as_bytes()),
                };
                Some(Self {
                    key: key.to_owned(),
                    low,
                    high,
                })
            }
        }
    }
}

/// The index ranges a filter reads, and how their seqs combine: each group's scans
/// intersected, the groups united, and that intersected with the union of the topic scans.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Indexes into `scans`, per group.
    groups: Vec<Vec<usize>>,
    topics: Vec<usize>,
    pub scans: Vec<Scan>,
}

impl Plan {
    /// The plan of `filter`, or `None` when the index cannot narrow it: it has no condition, or
    /// one of its groups holds only `not equal` conditions (and there are no topics).
    pub fn of(filter: &Filter) -> Option<Self> {
        let mut plan = Self::default();
        for topic in &filter.topics {
            plan.topics.push(plan.scans.len());
            plan.scans.push(Scan::equal(TOPIC_KEY, string(topic)));
        }
        let mut narrowed = true;
        for group in &filter.any_of {
            let mut scans = Vec::new();
            for condition in group {
                if let Some(scan) = Scan::of(&condition.key, &condition.test) {
                    scans.push(plan.scans.len());
                    plan.scans.push(scan);
                }
            }
            narrowed &= !scans.is_empty();
            plan.groups.push(scans);
        }
        if !narrowed {
            plan.groups.clear();
            if plan.topics.is_empty() {
                return None;
            }
            plan.scans.truncate(plan.topics.len());
        }
        (!plan.scans.is_empty()).then_some(plan)
    }

    /// The candidate seqs, from what each of `scans` found (in their order).
    pub fn combine(&self, found: Vec<BTreeSet<u64>>) -> BTreeSet<u64> {
        let union = |sets: &mut dyn Iterator<Item = &BTreeSet<u64>>| {
            sets.fold(BTreeSet::new(), |mut all, s| {
                all.extend(s);
                all
            })
        };
        let groups = (!self.groups.is_empty()).then(|| {
            union(
                &mut self
                    .groups
                    .iter()
                    .map(|g| intersection(g, &found))
                    .collect::<Vec<_>>()
                    .iter(),
            )
        });
        let topics =
            (!self.topics.is_empty()).then(|| union(&mut self.topics.iter().map(|&i| &found[i])));
        match (groups, topics) {
            (Some(g), Some(t)) => g.intersection(&t).copied().collect(),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => BTreeSet::new(),
        }
    }
}

fn intersection(scans: &[usize], found: &[BTreeSet<u64>]) -> BTreeSet<u64> {
    let mut sets: Vec<&BTreeSet<u64>> = scans.iter().map(|&i| &found[i]).collect();
    sets.sort_by_key(|s| s.len());
    let Some((smallest, rest)) = sets.split_first() else {
        return BTreeSet::new();
    };
    smallest
        .iter()
        .filter(|seq| rest.iter().all(|s| s.contains(seq)))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Condition;

    #[test]
    fn encodings_keep_order() {
        let ns = [-1e300, -2.5, -0.0, 0.0, 1e-9, 3.0, 1e300];
        for w in ns.windows(2) {
            assert!(number(w[0]) <= number(w[1]), "{w:?}");
        }
        let ts = [-10_000_000_001i128, -1, 0, 1, 1_000_000_000, 1_000_000_001];
        for w in ts.windows(2) {
            assert!(time(w[0]) < time(w[1]), "{w:?}");
        }
    }

    #[test]
    fn ranges_and_equality_find_their_values() {
        let v = values(r#"{"n": 5, "s": "x", "t": "2026-05-01T12:00:00Z", "o": null}"#);
        let find = |test: Test, key: &str| {
            let scan = Scan::of(key, &test).unwrap();
            v.iter()
                .any(|(k, e)| *k == scan.key && *e >= scan.low && *e < scan.high)
        };
        let n = |x| Ordered::Number(x);
        assert!(find(Test::Equal(Value::Number(5.0)), "n"));
        assert!(!find(Test::Equal(Value::Number(4.0)), "n"));
        assert!(find(
            Test::Range {
                low: Bound::Excluded(n(4.0)),
                high: Bound::Unbounded
            },
            "n"
        ));
        assert!(!find(
            Test::Range {
                low: Bound::Unbounded,
                high: Bound::Excluded(n(4.0))
            },
            "n"
        ));
        assert!(find(Test::Exists, "o"));
        assert!(find(Test::Equal(Value::String("x".into())), "s"));
        assert!(find(
            Test::Equal(Value::Time(1_777_636_800_000_000_000)),
            "t"
        ));
        let not_equal = Filter {
            any_of: vec![vec![Condition {
                key: "s".into(),
                test: Test::NotEqual(Value::String("x".into())),
            }]],
            topics: vec![],
        };
        assert_eq!(Plan::of(&not_equal), None);
    }
}
