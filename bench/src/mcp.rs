//! `search_memory` through the gateway's MCP front door beside the same search over gRPC, and
//! many MCP clients at once: session-svc, memory-svc and the gateway as release processes on
//! loopback.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use serde_json::{json, Value};

use crate::{
    ctx::Ctx,
    ingest::{load_memory, Texts},
    load::{self, drive, Report, Row},
    requests::{memory_clients, search_request},
    server::Server,
    text::{Corpus, QueryClass},
    Result, APP,
};

/// The protocol version the raw JSON-RPC requests name (with an `initialize`, as the clients
/// in the wild speak it; the gateway answers every version statelessly).
const VERSION: &str = "2025-06-18";

/// Searches each of the concurrent clients makes after its handshake.
const SEARCHES_PER_CLIENT: usize = 5;

struct Mcp {
    http: reqwest::Client,
    url: String,
}

impl Mcp {
    fn new(addr: &str) -> Result<Self> {
        // reqwest is built without a TLS provider of its own (plain HTTP here, all the same).
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            http: reqwest::Client::builder().tcp_nodelay(true).build()?,
            url: format!("http://{addr}/mcp"),
        })
    }

    /// One JSON-RPC call; its `result`, or an error for anything else (a JSON-RPC error, a
    /// tool result with `isError`, an HTTP failure).
    async fn call(&self, id: u64, method: &str, params: Value) -> Result<Value> {
        let response = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .await?;
        let status = response.status();
        let mut reply: Value = response.json().await?;
        if !status.is_success() || reply.get("error").is_some() {
            return Err(format!("{method}: HTTP {status}: {reply}").into());
        }
        let result = reply["result"].take();
        if result["isError"] == true {
            return Err(format!("{method}: {result}").into());
        }
        Ok(result)
    }

    async fn search(&self, id: u64, user: &str, query: String) -> Result<()> {
        let arguments = json!({"query": query, "limit": 10, "app_name": APP, "user_id": user});
        self.call(
            id,
            "tools/call",
            json!({"name": "search_memory", "arguments": arguments}),
        )
        .await
        .map(drop)
    }
}

pub async fn mcp(ctx: &Ctx, report: &mut Report, entries: u64, clients: usize) -> Result<()> {
    let session = Server::spawn(ctx, "session-svc", &[]).await?;
    let session_endpoint = format!("http://{}", session.addr);
    let memory = Server::spawn(
        ctx,
        "memory-svc",
        &["--session-endpoint", &session_endpoint],
    )
    .await?;
    let memory_endpoint = format!("http://{}", memory.addr);
    let gateway = Server::spawn_stateless(
        ctx,
        "gateway",
        &[
            "--session-endpoint",
            &session_endpoint,
            "--memory-endpoint",
            &memory_endpoint,
        ],
    )
    .await?;

    let corpus = Arc::new(Corpus::new());
    let texts: Texts = {
        let corpus = corpus.clone();
        Arc::new(move |i| corpus.memory_text(i))
    };
    let user = "searcher";
    load_memory(&memory, &texts, user, 0..entries, 100, 4).await?;

    // The same queries, one at a time, first straight to memory-svc, then through the gateway.
    let class = QueryClass::ALL[0];
    let grpc = Arc::new(memory_clients(&memory, 1));
    let counter = Arc::new(AtomicU64::new(0));
    let label = format!(
        "SearchMemory over gRPC among {entries} entries ({})",
        class.label()
    );
    let row = {
        let (corpus, counter) = (corpus.clone(), counter.clone());
        drive(ctx, &label, 1, &memory, move |_| {
            let mut client = grpc[0].clone();
            let query = corpus.query(class, counter.fetch_add(1, Ordering::Relaxed));
            async move {
                client.search_memory(search_request(user, query)).await?;
                Ok(())
            }
        })
        .await?
    };
    report.push(row);
    let through = Arc::new(Mcp::new(&gateway.addr)?);
    let counter = Arc::new(AtomicU64::new(0));
    let label = format!("search_memory over MCP (streamable HTTP) among {entries} entries");
    let row = {
        let corpus = corpus.clone();
        drive(ctx, &label, 1, &gateway, move |_| {
            let (mcp, i) = (through.clone(), counter.fetch_add(1, Ordering::Relaxed));
            let query = corpus.query(class, i);
            async move { mcp.search(i, user, query).await }
        })
        .await?
    };
    report.push(row);

    // Many MCP clients at once, each on its own connection: handshake, tool list, searches.
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let corpus = corpus.clone();
        let addr = gateway.addr.clone();
        tasks.push(tokio::spawn(async move {
            let mcp = Mcp::new(&addr)?;
            let mut latencies = load::new_hist();
            let init = json!({"protocolVersion": VERSION, "capabilities": {},
                              "clientInfo": {"name": "adk-bench", "version": "1"}});
            mcp.call(0, "initialize", init).await?;
            let tools = mcp.call(1, "tools/list", json!({})).await?;
            if tools["tools"].as_array().is_none_or(Vec::is_empty) {
                return Err::<_, crate::BoxError>("tools/list listed no tools".into());
            }
            for s in 0..SEARCHES_PER_CLIENT {
                let query = corpus.query(class, (c * SEARCHES_PER_CLIENT + s) as u64);
                let t0 = Instant::now();
                mcp.search(2 + s as u64, user, query).await?;
                load::record(&mut latencies, t0.elapsed());
            }
            Ok(latencies)
        }));
    }
    let mut hist = load::new_hist();
    let mut errors = Vec::new();
    for task in tasks {
        match task.await? {
            Ok(h) => {
                hist.add(&h).ok();
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let label = format!(
        "{clients} concurrent MCP clients (initialize, tools/list, {SEARCHES_PER_CLIENT} searches): {} errors",
        errors.len()
    );
    let row = Row::from_hist(&label, hist.len(), secs, &hist, &gateway);
    row.print();
    report.push(row);
    gateway.stop().await;
    memory.stop().await;
    session.stop().await;
    if let Some(first) = errors.first() {
        return Err(format!(
            "{} of {clients} MCP clients failed; first: {first}",
            errors.len()
        )
        .into());
    }
    Ok(())
}
