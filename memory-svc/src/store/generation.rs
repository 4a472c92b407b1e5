//! What memory generation keeps in the store beside the entries, the same in both backends:
//! the durable job queue ([`JobRecord`]) and the revisions of generated memories
//! ([`RevisionRecord`]). A generated memory's kind and expiry are fields of its entry
//! ([`super::Kind`]); each backend also indexes the expiries, for the sweep ([`Expired`]).
//!
//! # The queue
//! A job is due when its state is pending or running and its `due_ms` has come. Claiming a job
//! counts an attempt, marks it running and moves `due_ms` a lease ahead: a worker that dies
//! (SIGKILL, a lost replica) leaves the job to be claimed again once the lease has run out,
//! and no other worker claims it before. Finishing checks the attempt is still the stored one,
//! so a worker whose lease was taken over cannot overwrite the newer attempt's result.
//! A finished job is kept for the retention (`--generator-job-retention-secs`) after its last
//! update, then pruned.

use adk_proto::session::v1::Event;

/// A generation job as stored (the sled value; PostgreSQL keeps the fields it queries by in
/// columns beside it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct JobRecord {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub app_name: String,
    #[prost(string, tag = "3")]
    pub user_id: String,
    /// An `adk.memory.v1.GenerationState`.
    #[prost(int32, tag = "4")]
    pub state: i32,
    #[prost(uint32, tag = "5")]
    pub attempts: u32,
    #[prost(string, tag = "6")]
    pub error: String,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "7")]
    pub create_ms: i64,
    #[prost(int64, tag = "8")]
    pub update_ms: i64,
    /// When the job is next due: its queueing, its retry, or the end of its lease.
    #[prost(int64, tag = "9")]
    pub due_ms: i64,
    /// The new events to extract facts from.
    #[prost(message, repeated, tag = "10")]
    pub events: Vec<Event>,
    /// The session they came from, if any.
    #[prost(string, tag = "11")]
    pub session_id: String,
    #[prost(bool, tag = "12")]
    pub disable_consolidation: bool,
    /// 0: the memories do not expire.
    #[prost(int64, tag = "13")]
    pub ttl_ms: i64,
    /// Empty: every topic of the app.
    #[prost(string, repeated, tag = "14")]
    pub allowed_topics: Vec<String>,
    #[prost(uint32, tag = "15")]
    pub added: u32,
    #[prost(uint32, tag = "16")]
    pub updated: u32,
    #[prost(uint32, tag = "17")]
    pub deleted: u32,
    #[prost(uint32, tag = "18")]
    pub kept: u32,
    /// Memories a new fact superseded (their validity closed).
    #[prost(uint32, tag = "21")]
    pub invalidated: u32,
    /// Facts the caller already extracted: consolidated as they are, and `events` is empty.
    #[prost(message, repeated, tag = "19")]
    pub facts: Vec<FactRecord>,
    /// The event stream whose buffered events the job took, if any (see `store::streams`).
    #[prost(string, tag = "20")]
    pub stream_id: String,
}

/// A fact a caller gave a job (`GenerateMemories` with facts), as stored with the job.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FactRecord {
    #[prost(string, tag = "1")]
    pub text: String,
    /// A topic label of the app; empty: none.
    #[prost(string, tag = "2")]
    pub topic: String,
    /// JSON object text; empty: none.
    #[prost(string, tag = "3")]
    pub custom_metadata: String,
    /// When the fact became true; none: the time of the generation.
    #[prost(message, optional, tag = "4")]
    pub valid_from: Option<prost_types::Timestamp>,
}

/// Why a job a delete of all its user's memories ended failed.
pub const DELETED: &str = "the user's memories were deleted (DeleteMemory with all)";

impl JobRecord {
    /// The job, ended by a delete of all its user's memories: failed, and without the events
    /// and facts it would have generated from, which are the user's too. A job running then
    /// writes nothing more (the stores refuse its writes, see [`job_of`]).
    pub fn ended_by_delete(mut self) -> Self {
        use adk_proto::memory::v1::GenerationState;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.state = GenerationState::Failed as i32;
        self.error = DELETED.to_owned();
        self.events.clear();
        self.facts.clear();
        self.update_ms = now_ms;
        self.due_ms = now_ms;
        self
    }

    /// Whether the job waits to be claimed (queued, retrying, or leased).
    pub fn is_open(&self) -> bool {
        use adk_proto::memory::v1::GenerationState;
        matches!(
            GenerationState::try_from(self.state),
            Ok(GenerationState::Pending | GenerationState::Running)
        )
    }
}

/// One change generation (or a rollback) made to a memory, as stored.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RevisionRecord {
    #[prost(string, tag = "1")]
    pub memory_id: String,
    /// An `adk.memory.v1.RevisionAction`.
    #[prost(int32, tag = "2")]
    pub action: i32,
    #[prost(string, tag = "3")]
    pub previous_fact: String,
    #[prost(string, tag = "4")]
    pub new_fact: String,
    #[prost(string, repeated, tag = "5")]
    pub source_event_ids: Vec<String>,
    #[prost(int64, tag = "6")]
    pub create_ms: i64,
    /// Empty for a rollback.
    #[prost(string, tag = "7")]
    pub job_id: String,
    /// The topic of the fact; empty for none (and in revisions stored before topics were).
    #[prost(string, tag = "8")]
    pub topic: String,
    /// When the change made the memory expire, ms since the epoch; 0: never.
    #[prost(int64, tag = "9")]
    pub expire_ms: i64,
    /// For a rollback: the revision it restored.
    #[prost(uint64, optional, tag = "10")]
    pub restored: Option<u64>,
    /// The memory's `valid_from` after the change (none for a deletion, and in revisions
    /// recorded before memories had a validity).
    #[prost(message, optional, tag = "11")]
    pub valid_from: Option<prost_types::Timestamp>,
    /// For an invalidation: when the memory stopped being valid.
    #[prost(message, optional, tag = "12")]
    pub invalid_at: Option<prost_types::Timestamp>,
    /// For an invalidation: the memory holding the fact that superseded it.
    #[prost(string, tag = "13")]
    pub superseded_by: String,
}

/// A revision as read from the store, with its number: unique in the store, increasing in the
/// order revisions were recorded (its id in `MemoryRevision.revision_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub seq: u64,
    pub record: RevisionRecord,
}

/// A generated memory whose time has come, as the expiry sweep finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub app_name: String,
    pub user_id: String,
    pub memory_id: String,
}

/// The kind of an entry stored before entries carried one (sled format 3, PostgreSQL schema
/// 5), decided from the service's own records only, never from the entry's metadata (which a
/// client may have written): the entry is a generated memory when it is in no session and the
/// last revision the generator recorded for its id (`last`) added or updated it to exactly its
/// text. It then expires when the generator recorded it would (`expire_ms`).
pub fn converted_kind(
    entry: &super::Entry,
    last: Option<&RevisionRecord>,
    expire_ms: Option<i64>,
) -> super::Kind {
    use adk_proto::memory::v1::RevisionAction;
    let generated = entry.session_id.is_empty()
        && last.is_some_and(|r| {
            matches!(
                RevisionAction::try_from(r.action),
                Ok(RevisionAction::Added | RevisionAction::Updated)
            ) && r.new_fact == super::index::text_of(&entry.content)
        });
    if generated {
        super::Kind::generated(expire_ms)
    } else {
        super::Kind::default()
    }
}

/// The generation job a write's revisions come from, if any: its writes are made only while
/// the job is open, so that a delete of all the user's memories that ended it stays whole.
pub fn job_of(revisions: &[RevisionRecord]) -> Option<&str> {
    revisions
        .iter()
        .map(|r| r.job_id.as_str())
        .find(|id| !id.is_empty())
}
