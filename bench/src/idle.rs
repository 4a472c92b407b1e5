//! `idle`: the resident memory of freshly started servers.

use std::time::Duration;

use crate::{
    ctx::Ctx,
    load::{Report, Row},
    server::Server,
    Result,
};

/// Starts each server, waits a second and reports its RSS.
pub async fn idle(ctx: &Ctx, report: &mut Report) -> Result<()> {
    for name in ["session-svc", "memory-svc"] {
        let server = Server::spawn(ctx, name, &[]).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rss, hwm) = server.rss_kb();
        println!(
            "{name}: idle RSS {:.1} MB (peak {:.1} MB)",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        report.push(Row::info(&format!("{name} idle"), &server));
        server.stop().await;
    }
    Ok(())
}
