//! The tools: each handler names its call's arguments and hands them to a method that resolves
//! whose data it touches ([`args::ScopeArgs::of`]), makes one or two calls to the services
//! ([`Backend::memory_call`](crate::backend::Backend::memory_call)), and answers with text a
//! model reads well plus the same result as structured content ([`answer`]).

use adk_proto::{
    memory::v1::{
        delete_memory_request::Target, generate_memories_request::Source, AddMemoryRequest,
        AppendMemoryStreamRequest, DeleteMemoryRequest, EventList, FlushMemoryStreamRequest,
        GenerateMemoriesRequest, GenerateOptions, ListMemoriesRequest, MemoryEntry,
        PurgeMemoriesRequest, SearchMemoryRequest, SearchMode, SessionRef,
    },
    session::v1::{
        AppendEventRequest, Content, CreateSessionRequest, Event, GetSessionRequest,
        ListSessionsRequest, Session,
    },
};
use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock},
    service::RequestContext,
    tool, tool_router, ErrorData, RoleServer,
};
use runner_client::{event::content_text, event::text_part, json};
use serde_json::{json, Value};

use super::{
    args::{self, Filters, Mode, Named},
    Gateway,
};
use crate::{caller::Caller, error::GatewayError, filters};

/// The tools only listed when memory-svc has a generation model.
pub const GENERATION_TOOLS: &[&str] = &[
    "generate_memories",
    "append_memory_stream",
    "flush_memory_stream",
];

type ToolResult = Result<CallToolResult, ErrorData>;

/// What a tool call did: text for the model, the same as structured content for programs.
type Answer = Result<(String, Value), GatewayError>;

/// A finished tool call: `text` for the model, `structured` for programs; a failure is a tool
/// result with `isError`, so the model reads why.
fn answer(result: Answer) -> ToolResult {
    Ok(match result {
        Ok((text, structured)) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured);
            result
        }
        Err(e) => e.into_tool_result(),
    })
}

#[tool_router(vis = "pub(super)")]
impl Gateway {
    #[tool(
        description = "Search the user's long-term memory for what is relevant to a query, among the memories that pass the filters. Returns the best matches first, each with its id, text, author, time and metadata.",
        annotations(read_only_hint = true)
    )]
    async fn search_memory(
        &self,
        Parameters(Named(a)): Parameters<Named<args::SearchMemory>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        let caller = self.caller(&ctx)?;
        answer(self.search(&caller, &a).await.map(|(scope_text, found)| {
            let text = memories_text(&found, &format!("No memories match {:?}.", a.query));
            (
                format!("{scope_text}\n{text}"),
                json!({"memories": found.iter().map(json::memory_entry).collect::<Vec<_>>()}),
            )
        }))
    }

    #[tool(
        description = "Remember a fact about the user for later conversations. Returns the new memory's id."
    )]
    async fn add_memory(
        &self,
        Parameters(Named(a)): Parameters<Named<args::AddMemory>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.add_memory_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "List the user's memories that pass the filters, oldest first, a page at a time.",
        annotations(read_only_hint = true)
    )]
    async fn list_memories(
        &self,
        Parameters(Named(a)): Parameters<Named<args::ListMemories>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.list_memories_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Forget one memory of the user, by id. It is never added again.",
        annotations(destructive_hint = true, idempotent_hint = true)
    )]
    async fn delete_memory(
        &self,
        Parameters(Named(a)): Parameters<Named<args::DeleteMemory>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.delete_memory_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Delete every memory of the user that passes the filters (a request to forget, a bad import). By default a dry run: it deletes nothing and says how many memories match, with some of them. Only with force: true does it delete them, for good.",
        annotations(destructive_hint = true)
    )]
    async fn purge_memories(
        &self,
        Parameters(Named(a)): Parameters<Named<args::PurgeMemories>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.purge_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Extract lasting facts about the user from conversation text or a stored session, and merge them into the user's memory (adding, updating or removing facts)."
    )]
    async fn generate_memories(
        &self,
        Parameters(Named(a)): Parameters<Named<args::GenerateMemories>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.generate_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Hand one conversation turn to the user's memory as it happens, in an event stream (a session id is the natural stream id); the server extracts lasting facts from the stream by itself once it holds enough turns or has been quiet a while. Give each turn an event_id to make a retry safe: a turn whose id the stream already holds is not added again (without one, every call adds the turn). Returns how many turns the call added, how many the stream holds, and the id of the generation job if this turn started one."
    )]
    async fn append_memory_stream(
        &self,
        Parameters(Named(a)): Parameters<Named<args::AppendMemoryStream>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.append_stream_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Extract facts from the turns an event stream holds now, instead of waiting for the server to. Returns the id of the generation job started, or null when the stream held no turns."
    )]
    async fn flush_memory_stream(
        &self,
        Parameters(Named(a)): Parameters<Named<args::FlushMemoryStream>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.flush_stream_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "List the user's sessions (conversations), least recently updated first, without their events.",
        annotations(read_only_hint = true)
    )]
    async fn list_sessions(
        &self,
        Parameters(Named(a)): Parameters<Named<args::ListSessions>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.list_sessions_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Read a session: its state and its most recent events.",
        annotations(read_only_hint = true)
    )]
    async fn get_session(
        &self,
        Parameters(Named(a)): Parameters<Named<args::GetSession>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.get_session_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "Start a new session (conversation) for the user, optionally with an initial state."
    )]
    async fn create_session(
        &self,
        Parameters(Named(a)): Parameters<Named<args::CreateSession>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.create_session_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(description = "Add a text turn to a session: what the user or the agent said.")]
    async fn append_event(
        &self,
        Parameters(Named(a)): Parameters<Named<args::AppendEvent>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        answer(self.append_event_call(&self.caller(&ctx)?, a).await)
    }

    #[tool(
        description = "List the agent apps your token may use.",
        annotations(read_only_hint = true)
    )]
    async fn list_apps(
        &self,
        Parameters(Named(_)): Parameters<Named<args::ListApps>>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult {
        let caller = self.caller(&ctx)?;
        answer(self.backend.apps(&caller).await.map(|apps| {
            let text = if apps.is_empty() {
                "No apps have sessions yet.".to_owned()
            } else {
                apps.join("\n")
            };
            (text, json!({"app_names": apps}))
        }))
    }
}

impl Gateway {
    pub(super) fn router() -> ToolRouter<Self> {
        Self::tool_router()
    }

    /// A search, with a line saying whose memory was searched.
    pub(super) async fn search(
        &self,
        caller: &Caller,
        a: &args::SearchMemory,
    ) -> Result<(String, Vec<MemoryEntry>), GatewayError> {
        let scope = a.scope.of(caller)?;
        let request = Filters::checked(a.filters.as_ref())?
            .valid_at(
                filters::time("as_of", a.as_of.as_deref())?,
                a.include_superseded.unwrap_or(false),
            )
            .search(SearchMemoryRequest {
                app_name: scope.app.clone(),
                user_id: scope.user.clone(),
                query: args::text("query", &a.query)?.to_owned(),
                limit: args::count("limit", a.limit)?,
                mode: match a.mode {
                    None => SearchMode::Unspecified,
                    Some(Mode::Keyword) => SearchMode::Keyword,
                    Some(Mode::Semantic) => SearchMode::Semantic,
                    Some(Mode::Hybrid) => SearchMode::Hybrid,
                } as i32,
                ..Default::default()
            });
        let found = self
            .backend
            .memory_call(caller, "SearchMemory", request, |mut c, r| async move {
                c.search_memory(r).await
            })
            .await?
            .memories;
        Ok((
            format!(
                "Memories of user {:?} in app {:?} for {:?}:",
                scope.user, scope.app, a.query
            ),
            found,
        ))
    }

    async fn add_memory_call(&self, caller: &Caller, a: args::AddMemory) -> Answer {
        let scope = a.scope.of(caller)?;
        let author = a.author.unwrap_or_else(|| "user".to_owned());
        let request = AddMemoryRequest {
            app_name: scope.app,
            user_id: scope.user,
            memories: vec![MemoryEntry {
                content: Some(Content {
                    role: Some(if author == "user" { "user" } else { "model" }.into()),
                    parts: vec![text_part(args::text("text", &a.text)?)],
                }),
                author: args::text("author", &author)?.to_owned(),
                custom_metadata: a
                    .metadata
                    .map(|m| Value::Object(m).to_string())
                    .unwrap_or_default(),
                ..Default::default()
            }],
            custom_metadata: String::new(),
        };
        let added = self
            .backend
            .memory_call(caller, "AddMemory", request, |mut c, r| async move {
                c.add_memory(r).await
            })
            .await?;
        let id = added.ids.into_iter().next().unwrap_or_default();
        Ok((format!("Remembered (id {id:?})."), json!({"id": id})))
    }

    async fn list_memories_call(&self, caller: &Caller, a: args::ListMemories) -> Answer {
        let scope = a.scope.of(caller)?;
        let request = Filters::checked(a.filters.as_ref())?
            .valid_at(
                filters::time("as_of", a.as_of.as_deref())?,
                a.include_superseded.unwrap_or(false),
            )
            .list(ListMemoriesRequest {
                app_name: scope.app,
                user_id: scope.user,
                page_size: args::count("page_size", a.page_size)?,
                page_token: a.page_token.unwrap_or_default(),
                ..Default::default()
            });
        let page = self
            .backend
            .memory_call(caller, "ListMemories", request, |mut c, r| async move {
                c.list_memories(r).await
            })
            .await?;
        let mut text = memories_text(&page.memories, "No memories.");
        more(&mut text, &page.next_page_token);
        let structured = json!({
            "memories": page.memories.iter().map(json::memory_entry).collect::<Vec<_>>(),
            "next_page_token": page.next_page_token,
        });
        Ok((text, structured))
    }

    async fn delete_memory_call(&self, caller: &Caller, a: args::DeleteMemory) -> Answer {
        let scope = a.scope.of(caller)?;
        let request = DeleteMemoryRequest {
            app_name: scope.app,
            user_id: scope.user,
            target: Some(Target::MemoryId(
                args::text("memory_id", &a.memory_id)?.to_owned(),
            )),
        };
        let deleted = self
            .backend
            .memory_call(caller, "DeleteMemory", request, |mut c, r| async move {
                c.delete_memory(r).await
            })
            .await?
            .deleted;
        let text = match deleted {
            0 => format!("No memory has id {:?}; nothing was deleted.", a.memory_id),
            _ => format!("Deleted memory {:?}.", a.memory_id),
        };
        Ok((text, json!({"deleted": deleted})))
    }

    async fn purge_call(&self, caller: &Caller, a: args::PurgeMemories) -> Answer {
        let scope = a.scope.of(caller)?;
        let force = a.force.unwrap_or(false);
        let request = Filters::checked(Some(&a.filters))?.purge(PurgeMemoriesRequest {
            app_name: scope.app.clone(),
            user_id: scope.user.clone(),
            force,
            ..Default::default()
        })?;
        let purged = self
            .backend
            .memory_call(caller, "PurgeMemories", request, |mut c, r| async move {
                c.purge_memories(r).await
            })
            .await?;
        let memories = match purged.count {
            1 => "1 memory".to_owned(),
            n => format!("{n} memories"),
        };
        let whose = format!("of user {:?} in app {:?}", scope.user, scope.app);
        let text = if force {
            format!(
                "Deleted {memories} {whose} (operation {}).",
                purged.operation_id
            )
        } else if purged.count == 0 {
            format!("Dry run: no memories {whose} match; nothing was deleted.")
        } else {
            format!(
                "Dry run: {memories} {whose} match; nothing was deleted. Call again with \
                 force: true to delete them. Some of them:\n{}",
                memories_text(&purged.sample, "(none)")
            )
        };
        let structured = json!({
            "count": purged.count,
            "deleted": force,
            "operation_id": purged.operation_id,
            "sample": purged.sample.iter().map(json::memory_entry).collect::<Vec<_>>(),
        });
        Ok((text, structured))
    }

    async fn generate_call(&self, caller: &Caller, a: args::GenerateMemories) -> Answer {
        let scope = a.scope.of(caller)?;
        let source = match (a.text.as_deref(), a.session_id.as_deref()) {
            (Some(text), None) => Source::Events(EventList {
                events: vec![Event {
                    id: uuid::Uuid::new_v4().to_string(),
                    author: "user".into(),
                    invocation_id: format!("mcp-{}", uuid::Uuid::new_v4()),
                    content: Some(Content {
                        role: Some("user".into()),
                        parts: vec![text_part(args::text("text", text)?)],
                    }),
                    timestamp: Some(std::time::SystemTime::now().into()),
                    ..Default::default()
                }],
            }),
            (None, Some(session)) => Source::SessionRef(SessionRef {
                app_name: scope.app.clone(),
                user_id: scope.user.clone(),
                session_id: session.to_owned(),
            }),
            _ => {
                return Err(GatewayError::Invalid {
                    field: "text".into(),
                    why: "give exactly one of text and session_id".into(),
                })
            }
        };
        let request = GenerateMemoriesRequest {
            app_name: scope.app,
            user_id: scope.user,
            source: Some(source),
            options: Some(GenerateOptions {
                wait: a.wait.unwrap_or(true),
                ..Default::default()
            }),
        };
        let job = self
            .backend
            .memory_call(caller, "GenerateMemories", request, |mut c, r| async move {
                c.generate_memories(r).await
            })
            .await?
            .job
            .unwrap_or_default();
        Ok((
            format!(
                "Generation job {}: {} added, {} updated, {} deleted, {} kept.",
                job.id, job.added, job.updated, job.deleted, job.kept
            ),
            json!({"job_id": job.id, "state": job.state().as_str_name(), "added": job.added,
                   "updated": job.updated, "deleted": job.deleted, "kept": job.kept}),
        ))
    }

    async fn append_stream_call(&self, caller: &Caller, a: args::AppendMemoryStream) -> Answer {
        let scope = a.scope.of(caller)?;
        let author = args::text("author", a.author.as_deref().unwrap_or("user"))?;
        let event_id = match a.event_id {
            Some(id) => args::text("event_id", &id)?.to_owned(),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let request = AppendMemoryStreamRequest {
            app_name: scope.app,
            user_id: scope.user,
            stream_id: args::text("stream_id", &a.stream_id)?.to_owned(),
            events: vec![Event {
                id: event_id.clone(),
                author: author.to_owned(),
                invocation_id: format!("mcp-{}", uuid::Uuid::new_v4()),
                content: Some(Content {
                    role: Some(if author == "user" { "user" } else { "model" }.into()),
                    parts: vec![text_part(args::text("text", &a.text)?)],
                }),
                timestamp: Some(std::time::SystemTime::now().into()),
                ..Default::default()
            }],
        };
        let appended = self
            .backend
            .memory_call(
                caller,
                "AppendMemoryStream",
                request,
                |mut c, r| async move { c.append_memory_stream(r).await },
            )
            .await?;
        let job_id = appended.job.map(|j| j.id);
        let held = match appended.appended {
            0 => format!("Event {event_id:?} was already in stream {:?}", a.stream_id),
            _ => format!("Added event {event_id:?} to stream {:?}", a.stream_id),
        };
        let text = match &job_id {
            Some(job) => format!("{held}; the stream was handed to generation (job {job})."),
            None => format!("{held}; it holds {}.", turns(appended.buffered)),
        };
        Ok((
            text,
            json!({"event_id": event_id, "appended": appended.appended,
                   "buffered": appended.buffered, "job_id": job_id}),
        ))
    }

    async fn flush_stream_call(&self, caller: &Caller, a: args::FlushMemoryStream) -> Answer {
        let scope = a.scope.of(caller)?;
        let request = FlushMemoryStreamRequest {
            app_name: scope.app,
            user_id: scope.user,
            stream_id: args::text("stream_id", &a.stream_id)?.to_owned(),
        };
        let job_id = self
            .backend
            .memory_call(
                caller,
                "FlushMemoryStream",
                request,
                |mut c, r| async move { c.flush_memory_stream(r).await },
            )
            .await?
            .job
            .map(|j| j.id);
        let text = match &job_id {
            Some(job) => format!("Stream {:?} handed to generation (job {job}).", a.stream_id),
            None => format!(
                "Stream {:?} holds no turns; nothing to extract.",
                a.stream_id
            ),
        };
        Ok((text, json!({ "job_id": job_id })))
    }

    async fn list_sessions_call(&self, caller: &Caller, a: args::ListSessions) -> Answer {
        let scope = a.scope.of(caller)?;
        let request = ListSessionsRequest {
            app_name: scope.app,
            user_id: Some(scope.user),
            page_size: args::count("page_size", a.page_size)?,
            page_token: a.page_token.unwrap_or_default(),
            ..Default::default()
        };
        let page = self
            .backend
            .session_call(caller, "ListSessions", request, |mut c, r| async move {
                c.list_sessions(r).await
            })
            .await?;
        let mut text = if page.sessions.is_empty() {
            "No sessions.".to_owned()
        } else {
            page.sessions
                .iter()
                .map(|s| {
                    format!(
                        "- {} ({} events, updated {})",
                        s.id,
                        s.last_sequence,
                        time_text(s.last_update_time.as_ref())
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        more(&mut text, &page.next_page_token);
        let structured = json!({
            "sessions": page.sessions.iter().map(json::session).collect::<Vec<_>>(),
            "next_page_token": page.next_page_token,
        });
        Ok((text, structured))
    }

    async fn get_session_call(&self, caller: &Caller, a: args::GetSession) -> Answer {
        let scope = a.scope.of(caller)?;
        let recent = a.num_recent_events.unwrap_or(20);
        let session = self
            .read_session(caller, &scope.app, &scope.user, &a.session_id, recent)
            .await?;
        Ok((session_text(&session), json::session(&session)))
    }

    async fn create_session_call(&self, caller: &Caller, a: args::CreateSession) -> Answer {
        let scope = a.scope.of(caller)?;
        let request = CreateSessionRequest {
            app_name: scope.app,
            user_id: scope.user,
            session_id: a.session_id.unwrap_or_default(),
            state: a
                .state
                .map(|s| Value::Object(s).to_string())
                .unwrap_or_default(),
            ..Default::default()
        };
        let session = self
            .backend
            .session_call(caller, "CreateSession", request, |mut c, r| async move {
                c.create_session(r).await
            })
            .await?;
        Ok((
            format!("Created session {:?}.", session.id),
            json::session(&session),
        ))
    }

    async fn append_event_call(&self, caller: &Caller, a: args::AppendEvent) -> Answer {
        let scope = a.scope.of(caller)?;
        let author = args::text("author", &a.author)?;
        let role = if author == "user" { "user" } else { "model" };
        let request = AppendEventRequest {
            app_name: scope.app,
            user_id: scope.user,
            session_id: a.session_id.clone(),
            event: Some(Event {
                author: author.to_owned(),
                invocation_id: format!("mcp-{}", uuid::Uuid::new_v4()),
                content: Some(Content {
                    role: Some(role.into()),
                    parts: vec![text_part(args::text("text", &a.text)?)],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let appended = self
            .backend
            .session_call(caller, "AppendEvent", request, |mut c, r| async move {
                c.append_event(r).await
            })
            .await?;
        let event = appended.event.unwrap_or_default();
        Ok((
            format!(
                "Appended event {} to session {:?}.",
                event.sequence, a.session_id
            ),
            json::event(&event),
        ))
    }

    /// A session with its last `recent` events.
    pub(super) async fn read_session(
        &self,
        caller: &Caller,
        app: &str,
        user: &str,
        session: &str,
        recent: u32,
    ) -> Result<Session, GatewayError> {
        let request = GetSessionRequest {
            app_name: app.to_owned(),
            user_id: user.to_owned(),
            session_id: args::text("session_id", session)?.to_owned(),
            num_recent_events: Some(recent as i32),
            ..Default::default()
        };
        match self
            .backend
            .sessions()
            .get_session(self.backend.request(caller, request)?)
            .await
        {
            Ok(found) => Ok(found.into_inner()),
            Err(s) if s.code() == tonic::Code::NotFound => Err(GatewayError::NotFound(format!(
                "session {session:?} of user {user:?} in app {app:?}"
            ))),
            Err(s) => Err(GatewayError::service("session-svc", "GetSession", s)),
        }
    }
}

/// "1 turn", "3 turns".
fn turns(n: u32) -> String {
    match n {
        1 => "1 turn".to_owned(),
        n => format!("{n} turns"),
    }
}

/// Tells the model how to read on, when there is more.
fn more(text: &mut String, next_page_token: &str) {
    if !next_page_token.is_empty() {
        text.push_str(&format!(
            "\nMore: call again with page_token {next_page_token:?}."
        ));
    }
}

pub(super) fn time_text(t: Option<&prost_types::Timestamp>) -> String {
    t.map(ToString::to_string).unwrap_or_else(|| "-".into())
}

/// Memories one per line: id, author, time, score (search results) and text.
pub(super) fn memories_text(memories: &[MemoryEntry], none: &str) -> String {
    if memories.is_empty() {
        return none.to_owned();
    }
    memories
        .iter()
        .map(|m| {
            let text = m
                .content
                .as_ref()
                .map(|c| content_text(c, " "))
                .unwrap_or_default();
            let score = if m.score > 0.0 {
                format!(", score {:.3}", m.score)
            } else {
                String::new()
            };
            // A fact true once but no longer: the model must not take it for today's.
            let until = m
                .invalid_at
                .as_ref()
                .map(|t| format!(", superseded since {}", time_text(Some(t))))
                .unwrap_or_default();
            format!(
                "- [{}] {} ({}, {}{score}{until})",
                m.id,
                text,
                m.author,
                time_text(m.timestamp.as_ref())
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A session as a model reads it: state, then its events one per line.
pub(super) fn session_text(s: &Session) -> String {
    let mut lines = vec![
        format!(
            "Session {:?} of user {:?} in app {:?}: {} events, last updated {}.",
            s.id,
            s.user_id,
            s.app_name,
            s.last_sequence,
            time_text(s.last_update_time.as_ref())
        ),
        format!(
            "State: {}",
            if s.state.is_empty() { "{}" } else { &s.state }
        ),
    ];
    for e in &s.events {
        let text = e
            .content
            .as_ref()
            .map(|c| content_text(c, " "))
            .unwrap_or_default();
        lines.push(format!("{}. {}: {}", e.sequence, e.author, text));
    }
    lines.join("\n")
}
