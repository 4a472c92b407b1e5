//! The tokenizer: any text tokenizes without panicking, and every term a query made of that
//! same text looks up is among the text's own index terms (so a text always finds itself).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_svc::text::{query_terms, terms};

fuzz_target!(|text: &str| {
    let indexed = terms(text);
    for term in query_terms(text) {
        assert!(indexed.contains(&term), "{term:?} of {text:?}");
    }
});
