//! Event streams: events buffered as they happen (`AppendMemoryStream`), per (app, user,
//! stream), each event id once, and handed to generation by themselves: once a stream holds
//! its app's trigger count of events (`--stream-trigger-events`), or once it has been quiet for
//! its app's quiet time (`--stream-quiet`), or when the caller flushes it
//! (`FlushMemoryStream`). A handoff queues an ordinary generation job (default options) from
//! the buffered events in the order they came.
//!
//! The buffer is the store's (see [`crate::store::streams`]): an acknowledged append is
//! durable, and the handoff queues the job and empties the buffer in one transaction, so a
//! process killed at any point loses no event and runs no generation twice. The quiet timers
//! are no state of their own: [`watch`] reads the buffered streams' last append times from
//! the store, at startup and whenever it wakes, and hands over those whose time has come (the
//! store checks again, in the handoff's transaction, that nothing was appended since).

use std::{fmt, str::FromStr, time::Duration};

use adk_common::{
    stopping::Stopping,
    validate::{self, identifier, InvalidArgument},
};
use adk_proto::{
    memory::v1::{
        AppendMemoryStreamRequest, FlushMemoryStreamRequest, GenerationState,
        ListMemoryStreamsRequest,
    },
    session::v1::Event,
};
use metrics::counter;
use prost::Message;

use crate::{
    error::Result,
    generate::{jobs::now_ms, GenerateError},
    memories::Memories,
    store::{Appended, Buffered, JobRecord, MemoryStore, Scope, StreamKey},
};

/// Events one append may carry.
pub const MAX_APPEND_EVENTS: usize = 100;

/// The largest event a stream buffers, encoded: a job holds its whole buffer.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// The most events a trigger count may be: the buffer a job takes at once.
pub const MAX_TRIGGER_EVENTS: u32 = 1000;

/// Events that trigger generation, for an app without a setting.
pub const DEFAULT_TRIGGER_EVENTS: u32 = 20;

/// The quiet time, for an app without a setting.
pub const DEFAULT_QUIET: Duration = Duration::from_secs(60);

/// The app a setting of every app names.
const EVERY_APP: &str = "*";

/// The longest the quiet timers sleep without looking at the store again: a stream another
/// replica appended to has a timer here too.
const POLL: Duration = Duration::from_secs(1);

/// One `--stream-trigger-events` or `--stream-quiet` setting: `VALUE` for every app, or
/// `APP=VALUE` for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerApp<T> {
    /// An app name, or `*`.
    pub app: String,
    pub value: T,
}

impl<T: FromStr<Err = String>> FromStr for PerApp<T> {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (app, value) = match s.split_once('=') {
            Some(("", _)) => {
                return Err(format!(
                    "{s:?}: the app is empty (give VALUE for every app)"
                ))
            }
            Some((app, value)) => (app, value),
            None => (EVERY_APP, s),
        };
        Ok(Self {
            app: app.to_owned(),
            value: value.parse().map_err(|e| format!("{s:?}: {e}"))?,
        })
    }
}

impl<T: fmt::Display> fmt::Display for PerApp<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.app.as_str() {
            EVERY_APP => write!(f, "{}", self.value),
            app => write!(f, "{app}={}", self.value),
        }
    }
}

/// A trigger count: 1 to [`MAX_TRIGGER_EVENTS`] events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerEvents(pub u32);

impl FromStr for TriggerEvents {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<u32>() {
            Ok(n) if (1..=MAX_TRIGGER_EVENTS).contains(&n) => Ok(Self(n)),
            _ => Err(format!("the count must be 1 to {MAX_TRIGGER_EVENTS}")),
        }
    }
}

impl fmt::Display for TriggerEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A quiet time, longer than 0 (`90s`, `5m`, `500ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet(pub Duration);

impl FromStr for Quiet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match humantime::parse_duration(s) {
            Ok(d) if !d.is_zero() => Ok(Self(d)),
            Ok(_) => Err("the duration must be longer than 0".into()),
            Err(e) => Err(format!("the duration: {e} (e.g. 90s, 5m)")),
        }
    }
}

impl fmt::Display for Quiet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

/// When streams are handed to generation, per app.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Triggers {
    events: Vec<PerApp<TriggerEvents>>,
    quiet: Vec<PerApp<Quiet>>,
}

/// The last setting for `app`, else the last for every app.
fn of<T: Copy>(settings: &[PerApp<T>], app: &str) -> Option<T> {
    let last = |name: &str| settings.iter().rev().find(|s| s.app == name);
    last(app).or_else(|| last(EVERY_APP)).map(|s| s.value)
}

impl Triggers {
    pub fn new(events: Vec<PerApp<TriggerEvents>>, quiet: Vec<PerApp<Quiet>>) -> Self {
        Self { events, quiet }
    }

    /// The events that make `app`'s streams trigger: its setting, else every app's, else
    /// [`DEFAULT_TRIGGER_EVENTS`].
    pub fn events(&self, app: &str) -> usize {
        of(&self.events, app).map_or(DEFAULT_TRIGGER_EVENTS, |n| n.0) as usize
    }

    /// How long `app`'s streams wait for another event: its setting, else every app's, else
    /// [`DEFAULT_QUIET`].
    pub fn quiet(&self, app: &str) -> Duration {
        of(&self.quiet, app).map_or(DEFAULT_QUIET, |q| q.0)
    }
}

/// Why a stream was handed to generation, as the metric labels it.
#[derive(Debug, Clone, Copy)]
enum Reason {
    Events,
    Quiet,
    Flush,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Quiet => "quiet",
            Self::Flush => "flush",
        }
    }
}

/// Counts a handoff, and wakes a worker for its job.
fn triggered<S: MemoryStore>(memories: &Memories<S>, job: &JobRecord, reason: Reason) {
    counter!("memory_stream_triggers_total", "reason" => reason.label()).increment(1);
    tracing::info!(job = %job.id, app = %job.app_name, user = %job.user_id, stream = %job.stream_id, events = job.events.len(), reason = reason.label(), "stream handed to generation");
    memories.job_queued();
}

/// A new job for a stream's buffered events (the store adds them): due at once, with the
/// default options.
fn job_for(stream: StreamKey<'_>) -> JobRecord {
    let now = now_ms();
    JobRecord {
        id: uuid::Uuid::new_v4().to_string(),
        app_name: stream.scope.app_name.to_owned(),
        user_id: stream.scope.user_id.to_owned(),
        state: GenerationState::Pending as i32,
        create_ms: now,
        update_ms: now,
        due_ms: now,
        stream_id: stream.stream_id.to_owned(),
        ..Default::default()
    }
}

/// The stream a request names, checked.
fn stream<'a>(app_name: &'a str, user_id: &'a str, stream_id: &'a str) -> Result<StreamKey<'a>> {
    Ok(StreamKey {
        scope: Scope {
            app_name: identifier("app_name", app_name)?,
            user_id: identifier("user_id", user_id)?,
        },
        stream_id: identifier("stream_id", stream_id.trim())?,
    })
}

/// The events of an append as a stream buffers them: each with an id and within
/// [`MAX_EVENT_BYTES`], its content checked; those without content left out, and of several
/// with one id the first kept.
fn buffered_events(events: Vec<Event>) -> Result<Vec<Event>> {
    if events.is_empty() || events.len() > MAX_APPEND_EVENTS {
        return Err(InvalidArgument::new(
            "events",
            format!(
                "must hold 1 to {MAX_APPEND_EVENTS} events, not {}",
                events.len()
            ),
        )
        .into());
    }
    let mut kept: Vec<Event> = Vec::with_capacity(events.len());
    for (i, mut event) in events.into_iter().enumerate() {
        let at = |name: &str| format!("events[{i}].{name}");
        event.id = identifier(&at("id"), event.id.trim())?.to_owned();
        let size = event.encoded_len();
        if size > MAX_EVENT_BYTES {
            return Err(InvalidArgument::new(
                format!("events[{i}]"),
                format!("is {size} bytes; the limit is {MAX_EVENT_BYTES}"),
            )
            .into());
        }
        let Some(content) = event.content.as_ref().filter(|c| !c.parts.is_empty()) else {
            continue;
        };
        validate::content(&at("content"), content)?;
        validate::timestamp(&at("timestamp"), event.timestamp.as_ref())?;
        // Only what generation reads is buffered.
        event.actions = None;
        if !kept.iter().any(|e| e.id == event.id) {
            kept.push(event);
        }
    }
    Ok(kept)
}

impl<S: MemoryStore> Memories<S> {
    /// Buffers a request's events in their stream, and hands the stream to generation when
    /// they bring it to its app's trigger count.
    pub async fn append_stream(&self, req: AppendMemoryStreamRequest) -> Result<Appended> {
        if self.generator().is_none() {
            return Err(GenerateError::NotConfigured.into());
        }
        let stream = stream(&req.app_name, &req.user_id, &req.stream_id)?;
        let events = buffered_events(req.events)?;
        if events.is_empty() {
            return Ok(Appended::default());
        }
        let trigger = self.triggers().events(stream.scope.app_name);
        let appended = self
            .store()
            .append_stream(stream, events, now_ms(), trigger, job_for(stream))
            .await?;
        counter!("memory_stream_events_total").increment(u64::from(appended.appended));
        match &appended.job {
            Some(job) => triggered(self, job, Reason::Events),
            None if appended.appended > 0 => self.stream_appended(),
            None => {}
        }
        Ok(appended)
    }

    /// Hands a stream's buffered events to generation now; `None` when it holds none.
    pub async fn flush_stream(&self, req: FlushMemoryStreamRequest) -> Result<Option<JobRecord>> {
        if self.generator().is_none() {
            return Err(GenerateError::NotConfigured.into());
        }
        let stream = stream(&req.app_name, &req.user_id, &req.stream_id)?;
        let job = self
            .store()
            .flush_stream(stream, job_for(stream), None)
            .await?;
        if let Some(job) = &job {
            triggered(self, job, Reason::Flush);
        }
        Ok(job)
    }

    /// The user's streams holding buffered events, by stream id. Needs no generator: what a
    /// server without one keeps buffered is still the user's.
    pub async fn list_streams(&self, req: ListMemoryStreamsRequest) -> Result<Vec<Buffered>> {
        let scope = Scope {
            app_name: identifier("app_name", &req.app_name)?,
            user_id: identifier("user_id", &req.user_id)?,
        };
        Ok(self.store().scope_streams(scope).await?)
    }

    /// Hands over every buffered stream whose quiet time has passed; returns when the next
    /// one's will, if any.
    async fn hand_over_quiet(&self) -> Result<Option<i64>> {
        let now = now_ms();
        let mut next: Option<i64> = None;
        for buffered in self.store().buffered_streams().await? {
            let quiet = self.triggers().quiet(&buffered.app_name);
            let quiet = i64::try_from(quiet.as_millis()).unwrap_or(i64::MAX);
            let due = buffered.last_ms.saturating_add(quiet);
            if due > now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            let stream = StreamKey {
                scope: Scope {
                    app_name: &buffered.app_name,
                    user_id: &buffered.user_id,
                },
                stream_id: &buffered.stream_id,
            };
            let since = now.saturating_sub(quiet);
            if let Some(job) = self
                .store()
                .flush_stream(stream, job_for(stream), Some(since))
                .await?
            {
                triggered(self, &job, Reason::Quiet);
            }
        }
        Ok(next)
    }
}

/// The quiet timers: hands over each buffered stream once its app's quiet time has passed
/// since its last append, until `stopping` fires. Started with the generation workers; the
/// streams a stopped process left buffered are read from the store at the first pass.
pub async fn watch<S: MemoryStore>(memories: &Memories<S>, stopping: &Stopping) {
    loop {
        let wait = match memories.hand_over_quiet().await {
            Ok(Some(due)) => {
                let ms = u64::try_from(due.saturating_sub(now_ms())).unwrap_or(0);
                Duration::from_millis(ms).min(POLL)
            }
            Ok(None) => POLL,
            Err(e) => {
                tracing::warn!(error = %e, "cannot hand quiet streams to generation");
                POLL
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = memories.appended() => {}
            _ = stopping.wait() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_an_apps_own_wins() {
        let events = ["30", "travel=5", "shop=7", "travel=3"].map(|s| s.parse().unwrap());
        let quiet = ["2m", "travel=500ms"].map(|s| s.parse().unwrap());
        let triggers = Triggers::new(events.to_vec(), quiet.to_vec());
        assert_eq!(triggers.events("travel"), 3);
        assert_eq!(triggers.events("other"), 30);
        assert_eq!(triggers.quiet("travel"), Duration::from_millis(500));
        assert_eq!(triggers.quiet("shop"), Duration::from_secs(120));
        let only_travel = Triggers::new(vec![events[1].clone()], vec![]);
        assert_eq!(only_travel.events("shop"), DEFAULT_TRIGGER_EVENTS as usize);
        assert_eq!(only_travel.quiet("shop"), DEFAULT_QUIET);
        for (bad, says) in [
            ("0", "1 to 1000"),
            ("1001", "1 to 1000"),
            ("=5", "the app is empty"),
            ("travel=many", "1 to 1000"),
        ] {
            let err = bad.parse::<PerApp<TriggerEvents>>().unwrap_err();
            assert!(err.contains(says) && err.contains(bad), "{bad}: {err}");
        }
        for bad in ["0s", "soon", "travel="] {
            let err = bad.parse::<PerApp<Quiet>>().unwrap_err();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        let shown: PerApp<Quiet> = "travel=90s".parse().unwrap();
        assert_eq!(shown.to_string(), "travel=1m 30s");
    }
}
