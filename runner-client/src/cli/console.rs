//! `console`: serve the web console until interrupted.

use std::net::SocketAddr;

use clap::Args;
use runner_client::console;

use super::{Cli, CliError};

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Address to serve the console on. Anything but a loopback address exposes it to the
    /// network: put TLS in front of it then.
    #[arg(long, env = "RUNNER_CONSOLE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

    /// Apps listed on the start page, comma-separated (others can be opened by name). Only
    /// those the browser's token may see are shown.
    #[arg(long, env = "RUNNER_CONSOLE_APPS", value_delimiter = ',')]
    apps: Vec<String>,
}

/// `console`: serves until Ctrl-C (or SIGTERM).
pub(super) async fn serve(cli: &Cli, args: &ConsoleArgs) -> Result<(), CliError> {
    if cli.token_file.is_some() {
        // Every browser signs in with its own token; a shared one would show its view to anyone
        // who reaches the console.
        tracing::warn!("console: --token-file is not used; browsers sign in with their own token");
    }
    let config = console::Config {
        session_endpoint: cli.session_endpoint.clone(),
        memory_endpoint: cli.memory_endpoint.clone(),
        ca_pem: cli.access()?.ca_pem,
        apps: args
            .apps
            .iter()
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty())
            .collect(),
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let running = console::spawn(listener, config)?;
    println!("runner-client console listening on http://{}", running.addr);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        served = running.task => served??,
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(())
}
