//! The gateway's flags: where the services are and how to reach them (the same settings
//! `runner-client` takes), where to listen, and who may call (over MCP and in the console).

use std::{net::SocketAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand};

/// Serve session-svc's and memory-svc's sessions and memory to any MCP client (streamable
/// HTTP at /mcp, or stdio with `gateway mcp --stdio`) and to people (the web console at /).
#[derive(Debug, Parser)]
#[command(name = "gateway", version = adk_version::version!())]
pub struct Cli {
    #[command(flatten)]
    pub services: Services,

    #[command(flatten)]
    pub http: Http,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdin and stdout, for clients that launch a process (Claude Desktop).
    /// The caller is whoever launched it: `--token-file` is presented to the services, and
    /// `--app` and `--user` are used when a tool call names none.
    Mcp(Stdio),
}

/// How to reach the services.
#[derive(Debug, Clone, Args)]
pub struct Services {
    /// session-svc address.
    #[arg(
        long,
        env = "GATEWAY_SESSION_ENDPOINT",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    pub session_endpoint: String,

    /// memory-svc address.
    #[arg(
        long,
        env = "GATEWAY_MEMORY_ENDPOINT",
        default_value = "http://127.0.0.1:50052",
        global = true
    )]
    pub memory_endpoint: String,

    /// File holding the bearer token the gateway presents to both services on calls that
    /// carry none of their own (stdio, or HTTP without --tokens-file).
    #[arg(long, env = "GATEWAY_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,

    /// CA certificate (PEM) of `https://` service endpoints.
    #[arg(long, env = "GATEWAY_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,
}

/// The HTTP front door.
#[derive(Debug, Clone, Args)]
pub struct Http {
    /// Address to listen on; port 0 picks a free port (the address is printed once ready).
    #[arg(long, env = "GATEWAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// The services' tokens file (the same JSON): MCP callers must present one of its tokens
    /// as `Authorization: Bearer`, and browsers sign in to the console with one; it decides the
    /// apps and users they reach and is passed on to the services. Without it, callers are not
    /// authenticated.
    #[arg(long, env = "GATEWAY_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Serve without --tokens-file on an address other than loopback (anyone who reaches the
    /// port can then read and write every user's memory, within --token-file's grant).
    #[arg(long, env = "GATEWAY_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,

    /// Host names (or host:port) requests may be addressed to, besides loopback names,
    /// comma-separated: the public name of a gateway listening beyond loopback.
    #[arg(long, env = "GATEWAY_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Browser origins (scheme://host:port) allowed to call the gateway besides its own (the
    /// console's page), comma-separated. Requests with any other `Origin` header are refused
    /// (403); requests without one are served.
    #[arg(long, env = "GATEWAY_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// Log line format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "GATEWAY_LOG_FORMAT", default_value = "plain", value_parser = ["plain", "json"])]
    pub log_format: String,
}

/// `gateway mcp`.
#[derive(Debug, Clone, Args)]
pub struct Stdio {
    /// Serve over stdin and stdout (the only transport of this command).
    #[arg(long, required = true)]
    pub stdio: bool,

    /// The app a tool call uses when it names none.
    #[arg(long, env = "GATEWAY_APP")]
    pub app: Option<String>,

    /// The user a tool call uses when it names none.
    #[arg(long, env = "GATEWAY_USER")]
    pub user: Option<String>,
}
