//! Knowing when a watch is live. Partial events reach only the watchers that are past their
//! replay, and nothing a client sees says when that is, except a partial event arriving.

use std::time::Duration;

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, watch_session_response::Change, Event,
    WatchSessionResponse,
};
use tonic::{transport::Channel, Streaming};

use crate::{append_request, text_event};

/// The text of the partial events [`until_live`] publishes.
pub const PROBE: &str = "probe: is this watch live?";

/// Whether `event` is one of [`until_live`]'s probes.
pub fn is_probe(event: &Event) -> bool {
    event.partial == Some(true) && event.content == text_event("agent", PROBE).content
}

/// Publishes partial probe events on session `(app, user, id)` until `watch`, which asked for
/// partial events and has no stored event to replay, relays one: from then on the watcher hears
/// every fragment published. A probe published while an earlier one was on its way may still
/// follow ([`is_probe`] tells them).
pub async fn until_live(
    client: &SessionServiceClient<Channel>,
    (app, user, id): (&str, &str, &str),
    watch: &mut Streaming<WatchSessionResponse>,
) {
    let mut probe = text_event("agent", PROBE);
    probe.partial = Some(true);
    for _ in 0..200 {
        client
            .clone()
            .append_event(append_request(app, user, id, probe.clone()))
            .await
            .expect("a partial event is accepted");
        // Cancelling `message` loses nothing: the stream keeps what it has read.
        if let Ok(next) = tokio::time::timeout(Duration::from_millis(50), watch.message()).await {
            match next
                .expect("the watch is ok")
                .expect("the watch is open")
                .change
            {
                Some(Change::Event(e)) if is_probe(&e) => return,
                other => panic!("expected a probe, the watch relayed {other:?}"),
            }
        }
    }
    panic!("the watch relayed no partial event in 200 tries");
}
