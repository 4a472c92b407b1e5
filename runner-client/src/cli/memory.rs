//! `memory search|add-session`.

use runner_client::{event::content_text, json};
use serde_json::json;

use super::{output, Cli, CliError};

/// `memory search QUERY`: the user's best matching memories, best first.
pub(super) async fn search(cli: &Cli, query: &str) -> Result<(), CliError> {
    let memories = cli.memory()?.search(&cli.app, cli.user(), query).await?;
    for memory in &memories {
        if cli.json {
            output::json_line(&json::memory_entry(memory))?;
        } else {
            let text = memory
                .content
                .as_ref()
                .map(|c| content_text(c, " "))
                .unwrap_or_default();
            output::line(&format!(
                "{:.3}  {}: {text}  (session {})",
                memory.score, memory.author, memory.session_id
            ))?;
        }
    }
    if memories.is_empty() && !cli.json {
        eprintln!("nothing in memory matches {query:?}");
    }
    Ok(())
}

/// `memory add-session`: memory-svc (re)ingests the `--session` from session-svc.
pub(super) async fn add_session(cli: &Cli) -> Result<(), CliError> {
    let id = cli.required_session()?;
    let entries = cli.memory()?.add_session(&cli.app, cli.user(), id).await?;
    if cli.json {
        output::json_line(&json!({"session_id": id, "entries": entries}))?;
    } else {
        output::line(&format!("session {id} is in memory: {entries} entries"))?;
    }
    Ok(())
}
