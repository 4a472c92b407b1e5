//! Text analysis: any text is analysed without panicking, in every configuration, and every
//! term a query made of that same text looks up is among the text's own index terms (so a text
//! always finds itself: the query is analysed in the language the text was indexed in, and
//! only drops words).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_svc::analysis::{Analyzer, Language};

fuzz_target!(|text: &str| {
    for analyzer in [
        Analyzer::default(),
        Analyzer::new(None),
        Analyzer::new(Some(Language::German)),
        Analyzer::fixed(Some(Language::Russian)),
    ] {
        let mut indexed = Vec::new();
        analyzer.terms(text, analyzer.language_of(text), |t| indexed.push(t));
        for term in analyzer.query_terms(text, None) {
            assert!(indexed.contains(&term), "{term:?} of {text:?}");
        }
    }
});
