//! The MCP server: the tools ([`tools`]), a session and a user's memory as resources
//! ([`resources`]), and the `memory_context` prompt, over whichever transport serves it.

pub mod args;
mod resources;
mod tools;

use std::{borrow::Cow, sync::Arc};

use adk_proto::memory::v1::GenerateMemoriesRequest;
use rmcp::{
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext, wrapper::Parameters},
    model::{
        CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
        GetPromptResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
        PromptMessage, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, Role,
        ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    ErrorData, RoleServer, ServerHandler,
};
use tokio::sync::OnceCell;
use tonic::Code;

use crate::{backend::Backend, caller::Caller, error::GatewayError};

/// Largest `arguments` object a tool call may carry, serialized: well above any legitimate
/// call (texts are limited to [`args::MAX_TEXT_BYTES`]); a larger one is refused unread.
const MAX_ARGUMENT_BYTES: usize = 64 << 10;

/// How many memories `memory_context` puts in front of a question.
const CONTEXT_MEMORIES: u32 = 10;

/// The MCP protocol versions served: the sessionless 2026-07-28 and the versions with an
/// `initialize` handshake that clients still speak.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// One MCP server over the shared connections to the services. Cheap to clone: the HTTP
/// transport makes one per request.
#[derive(Clone)]
pub struct Gateway {
    backend: Backend,
    tool_router: ToolRouter<Gateway>,
    /// The caller of every request over stdio (over HTTP, each request's own).
    local: Option<Caller>,
    /// Whether memory-svc has a generation model, once it has said so.
    generator: Arc<OnceCell<bool>>,
}

impl Gateway {
    pub fn new(backend: Backend, local: Option<Caller>) -> Self {
        Self {
            backend,
            tool_router: Self::router(),
            local,
            generator: Arc::new(OnceCell::new()),
        }
    }

    /// The caller of a request: the process's own over stdio, else the identity the HTTP
    /// front door attached after checking the bearer token.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        if let Some(local) = &self.local {
            return Ok(local.clone());
        }
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("request was not authenticated", None))
    }

    /// Whether memory-svc generates memories: a GenerateMemories without a source is refused
    /// with FAILED_PRECONDITION without a generator and INVALID_ARGUMENT with one. Remembered
    /// once memory-svc has answered either way.
    async fn has_generator(&self, caller: &Caller) -> bool {
        if let Some(known) = self.generator.get() {
            return *known;
        }
        let scope = caller.any_scope();
        let probe = GenerateMemoriesRequest {
            app_name: scope.app,
            user_id: scope.user,
            ..Default::default()
        };
        let Ok(request) = self.backend.request(caller, probe) else {
            return false;
        };
        let answer = match self.backend.memory().generate_memories(request).await {
            Err(s) if s.code() == Code::FailedPrecondition => Some(false),
            Err(s) if s.code() == Code::InvalidArgument => Some(true),
            _ => None,
        };
        match answer {
            Some(known) => *self.generator.get_or_init(|| async { known }).await,
            None => false,
        }
    }

    async fn memory_context(
        &self,
        caller: &Caller,
        a: args::MemoryContext,
    ) -> Result<GetPromptResult, GatewayError> {
        let search = args::SearchMemory {
            query: a.question.clone(),
            limit: Some(CONTEXT_MEMORIES),
            mode: None,
            filters: None,
            as_of: None,
            include_superseded: None,
            scope: args::ScopeArgs {
                app_name: a.app_name,
                user_id: a.user_id,
            },
        };
        let (_, found) = self.search(caller, &search).await?;
        let text = format!(
            "What you remember about the user that may bear on this:\n{}\n\n{}",
            tools::memories_text(&found, "(nothing relevant remembered)"),
            a.question
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description("The memories relevant to the question, then the question"),
        )
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "adk-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Durable memory and conversation sessions. Before answering, search_memory for \
             what you may know about the user; when the user tells you something worth \
             keeping, add_memory it as a self-contained sentence.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let mut tools = self.tool_router.list_all();
        if !self.has_generator(&caller).await {
            tools.retain(|t| !tools::GENERATION_TOOLS.contains(&t.name.as_ref()));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let size = request
            .arguments
            .as_ref()
            .map_or(0, |a| serde_json::to_vec(a).map_or(usize::MAX, |v| v.len()));
        if size > MAX_ARGUMENT_BYTES {
            return Err(ErrorData::invalid_params(
                format!("arguments are {size} bytes; at most {MAX_ARGUMENT_BYTES} are accepted"),
                None,
            ));
        }
        if tools::GENERATION_TOOLS.contains(&request.name.as_ref())
            && !self.has_generator(&self.caller(&ctx)?).await
        {
            return Err(ErrorData::invalid_params(
                format!(
                    "tool not found: {} needs memory-svc --generator",
                    request.name
                ),
                None,
            ));
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, ctx))
            .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        Ok(self.resources(&caller, request).await?)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        Ok(self.read(&caller, &request.uri).await?.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompt = Prompt::new(
            "memory_context",
            Some("The user's memories relevant to a question, ready to put before it"),
            Some(vec![
                PromptArgument::new("question")
                    .with_description("The question or task")
                    .with_required(true),
                PromptArgument::new("app_name")
                    .with_description("The agent app, when your token allows several"),
                PromptArgument::new("user_id")
                    .with_description("The user, when your token acts for several"),
            ]),
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "memory_context" {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            ));
        }
        let caller = self.caller(&ctx)?;
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let Parameters(a) = serde_json::from_value(arguments)
            .map(Parameters)
            .map_err(|e| ErrorData::invalid_params(format!("arguments: {e}"), None))?;
        Ok(self.memory_context(&caller, a).await?.into())
    }
}
