//! gRPC handlers of `adk.session.v1.SessionService`: each one hands the request message to the
//! domain ([`Sessions`]) and wraps the result; errors convert in [`status`]. GetSession and
//! ListEvents answer with the events as stored ([`reply`]).

pub mod reply;
pub mod status;

use std::{pin::Pin, sync::Arc};

use adk_common::{
    serve::auth::grant,
    serve::rpc::{admit, span, traced, Scoped},
};
use adk_proto::session::v1::{
    session_service_server::SessionService, watch_session_response::Change, AppendEventRequest,
    AppendEventResponse, CreateSessionRequest, DeleteSessionRequest, GetAppStateRequest,
    GetSessionRequest, GetUserStateRequest, ListAppsRequest, ListAppsResponse, ListEventsRequest,
    ListEventsResponse, ListSessionsRequest, ListSessionsResponse, Session, SessionDeleted,
    StateResponse, WatchEventsRequest, WatchEventsResponse, WatchSessionRequest,
    WatchSessionResponse,
};
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use self::reply::{ListEventsReply, SessionReply};
use crate::{
    error::{Result as DomainResult, SessionError},
    sessions::{SessionChange, Sessions},
    store::{Appended, SessionStore},
};

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Responses an AppendEvents stream buffers ahead of a slow client.
const STREAM_BUFFER: usize = 32;

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

impl<S: SessionStore> SessionGrpc<S> {
    /// GetSession as [`reply::SessionRoutes`] serves it: the events as stored.
    pub async fn get_session_reply(
        &self,
        request: Request<GetSessionRequest>,
    ) -> Result<Response<SessionReply>, Status> {
        let (request, span) = admit(request, "GetSession")?;
        let session = traced(span, self.sessions.get(request)).await?;
        Ok(Response::new(session.into()))
    }

    /// ListEvents as [`reply::SessionRoutes`] serves it: the events as stored.
    pub async fn list_events_reply(
        &self,
        request: Request<ListEventsRequest>,
    ) -> Result<Response<ListEventsReply>, Status> {
        let (request, span) = admit(request, "ListEvents")?;
        let page = traced(span, self.sessions.list_events(request)).await?;
        Ok(Response::new(page.into()))
    }
}

#[tonic::async_trait]
impl<S: SessionStore> SessionService for SessionGrpc<S> {
    async fn create_session(
        &self,
        request: Request<CreateSessionRequest>,
    ) -> Result<Response<Session>, Status> {
        let (request, span) = admit(request, "CreateSession")?;
        let session = traced(span, self.sessions.create(request)).await?;
        Ok(Response::new(session))
    }

    /// The generated form of [`Self::get_session_reply`], the events decoded: the server
    /// mounts [`reply::SessionRoutes`], and its tests compare the two.
    async fn get_session(
        &self,
        request: Request<GetSessionRequest>,
    ) -> Result<Response<Session>, Status> {
        let (request, span) = admit(request, "GetSession")?;
        let session = traced(span, async { self.sessions.get(request).await?.decode() }).await?;
        Ok(Response::new(session))
    }

    async fn list_sessions(
        &self,
        request: Request<ListSessionsRequest>,
    ) -> Result<Response<ListSessionsResponse>, Status> {
        let (request, span) = admit(request, "ListSessions")?;
        let listed = traced(span, self.sessions.list(request)).await?;
        Ok(Response::new(ListSessionsResponse {
            sessions: listed.page.items,
            next_page_token: listed.page.next_page_token,
            total_size: listed
                .total_size
                .map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        }))
    }

    async fn delete_session(
        &self,
        request: Request<DeleteSessionRequest>,
    ) -> Result<Response<()>, Status> {
        let (request, span) = admit(request, "DeleteSession")?;
        traced(span, self.sessions.delete(request)).await?;
        Ok(Response::new(()))
    }

    async fn append_event(
        &self,
        request: Request<AppendEventRequest>,
    ) -> Result<Response<AppendEventResponse>, Status> {
        let (request, span) = admit(request, "AppendEvent")?;
        let appended = traced(span, self.sessions.append(request)).await?;
        Ok(Response::new(append_response(Ok(appended))))
    }

    type AppendEventsStream = ResponseStream<AppendEventResponse>;

    async fn append_events(
        &self,
        request: Request<Streaming<AppendEventRequest>>,
    ) -> Result<Response<Self::AppendEventsStream>, Status> {
        let grant = grant(&request)?.clone();
        let mut requests = request.into_inner();
        let sessions = self.sessions.clone();
        let stopping = sessions.stopping();
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        // One request at a time, in order: each response answers the request before it. At
        // shutdown the append in progress completes and the stream then ends.
        stopping.clone().spawn(async move {
            loop {
                let next = tokio::select! {
                    next = requests.message() => next,
                    _ = stopping.wait() => return,
                };
                let response = match next {
                    Ok(Some(request)) => Ok(match request.check(&grant) {
                        Ok(()) => {
                            let span = span("AppendEvents", &request);
                            append_response(sessions.append(request).instrument(span).await)
                        }
                        Err(denied) => status_response(denied, 0),
                    }),
                    Ok(None) => return,
                    // The request stream itself broke (e.g. an undecodable message).
                    Err(status) => Err(status),
                };
                let stop = response.is_err();
                if tx.send(response).await.is_err() || stop {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    /// The generated form of [`Self::list_events_reply`], the events decoded (see
    /// [`Self::get_session`]).
    async fn list_events(
        &self,
        request: Request<ListEventsRequest>,
    ) -> Result<Response<ListEventsResponse>, Status> {
        let (request, span) = admit(request, "ListEvents")?;
        let page = traced(span, async {
            self.sessions.list_events(request).await?.decode()
        })
        .await?;
        Ok(Response::new(ListEventsResponse {
            events: page.items,
            next_page_token: page.next_page_token,
        }))
    }

    type WatchSessionStream = ResponseStream<WatchSessionResponse>;

    async fn watch_session(
        &self,
        request: Request<WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        let (request, span) = admit(request, "WatchSession")?;
        let feed = traced(span, self.sessions.watch_session(request)).await?;
        let stream = ReceiverStream::new(feed).map(|item| {
            let change = match item? {
                SessionChange::Event(event) => Change::Event(*event),
                SessionChange::Deleted => Change::Deleted(SessionDeleted {}),
            };
            Ok(WatchSessionResponse {
                change: Some(change),
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }

    type WatchEventsStream = ResponseStream<WatchEventsResponse>;

    async fn watch_events(
        &self,
        request: Request<WatchEventsRequest>,
    ) -> Result<Response<Self::WatchEventsStream>, Status> {
        let (request, span) = admit(request, "WatchEvents")?;
        let feed = traced(span, self.sessions.watch_events(request)).await?;
        let stream = ReceiverStream::new(feed).map(|item| {
            let item = item?;
            Ok(WatchEventsResponse {
                user_id: item.user_id,
                session_id: item.session_id,
                event: Some(item.event),
                cursor: item.cursor,
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_user_state(
        &self,
        request: Request<GetUserStateRequest>,
    ) -> Result<Response<StateResponse>, Status> {
        let (request, span) = admit(request, "GetUserState")?;
        let state = traced(span, self.sessions.user_state(request)).await?;
        Ok(Response::new(StateResponse { state }))
    }

    async fn get_app_state(
        &self,
        request: Request<GetAppStateRequest>,
    ) -> Result<Response<StateResponse>, Status> {
        let (request, span) = admit(request, "GetAppState")?;
        let state = traced(span, self.sessions.app_state(request)).await?;
        Ok(Response::new(StateResponse { state }))
    }

    async fn list_apps(
        &self,
        request: Request<ListAppsRequest>,
    ) -> Result<Response<ListAppsResponse>, Status> {
        // Spans every app, so no single scope to admit: the caller's grant filters the list.
        let grant = grant(&request)?.clone();
        let span = tracing::info_span!("rpc", method = "ListApps", token = grant.name);
        let visible = |app: &str| grant.check_app(app).is_ok();
        let app_names = traced(span, self.sessions.apps(visible)).await?;
        Ok(Response::new(ListAppsResponse { app_names }))
    }
}

/// An append's outcome as a response: in the stream form a failure is answered in-band.
fn append_response(result: DomainResult<Appended>) -> AppendEventResponse {
    match result {
        Ok(appended) => AppendEventResponse {
            event: Some(appended.event),
            last_sequence: appended.last_sequence,
            last_update_time: Some(appended.last_update_time),
            code: 0,
            message: String::new(),
        },
        Err(e) => {
            // A conflict tells the writer where the session is now, as the unary form's
            // trailer does.
            let last_sequence = match &e {
                SessionError::Stale { current, .. } => *current,
                _ => 0,
            };
            status_response(Status::from(e), last_sequence)
        }
    }
}

fn status_response(status: Status, last_sequence: u64) -> AppendEventResponse {
    AppendEventResponse {
        last_sequence,
        code: status.code() as i32,
        message: status.message().to_owned(),
        ..Default::default()
    }
}
