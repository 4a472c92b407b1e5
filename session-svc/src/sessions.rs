//! The session domain: checks each request, applies ADK's rules (S0-S8 in docs/rules.md),
//! calls the store, and tells watchers (through the [`Hub`]) what changed.
//!
//! Requests and results are the protobuf messages of `adk.session.v1` (plain data); nothing
//! here knows about gRPC transport.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, SystemTime},
};

use adk_common::{
    stopping::Stopping,
    validate::{identifier, page_size, page_size_up_to, timestamp, InvalidArgument},
};
use adk_proto::session::v1::{
    AppendEventRequest, CreateSessionRequest, DeleteSessionRequest, Event, GetAppStateRequest,
    GetSessionRequest, GetUserStateRequest, ListEventsRequest, ListSessionsRequest, Session,
    SessionOrder as RequestedOrder, WatchEventsRequest, WatchSessionRequest,
};
use prost::Message;
use prost_types::Timestamp;
use tokio::sync::mpsc;

use crate::{
    error::{Result, SessionError},
    event,
    hub::Hub,
    state::{self, Delta, ScopedDelta},
    store::{
        not_found, Append, Appended, EncodedEvent, EventWindow, NewSession, Notice, Page,
        SessionKey, SessionOrder, SessionPage, SessionQuery, SessionStore, StoredSession,
    },
    time::{is_before, now},
};

mod watch;

use watch::{check_retained, decode_cursor, AppFollower, SessionFollower, WATCH_BUFFER};

/// Expired sessions deleted per sweep step.
const SWEEP_BATCH: usize = 100;

/// The largest ListSessions page. Listed sessions carry no events, so pages can be larger than
/// other listings', and reading a user's whole list (ADK's list_sessions) takes one round trip
/// per 1,000 sessions instead of ten.
const MAX_SESSIONS_PAGE: usize = 1000;

/// Limits on what a client may send, and how long the change feed is kept.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest encoded event accepted by AppendEvent.
    pub max_event_bytes: usize,
    /// How long WatchEvents can resume from a cursor.
    pub change_retention: Duration,
    /// Lifetime of sessions created without their own.
    pub default_ttl: Option<Duration>,
}

/// One change of a watched session.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionChange {
    Event(Box<Event>),
    /// The session is gone; nothing follows.
    Deleted,
}

/// One committed event of an app's feed.
#[derive(Debug, Clone, PartialEq)]
pub struct AppEvent {
    pub user_id: String,
    pub session_id: String,
    pub event: Event,
    /// Resumes the feed right after this event.
    pub cursor: String,
}

/// A stream of results fed by a background task; it ends when the task does.
pub type Feed<T> = mpsc::Receiver<Result<T>>;

/// Session operations over a store.
#[derive(Debug)]
pub struct Sessions<S> {
    store: S,
    limits: Limits,
    hub: Arc<Hub>,
    /// Ends watch streams when the server shuts down.
    stopping: Stopping,
}

impl<S: SessionStore> Sessions<S> {
    pub fn new(store: S, limits: Limits, stopping: Stopping) -> Self {
        Self {
            store,
            limits,
            hub: Arc::default(),
            stopping,
        }
    }

    /// Wakes this process's watchers for changes made through other processes sharing the
    /// store, until the store's notices end.
    pub async fn relay(&self, mut notices: mpsc::UnboundedReceiver<Notice>) {
        while let Some(notice) = notices.recv().await {
            match notice {
                Notice::Committed {
                    key,
                    last_sequence,
                    change,
                } => self.hub.committed(&key, last_sequence, change),
                Notice::Deleted(key) => self.hub.deleted(&key),
                Notice::Resync => self.hub.wake_all(),
            }
        }
    }

    /// Fires when the server starts shutting down (streams end then).
    pub fn stopping(&self) -> Stopping {
        self.stopping.clone()
    }

    /// S1: create with a client id (whitespace stripped) or a fresh uuid4; initial state split
    /// by scope; optional lifetime.
    pub async fn create(&self, req: CreateSessionRequest) -> Result<Session> {
        let session_id = match req.session_id.trim() {
            "" => uuid::Uuid::new_v4().to_string(),
            id => id.to_owned(),
        };
        let key = session_key(&req.app_name, &req.user_id, &session_id)?;
        let state = Delta::parse("state", &req.state)?.split();
        let create_time = now();
        let expire_time = match (req.ttl, req.expire_time) {
            (Some(_), Some(_)) => {
                return Err(
                    InvalidArgument::new("ttl", "cannot be combined with expire_time").into(),
                )
            }
            (Some(ttl), None) => {
                if ttl.seconds < 0
                    || !(0..1_000_000_000).contains(&ttl.nanos)
                    || (ttl.seconds == 0 && ttl.nanos == 0)
                {
                    return Err(InvalidArgument::new("ttl", "must be positive").into());
                }
                Some(add(&create_time, &ttl))
            }
            (None, Some(t)) => {
                timestamp("expire_time", Some(&t))?;
                if !is_before(&create_time, &t) {
                    return Err(InvalidArgument::new("expire_time", "is in the past").into());
                }
                Some(t)
            }
            (None, None) => self
                .limits
                .default_ttl
                .map(|ttl| Timestamp::from(SystemTime::now() + ttl)),
        };
        self.store
            .create(NewSession {
                key,
                create_time,
                expire_time,
                state,
            })
            .await
    }

    /// S2: the session with its merged state and the events the request selects, as stored.
    pub async fn get(&self, req: GetSessionRequest) -> Result<StoredSession> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        let num_recent = req
            .num_recent_events
            .map(|n| {
                usize::try_from(n).map_err(|_| {
                    InvalidArgument::new("num_recent_events", "must be greater than or equal to 0")
                })
            })
            .transpose()?;
        timestamp("after_timestamp", req.after_timestamp.as_ref())?;
        let window = EventWindow {
            num_recent,
            after: req.after_timestamp,
        };
        let mut session = self
            .store
            .get_encoded(&key, window)
            .await?
            .ok_or_else(|| not_found(&key))?;
        if let Some(budget) = reply_budget(req.max_reply_event_bytes) {
            let kept = within_budget(&session.events, budget);
            session.events.truncate(kept);
        }
        Ok(session)
    }

    /// S4: sessions of an app, or of one user when `user_id` is present (even empty).
    pub async fn list(&self, req: ListSessionsRequest) -> Result<SessionPage> {
        let app_name = identifier("app_name", &req.app_name)?;
        let page_size = page_size_up_to("page_size", req.page_size, MAX_SESSIONS_PAGE)?;
        let offset = usize::try_from(req.offset)
            .map_err(|_| InvalidArgument::new("offset", "must not be negative"))?;
        let order = match RequestedOrder::try_from(req.order) {
            Ok(RequestedOrder::Unspecified | RequestedOrder::OldestFirst) => {
                SessionOrder::OldestFirst
            }
            Ok(RequestedOrder::NewestFirst) => SessionOrder::NewestFirst,
            Err(_) => {
                return Err(InvalidArgument::new("order", "is not a known SessionOrder").into())
            }
        };
        let user_id = match req.user_id.as_deref() {
            // No session can belong to an empty user id, since create refuses one.
            Some("") => {
                return Ok(SessionPage {
                    page: Page {
                        items: Vec::new(),
                        next_page_token: String::new(),
                    },
                    total_size: req.include_total_size.then_some(0),
                })
            }
            Some(user) => Some(identifier("user_id", user)?),
            None => None,
        };
        self.store
            .list(SessionQuery {
                app_name,
                user_id,
                order,
                offset,
                page_size,
                page_token: &req.page_token,
                count: req.include_total_size,
            })
            .await
    }

    /// S5: idempotent; app and user state are kept.
    pub async fn delete(&self, req: DeleteSessionRequest) -> Result<()> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        self.store.delete(&key).await?;
        self.hub.deleted(&key);
        Ok(())
    }

    /// S6: append one event and apply its state delta atomically.
    pub async fn append(&self, req: AppendEventRequest) -> Result<Appended> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        let mut event = req
            .event
            .ok_or_else(|| InvalidArgument::new("event", "is required"))?;
        let size = event.encoded_len();
        if size > self.limits.max_event_bytes {
            return Err(SessionError::TooLarge {
                field: "event",
                size,
                limit: self.limits.max_event_bytes,
            });
        }
        event::check(&event)?;
        let delta = match event.actions.as_mut() {
            Some(actions) => {
                let mut delta = Delta::parse("event.actions.state_delta", &actions.state_delta)?;
                delta.remove(
                    "event.actions.removed_state_keys",
                    &actions.removed_state_keys,
                )?;
                if event.partial != Some(true) {
                    if let Some(trimmed) = delta.trimmed_text() {
                        actions.state_delta = trimmed;
                    }
                    if delta.removed_keys().len() != actions.removed_state_keys.len() {
                        actions.removed_state_keys = delta.removed_keys().to_vec();
                    }
                }
                delta.split()
            }
            None => ScopedDelta::default(),
        };
        if event.partial == Some(true) {
            return self.partial(&key, event).await;
        }
        if event.id.is_empty() {
            event.id = uuid::Uuid::new_v4().to_string();
        }
        let timestamp_given = event.timestamp.is_some();
        if !timestamp_given {
            event.timestamp = Some(now());
        }
        let appended = self
            .store
            .append(
                &key,
                Append {
                    event,
                    timestamp_given,
                    delta,
                    expected_last_sequence: req.expected_last_sequence,
                },
            )
            .await?;
        self.hub
            .committed(&key, appended.last_sequence, appended.change);
        Ok(appended)
    }

    /// S6.1: a partial event is neither stored nor applied; it is answered as sent.
    async fn partial(&self, key: &SessionKey, event: Event) -> Result<Appended> {
        let session = self
            .store
            .get(key, EventWindow::NONE)
            .await?
            .ok_or_else(|| not_found(key))?;
        self.hub.partial(key, &event);
        Ok(Appended {
            event,
            last_sequence: session.last_sequence,
            last_update_time: session.last_update_time.unwrap_or_default(),
            change: 0,
        })
    }

    /// Stored events after `after_sequence`, then live appends (and live partial events when
    /// asked), ending with [`SessionChange::Deleted`] if the session is deleted.
    pub async fn watch_session(&self, req: WatchSessionRequest) -> Result<Feed<SessionChange>> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        // Subscribe before the first read: whatever commits after it wakes the watcher.
        let watch = self.hub.watch_session(&key);
        self.store
            .get(&key, EventWindow::NONE)
            .await?
            .ok_or_else(|| not_found(&key))?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let follower = SessionFollower {
            store: self.store.clone(),
            key,
            watch,
            last: req.after_sequence,
            include_partial: req.include_partial,
            stopping: self.stopping.clone(),
            tx,
        };
        self.stopping.spawn(follower.run());
        Ok(rx)
    }

    /// Every committed event of an app (or of one user) after `cursor` (empty: from now).
    pub async fn watch_events(&self, req: WatchEventsRequest) -> Result<Feed<AppEvent>> {
        let app_name = identifier("app_name", &req.app_name)?.to_owned();
        let user_id = match req.user_id.as_str() {
            "" => None,
            user => Some(identifier("user_id", user)?.to_owned()),
        };
        let watch = self.hub.watch_app(&app_name);
        let head = self.store.changes(&app_name, 0, 0).await?;
        let (last, skip) = match req.cursor.as_str() {
            "" => (head.head, head.unreadable.into_iter().collect()),
            cursor => {
                let position = decode_cursor(&app_name, cursor)?;
                if position > head.head {
                    return Err(InvalidArgument::new("cursor", "is ahead of the feed").into());
                }
                (position, HashSet::new())
            }
        };
        check_retained(last, head.oldest)?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let follower = AppFollower {
            store: self.store.clone(),
            app_name,
            user_id,
            watch,
            last,
            skip,
            stopping: self.stopping.clone(),
            tx,
        };
        self.stopping.spawn(follower.run());
        Ok(rx)
    }

    /// Deletes the sessions expired at `now` (they are invisible already) and ends their
    /// watches; returns how many went.
    pub async fn sweep_expired(&self, now: Timestamp) -> Result<usize> {
        let mut total = 0;
        loop {
            let swept = self.store.sweep_expired(now, SWEEP_BATCH).await?;
            for key in &swept {
                self.hub.deleted(key);
            }
            total += swept.len();
            if swept.len() < SWEEP_BATCH {
                return Ok(total);
            }
        }
    }

    /// Forgets change-feed entries older than the retention window; returns how many.
    pub async fn trim_changes(&self) -> Result<usize> {
        let cutoff = SystemTime::now()
            .checked_sub(self.limits.change_retention)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        self.store.trim_changes(Timestamp::from(cutoff)).await
    }

    /// A page of stored events after `after_sequence`, as stored.
    pub async fn list_events(&self, req: ListEventsRequest) -> Result<Page<EncodedEvent>> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        let page_size = page_size("page_size", req.page_size)?;
        match reply_budget(req.max_reply_event_bytes) {
            None => {
                self.store
                    .list_events_encoded(&key, req.after_sequence, page_size, &req.page_token)
                    .await
            }
            Some(budget) => {
                self.list_events_within(&key, req.after_sequence, page_size, req.page_token, budget)
                    .await
            }
        }
    }

    /// A ListEvents page that also ends at `budget` bytes of events. The store is read in
    /// chunks of 1, 2, 4... events, so that a page of large events reads little more than the
    /// budget; when the budget ends inside a chunk, the part that fits is read again to get the
    /// store's token for resuming right after it.
    async fn list_events_within(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        mut page_token: String,
        budget: usize,
    ) -> Result<Page<EncodedEvent>> {
        let mut items: Vec<EncodedEvent> = Vec::new();
        let mut used = 0;
        let mut chunk = 1;
        loop {
            let want = chunk.min(page_size - items.len());
            let read = self
                .store
                .list_events_encoded(key, after_sequence, want, &page_token)
                .await?;
            let fit = if items.is_empty() {
                within_budget(&read.items, budget)
            } else {
                within_budget_after(&read.items, budget, used)
            };
            if fit < read.items.len() {
                if fit > 0 {
                    let kept = self
                        .store
                        .list_events_encoded(key, after_sequence, fit, &page_token)
                        .await?;
                    items.extend(kept.items);
                    page_token = kept.next_page_token;
                }
                return Ok(Page {
                    items,
                    next_page_token: page_token,
                });
            }
            used += read.items.iter().map(EncodedEvent::size).sum::<usize>();
            items.extend(read.items);
            if read.next_page_token.is_empty() || items.len() == page_size {
                return Ok(Page {
                    items,
                    next_page_token: read.next_page_token,
                });
            }
            page_token = read.next_page_token;
            chunk *= 2;
        }
    }

    /// S7: the user scope as a JSON object, keys without prefix.
    pub async fn user_state(&self, req: GetUserStateRequest) -> Result<String> {
        let app_name = identifier("app_name", &req.app_name)?;
        let user_id = identifier("user_id", &req.user_id)?;
        Ok(state::object(
            &self.store.user_state(app_name, user_id).await?,
        ))
    }

    /// The app scope as a JSON object, keys without prefix.
    pub async fn app_state(&self, req: GetAppStateRequest) -> Result<String> {
        let app_name = identifier("app_name", &req.app_name)?;
        Ok(state::object(&self.store.app_state(app_name).await?))
    }

    /// The apps with sessions that `visible` admits (the caller's token), in byte order.
    pub async fn apps(&self, visible: impl Fn(&str) -> bool) -> Result<Vec<String>> {
        let mut apps = self.store.apps().await?;
        apps.retain(|app| visible(app));
        Ok(apps)
    }
}

/// The byte budget a read asked for (`max_reply_event_bytes`), if any.
fn reply_budget(requested: u64) -> Option<usize> {
    (requested > 0).then(|| usize::try_from(requested).unwrap_or(usize::MAX))
}

/// How many of `events`, from the first, fit in `budget` encoded bytes; at least one, so that
/// a reader always makes progress.
fn within_budget(events: &[EncodedEvent], budget: usize) -> usize {
    match events.split_first() {
        None => 0,
        Some((first, rest)) => 1 + within_budget_after(rest, budget, first.size()),
    }
}

/// How many of `events`, from the first, still fit in `budget` once `used` bytes are spent.
fn within_budget_after(events: &[EncodedEvent], budget: usize, mut used: usize) -> usize {
    events
        .iter()
        .take_while(|event| {
            used = used.saturating_add(event.size());
            used <= budget
        })
        .count()
}

/// Checks a session's full name; the session id is stripped of surrounding whitespace (S1.1).
fn session_key(app_name: &str, user_id: &str, session_id: &str) -> Result<SessionKey> {
    Ok(SessionKey {
        app_name: identifier("app_name", app_name)?.to_owned(),
        user_id: identifier("user_id", user_id)?.to_owned(),
        session_id: identifier("session_id", session_id.trim())?.to_owned(),
    })
}

fn add(t: &Timestamp, d: &prost_types::Duration) -> Timestamp {
    let mut sum = Timestamp {
        seconds: t.seconds.saturating_add(d.seconds),
        nanos: t.nanos + d.nanos,
    };
    sum.normalize();
    sum
}
