//! In-process change notifications, so watchers learn of appends without polling.
//!
//! Signals carry no stored events: a watcher that wakes reads what it missed from the store by
//! sequence (or change-log position). So a slow watcher never makes the hub buffer anything, and
//! a wake-up that arrives late or twice never loses or repeats an event. Only partial events,
//! which are never stored, travel through the hub itself, in a small ring that drops the oldest
//! fragments for a watcher that falls behind.
//!
//! Topics exist only while someone watches: publishing to a session nobody watches is a map
//! lookup.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
};

use adk_proto::session::v1::Event;
use tokio::sync::{broadcast, watch};

use crate::store::SessionKey;

/// Partial fragments kept for a watcher that has not read them yet.
const PARTIAL_BACKLOG: usize = 256;

/// What a session watcher is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionSignal {
    pub last_sequence: u64,
    pub deleted: bool,
}

struct SessionTopic {
    /// Tells this topic apart from a later one of the same session (after a deletion).
    id: u64,
    committed: watch::Sender<SessionSignal>,
    partials: broadcast::Sender<Event>,
}

/// The notification hub of one server process.
#[derive(Default)]
pub struct Hub {
    sessions: Mutex<HashMap<SessionKey, SessionTopic>>,
    next_topic: AtomicU64,
    apps: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// An event up to `last_sequence` was committed to the session, as change `change` of the
    /// session's app.
    pub fn committed(&self, key: &SessionKey, last_sequence: u64, change: u64) {
        if let Some(topic) = lock(&self.sessions).get(key) {
            topic.committed.send_modify(|s| {
                s.last_sequence = s.last_sequence.max(last_sequence);
            });
        }
        if let Some(app) = lock(&self.apps).get(&key.app_name) {
            app.send_modify(|c| *c = (*c).max(change));
        }
    }

    /// A partial event was appended: it goes to live watchers only.
    pub fn partial(&self, key: &SessionKey, event: &Event) {
        if let Some(topic) = lock(&self.sessions).get(key) {
            // No receiver is not an error: nobody asked for partial events.
            let _ = topic.partials.send(event.clone());
        }
    }

    /// The session was deleted: its watchers end. A later session of the same name gets a new
    /// topic, so they never mistake it for the old one.
    pub fn deleted(&self, key: &SessionKey) {
        if let Some(topic) = lock(&self.sessions).remove(key) {
            topic.committed.send_modify(|s| s.deleted = true);
        }
    }

    /// Wakes every watcher, to read the store again (some notices may have been missed).
    pub fn wake_all(&self) {
        for topic in lock(&self.sessions).values() {
            topic.committed.send_modify(|_| {});
        }
        for app in lock(&self.apps).values() {
            app.send_modify(|_| {});
        }
    }

    /// Starts watching a session.
    pub fn watch_session(self: &Arc<Self>, key: &SessionKey) -> SessionWatch {
        let mut sessions = lock(&self.sessions);
        let topic = sessions.entry(key.clone()).or_insert_with(|| SessionTopic {
            id: self.next_topic.fetch_add(1, Ordering::Relaxed),
            committed: watch::Sender::new(SessionSignal::default()),
            partials: broadcast::Sender::new(PARTIAL_BACKLOG),
        });
        SessionWatch {
            hub: self.clone(),
            key: key.clone(),
            topic: topic.id,
            committed: topic.committed.subscribe(),
            partials: topic.partials.clone(),
        }
    }

    /// Starts watching every change of an app.
    pub fn watch_app(self: &Arc<Self>, app_name: &str) -> AppWatch {
        let mut apps = lock(&self.apps);
        let sender = apps
            .entry(app_name.to_owned())
            .or_insert_with(|| watch::Sender::new(0));
        AppWatch {
            hub: self.clone(),
            app_name: app_name.to_owned(),
            changes: sender.subscribe(),
        }
    }
}

/// A watcher's end of a session topic; the topic goes away with its last watcher.
pub struct SessionWatch {
    hub: Arc<Hub>,
    key: SessionKey,
    topic: u64,
    committed: watch::Receiver<SessionSignal>,
    partials: broadcast::Sender<Event>,
}

impl SessionWatch {
    /// The latest signal, marking it seen: a later [`Self::changed`] waits for a newer one.
    pub fn current(&mut self) -> SessionSignal {
        *self.committed.borrow_and_update()
    }

    /// Waits for a signal newer than the last [`Self::current`].
    pub async fn changed(&mut self) {
        // An error means the topic was removed (deletion); `current` then reports it.
        let _ = self.committed.changed().await;
    }

    /// Partial events published from now on.
    pub fn partials(&self) -> broadcast::Receiver<Event> {
        self.partials.subscribe()
    }
}

impl Drop for SessionWatch {
    fn drop(&mut self) {
        let mut sessions = lock(&self.hub.sessions);
        // Subscriptions are made under this lock, so the count is exact; ours is still alive.
        let last = sessions
            .get(&self.key)
            .is_some_and(|t| t.id == self.topic && t.committed.receiver_count() <= 1);
        if last {
            sessions.remove(&self.key);
        }
    }
}

/// A watcher's end of an app's change feed.
pub struct AppWatch {
    hub: Arc<Hub>,
    app_name: String,
    changes: watch::Receiver<u64>,
}

impl AppWatch {
    /// Marks the latest change seen: a later [`Self::changed`] waits for a newer one.
    pub fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// Waits for a change newer than the last [`Self::mark_seen`].
    pub async fn changed(&mut self) {
        // The sender lives as long as this watcher's entry, so this only waits.
        let _ = self.changes.changed().await;
    }
}

impl Drop for AppWatch {
    fn drop(&mut self) {
        let mut apps = lock(&self.hub.apps);
        if apps
            .get(&self.app_name)
            .is_some_and(|s| s.receiver_count() <= 1)
        {
            apps.remove(&self.app_name);
        }
    }
}

/// The maps stay consistent even if a holder panicked (each update is a single insert or
/// remove), so a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
