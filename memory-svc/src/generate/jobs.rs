//! A generation job from the queue to its writes, and the workers that run queued jobs.
//!
//! A job reads only its own events: the model sees the new turns, then the new facts beside
//! the few generated memories the store's search finds for each (keyword, or hybrid with an
//! embedder); nothing else of the user's memory is sent. Every change is one store transaction
//! that also records its revisions, made only after both answers passed their checks, so a
//! malformed answer writes nothing. A memory a new fact contradicts is not deleted: it is kept
//! as history, its validity closed when the new fact became true (see [`crate::validity`]),
//! in the transaction that adds the new fact.
//!
//! A transient failure (the model or the store unavailable) puts the job back in the queue
//! with a doubling backoff, until its attempts are used up; any other failure ends it.

use std::{
    collections::HashMap,
    future::Future,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use adk_common::stopping::Stopping;
use adk_common::storage::StorageErrorKind;
use adk_proto::{
    memory::v1::{GenerationState, RevisionAction},
    session::v1::{part, Content, Event, Part},
};
use metrics::counter;
use prost_types::Timestamp;
use serde_json::json;

use super::{
    model::{Candidate, Decision, Fact, Turn},
    GenerateError, Generator,
};
use crate::{
    embed::EmbedError,
    endpoint::backoff,
    error::MemoryError,
    filter::{metadata_object, Filter, TOPIC_KEY},
    lifetimes::{Action, Lifetimes},
    store::{
        index::text_of, DeleteTarget, Entry, Hit, JobRecord, Kind, MemoryStore, RevisionRecord,
        Scope, SearchQuery, StoreError, Write,
    },
    validity::{ValidAt, Validity},
};

/// Generated memories the search offers per fact, and in all, as consolidation candidates.
const CANDIDATES_PER_FACT: usize = 3;
const MAX_CANDIDATES: usize = 20;

/// Expired memories removed per sweep, and finished jobs past the retention pruned per poll.
const SWEEP: usize = 100;

/// How often, at most, revisions past `--revision-retention` are looked for.
const REVISION_PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The author of generated memories.
pub const AUTHOR: &str = "memory";

/// What a job needs of the memory service: its store (the job queue, expiries), a search of
/// the user's memory with a query already checked, and the writes a job makes (with their
/// vectors when there is an embedding model).
pub trait MemoryAccess: Sync {
    type Store: MemoryStore;

    /// The store.
    fn store(&self) -> &Self::Store;

    /// The default lifetimes of memories (`--memory-ttl`).
    fn lifetimes(&self) -> &Lifetimes;

    /// The best hits for `query`, ranked as searches without a mode are (hybrid with an
    /// embedding model, else by keyword).
    fn search(
        &self,
        scope: Scope<'_>,
        query: SearchQuery,
    ) -> impl Future<Output = Result<Vec<Hit>, MemoryError>> + Send;

    /// Writes `write` with the revisions of the changes it makes, if it makes any.
    fn write(
        &self,
        scope: Scope<'_>,
        write: Write,
        revisions: Vec<RevisionRecord>,
    ) -> impl Future<Output = Result<u32, MemoryError>> + Send;

    /// Resolves once a job has been queued since the last call.
    fn queued(&self) -> impl Future<Output = ()> + Send;
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A time in ms since the epoch as a protobuf timestamp.
pub fn timestamp_of(ms: i64) -> Timestamp {
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The turns of `events` the model reads: each event's text (thoughts left out).
pub fn turns(events: &[Event]) -> Vec<Turn> {
    events
        .iter()
        .filter_map(|event| {
            let text: Vec<&str> = event
                .content
                .iter()
                .flat_map(|c| &c.parts)
                .filter(|p| p.thought != Some(true))
                .filter_map(|p| match &p.data {
                    Some(part::Data::Text(text)) if !text.trim().is_empty() => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (!text.is_empty()).then(|| Turn {
                event_id: event.id.clone(),
                author: event.author.clone(),
                text: text.join("\n"),
                time: event.timestamp,
            })
        })
        .collect()
}

/// What a job did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub added: u32,
    pub updated: u32,
    pub kept: u32,
    pub invalidated: u32,
}

/// Whether a job failing with `e` may succeed on another attempt.
fn is_transient(e: &MemoryError) -> bool {
    match e {
        MemoryError::Generate(GenerateError::Unavailable { .. })
        | MemoryError::Embed(EmbedError::Unavailable { .. })
        | MemoryError::SessionServiceUnavailable { .. } => true,
        MemoryError::Store(StoreError::Storage(e)) => matches!(
            e.kind(),
            StorageErrorKind::Unavailable | StorageErrorKind::Conflict
        ),
        _ => false,
    }
}

/// Runs a claimed job and stores its outcome: succeeded, pending for a retry, or failed.
/// Returns the job as stored and, unless it succeeded, why.
pub async fn execute<M: MemoryAccess>(
    memories: &M,
    generator: &Generator,
    mut job: JobRecord,
) -> (JobRecord, Option<MemoryError>) {
    let outcome = run(memories, generator, &job).await;
    let now = now_ms();
    job.update_ms = now;
    let failure = match outcome {
        Ok(counts) => {
            job.state = GenerationState::Succeeded as i32;
            job.error.clear();
            (job.added, job.updated, job.kept, job.invalidated) = (
                counts.added,
                counts.updated,
                counts.kept,
                counts.invalidated,
            );
            counter!("memory_generation_jobs_total", "outcome" => "succeeded").increment(1);
            None
        }
        Err(e) if is_transient(&e) && job.attempts < generator.retry.attempts => {
            job.state = GenerationState::Pending as i32;
            job.due_ms = now.saturating_add(duration_ms(backoff(
                generator.retry.first_backoff,
                job.attempts,
            )));
            job.error = e.to_string();
            tracing::warn!(job = %job.id, attempt = job.attempts, error = %e, "generation job will be retried");
            counter!("memory_generation_jobs_total", "outcome" => "retried").increment(1);
            Some(e)
        }
        Err(e) => {
            job.state = GenerationState::Failed as i32;
            job.error = e.to_string();
            tracing::warn!(job = %job.id, attempt = job.attempts, error = %e, "generation job failed");
            counter!("memory_generation_jobs_total", "outcome" => "failed").increment(1);
            Some(e)
        }
    };
    if let Err(e) = memories.store().finish(&job).await {
        // The lease runs out and the job is claimed again.
        tracing::warn!(job = %job.id, error = %e, "cannot store a generation job's outcome");
    }
    (job, failure)
}

/// Extraction, consolidation and the writes of one job.
async fn run<M: MemoryAccess>(
    memories: &M,
    generator: &Generator,
    job: &JobRecord,
) -> Result<Counts, MemoryError> {
    let scope = Scope {
        app_name: &job.app_name,
        user_id: &job.user_id,
    };
    let topics: Vec<_> = generator
        .topics
        .of(&job.app_name)
        .iter()
        .filter(|t| job.allowed_topics.is_empty() || job.allowed_topics.contains(&t.label))
        .cloned()
        .collect();
    let mut counts = Counts::default();
    let facts = if job.facts.is_empty() {
        let turns = turns(&job.events);
        if turns.is_empty() || topics.is_empty() {
            return Ok(counts);
        }
        generator.model.extract(&turns, &topics).await?
    } else {
        given_facts(job)
    };
    if facts.is_empty() {
        return Ok(counts);
    }
    let candidates = if job.disable_consolidation {
        Vec::new()
    } else {
        candidates(memories, job, &facts).await?
    };
    let decisions = if candidates.is_empty() {
        facts
            .iter()
            .map(|f| Decision::Add {
                text: f.text.clone(),
            })
            .collect()
    } else {
        let offered: Vec<Candidate> = candidates.iter().map(candidate).collect();
        generator.model.consolidate(&facts, &offered).await?
    };
    let previous: HashMap<&str, &Entry> = candidates.iter().map(|e| (e.id.as_str(), e)).collect();
    let now = now_ms();
    // The request's TTL, else the app's default for the change.
    let expiry = |action: Action| match job.ttl_ms {
        0 => memories.lifetimes().expiry(&job.app_name, action, now),
        ttl => Some(now.saturating_add(ttl)),
    };
    for (fact, decision) in facts.iter().zip(decisions) {
        let valid_from = valid_from(fact, job, now);
        let revision = |memory_id: &str,
                        action: RevisionAction,
                        previous: &str,
                        new: &str,
                        expire_ms: Option<i64>| RevisionRecord {
            memory_id: memory_id.to_owned(),
            action: action as i32,
            previous_fact: previous.to_owned(),
            new_fact: new.to_owned(),
            source_event_ids: fact.source_event_ids.clone(),
            create_ms: now,
            job_id: job.id.clone(),
            topic: fact.topic.clone(),
            expire_ms: expire_ms.unwrap_or(0),
            restored: None,
            valid_from: Some(valid_from),
            ..Default::default()
        };
        let (entries, revisions) = match decision {
            Decision::Keep => {
                counts.kept += 1;
                continue;
            }
            Decision::Add { text } => {
                counts.added += 1;
                let id = uuid::Uuid::new_v4().to_string();
                let expire_ms = expiry(Action::Generated);
                let entry = entry(&id, &text, fact, job, now, expire_ms, valid_from);
                let revision = revision(&id, RevisionAction::Added, "", &text, expire_ms);
                (vec![entry], vec![revision])
            }
            Decision::Update { memory_id, text } => {
                counts.updated += 1;
                let expire_ms = expiry(Action::Updated);
                let before = previous.get(memory_id.as_str()).copied();
                // A refined fact stays true since the memory's start.
                let since = before.map_or(Some(valid_from), |e| e.validity.from);
                let entry = entry(&memory_id, &text, fact, job, now, expire_ms, valid_from);
                let entry = Entry {
                    validity: Validity::from(since),
                    ..entry
                };
                let before = before.map(|e| text_of(&e.content)).unwrap_or_default();
                let mut revision = revision(
                    &memory_id,
                    RevisionAction::Updated,
                    &before,
                    &text,
                    expire_ms,
                );
                revision.valid_from = since;
                (vec![entry], vec![revision])
            }
            Decision::Supersede { memory_id, text } => {
                // Checked against the candidates: the memory is one of them.
                let Some(old) = previous.get(memory_id.as_str()).copied() else {
                    continue;
                };
                counts.added += 1;
                counts.invalidated += 1;
                let id = uuid::Uuid::new_v4().to_string();
                let expire_ms = expiry(Action::Generated);
                let entry = entry(&id, &text, fact, job, now, expire_ms, valid_from);
                let added = revision(&id, RevisionAction::Added, "", &text, expire_ms);
                let (closed, invalidated) = superseded(old, &id, valid_from, now, job);
                (vec![entry, closed], vec![added, invalidated])
            }
        };
        // One transaction: a superseded memory is closed with the addition of its successor.
        let write = Write::AddMemories(entries);
        memories.write(scope, write, revisions).await?;
    }
    Ok(counts)
}

/// When a fact became true: as the model extracted it (or the caller gave it), else the latest
/// time of the events it comes from, else the time of the job's run (`now`, ms).
fn valid_from(fact: &Fact, job: &JobRecord, now: i64) -> Timestamp {
    let sources = job
        .events
        .iter()
        .filter(|e| fact.source_event_ids.contains(&e.id))
        .filter_map(|e| e.timestamp)
        .max_by_key(|t| (t.seconds, t.nanos));
    fact.valid_from
        .or(sources)
        .unwrap_or_else(|| timestamp_of(now))
}

/// The memory `old`, superseded by the memory `by` whose fact became true at `at`: its
/// validity closed then, and the revision that records it.
fn superseded(
    old: &Entry,
    by: &str,
    at: Timestamp,
    now: i64,
    job: &JobRecord,
) -> (Entry, RevisionRecord) {
    let validity = old.validity.closed_at(at);
    let fact = text_of(&old.content);
    let topic = metadata_object(&old.custom_metadata)
        .and_then(|m| m.get(TOPIC_KEY)?.as_str().map(str::to_owned))
        .unwrap_or_default();
    let revision = RevisionRecord {
        memory_id: old.id.clone(),
        action: RevisionAction::Invalidated as i32,
        previous_fact: fact.clone(),
        new_fact: fact,
        create_ms: now,
        job_id: job.id.clone(),
        topic,
        expire_ms: old.kind.expire_ms.unwrap_or(0),
        valid_from: validity.from,
        invalid_at: validity.until,
        superseded_by: by.to_owned(),
        ..Default::default()
    };
    let closed = Entry {
        validity,
        ..old.clone()
    };
    (closed, revision)
}

/// A memory as consolidation offers it to the model.
fn candidate(entry: &Entry) -> Candidate {
    Candidate {
        memory_id: entry.id.clone(),
        text: text_of(&entry.content),
        valid_from: entry.validity.from,
    }
}

/// The facts a caller gave the job, as extraction would have answered them (from no event).
fn given_facts(job: &JobRecord) -> Vec<Fact> {
    job.facts
        .iter()
        .map(|f| Fact {
            topic: f.topic.clone(),
            text: f.text.clone(),
            source_event_ids: Vec::new(),
            custom_metadata: f.custom_metadata.clone(),
            valid_from: f.valid_from,
        })
        .collect()
}

/// The generated memories valid now that the search finds for the facts, each once.
async fn candidates<M: MemoryAccess>(
    memories: &M,
    job: &JobRecord,
    facts: &[Fact],
) -> Result<Vec<Entry>, MemoryError> {
    let scope = Scope {
        app_name: &job.app_name,
        user_id: &job.user_id,
    };
    let mut found: Vec<Entry> = Vec::new();
    for fact in facts {
        let now = now_ms();
        let query = SearchQuery {
            text: fact.text.clone(),
            language: None,
            limit: CANDIDATES_PER_FACT,
            after: None,
            before: None,
            author: None,
            generated: Some(true),
            now_ms: now,
            filter: Filter::default(),
            valid_at: ValidAt {
                at: Some(timestamp_of(now)),
                ..ValidAt::default()
            },
        };
        let hits = memories.search(scope, query).await?;
        for hit in hits {
            if found.len() < MAX_CANDIDATES && !found.iter().any(|c| c.id == hit.entry.id) {
                found.push(hit.entry);
            }
        }
    }
    Ok(found)
}

/// A generated memory as an ordinary entry: the fact as its text, its kind and expiry in the
/// entry (where only the service sets them). Its metadata repeats them for clients to read
/// (with the topic, source events and job) over the caller's own keys for a given fact, and
/// means nothing to the service.
fn entry(
    id: &str,
    text: &str,
    fact: &Fact,
    job: &JobRecord,
    now: i64,
    expire_ms: Option<i64>,
    valid_from: Timestamp,
) -> Entry {
    // Checked when the job was queued; an extracted fact has none.
    let metadata = serde_json::from_str(&fact.custom_metadata).unwrap_or_default();
    let written = Written {
        topic: &fact.topic,
        source_event_ids: &fact.source_event_ids,
        job_id: &job.id,
        expire_ms,
    };
    generated_entry(id, text, metadata, &written, now, valid_from)
}

/// What generation records of a generated memory in its metadata.
pub struct Written<'a> {
    /// Empty: none.
    pub topic: &'a str,
    pub source_event_ids: &'a [String],
    /// Empty: written by no job (a rollback).
    pub job_id: &'a str,
    pub expire_ms: Option<i64>,
}

/// A generated memory holding `text`, with `written`'s keys over `metadata` (the caller's),
/// valid from `valid_from` on.
pub fn generated_entry(
    id: &str,
    text: &str,
    mut metadata: serde_json::Map<String, serde_json::Value>,
    written: &Written<'_>,
    now: i64,
    valid_from: Timestamp,
) -> Entry {
    metadata.insert("kind".into(), "generated".into());
    if !written.topic.is_empty() {
        metadata.insert("topic".into(), written.topic.into());
    }
    metadata.insert("source_event_ids".into(), json!(written.source_event_ids));
    if !written.job_id.is_empty() {
        metadata.insert("job_id".into(), written.job_id.into());
    }
    let expire_ms = written.expire_ms;
    if let Some(at) = expire_ms {
        metadata.insert("expire_time".into(), timestamp_of(at).to_string().into());
    }
    let metadata = serde_json::Value::Object(metadata);
    Entry {
        id: id.to_owned(),
        session_id: String::new(),
        author: AUTHOR.to_owned(),
        timestamp: Some(timestamp_of(now)),
        custom_metadata: metadata.to_string(),
        content: Content {
            role: Some("user".into()),
            parts: vec![Part {
                data: Some(part::Data::Text(text.to_owned())),
                ..Default::default()
            }],
        },
        kind: Kind::generated(expire_ms),
        validity: Validity::from(Some(valid_from)),
    }
}

/// Removes the memories whose time has come; returns how many.
async fn sweep<M: MemoryAccess>(memories: &M) -> Result<usize, MemoryError> {
    let expired = memories.store().expired(now_ms(), SWEEP).await?;
    for e in &expired {
        let scope = Scope {
            app_name: &e.app_name,
            user_id: &e.user_id,
        };
        let write = Write::Delete(DeleteTarget::MemoryId(e.memory_id.clone()));
        memories.write(scope, write, Vec::new()).await?;
    }
    Ok(expired.len())
}

/// [`sweep`], its outcome logged.
async fn sweep_logged<M: MemoryAccess>(memories: &M) {
    match sweep(memories).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(removed = n, "expired memories removed"),
        Err(e) => tracing::warn!(error = %e, "cannot remove expired memories"),
    }
}

/// Without a generation model (and its workers, which sweep too), memories given a lifetime
/// by `--memory-ttl` still expire: removed every `poll` until `stopping` fires.
pub async fn expire<M: MemoryAccess>(memories: &M, poll: Duration, stopping: &Stopping) {
    loop {
        sweep_logged(memories).await;
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = stopping.wait() => return,
        }
    }
}

/// Removes the revisions older than `--revision-retention` that are not the last of their
/// memory; returns how many.
async fn prune_revisions<M: MemoryAccess>(
    memories: &M,
    retention: Duration,
) -> Result<usize, MemoryError> {
    let before = now_ms().saturating_sub(duration_ms(retention));
    Ok(memories.store().prune_revisions(before, SWEEP).await?)
}

/// Removes the finished jobs whose retention has run out; returns how many.
async fn prune<M: MemoryAccess>(memories: &M, generator: &Generator) -> Result<usize, MemoryError> {
    let before = now_ms().saturating_sub(duration_ms(generator.retry.retention));
    Ok(memories.store().prune_jobs(before, SWEEP).await?)
}

/// One background worker: sweeps expired memories and finished jobs past their retention,
/// runs due jobs one at a time, and between
/// them waits for a new job or the poll interval; returns when `stopping` fires. A job it
/// is running then is handed back to the queue, due at once.
pub async fn work<M: MemoryAccess>(memories: &M, generator: &Generator, stopping: &Stopping) {
    let lease = duration_ms(generator.retry.lease);
    // Revisions are pruned at most this often: finding them reads every revision (on sled).
    let mut revisions_pruned: Option<tokio::time::Instant> = None;
    loop {
        if let Some(retention) = generator.revision_retention {
            let every = retention.clamp(generator.retry.poll, REVISION_PRUNE_EVERY);
            if revisions_pruned.is_none_or(|at| at.elapsed() >= every) {
                revisions_pruned = Some(tokio::time::Instant::now());
                match prune_revisions(memories, retention).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(pruned = n, "memory revisions pruned"),
                    Err(e) => tracing::warn!(error = %e, "cannot prune memory revisions"),
                }
            }
        }
        sweep_logged(memories).await;
        match prune(memories, generator).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(pruned = n, "finished generation jobs pruned"),
            Err(e) => tracing::warn!(error = %e, "cannot prune finished generation jobs"),
        }
        match memories.store().claim(None, now_ms(), lease).await {
            Ok(Some(job)) => {
                let held = job.clone();
                tokio::select! {
                    _ = execute(memories, generator, job) => continue,
                    _ = stopping.wait() => {
                        release(memories, held).await;
                        return;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot claim a generation job"),
        }
        tokio::select! {
            _ = memories.queued() => {}
            _ = tokio::time::sleep(generator.retry.poll) => {}
            _ = stopping.wait() => return,
        }
    }
}

/// Hands a job interrupted by shutdown back to the queue, due at once.
async fn release<M: MemoryAccess>(memories: &M, mut job: JobRecord) {
    job.state = GenerationState::Pending as i32;
    job.due_ms = now_ms();
    if let Err(e) = memories.store().finish(&job).await {
        tracing::warn!(job = %job.id, error = %e, "cannot hand a generation job back");
    }
}
