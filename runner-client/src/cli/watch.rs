//! `watch`: tail one session (WatchSession) or an app's feed (WatchEvents), printing each
//! event as it comes, until the session is deleted or the user interrupts.
//!
//! A stream that breaks after it was open (the server restarts, say: a stopping server ends its
//! streams so that clients reconnect) is opened again with backoff, resuming after the last
//! event printed, and stderr says so. After `--give-up-after` seconds without a stream the
//! command fails. A stream that cannot be opened in the first place fails at once; with
//! `--wait`, a session that does not exist yet is waited for instead.

use std::time::{Duration, Instant};

use adk_proto::session::v1::{
    watch_session_response::Change, WatchEventsRequest, WatchSessionRequest,
};
use runner_client::{json, RunnerError};
use serde_json::json;
use tokio_stream::StreamExt;
use tonic::Code;

use super::{output, Cli, CliError};

/// How often `--wait` looks for the session again.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// The first wait before reconnecting; each failed attempt doubles it, up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// `watch`: the session's stored events after `after_sequence`, then live ones; with `wait`,
/// once the session exists.
pub(super) async fn session(
    cli: &Cli,
    after_sequence: u64,
    partial: bool,
    give_up_after: u64,
    wait: bool,
) -> Result<(), CliError> {
    let sessions = cli.sessions()?;
    let session_id = cli.required_session()?.to_owned();
    let mut last = after_sequence;
    let mut reconnect = Reconnect::new(give_up_after);
    let mut waiting = false;
    loop {
        let request = WatchSessionRequest {
            app_name: cli.app.clone(),
            user_id: cli.user().to_owned(),
            session_id: session_id.clone(),
            after_sequence: last,
            include_partial: partial,
        };
        let mut changes = match sessions.watch_session(request).await {
            Ok(changes) => changes,
            Err(e) if reconnect.is_reconnecting() && can_retry(&e) => {
                reconnect
                    .wait(&e.to_string(), &format!("after #{last}"))
                    .await?;
                continue;
            }
            Err(RunnerError::SessionNotFound { .. }) if wait => {
                if !waiting {
                    waiting = true;
                    eprintln!(
                        "runner-client: session {session_id} does not exist yet; waiting for it"
                    );
                }
                tokio::time::sleep(WAIT_POLL).await;
                continue;
            }
            Err(e @ RunnerError::SessionNotFound { .. }) => {
                return Err(format!("{e} (watch --wait waits for it to be created)").into())
            }
            Err(e) => return Err(e.into()),
        };
        reconnect.connected();
        let broke = loop {
            match changes.next().await {
                None => {
                    break format!(
                        "the stream from session-svc at {} ended",
                        sessions.endpoint()
                    )
                }
                Some(Err(e)) if can_retry(&e) => break e.to_string(),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(change)) => match change.change {
                    Some(Change::Event(event)) => {
                        if event.partial != Some(true) {
                            last = event.sequence;
                        }
                        if cli.json {
                            output::json_line(&json::event(&event))?;
                        } else {
                            output::line(&output::event_line(&event))?;
                        }
                    }
                    Some(Change::Deleted(_)) => {
                        if cli.json {
                            output::json_line(&json!({"deleted": {}}))?;
                        } else {
                            output::line("(session deleted)")?;
                        }
                        return Ok(());
                    }
                    None => {}
                },
            }
        };
        reconnect.wait(&broke, &format!("after #{last}")).await?;
    }
}

/// `watch --app-feed`: every committed event of the app (of `--user` if given).
pub(super) async fn app_feed(
    cli: &Cli,
    cursor: Option<&str>,
    give_up_after: u64,
) -> Result<(), CliError> {
    let sessions = cli.sessions()?;
    let mut cursor = cursor.unwrap_or_default().to_owned();
    let mut reconnect = Reconnect::new(give_up_after);
    loop {
        let request = WatchEventsRequest {
            app_name: cli.app.clone(),
            user_id: cli.user.clone().unwrap_or_default(),
            cursor: cursor.clone(),
        };
        let resume = if cursor.is_empty() {
            "from now (no event was seen yet)".to_owned()
        } else {
            format!("after cursor {cursor}")
        };
        let mut feed = match sessions.watch_events(request).await {
            Ok(feed) => feed,
            Err(e) if reconnect.is_reconnecting() && can_retry(&e) => {
                reconnect.wait(&e.to_string(), &resume).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        reconnect.connected();
        let broke = loop {
            match feed.next().await {
                None => {
                    break format!(
                        "the stream from session-svc at {} ended",
                        sessions.endpoint()
                    )
                }
                Some(Err(e)) if can_retry(&e) => break e.to_string(),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(item)) => {
                    if cli.json {
                        output::json_line(&json::app_event(&item))?;
                    } else if let Some(event) = &item.event {
                        output::line(&format!(
                            "{}/{} {}",
                            item.user_id,
                            item.session_id,
                            output::event_line(event)
                        ))?;
                    }
                    cursor = item.cursor;
                }
            }
        };
        let resume = if cursor.is_empty() {
            "from now (no event was seen yet)".to_owned()
        } else {
            format!("after cursor {cursor}")
        };
        reconnect.wait(&broke, &resume).await?;
    }
}

/// Whether a broken stream is worth opening again: the server went away or failed
/// transiently, as opposed to refusing the request.
fn can_retry(e: &RunnerError) -> bool {
    match e {
        RunnerError::Unreachable { .. } => true,
        RunnerError::Service { code, .. } => matches!(
            code,
            Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
        ),
        _ => false,
    }
}

/// Backoff between reconnection attempts, and the deadline of one outage.
struct Reconnect {
    give_up_after: Duration,
    delay: Duration,
    /// When the stream broke, while it is not open again.
    broken_since: Option<Instant>,
}

impl Reconnect {
    fn new(give_up_after_secs: u64) -> Self {
        Self {
            give_up_after: Duration::from_secs(give_up_after_secs),
            delay: FIRST_DELAY,
            broken_since: None,
        }
    }

    fn is_reconnecting(&self) -> bool {
        self.broken_since.is_some()
    }

    /// The stream is open (again).
    fn connected(&mut self) {
        if self.broken_since.take().is_some() {
            eprintln!("runner-client: reconnected");
        }
        self.delay = FIRST_DELAY;
    }

    /// Waits before the next attempt, saying why and from where the watch resumes; fails once
    /// the outage has lasted `give_up_after`.
    async fn wait(&mut self, why: &str, resume: &str) -> Result<(), CliError> {
        let since = *self.broken_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.give_up_after {
            return Err(format!(
                "{why}; gave up reconnecting after {} s",
                self.give_up_after.as_secs()
            )
            .into());
        }
        eprintln!(
            "runner-client: {why}; reconnecting in {:.1} s, resuming {resume}",
            self.delay.as_secs_f64()
        );
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(MAX_DELAY);
        Ok(())
    }
}
