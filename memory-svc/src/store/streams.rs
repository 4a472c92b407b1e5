//! What event streams keep in the store, the same in both backends (see [`crate::streams`]):
//! per stream, its buffered events in the order they came, and the ids of every event it was
//! given, so that an event sent twice is buffered once.
//!
//! # The handoff
//! A stream's buffered events become a generation job in one transaction: the job is queued
//! with the events, and the stream's buffer emptied, together, so a process killed at any
//! point has either buffered the events (and a later trigger hands them over) or queued the job
//! (which the workers run, or take over once its lease runs out), never both and never
//! neither. An event handed over keeps its id in the stream (without its content) until its
//! job is pruned (`--generator-job-retention-seconds`): an append retried after a lost
//! acknowledgement buffers nothing again.

use adk_proto::session::v1::Event;

use super::{JobRecord, Scope};

/// One stream: a scope and the stream's id in it. Fields are validated before they reach the
/// store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamKey<'a> {
    pub scope: Scope<'a>,
    pub stream_id: &'a str,
}

/// A stream holding buffered events, as the quiet timers read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffered {
    pub app_name: String,
    pub user_id: String,
    pub stream_id: String,
    /// Events waiting for generation.
    pub events: u32,
    /// When the last event was buffered, ms since the epoch.
    pub last_ms: i64,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Appended {
    /// Events buffered by the call (ids the stream held left out).
    pub appended: u32,
    /// Events the stream holds after the call.
    pub buffered: u32,
    /// The job the call queued, when it brought the stream to its trigger count.
    pub job: Option<JobRecord>,
}

/// A sled stream's record (`streams` tree): its buffered events' ids in the order they came.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StreamRecord {
    #[prost(string, repeated, tag = "1")]
    pub buffered: Vec<String>,
    /// When the last event was buffered, ms since the epoch.
    #[prost(int64, tag = "2")]
    pub last_ms: i64,
}

/// An event a sled stream was given (`stream_events` tree): buffered (its event), or handed
/// to a job (its id).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StreamEventRecord {
    #[prost(message, optional, tag = "1")]
    pub event: Option<Event>,
    /// Empty while buffered.
    #[prost(string, tag = "2")]
    pub job_id: String,
}
