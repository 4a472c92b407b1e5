//! GetSession and ListEvents replies built from the events' stored bytes.
//!
//! Both stores keep each event as its protobuf encoding, so a reply can carry those bytes as
//! they are instead of decoding every event into an `Event` and encoding it again: on a
//! 1,000-event session that round trip was most of the server's time. An embedded message
//! and a `bytes` field travel alike on the wire (a length-delimited field), so [`SessionReply`]
//! and [`ListEventsReply`] declare the events as `bytes` under the same field numbers, field
//! for field the messages of `adk.session.v1`: a client reads them as `Session` and
//! `ListEventsResponse`, byte for byte what encoding the decoded events gives.
//!
//! The generated service answers with the generated messages, so [`SessionRoutes`] serves these
//! two methods itself, through the same handlers, and hands every other call to it.

use std::{
    convert::Infallible,
    sync::Arc,
    task::{Context, Poll},
};

use adk_proto::session::v1::{
    session_service_server::SessionServiceServer, GetSessionRequest, ListEventsRequest, Session,
};
use prost::bytes::Bytes;
use prost_types::Timestamp;
use tonic::{
    body::Body,
    codegen::{http, BoxFuture, Service},
    server::{Grpc, NamedService, UnaryService},
    Request, Response, Status,
};
use tonic_prost::ProstCodec;

use super::SessionGrpc;
use crate::store::{EncodedEvent, Page, SessionStore, StoredSession};

/// `adk.session.v1.Session`, its events as stored.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionReply {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub app_name: String,
    #[prost(string, tag = "3")]
    pub user_id: String,
    #[prost(string, tag = "4")]
    pub state: String,
    /// Encoded `Event`s.
    #[prost(bytes = "bytes", repeated, tag = "5")]
    pub events: Vec<Bytes>,
    #[prost(message, optional, tag = "6")]
    pub create_time: Option<Timestamp>,
    #[prost(message, optional, tag = "7")]
    pub last_update_time: Option<Timestamp>,
    #[prost(uint64, tag = "8")]
    pub last_sequence: u64,
    #[prost(message, optional, tag = "9")]
    pub expire_time: Option<Timestamp>,
}

impl From<StoredSession> for SessionReply {
    fn from(stored: StoredSession) -> Self {
        // Every field named: a field added to `Session` does not compile until it is added here.
        let Session {
            id,
            app_name,
            user_id,
            state,
            events: _,
            create_time,
            last_update_time,
            last_sequence,
            expire_time,
        } = stored.session;
        Self {
            id,
            app_name,
            user_id,
            state,
            events: stored.events.into_iter().map(|e| e.bytes).collect(),
            create_time,
            last_update_time,
            last_sequence,
            expire_time,
        }
    }
}

/// `adk.session.v1.ListEventsResponse`, its events as stored.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListEventsReply {
    /// Encoded `Event`s.
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub events: Vec<Bytes>,
    #[prost(string, tag = "2")]
    pub next_page_token: String,
}

impl From<Page<EncodedEvent>> for ListEventsReply {
    fn from(page: Page<EncodedEvent>) -> Self {
        Self {
            events: page.items.into_iter().map(|e| e.bytes).collect(),
            next_page_token: page.next_page_token,
        }
    }
}

const GET_SESSION: &str = "/adk.session.v1.SessionService/GetSession";
const LIST_EVENTS: &str = "/adk.session.v1.SessionService/ListEvents";

/// The session service: GetSession and ListEvents answered with [`SessionReply`] and
/// [`ListEventsReply`], every other method by the generated server.
pub struct SessionRoutes<S> {
    handlers: Arc<SessionGrpc<S>>,
    generated: SessionServiceServer<SessionGrpc<S>>,
    max_decoding_message_size: usize,
}

impl<S: SessionStore> SessionRoutes<S> {
    /// Requests larger than `max_decoding_message_size` are refused before they are decoded.
    pub fn new(handlers: SessionGrpc<S>, max_decoding_message_size: usize) -> Self {
        let handlers = Arc::new(handlers);
        Self {
            generated: SessionServiceServer::from_arc(handlers.clone())
                .max_decoding_message_size(max_decoding_message_size),
            handlers,
            max_decoding_message_size,
        }
    }

    /// Serves one unary call of `method` with the prost codec of its own reply type.
    fn unary<Req, M>(
        &self,
        method: M,
        req: http::Request<Body>,
    ) -> BoxFuture<http::Response<Body>, Infallible>
    where
        Req: prost::Message + Default + Send + 'static,
        M: UnaryService<Req> + Send + 'static,
        M::Response: prost::Message + Send + 'static,
        M::Future: Send,
    {
        let max = self.max_decoding_message_size;
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<M::Response, Req>::default())
                .apply_max_message_size_config(Some(max), None);
            Ok(grpc.unary(method, req).await)
        })
    }
}

impl<S> Clone for SessionRoutes<S> {
    fn clone(&self) -> Self {
        Self {
            handlers: self.handlers.clone(),
            generated: self.generated.clone(),
            max_decoding_message_size: self.max_decoding_message_size,
        }
    }
}

impl<S> NamedService for SessionRoutes<S> {
    const NAME: &'static str = <SessionServiceServer<SessionGrpc<S>> as NamedService>::NAME;
}

impl<S: SessionStore> Service<http::Request<Body>> for SessionRoutes<S> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match req.uri().path() {
            GET_SESSION => self.unary(GetSessionMethod(self.handlers.clone()), req),
            LIST_EVENTS => self.unary(ListEventsMethod(self.handlers.clone()), req),
            _ => self.generated.call(req),
        }
    }
}

struct GetSessionMethod<S>(Arc<SessionGrpc<S>>);

impl<S: SessionStore> UnaryService<GetSessionRequest> for GetSessionMethod<S> {
    type Response = SessionReply;
    type Future = BoxFuture<Response<SessionReply>, Status>;

    fn call(&mut self, request: Request<GetSessionRequest>) -> Self::Future {
        let handlers = self.0.clone();
        Box::pin(async move { handlers.get_session_reply(request).await })
    }
}

struct ListEventsMethod<S>(Arc<SessionGrpc<S>>);

impl<S: SessionStore> UnaryService<ListEventsRequest> for ListEventsMethod<S> {
    type Response = ListEventsReply;
    type Future = BoxFuture<Response<ListEventsReply>, Status>;

    fn call(&mut self, request: Request<ListEventsRequest>) -> Self::Future {
        let handlers = self.0.clone();
        Box::pin(async move { handlers.list_events_reply(request).await })
    }
}
