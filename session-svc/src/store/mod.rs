//! Storage of sessions, events and scoped state.
//!
//! [`SessionStore`] is what the domain ([`crate::sessions`]) talks to. [`sled::SledSessionStore`]
//! is the embedded implementation (one process); [`pg::PgSessionStore`] keeps sessions in
//! PostgreSQL, shared by any number of replicas. Every method that writes is atomic and durable
//! when it returns. The tests in [`contract`] pin the behaviour both must share, and run on both.

#[cfg(test)]
mod contract;
pub mod pg;
pub mod sled;
pub mod token;

use std::future::Future;

use adk_common::stopping::Stopping;
use adk_proto::session::v1::{Event, Session};
use prost::{bytes::Bytes, Message};
use prost_types::Timestamp;
use tokio::sync::mpsc;

use crate::{
    error::{Result, SessionError},
    state::{Entry, ScopedDelta},
};

/// The full name of a session. Fields are validated before a key reaches the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub key: SessionKey,
    pub create_time: Timestamp,
    pub expire_time: Option<Timestamp>,
    pub state: ScopedDelta,
}

/// Which events a read returns: the trailing events with `timestamp >= after`, at most
/// `num_recent` of them. Both `None`: all events.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventWindow {
    pub num_recent: Option<usize>,
    pub after: Option<Timestamp>,
}

impl EventWindow {
    /// No events at all (listings, existence checks).
    pub const NONE: Self = Self {
        num_recent: Some(0),
        after: None,
    };
}

/// A stored event as the store keeps it: its protobuf encoding (`sequence` included, as the
/// append wrote it), and that sequence. Reads hand these bytes to the reply as they are
/// (`crate::grpc::reply`), so a long session's events are neither decoded nor encoded again on
/// their way out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedEvent {
    pub sequence: u64,
    pub bytes: Bytes,
}

impl EncodedEvent {
    /// The encoded size: what `max_reply_event_bytes` counts (the decoded event's
    /// `encoded_len`, as the bytes are prost's own encoding of it).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    pub fn decode(&self) -> Result<Event> {
        decode_event(&self.bytes)
    }

    /// The event's timestamp, read without decoding the rest of it.
    fn timestamp(&self) -> Result<Timestamp> {
        EventTime::decode(&self.bytes[..])
            .map(|t| t.timestamp.unwrap_or_default())
            .map_err(|e| SessionError::corrupt(format!("event: {e}")))
    }
}

/// `Event.timestamp` alone: decoding an event as this skips its other fields unread.
#[derive(Clone, PartialEq, prost::Message)]
struct EventTime {
    #[prost(message, optional, tag = "7")]
    timestamp: Option<Timestamp>,
}

/// A session as read, its events still encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// Everything but the events (its `events` is empty).
    pub session: Session,
    pub events: Vec<EncodedEvent>,
}

impl StoredSession {
    /// The session with its events decoded.
    pub fn decode(self) -> Result<Session> {
        let events = decode_events(&self.events)?;
        Ok(Session {
            events,
            ..self.session
        })
    }
}

impl Page<EncodedEvent> {
    /// The page with its events decoded.
    pub fn decode(self) -> Result<Page<Event>> {
        Ok(Page {
            items: decode_events(&self.items)?,
            next_page_token: self.next_page_token,
        })
    }
}

fn decode_events(events: &[EncodedEvent]) -> Result<Vec<Event>> {
    events.iter().map(EncodedEvent::decode).collect()
}

/// An event to append, already checked and normalised by the domain.
#[derive(Debug, Clone)]
pub struct Append {
    /// `temp:` keys trimmed, id and timestamp filled in, sequence 0.
    pub event: Event,
    /// False when the server filled in the timestamp; a retry is then matched without it.
    pub timestamp_given: bool,
    pub delta: ScopedDelta,
    pub expected_last_sequence: Option<u64>,
}

/// The outcome of an append (or of a retried append that was already stored).
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    pub event: Event,
    pub last_sequence: u64,
    pub last_update_time: Timestamp,
    /// The append's position in its app's change log (the latest position for a retry).
    pub change: u64,
}

/// One committed event in an app's change log.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Positions increase in commit order within an app: 1, 2, 3... without gaps on sled,
    /// transaction ids (with gaps) on PostgreSQL.
    pub position: u64,
    pub user_id: String,
    pub session_id: String,
    /// `None` once the session has been deleted.
    pub event: Option<Event>,
}

/// A stretch of an app's change log.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    pub items: Vec<Change>,
    /// Positions before this one were trimmed (on sled `head + 1` when none is retained).
    pub oldest: u64,
    /// Every position up to this one is readable (on sled the latest position, 0 before the
    /// app's first append).
    pub head: u64,
    /// Positions after `head` already committed but not readable yet: a shared store reads
    /// only below its oldest open transaction. A reader starting "from now" skips them when
    /// they become readable, and any reader should read again shortly.
    pub unreadable: Vec<u64>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Empty on the last page.
    pub next_page_token: String,
}

/// The order of a ListSessions listing. Sessions updated at the same time are ordered by
/// `(user_id, session_id)` ascending in both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionOrder {
    /// By `last_update_time` ascending (S4.4).
    #[default]
    OldestFirst,
    /// By `last_update_time` descending.
    NewestFirst,
}

/// One page of a ListSessions listing to read: which sessions, in which order, from where.
#[derive(Debug, Clone, Copy)]
pub struct SessionQuery<'a> {
    pub app_name: &'a str,
    /// `None`: every user's sessions of the app.
    pub user_id: Option<&'a str>,
    pub order: SessionOrder,
    /// Live sessions skipped before the first page; ignored with a page token, which already
    /// names where the page starts.
    pub offset: usize,
    pub page_size: usize,
    pub page_token: &'a str,
    /// Count the whole listing into [`SessionPage::total_size`].
    pub count: bool,
}

impl<'a> SessionQuery<'a> {
    /// A page of the listing in its default order, without offset or count.
    pub fn page(
        app_name: &'a str,
        user_id: Option<&'a str>,
        page_size: usize,
        page_token: &'a str,
    ) -> Self {
        Self {
            app_name,
            user_id,
            order: SessionOrder::OldestFirst,
            offset: 0,
            page_size,
            page_token,
            count: false,
        }
    }
}

/// A page of sessions, and the number of live sessions in the whole listing when it was asked
/// for.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPage {
    pub page: Page<Session>,
    pub total_size: Option<usize>,
}

/// A change made through another process sharing the store (another replica), so that this
/// process wakes its own watchers.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// An event up to `last_sequence` was committed, as app change `change`.
    Committed {
        key: SessionKey,
        last_sequence: u64,
        change: u64,
    },
    Deleted(SessionKey),
    /// Notices may have been missed (the store's notification channel reconnected): every
    /// watcher should read again.
    Resync,
}

/// Where sessions live. Implementations keep the semantics documented on each method.
pub trait SessionStore: Clone + Send + Sync + 'static {
    /// Creates a session and applies its initial app/user state, or fails with
    /// `SessionExists`. Returns the stored session with its merged state.
    fn create(&self, session: NewSession) -> impl Future<Output = Result<Session>> + Send;

    /// Reads a live session with the events `window` selects, reading no other events, and
    /// leaves them encoded.
    fn get_encoded(
        &self,
        key: &SessionKey,
        window: EventWindow,
    ) -> impl Future<Output = Result<Option<StoredSession>>> + Send;

    /// [`Self::get_encoded`], the events decoded.
    fn get(
        &self,
        key: &SessionKey,
        window: EventWindow,
    ) -> impl Future<Output = Result<Option<Session>>> + Send {
        async move {
            self.get_encoded(key, window)
                .await?
                .map(StoredSession::decode)
                .transpose()
        }
    }

    /// Lists live sessions without events, by last_update_time in `query.order`, then by
    /// (user_id, id) ascending. The count, when asked for, covers the whole listing.
    fn list(&self, query: SessionQuery<'_>) -> impl Future<Output = Result<SessionPage>> + Send;

    /// Deletes a session, its events and its session state; a no-op when missing.
    fn delete(&self, key: &SessionKey) -> impl Future<Output = Result<()>> + Send;

    /// Appends an event and applies its delta to all three scopes in one transaction.
    fn append(
        &self,
        key: &SessionKey,
        append: Append,
    ) -> impl Future<Output = Result<Appended>> + Send;

    /// Stored events with `sequence > after_sequence`, in sequence order, left encoded.
    fn list_events_encoded(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        page_token: &str,
    ) -> impl Future<Output = Result<Page<EncodedEvent>>> + Send;

    /// [`Self::list_events_encoded`], the events decoded.
    fn list_events(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        page_token: &str,
    ) -> impl Future<Output = Result<Page<Event>>> + Send {
        async move {
            self.list_events_encoded(key, after_sequence, page_size, page_token)
                .await?
                .decode()
        }
    }

    /// Up to `limit` changes of an app after position `after`, oldest first.
    fn changes(
        &self,
        app_name: &str,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Changes>> + Send;

    /// Forgets changes committed before `before`; returns how many.
    fn trim_changes(&self, before: Timestamp) -> impl Future<Output = Result<usize>> + Send;

    /// Deletes up to `limit` sessions whose expire_time is before `now`; returns their keys.
    fn sweep_expired(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<SessionKey>>> + Send;

    /// The user scope's entries, keys without prefix.
    fn user_state(
        &self,
        app_name: &str,
        user_id: &str,
    ) -> impl Future<Output = Result<Vec<Entry>>> + Send;

    /// The app scope's entries, keys without prefix.
    fn app_state(&self, app_name: &str) -> impl Future<Output = Result<Vec<Entry>>> + Send;

    /// The names of the apps that have at least one stored session, in byte order. Costs one
    /// lookup per app, whatever the number of sessions.
    fn apps(&self) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Changes other processes make to the store, when it is shared (`None`: only this process
    /// writes, and the domain already knows every change). Whatever listens for them runs until
    /// `stopping`, and shutdown waits for it to end.
    fn notices(&self, _stopping: &Stopping) -> Result<Option<mpsc::UnboundedReceiver<Notice>>> {
        Ok(None)
    }
}

/// What an append may do, decided by both stores alike once they hold the session's lock.
enum Admission {
    /// The event was stored already (a retry): answer with it and write nothing.
    Retry(Box<Appended>),
    /// Write the event with this sequence.
    Write(u64),
}

/// Checks an append against the session's `last_sequence` and against `stored`, the event
/// already stored under the same id if any. A retry is recognised before
/// `expected_last_sequence` is checked, so a retried conditional append gets its event back.
fn admission(
    append: &Append,
    stored: Option<Event>,
    last_sequence: u64,
    last_update_time: Timestamp,
) -> Result<Admission> {
    if let Some(stored) = stored {
        if !is_retry_of(&stored, append) {
            return Err(SessionError::EventIdTaken {
                event_id: append.event.id.clone(),
            });
        }
        return Ok(Admission::Retry(Box::new(Appended {
            event: stored,
            last_sequence,
            last_update_time,
            change: 0,
        })));
    }
    match append.expected_last_sequence {
        Some(expected) if expected != last_sequence => Err(SessionError::Stale {
            expected,
            current: last_sequence,
        }),
        _ => Ok(Admission::Write(last_sequence + 1)),
    }
}

/// Whether `stored` is the event `append` carries, sent again (a safe retry). When the server
/// filled in the timestamp, the retry got a new one, so timestamps are not compared.
fn is_retry_of(stored: &Event, append: &Append) -> bool {
    let mut stored = stored.clone();
    stored.sequence = 0;
    if append.timestamp_given {
        stored == append.event
    } else {
        stored.timestamp = None;
        let mut sent = append.event.clone();
        sent.timestamp = None;
        stored == sent
    }
}

/// The answer to a call on a session that does not exist (or has expired).
pub(crate) fn not_found(key: &SessionKey) -> SessionError {
    SessionError::SessionNotFound {
        session_id: key.session_id.clone(),
    }
}

/// Decodes a stored event (both stores keep the encoded `Event`).
fn decode_event(bytes: &[u8]) -> Result<Event> {
    Event::decode(bytes).map_err(|e| SessionError::corrupt(format!("event: {e}")))
}
