//! `gateway`: serves MCP over HTTP (the default) or stdio (`gateway mcp --stdio`).

use std::process::ExitCode;

use clap::Parser;
use gateway::{
    caller::Caller,
    config::{Cli, Command},
    mcp::Gateway,
};
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // stdout carries MCP over stdio, and the readiness line over HTTP: logs go to stderr.
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        );
    if cli.http.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let backend = gateway::backend(&cli.services)?;
    match cli.command {
        Some(Command::Mcp(stdio)) => {
            let caller = Caller::local(stdio.app, stdio.user);
            let server = Gateway::new(backend, Some(caller))
                .serve(rmcp::transport::stdio())
                .await?;
            server.waiting().await?;
        }
        None => {
            let running = gateway::http::start(&cli.http, backend).await?;
            println!("gateway listening on {}", running.addr);
            shutdown_signal().await;
            running.stop().await?;
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
