//! gRPC handlers of `adk.session.v1.SessionService`: each one hands the request message to the
//! domain ([`Sessions`]) and wraps the result; errors convert in [`status`].

pub mod status;

use std::{pin::Pin, sync::Arc};

use adk_proto::session::v1::{
    session_service_server::SessionService, AppendEventRequest, AppendEventResponse,
    CreateSessionRequest, DeleteSessionRequest, GetAppStateRequest, GetSessionRequest,
    GetUserStateRequest, ListEventsRequest, ListEventsResponse, ListSessionsRequest,
    ListSessionsResponse, Session, StateResponse, WatchEventsRequest, WatchEventsResponse,
    WatchSessionRequest, WatchSessionResponse,
};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::{sessions::Sessions, store::SessionStore};

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The tonic service over a shared [`Sessions`].
#[derive(Debug)]
pub struct SessionGrpc<S> {
    sessions: Arc<Sessions<S>>,
}

impl<S> SessionGrpc<S> {
    pub fn new(sessions: Arc<Sessions<S>>) -> Self {
        Self { sessions }
    }
}

#[tonic::async_trait]
impl<S: SessionStore> SessionService for SessionGrpc<S> {
    async fn create_session(
        &self,
        request: Request<CreateSessionRequest>,
    ) -> Result<Response<Session>, Status> {
        Ok(Response::new(
            self.sessions.create(request.into_inner()).await?,
        ))
    }

    async fn get_session(
        &self,
        request: Request<GetSessionRequest>,
    ) -> Result<Response<Session>, Status> {
        Ok(Response::new(
            self.sessions.get(request.into_inner()).await?,
        ))
    }

    async fn list_sessions(
        &self,
        request: Request<ListSessionsRequest>,
    ) -> Result<Response<ListSessionsResponse>, Status> {
        let page = self.sessions.list(request.into_inner()).await?;
        Ok(Response::new(ListSessionsResponse {
            sessions: page.items,
            next_page_token: page.next_page_token,
        }))
    }

    async fn delete_session(
        &self,
        request: Request<DeleteSessionRequest>,
    ) -> Result<Response<()>, Status> {
        self.sessions.delete(request.into_inner()).await?;
        Ok(Response::new(()))
    }

    async fn append_event(
        &self,
        request: Request<AppendEventRequest>,
    ) -> Result<Response<AppendEventResponse>, Status> {
        let appended = self.sessions.append(request.into_inner()).await?;
        Ok(Response::new(AppendEventResponse {
            event: Some(appended.event),
            last_sequence: appended.last_sequence,
            last_update_time: Some(appended.last_update_time),
            code: 0,
            message: String::new(),
        }))
    }

    type AppendEventsStream = ResponseStream<AppendEventResponse>;

    async fn append_events(
        &self,
        _request: Request<Streaming<AppendEventRequest>>,
    ) -> Result<Response<Self::AppendEventsStream>, Status> {
        Err(Status::unimplemented("AppendEvents is not available yet"))
    }

    async fn list_events(
        &self,
        request: Request<ListEventsRequest>,
    ) -> Result<Response<ListEventsResponse>, Status> {
        let page = self.sessions.list_events(request.into_inner()).await?;
        Ok(Response::new(ListEventsResponse {
            events: page.items,
            next_page_token: page.next_page_token,
        }))
    }

    type WatchSessionStream = ResponseStream<WatchSessionResponse>;

    async fn watch_session(
        &self,
        _request: Request<WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        Err(Status::unimplemented("WatchSession is not available yet"))
    }

    type WatchEventsStream = ResponseStream<WatchEventsResponse>;

    async fn watch_events(
        &self,
        _request: Request<WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        Err(Status::unimplemented("WatchEvents is not available yet"))
    }

    async fn get_user_state(
        &self,
        request: Request<GetUserStateRequest>,
    ) -> Result<Response<StateResponse>, Status> {
        let state = self.sessions.user_state(request.into_inner()).await?;
        Ok(Response::new(StateResponse { state }))
    }

    async fn get_app_state(
        &self,
        request: Request<GetAppStateRequest>,
    ) -> Result<Response<StateResponse>, Status> {
        let state = self.sessions.app_state(request.into_inner()).await?;
        Ok(Response::new(StateResponse { state }))
    }
}
