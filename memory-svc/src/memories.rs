//! The memory domain: checks each request, applies ADK's memory rules (M1 in docs/rules.md),
//! and calls the store. Requests are the protobuf messages of `adk.memory.v1` (plain data);
//! results are the store's entries. Nothing here knows about gRPC transport.
//!
//! With an embedding model, every write first embeds its entries' texts and hands the vectors
//! to the store with the write, so no entry is stored without its vector; a model that fails
//! fails the write before anything is stored. Searches rank by keyword, by meaning, or both
//! ([`crate::fusion`]), as the request's mode says.
//!
//! With a generation model, generation requests are checked and queued here as jobs, and run
//! by [`crate::generate::jobs`]; searches and listings choose raw entries, generated memories
//! or both, and never return a generated memory past its expiry.
//!
//! Every entry a write brings is given its validity here ([`Validity::given`]: an event's
//! timestamp, an `AddMemory` entry's `valid_from`, else its timestamp, else the time of the
//! write); searches and listings return the memories valid now, or as of a request's `as_of`
//! ([`ValidAt`]).

use adk_common::validate::{
    self, identifier, json_object, json_object_text, page_size, timestamp, InvalidArgument,
};
use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        generate_memories_request, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, DeleteMemoryRequest, ExtractedFact, GenerateMemoriesRequest,
        GenerateOptions, GenerationState, GetGenerationJobRequest, ListMemoriesRequest,
        ListMemoryRevisionsRequest, MemoryKind, RevisionAction, RollbackMemoryRequest,
        SearchMemoryRequest, SearchMode,
    },
    session::v1::{Event, Session},
};

use std::{
    num::NonZeroUsize,
    sync::{Arc, Mutex},
};

use lru::LruCache;
use tokio::sync::Notify;
use unicode_segmentation::UnicodeSegmentation;

use crate::{
    analysis::Language,
    embed::Embedder,
    error::{MemoryError, Result},
    filter::Filter,
    fusion,
    generate::{
        jobs::{self, generated_entry, now_ms, timestamp_of, MemoryAccess, Written},
        model::{MAX_FACTS, MAX_FACT_CHARS},
        GenerateError, Generator,
    },
    lifetimes::{Action, Lifetimes},
    session_source::SessionSource,
    store::{
        index, DeleteTarget, Entry, FactRecord, Hit, JobRecord, Kind, MemoryStore, Revision,
        RevisionRecord, Scope, SearchQuery, Vectors, Write,
    },
    streams::triggers::Triggers,
    validity::{ValidAt, Validity},
};

/// The longest TTL a generation request may ask for: 100 years.
const MAX_TTL_SECONDS: i64 = 100 * 366 * 24 * 3600;

/// Query embeddings kept, so that a repeated question costs no model call.
const QUERY_CACHE: usize = 256;

/// Results per search when the request leaves `limit` at 0.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;

/// Most results a search returns; larger limits are served this many.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// Memory operations over a store.
#[derive(Debug)]
pub struct Memories<S> {
    store: S,
    sessions: SessionSource,
    embedder: Option<Embedder>,
    /// Query text → its embedding, most recently used kept.
    queries: Mutex<LruCache<String, Arc<[f32]>>>,
    /// The `--generator` model, if one is configured.
    generator: Option<Generator>,
    /// Wakes a background worker when a job is queued.
    queued: Notify,
    /// `--memory-ttl`.
    lifetimes: Lifetimes,
    /// `--stream-trigger-events` and `--stream-quiet`.
    triggers: Triggers,
    /// Wakes the quiet timers when a stream buffered events.
    appended: Notify,
}

impl<S: MemoryStore> Memories<S> {
    pub fn new(store: S, sessions: SessionSource) -> Self {
        Self {
            store,
            sessions,
            embedder: None,
            queries: Mutex::new(LruCache::new(
                NonZeroUsize::new(QUERY_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
            generator: None,
            queued: Notify::new(),
            lifetimes: Lifetimes::default(),
            triggers: Triggers::default(),
            appended: Notify::new(),
        }
    }

    /// The same, with the `--stream-trigger-events` and `--stream-quiet` settings.
    pub fn with_triggers(self, triggers: Triggers) -> Self {
        Self { triggers, ..self }
    }

    /// When streams are handed to generation.
    pub fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    /// Wakes a background worker: a job was queued.
    pub(crate) fn job_queued(&self) {
        self.queued.notify_one();
    }

    /// Wakes the quiet timers: a stream buffered events.
    pub(crate) fn stream_appended(&self) {
        self.appended.notify_one();
    }

    /// Resolves once a stream has buffered events since the last call.
    pub(crate) async fn appended(&self) {
        self.appended.notified().await
    }

    /// The same, with the `--memory-ttl` lifetimes.
    pub fn with_lifetimes(self, lifetimes: Lifetimes) -> Self {
        Self { lifetimes, ..self }
    }

    /// The `--memory-ttl` lifetimes.
    pub fn lifetimes(&self) -> &Lifetimes {
        &self.lifetimes
    }

    /// The same, with the `--generator` model.
    pub fn with_generator(self, generator: Option<Generator>) -> Self {
        Self { generator, ..self }
    }

    /// The `--generator` model, if one is configured.
    pub fn generator(&self) -> Option<&Generator> {
        self.generator.as_ref()
    }

    /// The same, with the `--embedder` model.
    pub fn with_embedder(self, embedder: Option<Embedder>) -> Self {
        Self { embedder, ..self }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Writes `write` with the vectors of its entries' texts when there is a model: computed
    /// first, so a model failure stores nothing.
    async fn write(&self, scope: Scope<'_>, write: Write) -> Result<u32> {
        self.write_changed(scope, write, Vec::new()).await
    }

    /// [`Memories::write`] with the revisions of the changes generation made.
    async fn write_changed(
        &self,
        scope: Scope<'_>,
        write: Write,
        revisions: Vec<RevisionRecord>,
    ) -> Result<u32> {
        let vectors = match (&self.embedder, &write) {
            (
                Some(embedder),
                Write::Replace { entries, .. }
                | Write::AddEvents { entries, .. }
                | Write::AddMemories(entries),
            ) => {
                let texts = Vectors::texts_of(entries);
                let vectors = embedder.embed(texts.clone()).await?;
                Vectors::new(texts, vectors)
            }
            _ => Vectors::default(),
        };
        Ok(self
            .store
            .write_changed(scope, write, vectors, revisions)
            .await?)
    }

    /// The query's text as the model reads it: without the words that name the author of an
    /// entry of the user's memory ("Why was Daniel recovering at home?" → "Why was recovering
    /// at home?"). A turn says "I", not its speaker's name, so a name in a question only pulls
    /// the query's vector towards the few entries that happen to mention that name; the keyword
    /// ranking matches names, through the author field. Only words written as names
    /// (capitalised) count, so that "Who is my coach?" keeps its word when an agent is called
    /// "coach"; a query of nothing but names is read whole.
    async fn semantic_text(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<String> {
        let text = &query.text;
        let words = self
            .store
            .analyzer()
            .capitalised_words(text, query.language);
        if words.is_empty() {
            return Ok(text.clone());
        }
        let names: Vec<String> = words.iter().map(|(_, t)| index::name_term(t)).collect();
        let named = self.store.indexed(scope, &names).await?;
        let mut rest = String::with_capacity(text.len());
        let mut from = 0;
        for ((range, _), _) in words.iter().zip(named).filter(|(_, named)| *named) {
            rest.push_str(&text[from..range.start]);
            // The name and the spaces after it, when it starts the text or follows a space.
            let after = &text[range.end..];
            from = if rest.is_empty() || rest.ends_with(char::is_whitespace) {
                text.len() - after.trim_start().len()
            } else {
                range.end
            };
        }
        rest.push_str(&text[from..]);
        Ok(if rest.unicode_words().next().is_some() {
            rest
        } else {
            text.clone()
        })
    }

    /// The embedding of a query's [`Memories::semantic_text`].
    async fn query_vector(
        &self,
        embedder: &Embedder,
        scope: Scope<'_>,
        query: &SearchQuery,
    ) -> Result<Arc<[f32]>> {
        let text = self.semantic_text(scope, query).await?;
        self.embedding(embedder, &text).await
    }

    /// The embedding of a query text, from the cache when it was asked recently.
    async fn embedding(&self, embedder: &Embedder, text: &str) -> Result<Arc<[f32]>> {
        let cached = self
            .queries
            .lock()
            .map_err(|_| MemoryError::Poisoned)?
            .get(text)
            .cloned();
        if let Some(vector) = cached {
            return Ok(vector);
        }
        let vector: Arc<[f32]> = embedder
            .embed(vec![text.to_owned()])
            .await?
            .pop()
            .ok_or_else(|| crate::embed::EmbedError::Inference("no vector for the query".into()))?
            .into();
        self.queries
            .lock()
            .map_err(|_| MemoryError::Poisoned)?
            .put(text.to_owned(), vector.clone());
        Ok(vector)
    }

    /// The `--embedder` model, if one is configured.
    pub fn embedder(&self) -> Option<&Embedder> {
        self.embedder.as_ref()
    }

    /// M1.2: the session's events with content replace its entries. A `SessionRef` is resolved
    /// through session-svc.
    /// With `generate` options, memories are then generated from the session's events, and the
    /// job is returned too.
    pub async fn add_session(
        &self,
        req: AddSessionToMemoryRequest,
    ) -> Result<(u32, Option<JobRecord>)> {
        if req.generate.is_some() && self.generator.is_none() {
            return Err(GenerateError::NotConfigured.into());
        }
        let session = match req.source {
            Some(Source::Session(session)) => session,
            Some(Source::SessionRef(r)) => {
                let (app, user, id) = (&r.app_name, &r.user_id, r.session_id.trim());
                identifier("session_ref.app_name", app)?;
                identifier("session_ref.user_id", user)?;
                identifier("session_ref.session_id", id)?;
                self.sessions.get(app, user, id).await?
            }
            None => return Err(InvalidArgument::new("source", "is required").into()),
        };
        let Session {
            id,
            app_name,
            user_id,
            events,
            ..
        } = session;
        let scope = scope("session.app_name", &app_name, "session.user_id", &user_id)?;
        identifier("session.id", &id)?;
        let entries = entries_from_events("session.events", events.clone(), &id, "")?;
        let write = Write::Replace {
            session_id: id.clone(),
            entries,
        };
        let count = self.write(scope, write).await?;
        let job = match req.generate {
            Some(options) => Some(
                self.enqueue(
                    scope,
                    JobSource::events(&id, "session.events", events)?,
                    options,
                    "generate",
                )
                .await?,
            ),
            None => None,
        };
        Ok((count, job))
    }

    /// Queues a generation job (and runs it before answering when asked to wait).
    pub async fn generate(&self, req: GenerateMemoriesRequest) -> Result<JobRecord> {
        use generate_memories_request::Source as From;
        let generator = self
            .generator
            .as_ref()
            .ok_or(GenerateError::NotConfigured)?;
        let (app, user) = (req.app_name.as_str(), req.user_id.as_str());
        let scope = scope("app_name", app, "user_id", user)?;
        let source = match req.source {
            Some(From::Session(session)) => {
                if session.app_name != app || session.user_id != user {
                    return Err(InvalidArgument::new(
                        "session",
                        "must belong to the request's app_name and user_id",
                    )
                    .into());
                }
                identifier("session.id", &session.id)?;
                JobSource::events(&session.id, "session.events", session.events)?
            }
            Some(From::SessionRef(r)) => {
                if r.app_name != app || r.user_id != user {
                    return Err(InvalidArgument::new(
                        "session_ref",
                        "must name the request's app_name and user_id",
                    )
                    .into());
                }
                let id = identifier("session_ref.session_id", r.session_id.trim())?;
                let session = self.sessions.get(app, user, id).await?;
                JobSource::events(&session.id, "session.events", session.events)?
            }
            Some(From::Events(list)) => JobSource::events("", "events.events", list.events)?,
            Some(From::Facts(list)) => {
                JobSource::Facts(given_facts(generator, scope.app_name, list.facts)?)
            }
            None => return Err(InvalidArgument::new("source", "is required").into()),
        };
        let options = req.options.unwrap_or_default();
        self.enqueue(scope, source, options, "options").await
    }

    /// Checks a generation request's options and queues its job (its source already checked):
    /// due at once for the background workers, or, when the caller waits, claimed and run here.
    async fn enqueue(
        &self,
        scope: Scope<'_>,
        source: JobSource,
        options: GenerateOptions,
        options_field: &str,
    ) -> Result<JobRecord> {
        let generator = self
            .generator
            .as_ref()
            .ok_or(GenerateError::NotConfigured)?;
        let labels: Vec<&str> = generator
            .topics
            .of(scope.app_name)
            .iter()
            .map(|t| t.label.as_str())
            .collect();
        if matches!(source, JobSource::Facts(_)) && !options.allowed_topics.is_empty() {
            return Err(InvalidArgument::new(
                format!("{options_field}.allowed_topics"),
                "applies to extraction only, and facts are not extracted",
            )
            .into());
        }
        for (i, topic) in options.allowed_topics.iter().enumerate() {
            if !labels.contains(&topic.as_str()) {
                return Err(InvalidArgument::new(
                    format!("{options_field}.allowed_topics[{i}]"),
                    format!(
                        "{topic:?} is not a topic of app {} ({})",
                        scope.app_name,
                        labels.join(", ")
                    ),
                )
                .into());
            }
        }
        let ttl_ms = match &options.ttl {
            None => 0,
            Some(ttl) if ttl.seconds < 0 || ttl.nanos < 0 || ttl.seconds > MAX_TTL_SECONDS => {
                return Err(InvalidArgument::new(
                    format!("{options_field}.ttl"),
                    "must be positive and at most 100 years",
                )
                .into())
            }
            Some(ttl) => ttl.seconds * 1000 + i64::from(ttl.nanos / 1_000_000),
        };
        let (session_id, events, facts) = match source {
            JobSource::Events { session_id, events } => (session_id, events, Vec::new()),
            JobSource::Facts(facts) => (String::new(), Vec::new(), facts),
        };
        let now = now_ms();
        let mut job = JobRecord {
            id: uuid::Uuid::new_v4().to_string(),
            app_name: scope.app_name.to_owned(),
            user_id: scope.user_id.to_owned(),
            state: GenerationState::Pending as i32,
            create_ms: now,
            update_ms: now,
            due_ms: now,
            events,
            facts,
            session_id,
            disable_consolidation: options.disable_consolidation,
            ttl_ms,
            allowed_topics: options.allowed_topics,
            ..Default::default()
        };
        if options.wait {
            // Queued as claimed by this call: should the process die, the lease runs out and
            // a worker takes the job over.
            job.state = GenerationState::Running as i32;
            job.attempts = 1;
            let lease = i64::try_from(generator.retry.lease.as_millis()).unwrap_or(i64::MAX);
            job.due_ms = now.saturating_add(lease);
        }
        self.store.enqueue(&job).await?;
        if !options.wait {
            self.queued.notify_one();
            return Ok(job);
        }
        match jobs::execute(self, generator, job).await {
            (job, None) => Ok(job),
            (job, Some(source)) => Err(MemoryError::Job {
                retrying: job.state == GenerationState::Pending as i32,
                job_id: job.id,
                source: Box::new(source),
            }),
        }
    }

    /// A generation job of the scope.
    pub async fn job(&self, req: GetGenerationJobRequest) -> Result<JobRecord> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let id = identifier("job_id", req.job_id.trim())?;
        self.store
            .job(scope, id)
            .await?
            .ok_or_else(|| MemoryError::JobNotFound {
                job_id: id.to_owned(),
            })
    }

    /// A page of the scope's revisions (of one memory, when named), oldest first.
    pub async fn revisions(
        &self,
        req: ListMemoryRevisionsRequest,
    ) -> Result<(Vec<Revision>, String)> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let memory_id = match req.memory_id.trim() {
            "" => None,
            id => Some(identifier("memory_id", id)?),
        };
        let page_size = page_size("page_size", req.page_size)?;
        Ok(self
            .store
            .revisions(scope, memory_id, page_size, &req.page_token)
            .await?)
    }

    /// Restores a generated memory to the fact one of its revisions left it with (topic and
    /// expiry too), recording the rollback as its last revision, which is returned. A deleted
    /// memory comes back (its id's tombstone is lifted, as by any explicit write).
    pub async fn rollback(&self, req: RollbackMemoryRequest) -> Result<Revision> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let memory_id = identifier("memory_id", req.memory_id.trim())?;
        let revision_id = req.revision_id.trim();
        let seq: u64 = revision_id.parse().map_err(|_| {
            InvalidArgument::new(
                "revision_id",
                "must be a revision_id of ListMemoryRevisions",
            )
        })?;
        let not_found = || MemoryError::RevisionNotFound {
            memory_id: memory_id.to_owned(),
            revision_id: revision_id.to_owned(),
        };
        let restored = self
            .store
            .revision(scope, seq)
            .await?
            .filter(|r| r.record.memory_id == memory_id)
            .ok_or_else(not_found)?
            .record;
        if let Ok(action @ (RevisionAction::Deleted | RevisionAction::Invalidated)) =
            RevisionAction::try_from(restored.action)
        {
            let what = match action {
                RevisionAction::Deleted => "deleted",
                _ => "invalidated",
            };
            return Err(InvalidArgument::new(
                "revision_id",
                format!(
                    "revision {revision_id} {what} the memory: name one that added, updated \
                     or restored it"
                ),
            )
            .into());
        }
        let previous_fact = match self.last_revision(scope, memory_id).await? {
            Some(last) if last.record.action != RevisionAction::Deleted as i32 => {
                last.record.new_fact
            }
            _ => String::new(),
        };
        let now = now_ms();
        let expire_ms = (restored.expire_ms > 0).then_some(restored.expire_ms);
        // Valid from where the revision left it (one recorded before memories had a validity:
        // from its own time, as the memory's timestamp then was), and not invalidated.
        let valid_from = restored
            .valid_from
            .unwrap_or_else(|| timestamp_of(restored.create_ms));
        let written = Written {
            topic: &restored.topic,
            source_event_ids: &restored.source_event_ids,
            job_id: "",
            expire_ms,
        };
        let entry = generated_entry(
            memory_id,
            &restored.new_fact,
            serde_json::Map::new(),
            &written,
            now,
            valid_from,
        );
        let record = RevisionRecord {
            memory_id: memory_id.to_owned(),
            action: RevisionAction::RolledBack as i32,
            previous_fact,
            new_fact: restored.new_fact.clone(),
            source_event_ids: restored.source_event_ids.clone(),
            create_ms: now,
            job_id: String::new(),
            topic: restored.topic.clone(),
            expire_ms: restored.expire_ms,
            restored: Some(seq),
            valid_from: Some(valid_from),
            ..Default::default()
        };
        self.write_changed(scope, Write::AddMemories(vec![entry]), vec![record])
            .await?;
        self.last_revision(scope, memory_id)
            .await?
            .ok_or_else(not_found)
    }

    /// The last revision of a memory, if it has one.
    async fn last_revision(&self, scope: Scope<'_>, memory_id: &str) -> Result<Option<Revision>> {
        let mut last = None;
        let mut token = String::new();
        loop {
            let (page, next) = self
                .store
                .revisions(scope, Some(memory_id), validate::MAX_PAGE_SIZE, &token)
                .await?;
            last = page.into_iter().last().or(last);
            if next.is_empty() {
                return Ok(last);
            }
            token = next;
        }
    }

    /// M1.3: events with content are appended; the first copy of an event id wins.
    pub async fn add_events(&self, req: AddEventsToMemoryRequest) -> Result<u32> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let session_id = req.session_id.trim();
        if !session_id.is_empty() {
            identifier("session_id", session_id)?;
        }
        json_object_text("custom_metadata", &req.custom_metadata)?;
        let entries = entries_from_events("events", req.events, session_id, &req.custom_metadata)?;
        let write = Write::AddEvents {
            session_id: session_id.to_owned(),
            entries,
        };
        self.write(scope, write).await
    }

    /// Direct writes; an entry without an id gets a uuid4, and the app's `created` lifetime, if
    /// it has one; without a `valid_from`, it is valid from its timestamp, else from now.
    /// Returns the ids in request order.
    pub async fn add_memories(&self, req: AddMemoryRequest) -> Result<Vec<String>> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let now = now_ms();
        let kind = Kind {
            generated: false,
            expire_ms: self.lifetimes.expiry(scope.app_name, Action::Created, now),
        };
        let shared = json_object("custom_metadata", &req.custom_metadata)?;
        let mut entries = Vec::with_capacity(req.memories.len());
        for (i, memory) in req.memories.into_iter().enumerate() {
            let at = |name: &str| format!("memories[{i}].{name}");
            let id = match memory.id.trim() {
                "" => uuid::Uuid::new_v4().to_string(),
                id => identifier(&at("id"), id)?.to_owned(),
            };
            if !memory.session_id.is_empty() {
                identifier(&at("session_id"), &memory.session_id)?;
            }
            let content = memory
                .content
                .filter(|c| !c.parts.is_empty())
                .ok_or_else(|| {
                    InvalidArgument::new(at("content"), "must have at least one part")
                })?;
            validate::content(&at("content"), &content)?;
            timestamp(&at("timestamp"), memory.timestamp.as_ref())?;
            let validity = Validity::given(
                &format!("memories[{i}]"),
                memory.valid_from,
                memory.invalid_at,
                Some(memory.timestamp.unwrap_or_else(|| timestamp_of(now))),
            )?;
            // The request's metadata applies to every entry; an entry's own keys win.
            let mut metadata = shared.clone();
            metadata.extend(json_object(
                &at("custom_metadata"),
                &memory.custom_metadata,
            )?);
            let custom_metadata = if metadata.is_empty() {
                String::new()
            } else {
                serde_json::to_string(&metadata)
                    .map_err(|e| InvalidArgument::new(at("custom_metadata"), e.to_string()))?
            };
            entries.push(Entry {
                id,
                session_id: memory.session_id,
                author: memory.author,
                timestamp: memory.timestamp,
                custom_metadata,
                content,
                kind,
                validity,
            });
        }
        let ids = entries.iter().map(|e| e.id.clone()).collect();
        self.write(scope, Write::AddMemories(entries)).await?;
        Ok(ids)
    }

    /// Ranked search in one (app, user)'s memory, as the request's mode says.
    pub async fn search(&self, req: SearchMemoryRequest) -> Result<Vec<Hit>> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let limit = match req.limit {
            0 => DEFAULT_SEARCH_LIMIT,
            n if n < 0 => return Err(InvalidArgument::new("limit", "must not be negative").into()),
            n => (n as usize).min(MAX_SEARCH_LIMIT),
        };
        timestamp("after_timestamp", req.after_timestamp.as_ref())?;
        timestamp("before_timestamp", req.before_timestamp.as_ref())?;
        let language = match req.language.trim() {
            "" => None,
            code => Some(
                code.parse::<Language>()
                    .map_err(|e| InvalidArgument::new("language", e.to_string()))?,
            ),
        };
        let mode = SearchMode::try_from(req.mode)
            .map_err(|_| InvalidArgument::new("mode", format!("unknown mode {}", req.mode)))?;
        let now = now_ms();
        let valid_at = ValidAt::parse(
            "as_of",
            req.as_of,
            req.include_superseded,
            timestamp_of(now),
        )?;
        let query = SearchQuery {
            language,
            text: req.query,
            limit,
            after: req.after_timestamp,
            before: req.before_timestamp,
            author: Some(req.author).filter(|a| !a.is_empty()),
            generated: kind("kind", req.kind)?,
            now_ms: now,
            filter: Filter::parse("filter", req.filter)?,
            valid_at,
        };
        self.ranked(scope, query, mode).await
    }

    /// The best hits for a checked `query`, ranked as `mode` says.
    async fn ranked(
        &self,
        scope: Scope<'_>,
        mut query: SearchQuery,
        mode: SearchMode,
    ) -> Result<Vec<Hit>> {
        let limit = query.limit;
        let embedder = match (mode, &self.embedder) {
            (SearchMode::Keyword, _) | (SearchMode::Unspecified, None) => {
                return Ok(self.store.search(scope, &query).await?)
            }
            (_, Some(embedder)) => embedder,
            (_, None) => {
                return Err(MemoryError::NoEmbedder {
                    mode: mode.as_str_name(),
                })
            }
        };
        // A query without text has no meaning to compare with (and no keyword).
        if query.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        if mode == SearchMode::Semantic {
            let vector = self.query_vector(embedder, scope, &query).await?;
            return Ok(self.store.nearest(scope, &vector, &query).await?);
        }
        if mode == SearchMode::Hybrid {
            query.limit = limit.max(fusion::HYBRID.depth);
            // The keyword search needs no vector: it runs while the query is embedded.
            let (vector, keyword) = tokio::join!(
                self.query_vector(embedder, scope, &query),
                self.store.search(scope, &query)
            );
            let (vector, keyword) = (vector?, keyword?);
            let semantic = self.store.nearest(scope, &vector, &query).await?;
            return Ok(fusion::fuse(keyword, semantic, limit, &fusion::HYBRID));
        }
        // The default: the keyword ranking first, and the query embedded only when that
        // ranking's best match holds too little of the query.
        query.limit = limit.max(fusion::DEFAULT.depth);
        let mut keyword = self.store.search(scope, &query).await?;
        if self.keyword_suffices(&query, &keyword) {
            keyword.truncate(limit);
            return Ok(keyword);
        }
        let vector = self.query_vector(embedder, scope, &query).await?;
        let semantic = self.store.nearest(scope, &vector, &query).await?;
        Ok(fusion::fuse(keyword, semantic, limit, &fusion::DEFAULT))
    }

    /// Whether the best of `keyword` (the hits of `query`'s keyword search) holds enough of the
    /// query's terms for the default mode to keep the keyword ranking as it is.
    fn keyword_suffices(&self, query: &SearchQuery, keyword: &[Hit]) -> bool {
        let Some(best) = keyword.first() else {
            return false;
        };
        let analyzer = self.store.analyzer();
        let language = query.language.or_else(|| analyzer.language_of(&query.text));
        let terms = analyzer.query_terms(&query.text, language);
        fusion::keyword_suffices(index::coverage(analyzer, &terms, language, &best.entry))
    }

    /// Deletes by memory id (sticky, M1.6), by session, or everything of the user.
    pub async fn delete(&self, req: DeleteMemoryRequest) -> Result<u32> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let target = match req.target {
            Some(Target::MemoryId(id)) => {
                DeleteTarget::MemoryId(identifier("memory_id", id.trim())?.to_owned())
            }
            Some(Target::SessionId(id)) => {
                DeleteTarget::Session(identifier("session_id", id.trim())?.to_owned())
            }
            Some(Target::All(true)) => DeleteTarget::All,
            Some(Target::All(false)) | None => {
                return Err(InvalidArgument::new(
                    "target",
                    "name a memory_id, a session_id, or set all",
                )
                .into())
            }
        };
        Ok(self.store.delete(scope, &target).await?)
    }

    /// A page of the user's memories in ingestion order that pass the request's filters and
    /// are valid at its `as_of` (now, by default); expired generated memories are left out.
    pub async fn list(&self, req: ListMemoriesRequest) -> Result<(Vec<Entry>, String)> {
        let filter = listing_filter(&req)?;
        self.listed(req, filter).await
    }

    /// A page of the request's memories that `filter` (the request's, checked) admits. Pages
    /// are read from the store until this one is full.
    pub(crate) async fn listed(
        &self,
        req: ListMemoriesRequest,
        filter: SearchQuery,
    ) -> Result<(Vec<Entry>, String)> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let page_size = page_size("page_size", req.page_size)?;
        let mut token = req.page_token;
        let mut page = Vec::new();
        loop {
            let (entries, next) = self
                .store
                .list(scope, page_size - page.len(), &token, &filter.filter)
                .await?;
            page.extend(entries.into_iter().filter(|e| filter.admits(e)));
            token = next;
            if page.len() >= page_size || token.is_empty() {
                return Ok((page, token));
            }
        }
    }
}

/// The filters of a listing, checked (also a purge's, which lists what it deletes).
pub fn listing_filter(req: &ListMemoriesRequest) -> Result<SearchQuery> {
    timestamp("after_timestamp", req.after_timestamp.as_ref())?;
    timestamp("before_timestamp", req.before_timestamp.as_ref())?;
    let now = now_ms();
    Ok(SearchQuery {
        generated: kind("kind", req.kind)?,
        now_ms: now,
        valid_at: ValidAt::parse(
            "as_of",
            req.as_of,
            req.include_superseded,
            timestamp_of(now),
        )?,
        after: req.after_timestamp,
        before: req.before_timestamp,
        author: Some(req.author.clone()).filter(|a| !a.is_empty()),
        filter: Filter::parse("filter", req.filter.clone())?,
        ..SearchQuery::default()
    })
}

fn scope<'a>(
    app_field: &str,
    app_name: &'a str,
    user_field: &str,
    user_id: &'a str,
) -> Result<Scope<'a>> {
    Ok(Scope {
        app_name: identifier(app_field, app_name)?,
        user_id: identifier(user_field, user_id)?,
    })
}

/// What generation jobs use: the searches and writes of requests, without their checks.
impl<S: MemoryStore> MemoryAccess for Memories<S> {
    type Store = S;

    fn store(&self) -> &S {
        &self.store
    }

    fn lifetimes(&self) -> &Lifetimes {
        &self.lifetimes
    }

    async fn search(&self, scope: Scope<'_>, query: SearchQuery) -> Result<Vec<Hit>> {
        self.ranked(scope, query, SearchMode::Unspecified).await
    }

    async fn write(
        &self,
        scope: Scope<'_>,
        write: Write,
        revisions: Vec<RevisionRecord>,
    ) -> Result<u32> {
        self.write_changed(scope, write, revisions).await
    }

    /// Resolves once a job has been queued here since the last call (or is queued).
    async fn queued(&self) {
        self.queued.notified().await
    }
}

/// The kind filter of a search or listing: `None` for both kinds, else whether generated.
fn kind(field: &str, value: i32) -> Result<Option<bool>> {
    match MemoryKind::try_from(value) {
        Ok(MemoryKind::Unspecified) => Ok(None),
        Ok(MemoryKind::Raw) => Ok(Some(false)),
        Ok(MemoryKind::Generated) => Ok(Some(true)),
        Err(_) => Err(InvalidArgument::new(field, format!("unknown kind {value}")).into()),
    }
}

/// What a generation job works from, checked.
enum JobSource {
    /// Events to extract facts from (see [`generation_events`]), and their session, if any.
    Events {
        session_id: String,
        events: Vec<Event>,
    },
    /// Facts the caller already extracted.
    Facts(Vec<FactRecord>),
}

impl JobSource {
    /// The events of `field` as a job reads them, from `session_id` (empty: none).
    fn events(session_id: &str, field: &str, events: Vec<Event>) -> Result<Self> {
        Ok(Self::Events {
            session_id: session_id.to_owned(),
            events: generation_events(field, events)?,
        })
    }
}

/// The facts of a request's `facts` source, checked as extracted facts are: 1 to
/// [`MAX_FACTS`] of them, each a text of 1 to [`MAX_FACT_CHARS`] characters, its topic (if
/// any) one of the app's, its metadata a JSON object.
fn given_facts(
    generator: &Generator,
    app: &str,
    facts: Vec<ExtractedFact>,
) -> Result<Vec<FactRecord>> {
    if facts.is_empty() || facts.len() > MAX_FACTS {
        return Err(InvalidArgument::new(
            "facts.facts",
            format!("must hold 1 to {MAX_FACTS} facts, not {}", facts.len()),
        )
        .into());
    }
    let topics = generator.topics.of(app);
    facts
        .into_iter()
        .enumerate()
        .map(|(i, fact)| {
            let at = |name: &str| format!("facts.facts[{i}].{name}");
            let text = fact.text.trim();
            if text.is_empty() || text.chars().count() > MAX_FACT_CHARS {
                return Err(InvalidArgument::new(
                    at("text"),
                    format!("must have 1 to {MAX_FACT_CHARS} characters"),
                )
                .into());
            }
            if !fact.topic.is_empty() && !topics.iter().any(|t| t.label == fact.topic) {
                let labels: Vec<&str> = topics.iter().map(|t| t.label.as_str()).collect();
                return Err(InvalidArgument::new(
                    at("topic"),
                    format!(
                        "{:?} is not a topic of app {app} ({})",
                        fact.topic,
                        labels.join(", ")
                    ),
                )
                .into());
            }
            json_object_text(&at("custom_metadata"), &fact.custom_metadata)?;
            timestamp(&at("valid_from"), fact.valid_from.as_ref())?;
            Ok(FactRecord {
                text: text.to_owned(),
                topic: fact.topic,
                custom_metadata: fact.custom_metadata,
                valid_from: fact.valid_from,
            })
        })
        .collect()
}

/// The events a generation job reads: those with content, each checked, each with an id (a
/// uuid4 for one without), so that facts can name the events they come from.
fn generation_events(field: &str, events: Vec<Event>) -> Result<Vec<Event>> {
    let mut kept = Vec::with_capacity(events.len());
    for (i, mut event) in events.into_iter().enumerate() {
        let Some(content) = event.content.as_ref().filter(|c| !c.parts.is_empty()) else {
            continue;
        };
        validate::content(&format!("{field}[{i}].content"), content)?;
        match event.id.trim() {
            "" => event.id = uuid::Uuid::new_v4().to_string(),
            id => {
                identifier(&format!("{field}[{i}].id"), id)?;
            }
        }
        // Only what the job reads is queued.
        event.actions = None;
        kept.push(event);
    }
    Ok(kept)
}

/// The entries ADK would remember of `events`: those with content of at least one part
/// (M1.2, M1.3), each valid from its event's timestamp (without one, since ever: an entry
/// ingested again must be the same entry). Every event's content is checked, remembered or
/// not.
fn entries_from_events(
    field: &str,
    events: Vec<Event>,
    session_id: &str,
    custom_metadata: &str,
) -> Result<Vec<Entry>> {
    let mut entries = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let Some(content) = event.content.filter(|c| !c.parts.is_empty()) else {
            continue;
        };
        validate::content(&format!("{field}[{i}].content"), &content)?;
        timestamp(&format!("{field}[{i}].timestamp"), event.timestamp.as_ref())?;
        let id = match event.id.as_str() {
            "" => uuid::Uuid::new_v4().to_string(),
            id => identifier(&format!("{field}[{i}].id"), id)?.to_owned(),
        };
        entries.push(Entry {
            id,
            session_id: session_id.to_owned(),
            author: event.author,
            timestamp: event.timestamp,
            custom_metadata: custom_metadata.to_owned(),
            content,
            kind: Kind::default(),
            validity: Validity::from(event.timestamp),
        });
    }
    Ok(entries)
}
