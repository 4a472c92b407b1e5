//! State scopes (ADK rules S0.1-S0.5): splitting a delta by key prefix, and merging the three
//! stored scopes back into the view a client sees.
//!
//! Values are JSON text kept byte-for-byte; only top-level keys are looked at.
//!
//! A key an event removes (`removed_state_keys`, ADK Java's `State.REMOVED`) travels to the
//! stores as an entry whose value is [`REMOVED`]: stores write it like any value (on PostgreSQL
//! the shared scopes keep versions, so a removal must be a version too), and the merged views
//! ([`merge`], [`object`]) never show it. JSON text is never empty, so no value is mistaken
//! for a removal.

use adk_common::validate::{json_object, InvalidArgument, JsonObject};

pub const APP_PREFIX: &str = "app:";
pub const USER_PREFIX: &str = "user:";
pub const TEMP_PREFIX: &str = "temp:";

/// The longest state key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// One stored key and its JSON value text.
pub type Entry = (String, String);

/// The value of an entry whose key was removed (see the module docs).
pub const REMOVED: &str = "";

/// A state delta split by scope, with prefixes removed and `temp:` keys dropped (S0.2).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ScopedDelta {
    pub app: Vec<Entry>,
    pub user: Vec<Entry>,
    pub session: Vec<Entry>,
}

impl ScopedDelta {
    pub fn is_empty(&self) -> bool {
        self.app.is_empty() && self.user.is_empty() && self.session.is_empty()
    }
}

/// A parsed state or state delta object, with the keys an event removes.
#[derive(Debug)]
pub struct Delta {
    object: JsonObject,
    has_temp: bool,
    removed: Vec<String>,
}

impl Delta {
    /// Parses and checks a JSON-object field: keys must be non-empty, at most
    /// [`MAX_KEY_BYTES`], and a scope prefix must be followed by a name.
    pub fn parse(field: &str, text: &str) -> Result<Self, InvalidArgument> {
        let object = json_object(field, text)?;
        let mut has_temp = false;
        for key in object.keys() {
            check_key(field, key)?;
            has_temp |= key.starts_with(TEMP_PREFIX);
        }
        Ok(Self {
            object,
            has_temp,
            removed: Vec::new(),
        })
    }

    /// Adds the keys an event removes, checked as [`Delta::parse`] checks keys; a key the
    /// delta also sets is refused, since the event would say two things of it. `temp:` keys
    /// are never stored, so removing one does nothing.
    pub fn remove(&mut self, field: &str, keys: &[String]) -> Result<(), InvalidArgument> {
        for key in keys {
            check_key(field, key)?;
            if self.object.contains_key(key) {
                return Err(InvalidArgument::new(
                    field,
                    format!("key {key:?} is also set by the state delta"),
                ));
            }
        }
        self.removed = keys
            .iter()
            .filter(|k| !k.starts_with(TEMP_PREFIX))
            .cloned()
            .collect();
        Ok(())
    }

    /// The removed keys an event keeps when stored: all but `temp:` ones (S6.2).
    pub fn removed_keys(&self) -> &[String] {
        &self.removed
    }

    /// The delta as JSON text without its `temp:` keys (S6.2), or `None` when it has none and
    /// the original text can be kept untouched.
    pub fn trimmed_text(&self) -> Option<String> {
        if !self.has_temp {
            return None;
        }
        let kept = self
            .object
            .iter()
            .filter(|(k, _)| !k.starts_with(TEMP_PREFIX));
        Some(write_object(kept.map(|(k, v)| ("", k.as_str(), v.get()))))
    }

    /// Splits the delta by scope (S0.2); removed keys become [`REMOVED`] entries.
    pub fn split(self) -> ScopedDelta {
        let mut out = ScopedDelta::default();
        let values = self
            .object
            .into_iter()
            .map(|(key, value)| (key, String::from(Box::<str>::from(value))));
        let removals = self
            .removed
            .into_iter()
            .map(|key| (key, REMOVED.to_owned()));
        for (key, value) in values.chain(removals) {
            if let Some(name) = key.strip_prefix(APP_PREFIX) {
                out.app.push((name.to_owned(), value));
            } else if let Some(name) = key.strip_prefix(USER_PREFIX) {
                out.user.push((name.to_owned(), value));
            } else if !key.starts_with(TEMP_PREFIX) {
                out.session.push((key, value));
            }
        }
        out
    }
}

/// Checks one key of `field`: non-empty, at most [`MAX_KEY_BYTES`], a scope prefix followed
/// by a name.
fn check_key(field: &str, key: &str) -> Result<(), InvalidArgument> {
    if key.len() > MAX_KEY_BYTES {
        return Err(InvalidArgument::new(
            field,
            format!("key is {} bytes; the limit is {MAX_KEY_BYTES}", key.len()),
        ));
    }
    let name = [APP_PREFIX, USER_PREFIX, TEMP_PREFIX]
        .iter()
        .find_map(|p| key.strip_prefix(p))
        .unwrap_or(key);
    if name.is_empty() {
        return Err(InvalidArgument::new(
            field,
            format!("key {key:?} names no state key"),
        ));
    }
    Ok(())
}

/// The merged view of S0.4: session keys, then `app:` keys, then `user:` keys. The session's
/// own keys come as pairs (see [`pairs`]), as a store may hold them otherwise than as entries.
pub fn merge<'a>(
    session: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    app: &'a [Entry],
    user: &'a [Entry],
) -> String {
    write_object(
        prefixed("", session)
            .chain(prefixed(APP_PREFIX, pairs(app)))
            .chain(prefixed(USER_PREFIX, pairs(user))),
    )
}

/// A JSON object from one scope's entries, keys without prefix (S7).
pub fn object(entries: &[Entry]) -> String {
    write_object(prefixed("", pairs(entries)))
}

/// Entries as the key and value pairs [`merge`] reads.
pub fn pairs(entries: &[Entry]) -> impl Iterator<Item = (&str, &str)> + Clone {
    entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

fn prefixed<'a>(
    prefix: &'a str,
    entries: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> + Clone {
    entries.map(move |(k, v)| (prefix, k, v))
}

/// Writes `{"<prefix><key>": <value>, ...}` with each value's text untouched, leaving out
/// removed keys.
fn write_object<'a>(entries: impl Iterator<Item = (&'a str, &'a str, &'a str)> + Clone) -> String {
    let entries = entries.filter(|(_, _, value)| *value != REMOVED);
    let size: usize = entries
        .clone()
        .map(|(prefix, key, value)| prefix.len() + key.len() + value.len() + 4)
        .sum();
    let mut out = String::with_capacity(size + 2);
    out.push('{');
    for (i, (prefix, key, value)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, prefix, key);
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// Appends `prefix` and `key` as one JSON string. Listings write every session's state, so the
/// usual key, which JSON writes as it is, is copied without an allocation of its own.
fn push_json_string(out: &mut String, prefix: &str, key: &str) {
    // JSON escapes exactly these: quotation mark, reverse solidus, control characters.
    let plain = |s: &str| !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
    if plain(prefix) && plain(key) {
        out.push('"');
        out.push_str(prefix);
        out.push_str(key);
        out.push('"');
    } else {
        // A String always serializes as a JSON string; there is no failure to handle.
        out.push_str(&serde_json::Value::String(format!("{prefix}{key}")).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_by_prefix_s0_2() {
        let delta = Delta::parse(
            "state",
            r#"{"app:k":1,"user:k":2,"temp:k":3,"k":4,"session:c":5}"#,
        )
        .unwrap();
        let split = delta.split();
        assert_eq!(split.app, vec![("k".into(), "1".into())]);
        assert_eq!(split.user, vec![("k".into(), "2".into())]);
        assert_eq!(
            split.session,
            vec![("k".into(), "4".into()), ("session:c".into(), "5".into())]
        );
    }

    #[test]
    fn temp_keys_are_trimmed_and_other_text_kept() {
        let kept = Delta::parse("state_delta", r#"{"a": 1.0}"#).unwrap();
        assert_eq!(kept.trimmed_text(), None);
        let trimmed = Delta::parse("state_delta", r#"{"temp:x": 1, "a": 1.0}"#).unwrap();
        assert_eq!(trimmed.trimmed_text().as_deref(), Some(r#"{"a":1.0}"#));
    }

    /// Found by fuzzing: JSON numbers no f64 holds are valid JSON and are kept as sent.
    #[test]
    fn out_of_range_numbers_are_kept_verbatim() {
        let delta = Delta::parse("state", r#"{"big": 555e404, "tiny": 1e-400, "temp:t": 1}"#);
        let delta = delta.unwrap();
        assert_eq!(
            delta.trimmed_text().as_deref(),
            Some(r#"{"big":555e404,"tiny":1e-400}"#)
        );
        let split = delta.split();
        assert_eq!(
            merge(pairs(&split.session), &[], &[]),
            r#"{"big":555e404,"tiny":1e-400}"#
        );
    }

    #[test]
    fn bad_keys_are_named() {
        for text in [r#"{"": 1}"#, r#"{"app:": 1}"#, r#"{"temp:": 1}"#] {
            assert_eq!(Delta::parse("state", text).unwrap_err().field, "state");
        }
    }

    #[test]
    fn merge_s0_4() {
        let s = vec![("k".to_owned(), "4".to_owned())];
        let a = vec![("k".to_owned(), "1".to_owned())];
        let u = vec![("k\"q".to_owned(), "null".to_owned())];
        assert_eq!(
            merge(pairs(&s), &a, &u),
            r#"{"k":4,"app:k":1,"user:k\"q":null}"#
        );
        let c = vec![("tab\there\\".to_owned(), "[]".to_owned())];
        assert_eq!(merge(pairs(&c), &[], &[]), r#"{"tab\there\\":[]}"#);
        assert_eq!(object(&[]), "{}");
    }
}
