//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (skipped without one), how writes meet other transactions, and
//! the posting blocks replicas write at once.

use std::collections::HashMap;

use tokio_postgres::NoTls;

use super::{blocks, PgMemoryStore};
use crate::analysis::Analyzer;
use crate::store::{
    contract::{
        add, assert_searches_exact, delete, entries, entry, listed, memorize, memory_id,
        memory_store_suite, SCOPE,
    },
    Entry, MemoryStore, SearchQuery,
};

/// A fresh schema's connection string, or `None` without a test database.
async fn fresh_url() -> Option<String> {
    let url = adk_tests::postgres_url()?;
    Some(adk_tests::fresh_schema(&url).await)
}

async fn open() -> Option<((), PgMemoryStore)> {
    let url = fresh_url().await?;
    Some((
        (),
        PgMemoryStore::open(&url, 8, Analyzer::default())
            .await
            .unwrap(),
    ))
}

memory_store_suite!(open());

/// A write chosen as a deadlock's victim is rolled back and run again whole, and succeeds.
/// Which of two real transactions PostgreSQL picks as a deadlock's victim depends on which of
/// their deadlock timers fires first, so the abort is injected instead: a trigger fails the
/// delete's tombstone insert once with SQLSTATE 40P01, in the middle of its transaction, as
/// the deadlock detector would.
#[tokio::test]
async fn a_write_that_loses_a_deadlock_runs_again() {
    let Some(url) = fresh_url().await else {
        return;
    };
    let store = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    memorize(&store, entries(&[("a", "alpha")])).await;

    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE SEQUENCE attempts;
             CREATE FUNCTION lose_a_deadlock() RETURNS trigger AS $$
             BEGIN
                 IF nextval('attempts') = 1 THEN
                     RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
                 END IF;
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER lose_a_deadlock BEFORE INSERT ON memory_tombstones
                 FOR EACH ROW EXECUTE FUNCTION lose_a_deadlock();",
        )
        .await
        .unwrap();

    assert_eq!(delete(&store, memory_id("a")).await, 1);
    // Sequences ignore rollbacks: the first attempt failed, the second went through.
    let attempts: i64 = client
        .query_one("SELECT last_value FROM attempts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 2);
    assert!(listed(&store, SCOPE).await.is_empty());
    assert_eq!(add(&store, "s", entries(&[("a", "alpha")])).await, 0);
}

/// Text of common, mid-frequency and rare words (the vocabulary the exactness check queries).
fn text(seed: u64) -> String {
    let mut x = seed;
    let mut next = move |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    (0..1 + next(20))
        .map(|_| match next(10) {
            0..=4 => ["the", "is", "a", "my", "to"][next(5) as usize].to_owned(),
            5..=7 => format!("mid{}", next(40)),
            _ => format!("rare{}", next(2000)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two stores on one database (two replicas) write one scope at once: appends, rewrites in
/// place of each other's entries, deletions. Afterwards every block's bounds bound its
/// postings, every document frequency counts them, and searches rank exactly as scoring every
/// posting does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_writing_at_once_keep_block_bounds_upper() {
    let Some(url) = fresh_url().await else {
        return;
    };
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let store = PgMemoryStore::open(&url, 4, Analyzer::default())
            .await
            .unwrap();
        writers.push(tokio::spawn(async move {
            let other = 1 - w;
            for round in 0..25u64 {
                let batch = (0..12)
                    .map(|i| {
                        entry(
                            &format!("w{w}-{round}-{i}"),
                            &text(w << 32 | round << 8 | i),
                        )
                    })
                    .collect();
                add(&store, &format!("s{w}"), batch).await;
                if round > 0 {
                    // The other writer's entries of its previous round, rewritten in their
                    // slots with other words, and one of them deleted.
                    let rewritten = (0..4)
                        .map(|i| Entry {
                            session_id: format!("s{other}"),
                            ..entry(
                                &format!("w{other}-{}-{i}", round - 1),
                                &text(7 << 40 | w << 32 | round << 8 | i),
                            )
                        })
                        .collect();
                    memorize(&store, rewritten).await;
                    let id = format!("w{other}-{}-{}", round - 1, 5 + round % 7);
                    delete(&store, memory_id(&id)).await;
                }
                store
                    .search(
                        SCOPE,
                        &SearchQuery {
                            text: "the mid3 rare7".into(),
                            limit: 5,
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }

    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let mut df = HashMap::<String, i64>::new();
    let rows = client
        .query(
            "SELECT term, span, postings, max_tf, min_len, block FROM memory_blocks",
            &[],
        )
        .await
        .unwrap();
    assert!(rows.len() > 100, "{} blocks", rows.len());
    for row in &rows {
        let (term, span, count, max_tf, min_len): (String, i64, i32, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        let mut postings = Vec::new();
        blocks::decode(span, row.get(5), &mut postings).unwrap();
        assert_eq!(postings.len(), count as usize, "{term} {span}");
        assert!(!postings.is_empty(), "{term} {span}: an empty block");
        for p in &postings {
            assert!(
                i64::from(p.tf) <= max_tf && i64::from(p.len) >= min_len,
                "{term} {span}: {p:?} beyond the bounds ({max_tf}, {min_len})"
            );
        }
        *df.entry(term).or_default() += i64::from(count);
    }
    let stored: HashMap<String, i64> = client
        .query("SELECT term, df FROM memory_terms", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(stored, df);
    let store = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    assert!(assert_searches_exact(&store).await > 400);
}
