//! [`SessionClient`]: the calls to session-svc, sessions read whole page by page.

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, AppendEventRequest, AppendEventResponse,
    CreateSessionRequest, DeleteSessionRequest, Event, GetSessionRequest, ListEventsRequest,
    ListSessionsRequest, Session, WatchEventsRequest, WatchEventsResponse, WatchSessionRequest,
    WatchSessionResponse,
};
use tokio_stream::Stream;
use tonic::{transport::Channel, Code, Status, Streaming};

use super::{
    failures::too_large,
    remote::{Access, Remote},
    LIST_PAGE, MAX_MESSAGE_BYTES,
};
use crate::error::{Result, RunnerError};

/// A client of session-svc.
#[derive(Debug, Clone)]
pub struct SessionClient {
    remote: Remote,
    client: SessionServiceClient<Channel>,
}

impl SessionClient {
    /// A client of the session-svc at `endpoint` (e.g. `http://127.0.0.1:50051`).
    pub fn connect(endpoint: &str) -> Result<Self> {
        Self::connect_with(endpoint, &Access::default())
    }

    /// A client of a session-svc that requires TLS or a token.
    pub fn connect_with(endpoint: &str, access: &Access) -> Result<Self> {
        let (remote, channel) = Remote::channel("session-svc", endpoint, access)?;
        let client = SessionServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { remote, client })
    }

    /// The address this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.remote.endpoint
    }

    /// The whole session, or `None` when it does not exist.
    ///
    /// The session (state and metadata) comes first, without events; its events then come page
    /// by page through ListEvents, up to the session's `last_sequence` at that moment, so the
    /// state and the events match and no single message has to hold a large session.
    pub async fn get(&self, app: &str, user: &str, session: &str) -> Result<Option<Session>> {
        let Some(mut found) = self.get_without_events(app, user, session).await? else {
            return Ok(None);
        };
        found.events = self.events(app, user, session, found.last_sequence).await?;
        Ok(Some(found))
    }

    /// The session's state and metadata without its events, or `None` when it does not exist.
    pub async fn get_without_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
    ) -> Result<Option<Session>> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            num_recent_events: Some(0),
            ..Default::default()
        };
        match self
            .client
            .clone()
            .get_session(self.remote.request(request))
            .await
        {
            Ok(response) => Ok(Some(response.into_inner())),
            Err(status) if status.code() == Code::NotFound => Ok(None),
            Err(status) => Err(self.remote.error("GetSession", status)),
        }
    }

    /// The session's stored events up to sequence `last`, in order. A page too large for one
    /// message (events of many megabytes each) is fetched again in smaller pages.
    async fn events(&self, app: &str, user: &str, session: &str, last: u64) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut page_size = LIST_PAGE;
        let mut after = 0;
        while after < last {
            let page = match self
                .page_of_events(app, user, session, after, page_size)
                .await
            {
                Ok(page) => page,
                Err(status) if too_large(&status) && page_size > 1 => {
                    page_size /= 2;
                    continue;
                }
                Err(status) => return Err(self.events_error(session, status)),
            };
            let Some(next) = page.last().map(|e| e.sequence) else {
                break;
            };
            events.extend(page.into_iter().filter(|e| e.sequence <= last));
            after = next;
        }
        Ok(events)
    }

    /// Up to `page_size` stored events of the session with a sequence above `after`, in order.
    pub async fn events_after(
        &self,
        app: &str,
        user: &str,
        session: &str,
        after: u64,
        page_size: i32,
    ) -> Result<Vec<Event>> {
        self.page_of_events(app, user, session, after, page_size)
            .await
            .map_err(|status| self.events_error(session, status))
    }

    async fn page_of_events(
        &self,
        app: &str,
        user: &str,
        session: &str,
        after: u64,
        page_size: i32,
    ) -> std::result::Result<Vec<Event>, Status> {
        let request = ListEventsRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            after_sequence: after,
            page_size,
            page_token: String::new(),
            ..Default::default()
        };
        let page = self
            .client
            .clone()
            .list_events(self.remote.request(request))
            .await?;
        Ok(page.into_inner().events)
    }

    fn events_error(&self, session: &str, status: Status) -> RunnerError {
        if status.code() == Code::NotFound {
            RunnerError::SessionNotFound {
                session_id: session.to_owned(),
            }
        } else {
            self.remote.error("ListEvents", status)
        }
    }

    /// The session, created empty when it does not exist yet (R1: auto-create).
    pub async fn get_or_create(&self, app: &str, user: &str, session: &str) -> Result<Session> {
        if let Some(found) = self.get(app, user, session).await? {
            return Ok(found);
        }
        let request = CreateSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
            ..Default::default()
        };
        match self
            .client
            .clone()
            .create_session(self.remote.request(request))
            .await
        {
            Ok(response) => Ok(response.into_inner()),
            // Another runner created it between our get and create: use theirs.
            Err(status) if status.code() == Code::AlreadyExists => self
                .get(app, user, session)
                .await?
                .ok_or_else(|| RunnerError::SessionNotFound {
                    session_id: session.to_owned(),
                }),
            Err(status) => Err(self.remote.error("CreateSession", status)),
        }
    }

    /// Every session of the app (of one user when `user` is given), without events, in the
    /// service's order (least recently updated first).
    pub async fn list(&self, app: &str, user: Option<&str>) -> Result<Vec<Session>> {
        Ok(self.list_up_to(app, user, usize::MAX).await?.0)
    }

    /// [`Self::list`], stopping after the page that reaches `cap` sessions: at most `cap` of
    /// them, and whether there were more.
    pub async fn list_up_to(
        &self,
        app: &str,
        user: Option<&str>,
        cap: usize,
    ) -> Result<(Vec<Session>, bool)> {
        let mut sessions = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = ListSessionsRequest {
                app_name: app.to_owned(),
                user_id: user.map(str::to_owned),
                page_size: LIST_PAGE,
                page_token,
                ..Default::default()
            };
            let page = self
                .client
                .clone()
                .list_sessions(self.remote.request(request))
                .await
                .map_err(|s| self.remote.error("ListSessions", s))?
                .into_inner();
            sessions.extend(page.sessions);
            if page.next_page_token.is_empty() {
                return Ok((sessions, false));
            }
            if sessions.len() >= cap {
                sessions.truncate(cap);
                return Ok((sessions, true));
            }
            page_token = page.next_page_token;
        }
    }

    /// Deletes the session and its events; returns whether there was one.
    ///
    /// DeleteSession does not say (it is idempotent), so the session is looked up first; a
    /// session created between the two calls is deleted and reported as absent.
    pub async fn delete(&self, app: &str, user: &str, session: &str) -> Result<bool> {
        let existed = self.get_without_events(app, user, session).await?.is_some();
        let request = DeleteSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: session.to_owned(),
        };
        self.client
            .clone()
            .delete_session(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("DeleteSession", s))?;
        Ok(existed)
    }

    /// Opens an AppendEvents stream fed by `requests`.
    pub(crate) async fn append_events(
        &self,
        requests: impl Stream<Item = AppendEventRequest> + Send + 'static,
    ) -> Result<Streaming<AppendEventResponse>> {
        self.client
            .clone()
            .append_events(self.remote.request(requests))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.remote.error("AppendEvents", s))
    }

    /// The error for a failure reported inside the AppendEvents stream.
    pub(crate) fn append_error(&self, status: Status) -> RunnerError {
        self.remote.error("AppendEvents", status)
    }

    /// Stored events of the session with a sequence above `after_sequence`, then live appends
    /// (and live partial events if `include_partial`).
    pub async fn watch_session(
        &self,
        request: WatchSessionRequest,
    ) -> Result<impl Stream<Item = Result<WatchSessionResponse>> + Send + Unpin + 'static> {
        let session_id = request.session_id.clone();
        let stream = match self
            .client
            .clone()
            .watch_session(self.remote.request(request))
            .await
        {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::NotFound => {
                return Err(RunnerError::SessionNotFound { session_id })
            }
            Err(status) => return Err(self.remote.error("WatchSession", status)),
        };
        Ok(self.follow("WatchSession", stream))
    }

    /// Every committed event of an app (of one user if the request names one), each with a
    /// cursor to resume after it.
    pub async fn watch_events(
        &self,
        request: WatchEventsRequest,
    ) -> Result<impl Stream<Item = Result<WatchEventsResponse>> + Send + Unpin + 'static> {
        let stream = self
            .client
            .clone()
            .watch_events(self.remote.request(request))
            .await
            .map_err(|s| self.remote.error("WatchEvents", s))?
            .into_inner();
        Ok(self.follow("WatchEvents", stream))
    }

    fn follow<T>(
        &self,
        rpc: &'static str,
        stream: Streaming<T>,
    ) -> impl Stream<Item = Result<T>> + Send + Unpin + 'static
    where
        T: Send + 'static,
    {
        use tokio_stream::StreamExt as _;
        let remote = self.remote.clone();
        stream.map(move |item| item.map_err(|s| remote.error(rpc, s)))
    }
}
