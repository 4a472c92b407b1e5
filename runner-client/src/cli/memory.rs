//! `memory search|add|add-session|generate|job|revisions|rollback|list|purge|stream|delete`.

use std::time::Duration;

use adk_proto::{
    memory::v1::{
        AddMemoryRequest, GenerationJob, GenerationState, ListMemoriesRequest, MemoryEntry,
        MemoryFilter, MemoryKind, MemoryRevision, PurgeMemoriesRequest, SearchMemoryRequest,
        SearchMode,
    },
    session::v1::{
        part::{self, Data},
        Content, Event, Part,
    },
};
use prost_types::Timestamp;
use runner_client::{filter, json, GenerateSource, MemoryTarget};
use serde_json::json;

use super::{output, Cli, CliError, FilterArgs, ValidityArgs};

/// The filters of `memory search`, `memory list` and `memory purge`, as the requests carry
/// them.
pub(super) struct Filter {
    filter: Option<MemoryFilter>,
    author: String,
    after: Option<Timestamp>,
    before: Option<Timestamp>,
    as_of: Option<Timestamp>,
    include_superseded: bool,
}

/// The time a flag gives, or why it is not one.
pub(super) fn time(flag: &str, text: &Option<String>) -> Result<Option<Timestamp>, CliError> {
    text.as_deref()
        .map(|t| {
            filter::time(t).ok_or_else(|| {
                format!("{flag}: {t:?} is not an RFC 3339 time (2026-05-01T12:00:00Z)").into()
            })
        })
        .transpose()
}

impl Filter {
    /// The filter the flags give (with the validity flags of a search or listing), or the flag
    /// that is not understood.
    pub(super) fn of(args: &FilterArgs, validity: Option<&ValidityArgs>) -> Result<Self, CliError> {
        let filter = filter::memory_filter(&args.groups, &args.topics)
            .map_err(|e| format!("--filter: {e}"))?;
        Ok(Self {
            filter: (filter != MemoryFilter::default()).then_some(filter),
            author: args.author.clone().unwrap_or_default(),
            after: time("--after", &args.after)?,
            before: time("--before", &args.before)?,
            as_of: time("--as-of", &validity.and_then(|v| v.as_of.clone()))?,
            include_superseded: validity.is_some_and(|v| v.include_superseded),
        })
    }
}

/// What `memory add` writes.
pub(super) struct NewMemory<'a> {
    pub text: &'a str,
    pub id: Option<&'a str>,
    pub author: &'a str,
    pub metadata: Option<&'a str>,
    pub valid_from: Option<Timestamp>,
    pub invalid_at: Option<Timestamp>,
}

/// `memory add TEXT [--id ID] [--author NAME] [--metadata JSON] [--valid-from TIME]
/// [--invalid-at TIME]`: one memory of the user, written directly; prints its id.
pub(super) async fn add(cli: &Cli, memory: NewMemory<'_>) -> Result<(), CliError> {
    let entry = MemoryEntry {
        id: memory.id.unwrap_or_default().to_owned(),
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![Part {
                data: Some(part::Data::Text(memory.text.to_owned())),
                ..Default::default()
            }],
        }),
        author: memory.author.to_owned(),
        custom_metadata: memory.metadata.unwrap_or_default().to_owned(),
        session_id: cli.session.clone().unwrap_or_default(),
        valid_from: memory.valid_from,
        invalid_at: memory.invalid_at,
        ..Default::default()
    };
    let request = AddMemoryRequest {
        app_name: cli.app.clone(),
        user_id: cli.user().to_owned(),
        memories: vec![entry],
        custom_metadata: String::new(),
    };
    let ids = cli.memory()?.add(request).await?;
    let id = ids.first().map(String::as_str).unwrap_or_default();
    if cli.json {
        output::json_line(&json!({"id": id}))?;
    } else {
        output::line(&format!("added memory {id}"))?;
    }
    Ok(())
}

/// How often `memory job --wait` asks for the job again.
const JOB_POLL: Duration = Duration::from_millis(500);

/// `memory search QUERY [--mode MODE] [--language CODE] [--kind KIND] [filters]`: the user's
/// best matching memories among those the filters keep, best first.
pub(super) async fn search(
    cli: &Cli,
    query: &str,
    mode: SearchMode,
    language: Option<&str>,
    kind: MemoryKind,
    filter: Filter,
) -> Result<(), CliError> {
    let request = SearchMemoryRequest {
        app_name: cli.app.clone(),
        user_id: cli.user().to_owned(),
        query: query.to_owned(),
        language: language.unwrap_or_default().to_owned(),
        mode: mode.into(),
        kind: kind.into(),
        filter: filter.filter,
        author: filter.author,
        after_timestamp: filter.after,
        before_timestamp: filter.before,
        as_of: filter.as_of,
        include_superseded: filter.include_superseded,
        ..Default::default()
    };
    let memories = cli.memory()?.search_request(request).await?;
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

/// `memory generate [--no-wait]`: memories generated from the `--session`.
pub(super) async fn generate(cli: &Cli, wait: bool) -> Result<(), CliError> {
    let id = cli.required_session()?;
    let source = GenerateSource::Session(id.to_owned());
    let job = (cli.memory()?)
        .generate(&cli.app, cli.user(), source, wait)
        .await?;
    print_job(cli, &job)
}

/// `memory job ID [--wait]`: the job as it stands, or once it has finished.
pub(super) async fn job(cli: &Cli, id: &str, wait: bool) -> Result<(), CliError> {
    let memory = cli.memory()?;
    let mut job = memory.job(&cli.app, cli.user(), id).await?;
    while wait && !finished(&job) {
        tokio::time::sleep(JOB_POLL).await;
        job = memory.job(&cli.app, cli.user(), id).await?;
    }
    print_job(cli, &job)
}

/// Whether the job has succeeded or failed for good.
fn finished(job: &GenerationJob) -> bool {
    matches!(
        GenerationState::try_from(job.state),
        Ok(GenerationState::Succeeded | GenerationState::Failed)
    )
}

/// A job's state and, once it has finished, what it did.
fn print_job(cli: &Cli, job: &GenerationJob) -> Result<(), CliError> {
    let state = GenerationState::try_from(job.state)
        .map_or("unknown", |s| {
            s.as_str_name().trim_start_matches("GENERATION_STATE_")
        })
        .to_lowercase();
    if cli.json {
        output::json_line(&json!({
            "job_id": job.id, "state": state, "added": job.added, "updated": job.updated,
            "deleted": job.deleted, "kept": job.kept, "invalidated": job.invalidated,
            "error": job.error,
        }))?;
    } else if !finished(job) {
        output::line(&format!(
            "job {} is {state} (`memory job {} --wait` waits for it)",
            job.id, job.id
        ))?;
    } else if job.error.is_empty() {
        // Only jobs of versions before validity deleted memories.
        let deleted = match job.deleted {
            0 => String::new(),
            n => format!(", {n} deleted"),
        };
        output::line(&format!(
            "job {}: {state}: {} added, {} updated, {} superseded, {} already known{deleted}",
            job.id, job.added, job.updated, job.invalidated, job.kept
        ))?;
    } else {
        output::line(&format!("job {}: {state}: {}", job.id, job.error))?;
    }
    Ok(())
}

/// `memory revisions [--id ID]`: what generation changed, oldest first.
pub(super) async fn revisions(cli: &Cli, id: Option<&str>) -> Result<(), CliError> {
    let revisions = (cli.memory()?).revisions(&cli.app, cli.user(), id).await?;
    for r in &revisions {
        print_revision(cli, r)?;
    }
    if revisions.is_empty() && !cli.json {
        eprintln!(
            "no revisions of memories of user {} in app {}",
            cli.user(),
            cli.app
        );
    }
    Ok(())
}

/// One revision: its JSON line, or `REVISION_ID  MEMORY_ID  ACTION  CHANGE`.
fn print_revision(cli: &Cli, r: &MemoryRevision) -> Result<(), CliError> {
    if cli.json {
        return Ok(output::json_line(&json::memory_revision(r))?);
    }
    let change = match (r.previous_fact.as_str(), r.new_fact.as_str()) {
        (old, _) if !r.superseded_by.is_empty() => {
            let until = r.invalid_at.map(|t| t.to_string()).unwrap_or_default();
            format!(
                "{old:?} valid until {until}, superseded by {}",
                r.superseded_by
            )
        }
        ("", new) => format!("{new:?}"),
        (old, "") => format!("{old:?}"),
        (old, new) => format!("{old:?} -> {new:?}"),
    };
    let action = json::revision_action(r.action);
    Ok(output::line(&format!(
        "{}  {}  {action:<11}  {change}",
        r.revision_id, r.memory_id
    ))?)
}

/// `memory rollback ID REVISION_ID`: the memory's fact becomes the one that revision left it
/// with again; prints the revision the rollback recorded.
pub(super) async fn rollback(cli: &Cli, id: &str, revision_id: &str) -> Result<(), CliError> {
    let revision = (cli.memory()?)
        .rollback(&cli.app, cli.user(), id, revision_id)
        .await?;
    print_revision(cli, &revision)
}

/// `memory list [--kind KIND] [filters]`: every memory of the user (of that kind, that the
/// filters keep), oldest first.
pub(super) async fn list(cli: &Cli, kind: MemoryKind, filter: Filter) -> Result<(), CliError> {
    let request = ListMemoriesRequest {
        app_name: cli.app.clone(),
        user_id: cli.user().to_owned(),
        kind: kind.into(),
        filter: filter.filter,
        author: filter.author,
        after_timestamp: filter.after,
        before_timestamp: filter.before,
        as_of: filter.as_of,
        include_superseded: filter.include_superseded,
        ..Default::default()
    };
    let memories = (cli.memory()?).list_request(request).await?;
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

/// `memory purge [--kind KIND] [filters] [--all-users] [--force]`: a dry run (how many match,
/// and a sample), or with `force` the purge.
pub(super) async fn purge(
    cli: &Cli,
    kind: MemoryKind,
    filter: Filter,
    all_users: bool,
    force: bool,
) -> Result<(), CliError> {
    let request = PurgeMemoriesRequest {
        app_name: cli.app.clone(),
        user_id: if all_users {
            String::new()
        } else {
            cli.user().to_owned()
        },
        kind: kind.into(),
        filter: filter.filter,
        author: filter.author,
        after_timestamp: filter.after,
        before_timestamp: filter.before,
        force,
    };
    let purged = cli.memory()?.purge(request).await?;
    if cli.json {
        let sample: Vec<_> = purged.sample.iter().map(json::memory_entry).collect();
        return Ok(output::json_line(&json!({
            "count": purged.count, "deleted": force, "operation_id": purged.operation_id,
            "sample": sample,
        }))?);
    }
    let memories = output::count(purged.count, "memory", "memories");
    if force {
        output::line(&format!(
            "deleted {memories} (operation {})",
            purged.operation_id
        ))?;
    } else {
        output::line(&format!(
            "{memories} match; nothing deleted (--force deletes them)"
        ))?;
        for memory in &purged.sample {
            output::line(&format!("{}  {}", memory.id, memory_line(memory)))?;
        }
    }
    Ok(())
}

/// `memory stream append TEXT [--id ID] [--author AUTHOR]`: one event buffered in `stream`.
pub(super) async fn stream_append(
    cli: &Cli,
    stream: &str,
    text: &str,
    id: Option<&str>,
    author: &str,
) -> Result<(), CliError> {
    let event = Event {
        id: id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned),
        author: author.to_owned(),
        timestamp: Some(Timestamp::from(std::time::SystemTime::now())),
        content: Some(Content {
            role: Some(if author == "user" { "user" } else { "model" }.to_owned()),
            parts: vec![Part {
                data: Some(Data::Text(text.to_owned())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    };
    let event_id = event.id.clone();
    let appended = (cli.memory()?)
        .append_stream(&cli.app, cli.user(), stream, vec![event])
        .await?;
    if cli.json {
        output::json_line(&json!({
            "event_id": event_id, "appended": appended.appended, "buffered": appended.buffered,
            "job_id": appended.job.as_ref().map(|j| j.id.as_str()),
        }))?;
    } else if let Some(job) = &appended.job {
        output::line(&format!(
            "stream {stream} handed to generation: job {} (`memory job {} --wait` waits for it)",
            job.id, job.id
        ))?;
    } else {
        let state = if appended.appended == 0 {
            "already held"
        } else {
            "buffered"
        };
        output::line(&format!(
            "event {event_id} {state}; stream {stream} holds {}",
            output::count(appended.buffered, "event", "events")
        ))?;
    }
    Ok(())
}

/// `memory stream flush`: generation started from `stream`'s buffered events now.
pub(super) async fn stream_flush(cli: &Cli, stream: &str) -> Result<(), CliError> {
    let job = (cli.memory()?)
        .flush_stream(&cli.app, cli.user(), stream)
        .await?;
    match job {
        Some(job) => print_job(cli, &job),
        None if cli.json => Ok(output::json_line(&json!({"job_id": null}))?),
        None => Ok(output::line(&format!(
            "stream {stream} holds no events: nothing to generate from"
        ))?),
    }
}

/// `memory stream list`: the user's streams holding buffered events, one per line
/// (`STREAM_ID  EVENTS  LAST_APPEND_TIME`), by stream id.
pub(super) async fn stream_list(cli: &Cli) -> Result<(), CliError> {
    let streams = (cli.memory()?).list_streams(&cli.app, cli.user()).await?;
    for s in &streams {
        if cli.json {
            output::json_line(&json::memory_stream(s))?;
        } else {
            let last = s
                .last_append_time
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string);
            output::line(&format!(
                "{}  {}  {last}",
                s.stream_id,
                output::count(s.buffered, "event", "events")
            ))?;
        }
    }
    if streams.is_empty() && !cli.json {
        eprintln!(
            "no streams of user {} in app {} hold events",
            cli.user(),
            cli.app
        );
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

/// A memory for people: `author: text  (session id)`; an entry of a tool call or result says
/// so (`[call load_memory {...}]`), as `watch` shows such events.
fn memory_line(memory: &MemoryEntry) -> String {
    let text = memory
        .content
        .as_ref()
        .map(output::content_summary)
        .unwrap_or_default();
    let author = if memory.author.is_empty() {
        String::new()
    } else {
        format!("{}: ", memory.author)
    };
    let line = if memory.session_id.is_empty() {
        format!("{author}{text}")
    } else {
        format!("{author}{text}  (session {})", memory.session_id)
    };
    match memory.invalid_at {
        Some(until) => format!("{line}  (valid until {until})"),
        None => line,
    }
}
