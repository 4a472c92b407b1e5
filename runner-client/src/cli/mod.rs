//! The command line: flags (each with an environment-variable fallback), subcommands, and the
//! dispatch to their handlers. Handlers only translate between the terminal and the library.

mod memory;
mod output;
mod sessions;
mod turn;
mod watch;

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use runner_client::{clients::services_at, Access, MemoryClient, RunnerError, SessionClient};
use tonic::Code;

/// Failures of a command; the library's [`runner_client::RunnerError`] for service and agent
/// failures, I/O errors for the terminal.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// User id used when a command needs one and `--user` is not given.
const DEFAULT_USER: &str = "user";

/// Where `--help` lists the flags every command takes, after the command's own.
const GLOBAL: &str = "Global options";

/// Run agent turns against session-svc and memory-svc, and look at what they store.
#[derive(Debug, Parser)]
#[command(name = "runner-client", version = adk_version::version!())]
pub struct Cli {
    /// session-svc address.
    #[arg(
        long,
        env = "RUNNER_SESSION_ENDPOINT",
        default_value = "http://127.0.0.1:50051",
        global = true,
        help_heading = GLOBAL
    )]
    session_endpoint: String,

    /// memory-svc address.
    #[arg(
        long,
        env = "RUNNER_MEMORY_ENDPOINT",
        default_value = "http://127.0.0.1:50052",
        global = true,
        help_heading = GLOBAL
    )]
    memory_endpoint: String,

    /// File holding the bearer token to present to both services (when they require tokens).
    #[arg(long, env = "RUNNER_TOKEN_FILE", global = true, help_heading = GLOBAL)]
    token_file: Option<PathBuf>,

    /// CA certificate (PEM) of `https://` service endpoints.
    #[arg(long, env = "RUNNER_CA_CERT", global = true, help_heading = GLOBAL)]
    ca_cert: Option<PathBuf>,

    /// App name.
    #[arg(
        long,
        env = "RUNNER_APP",
        default_value = "demo",
        global = true,
        help_heading = GLOBAL
    )]
    app: String,

    /// User id [default: "user"; for `sessions list` and `watch --app-feed`: every user].
    #[arg(long, env = "RUNNER_USER", global = true, help_heading = GLOBAL)]
    user: Option<String>,

    /// Session id [`chat`, `run`: a new session when not given].
    #[arg(long, env = "RUNNER_SESSION", global = true, help_heading = GLOBAL)]
    session: Option<String>,

    /// Print JSON, one object per line, instead of text for people.
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

/// Which agent `chat` and `run` drive, and how.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// The agent.
    #[arg(long, env = "RUNNER_AGENT", value_enum, default_value_t = AgentKind::Recall)]
    agent: AgentKind,

    /// Base URL of an OpenAI-compatible API (`--agent openai`), e.g. Ollama's.
    #[arg(
        long,
        env = "RUNNER_MODEL_ENDPOINT",
        default_value = "http://127.0.0.1:11434/v1"
    )]
    model_endpoint: String,

    /// Model name (`--agent openai`).
    #[arg(long, env = "RUNNER_MODEL")]
    model: Option<String>,

    /// Environment variable holding the API key (`--agent openai`); unset or empty: no key.
    #[arg(long, env = "RUNNER_API_KEY_ENV", default_value = "OPENAI_API_KEY")]
    api_key_env: String,

    /// System instruction; `{key}` / `{key?}` are replaced from the session state.
    #[arg(long, env = "RUNNER_INSTRUCTION", default_value = "")]
    instruction: String,

    /// Save the agent's final reply in the session state under this key.
    #[arg(long, env = "RUNNER_OUTPUT_KEY")]
    output_key: Option<String>,

    /// Add the session to memory after each turn.
    #[arg(long, env = "RUNNER_REMEMBER")]
    remember: bool,

    /// Generate memories from each turn's events after it (in the background; needs
    /// memory-svc --generator).
    #[arg(long, env = "RUNNER_GENERATE")]
    generate: bool,

    /// Give the model memories matching each message up front (`--agent openai`).
    #[arg(long, env = "RUNNER_PRELOAD_MEMORY")]
    preload_memory: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentKind {
    /// Deterministic, no model: acknowledges statements, answers questions from memory.
    Recall,
    /// An OpenAI-compatible chat-completions endpoint, with the load_memory tool.
    Openai,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Talk with the agent; replies stream in as they are produced. Ctrl-D ends.
    Chat {
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// One turn: send a message, print the agent's events.
    Run {
        /// The user's message.
        message: String,
        /// JSON object stored as the state delta of the user's event (`temp:` keys last only
        /// for this turn).
        #[arg(long)]
        state_delta: Option<String>,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Print a session's events as they are appended (or, with --app-feed, every event of the
    /// app).
    Watch {
        /// Follow every session of the app (of --user, if given) instead of one session.
        #[arg(long)]
        app_feed: bool,
        /// With --app-feed: resume after this cursor (printed with --json).
        #[arg(long, requires = "app_feed")]
        cursor: Option<String>,
        /// Replay stored events after this sequence first (default: all of them).
        #[arg(long, default_value_t = 0, conflicts_with = "app_feed")]
        after_sequence: u64,
        /// Also print live partial events (streamed fragments).
        #[arg(long, conflicts_with = "app_feed")]
        partial: bool,
        /// When the stream breaks (the server restarts, say), how long to keep reconnecting
        /// before giving up, in seconds.
        #[arg(long, default_value_t = 60)]
        give_up_after: u64,
        /// Wait for the session to be created if it does not exist yet (without it, watching
        /// a session that does not exist fails at once).
        #[arg(long, conflicts_with = "app_feed")]
        wait: bool,
    },
    /// List, show or delete sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Search, list or delete memories, add a session to memory, or generate memories from it.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Print a completion script for a shell, e.g. `runner-client completions bash >
    /// ~/.local/share/bash-completion/completions/runner-client`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// The app's sessions (of --user, if given), least recently updated first.
    List,
    /// The --session with its state and events.
    Get,
    /// Delete the --session and its events (app and user state stay).
    Delete,
}

/// `memory search --mode`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mode {
    Auto,
    Keyword,
    Semantic,
    Hybrid,
}

impl From<Mode> for adk_proto::memory::v1::SearchMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Auto => Self::Unspecified,
            Mode::Keyword => Self::Keyword,
            Mode::Semantic => Self::Semantic,
            Mode::Hybrid => Self::Hybrid,
        }
    }
}

/// `memory list --kind`, `memory search --kind`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Kind {
    /// Both kinds.
    All,
    /// Ingested events and direct writes.
    Raw,
    /// Facts written by generation.
    Generated,
}

impl From<Kind> for adk_proto::memory::v1::MemoryKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::All => Self::Unspecified,
            Kind::Raw => Self::Raw,
            Kind::Generated => Self::Generated,
        }
    }
}

/// The filters of `memory search` and `memory list`.
#[derive(Debug, Args)]
struct FilterArgs {
    /// Conditions on custom_metadata keys that must all hold, separated by commas:
    /// KEY=VALUE, KEY!=VALUE, KEY<VALUE, KEY<=VALUE, KEY>VALUE, KEY>=VALUE, or KEY? (present).
    /// VALUE: true/false, a number, an RFC 3339 time (2026-05-01T12:00:00Z), or a string
    /// ("quoted" to keep "3" a string or to hold a comma). Repeat for alternatives:
    /// `--filter 'color=red,n>=3' --filter vip=true`.
    #[arg(long = "filter", value_name = "CONDITIONS")]
    groups: Vec<String>,
    /// Only memories of this topic (repeat for several).
    #[arg(long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// Only memories by this author.
    #[arg(long)]
    author: Option<String>,
    /// Only memories of this time or later (RFC 3339, 2026-05-01T12:00:00Z).
    #[arg(long, value_name = "TIME")]
    after: Option<String>,
    /// Only memories before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    before: Option<String>,
}

/// Which memories of `memory search` and `memory list` count by their validity in time.
#[derive(Debug, Args)]
struct ValidityArgs {
    /// Only memories valid at this time (RFC 3339), instead of those valid now.
    #[arg(long, value_name = "TIME")]
    as_of: Option<String>,
    /// Memories no longer valid (superseded by a later fact) too.
    #[arg(long)]
    include_superseded: bool,
}

#[derive(Debug, Subcommand)]
enum StreamCommand {
    /// Buffer one event in the stream; prints how many events it holds, or the generation job
    /// the event started.
    Append {
        /// The event's text.
        text: String,
        /// The event's id: an id the stream already holds is not buffered again (default: a
        /// new one).
        #[arg(long)]
        id: Option<String>,
        /// Who said it.
        #[arg(long, default_value = "user")]
        author: String,
    },
    /// Start generation from the stream's buffered events now.
    Flush,
    /// The streams of --user holding buffered events: id, events, when the last came.
    List,
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Search the memory of --user.
    Search {
        /// The words to look for.
        query: String,
        /// How to rank: auto (keyword; with an embedding model, meaning joins in where keyword
        /// matches are weak), keyword, semantic or hybrid.
        #[arg(long, value_enum, default_value_t = Mode::Auto)]
        mode: Mode,
        /// The query's language as an ISO 639-1 code ("de"), instead of the detected one.
        #[arg(long)]
        language: Option<String>,
        /// Which memories to search.
        #[arg(long, value_enum, default_value_t = Kind::All)]
        kind: Kind,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        validity: ValidityArgs,
    },
    /// Write a memory of --user directly (in the --session, if given); prints its id.
    Add {
        /// The memory's text.
        text: String,
        /// Its id (written over a memory with this id in the same session); default: a new
        /// one.
        #[arg(long)]
        id: Option<String>,
        /// Who said it.
        #[arg(long, default_value = "user")]
        author: String,
        /// Its custom_metadata, a JSON object.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
        /// When what it says became true (RFC 3339); default: now.
        #[arg(long, value_name = "TIME")]
        valid_from: Option<String>,
        /// When it stopped being true (RFC 3339, after --valid-from); default: it still is.
        #[arg(long, value_name = "TIME")]
        invalid_at: Option<String>,
    },
    /// Add (or refresh) the --session in memory.
    AddSession,
    /// Generate memories from the --session: facts extracted by memory-svc's generation model
    /// and consolidated with the user's earlier ones. Waits for the job unless --no-wait.
    Generate {
        /// Queue the job and print it, without waiting for it (`memory job` follows it).
        #[arg(long)]
        no_wait: bool,
    },
    /// A generation job of --user (as `generate --no-wait` printed it): its state, or with
    /// --wait its outcome once it has finished.
    Job {
        /// The job's id.
        id: String,
        /// Wait for the job to succeed or fail.
        #[arg(long)]
        wait: bool,
    },
    /// The changes generation made to --user's memories (to one memory only, with --id),
    /// oldest first.
    Revisions {
        /// Only the changes to the memory with this id.
        #[arg(long)]
        id: Option<String>,
    },
    /// Restores a generated memory of --user (a deleted or superseded one too) to the fact one
    /// of its revisions left it with, valid again (see `memory revisions`); the rollback is
    /// itself a revision.
    Rollback {
        /// The memory's id.
        id: String,
        /// The revision to restore (its first column in `memory revisions`).
        revision: String,
    },
    /// The memories of --user (valid now, unless asked otherwise), in the order they were
    /// added.
    List {
        /// Which memories to list.
        #[arg(long, value_enum, default_value_t = Kind::All)]
        kind: Kind,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        validity: ValidityArgs,
    },
    /// The event stream of --user named --session (or --stream): events buffered as they
    /// happen, generation started by memory-svc after its trigger count or quiet time.
    Stream {
        #[command(subcommand)]
        command: StreamCommand,
        /// The stream's id (default: the --session).
        #[arg(long, global = true)]
        stream: Option<String>,
    },
    /// Delete the memories of --user (of every user of --app with --all-users) that pass the
    /// filters. Without --force a dry run: prints how many match and some of them.
    Purge {
        /// Which memories.
        #[arg(long, value_enum, default_value_t = Kind::All)]
        kind: Kind,
        #[command(flatten)]
        filter: FilterArgs,
        /// Every user of the app, not only --user.
        #[arg(long)]
        all_users: bool,
        /// Delete (otherwise nothing is deleted).
        #[arg(long)]
        force: bool,
    },
    /// Delete memories of --user: the one with --id, all of them with --all, otherwise those
    /// that came from the --session.
    Delete {
        /// The memory's id (it is then never added again).
        #[arg(long, conflicts_with = "all")]
        id: Option<String>,
        /// Every memory of the user.
        #[arg(long)]
        all: bool,
    },
}

/// The global flags a command does not use, by argument id: accepted anywhere (they are
/// global), but left out of the command's help and completions.
const UNUSED_GLOBALS: &[(&str, &[&str])] = &[(
    "completions",
    &[
        "session_endpoint",
        "memory_endpoint",
        "token_file",
        "ca_cert",
        "app",
        "user",
        "session",
        "json",
    ],
)];

/// The command line, each command's help and completions listing only the flags it uses.
pub fn command() -> clap::Command {
    let mut command = Cli::command();
    // Building copies the global flags into every subcommand, where they can then be hidden.
    command.build();
    for &(name, unused) in UNUSED_GLOBALS {
        command = command.mut_subcommand(name, |sub| {
            sub.mut_args(|arg| {
                if unused.contains(&arg.get_id().as_str()) {
                    arg.hide(true)
                } else {
                    arg
                }
            })
        });
    }
    command
}

impl Cli {
    /// The command line of this process (see [`command`]).
    pub fn from_env() -> Self {
        let matches = command().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    /// The token and CA certificate the flags point to.
    fn access(&self) -> Result<Access, CliError> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let token = match &self.token_file {
            Some(path) => Some(
                String::from_utf8(read(path)?)
                    .map_err(|_| format!("{} is not UTF-8 text", path.display()))?,
            ),
            None => None,
        };
        Ok(Access {
            token,
            ca_pem: self.ca_cert.as_ref().map(read).transpose()?,
        })
    }

    fn sessions(&self) -> Result<SessionClient, CliError> {
        Ok(SessionClient::connect_with(
            &self.session_endpoint,
            &self.access()?,
        )?)
    }

    fn memory(&self) -> Result<MemoryClient, CliError> {
        Ok(MemoryClient::connect_with(
            &self.memory_endpoint,
            &self.access()?,
        )?)
    }

    fn user(&self) -> &str {
        self.user.as_deref().unwrap_or(DEFAULT_USER)
    }

    /// The session the command is about; the command cannot run without one.
    fn required_session(&self) -> Result<&str, CliError> {
        self.session
            .as_deref()
            .ok_or_else(|| "this command needs --session (or RUNNER_SESSION)".into())
    }
}

/// Runs the command the command line asks for.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    match dispatch(&cli).await {
        Ok(()) => Ok(()),
        Err(e) => Err(explain(&cli, e).await),
    }
}

async fn dispatch(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Chat { agent } => turn::chat(cli, agent).await,
        Command::Run {
            message,
            state_delta,
            agent,
        } => turn::run(cli, agent, message, state_delta.as_deref()).await,
        Command::Watch {
            app_feed: true,
            cursor,
            give_up_after,
            ..
        } => watch::app_feed(cli, cursor.as_deref(), *give_up_after).await,
        Command::Watch {
            after_sequence,
            partial,
            give_up_after,
            wait,
            ..
        } => watch::session(cli, *after_sequence, *partial, *give_up_after, *wait).await,
        Command::Sessions { command } => match command {
            SessionsCommand::List => sessions::list(cli).await,
            SessionsCommand::Get => sessions::get(cli).await,
            SessionsCommand::Delete => sessions::delete(cli).await,
        },
        Command::Memory { command } => match command {
            MemoryCommand::Search {
                query,
                mode,
                language,
                kind,
                filter,
                validity,
            } => {
                let (mode, kind) = ((*mode).into(), (*kind).into());
                let filter = memory::Filter::of(filter, Some(validity))?;
                memory::search(cli, query, mode, language.as_deref(), kind, filter).await
            }
            MemoryCommand::Add {
                text,
                id,
                author,
                metadata,
                valid_from,
                invalid_at,
            } => {
                let memory = memory::NewMemory {
                    text,
                    id: id.as_deref(),
                    author,
                    metadata: metadata.as_deref(),
                    valid_from: memory::time("--valid-from", valid_from)?,
                    invalid_at: memory::time("--invalid-at", invalid_at)?,
                };
                memory::add(cli, memory).await
            }
            MemoryCommand::AddSession => memory::add_session(cli).await,
            MemoryCommand::Generate { no_wait } => memory::generate(cli, !no_wait).await,
            MemoryCommand::Revisions { id } => memory::revisions(cli, id.as_deref()).await,
            MemoryCommand::Job { id, wait } => memory::job(cli, id, *wait).await,
            MemoryCommand::Rollback { id, revision } => memory::rollback(cli, id, revision).await,
            MemoryCommand::List {
                kind,
                filter,
                validity,
            } => {
                let filter = memory::Filter::of(filter, Some(validity))?;
                memory::list(cli, (*kind).into(), filter).await
            }
            MemoryCommand::Purge {
                kind,
                filter,
                all_users,
                force,
            } => {
                let filter = memory::Filter::of(filter, None)?;
                memory::purge(cli, (*kind).into(), filter, *all_users, *force).await
            }
            MemoryCommand::Delete { id, all } => memory::delete(cli, id.as_deref(), *all).await,
            MemoryCommand::Stream { command, stream } => {
                let stream = || match stream {
                    Some(stream) => Ok(stream.as_str()),
                    None => cli.required_session(),
                };
                match command {
                    StreamCommand::Append { text, id, author } => {
                        memory::stream_append(cli, stream()?, text, id.as_deref(), author).await
                    }
                    StreamCommand::Flush => memory::stream_flush(cli, stream()?).await,
                    StreamCommand::List => memory::stream_list(cli).await,
                }
            }
        },
        Command::Completions { shell } => Ok(output::bytes(&completions(*shell))?),
    }
}

/// The name completion scripts complete.
const BIN: &str = "runner-client";

/// The completion script for `shell`. Generated in memory: written to stdout directly, a closed
/// pipe would panic.
fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), BIN, &mut script);
    if shell == clap_complete::Shell::Bash {
        script = fix_bash_labels(&script);
    }
    script
}

/// clap_complete's bash script (up to 4.6.11 at least, clap-rs/clap#6421) names the state of a
/// subcommand `runner__client__subcmd__memory` where it walks the words, but labels the `case`
/// arm that completes it `runner__subcmd__client__subcmd__memory` (the program name's hyphen
/// escaped as a subcommand separator): no arm matches, so nothing after the program name was
/// completed. The arms are relabelled to the names the walk builds.
fn fix_bash_labels(script: &[u8]) -> Vec<u8> {
    const SEPARATOR: &str = "__subcmd__";
    let walked = format!("{}{SEPARATOR}", BIN.replace('-', "__"));
    let labelled = format!("{}{SEPARATOR}", BIN.replace('-', SEPARATOR));
    String::from_utf8_lossy(script)
        .replace(&labelled, &walked)
        .into_bytes()
}

/// `e`, with what answers at the address when it is not the server expected there: the
/// services another gRPC server offers, or the status line of an HTTP/1 server.
async fn explain(cli: &Cli, e: CliError) -> CliError {
    match e.downcast_ref::<RunnerError>() {
        Some(RunnerError::WrongService { endpoint, .. }) => {
            let Ok(access) = cli.access() else {
                return e;
            };
            match services_at(endpoint, &access).await {
                Some(services) => {
                    let named: Vec<String> = services
                        .iter()
                        .filter(|s| !s.starts_with("grpc."))
                        .map(|s| match known_server(s) {
                            Some(server) => format!("{s} ({server})"),
                            None => s.clone(),
                        })
                        .collect();
                    format!("{e}; it offers {}", named.join(", ")).into()
                }
                None => e,
            }
        }
        // How an HTTP/1 server's answer to HTTP/2 shows depends on a race in the client (a
        // broken frame, a cancelled call, a broken pipe): asking it in HTTP/1 says what it is.
        Some(
            RunnerError::NotGrpc {
                service, endpoint, ..
            }
            | RunnerError::Service {
                service,
                endpoint,
                code: Code::Internal | Code::Unknown | Code::Cancelled,
                ..
            },
        ) => match http1_status_line(endpoint).await {
            Some(line) => format!(
                "the server at {endpoint} does not speak gRPC: an HTTP/1 server answers there \
                 ({line:?}), not {service}"
            )
            .into(),
            None => e,
        },
        _ => e,
    }
}

/// The status line an HTTP/1 server at the plain-text `endpoint` answers a request with, if
/// one does (within a second).
async fn http1_status_line(endpoint: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = match endpoint.split_once("://") {
        Some(("http", rest)) => rest,
        Some(_) => return None,
        None => endpoint,
    };
    let authority = authority.split('/').next()?;
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
        let request = format!("HEAD / HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = vec![0u8; 256];
        let n = stream.read(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
        let line = answer.lines().next()?.to_owned();
        line.starts_with("HTTP/1.").then_some(line)
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), ask)
        .await
        .ok()
        .flatten()
}

/// The server of this project that offers `service`.
fn known_server(service: &str) -> Option<&'static str> {
    match service {
        "adk.session.v1.SessionService" => Some("session-svc"),
        "adk.memory.v1.MemoryService" => Some("memory-svc"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
        command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from([
            "runner-client",
            "--json",
            "run",
            "--app",
            "a",
            "--agent",
            "openai",
            "hi",
        ])
        .unwrap();
        let Command::Run { agent, .. } = &cli.command else {
            panic!("run: {cli:?}");
        };
        assert_eq!(agent.agent, AgentKind::Openai);
        assert_eq!(cli.app, "a");
        assert!(cli.json);
        assert_eq!(cli.user(), DEFAULT_USER);
    }
}
