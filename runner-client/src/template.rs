//! Instruction templating from session state, as ADK's `inject_session_state`:
//!
//! - `{key}` is replaced by the state value (a string as is, anything else as JSON text, null as
//!   nothing); a key that is not in the state is an error.
//! - `{key?}` is optional: a missing key becomes the empty string.
//! - Keys may carry a scope prefix (`{app:theme}`, `{user:name}`, `{temp:draft}`).
//! - Braces around anything that is not a state name (`{"json": 1}`, `{a.b}`, `{}`) are left as
//!   written, so instructions can show JSON or code.
//! - Runs of braces count as one placeholder: `{{name}}` is replaced like `{name}` (ADK matches
//!   `{+[^{}]*}+`).

use serde_json::{Map, Value};

use crate::error::{Result, RunnerError};

/// Renders `template` with values from `state`.
pub fn render(template: &str, state: &Map<String, Value>) -> Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let candidate = &rest[start..];
        match placeholder_len(candidate) {
            Some(len) => {
                out.push_str(&substitute(&candidate[..len], state)?);
                rest = &candidate[len..];
            }
            None => {
                out.push('{');
                rest = &candidate[1..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The length of the `{+[^{}]*}+` match at the start of `s` (which starts with `{`), if any.
fn placeholder_len(s: &str) -> Option<usize> {
    let opening = s.len() - s.trim_start_matches('{').len();
    let body = s[opening..].find(['{', '}'])? + opening;
    if !s[body..].starts_with('}') {
        // Another `{` before any `}`: the match, if any, starts at that later brace.
        return None;
    }
    let closing = s[body..].len() - s[body..].trim_start_matches('}').len();
    Some(body + closing)
}

/// The replacement for one matched placeholder (braces included).
fn substitute(placeholder: &str, state: &Map<String, Value>) -> Result<String> {
    let inner = placeholder.trim_matches(['{', '}']).trim();
    let (key, optional) = match inner.strip_suffix('?') {
        Some(key) => (key, true),
        None => (inner, false),
    };
    if !is_state_name(key) {
        return Ok(placeholder.to_owned());
    }
    match state.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) => Ok(String::new()),
        Some(other) => Ok(other.to_string()),
        None if optional => Ok(String::new()),
        None => Err(RunnerError::MissingStateKey(key.to_owned())),
    }
}

/// An identifier, optionally behind one scope prefix (ADK's `_is_valid_state_name`).
fn is_state_name(key: &str) -> bool {
    match key.split_once(':') {
        None => is_identifier(key),
        Some((scope, name)) => matches!(scope, "app" | "user" | "temp") && is_identifier(name),
    }
}

/// Python's `str.isidentifier`, closely enough: a letter or `_`, then letters, digits or `_`.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => unreachable!("tests pass objects"),
        }
    }

    #[test]
    fn keys_are_replaced_by_their_values() {
        let s = state(json!({
            "name": "Alice", "count": 3, "nested": {"a": [1, 2]}, "flag": true,
            "app:theme": "dark", "user:lang": "fr", "temp:draft": "d1", "nothing": null
        }));
        let out = render(
            "Hi {name}: {count} {nested} {flag} {app:theme} {user:lang} {temp:draft} [{nothing}]",
            &s,
        )
        .unwrap();
        assert_eq!(out, r#"Hi Alice: 3 {"a":[1,2]} true dark fr d1 []"#);
    }

    #[test]
    fn a_missing_key_is_an_error_unless_optional() {
        let s = state(json!({"name": "Alice"}));
        let err = render("Hello {missing}", &s).unwrap_err();
        assert!(matches!(&err, RunnerError::MissingStateKey(k) if k == "missing"));
        assert_eq!(err.to_string(), "Context variable not found: `missing`.");
        assert!(matches!(
            render("{user:missing}", &s),
            Err(RunnerError::MissingStateKey(k)) if k == "user:missing"
        ));
        assert_eq!(render("a{missing?}b {name?}", &s).unwrap(), "ab Alice");
        assert_eq!(render("{ name }", &s).unwrap(), "Alice");
    }

    #[test]
    fn braces_that_are_not_state_names_stay_as_written() {
        let s = state(json!({"x": 1}));
        for text in [
            r#"reply as {"answer": "..."}"#,
            "{}",
            "{a.b}",
            "{other:key}",
            "{1abc}",
            "{two words}",
            "{artifact.file}",
            "unbalanced { brace",
            "closing } only",
        ] {
            assert_eq!(render(text, &s).unwrap(), text);
        }
    }

    #[test]
    fn runs_of_braces_count_as_one_placeholder() {
        let s = state(json!({"x": "v"}));
        assert_eq!(render("{{x}}", &s).unwrap(), "v");
        assert_eq!(render("{{{x}", &s).unwrap(), "v");
        assert_eq!(render("{ {x}", &s).unwrap(), "{ v");
        assert_eq!(render("{x}{x?}", &s).unwrap(), "vv");
        assert_eq!(render("été {x} ünï", &s).unwrap(), "été v ünï");
    }
}
