//! The session domain: checks each request, applies ADK's rules (S0-S8), and calls the store.
//!
//! Requests and results are the protobuf messages of `adk.session.v1` (plain data); nothing
//! here knows about gRPC transport.

use std::time::SystemTime;

use adk_common::validate::{identifier, page_size, timestamp, InvalidArgument};
use adk_proto::session::v1::{
    AppendEventRequest, CreateSessionRequest, DeleteSessionRequest, Event, GetAppStateRequest,
    GetSessionRequest, GetUserStateRequest, ListEventsRequest, ListSessionsRequest, Session,
};
use prost::Message;
use prost_types::Timestamp;

use crate::{
    error::{Result, SessionError},
    event,
    state::{self, Delta, ScopedDelta},
    store::{Append, Appended, EventWindow, NewSession, Page, SessionKey, SessionStore},
};

/// Limits on what a client may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest encoded event accepted by AppendEvent.
    pub max_event_bytes: usize,
}

/// Session operations over a store.
#[derive(Debug)]
pub struct Sessions<S> {
    store: S,
    limits: Limits,
}

impl<S: SessionStore> Sessions<S> {
    pub fn new(store: S, limits: Limits) -> Self {
        Self { store, limits }
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
            (None, None) => None,
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

    /// S2: the session with its merged state and the events the request selects.
    pub async fn get(&self, req: GetSessionRequest) -> Result<Session> {
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
        self.store
            .get(&key, window)
            .await?
            .ok_or_else(|| not_found(&key))
    }

    /// S4: sessions of an app, or of one user when `user_id` is present (even empty).
    pub async fn list(&self, req: ListSessionsRequest) -> Result<Page<Session>> {
        let app_name = identifier("app_name", &req.app_name)?;
        let page_size = page_size("page_size", req.page_size)?;
        match req.user_id.as_deref() {
            // No session can belong to an empty user id, since create refuses one.
            Some("") => Ok(Page {
                items: Vec::new(),
                next_page_token: String::new(),
            }),
            Some(user) => {
                let user = identifier("user_id", user)?;
                self.store
                    .list(app_name, Some(user), page_size, &req.page_token)
                    .await
            }
            None => {
                self.store
                    .list(app_name, None, page_size, &req.page_token)
                    .await
            }
        }
    }

    /// S5: idempotent; app and user state are kept.
    pub async fn delete(&self, req: DeleteSessionRequest) -> Result<()> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        self.store.delete(&key).await
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
                let delta = Delta::parse("event.actions.state_delta", &actions.state_delta)?;
                if event.partial != Some(true) {
                    if let Some(trimmed) = delta.trimmed_text() {
                        actions.state_delta = trimmed;
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
        self.store
            .append(
                &key,
                Append {
                    event,
                    timestamp_given,
                    delta,
                    expected_last_sequence: req.expected_last_sequence,
                },
            )
            .await
    }

    /// S6.1: a partial event is neither stored nor applied; it is answered as sent.
    async fn partial(&self, key: &SessionKey, event: Event) -> Result<Appended> {
        let session = self
            .store
            .get(key, EventWindow::NONE)
            .await?
            .ok_or_else(|| not_found(key))?;
        Ok(Appended {
            event,
            last_sequence: session.last_sequence,
            last_update_time: session.last_update_time.unwrap_or_default(),
        })
    }

    /// A page of stored events after `after_sequence`.
    pub async fn list_events(&self, req: ListEventsRequest) -> Result<Page<Event>> {
        let key = session_key(&req.app_name, &req.user_id, &req.session_id)?;
        let page_size = page_size("page_size", req.page_size)?;
        self.store
            .list_events(&key, req.after_sequence, page_size, &req.page_token)
            .await
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
}

/// Checks a session's full name; the session id is stripped of surrounding whitespace (S1.1).
fn session_key(app_name: &str, user_id: &str, session_id: &str) -> Result<SessionKey> {
    Ok(SessionKey {
        app_name: identifier("app_name", app_name)?.to_owned(),
        user_id: identifier("user_id", user_id)?.to_owned(),
        session_id: identifier("session_id", session_id.trim())?.to_owned(),
    })
}

fn not_found(key: &SessionKey) -> SessionError {
    SessionError::SessionNotFound {
        session_id: key.session_id.clone(),
    }
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

fn is_before(a: &Timestamp, b: &Timestamp) -> bool {
    (a.seconds, a.nanos) < (b.seconds, b.nanos)
}

fn add(t: &Timestamp, d: &prost_types::Duration) -> Timestamp {
    let mut sum = Timestamp {
        seconds: t.seconds.saturating_add(d.seconds),
        nanos: t.nanos + d.nanos,
    };
    sum.normalize();
    sum
}
