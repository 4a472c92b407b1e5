//! The memory domain: checks each request, applies ADK's memory rules (M1 in docs/rules.md),
//! and calls the store. Requests are the protobuf messages of `adk.memory.v1` (plain data);
//! results are the store's entries. Nothing here knows about gRPC transport.
//!
//! With an embedding model, every write first embeds its entries' texts and hands the vectors
//! to the store with the write, so no entry is stored without its vector; a model that fails
//! fails the write before anything is stored. Searches rank by keyword, by meaning, or both
//! ([`crate::fusion`]), as the request's mode says.

use adk_common::validate::{
    self, identifier, json_object, json_object_text, page_size, timestamp, InvalidArgument,
};
use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        AddEventsToMemoryRequest, AddMemoryRequest, AddSessionToMemoryRequest, DeleteMemoryRequest,
        ListMemoriesRequest, SearchMemoryRequest, SearchMode,
    },
    session::v1::{Event, Session},
};

use std::{
    num::NonZeroUsize,
    sync::{Arc, Mutex},
};

use lru::LruCache;

use crate::{
    analysis::Language,
    embed::Embedder,
    error::{MemoryError, Result},
    fusion,
    session_source::SessionSource,
    store::{DeleteTarget, Entry, Hit, MemoryStore, Scope, SearchQuery, Vectors, Write},
};

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
        }
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
        Ok(self.store.write_embedded(scope, write, vectors).await?)
    }

    /// The embedding of a query, from the cache when it was asked recently.
    async fn query_vector(&self, embedder: &Embedder, text: &str) -> Result<Arc<[f32]>> {
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
    pub async fn add_session(&self, req: AddSessionToMemoryRequest) -> Result<u32> {
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
        let entries = entries_from_events("session.events", events, &id, "")?;
        let write = Write::Replace {
            session_id: id,
            entries,
        };
        self.write(scope, write).await
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

    /// Direct writes; an entry without an id gets a uuid4. Returns the ids in request order.
    pub async fn add_memories(&self, req: AddMemoryRequest) -> Result<Vec<String>> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
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
        let mut query = SearchQuery {
            language,
            text: req.query,
            limit,
            after: req.after_timestamp,
            before: req.before_timestamp,
            author: Some(req.author).filter(|a| !a.is_empty()),
        };
        let embedder = match (mode, &self.embedder) {
            (SearchMode::Keyword, _) | (SearchMode::Auto, None) => {
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
        let vector = self.query_vector(embedder, &query.text).await?;
        if mode == SearchMode::Semantic {
            return Ok(self.store.nearest(scope, &vector, &query).await?);
        }
        query.limit = limit.max(fusion::DEPTH);
        let keyword = self.store.search(scope, &query).await?;
        let semantic = self.store.nearest(scope, &vector, &query).await?;
        Ok(fusion::fuse(keyword, semantic, limit))
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

    /// A page of the user's memories in ingestion order.
    pub async fn list(&self, req: ListMemoriesRequest) -> Result<(Vec<Entry>, String)> {
        let scope = scope("app_name", &req.app_name, "user_id", &req.user_id)?;
        let page_size = page_size("page_size", req.page_size)?;
        Ok(self.store.list(scope, page_size, &req.page_token).await?)
    }
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

/// The entries ADK would remember of `events`: those with content of at least one part
/// (M1.2, M1.3). Every event's content is checked, remembered or not.
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
        });
    }
    Ok(entries)
}
