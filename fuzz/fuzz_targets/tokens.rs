//! Page tokens and cursors: decoding any string against any scope never panics, and what it
//! accepts lies inside that scope.
#![no_main]

use adk_common::page;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &[u8])| {
    let (token, scope) = input;
    if let Ok(Some(key)) = page::decode(token, scope) {
        assert!(key.starts_with(scope) && key.len() > scope.len());
        assert_eq!(page::decode(&page::encode(&key), scope), Ok(Some(key)));
    }
});
