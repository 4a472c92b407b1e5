//! One HTTP front door to session-svc and memory-svc: their memory and sessions as MCP tools,
//! resources and a prompt for agents that speak the Model Context Protocol, over streamable
//! HTTP (`/mcp`) or stdio (`gateway mcp --stdio`), and the web console for people (`/`).
//!
//! - [`config`]: the flags;
//! - [`http`]: the listener and its routes;
//! - [`guard`]: the Host and Origin checks and the bearer token's caller, for every route;
//! - [`caller`]: who calls, and the one rule deciding whose data a call touches;
//! - [`backend`]: the connections to the services, each call carrying its caller's token;
//! - [`filters`]: the filters of memory searches, listings and purges;
//! - [`mcp`]: the MCP server (tools, resources, prompt);
//! - [`console`]: the web console;
//! - [`error`]: the gateway's errors and how they reach MCP clients.

pub mod backend;
pub mod caller;
pub mod config;
pub mod console;
pub mod error;
pub mod filters;
pub mod guard;
pub mod http;
pub mod mcp;

use runner_client::Access;

/// How to reach the services, from the flags.
pub fn access(services: &config::Services) -> Result<Access, std::io::Error> {
    let token = services
        .token_file
        .as_deref()
        .map(|p| std::fs::read_to_string(p).map(|t| t.trim().to_owned()))
        .transpose()?;
    Ok(Access {
        token,
        ca_pem: services.ca_cert.as_deref().map(std::fs::read).transpose()?,
    })
}

/// The connections the flags name.
pub fn backend(
    services: &config::Services,
) -> Result<backend::Backend, Box<dyn std::error::Error>> {
    let access = access(services)?;
    Ok(backend::Backend::connect(
        &services.session_endpoint,
        &services.memory_endpoint,
        &access,
    )?)
}
