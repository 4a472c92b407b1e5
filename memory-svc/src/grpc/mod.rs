//! gRPC handlers of `adk.memory.v1.MemoryService`: each one hands the request message to the
//! domain ([`Memories`]) and converts the resulting entries; errors convert in [`status`].

pub mod status;

use std::sync::Arc;

use adk_common::serve::rpc::{admit, traced};
use adk_proto::memory::v1::{
    memory_service_server::MemoryService, AddEventsToMemoryRequest, AddEventsToMemoryResponse,
    AddMemoryRequest, AddMemoryResponse, AddSessionToMemoryRequest, AddSessionToMemoryResponse,
    AppendMemoryStreamRequest, AppendMemoryStreamResponse, DeleteMemoryRequest,
    DeleteMemoryResponse, FlushMemoryStreamRequest, FlushMemoryStreamResponse,
    GenerateMemoriesRequest, GenerateMemoriesResponse, GenerationJob, GetGenerationJobRequest,
    ListMemoriesRequest, ListMemoriesResponse, ListMemoryRevisionsRequest,
    ListMemoryRevisionsResponse, ListMemoryStreamsRequest, ListMemoryStreamsResponse, MemoryEntry,
    MemoryRevision, MemoryStream, PurgeMemoriesRequest, PurgeMemoriesResponse,
    RollbackMemoryRequest, RollbackMemoryResponse, SearchMemoryRequest, SearchMemoryResponse,
};
use tonic::{Request, Response, Status};

use crate::{
    generate::jobs::timestamp_of,
    memories::Memories,
    purge::Purged,
    store::{Entry, JobRecord, MemoryStore, Revision},
};

/// The tonic service over a shared [`Memories`].
#[derive(Debug)]
pub struct MemoryGrpc<S> {
    memories: Arc<Memories<S>>,
}

impl<S> MemoryGrpc<S> {
    pub fn new(memories: Arc<Memories<S>>) -> Self {
        Self { memories }
    }
}

#[tonic::async_trait]
impl<S: MemoryStore> MemoryService for MemoryGrpc<S> {
    async fn add_session_to_memory(
        &self,
        request: Request<AddSessionToMemoryRequest>,
    ) -> Result<Response<AddSessionToMemoryResponse>, Status> {
        let (request, span) = admit(request, "AddSessionToMemory")?;
        let (entries, job) = traced(span, self.memories.add_session(request)).await?;
        Ok(Response::new(AddSessionToMemoryResponse {
            entries,
            generation: job.map(generation_job),
        }))
    }

    async fn add_events_to_memory(
        &self,
        request: Request<AddEventsToMemoryRequest>,
    ) -> Result<Response<AddEventsToMemoryResponse>, Status> {
        let (request, span) = admit(request, "AddEventsToMemory")?;
        let entries = traced(span, self.memories.add_events(request)).await?;
        Ok(Response::new(AddEventsToMemoryResponse { entries }))
    }

    async fn add_memory(
        &self,
        request: Request<AddMemoryRequest>,
    ) -> Result<Response<AddMemoryResponse>, Status> {
        let (request, span) = admit(request, "AddMemory")?;
        let ids = traced(span, self.memories.add_memories(request)).await?;
        Ok(Response::new(AddMemoryResponse { ids }))
    }

    async fn search_memory(
        &self,
        request: Request<SearchMemoryRequest>,
    ) -> Result<Response<SearchMemoryResponse>, Status> {
        let (request, span) = admit(request, "SearchMemory")?;
        let hits = traced(span, self.memories.search(request)).await?;
        let memories = hits
            .into_iter()
            .map(|hit| memory_entry(hit.entry, hit.score))
            .collect();
        Ok(Response::new(SearchMemoryResponse { memories }))
    }

    async fn delete_memory(
        &self,
        request: Request<DeleteMemoryRequest>,
    ) -> Result<Response<DeleteMemoryResponse>, Status> {
        let (request, span) = admit(request, "DeleteMemory")?;
        let deleted = traced(span, self.memories.delete(request)).await?;
        Ok(Response::new(DeleteMemoryResponse { deleted }))
    }

    async fn list_memories(
        &self,
        request: Request<ListMemoriesRequest>,
    ) -> Result<Response<ListMemoriesResponse>, Status> {
        let (request, span) = admit(request, "ListMemories")?;
        let (entries, next_page_token) = traced(span, self.memories.list(request)).await?;
        let memories = entries.into_iter().map(|e| memory_entry(e, 0.0)).collect();
        Ok(Response::new(ListMemoriesResponse {
            memories,
            next_page_token,
        }))
    }

    async fn generate_memories(
        &self,
        request: Request<GenerateMemoriesRequest>,
    ) -> Result<Response<GenerateMemoriesResponse>, Status> {
        let (request, span) = admit(request, "GenerateMemories")?;
        let job = traced(span, self.memories.generate(request)).await?;
        Ok(Response::new(GenerateMemoriesResponse {
            job: Some(generation_job(job)),
        }))
    }

    async fn get_generation_job(
        &self,
        request: Request<GetGenerationJobRequest>,
    ) -> Result<Response<GenerationJob>, Status> {
        let (request, span) = admit(request, "GetGenerationJob")?;
        let job = traced(span, self.memories.job(request)).await?;
        Ok(Response::new(generation_job(job)))
    }

    async fn list_memory_revisions(
        &self,
        request: Request<ListMemoryRevisionsRequest>,
    ) -> Result<Response<ListMemoryRevisionsResponse>, Status> {
        let (request, span) = admit(request, "ListMemoryRevisions")?;
        let (revisions, next_page_token) = traced(span, self.memories.revisions(request)).await?;
        Ok(Response::new(ListMemoryRevisionsResponse {
            revisions: revisions.into_iter().map(memory_revision).collect(),
            next_page_token,
        }))
    }

    async fn rollback_memory(
        &self,
        request: Request<RollbackMemoryRequest>,
    ) -> Result<Response<RollbackMemoryResponse>, Status> {
        let (request, span) = admit(request, "RollbackMemory")?;
        let revision = traced(span, self.memories.rollback(request)).await?;
        Ok(Response::new(RollbackMemoryResponse {
            revision: Some(memory_revision(revision)),
        }))
    }

    async fn purge_memories(
        &self,
        request: Request<PurgeMemoriesRequest>,
    ) -> Result<Response<PurgeMemoriesResponse>, Status> {
        let (request, span) = admit(request, "PurgeMemories")?;
        let outcome = traced(span, self.memories.purge(request)).await?;
        Ok(Response::new(purged(outcome)))
    }

    async fn append_memory_stream(
        &self,
        request: Request<AppendMemoryStreamRequest>,
    ) -> Result<Response<AppendMemoryStreamResponse>, Status> {
        let (request, span) = admit(request, "AppendMemoryStream")?;
        let appended = traced(span, self.memories.append_stream(request)).await?;
        Ok(Response::new(AppendMemoryStreamResponse {
            appended: appended.appended,
            buffered: appended.buffered,
            job: appended.job.map(generation_job),
        }))
    }

    async fn flush_memory_stream(
        &self,
        request: Request<FlushMemoryStreamRequest>,
    ) -> Result<Response<FlushMemoryStreamResponse>, Status> {
        let (request, span) = admit(request, "FlushMemoryStream")?;
        let job = traced(span, self.memories.flush_stream(request)).await?;
        Ok(Response::new(FlushMemoryStreamResponse {
            job: job.map(generation_job),
        }))
    }

    async fn list_memory_streams(
        &self,
        request: Request<ListMemoryStreamsRequest>,
    ) -> Result<Response<ListMemoryStreamsResponse>, Status> {
        let (request, span) = admit(request, "ListMemoryStreams")?;
        let streams = traced(span, self.memories.list_streams(request)).await?;
        Ok(Response::new(ListMemoryStreamsResponse {
            streams: streams
                .into_iter()
                .map(|s| MemoryStream {
                    stream_id: s.stream_id,
                    buffered: s.events,
                    last_append_time: Some(timestamp_of(s.last_ms)),
                })
                .collect(),
        }))
    }
}

fn purged(purged: Purged) -> PurgeMemoriesResponse {
    PurgeMemoriesResponse {
        count: purged.count,
        sample: purged
            .sample
            .into_iter()
            .map(|e| memory_entry(e, 0.0))
            .collect(),
        operation_id: purged.operation_id,
    }
}

fn generation_job(job: JobRecord) -> GenerationJob {
    GenerationJob {
        id: job.id,
        app_name: job.app_name,
        user_id: job.user_id,
        state: job.state,
        attempts: job.attempts,
        error: job.error,
        create_time: Some(timestamp_of(job.create_ms)),
        update_time: Some(timestamp_of(job.update_ms)),
        added: job.added,
        updated: job.updated,
        deleted: job.deleted,
        kept: job.kept,
        invalidated: job.invalidated,
    }
}

fn memory_revision(
    Revision {
        seq,
        record: revision,
    }: Revision,
) -> MemoryRevision {
    MemoryRevision {
        revision_id: seq.to_string(),
        restored_revision_id: revision
            .restored
            .map_or_else(String::new, |seq| seq.to_string()),
        memory_id: revision.memory_id,
        action: revision.action,
        previous_fact: revision.previous_fact,
        new_fact: revision.new_fact,
        source_event_ids: revision.source_event_ids,
        create_time: Some(timestamp_of(revision.create_ms)),
        job_id: revision.job_id,
        valid_from: revision.valid_from,
        invalid_at: revision.invalid_at,
        superseded_by: revision.superseded_by,
    }
}

fn memory_entry(entry: Entry, score: f64) -> MemoryEntry {
    MemoryEntry {
        id: entry.id,
        content: Some(entry.content),
        author: entry.author,
        timestamp: entry.timestamp,
        custom_metadata: entry.custom_metadata,
        session_id: entry.session_id,
        score,
        valid_from: entry.validity.from,
        invalid_at: entry.validity.until,
    }
}
