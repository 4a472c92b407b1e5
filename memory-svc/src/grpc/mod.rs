//! gRPC handlers of `adk.memory.v1.MemoryService`: each one hands the request message to the
//! domain ([`Memories`]) and converts the resulting entries; errors convert in [`status`].

pub mod status;

use std::sync::Arc;

use adk_common::auth::grant;
use adk_proto::memory::v1::add_session_to_memory_request::Source;
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
        let scope = match &request.get_ref().source {
            Some(Source::Session(s)) => Some((&s.app_name, &s.user_id)),
            Some(Source::SessionRef(r)) => Some((&r.app_name, &r.user_id)),
            // The domain refuses a request without a source.
            None => None,
        };
        if let Some((app_name, user_id)) = scope {
            grant(&request)?.check(app_name, Some(user_id))?;
        }
        let entries = self.memories.add_session(request.into_inner()).await?;
        Ok(Response::new(AddSessionToMemoryResponse { entries }))
    }

    async fn add_events_to_memory(
        &self,
        request: Request<AddEventsToMemoryRequest>,
    ) -> Result<Response<AddEventsToMemoryResponse>, Status> {
        allow(&request, |r| (&r.app_name, &r.user_id))?;
        let entries = self.memories.add_events(request.into_inner()).await?;
        Ok(Response::new(AddEventsToMemoryResponse { entries }))
    }

    async fn add_memory(
        &self,
        request: Request<AddMemoryRequest>,
    ) -> Result<Response<AddMemoryResponse>, Status> {
        allow(&request, |r| (&r.app_name, &r.user_id))?;
        let ids = self.memories.add_memories(request.into_inner()).await?;
        Ok(Response::new(AddMemoryResponse { ids }))
    }

    async fn search_memory(
        &self,
        request: Request<SearchMemoryRequest>,
    ) -> Result<Response<SearchMemoryResponse>, Status> {
        allow(&request, |r| (&r.app_name, &r.user_id))?;
        let hits = self.memories.search(request.into_inner()).await?;
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
        allow(&request, |r| (&r.app_name, &r.user_id))?;
        let deleted = self.memories.delete(request.into_inner()).await?;
        Ok(Response::new(DeleteMemoryResponse { deleted }))
    }

    async fn list_memories(
        &self,
        request: Request<ListMemoriesRequest>,
    ) -> Result<Response<ListMemoriesResponse>, Status> {
        allow(&request, |r| (&r.app_name, &r.user_id))?;
        let (entries, next_page_token) = self.memories.list(request.into_inner()).await?;
        let memories = entries.into_iter().map(|e| memory_entry(e, 0.0)).collect();
        Ok(Response::new(ListMemoriesResponse {
            memories,
            next_page_token,
        }))
    }
}

/// Checks the caller's token against the app and user a request names.
fn allow<T>(
    request: &Request<T>,
    scope: impl FnOnce(&T) -> (&String, &String),
) -> Result<(), Status> {
    let (app_name, user_id) = scope(request.get_ref());
    grant(request)?.check(app_name, Some(user_id))
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
