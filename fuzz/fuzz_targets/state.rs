//! State deltas: any text either is refused or splits into scopes whose merged view is a JSON
//! object holding every non-temp key, values as sent. (Values are compared as raw text: JSON
//! allows numbers such as `1e400` that no f64 holds, and the service keeps them verbatim.)
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use session_svc::state::{merge, pairs, Delta};

fn object(text: &str) -> BTreeMap<String, &RawValue> {
    serde_json::from_str(text).expect("a JSON object")
}

fuzz_target!(|text: &str| {
    let Ok(delta) = Delta::parse("state", text) else {
        return;
    };
    if let Some(trimmed) = delta.trimmed_text() {
        assert!(object(&trimmed).keys().all(|k| !k.starts_with("temp:")));
    }
    let split = delta.split();
    let merged = merge(pairs(&split.session), &split.app, &split.user);
    let merged = object(&merged);
    assert_eq!(
        merged.len(),
        split.session.len() + split.app.len() + split.user.len()
    );
    for (key, value) in &split.session {
        assert_eq!(merged[key].get(), value);
    }
});
