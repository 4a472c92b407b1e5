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

pub mod triggers;

use std::time::Duration;

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

/// The longest the quiet timers sleep without looking at the store again: a stream another
/// replica appended to has a timer here too.
const POLL: Duration = Duration::from_secs(1);

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
