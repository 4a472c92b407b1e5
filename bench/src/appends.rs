//! The write scenarios of session-svc: `append` (unary AppendEvent) and `append-stream`
//! (AppendEvents streams, pipelined or not), each worker appending to a session of its own;
//! and [`stream_appends`], the one AppendEvents stream that also seeds the read scenarios.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, AppendEventRequest, Event,
};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::{
    ctx::Ctx,
    load::{self, drive, Report, Row},
    requests::{append_request, conns_for, create_session, session_clients, template_event},
    server::Server,
    text::Corpus,
    BoxError, Result, APP,
};

/// The user of worker `worker`.
fn user_of(worker: usize) -> String {
    format!("u{worker}")
}
/// The session of worker `worker`.
fn session_of(worker: usize) -> String {
    format!("s{worker}")
}

/// `append`: unary AppendEvent from `c` workers, on a fresh server for each `c` of `levels`.
pub async fn append(ctx: &Ctx, report: &mut Report, levels: &[usize]) -> Result<()> {
    let corpus = Arc::new(Corpus::new());
    for &c in levels {
        let server = Server::spawn(ctx, "session-svc", &[]).await?;
        let clients = session_clients(&server, conns_for(c));
        for w in 0..c {
            create_session(
                &mut clients[w % clients.len()].clone(),
                APP,
                &user_of(w),
                &session_of(w),
            )
            .await?;
        }
        let templates: Arc<Vec<Event>> =
            Arc::new((0..16).map(|s| template_event(&corpus, s)).collect());
        let counters: Arc<Vec<AtomicU64>> = Arc::new((0..c).map(|_| AtomicU64::new(0)).collect());
        let clients = Arc::new(clients);
        let row = drive(ctx, &format!("AppendEvent c={c}"), c, &server, move |w| {
            let mut client = clients[w % clients.len()].clone();
            let templates = templates.clone();
            let counters = counters.clone();
            async move {
                let i = counters[w].fetch_add(1, Ordering::Relaxed);
                let req = append_request(
                    &templates[(i % 16) as usize],
                    &user_of(w),
                    &session_of(w),
                    w,
                    i,
                );
                client.append_event(req).await?;
                Ok(())
            }
        })
        .await?;
        report.push(row);
        server.stop().await;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
/// One AppendEvents stream: sends `count` requests for (user, session) with at most `window`
/// in flight, calling `on_response(latency)` for each answer. Fails on any in-band error.
pub async fn stream_appends(
    client: &mut SessionServiceClient<Channel>,
    template: &Event,
    user: &str,
    session: &str,
    first: u64,
    count: u64,
    window: usize,
    deadline: Option<Instant>,
    mut on_response: impl FnMut(Duration),
) -> Result<u64> {
    let (tx, rx) = mpsc::channel::<AppendEventRequest>(window.max(1));
    let mut responses = client
        .append_events(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    let permits = Arc::new(tokio::sync::Semaphore::new(window.max(1)));
    let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<Instant>();
    let sender = {
        let permits = permits.clone();
        let template = template.clone();
        let (user, session) = (user.to_owned(), session.to_owned());
        tokio::spawn(async move {
            for i in first..first + count {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let permit = permits.clone().acquire_owned().await.unwrap();
                permit.forget();
                let req = append_request(&template, &user, &session, 0, i);
                let _ = sent_tx.send(Instant::now());
                if tx.send(req).await.is_err() {
                    break;
                }
            }
            // Dropping tx closes the request stream once everything is answered.
        })
    };
    let mut done = 0;
    while let Some(resp) = responses.message().await? {
        let sent = sent_rx.recv().await.ok_or("response without request")?;
        on_response(sent.elapsed());
        if resp.code != 0 {
            return Err(
                format!("append failed in-band: code {} {}", resp.code, resp.message).into(),
            );
        }
        done += 1;
        permits.add_permits(1);
    }
    sender.await?;
    Ok(done)
}

/// `append-stream`: one AppendEvents stream per worker with `window` requests in flight, on a
/// fresh server for each (window, concurrency).
pub async fn append_stream(
    ctx: &Ctx,
    report: &mut Report,
    levels: &[usize],
    windows: &[usize],
) -> Result<()> {
    let corpus = Corpus::new();
    let template = template_event(&corpus, 7);
    for &window in windows {
        for &c in levels {
            if window > 1 && c > 16 {
                continue; // pipelining many streams adds nothing new
            }
            let server = Server::spawn(ctx, "session-svc", &[]).await?;
            let clients = session_clients(&server, conns_for(c));
            for w in 0..c {
                create_session(
                    &mut clients[w % clients.len()].clone(),
                    APP,
                    &user_of(w),
                    &session_of(w),
                )
                .await?;
            }
            let start = Instant::now();
            let measure_from = start + ctx.warmup;
            let deadline = measure_from + ctx.duration;
            let mut tasks = Vec::new();
            for w in 0..c {
                let mut client = clients[w % clients.len()].clone();
                let template = template.clone();
                tasks.push(tokio::spawn(async move {
                    let mut hist = load::new_hist();
                    let mut ops = 0u64;
                    stream_appends(
                        &mut client,
                        &template,
                        &user_of(w),
                        &session_of(w),
                        0,
                        u64::MAX / 4,
                        window,
                        Some(deadline),
                        |lat| {
                            if Instant::now() >= measure_from {
                                load::record(&mut hist, lat);
                                ops += 1;
                            }
                        },
                    )
                    .await?;
                    Ok::<_, BoxError>((hist, ops))
                }));
            }
            let mut hist = load::new_hist();
            let mut ops = 0;
            for t in tasks {
                let (h, o) = t.await??;
                hist.add(&h).ok();
                ops += o;
            }
            let secs = (Instant::now() - measure_from).as_secs_f64();
            let row = Row::from_hist(
                &format!("AppendEvents stream c={c} window={window}"),
                ops,
                secs,
                &hist,
                &server,
            );
            row.print();
            report.push(row);
            server.stop().await;
        }
    }
    Ok(())
}
