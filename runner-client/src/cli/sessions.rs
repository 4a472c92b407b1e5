//! `sessions list|get|delete`.

use runner_client::json;
use serde_json::json;

use super::{output, Cli, CliError};

/// `sessions list`: the app's sessions (of `--user` if given).
pub(super) async fn list(cli: &Cli) -> Result<(), CliError> {
    let sessions = cli.sessions()?.list(&cli.app, cli.user.as_deref()).await?;
    for session in &sessions {
        if cli.json {
            output::json_line(&json::session(session))?;
        } else {
            let updated = session
                .last_update_time
                .map(|t| t.to_string())
                .unwrap_or_default();
            output::line(&format!(
                "{}  user {}  {}  updated {updated}  state {}",
                session.id,
                session.user_id,
                output::count(session.last_sequence, "event", "events"),
                if session.state.is_empty() {
                    "{}"
                } else {
                    &session.state
                },
            ))?;
        }
    }
    if sessions.is_empty() && !cli.json {
        eprintln!("no sessions in app {}", cli.app);
    }
    Ok(())
}

/// `sessions get`: the session, its state and its events.
pub(super) async fn get(cli: &Cli) -> Result<(), CliError> {
    let id = cli.required_session()?;
    let session = cli
        .sessions()?
        .get(&cli.app, cli.user(), id)
        .await?
        .ok_or_else(|| runner_client::RunnerError::SessionNotFound {
            session_id: id.to_owned(),
        })?;
    if cli.json {
        return Ok(output::json_line(&json::session(&session))?);
    }
    output::line(&format!(
        "session {} of user {} in app {}",
        session.id, session.user_id, session.app_name
    ))?;
    output::line(&format!(
        "state {}",
        if session.state.is_empty() {
            "{}"
        } else {
            &session.state
        }
    ))?;
    for event in &session.events {
        output::line(&output::event_line(event))?;
    }
    Ok(())
}

/// `sessions delete`: deleting a session that does not exist succeeds (the session is gone
/// either way) and says there was none.
pub(super) async fn delete(cli: &Cli) -> Result<(), CliError> {
    let id = cli.required_session()?;
    let existed = cli.sessions()?.delete(&cli.app, cli.user(), id).await?;
    if cli.json {
        output::json_line(&json!({"deleted": id, "existed": existed}))?;
    } else if existed {
        output::line(&format!("deleted session {id}"))?;
    } else {
        output::line(&format!(
            "there was no session {id} of user {} in app {}: nothing deleted",
            cli.user(),
            cli.app
        ))?;
    }
    Ok(())
}
