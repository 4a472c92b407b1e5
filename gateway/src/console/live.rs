//! Live views over Server-Sent Events: a session as the agent writes it (`WatchSession`, with
//! partial events) and an app's activity feed (`WatchEvents`, each message carrying its cursor
//! as the SSE id, so a reconnect or a reload resumes where it stopped).
//!
//! Each view holds one gRPC stream and nothing else: messages are read from it only as fast as
//! the browser takes them, so nothing queues up in the console. When the tab closes, the HTTP
//! response is dropped and with it the gRPC stream, which cancels the call at the service.
//! Views are counted per browser and in all, and refused beyond [`MAX_PER_BROWSER`] and
//! [`MAX_TOTAL`].

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use adk_proto::session::v1::{
    watch_session_response::Change, WatchEventsRequest, WatchSessionRequest,
};
use axum::{
    extract::{Path, Query, State},
    http::HeaderMap,
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
};
use serde::Deserialize;
use serde_json::json;
use tokio_stream::{Stream, StreamExt};

use runner_client::json;

use super::{error::ConsoleError, logins::Caller, Console};

/// Live views one browser may hold open.
pub const MAX_PER_BROWSER: usize = 4;

/// Live views the console holds open in all.
pub const MAX_TOTAL: usize = 256;

/// A comment line this often keeps proxies from closing a quiet view, and lets the console
/// notice a browser that vanished without closing its connection.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Open views per browser.
#[derive(Debug, Default)]
pub struct LiveViews {
    open: Mutex<HashMap<String, usize>>,
}

impl LiveViews {
    /// How many views are open.
    pub fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum()
    }

    /// A slot for one more view of `browser`, released when dropped.
    fn take(self: &Arc<Self>, browser: &str) -> Result<Slot, ConsoleError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let total: usize = open.values().sum();
        let mine = open.entry(browser.to_owned()).or_default();
        if *mine >= MAX_PER_BROWSER || total >= MAX_TOTAL {
            return Err(ConsoleError::TooManyLiveViews {
                limit: MAX_PER_BROWSER,
                total: MAX_TOTAL,
            });
        }
        *mine += 1;
        Ok(Slot {
            views: self.clone(),
            browser: browser.to_owned(),
        })
    }
}

/// One open view; see [`LiveViews::take`].
struct Slot {
    views: Arc<LiveViews>,
    browser: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .views
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.browser) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.browser);
            }
        }
    }
}

type EventStream = std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

/// An SSE response of `events`, keeping `slot` for as long as the browser listens.
fn respond(slot: Slot, events: EventStream) -> Response {
    let events = events.map(move |e| {
        let _held = &slot;
        e
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// A view that only reports why it cannot run (one `failure` event, then the end: the page
/// shows it and does not reconnect).
fn failure(error: ConsoleError) -> Response {
    Sse::new(tokio_stream::once(Ok::<_, Infallible>(failure_event(
        error,
    ))))
    .into_response()
}

/// `failure` message: `{"error": "..."}`.
fn failure_event(error: impl std::fmt::Display) -> Event {
    Event::default()
        .event("failure")
        .data(json!({"error": error.to_string()}).to_string())
}

#[derive(Deserialize)]
pub struct SessionQuery {
    /// Stored events above this sequence come first (the page has the others).
    #[serde(default)]
    after: u64,
}

/// `GET .../sessions/{id}/live?after=N`: `event` (stored or committed), `partial` (a streamed
/// fragment, never stored) and `deleted` messages.
pub async fn session(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path((app, user, id)): Path<(String, String, String)>,
    Query(q): Query<SessionQuery>,
) -> Response {
    let slot = match console.live.take(&caller.key) {
        Ok(slot) => slot,
        Err(e) => return failure(e),
    };
    let request = WatchSessionRequest {
        app_name: app,
        user_id: user,
        session_id: id,
        after_sequence: q.after,
        include_partial: true,
    };
    let stream = match caller.calls().watch_session(request).await {
        Ok(stream) => stream,
        Err(e) => return failure(ConsoleError::Service(e)),
    };
    let events = stream.map(move |change| {
        Ok(match change {
            Ok(change) => match change.change {
                Some(Change::Event(e)) if e.partial == Some(true) => Event::default()
                    .event("partial")
                    .data(json::event(&e).to_string()),
                Some(Change::Event(e)) => Event::default()
                    .event("event")
                    .data(json::event(&e).to_string()),
                Some(Change::Deleted(_)) => Event::default().event("deleted").data("{}"),
                None => Event::default().comment("unknown change"),
            },
            Err(e) => failure_event(e),
        })
    });
    respond(slot, Box::pin(events))
}

#[derive(Deserialize)]
pub struct FeedQuery {
    #[serde(default)]
    user: String,
    /// Resume after this cursor (a reconnect's `Last-Event-ID` wins); empty: from now.
    #[serde(default)]
    cursor: String,
}

/// `GET /api/apps/{app}/feed?user=&cursor=`: `event` messages, each with its cursor as id.
pub async fn feed(
    State(console): State<Arc<Console>>,
    caller: Caller,
    headers: HeaderMap,
    Path(app): Path<String>,
    Query(q): Query<FeedQuery>,
) -> Response {
    let slot = match console.live.take(&caller.key) {
        Ok(slot) => slot,
        Err(e) => return failure(e),
    };
    let cursor = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .unwrap_or(q.cursor);
    let request = WatchEventsRequest {
        app_name: app,
        user_id: q.user,
        cursor,
    };
    let stream = match caller.calls().watch_events(request).await {
        Ok(stream) => stream,
        Err(e) => return failure(ConsoleError::Service(e)),
    };
    let events = stream.map(move |item| {
        Ok(match item {
            Ok(item) => {
                let event = Event::default()
                    .event("event")
                    .data(json::app_event(&item).to_string());
                // An SSE id cannot hold line breaks (the service's cursors never do).
                if item.cursor.contains(['\n', '\r', '\0']) {
                    event
                } else {
                    event.id(item.cursor)
                }
            }
            Err(e) => failure_event(e),
        })
    });
    respond(slot, Box::pin(events))
}
