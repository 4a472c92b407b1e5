//! [`MemoryClient`]: the calls to memory-svc (search, ingestion, event streams, generation,
//! listing and deletion), and what generation and deletion take.

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        memory_service_client::MemoryServiceClient, AddMemoryRequest, AddSessionToMemoryRequest,
        AppendMemoryStreamRequest, AppendMemoryStreamResponse, DeleteMemoryRequest, EventList,
        FlushMemoryStreamRequest, GenerateMemoriesRequest, GenerateOptions, GenerationJob,
        GetGenerationJobRequest, ListMemoriesRequest, ListMemoriesResponse,
        ListMemoryRevisionsRequest, ListMemoryStreamsRequest, MemoryEntry, MemoryKind,
        MemoryRevision, MemoryStream, PurgeMemoriesRequest, PurgeMemoriesResponse,
        RollbackMemoryRequest, SearchMemoryRequest, SearchMode, SessionRef,
    },
    session::v1::{Event, Session},
};
use tonic::{transport::Channel, Status};

use super::{
    remote::{Access, Remote},
    LIST_PAGE, MAX_MESSAGE_BYTES,
};
use crate::error::Result;

/// A client of memory-svc.
#[derive(Debug, Clone)]
pub struct MemoryClient {
    remote: Remote,
    client: MemoryServiceClient<Channel>,
}

impl MemoryClient {
    /// A client of the memory-svc at `endpoint` (e.g. `http://127.0.0.1:50052`).
    pub fn connect(endpoint: &str) -> Result<Self> {
        Self::connect_with(endpoint, &Access::default())
    }

    /// A client of a memory-svc that requires TLS or a token.
    pub fn connect_with(endpoint: &str, access: &Access) -> Result<Self> {
        let (remote, channel) = Remote::channel("memory-svc", endpoint, access)?;
        let client = MemoryServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { remote, client })
    }

    /// The best matches for `query` in the (app, user)'s memory, best first: the query's
    /// language detected by memory-svc, ranked in AUTO mode.
    pub async fn search(&self, app: &str, user: &str, query: &str) -> Result<Vec<MemoryEntry>> {
        self.search_with(app, user, query, "", SearchMode::Unspecified)
            .await
    }

    /// [`Self::search`] with the query in `language` (an ISO 639-1 code; empty: detected),
    /// ranked as `mode` says.
    pub async fn search_with(
        &self,
        app: &str,
        user: &str,
        query: &str,
        language: &str,
        mode: SearchMode,
    ) -> Result<Vec<MemoryEntry>> {
        let request = SearchMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            query: query.to_owned(),
            language: language.to_owned(),
            mode: mode.into(),
            ..Default::default()
        };
        self.search_request(request).await
    }

    /// The entries `request` finds, best first.
    pub async fn search_request(&self, request: SearchMemoryRequest) -> Result<Vec<MemoryEntry>> {
        Ok(self
            .client
            .clone()
            .search_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("SearchMemory", s))?
            .into_inner()
            .memories)
    }

    /// Makes memory-svc (re)ingest the session, fetched from session-svc by reference; returns
    /// how many entries the session now has in memory.
    pub async fn add_session(&self, app: &str, user: &str, session: &str) -> Result<u32> {
        let request = AddSessionToMemoryRequest {
            source: Some(Source::SessionRef(SessionRef {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                session_id: session.to_owned(),
            })),
            generate: None,
        };
        self.add_session_request(request).await
    }

    /// [`Self::add_session`] with the session's events given: only these are in memory then.
    pub async fn add_session_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
        events: Vec<Event>,
    ) -> Result<u32> {
        let request = AddSessionToMemoryRequest {
            source: Some(Source::Session(Session {
                id: session.to_owned(),
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                events,
                ..Default::default()
            })),
            generate: None,
        };
        self.add_session_request(request).await
    }

    /// Sends one AddSessionToMemory; returns how many entries the session now has.
    async fn add_session_request(&self, request: AddSessionToMemoryRequest) -> Result<u32> {
        Ok(self
            .client
            .clone()
            .add_session_to_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("AddSessionToMemory", s))?
            .into_inner()
            .entries)
    }

    /// Has memory-svc generate memories of the (app, user) from `source`: queued (see
    /// [`MemoryClient::job`]), or run before answering with `wait`.
    pub async fn generate(
        &self,
        app: &str,
        user: &str,
        source: GenerateSource,
        wait: bool,
    ) -> Result<GenerationJob> {
        use adk_proto::memory::v1::generate_memories_request::Source as From;
        let source = match source {
            GenerateSource::Session(session_id) => From::SessionRef(SessionRef {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                session_id,
            }),
            GenerateSource::Events(events) => From::Events(EventList { events }),
        };
        let request = GenerateMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            source: Some(source),
            options: Some(GenerateOptions {
                wait,
                ..Default::default()
            }),
        };
        self.client
            .clone()
            .generate_memories(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("GenerateMemories", s))?
            .into_inner()
            .job
            .ok_or_else(|| {
                let missing = Status::internal("the answer holds no job");
                self.remote.error("GenerateMemories", missing)
            })
    }

    /// The generation job `job_id` of the (app, user), as it stands.
    pub async fn job(&self, app: &str, user: &str, job_id: &str) -> Result<GenerationJob> {
        let request = GetGenerationJobRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            job_id: job_id.to_owned(),
        };
        self.client
            .clone()
            .get_generation_job(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("GetGenerationJob", s))
    }

    /// Every change generation made to the (app, user)'s memories (to `memory_id` only, when
    /// given), oldest first.
    pub async fn revisions(
        &self,
        app: &str,
        user: &str,
        memory_id: Option<&str>,
    ) -> Result<Vec<MemoryRevision>> {
        let mut revisions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListMemoryRevisionsRequest {
                app_name: app.to_owned(),
                user_id: user.to_owned(),
                memory_id: memory_id.unwrap_or_default().to_owned(),
                page_size: LIST_PAGE,
                page_token,
            };
            let page = self
                .client
                .clone()
                .list_memory_revisions(self.remote.request(request))
                .await
                .map_err(|s| self.remote.error("ListMemoryRevisions", s))?
                .into_inner();
            revisions.extend(page.revisions);
            if page.next_page_token.is_empty() {
                return Ok(revisions);
            }
            page_token = page.next_page_token;
        }
    }

    /// Restores the generated memory `memory_id` to the fact of its revision `revision_id`;
    /// the revision the rollback recorded.
    pub async fn rollback(
        &self,
        app: &str,
        user: &str,
        memory_id: &str,
        revision_id: &str,
    ) -> Result<MemoryRevision> {
        let request = RollbackMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            memory_id: memory_id.to_owned(),
            revision_id: revision_id.to_owned(),
        };
        self.client
            .clone()
            .rollback_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("RollbackMemory", s))?
            .into_inner()
            .revision
            .ok_or_else(|| {
                let status = Status::internal("the answer holds no revision");
                self.remote.error("RollbackMemory", status)
            })
    }

    /// Every memory of the (app, user), in ingestion order.
    pub async fn list(&self, app: &str, user: &str) -> Result<Vec<MemoryEntry>> {
        self.list_of_kind(app, user, MemoryKind::Unspecified).await
    }

    /// [`Self::list`], of one kind only (`Unspecified`: both kinds).
    pub async fn list_of_kind(
        &self,
        app: &str,
        user: &str,
        kind: MemoryKind,
    ) -> Result<Vec<MemoryEntry>> {
        self.list_request(ListMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            kind: kind.into(),
            ..Default::default()
        })
        .await
    }

    /// Every memory `request` lists (its filters applied), in ingestion order, read page by
    /// page from the first (`page_size` and `page_token` are this call's).
    pub async fn list_request(&self, request: ListMemoriesRequest) -> Result<Vec<MemoryEntry>> {
        let mut memories = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = self
                .client
                .clone()
                .list_memories(self.remote.request(ListMemoriesRequest {
                    page_size: LIST_PAGE,
                    page_token,
                    ..request.clone()
                }))
                .await
                .map_err(|s| self.remote.error("ListMemories", s))?
                .into_inner();
            memories.extend(page.memories);
            if page.next_page_token.is_empty() {
                return Ok(memories);
            }
            page_token = page.next_page_token;
        }
    }

    /// One page of the (app, user)'s memories, in ingestion order, after `page_token`.
    pub async fn page(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
    ) -> Result<ListMemoriesResponse> {
        self.page_of_kind(app, user, page_size, page_token, MemoryKind::Unspecified)
            .await
    }

    async fn page_of_kind(
        &self,
        app: &str,
        user: &str,
        page_size: i32,
        page_token: String,
        kind: MemoryKind,
    ) -> Result<ListMemoriesResponse> {
        let request = ListMemoriesRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            page_size,
            page_token,
            kind: kind.into(),
            ..Default::default()
        };
        self.client
            .clone()
            .list_memories(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("ListMemories", s))
    }

    /// Writes the request's entries; returns their ids, in request order.
    pub async fn add(&self, request: AddMemoryRequest) -> Result<Vec<String>> {
        Ok(self
            .client
            .clone()
            .add_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("AddMemory", s))?
            .into_inner()
            .ids)
    }

    /// Runs `request`: a dry run, or with `force` the purge.
    pub async fn purge(&self, request: PurgeMemoriesRequest) -> Result<PurgeMemoriesResponse> {
        self.client
            .clone()
            .purge_memories(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("PurgeMemories", s))
    }

    /// Buffers `events` (each with an id) in the (app, user)'s event stream `stream`; the
    /// response says how many were new and carries the generation job they triggered, if any.
    pub async fn append_stream(
        &self,
        app: &str,
        user: &str,
        stream: &str,
        events: Vec<Event>,
    ) -> Result<AppendMemoryStreamResponse> {
        let request = AppendMemoryStreamRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            stream_id: stream.to_owned(),
            events,
        };
        self.client
            .clone()
            .append_memory_stream(self.remote.request(request))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("AppendMemoryStream", s))
    }

    /// Hands the events buffered in the stream to generation now: the job, or `None` when the
    /// stream held none.
    pub async fn flush_stream(
        &self,
        app: &str,
        user: &str,
        stream: &str,
    ) -> Result<Option<GenerationJob>> {
        let request = FlushMemoryStreamRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            stream_id: stream.to_owned(),
        };
        Ok(self
            .client
            .clone()
            .flush_memory_stream(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("FlushMemoryStream", s))?
            .into_inner()
            .job)
    }

    /// The (app, user)'s event streams holding buffered events, by stream id.
    pub async fn list_streams(&self, app: &str, user: &str) -> Result<Vec<MemoryStream>> {
        let request = ListMemoryStreamsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
        };
        Ok(self
            .client
            .clone()
            .list_memory_streams(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("ListMemoryStreams", s))?
            .into_inner()
            .streams)
    }

    /// Deletes the (app, user)'s memories that `target` names; returns how many there were.
    pub async fn delete(&self, app: &str, user: &str, target: MemoryTarget) -> Result<u32> {
        let request = DeleteMemoryRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            target: Some(match target {
                MemoryTarget::Id(id) => Target::MemoryId(id),
                MemoryTarget::Session(id) => Target::SessionId(id),
                MemoryTarget::All => Target::All(true),
            }),
        };
        Ok(self
            .client
            .clone()
            .delete_memory(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("DeleteMemory", s))?
            .into_inner()
            .deleted)
    }
}

/// What [`MemoryClient::generate`] generates memories from.
#[derive(Debug, Clone, PartialEq)]
pub enum GenerateSource {
    /// A session, which memory-svc fetches from session-svc.
    Session(String),
    /// These events.
    Events(Vec<Event>),
}

/// Which memories [`MemoryClient::delete`] deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryTarget {
    /// The entry with this id (which is then never ingested again).
    Id(String),
    /// Every entry that came from this session.
    Session(String),
    /// Every entry of the user.
    All,
}
