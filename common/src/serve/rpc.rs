//! What every RPC does before its handler body: check the caller's token against the app and
//! user the request names, and open a log span naming them.
//!
//! [`Scoped`] says, for each request message of both services, which app, user and session it
//! is about.

use std::future::Future;

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, AppendMemoryStreamRequest, DeleteMemoryRequest,
        FlushMemoryStreamRequest, GenerateMemoriesRequest, GetGenerationJobRequest,
        ListMemoriesRequest, ListMemoryRevisionsRequest, ListMemoryStreamsRequest,
        PurgeMemoriesRequest, RollbackMemoryRequest, SearchMemoryRequest,
    },
    session::v1::{
        AppendEventRequest, CreateSessionRequest, DeleteSessionRequest, GetAppStateRequest,
        GetSessionRequest, GetUserStateRequest, ListEventsRequest, ListSessionsRequest,
        WatchEventsRequest, WatchSessionRequest,
    },
};
use tonic::{Request, Status};
use tracing::{Instrument, Span};

use crate::serve::auth::{grant, Grant};

/// The app, user and session a request is about: what its caller's token must cover, and what
/// its log span names.
pub trait Scoped {
    fn app(&self) -> &str;
    /// `None`: the request spans all users of the app (or, for app state, no user at all).
    fn user(&self) -> Option<&str>;
    fn session(&self) -> &str {
        ""
    }
    /// Whether `grant` covers what the request touches.
    fn check(&self, grant: &Grant) -> Result<(), Status> {
        grant.check(self.app(), self.user())
    }
}

/// Requests that name one session.
macro_rules! session_scoped {
    ($($request:ty),*) => {$(
        impl Scoped for $request {
            fn app(&self) -> &str {
                &self.app_name
            }
            fn user(&self) -> Option<&str> {
                Some(&self.user_id)
            }
            fn session(&self) -> &str {
                &self.session_id
            }
        }
    )*};
}

session_scoped!(
    CreateSessionRequest,
    GetSessionRequest,
    DeleteSessionRequest,
    AppendEventRequest,
    ListEventsRequest,
    WatchSessionRequest
);

impl Scoped for ListSessionsRequest {
    fn app(&self) -> &str {
        &self.app_name
    }
    fn user(&self) -> Option<&str> {
        self.user_id.as_deref()
    }
}

impl Scoped for WatchEventsRequest {
    fn app(&self) -> &str {
        &self.app_name
    }
    fn user(&self) -> Option<&str> {
        Some(self.user_id.as_str()).filter(|u| !u.is_empty())
    }
}

/// A purge names one user, or with none every user of the app.
impl Scoped for PurgeMemoriesRequest {
    fn app(&self) -> &str {
        &self.app_name
    }
    fn user(&self) -> Option<&str> {
        Some(self.user_id.as_str()).filter(|u| !u.is_empty())
    }
}

impl Scoped for GetAppStateRequest {
    fn app(&self) -> &str {
        &self.app_name
    }
    fn user(&self) -> Option<&str> {
        None
    }
    /// App state is shared by all users of an app, so a token limited to some users may still
    /// read it.
    fn check(&self, grant: &Grant) -> Result<(), Status> {
        grant.check_app(&self.app_name)
    }
}

/// Memory requests that name one user of one app.
macro_rules! user_scoped {
    ($($request:ty),*) => {$(
        impl Scoped for $request {
            fn app(&self) -> &str {
                &self.app_name
            }
            fn user(&self) -> Option<&str> {
                Some(&self.user_id)
            }
        }
    )*};
}

user_scoped!(
    GetUserStateRequest,
    AddEventsToMemoryRequest,
    AddMemoryRequest,
    SearchMemoryRequest,
    DeleteMemoryRequest,
    ListMemoriesRequest,
    GenerateMemoriesRequest,
    GetGenerationJobRequest,
    ListMemoryRevisionsRequest,
    RollbackMemoryRequest,
    AppendMemoryStreamRequest,
    FlushMemoryStreamRequest,
    ListMemoryStreamsRequest
);

impl Scoped for AddSessionToMemoryRequest {
    fn app(&self) -> &str {
        match &self.source {
            Some(Source::Session(s)) => &s.app_name,
            Some(Source::SessionRef(r)) => &r.app_name,
            None => "",
        }
    }
    fn user(&self) -> Option<&str> {
        match &self.source {
            Some(Source::Session(s)) => Some(&s.user_id),
            Some(Source::SessionRef(r)) => Some(&r.user_id),
            None => None,
        }
    }
    fn session(&self) -> &str {
        match &self.source {
            Some(Source::Session(s)) => &s.id,
            Some(Source::SessionRef(r)) => &r.session_id,
            None => "",
        }
    }
    /// Without a source the request names nothing to check; the domain refuses it.
    fn check(&self, grant: &Grant) -> Result<(), Status> {
        match self.source {
            Some(_) => grant.check(self.app(), self.user()),
            None => Ok(()),
        }
    }
}

/// The log span of one request.
pub fn span(method: &'static str, request: &impl Scoped) -> Span {
    tracing::info_span!(
        "rpc",
        method,
        app = request.app(),
        user = request.user().unwrap_or(""),
        session = request.session()
    )
}

/// Checks the caller's token against the request and opens the request's log span.
pub fn admit<T: Scoped>(request: Request<T>, method: &'static str) -> Result<(T, Span), Status> {
    request.get_ref().check(grant(&request)?)?;
    let span = span(method, request.get_ref());
    Ok((request.into_inner(), span))
}

/// Runs a domain call inside `span`, turning its error into a status there (so failures are
/// logged with the request's app, user and session).
pub async fn traced<T, E: Into<Status>>(
    span: Span,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, Status> {
    async move { call.await.map_err(Into::into) }
        .instrument(span)
        .await
}
