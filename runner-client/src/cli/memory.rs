//! `memory search|add-session|list|delete`.

use adk_proto::memory::v1::{MemoryEntry, SearchMode};
use runner_client::{event::content_text, json, MemoryTarget};
use serde_json::json;

use super::{output, Cli, CliError};

/// `memory search QUERY [--mode MODE] [--language CODE]`: the user's best matching memories,
/// best first.
pub(super) async fn search(
    cli: &Cli,
    query: &str,
    mode: SearchMode,
    language: Option<&str>,
) -> Result<(), CliError> {
    let memories = (cli.memory()?)
        .search_with(
            &cli.app,
            cli.user(),
            query,
            language.unwrap_or_default(),
            mode,
        )
        .await?;
    for memory in &memories {
        if cli.json {
            output::json_line(&json::memory_entry(memory))?;
        } else {
            output::line(&format!("{:.3}  {}", memory.score, memory_line(memory)))?;
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
        output::line(&format!(
            "session {id} is in memory: {}",
            output::count(entries, "entry", "entries")
        ))?;
    }
    Ok(())
}

/// `memory list`: every memory of the user, oldest first.
pub(super) async fn list(cli: &Cli) -> Result<(), CliError> {
    let memories = cli.memory()?.list(&cli.app, cli.user()).await?;
    for memory in &memories {
        if cli.json {
            output::json_line(&json::memory_entry(memory))?;
        } else {
            output::line(&format!("{}  {}", memory.id, memory_line(memory)))?;
        }
    }
    if memories.is_empty() && !cli.json {
        eprintln!("no memories of user {} in app {}", cli.user(), cli.app);
    }
    Ok(())
}

/// `memory delete`: the memory `id`, or `all` of the user's, or those of `--session`.
pub(super) async fn delete(cli: &Cli, id: Option<&str>, all: bool) -> Result<(), CliError> {
    let target = match (id, all) {
        (Some(id), _) => MemoryTarget::Id(id.to_owned()),
        (None, true) => MemoryTarget::All,
        (None, false) => MemoryTarget::Session(
            cli.session
                .clone()
                .ok_or("memory delete needs --id, --all or --session")?,
        ),
    };
    let deleted = cli.memory()?.delete(&cli.app, cli.user(), target).await?;
    if cli.json {
        output::json_line(&json!({"deleted": deleted}))?;
    } else {
        output::line(&format!(
            "deleted {}",
            output::count(deleted, "memory", "memories")
        ))?;
    }
    Ok(())
}

/// A memory for people: `author: text  (session id)`.
fn memory_line(memory: &MemoryEntry) -> String {
    let text = memory
        .content
        .as_ref()
        .map(|c| content_text(c, " "))
        .unwrap_or_default();
    let author = if memory.author.is_empty() {
        String::new()
    } else {
        format!("{}: ", memory.author)
    };
    if memory.session_id.is_empty() {
        format!("{author}{text}")
    } else {
        format!("{author}{text}  (session {})", memory.session_id)
    }
}
