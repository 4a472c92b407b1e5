//! gRPC handlers of `adk.memory.v1.MemoryService`: each one hands the request message to the
//! domain ([`Memories`]) and converts the resulting entries; errors convert in [`status`].

pub mod status;

use std::sync::Arc;

use adk_common::rpc::{admit, traced};
use adk_proto::memory::v1::{
    memory_service_server::MemoryService, AddEventsToMemoryRequest, AddEventsToMemoryResponse,
    AddMemoryRequest, AddMemoryResponse, AddSessionToMemoryRequest, AddSessionToMemoryResponse,
    DeleteMemoryRequest, DeleteMemoryResponse, ListMemoriesRequest, ListMemoriesResponse,
    MemoryEntry, SearchMemoryRequest, SearchMemoryResponse,
};
use tonic::{Request, Response, Status};

use crate::{
    memories::Memories,
    store::{Entry, MemoryStore},
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
        let entries = traced(span, self.memories.add_session(request)).await?;
        Ok(Response::new(AddSessionToMemoryResponse { entries }))
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
    }
}
