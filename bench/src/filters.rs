//! `filtered-search`: SearchMemory and ListMemories with a metadata filter that keeps 1% of one
//! user's memory, beside the same searches without it.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use adk_proto::{
    memory::v1::{
        metadata_condition::Value, AddMemoryRequest, ListMemoriesRequest, MemoryEntry,
        MemoryFilter, MetadataCondition, MetadataConditions, MetadataOperator,
    },
    session::v1::{part, Content, Part},
};

use crate::{
    ctx::Ctx,
    load::{drive, Report, Row},
    requests::{conns_for, memory_clients, search_request},
    server::{self, Server},
    text::{self, Corpus},
    Result, APP,
};

/// Entries written per AddMemory call while loading.
const BATCH: u64 = 1000;

/// How long to wait for autovacuum after the load, on PostgreSQL: its launcher visits each
/// database once a minute by default (`autovacuum_naptime`).
const SETTLE: Duration = Duration::from_secs(150);

/// The filter keeping entries whose `bucket` is 7: one in a hundred, spread over the memory.
fn one_percent() -> MemoryFilter {
    MemoryFilter {
        any_of: vec![MetadataConditions {
            all_of: vec![MetadataCondition {
                key: "bucket".into(),
                operator: MetadataOperator::Equal.into(),
                value: Some(Value::NumberValue(7.0)),
            }],
        }],
        topics: vec![],
    }
}

/// Loads `entries` entries (each with `bucket`: its number modulo 100), then times searches of
/// each query class with and without the 1% filter, and a filtered listing, at concurrency `c`.
pub async fn filtered_search(ctx: &Ctx, report: &mut Report, entries: u64, c: usize) -> Result<()> {
    let corpus = Arc::new(Corpus::new());
    let user = "filtered";
    let srv = Server::spawn(ctx, "memory-svc", &[]).await?;
    let clients = Arc::new(memory_clients(&srv, conns_for(c)));
    let t = Instant::now();
    let mut client = clients[0].clone();
    for start in (0..entries).step_by(BATCH as usize) {
        let memories = (start..(start + BATCH).min(entries))
            .map(|i| MemoryEntry {
                id: format!("m{i}"),
                author: "user".into(),
                content: Some(Content {
                    role: Some("user".into()),
                    parts: vec![Part {
                        data: Some(part::Data::Text(corpus.memory_text(i))),
                        ..Default::default()
                    }],
                }),
                custom_metadata: format!(r#"{{"bucket": {}, "source": "s{}"}}"#, i % 100, i % 7),
                ..Default::default()
            })
            .collect();
        client
            .add_memory(AddMemoryRequest {
                app_name: APP.into(),
                user_id: user.into(),
                memories,
                custom_metadata: String::new(),
            })
            .await?;
    }
    let mut row = Row::info(
        &format!(
            "AddMemory load of {entries} entries with metadata ({:.1} s)",
            t.elapsed().as_secs_f64()
        ),
        &srv,
    );
    row.unit = "entries";
    report.push(row);
    // Searched as a store that has served a while is: on PostgreSQL, once autovacuum has
    // marked the loaded metadata index's pages all-visible (see `server::autovacuumed`).
    if ctx.postgres.is_some() {
        let waited = server::autovacuumed(ctx, &srv, "memory_metadata", SETTLE).await?;
        let label = match waited {
            Some(waited) => format!(
                "autovacuum visited memory_metadata {:.0} s after the load",
                waited.as_secs_f64()
            ),
            None => format!(
                "autovacuum did not visit memory_metadata within {} s of the load",
                SETTLE.as_secs()
            ),
        };
        report.push(Row::info(&label, &srv));
    }
    for class in text::QueryClass::ALL {
        for filtered in [false, true] {
            let (clients, corpus) = (clients.clone(), corpus.clone());
            let counter = Arc::new(AtomicU64::new(0));
            let label = format!(
                "SearchMemory {}{} among {entries} entries",
                class.label(),
                if filtered { " with a 1% filter" } else { "" }
            );
            let row = drive(ctx, &label, c, &srv, move |w| {
                let mut client = clients[w % clients.len()].clone();
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let mut request = search_request(user, corpus.query(class, i));
                if filtered {
                    request.filter = Some(one_percent());
                }
                async move {
                    client.search_memory(request).await?;
                    Ok(())
                }
            })
            .await?;
            report.push(row);
        }
    }
    let clients_list = clients.clone();
    let label = format!("ListMemories (20) with a 1% filter among {entries} entries");
    let row = drive(ctx, &label, c, &srv, move |w| {
        let mut client = clients_list[w % clients_list.len()].clone();
        async move {
            client
                .list_memories(ListMemoriesRequest {
                    app_name: APP.into(),
                    user_id: user.into(),
                    page_size: 20,
                    filter: Some(one_percent()),
                    ..Default::default()
                })
                .await?;
            Ok(())
        }
    })
    .await?;
    report.push(row);
    srv.stop().await;
    Ok(())
}
