//! Request validation: any bytes that decode as an Event go through the checks without
//! panicking, and an event they accept has JSON-object text in its JSON fields.
#![no_main]

use adk_proto::session::v1::Event;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|bytes: &[u8]| {
    let Ok(event) = Event::decode(bytes) else {
        return;
    };
    if session_svc::event::check(&event).is_ok() {
        for text in [&event.custom_metadata, &event.usage_metadata, &event.extra] {
            if !text.is_empty() {
                let value: serde_json::Value = serde_json::from_str(text).expect("checked JSON");
                assert!(value.is_object());
            }
        }
    }
});
