//! The contract suite on PostgreSQL, each test in a fresh schema of the database
//! `ADK_TEST_POSTGRES` names (ignored unless asked for: `adk_tests::prerequisite`), how writes
//! meet other transactions, and the posting blocks replicas write at once.

use std::collections::HashMap;

use tokio_postgres::NoTls;

use super::{blocks, schema::MIGRATIONS, vectors, PgMemoryStore};
use crate::store::{
    contract::{
        self, add, assert_searches_exact, delete, entries, entry, generated_corpus, listed,
        memorize, memory_id, memory_store_suite, SCOPE,
    },
    plan::Write,
    DeleteTarget, Entry, MemoryStore, SearchQuery, Vectors,
};
use crate::{analysis::Analyzer, filter::Filter};

/// A fresh schema's connection string; fails the test without a test database.
async fn fresh_url() -> String {
    adk_tests::fresh_schema(&adk_tests::prerequisite::postgres()).await
}

async fn open() -> ((), PgMemoryStore) {
    let url = fresh_url().await;
    (
        (),
        PgMemoryStore::open(&url, 8, Analyzer::default())
            .await
            .unwrap(),
    )
}

memory_store_suite!(open(), needs_postgres);

/// A write chosen as a deadlock's victim is rolled back and run again whole, and succeeds.
/// Which of two real transactions PostgreSQL picks as a deadlock's victim depends on which of
/// their deadlock timers fires first, so the abort is injected instead: a trigger fails the
/// delete's tombstone insert once with SQLSTATE 40P01, in the middle of its transaction, as
/// the deadlock detector would.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_write_that_loses_a_deadlock_runs_again() {
    let url = fresh_url().await;
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
/// place of each other's entries, deletions. Afterwards every block's bounds and size describe
/// its postings, every entry's terms have its postings (no more, no fewer), and searches rank
/// exactly as scoring every posting does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn replicas_writing_at_once_keep_block_bounds_upper() {
    let url = fresh_url().await;
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
            store
        }));
    }
    let mut replicas = Vec::new();
    for writer in writers {
        replicas.push(writer.await.unwrap());
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
    // Every term of every entry has its postings, and no other term has any.
    let mut indexed = HashMap::<String, i64>::new();
    for row in client
        .query("SELECT unnest(terms) FROM memory_entries", &[])
        .await
        .unwrap()
    {
        *indexed.entry(row.get(0)).or_default() += 1;
    }
    assert_eq!(indexed, df);
    let store = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    assert!(assert_searches_exact(&store).await > 400);
    // The writers kept blocks of their searches, read at versions the other one's writes
    // made stale: they rank as a replica that kept nothing does.
    for replica in &replicas {
        assert!(assert_searches_exact(replica).await > 400);
    }
}

/// A database of schema 3 (one row per posting) is converted when opened: the same entries,
/// statistics, tombstones and vectors, and searches rank exactly as scoring every posting does.
///
/// The schema-3 database is made from a store of today's schema holding the generated corpus:
/// its rows are copied into a schema created by the first three steps, and its blocks written
/// out as the rows per posting schema 3 kept.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn converts_a_schema_3_database() {
    let (now_url, old_url) = (fresh_url().await, fresh_url().await);
    let now = PgMemoryStore::open(&now_url, 4, Analyzer::default())
        .await
        .unwrap();
    generated_corpus(&now).await;
    let old = adk_common::postgres::pool(&old_url, 1).unwrap();
    adk_common::postgres::migrate(&old, "memory-svc", &MIGRATIONS[..3])
        .await
        .unwrap();

    let (client, connection) = tokio_postgres::connect(&old_url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let from = schema_of(&now_url);
    client
        .batch_execute(&format!(
            "INSERT INTO memory_entries SELECT app_name, user_id, seq, session_id, id, author,
                 ts_s, ts_n, custom_metadata, content, terms, len, context_before,
                 context_after FROM {from}.memory_entries;
             INSERT INTO memory_scopes SELECT * FROM {from}.memory_scopes;
             INSERT INTO memory_tombstones SELECT * FROM {from}.memory_tombstones;
             INSERT INTO memory_index SELECT * FROM {from}.memory_index;
             INSERT INTO memory_vectors SELECT app_name, user_id, seq, int8send(seq)
                 FROM memory_entries;"
        ))
        .await
        .unwrap();
    let rows = client
        .query(
            &format!("SELECT app_name, user_id, term, span, block FROM {from}.memory_blocks"),
            &[],
        )
        .await
        .unwrap();
    let (mut apps, mut users, mut terms) = (Vec::<&str>::new(), Vec::new(), Vec::new());
    let (mut seqs, mut tfs, mut lens) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let mut block = Vec::new();
        blocks::decode(row.get(3), row.get(4), &mut block).unwrap();
        for p in block {
            apps.push(row.get(0));
            users.push(row.get::<_, &str>(1));
            terms.push(row.get::<_, &str>(2));
            seqs.push(p.seq as i64);
            tfs.push(p.tf as i32);
            lens.push(p.len as i32);
        }
    }
    let written = client
        .execute(
            "INSERT INTO memory_postings (app_name, user_id, term, seq, tf, len)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[],
                 $5::integer[], $6::integer[])",
            &[&apps, &users, &terms, &seqs, &tfs, &lens],
        )
        .await
        .unwrap();
    assert!(written > 1000, "{written} postings");

    let converted = PgMemoryStore::open(&old_url, 4, Analyzer::default())
        .await
        .unwrap();
    let all = |store: PgMemoryStore| async move {
        let (entries, next) = store
            .list(SCOPE, usize::MAX, "", &Filter::default())
            .await
            .unwrap();
        assert_eq!(next, "");
        entries
    };
    let kept = all(converted.clone()).await;
    assert!(kept.len() > 1000, "{} entries", kept.len());
    // As they were, each now valid from its timestamp (schema 11).
    let written: Vec<Entry> = all(now)
        .await
        .into_iter()
        .map(|e| Entry {
            validity: crate::validity::Validity::from(e.timestamp),
            ..e
        })
        .collect();
    assert_eq!(kept, written);
    let version: i32 = client
        .query_one(
            "SELECT version FROM schema_versions WHERE component = 'memory-svc'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version as usize, MIGRATIONS.len());
    // Vacuumed after inserts of 1% (schema 12), so that filters read their candidates from
    // the index alone.
    let options: Vec<String> = client
        .query_one(
            "SELECT coalesce(reloptions, '{}') FROM pg_class
             WHERE oid = 'memory_metadata'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(options, ["autovacuum_vacuum_insert_scale_factor=0.01"]);
    let old_postings: Option<String> = client
        .query_one("SELECT to_regclass('memory_postings')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(old_postings, None);
    // Re-indexing keeps every entry's seq, so its vector stays its own.
    let unmatched: i64 = client
        .query_one(
            "SELECT count(*) FROM memory_entries e FULL JOIN memory_vectors v
                 USING (app_name, user_id, seq)
             WHERE v.vector IS DISTINCT FROM int8send(e.seq)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unmatched, 0);
    // The deleted id stays deleted.
    assert_eq!(
        add(&converted, "s", entries(&[("e7-3", "back again")])).await,
        0
    );
    assert!(assert_searches_exact(&converted).await > 400);
}

/// A database of schema 5, whose entries' kinds were read from their metadata, is converted
/// when opened: kinds decided by the generator's revisions, expiries taken from
/// `memory_expiries` (then dropped), finished jobs given their end time (see
/// `contract::before_kinds`). It is made as the schema-3 one is: rows of a store of today's
/// schema copied into a schema created by the first five steps.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn converts_the_kinds_of_a_schema_5_database() {
    let (now_url, old_url) = (fresh_url().await, fresh_url().await);
    let now = PgMemoryStore::open(&now_url, 4, Analyzer::default())
        .await
        .unwrap();
    let expiries = contract::before_kinds(&now).await;
    let old = adk_common::postgres::pool(&old_url, 1).unwrap();
    adk_common::postgres::migrate(&old, "memory-svc", &MIGRATIONS[..5])
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&old_url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let from = schema_of(&now_url);
    client
        .batch_execute(&format!(
            "INSERT INTO memory_entries SELECT app_name, user_id, seq, session_id, id, author,
                 ts_s, ts_n, custom_metadata, content, terms, len, context_before,
                 context_after FROM {from}.memory_entries;
             INSERT INTO memory_scopes SELECT * FROM {from}.memory_scopes;
             INSERT INTO memory_blocks SELECT * FROM {from}.memory_blocks;
             INSERT INTO memory_index SELECT * FROM {from}.memory_index;
             INSERT INTO memory_revisions OVERRIDING SYSTEM VALUE
                 SELECT * FROM {from}.memory_revisions;
             INSERT INTO memory_jobs SELECT id, app_name, user_id, open, due_ms, record
                 FROM {from}.memory_jobs;"
        ))
        .await
        .unwrap();
    for (id, at) in expiries {
        client
            .execute(
                "INSERT INTO memory_expiries (app_name, user_id, memory_id, expire_ms)
                 VALUES ($1, $2, $3, $4)",
                &[&SCOPE.app_name, &SCOPE.user_id, &id, &at],
            )
            .await
            .unwrap();
    }

    let converted = PgMemoryStore::open(&old_url, 4, Analyzer::default())
        .await
        .unwrap();
    contract::assert_kinds_converted(&converted).await;
    let expiries: Option<String> = client
        .query_one("SELECT to_regclass('memory_expiries')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(expiries, None);
}

/// A database of schema 9, whose entries had no validity, is converted when opened: each
/// entry valid from its timestamp (see `contract::before_validity`). It is made as the
/// schema-5 one is: rows of a store of today's schema copied into a schema created by the
/// first nine steps.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn gives_the_entries_of_a_schema_9_database_their_validity() {
    let (now_url, old_url) = (fresh_url().await, fresh_url().await);
    let now = PgMemoryStore::open(&now_url, 4, Analyzer::default())
        .await
        .unwrap();
    contract::before_validity(&now).await;
    let old = adk_common::postgres::pool(&old_url, 1).unwrap();
    adk_common::postgres::migrate(&old, "memory-svc", &MIGRATIONS[..9])
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&old_url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let from = schema_of(&now_url);
    client
        .batch_execute(&format!(
            "INSERT INTO memory_entries SELECT app_name, user_id, seq, session_id, id, author,
                 ts_s, ts_n, custom_metadata, content, terms, len, context_before,
                 context_after, generated, expire_ms FROM {from}.memory_entries;
             INSERT INTO memory_scopes SELECT * FROM {from}.memory_scopes;
             INSERT INTO memory_blocks SELECT * FROM {from}.memory_blocks;
             INSERT INTO memory_index SELECT * FROM {from}.memory_index;
             INSERT INTO memory_metadata SELECT * FROM {from}.memory_metadata;"
        ))
        .await
        .unwrap();

    let converted = PgMemoryStore::open(&old_url, 4, Analyzer::default())
        .await
        .unwrap();
    contract::assert_validity_converted(&converted).await;
    let version: i32 = client
        .query_one(
            "SELECT version FROM schema_versions WHERE component = 'memory-svc'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version as usize, MIGRATIONS.len());
}

/// The schema a fresh schema's connection string names.
fn schema_of(url: &str) -> String {
    let name = url.rsplit("search_path%3D").next().unwrap_or_default();
    name.split('&').next().unwrap_or_default().to_owned()
}

/// A store in a fresh schema whose `table` was analysed while the user had two entries, then
/// grown to 1,002: the statistics say the user is small, and
/// a prepared statement's generic plan knows no more.
async fn analysed_small_then_grown(table: &str) -> PgMemoryStore {
    let url = fresh_url().await;
    let store = PgMemoryStore::open(&url, 2, Analyzer::default())
        .await
        .unwrap();
    add(
        &store,
        "s0",
        entries(&[("a", "a small memory"), ("b", "still small")]),
    )
    .await;
    let client = store.pool.get().await.unwrap();
    client
        .batch_execute(&format!("ANALYZE {table}"))
        .await
        .unwrap();
    for session in 1..=20 {
        let batch = (0..50)
            .map(|i| entry(&format!("e{session}-{i}"), &text(session << 8 | i)))
            .collect();
        add(&store, &format!("s{session}"), batch).await;
    }
    store
}

/// A lookup of entries by seq probes the primary key even when the statistics say the user has
/// a handful of entries (analysed while small, then grown; a prepared statement's generic plan
/// knows no more). With secondary indexes led by (app, user), the planner took one of them with
/// `seq` as a filter and walked the user's whole index per probe.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn lookups_by_seq_use_the_primary_key_whatever_the_statistics() {
    let store = analysed_small_then_grown("memory_entries").await;
    let client = store.pool.get().await.unwrap();
    let plan = generic_plan(
        &client,
        "by_seq",
        "text, text, bigint[]",
        "SELECT e.* FROM unnest($3) AS q(seq)
         CROSS JOIN LATERAL (
             SELECT seq FROM memory_entries
             WHERE app_name = $1 AND user_id = $2 AND seq = q.seq
             OFFSET 0
         ) AS e",
        &format!(
            "'{}', '{}', '{{1, 500, 900}}'",
            SCOPE.app_name, SCOPE.user_id
        ),
    )
    .await;
    assert!(
        plan.contains("memory_entries_pkey") && !plan.contains("Filter"),
        "{plan}"
    );
}

/// A filter's index ranges are read by probes of `memory_metadata`'s primary key, and an entry's
/// rows are deleted with it through the index led by seq, whatever the statistics say (here
/// taken while the user had two entries).
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn metadata_lookups_probe_their_indexes_whatever_the_statistics() {
    let with_metadata = |i: u64| Entry {
        custom_metadata: format!(r#"{{"n": {i}, "c": "c{}"}}"#, i % 100),
        ..entry(&format!("m{i}"), &text(i))
    };
    let store = PgMemoryStore::open(&fresh_url().await, 4, Analyzer::default())
        .await
        .unwrap();
    memorize(&store, (0..2).map(with_metadata).collect()).await;
    let client = store.pool.get().await.unwrap();
    client
        .batch_execute("ANALYZE memory_metadata")
        .await
        .unwrap();
    for batch in 0..4 {
        memorize(
            &store,
            (batch * 500..(batch + 1) * 500)
                .map(with_metadata)
                .collect(),
        )
        .await;
    }
    let (app, user) = (SCOPE.app_name, SCOPE.user_id);
    let scans = generic_plan(
        &client,
        "candidates",
        "text, text, int[], text[], bytea[], bytea[]",
        super::metadata::CANDIDATES,
        &format!("'{app}', '{user}', '{{0}}', '{{c}}', '{{\\x01}}', '{{\\x02}}'"),
    )
    .await;
    assert!(
        scans.contains("memory_metadata_pkey") && !scans.contains("Seq Scan"),
        "{scans}"
    );
    // The statement of the cascading delete.
    let cascade = generic_plan(
        &client,
        "cascade",
        "text, text, bigint",
        "DELETE FROM ONLY memory_metadata WHERE $1 = app_name AND $2 = user_id AND $3 = seq",
        &format!("'{app}', '{user}', 7"),
    )
    .await;
    assert!(
        cascade.contains("memory_metadata_seqs") && !cascade.contains("Seq Scan"),
        "{cascade}"
    );
    let filter = crate::filter::Filter {
        any_of: vec![vec![crate::filter::Condition {
            key: "c".into(),
            test: crate::filter::Test::Equal(crate::filter::Value::String("c7".into())),
        }]],
        topics: vec![],
    };
    let (listed, _) = store.list(SCOPE, 100, "", &filter).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
    let expected: Vec<String> = (0..2000)
        .filter(|i| i % 100 == 7)
        .map(|i| format!("m{i}"))
        .collect();
    assert_eq!(ids, expected);
}

/// Two stores on one fresh schema, as two replicas.
async fn two_replicas() -> (PgMemoryStore, PgMemoryStore) {
    let url = fresh_url().await;
    let open = || PgMemoryStore::open(&url, 4, Analyzer::default());
    (open().await.unwrap(), open().await.unwrap())
}

/// A write adding memories `(id, text, vector)` with their vectors.
fn with_vectors(pairs: &[(&str, &str, [f32; 2])]) -> (Write, Vectors) {
    let texts = pairs.iter().map(|(_, t, _)| (*t).to_owned()).collect();
    let vectors = pairs.iter().map(|(_, _, v)| v.to_vec()).collect();
    let write = Write::AddMemories(pairs.iter().map(|(id, text, _)| entry(id, text)).collect());
    (write, Vectors::new(texts, vectors))
}

/// The ten best, unfiltered.
fn ten() -> SearchQuery {
    SearchQuery {
        limit: 10,
        ..SearchQuery::default()
    }
}

/// The ids of the entries of SCOPE nearest to (1, 0), best first.
async fn nearest(store: &PgMemoryStore) -> Vec<String> {
    let hits = store.nearest(SCOPE, &[1.0, 0.0], &ten()).await.unwrap();
    hits.into_iter().map(|h| h.entry.id).collect()
}

/// A replica keeps the vectors it searched, and never serves them once another replica has
/// changed them: added an entry, rewritten one with another text, deleted one.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_search_sees_the_vectors_another_replica_wrote_since() {
    let (a, b) = two_replicas().await;

    let (write, vectors) = with_vectors(&[("far", "far away", [0.0, 1.0])]);
    a.write_embedded(SCOPE, write, vectors).await.unwrap();
    assert_eq!(nearest(&a).await, ["far"]);
    assert_eq!(nearest(&a).await, ["far"], "served from the cache");

    let (write, vectors) = with_vectors(&[("near", "close by", [1.0, 0.0])]);
    b.write_embedded(SCOPE, write, vectors).await.unwrap();
    assert_eq!(nearest(&a).await, ["near", "far"]);

    let (write, vectors) = with_vectors(&[("far", "right here", [1.0, 0.0])]);
    b.write_embedded(SCOPE, write, vectors).await.unwrap();
    let (write, vectors) = with_vectors(&[("near", "close by", [1.0, 0.0])]);
    assert_eq!(b.write_embedded(SCOPE, write, vectors).await.unwrap(), 0);
    b.delete(SCOPE, &DeleteTarget::MemoryId("near".into()))
        .await
        .unwrap();
    assert_eq!(nearest(&a).await, ["far"]);
    let hits = a.nearest(SCOPE, &[1.0, 0.0], &ten()).await.unwrap();
    assert!(hits[0].score > 0.99, "far's new vector: {}", hits[0].score);
}

/// A replica's own writes change the vectors it keeps of the scope as they commit (kept at the
/// version each write leaves), so the search after a write reads none; another replica's write
/// still makes it read them again.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_replicas_own_writes_change_the_vectors_it_keeps() {
    let (a, b) = two_replicas().await;
    // Whether `a` keeps the scope's vectors at the scope's current version.
    let kept_current = || async {
        let client = a.pool.get().await.unwrap();
        let version = vectors::version(&client, SCOPE).await.unwrap().unwrap();
        a.vector_cache
            .get(&vectors::cache_key(SCOPE), version)
            .is_ok()
    };

    let (write, vectors) = with_vectors(&[("far", "far away", [0.0, 1.0])]);
    a.write_embedded(SCOPE, write, vectors).await.unwrap();
    assert!(!kept_current().await, "nothing searched yet");
    assert_eq!(nearest(&a).await, ["far"]);
    assert!(kept_current().await);

    let (write, vectors) = with_vectors(&[("near", "close by", [1.0, 0.0])]);
    a.write_embedded(SCOPE, write, vectors).await.unwrap();
    assert!(kept_current().await, "the write changed the kept vectors");
    assert_eq!(nearest(&a).await, ["near", "far"]);
    a.delete(SCOPE, &DeleteTarget::MemoryId("near".into()))
        .await
        .unwrap();
    assert!(kept_current().await, "the delete changed the kept vectors");
    assert_eq!(nearest(&a).await, ["far"]);

    let (write, vectors) = with_vectors(&[("far", "right here", [1.0, 0.0])]);
    b.write_embedded(SCOPE, write, vectors).await.unwrap();
    assert!(!kept_current().await, "another replica wrote");
    let hits = a.nearest(SCOPE, &[1.0, 0.0], &ten()).await.unwrap();
    assert!(hits[0].score > 0.99, "far's new vector: {}", hits[0].score);
    assert!(kept_current().await);
}

/// A replica keeps the blocks of the terms it searched, and reads them again once another
/// replica wrote the scope: an entry added, one rewritten with another text, one deleted.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn a_search_sees_the_postings_another_replica_wrote_since() {
    let url = fresh_url().await;
    let a = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    let b = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap();
    let found = |store: &PgMemoryStore| {
        let store = store.clone();
        async move {
            let query = SearchQuery {
                text: "green tea".into(),
                limit: 10,
                ..SearchQuery::default()
            };
            let hits = store.search(SCOPE, &query).await.unwrap();
            hits.into_iter().map(|h| h.entry.id).collect::<Vec<_>>()
        }
    };
    memorize(
        &a,
        entries(&[("x", "green tea in the morning"), ("y", "black coffee")]),
    )
    .await;
    assert_eq!(found(&a).await, ["x"]);

    // The blocks are gone from the database, but the scope's version did not move: the
    // search is served from what the replica kept, and a replica that kept nothing finds none.
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE TABLE saved AS SELECT * FROM memory_blocks;
             DELETE FROM memory_blocks;",
        )
        .await
        .unwrap();
    assert_eq!(found(&a).await, ["x"], "served from the cache");
    let kept_nothing = PgMemoryStore::open(&url, 4, Analyzer::default())
        .await
        .unwrap()
        .with_posting_cache(0);
    assert!(found(&kept_nothing).await.is_empty());
    client
        .batch_execute("INSERT INTO memory_blocks SELECT * FROM saved")
        .await
        .unwrap();

    memorize(&b, entries(&[("z", "green tea, green tea leaves")])).await;
    assert_eq!(found(&a).await, ["z", "x"]);
    memorize(&b, entries(&[("x", "matcha in the morning")])).await;
    assert_eq!(found(&a).await, ["z"]);
    delete(&b, memory_id("z")).await;
    assert!(found(&a).await.is_empty());
}

/// The generic plan of `statement` of parameter `types`, prepared as `name` on `client`'s
/// connection, for the arguments `args`.
async fn generic_plan(
    client: &tokio_postgres::Client,
    name: &str,
    types: &str,
    statement: &str,
    args: &str,
) -> String {
    client
        .simple_query(&format!(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE {name}({types}) AS {statement};
             EXPLAIN EXECUTE {name}({args})"
        ))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A write that removes postings (an entry rewritten or deleted) finds the blocks it rewrites
/// or deletes by key probes and changes them by TID, a plan that does not depend on the
/// statistics (here taken while the user had two entries). Written as a join, the statements'
/// plan did: on a table not analysed since it grew to 85k blocks, it hashed every block of the
/// user at each such write.
#[tokio::test]
#[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
async fn block_rewrites_probe_their_rows_whatever_the_statistics() {
    use super::write::{DELETE_BLOCKS, REWRITE_BLOCKS};

    let store = analysed_small_then_grown("memory_blocks").await;
    let client = store.pool.get().await.unwrap();
    let (app, user) = (SCOPE.app_name, SCOPE.user_id);
    let rewrite = generic_plan(
        &client,
        "rewrite",
        "text, text, text[], bigint[], integer[], bigint[], bigint[], bytea[]",
        REWRITE_BLOCKS,
        &format!("'{app}', '{user}', '{{the}}', '{{3}}', '{{1}}', '{{1}}', '{{1}}', '{{}}'"),
    )
    .await;
    let removal = generic_plan(
        &client,
        "remove",
        "text, text, text[], bigint[]",
        DELETE_BLOCKS,
        &format!("'{app}', '{user}', '{{the}}', '{{3}}'"),
    )
    .await;
    for plan in [rewrite, removal] {
        assert!(
            plan.contains("memory_blocks_pkey")
                && plan.contains("Tid Scan")
                && !plan.contains("Hash")
                && !plan.contains("Bitmap")
                && !plan.contains("Seq Scan"),
            "{plan}"
        );
    }
    // Rewrites and deletions still leave the blocks as scoring every posting expects.
    memorize(
        &store,
        entries(&[("e3-7", "the entry said something else")]),
    )
    .await;
    delete(&store, memory_id("e5-9")).await;
    assert!(assert_searches_exact(&store).await > 400);
}
