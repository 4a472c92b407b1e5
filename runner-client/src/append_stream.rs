//! One `AppendEvents` stream per invocation: every event of the turn goes over it, stored
//! events with `expected_last_sequence`, so a concurrent writer is detected instead of
//! interleaved.
//!
//! The server answers each request, in order. A stored event waits for its answer (the agent
//! must see the stored event before it goes on). Partial events are answered too, but nobody
//! needs those answers before the next stored event, so up to [`PARTIALS_IN_FLIGHT`] of them are
//! sent without waiting: a streaming reply is not slowed to one fragment per round trip.

use adk_proto::session::v1::{AppendEventRequest, AppendEventResponse, Event};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

use crate::{
    clients::SessionClient,
    error::{Result, RunnerError},
};

/// Partial events sent ahead of their answers. Well below what the server buffers, so neither
/// side ever waits on the other with both buffers full.
const PARTIALS_IN_FLIGHT: usize = 16;

/// The open stream of one invocation.
pub(crate) struct AppendStream {
    client: SessionClient,
    app_name: String,
    user_id: String,
    session_id: String,
    requests: mpsc::Sender<AppendEventRequest>,
    responses: Streaming<AppendEventResponse>,
    /// The session's last_sequence as of our last stored event: the next append's precondition.
    last_sequence: u64,
    /// Partial events sent whose answers have not been read yet.
    partials_in_flight: usize,
}

impl AppendStream {
    /// Opens the stream for a session whose last stored event has sequence `last_sequence`.
    pub(crate) async fn open(
        client: &SessionClient,
        app_name: &str,
        user_id: &str,
        session_id: &str,
        last_sequence: u64,
    ) -> Result<Self> {
        let (requests, rx) = mpsc::channel(PARTIALS_IN_FLIGHT + 1);
        let responses = client.append_events(ReceiverStream::new(rx)).await?;
        Ok(Self {
            client: client.clone(),
            app_name: app_name.to_owned(),
            user_id: user_id.to_owned(),
            session_id: session_id.to_owned(),
            requests,
            responses,
            last_sequence,
            partials_in_flight: 0,
        })
    }

    /// Stores a (non-partial) event, on the condition that nobody else appended since our last
    /// one; returns the event as stored (with its sequence, `temp:` keys trimmed).
    pub(crate) async fn store(&mut self, event: Event) -> Result<Event> {
        while self.partials_in_flight > 0 {
            self.partial_answer().await?;
        }
        let expected = self.last_sequence;
        self.send(event, Some(expected)).await?;
        let response = self.answer().await?;
        match Code::from_i32(response.code) {
            Code::Ok => {
                self.last_sequence = response.last_sequence;
                response
                    .event
                    .ok_or_else(|| self.closed("an answer without the stored event"))
            }
            Code::Aborted => Err(RunnerError::Conflict {
                session_id: self.session_id.clone(),
                expected_sequence: expected,
                current_sequence: response.last_sequence,
            }),
            code => Err(self
                .client
                .append_error(Status::new(code, response.message))),
        }
    }

    /// Hands a partial event to the server, which passes it to live watchers without storing it.
    pub(crate) async fn forward_partial(&mut self, event: Event) -> Result<()> {
        if self.partials_in_flight == PARTIALS_IN_FLIGHT {
            self.partial_answer().await?;
        }
        // No precondition: a fragment changes nothing, so it cannot conflict.
        self.send(event, None).await?;
        self.partials_in_flight += 1;
        Ok(())
    }

    /// Ends the stream once the server has answered everything sent.
    pub(crate) async fn finish(mut self) -> Result<()> {
        while self.partials_in_flight > 0 {
            self.partial_answer().await?;
        }
        let Self {
            client,
            requests,
            mut responses,
            ..
        } = self;
        // Closing our side ends the server's; it answers nothing more.
        drop(requests);
        match responses.message().await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err(client.append_error(Status::unavailable(
                "AppendEvents stream broke: an answer to no request",
            ))),
            Err(status) => Err(client.append_error(status)),
        }
    }

    async fn send(&mut self, event: Event, expected_last_sequence: Option<u64>) -> Result<()> {
        let request = AppendEventRequest {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
            event: Some(event),
            expected_last_sequence,
        };
        if self.requests.send(request).await.is_err() {
            return Err(self.closed("the request stream closed"));
        }
        Ok(())
    }

    async fn answer(&mut self) -> Result<AppendEventResponse> {
        match self.responses.message().await {
            Ok(Some(response)) => Ok(response),
            Ok(None) => Err(self.closed("the stream ended before answering")),
            Err(status) => Err(self.client.append_error(status)),
        }
    }

    /// Reads the answer to the oldest partial event in flight. A refused fragment (say, one
    /// over the size limit) only means watchers missed it; the caller already has it.
    async fn partial_answer(&mut self) -> Result<()> {
        let response = self.answer().await?;
        self.partials_in_flight -= 1;
        if response.code != 0 {
            tracing::warn!(
                session_id = %self.session_id,
                code = ?Code::from_i32(response.code),
                message = %response.message,
                "session-svc refused a partial event"
            );
        }
        Ok(())
    }

    fn closed(&self, what: &str) -> RunnerError {
        self.client.append_error(Status::unavailable(format!(
            "AppendEvents stream broke: {what}"
        )))
    }
}
