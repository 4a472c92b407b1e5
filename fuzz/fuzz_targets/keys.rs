//! Key encoding: any components encode to a key that decodes back to them, and a key built from
//! a prefix of the components is a byte prefix of the key (so prefix scans are exact).
#![no_main]

use adk_common::keys::{Key, KeyReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (Vec<String>, u64)| {
    let (parts, n) = input;
    let mut key = Key::new();
    for p in &parts {
        key = key.str(p);
    }
    let key = key.u64(n);
    let mut reader = KeyReader::new(key.as_bytes());
    for p in &parts {
        assert_eq!(reader.str().as_deref(), Some(p.as_str()));
    }
    assert_eq!(reader.u64(), Some(n));
    assert!(reader.is_empty());
    if let Some(first) = parts.first() {
        assert!(key.as_bytes().starts_with(Key::new().str(first).as_bytes()));
    }
    // Reading arbitrary bytes as a key never panics.
    let mut any = KeyReader::new(key.as_bytes().get(1..).unwrap_or_default());
    while any.str().is_some() {}
});
