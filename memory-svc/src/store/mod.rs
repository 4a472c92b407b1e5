//! Storage of memory entries and their search index.
//!
//! [`MemoryStore`] is what the domain talks to. [`embedded::EmbeddedMemoryStore`] is the embedded
//! implementation (one process); [`pg::PgMemoryStore`] keeps memories in PostgreSQL, shared by
//! any number of replicas. What both must do alike is written once: [`plan`] decides every
//! write (the ingestion rules), [`index`] computes terms and scores (so both rank alike) and
//! [`token`] is the list page token, [`vectors`] decides what happens to entry embeddings and
//! ranks them; a backend only loads, applies and searches. The [`contract`] tests run on both.
//! Everything lives in one (app, user) [`Scope`]: no call reads or changes another user's
//! memory. Every method that writes is atomic, and durable when it returns.

#[cfg(test)]
mod contract;
pub mod embedded;
pub mod generation;
pub mod index;
mod maxscore;
pub mod metadata;
pub mod pg;
mod plan;
pub mod streams;
mod token;
pub mod vector_cache;
pub mod vectors;

use std::{collections::HashSet, future::Future};

use adk_common::{page::PageTokenError, storage::StorageError};
use adk_proto::session::v1::Content;
pub use generation::{Expired, FactRecord, JobRecord, Revision, RevisionRecord};

pub use plan::Write;
pub use streams::{Appended, Buffered, StreamKey};
pub use vectors::{Unembedded, Vectors};

use crate::{
    analysis::{Analyzer, Language},
    embed::Identity,
    filter::Filter,
    validity::{ValidAt, Validity},
};
use prost_types::Timestamp;

/// Whose memory a call is about. Fields are validated before they reach the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    pub app_name: &'a str,
    pub user_id: &'a str,
}

/// One remembered piece of content.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entry {
    /// The event id for ingested events; assigned by the caller for direct writes.
    pub id: String,
    /// The session the entry came from; empty for none.
    pub session_id: String,
    pub author: String,
    pub timestamp: Option<Timestamp>,
    /// JSON object text; empty for none. Stored and returned as written: nothing in it means
    /// anything to the service.
    pub custom_metadata: String,
    pub content: Content,
    /// Raw, or generated, and when it expires. Set by the service only: every entry a client
    /// writes is raw (and expires with a `--memory-ttl` lifetime).
    pub kind: Kind,
    /// When what it says was true.
    pub validity: Validity,
}

/// What an entry is: a raw memory (an event, a direct write) or one the generator wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kind {
    pub generated: bool,
    /// When the memory expires, ms since the epoch; `None`: it does not.
    pub expire_ms: Option<i64>,
}

impl Kind {
    /// A generated memory expiring at `expire_ms`, if ever.
    pub fn generated(expire_ms: Option<i64>) -> Self {
        Self {
            generated: true,
            expire_ms,
        }
    }
}

/// A search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub entry: Entry,
    /// BM25 relevance; higher is better.
    pub score: f64,
}

/// A ranked keyword search.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub text: String,
    /// The most hits to return.
    pub limit: usize,
    /// Only entries with `timestamp >= after`.
    pub after: Option<Timestamp>,
    /// Only entries with `timestamp < before`.
    pub before: Option<Timestamp>,
    /// Only entries by this author.
    pub author: Option<String>,
    /// The query's language, instead of the detected one.
    pub language: Option<Language>,
    /// Only entries of this kind (`None`: both).
    pub generated: Option<bool>,
    /// The time (ms since the epoch) generated memories expire against; 0: none expire.
    pub now_ms: i64,
    /// Only entries whose metadata passes this filter.
    pub filter: Filter,
    /// Only entries valid then.
    pub valid_at: ValidAt,
}

impl SearchQuery {
    /// Whether the query filters by author, time, kind, metadata or validity at a given time: a
    /// search must then check each candidate entry. (Expiry and validity now are not counted:
    /// few entries expire or become valid later, so a search checks its results for those
    /// instead, and only if it finds one, every candidate; superseded entries are left out
    /// before ranking, see [`SearchQuery::hidden`].)
    pub fn filters(&self) -> bool {
        self.author.is_some()
            || self.after.is_some()
            || self.before.is_some()
            || self.generated.is_some()
            || !self.filter.is_empty()
            || self.valid_at.as_of
    }

    /// Of the scope's entries whose validity is closed (`closed`: seq and `invalid_at`), the
    /// seqs the query leaves out whatever else they hold: ranked, lists and the vectors'
    /// rankings skip them unread.
    pub fn hidden(&self, closed: impl IntoIterator<Item = (u64, Timestamp)>) -> HashSet<u64> {
        closed
            .into_iter()
            .filter(|(_, until)| self.valid_at.hides_closed(until))
            .map(|(seq, _)| seq)
            .collect()
    }

    /// Whether `entry` passes the author and time filters. An entry without a timestamp fails
    /// every time filter, since nothing is known about when it happened.
    /// Generated memories are filtered by kind and expiry here too.
    pub fn admits(&self, entry: &Entry) -> bool {
        let time = entry.timestamp.as_ref().map(|t| (t.seconds, t.nanos));
        let bound = |t: &Timestamp| (t.seconds, t.nanos);
        let kind = entry.kind;
        self.generated.is_none_or(|g| g == kind.generated)
            && (self.now_ms == 0 || kind.expire_ms.is_none_or(|at| at > self.now_ms))
            && self.author.as_ref().is_none_or(|a| *a == entry.author)
            && self.after.as_ref().is_none_or(|a| time >= Some(bound(a)))
            && self
                .before
                .as_ref()
                .is_none_or(|b| time.is_some_and(|t| t < bound(b)))
            && self.valid_at.admits(&entry.validity)
            && self.filter.admits(&entry.custom_metadata)
    }

    /// The results of a search ranked without checking the filters (postings alone ranked,
    /// entries read for the results only, lazily: `None` for an entry no longer stored), if
    /// they stand: every one still stored and admitted (a generated memory past its expiry is
    /// not). `None`: the search is to be done again checking every candidate. Both stores
    /// search this way when the query [`filters`](Self::filters) nothing.
    pub fn unfiltered(
        &self,
        results: impl IntoIterator<Item = Result<Option<Hit>>>,
    ) -> Result<Option<Vec<Hit>>> {
        let mut hits = Vec::new();
        for hit in results {
            match hit? {
                Some(hit) if self.admits(&hit.entry) => hits.push(hit),
                _ => return Ok(None),
            }
        }
        Ok(Some(hits))
    }
}

/// A purge asked to delete (see [`crate::purge`]), kept until it has run to its end.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PurgeRecord {
    #[prost(string, tag = "1")]
    pub id: String,
    /// The request as it was given (an encoded `PurgeMemoriesRequest`).
    #[prost(bytes = "vec", tag = "2")]
    pub request: Vec<u8>,
    /// When it was asked for, ms since the epoch.
    #[prost(int64, tag = "3")]
    pub create_ms: i64,
}

/// What [`MemoryStore::delete`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteTarget {
    /// Every entry of the user with this id, in any session; if there was one, the id is
    /// tombstoned so that ingesting sessions or events does not bring it back (ADK M1.6).
    MemoryId(String),
    /// Every entry that came from this session.
    Session(String),
    /// The user's whole memory, tombstones included.
    All,
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("page_token {0}")]
    InvalidPageToken(#[from] PageTokenError),
    /// The storage failed; its kind says what that means for the caller.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The stored vectors cannot be used with the configured embedding model.
    #[error("{0}")]
    Model(String),
    /// A generation job's write, refused: the job was ended since it was claimed (see
    /// [`JobRecord::ended_by_delete`]).
    #[error("generation job {0} was ended by a delete of all its user's memories")]
    JobEnded(String),
}

adk_common::storage_failures!(StoreError, StoreError::Storage);

impl StoreError {
    /// Stored bytes that cannot be decoded; `what` says which.
    pub fn corrupt(what: impl std::fmt::Display) -> Self {
        Self::Storage(StorageError::corrupt(what))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Where memories live. Entries are kept per (session id, entry id) "bucket" slot: a session
/// holds at most one entry per id, and an entry rewritten in its slot keeps its place in
/// ingestion order (the order of listings and of equal search scores).
pub trait MemoryStore: Send + Sync + 'static {
    /// Applies a write call, atomically and durably (see [`plan`] for what each one changes),
    /// with the vectors of its entries' texts (see [`vectors`]) and, for changes generation
    /// made, their revisions (in order) in the same transaction; returns the count the call
    /// reports.
    fn write_changed(
        &self,
        scope: Scope<'_>,
        write: Write,
        vectors: Vectors,
        revisions: Vec<RevisionRecord>,
    ) -> impl Future<Output = Result<u32>> + Send;

    /// [`MemoryStore::write_changed`] of raw entries.
    fn write_embedded(
        &self,
        scope: Scope<'_>,
        write: Write,
        vectors: Vectors,
    ) -> impl Future<Output = Result<u32>> + Send {
        self.write_changed(scope, write, vectors, Vec::new())
    }

    /// Queues a generation job, durably.
    fn enqueue(&self, job: &JobRecord) -> impl Future<Output = Result<()>> + Send;

    /// Claims the due job named `id`, or with `None` the job due first, if any (see
    /// [`generation`]): its attempt is counted, it is marked running, and it is leased until
    /// `now_ms + lease_ms`.
    fn claim(
        &self,
        id: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> impl Future<Output = Result<Option<JobRecord>>> + Send;

    /// Stores a claimed job's new state (pending again for a retry at its `due_ms`, or
    /// finished), unless another attempt has claimed it since; returns whether it was stored.
    fn finish(&self, job: &JobRecord) -> impl Future<Output = Result<bool>> + Send;

    /// The job `id` of the scope.
    fn job(
        &self,
        scope: Scope<'_>,
        id: &str,
    ) -> impl Future<Output = Result<Option<JobRecord>>> + Send;

    /// One page of the scope's revisions (of `memory_id` only, when given), oldest first, and
    /// the token of the next page (empty after the last one).
    fn revisions(
        &self,
        scope: Scope<'_>,
        memory_id: Option<&str>,
        page_size: usize,
        page_token: &str,
    ) -> impl Future<Output = Result<(Vec<Revision>, String)>> + Send;

    /// The scope's revision numbered `seq`, if it is kept.
    fn revision(
        &self,
        scope: Scope<'_>,
        seq: u64,
    ) -> impl Future<Output = Result<Option<Revision>>> + Send;

    /// Removes up to `n` revisions recorded before `before_ms` that are not the last of their
    /// memory (the last one is always kept); returns how many.
    fn prune_revisions(
        &self,
        before_ms: i64,
        n: usize,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Up to `n` generated memories whose expiry is at or before `now_ms`.
    fn expired(&self, now_ms: i64, n: usize) -> impl Future<Output = Result<Vec<Expired>>> + Send;

    /// Removes up to `n` finished jobs (succeeded or failed) last updated before `before_ms`;
    /// returns how many.
    fn prune_jobs(&self, before_ms: i64, n: usize) -> impl Future<Output = Result<usize>> + Send;

    /// Records a purge, durably.
    fn put_purge(&self, purge: &PurgeRecord) -> impl Future<Output = Result<()>> + Send;

    /// The purges recorded and not removed, oldest first.
    fn purges(&self) -> impl Future<Output = Result<Vec<PurgeRecord>>> + Send;

    /// Removes the record of a purge that has run to its end, durably.
    fn remove_purge(&self, id: &str) -> impl Future<Output = Result<()>> + Send;

    /// The users of `app` whose memory was ever written, in order.
    fn users(&self, app: &str) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Buffers the events (checked, with distinct ids) whose id the stream does not hold yet,
    /// at `now_ms`; when the stream then holds `trigger` events or more, hands them all, in the
    /// order they came, to `job` (queued with them) in the same transaction (see [`streams`]).
    /// Durable when it returns.
    fn append_stream(
        &self,
        stream: StreamKey<'_>,
        events: Vec<adk_proto::session::v1::Event>,
        now_ms: i64,
        trigger: usize,
        job: JobRecord,
    ) -> impl Future<Output = Result<Appended>> + Send;

    /// Hands the stream's buffered events to `job` (queued with them) if it holds any and, with
    /// `quiet_since`, none was buffered after that time; returns the job queued. Durable when
    /// it returns.
    fn flush_stream(
        &self,
        stream: StreamKey<'_>,
        job: JobRecord,
        quiet_since: Option<i64>,
    ) -> impl Future<Output = Result<Option<JobRecord>>> + Send;

    /// The streams holding buffered events.
    fn buffered_streams(&self) -> impl Future<Output = Result<Vec<Buffered>>> + Send;

    /// The scope's streams holding buffered events, by stream id.
    fn scope_streams(&self, scope: Scope<'_>)
        -> impl Future<Output = Result<Vec<Buffered>>> + Send;

    /// [`MemoryStore::write_embedded`] without vectors. The calls below are this with their
    /// [`Write`].
    fn write(&self, scope: Scope<'_>, write: Write) -> impl Future<Output = Result<u32>> + Send {
        self.write_embedded(scope, write, Vectors::default())
    }

    /// Makes `entries` the session's whole memory (ADK M1.2): entries no longer present are
    /// removed, tombstoned ids are skipped, and of several entries with one id the first is
    /// kept. Returns the number of entries the session now holds.
    fn replace_session(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> impl Future<Output = Result<u32>> + Send {
        let session_id = session_id.to_owned();
        self.write(
            scope,
            Write::Replace {
                session_id,
                entries,
            },
        )
    }

    /// Appends the entries whose id is neither in the session (`""`: no session) nor
    /// tombstoned; the first copy of an id wins (ADK M1.3). Returns the number added.
    fn add_events(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> impl Future<Output = Result<u32>> + Send {
        let session_id = session_id.to_owned();
        self.write(
            scope,
            Write::AddEvents {
                session_id,
                entries,
            },
        )
    }

    /// Direct writes, each into the slot of its own `session_id` and `id`: an entry already
    /// there is replaced, and of several entries with one id the last wins. An explicit write
    /// lifts a tombstone of its id.
    fn add_memories(
        &self,
        scope: Scope<'_>,
        entries: Vec<Entry>,
    ) -> impl Future<Output = Result<()>> + Send {
        let write = self.write(scope, Write::AddMemories(entries));
        async move { write.await.map(|_| ()) }
    }

    /// Entries matching any query term, best BM25 score first, equal scores in ingestion
    /// order, filtered by [`SearchQuery::admits`], at most `limit`.
    fn search(
        &self,
        scope: Scope<'_>,
        query: &SearchQuery,
    ) -> impl Future<Output = Result<Vec<Hit>>> + Send;

    /// The analysis this store indexes text with.
    fn analyzer(&self) -> &Analyzer;

    /// For each of `terms`, whether some entry of the scope is indexed under it.
    fn indexed(
        &self,
        scope: Scope<'_>,
        terms: &[String],
    ) -> impl Future<Output = Result<Vec<bool>>> + Send;

    /// The entries whose vectors are nearest to `vector` (a unit vector of the configured
    /// model), most similar first (score: the cosine similarity), equal scores in ingestion
    /// order, filtered by [`SearchQuery::admits`], at most `limit`. Entries without a vector
    /// are not found.
    fn nearest(
        &self,
        scope: Scope<'_>,
        vector: &[f32],
        query: &SearchQuery,
    ) -> impl Future<Output = Result<Vec<Hit>>> + Send;

    /// Records `model` as the model of the stored vectors. If they were made by another model
    /// they are all removed (see [`vectors::check_model`]); a model answering another
    /// dimension under the same identity is a [`StoreError::Model`].
    fn use_model(&self, model: &Identity) -> impl Future<Output = Result<()>> + Send;

    /// Up to `n` entries with text but without a vector, in (app, user, seq) order, from the
    /// one after `after` on.
    fn unembedded(
        &self,
        after: Option<&Unembedded>,
        n: usize,
    ) -> impl Future<Output = Result<Vec<Unembedded>>> + Send;

    /// Stores each vector for its entry if the entry still has the text it was computed from;
    /// returns how many were stored.
    fn put_vectors(
        &self,
        vectors: Vec<(Unembedded, Vec<f32>)>,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Removes what `target` names and returns the number of entries removed.
    fn delete(
        &self,
        scope: Scope<'_>,
        target: &DeleteTarget,
    ) -> impl Future<Output = Result<u32>> + Send {
        self.write(scope, Write::Delete(target.clone()))
    }

    /// One page of the user's entries in ingestion order, and the token of the next page
    /// (empty after the last one). With a `filter` the index narrows (see [`metadata`]), only
    /// its candidates are read: a superset of the entries it admits, which the caller tests.
    fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
        filter: &Filter,
    ) -> impl Future<Output = Result<(Vec<Entry>, String)>> + Send;
}
