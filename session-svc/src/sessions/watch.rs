//! The followers behind the watch streams: [`SessionFollower`] replays a session's stored
//! events and then relays its live changes (WatchSession); [`AppFollower`] reads an app's change
//! feed from a cursor on (WatchEvents). Each runs as a background task feeding its stream.
//!
//! A store that cannot be reached (a database restarting) does not end a stream: the follower
//! reads again from where it stopped once woken (every watcher is woken when the notification
//! connection is back) or after [`UNAVAILABLE_RETRY`], so the stream resumes with no gap and no
//! repeat.

use std::{collections::HashSet, time::Duration};

use adk_common::{
    keys::{Key, KeyReader},
    page,
    stopping::Stopping,
    storage::StorageErrorKind,
    validate::InvalidArgument,
};
use adk_proto::session::v1::Event;
use tokio::sync::{broadcast, mpsc};

use super::{AppEvent, SessionChange};
use crate::{
    error::{Result, SessionError},
    hub::{AppWatch, SessionWatch},
    store::{SessionKey, SessionStore},
};

/// Events a watcher reads from the store at a time while catching up.
const WATCH_PAGE: usize = 100;

/// Messages buffered for a watcher's connection; a slower watcher simply reads the store later.
pub(super) const WATCH_BUFFER: usize = 16;

/// How soon an app watcher reads again when committed changes are not readable yet (on a
/// shared store, a change becomes readable once every transaction begun before it has ended).
const HORIZON_RETRY: Duration = Duration::from_millis(20);

/// How soon a watcher reads again after the store could not be reached, unless woken first.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(1);

/// The store could not be reached: reading again later may succeed.
fn unavailable(e: &SessionError) -> bool {
    matches!(e, SessionError::Storage(s) if s.kind() == StorageErrorKind::Unavailable)
}

/// Follows one session for a WatchSession stream.
pub(super) struct SessionFollower<S> {
    pub(super) store: S,
    pub(super) key: SessionKey,
    pub(super) watch: SessionWatch,
    /// The last sequence delivered: the next event delivered is `last + 1`, never a repeat.
    pub(super) last: u64,
    pub(super) include_partial: bool,
    pub(super) stopping: Stopping,
    pub(super) tx: mpsc::Sender<Result<SessionChange>>,
}

impl<S: SessionStore> SessionFollower<S> {
    pub(super) async fn run(mut self) {
        if let Err(e) = self.follow().await {
            let _ = self.tx.send(Err(e)).await;
        }
    }

    /// Ends (with `Ok`) when the session is deleted or the client goes away.
    async fn follow(&mut self) -> Result<()> {
        let mut partials: Option<broadcast::Receiver<Event>> = None;
        loop {
            let exists = match self.watch.current().deleted {
                true => false,
                false => match self.catch_up().await {
                    Ok(exists) => exists,
                    Err(e) if unavailable(&e) => {
                        tokio::select! {
                            _ = self.tx.closed() => return Ok(()),
                            _ = self.stopping.wait() => return Ok(()),
                            _ = self.watch.changed() => {}
                            _ = tokio::time::sleep(UNAVAILABLE_RETRY) => {}
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            if !exists {
                let _ = self.tx.send(Ok(SessionChange::Deleted)).await;
                return Ok(());
            }
            // Partial events are live only: they start once the replay is done.
            if self.include_partial && partials.is_none() {
                partials = Some(self.watch.partials());
            }
            // Until the next commit, relay partial fragments. Biased, fragments first: those
            // published before a commit reach the watcher before the event they make up (a
            // fair choice, or reading the store after each fragment, could reorder them).
            loop {
                tokio::select! {
                    biased;
                    _ = self.tx.closed() => return Ok(()),
                    _ = self.stopping.wait() => return Ok(()),
                    Some(partial) = next_partial(&mut partials) => {
                        let change = SessionChange::Event(Box::new(partial));
                        if self.tx.send(Ok(change)).await.is_err() {
                            return Ok(());
                        }
                    }
                    _ = self.watch.changed() => break,
                }
            }
        }
    }

    /// Sends every stored event after `last`, a page at a time, waiting for the client between
    /// sends; `false` if the session no longer exists.
    async fn catch_up(&mut self) -> Result<bool> {
        loop {
            let page = match self
                .store
                .list_events(&self.key, self.last, WATCH_PAGE, "")
                .await
            {
                Ok(page) => page,
                Err(SessionError::SessionNotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            let full = page.items.len() == WATCH_PAGE;
            for event in page.items {
                self.last = event.sequence;
                if self
                    .tx
                    .send(Ok(SessionChange::Event(Box::new(event))))
                    .await
                    .is_err()
                {
                    return Ok(true);
                }
            }
            if !full {
                return Ok(true);
            }
        }
    }
}

/// The next live partial event; pending forever when there is no subscription. A watcher that
/// lagged behind the ring skips the fragments it missed.
async fn next_partial(partials: &mut Option<broadcast::Receiver<Event>>) -> Option<Event> {
    let Some(rx) = partials else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(event) => return Some(event),
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return std::future::pending().await,
        }
    }
}

/// Follows an app's change feed for a WatchEvents stream.
pub(super) struct AppFollower<S> {
    pub(super) store: S,
    pub(super) app_name: String,
    pub(super) user_id: Option<String>,
    pub(super) watch: AppWatch,
    /// The last feed position read.
    pub(super) last: u64,
    /// Positions after `last` that had committed before the watch started "from now".
    pub(super) skip: HashSet<u64>,
    pub(super) stopping: Stopping,
    pub(super) tx: mpsc::Sender<Result<AppEvent>>,
}

impl<S: SessionStore> AppFollower<S> {
    pub(super) async fn run(mut self) {
        if let Err(e) = self.follow().await {
            let _ = self.tx.send(Err(e)).await;
        }
    }

    async fn follow(&mut self) -> Result<()> {
        loop {
            self.watch.mark_seen();
            // When to look again without a notification, if at all.
            let retry = loop {
                let changes = match self
                    .store
                    .changes(&self.app_name, self.last, WATCH_PAGE)
                    .await
                {
                    Ok(changes) => changes,
                    Err(e) if unavailable(&e) => break Some(UNAVAILABLE_RETRY),
                    Err(e) => return Err(e),
                };
                // A watcher slower than the retention window has lost events: say so.
                check_retained(self.last, changes.oldest)?;
                let full = changes.items.len() == WATCH_PAGE;
                for change in changes.items {
                    self.last = change.position;
                    if self.skip.remove(&change.position) {
                        continue;
                    }
                    let wanted = self.user_id.as_ref().is_none_or(|u| *u == change.user_id);
                    // Events of sessions deleted since are gone; the position moves on.
                    let Some(event) = change.event.filter(|_| wanted) else {
                        continue;
                    };
                    let item = AppEvent {
                        user_id: change.user_id,
                        session_id: change.session_id,
                        event,
                        cursor: encode_cursor(&self.app_name, change.position),
                    };
                    if self.tx.send(Ok(item)).await.is_err() {
                        return Ok(());
                    }
                }
                // Committed changes not readable yet: look again shortly, since no
                // notification will come when the older transactions holding them back end.
                if !full {
                    break (!changes.unreadable.is_empty()).then_some(HORIZON_RETRY);
                }
            };
            tokio::select! {
                _ = self.watch.changed() => {}
                _ = tokio::time::sleep(retry.unwrap_or_default()), if retry.is_some() => {}
                _ = self.tx.closed() => return Ok(()),
                _ = self.stopping.wait() => return Ok(()),
            }
        }
    }
}

/// Cursors are opaque tokens naming (app, position), so one app's cursor is refused by another.
fn encode_cursor(app_name: &str, position: u64) -> String {
    page::encode(Key::new().str(app_name).u64(position).as_bytes())
}

pub(super) fn decode_cursor(app_name: &str, cursor: &str) -> Result<u64> {
    let prefix = Key::new().str(app_name);
    let invalid = |reason: String| SessionError::from(InvalidArgument::new("cursor", reason));
    let key = page::decode(cursor, prefix.as_bytes())
        .map_err(|e| invalid(e.to_string()))?
        .ok_or_else(|| invalid("is empty".into()))?;
    let mut reader = KeyReader::new(&key[prefix.as_bytes().len()..]);
    match (reader.u64(), reader.is_empty()) {
        (Some(position), true) => Ok(position),
        _ => Err(invalid("is not a cursor issued by this service".into())),
    }
}

/// Resuming after `last` needs every position from `last + 1` on.
pub(super) fn check_retained(last: u64, oldest: u64) -> Result<()> {
    if last.saturating_add(1) < oldest {
        return Err(SessionError::CursorExpired {
            position: last,
            oldest,
        });
    }
    Ok(())
}
