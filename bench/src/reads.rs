//! The read scenarios of session-svc, each on a server seeded first (with `--seed-sync`):
//! `get` (GetSession, all events), `recent` (GetSession, the 10 most recent events) and `list`
//! (ListSessions pages).

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, Event, GetSessionRequest, ListSessionsRequest,
};
use tonic::transport::Channel;

use crate::{
    appends::stream_appends,
    ctx::Ctx,
    load::{drive, Report},
    requests::{conns_for, create_session, session_clients, template_event},
    server::Server,
    text::Corpus,
    BoxError, Result, APP,
};

/// Seeds one session of `n` events through a pipelined AppendEvents stream.
async fn seed_session(
    client: &mut SessionServiceClient<Channel>,
    template: &Event,
    user: &str,
    session: &str,
    n: u64,
) -> Result<()> {
    create_session(client, APP, user, session).await?;
    let t = Instant::now();
    let done = stream_appends(client, template, user, session, 0, n, 256, None, |_| {}).await?;
    if done != n {
        return Err(format!("seeded {done} of {n} events").into());
    }
    println!(
        "  seeded {session}: {n} events in {:.1}s ({:.0} events/s)",
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `get`: GetSession of whole sessions of each length of `sizes`.
pub async fn get(ctx: &Ctx, report: &mut Report, sizes: &[u64], c: usize) -> Result<()> {
    get_like(ctx, report, sizes, c, None).await
}

/// `recent`: GetSession of the 10 most recent events of sessions of each length of `sizes`.
pub async fn recent(ctx: &Ctx, report: &mut Report, sizes: &[u64], c: usize) -> Result<()> {
    get_like(ctx, report, sizes, c, Some(10)).await
}

/// GetSession of sessions of each length of `sizes` (`recent`: of that many recent events).
async fn get_like(
    ctx: &Ctx,
    report: &mut Report,
    sizes: &[u64],
    c: usize,
    recent: Option<i32>,
) -> Result<()> {
    let corpus = Corpus::new();
    let template = template_event(&corpus, 3);
    let seed_sync = ["--sync", ctx.seed_sync.as_str()];
    let server = Server::spawn(ctx, "session-svc", &seed_sync).await?;
    let clients = Arc::new(session_clients(&server, conns_for(c)));
    for &n in sizes {
        seed_session(
            &mut clients[0].clone(),
            &template,
            "reader",
            &format!("len{n}"),
            n,
        )
        .await?;
    }
    for &n in sizes {
        let clients = clients.clone();
        let label = match recent {
            Some(k) => format!("GetSession num_recent_events={k} of {n}-event session"),
            None => format!("GetSession (all events) of {n}-event session"),
        };
        let row = drive(ctx, &label, c, &server, move |w| {
            let mut client = clients[w % clients.len()].clone();
            async move {
                let s = client
                    .get_session(GetSessionRequest {
                        app_name: APP.into(),
                        user_id: "reader".into(),
                        session_id: format!("len{n}"),
                        num_recent_events: recent,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                let want = recent.map_or(n, |k| (k as u64).min(n));
                if s.events.len() as u64 != want {
                    return Err(format!("got {} events, want {want}", s.events.len()).into());
                }
                Ok(())
            }
        })
        .await?;
        report.push(row);
    }
    server.stop().await;
    Ok(())
}

/// `list`: ListSessions pages among each number of sessions of `counts`, over all users and
/// for one user.
pub async fn list(ctx: &Ctx, report: &mut Report, counts: &[u64], c: usize) -> Result<()> {
    let seed_sync = ["--sync", ctx.seed_sync.as_str()];
    for &n in counts {
        let server = Server::spawn(ctx, "session-svc", &seed_sync).await?;
        let clients = Arc::new(session_clients(&server, 8));
        let app = format!("list{n}");
        // Seed: n sessions over 100 users, 32 creators.
        let t = Instant::now();
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for w in 0..32 {
            let mut client = clients[w % clients.len()].clone();
            let next = next.clone();
            let app = app.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, BoxError>(());
                    }
                    create_session(
                        &mut client,
                        &app,
                        &format!("u{}", i % 100),
                        &format!("s{i}"),
                    )
                    .await?;
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        println!(
            "  seeded {n} sessions in {:.1}s ({:.0}/s)",
            t.elapsed().as_secs_f64(),
            n as f64 / t.elapsed().as_secs_f64()
        );
        // Tokens of the first 50 pages, to measure pages deeper than the first.
        let mut tokens = vec![String::new()];
        let mut client = clients[0].clone();
        while tokens.len() < 50 {
            let page = client
                .list_sessions(ListSessionsRequest {
                    app_name: app.clone(),
                    user_id: None,
                    page_size: 20,
                    page_token: tokens.last().unwrap().clone(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            if page.next_page_token.is_empty() {
                break;
            }
            tokens.push(page.next_page_token);
        }
        let tokens = Arc::new(tokens);
        for (kind, user) in [
            ("all users, pages 1-50", None),
            ("one user (of 100), first page", Some("u7")),
        ] {
            let clients = clients.clone();
            let tokens = tokens.clone();
            let app = app.clone();
            let counter = Arc::new(AtomicU64::new(0));
            let row = drive(
                ctx,
                &format!("ListSessions page_size=20 among {n} sessions, {kind}"),
                c,
                &server,
                move |w| {
                    let mut client = clients[w % clients.len()].clone();
                    let i = counter.fetch_add(1, Ordering::Relaxed) as usize;
                    let token = if user.is_none() {
                        tokens[i % tokens.len()].clone()
                    } else {
                        String::new()
                    };
                    let app = app.clone();
                    async move {
                        let page = client
                            .list_sessions(ListSessionsRequest {
                                app_name: app,
                                user_id: user.map(str::to_owned),
                                page_size: 20,
                                page_token: token,
                                ..Default::default()
                            })
                            .await?
                            .into_inner();
                        if page.sessions.is_empty() {
                            return Err("empty ListSessions page".into());
                        }
                        Ok(())
                    }
                },
            )
            .await?;
            report.push(row);
        }
        server.stop().await;
    }
    Ok(())
}
