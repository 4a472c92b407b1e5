//! `watch`: tail one session (WatchSession) or an app's feed (WatchEvents), printing each
//! event as it comes, until the session is deleted or the user interrupts.

use adk_proto::session::v1::{
    watch_session_response::Change, WatchEventsRequest, WatchSessionRequest,
};
use runner_client::json;
use serde_json::json;
use tokio_stream::StreamExt;

use super::{output, Cli, CliError};

/// `watch`: the session's stored events after `after_sequence`, then live ones.
pub(super) async fn session(cli: &Cli, after_sequence: u64, partial: bool) -> Result<(), CliError> {
    let sessions = cli.sessions()?;
    let mut changes = sessions
        .watch_session(WatchSessionRequest {
            app_name: cli.app.clone(),
            user_id: cli.user().to_owned(),
            session_id: cli.required_session()?.to_owned(),
            after_sequence,
            include_partial: partial,
        })
        .await?;
    while let Some(change) = changes.next().await {
        match change?.change {
            Some(Change::Event(event)) if cli.json => output::json_line(&json::event(&event))?,
            Some(Change::Event(event)) => output::line(&output::event_line(&event))?,
            Some(Change::Deleted(_)) if cli.json => output::json_line(&json!({"deleted": {}}))?,
            Some(Change::Deleted(_)) => output::line("(session deleted)")?,
            None => {}
        }
    }
    Ok(())
}

/// `watch --app-feed`: every committed event of the app (of `--user` if given).
pub(super) async fn app_feed(cli: &Cli, cursor: Option<&str>) -> Result<(), CliError> {
    let sessions = cli.sessions()?;
    let mut feed = sessions
        .watch_events(WatchEventsRequest {
            app_name: cli.app.clone(),
            user_id: cli.user.clone().unwrap_or_default(),
            cursor: cursor.unwrap_or_default().to_owned(),
        })
        .await?;
    while let Some(item) = feed.next().await {
        let item = item?;
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
    }
    Ok(())
}
