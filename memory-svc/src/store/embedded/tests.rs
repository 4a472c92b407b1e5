//! The embedded store's own tests: the contract suite on it, and what only its layout has
//! (posting blocks, statistics records, the format conversion, reopening).

use std::collections::BTreeMap;

use adk_common::{
    durability::SyncMode,
    keys::{Key, KeyReader},
};

use super::{
    super::{
        contract::{
            self, add, assert_searches_exact, delete, entries, entry, generated_corpus, listed,
            memorize, memory_id, memory_store_suite, query, replace, search, SCOPE,
        },
        DeleteTarget, Entry, SearchQuery,
    },
    journal,
    migrate::OLD_POSTINGS,
    pending,
    postings::{self, Posting},
    records::{decode, key_seq, scope_key, u64_value, EntryRecord, Stats},
    EmbeddedMemoryStore, MemoryStore, Scope,
};
use crate::{analysis::Analyzer, filter::Filter};

async fn open() -> (tempfile::TempDir, EmbeddedMemoryStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
    (dir, store)
}

mod contract_suite {
    use super::*;

    memory_store_suite!(open());
}

fn stats(store: &EmbeddedMemoryStore) -> Stats {
    store.stats(&scope_key(SCOPE)).unwrap().1
}

#[tokio::test]
async fn statistics_count_entries_with_text() {
    let (_dir, store) = open().await;
    let no_text = contract::entry("b", "");
    memorize(&store, vec![entry("a", "two words"), no_text]).await;
    replace(&store, "s", entries(&[("c", "three more words")])).await;
    let s = stats(&store);
    // Lengths in index units: two per word of text, two for the author's name ("user"), so the
    // entry without text still counts, by its author.
    assert_eq!((s.docs, s.total_len, s.next_seq), (3, 6 + 2 + 8, 3));
}

#[tokio::test]
async fn clearing_removes_every_key_and_keeps_the_numbering() {
    let (_dir, store) = open().await;
    replace(&store, "s1", entries(&[("a", "alpha"), ("b", "beta")])).await;
    memorize(&store, entries(&[("d", "delta")])).await;
    delete(&store, memory_id("d")).await;
    assert_eq!(delete(&store, DeleteTarget::All).await, 2);
    let s = stats(&store);
    assert_eq!((s.docs, s.total_len, s.next_seq), (0, 0, 3));
    for tree in [
        &store.entries,
        &store.buckets,
        &store.turns,
        &store.ids,
        &store.blocks,
        &store.df,
        &store.tombstones,
        &store.metadata,
    ] {
        assert!(tree.is_empty().unwrap());
    }
    assert_eq!(add(&store, "", entries(&[("d", "delta")])).await, 1);
    assert_eq!(stats(&store).next_seq, 4);

    // Clearing a scope never written to writes nothing.
    let fresh = Scope {
        app_name: "app",
        user_id: "nobody",
    };
    assert_eq!(store.delete(fresh, &DeleteTarget::All).await.unwrap(), 0);
    assert!(store.stats.get(scope_key(fresh)).unwrap().is_none());
}

#[tokio::test]
async fn scopes_with_separator_bytes_do_not_alias() {
    let (_dir, store) = open().await;
    let scopes =
        [("a\0", "b"), ("a", "\0b")].map(|(app_name, user_id)| Scope { app_name, user_id });
    for (i, &scope) in scopes.iter().enumerate() {
        let e = entry("same-id", &format!("word{i}"));
        store.replace_session(scope, "s", vec![e]).await.unwrap();
    }
    for (i, &scope) in scopes.iter().enumerate() {
        let hits = store
            .search(scope, &query(&format!("word{i}")))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(listed(&store, scope).await.len(), 1);
    }
}

#[tokio::test]
async fn survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        // Without a flush per write, the one at shutdown is what makes them durable.
        let store =
            EmbeddedMemoryStore::open(dir.path(), SyncMode::Periodic, Analyzer::default()).unwrap();
        replace(&store, "s", entries(&[("a", "persisted words")])).await;
        memorize(&store, entries(&[("gone", "x")])).await;
        delete(&store, memory_id("gone")).await;
        store.flush().await.unwrap();
    }
    // The flush at shutdown ended the flusher, which let go of the database: the file is
    // closed with the last handle.
    adk_common::file_lock::released(dir.path().join(adk_common::kv::FILE))
        .await
        .unwrap();
    let store = EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
    assert_eq!(search(&store, "persisted").await, ["a"]);
    assert_eq!(add(&store, "s", entries(&[("gone", "x")])).await, 0);
    memorize(&store, entries(&[("b", "later")])).await;
    assert_eq!(listed(&store, SCOPE).await, ["a", "b"]);
}

/// The keys and values of a tree, in order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every entry of every tree of `db`, by tree.
fn every_tree(db: &adk_common::kv::Db) -> BTreeMap<String, Entries> {
    (db.tree_names().unwrap().into_iter())
        .map(|name| {
            let tree = db.open_tree(&name).unwrap();
            let entries = tree.iter().collect::<Result<Vec<_>, _>>().unwrap();
            (name, entries)
        })
        .collect()
}

#[tokio::test]
async fn converts_the_sled_database_of_an_earlier_release() {
    // The trees of a store as an earlier release kept them, in sled.
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Sync, Analyzer::default()).unwrap();
    replace(
        &store,
        "s",
        entries(&[("a", "kept words"), ("b", "other words")]),
    )
    .await;
    memorize(&store, entries(&[("gone", "x")])).await;
    delete(&store, memory_id("gone")).await;
    store
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    let trees = every_tree(&db);
    let found = search(&store, "kept").await;
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    let sled = sled::open(dir.path()).unwrap();
    for (name, entries) in &trees {
        let tree = sled.open_tree(name).unwrap();
        for (key, value) in entries {
            tree.insert(key, value.as_slice()).unwrap();
        }
    }
    let handed_out = (0..3).map(|_| sled.generate_id().unwrap()).max().unwrap();
    sled.flush().unwrap();
    drop(sled);
    adk_common::file_lock::released(dir.path().join("db"))
        .await
        .unwrap();
    // A conversion cut short left its unfinished file: it starts over.
    std::fs::create_dir(dir.path().join(".converting")).unwrap();
    std::fs::write(
        dir.path().join(".converting").join(adk_common::kv::FILE),
        b"cut",
    )
    .unwrap();

    let store = EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, [adk_common::kv::FILE], "sled's files are gone");
    assert_eq!(
        every_tree(&store.db),
        trees,
        "every tree is copied as it was"
    );
    assert_eq!(search(&store, "kept").await, found);
    assert_eq!(
        add(&store, "s", entries(&[("gone", "x")])).await,
        0,
        "tombstones hold"
    );
    assert!(
        store.db.generate_id().unwrap() > handed_out,
        "no id is handed out twice"
    );
}

/// Checks the posting blocks and document frequencies of SCOPE against its entries.
fn assert_index_consistent(store: &EmbeddedMemoryStore) {
    let mut expected = BTreeMap::<Vec<u8>, Vec<Posting>>::new();
    let scope = scope_key(SCOPE);
    store
        .merge_journal(&scope, journal::Merger::Background)
        .unwrap();
    assert!(store.journal.is_empty().unwrap());
    for kv in store.entries.scan_prefix(&scope) {
        let (key, value) = kv.unwrap();
        let seq = key_seq(&key, scope.as_bytes().len()).unwrap();
        let record: EntryRecord = decode(&value, "entry").unwrap();
        for t in &record.terms {
            let prefix = scope.clone().str(&t.term).into_vec();
            let (tf, len) = (t.tf, record.len);
            expected
                .entry(prefix)
                .or_default()
                .push(Posting { seq, tf, len });
        }
    }
    let mut stored = BTreeMap::<Vec<u8>, Vec<Posting>>::new();
    for kv in store.blocks.scan_prefix(&scope) {
        let (key, value) = kv.unwrap();
        let (prefix, first) = key.split_at(key.len() - 8);
        let first = u64_value(first, "key").unwrap();
        let mut block = Vec::new();
        postings::decode(first, &value, &mut block).unwrap();
        assert!(!block.is_empty(), "an empty block is stored");
        let list = stored.entry(prefix.to_vec()).or_default();
        assert!(list.last().is_none_or(|p| p.seq < first), "blocks overlap");
        list.extend(block);
    }
    let mut df = BTreeMap::<Vec<u8>, u64>::new();
    for kv in store.df.scan_prefix(&scope) {
        let (key, value) = kv.unwrap();
        df.insert(key.to_vec(), postings::df_value(&value).unwrap());
        if let Some((first, bytes)) = postings::inline_block(&value).unwrap() {
            let mut block = Vec::new();
            postings::decode(first, bytes, &mut block).unwrap();
            assert!(!block.is_empty(), "an empty list is stored");
            assert!(block.len() as u64 <= postings::INLINE_MAX);
            let held = stored.insert(key.to_vec(), block);
            assert!(
                held.is_none(),
                "postings both in blocks and in the df value"
            );
        }
    }
    assert_eq!(stored, expected);
    let counts = expected.iter().map(|(k, v)| (k.clone(), v.len() as u64));
    assert_eq!(df, counts.collect());
}

#[tokio::test]
async fn edited_blocks_stay_consistent() {
    let (_dir, store) = open().await;
    generated_corpus(&store).await;
    assert_index_consistent(&store);
    // Common terms span many blocks, and one block was split.
    let the = store
        .blocks
        .scan_prefix(scope_key(SCOPE).str("the"))
        .count();
    assert!(the > 2, "{the} blocks");
    assert_eq!(
        store
            .df
            .get(scope_key(SCOPE).str("spread"))
            .unwrap()
            .map(|v| postings::df_value(&v).unwrap()),
        Some(500)
    );
    const { assert!(600 > 2 * postings::BLOCK_LEN) };
    assert!(
        store
            .blocks
            .scan_prefix(scope_key(SCOPE).str("spread"))
            .count()
            >= 2
    );
}

#[tokio::test]
async fn converts_the_old_postings_layout() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    generated_corpus(&store).await;
    let other = Scope {
        app_name: "app",
        user_id: "other",
    };
    let e = entry("o", "the other user");
    store.add_memories(other, vec![e]).await.unwrap();
    // A store of the old layout has no journal.
    store
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    store
        .merge_journal(&scope_key(other), journal::Merger::Background)
        .unwrap();

    // Back to the old layout: one key per posting, no document frequencies. A conversion
    // cut short left new trees behind.
    let old = db.open_tree("postings").unwrap();
    for kv in store.entries.iter() {
        let (key, value) = kv.unwrap();
        let (scope, seq) = key.split_at(key.len() - 8);
        let record: EntryRecord = decode(&value, "entry").unwrap();
        for t in &record.terms {
            let key = [scope, Key::new().str(&t.term).as_bytes(), seq].concat();
            let posting = u64::from(t.tf) << 32 | u64::from(record.len);
            old.insert(key, &posting.to_be_bytes()[..]).unwrap();
        }
    }
    let the = scope_key(SCOPE).str("the");
    store.blocks.remove(the.clone().u64(0)).unwrap();
    store.df.insert(the, &1u64.to_be_bytes()[..]).unwrap();
    drop(old);

    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    assert!(!db
        .tree_names()
        .unwrap()
        .iter()
        .any(|name| name == OLD_POSTINGS));
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 400);
    let hits = store.search(other, &query("user")).await.unwrap();
    assert_eq!(hits.len(), 1);
    // Converted once: opening again changes nothing.
    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Periodic, Analyzer::default()).unwrap();
    assert_index_consistent(&store);
}

/// Ingestion one turn at a time, as a conversation arrives, each write merged at once: each
/// merge of the journal puts its postings into blocks of their own, which are merged into full
/// ones as they pile up, and the index stays exact through the rewrites and deletions in
/// between.
#[tokio::test]
async fn small_writes_append_blocks_and_merge_them() {
    let (_dir, store) = open().await;
    let words = [
        "garden", "tuesday", "sister", "recipe", "river", "violin", "market",
    ];
    let turns = 700u64;
    for turn in 0..turns {
        let pick = |k: u64| words[(turn * k % 7) as usize];
        let text = format!("garden {} {} turn{}", pick(3), pick(5), turn % 41);
        let session = format!("s{}", turn / 25);
        add(&store, &session, vec![entry(&format!("t{turn}"), &text)]).await;
        store
            .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
            .unwrap();
        if turn % 97 == 50 {
            let old = Entry {
                session_id: session.clone(),
                ..entry(&format!("t{}", turn - 10), "rewritten garden river")
            };
            memorize(&store, vec![old]).await;
        }
        if turn % 131 == 70 {
            delete(&store, memory_id(&format!("t{}", turn - 5))).await;
        }
    }
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 400);
    // "garden" is in every entry: full blocks, then fewer than MERGE_AT appended ones.
    let garden = scope_key(SCOPE).str("garden");
    let blocks = store.blocks.scan_prefix(&garden).count();
    let full = turns as usize / postings::BLOCK_LEN;
    assert!(
        blocks <= full + postings::MERGE_AT as usize,
        "{blocks} blocks"
    );
    assert!(blocks > full, "{blocks} blocks");

    // A write that only appends to a term, and does not merge, leaves its stored blocks as they
    // were and adds one.
    let appended = || {
        store
            .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
            .unwrap();
        let value = store.df.get(&garden).unwrap().unwrap();
        value
            .get(8..12)
            .map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap()))
    };
    let stored = || -> Vec<_> {
        store
            .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
            .unwrap();
        store
            .blocks
            .scan_prefix(&garden)
            .map(|kv| kv.unwrap())
            .collect()
    };
    for extra in 0..2 {
        let before = (stored(), appended());
        add(
            &store,
            &format!("new{extra}"),
            vec![entry(&format!("x{extra}"), "garden")],
        )
        .await;
        if before.1 + 1 < postings::MERGE_AT {
            let after = stored();
            assert_eq!(after.len(), before.0.len() + 1);
            assert_eq!(after[..before.0.len()], before.0[..]);
            return;
        }
    }
    panic!("no write appended without merging");
}

/// A term's postings move from its df value into blocks once they outgrow `INLINE_MAX`, and
/// back once removals bring them within it; searches are exact throughout, and after reopening.
#[tokio::test]
async fn a_term_moves_between_its_df_value_and_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
    let term = scope_key(SCOPE).str("rare77");
    // (df, postings in the df value, blocks), once merged.
    let form = |store: &EmbeddedMemoryStore| {
        store
            .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
            .unwrap();
        let value = store.df.get(&term).unwrap().unwrap();
        let inline = postings::inline_block(&value).unwrap().is_some();
        let blocks = store.blocks.scan_prefix(&term).count();
        (postings::df_value(&value).unwrap(), inline, blocks)
    };
    let bound = postings::INLINE_MAX;
    let text = |i: u64| format!("a rare77 the mid{} rare{}", i % 5, i % 3);
    for i in 0..bound {
        add(&store, "s", vec![entry(&format!("r{i}"), &text(i))]).await;
    }
    assert!(assert_searches_exact(&store).await > 50);
    assert_eq!(form(&store), (bound, true, 0));
    assert_index_consistent(&store);

    // Past the bound: into one block, searched before and after the merge.
    add(&store, "s", vec![entry("past", "rare77 spread")]).await;
    assert_searches_exact(&store).await;
    assert_eq!(form(&store), (bound + 1, false, 1));
    // Rewritten in place and appended to, in blocks.
    let rewritten = Entry {
        session_id: "s".into(),
        ..entry("r3", "rare77 rare77 rewritten")
    };
    memorize(&store, vec![rewritten]).await;
    add(&store, "s", vec![entry("more", "rare77 again")]).await;
    assert_searches_exact(&store).await;
    assert_eq!(form(&store), (bound + 2, false, 2));
    assert_index_consistent(&store);

    // Back within the bound: out of the blocks.
    delete(&store, memory_id("r5")).await;
    delete(&store, memory_id("more")).await;
    assert_searches_exact(&store).await;
    assert_eq!(form(&store), (bound, true, 0));
    assert_index_consistent(&store);
    let every = SearchQuery {
        limit: 100,
        ..query("rare77 rewritten")
    };
    let hits = store.search(SCOPE, &every).await.unwrap();
    assert_eq!(hits[0].entry.id, "r3");
    assert_eq!(hits.len() as u64, bound);
    store.flush().await.unwrap();
    drop(store);

    let store = EmbeddedMemoryStore::open(dir.path(), SyncMode::Sync, Analyzer::default()).unwrap();
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 50);
    // Every posting removed: no df value, no block.
    let all: Vec<_> = (0..bound)
        .filter(|&i| i != 5)
        .map(|i| format!("r{i}"))
        .collect();
    for id in all.iter().map(String::as_str).chain(["past"]) {
        delete(&store, memory_id(id)).await;
    }
    store
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    assert!(store.df.get(&term).unwrap().is_none());
    assert_eq!(store.blocks.scan_prefix(&term).count(), 0);
    assert_index_consistent(&store);
}

/// A store of format 8, whose terms all keep their postings in blocks, is searched as it is
/// when opened; a term that changes moves into its df value if its postings are few.
#[tokio::test]
async fn reads_the_blocks_of_a_format_8_store() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    generated_corpus(&store).await;
    store
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    async fn results(store: &EmbeddedMemoryStore) -> Vec<Vec<(String, f64)>> {
        let mut all = Vec::new();
        for text in ["rare1 rare2 rare3", "the mid5 rare12 rare150", "spread the"] {
            let hits = store.search(SCOPE, &query(text)).await.unwrap();
            all.push(hits.into_iter().map(|h| (h.entry.id, h.score)).collect());
        }
        all
    }
    let before = results(&store).await;
    // As format 8 wrote it: every term's postings in blocks, its df value without them.
    for kv in store.df.iter() {
        let (key, value) = kv.unwrap();
        if let Some((first, block)) = postings::inline_block(&value).unwrap() {
            let block_key = [&key[..], &first.to_be_bytes()].concat();
            store.blocks.insert(block_key, block).unwrap();
            store.df.insert(&key, &value[..20]).unwrap();
        }
    }
    let inline = |store: &EmbeddedMemoryStore| {
        let values = store.df.iter().values().map(|v| v.unwrap());
        values
            .filter(|v| postings::inline_block(v).unwrap().is_some())
            .count()
    };
    assert_eq!(inline(&store), 0);
    let format = db.open_tree("format").unwrap();
    format.insert("version", 8u32.to_be_bytes()).unwrap();
    drop(store);

    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    let version = format.get("version").unwrap().unwrap();
    assert_eq!(u32::from_be_bytes(version[..].try_into().unwrap()), 9);
    assert_eq!(inline(&store), 0);
    assert_eq!(results(&store).await, before);
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 400);

    // The terms of an entry rewritten and of a new one change, and those of few postings move.
    let rewritten = Entry {
        session_id: "s1".into(),
        ..entry("e1-1", "rare1 rare2 spread")
    };
    memorize(&store, vec![rewritten]).await;
    add(&store, "s1", vec![entry("new", "rare3 mid5 the")]).await;
    store
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    assert!(inline(&store) >= 3, "{} terms moved", inline(&store));
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 400);
}

/// A store written before the `turns` tree gets it when opened, so that events added to a
/// session still continue it after its last turn.
#[tokio::test]
async fn builds_the_turns_of_an_older_store() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    replace(
        &store,
        "s",
        entries(&[("q", "did you hear back"), ("r", "not yet")]),
    )
    .await;
    add(&store, "", entries(&[("loose", "no session")])).await;
    let built: Vec<_> = store.turns.iter().keys().map(|k| k.unwrap()).collect();
    assert_eq!(built.len(), 2);
    // As an older version left it: no turns, and nothing saying they were built.
    store.turns.clear().unwrap();
    db.open_tree("index").unwrap().remove("turns").unwrap();
    drop(store);

    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Periodic, Analyzer::default()).unwrap();
    let rebuilt: Vec<_> = store.turns.iter().keys().map(|k| k.unwrap()).collect();
    assert_eq!(rebuilt, built);
    add(&store, "s", entries(&[("t", "they offered the job")])).await;
    // The new turn follows "r", the session's last: r now has its text as context.
    assert_eq!(search(&store, "offered").await, ["t", "r"]);
}

/// A store written before the metadata index has it built at open, from its entries; writes
/// keep it in step after that (a rewrite drops the old values, a deletion its entry's).
#[tokio::test]
async fn builds_the_metadata_index_of_an_older_store() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    let with = |id: &str, metadata: &str| Entry {
        custom_metadata: metadata.into(),
        ..entry(id, "some text")
    };
    memorize(
        &store,
        vec![
            with("a", r#"{"c": "red", "n": 1}"#),
            with("b", r#"{"c": "blue"}"#),
            with("x", "not json"),
        ],
    )
    .await;
    let built: Vec<_> = store.metadata.iter().keys().map(|k| k.unwrap()).collect();
    assert_eq!(built.len(), 3);
    // As an older version left it: no index, and nothing saying it was built.
    store.metadata.clear().unwrap();
    db.open_tree("index").unwrap().remove("metadata").unwrap();
    drop(store);

    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Periodic, Analyzer::default()).unwrap();
    let rebuilt: Vec<_> = store.metadata.iter().keys().map(|k| k.unwrap()).collect();
    assert_eq!(rebuilt, built);
    memorize(&store, vec![with("a", r#"{"c": "blue"}"#)]).await;
    delete(&store, memory_id("b")).await;
    let blue = crate::filter::Filter {
        any_of: vec![vec![crate::filter::Condition {
            key: "c".into(),
            test: crate::filter::Test::Equal(crate::filter::Value::String("blue".into())),
        }]],
        topics: vec![],
    };
    let candidates = store.candidates(&scope_key(SCOPE), &blue).unwrap().unwrap();
    assert_eq!(candidates.len(), 1);
    assert_eq!(store.metadata.len().unwrap(), 1);
}

/// A store of format 3, whose entries' kinds were read from their metadata, gets them stored
/// when opened, decided by the generator's revisions (see `contract::before_kinds`); its
/// finished jobs become prunable.
#[tokio::test]
async fn converts_the_kinds_of_a_format_3_store() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    let expiries = contract::before_kinds(&store).await;
    // As format 3 left it: expiries in their tree only, no finished jobs keyed, nothing
    // saying the kinds were converted.
    for (id, at) in expiries {
        let key = scope_key(SCOPE).str(id);
        store.expiries.insert(key, &at.to_be_bytes()[..]).unwrap();
    }
    store.jobs_done.clear().unwrap();
    db.open_tree("index").unwrap().remove("kinds").unwrap();
    drop(store);

    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    contract::assert_kinds_converted(&store).await;
    // Converted once: opening again changes nothing.
    drop(store);
    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Periodic, Analyzer::default()).unwrap();
    let (listed, _) = store
        .list(SCOPE, 100, "", &Filter::default())
        .await
        .unwrap();
    assert_eq!(listed.iter().filter(|e| e.kind.generated).count(), 2);
}

/// A write's postings wait in the journal, and in memory, until a merge: a search reads them
/// beside the blocks without merging, whatever they change (a new entry, one rewritten in
/// place, one removed), and ranks as it does once they are merged.
#[tokio::test]
async fn searches_read_the_changes_that_wait_for_a_merge() {
    let (_dir, store) = open().await;
    let scope = scope_key(SCOPE);
    memorize(
        &store,
        entries(&[("a", "first words"), ("b", "second words")]),
    )
    .await;
    store
        .merge_journal(&scope, journal::Merger::Background)
        .unwrap();
    memorize(&store, entries(&[("c", "third words words")])).await;
    memorize(&store, entries(&[("a", "rewritten words")])).await;
    delete(&store, memory_id("b")).await;
    assert_eq!(store.journal.len().unwrap(), 3);
    let third = scope.clone().str("third");
    assert!(store.df.get(&third).unwrap().is_none());

    let searched = || async {
        let hits = store.search(SCOPE, &query("words third")).await.unwrap();
        let scored: Vec<_> = hits.into_iter().map(|h| (h.entry.id, h.score)).collect();
        let indexed = ["third", "second", "first", "rewritten"].map(String::from);
        (scored, store.indexed(SCOPE, &indexed).await.unwrap())
    };
    let waiting = searched().await;
    let ids: Vec<_> = waiting.0.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c", "a"]);
    assert_eq!(waiting.1, [true, false, false, true]);
    assert_eq!(
        store.journal.len().unwrap(),
        3,
        "a search merged the journal"
    );

    store
        .merge_journal(&scope, journal::Merger::Background)
        .unwrap();
    assert!(store.journal.is_empty().unwrap());
    assert_eq!(searched().await, waiting);
    assert_index_consistent(&store);
}

/// A journal a crash left (here: merges that never ran) is held by the next store on the
/// database, whose searches see every write, and merged; the merge of the store that wrote it
/// then finds it done and changes nothing.
// The merge lock is held across the writes it awaits on purpose, so that no merge runs.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn a_journal_left_behind_is_merged_by_the_next_store() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let first =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Sync, Analyzer::default()).unwrap();
    // Fewer changes than a backlog, at which a write would merge (and wait for this).
    let merging = first.merges.lock(&scope_key(SCOPE));
    generated_corpus(&first).await;
    delete(&first, memory_id("e3-7")).await;
    assert!(!first.journal.is_empty().unwrap());

    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Sync, Analyzer::default()).unwrap();
    assert!(assert_searches_exact(&store).await > 400);
    assert_index_consistent(&store);
    drop(merging);
    first
        .merge_journal(&scope_key(SCOPE), journal::Merger::Background)
        .unwrap();
    assert_index_consistent(&store);
}

/// A write of more posting changes than a journal record holds (a session of 2,000 long
/// turns) changes the blocks directly, after merging the records that wait before it: the
/// index ends as if every write had been merged in order.
#[tokio::test]
async fn a_write_of_many_postings_is_indexed_after_the_waiting_ones() {
    let (_dir, store) = open().await;
    replace(
        &store,
        "s",
        entries(&[("a", "alpha words"), ("b", "beta words")]),
    )
    .await;
    memorize(&store, entries(&[("c", "gamma words")])).await;
    assert_eq!(store.journal.len().unwrap(), 2);
    let turns: Vec<_> = (0..2000)
        .map(|i| {
            let text = (0..40)
                .map(|k| format!("w{}", (i * 7 + k * 13) % 997))
                .collect::<Vec<_>>()
                .join(" ");
            entry(&format!("t{i}"), &format!("words {text}"))
        })
        .collect();
    // Replacing the session removes a and b, whose postings are still in the journal.
    replace(&store, "s", turns).await;
    assert!(store.journal.is_empty().unwrap());
    assert_index_consistent(&store);
    assert_eq!(search(&store, "alpha beta gamma").await, ["c"]);
}

/// Records wait for the background merger once a scope has `merge_after` changes waiting, and
/// a write that finds a backlog merges them itself: fewer than that wait when a write returns,
/// and the merger takes them below `merge_after` once writes stop. Scopes that each stay below
/// it are merged too once the changes of all of them reach `held_at_most`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_stays_short() {
    let (_dir, store) = open().await;
    // A merge round reads a few records at a time, as a small memory budget has it.
    let at = journal::Thresholds {
        merge_after: 40,
        backlog: 160,
        held_at_most: 400,
        merge_bytes: 200,
    };
    let store = EmbeddedMemoryStore {
        thresholds: at,
        ..store
    };
    let scope = scope_key(SCOPE);
    let waiting = |scope: &Key| store.pending.len(scope);
    let settled = |done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "the merger never ran");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    for i in 0..3 * at.backlog {
        memorize(
            &store,
            entries(&[(&format!("e{i}"), &format!("words w{i}"))]),
        )
        .await;
        assert!(waiting(&scope).0 < at.backlog);
    }
    settled(&|| waiting(&scope).0 < at.merge_after);
    assert_index_consistent(&store);

    // 20 users with 8 entries each (4 changes an entry: "words", its own word, the author's
    // term and name term): none reaches `merge_after` changes, all together pass `held_at_most`.
    let names: Vec<String> = (0..20).map(|u| format!("u{u}")).collect();
    let users: Vec<Scope> = (names.iter())
        .map(|user| Scope {
            app_name: SCOPE.app_name,
            user_id: user,
        })
        .collect();
    for &user in &users {
        for i in 0..8 {
            let e = entry(&format!("e{i}"), &format!("words w{i}"));
            store.add_memories(user, vec![e]).await.unwrap();
        }
        assert!(waiting(&scope_key(user)).0 < at.merge_after);
    }
    // Changes first reach `held_at_most` once 11 users or more are written whole (fewer than
    // 40 of SCOPE's wait), and every scope is queued then: those users are merged, however the
    // merger's timing falls.
    let merged = || {
        (users.iter())
            .filter(|&&user| waiting(&scope_key(user)).0 == 0)
            .count()
    };
    settled(&|| merged() >= 11);
}

/// A merge cut short by a crash after committing the blocks of some terms, before removing the
/// records it merged: the next store on the database holds only the changes the blocks lack,
/// its searches are exact with them, and its merge applies only those.
#[tokio::test]
async fn a_merge_cut_short_is_taken_up_where_it_stopped() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Sync, Analyzer::default()).unwrap();
    // Nothing merged but by the test.
    let store = EmbeddedMemoryStore {
        thresholds: journal::Thresholds {
            merge_after: usize::MAX,
            backlog: usize::MAX,
            held_at_most: usize::MAX,
            merge_bytes: usize::MAX,
        },
        ..store
    };
    let scope = scope_key(SCOPE);
    generated_corpus(&store).await;
    let copy = |tree: &adk_common::kv::Tree| -> Vec<(Vec<u8>, Vec<u8>)> {
        tree.iter().map(|kv| kv.unwrap()).collect()
    };
    let before = (copy(&store.journal), copy(&store.blocks), copy(&store.df));
    let (journalled, _) = store.pending.len(&scope);
    store
        .merge_journal(&scope, journal::Merger::Background)
        .unwrap();

    // As the crash left it: the records still there, and the terms of even length as they
    // were before the merge (their transactions had not committed).
    let unmerged = |key: &[u8]| {
        let mut reader = KeyReader::new(key);
        let (_, _, term) = (reader.str(), reader.str(), reader.str().unwrap());
        term.len() % 2 == 0
    };
    for (key, value) in &before.0 {
        store.journal.insert(key, value).unwrap();
    }
    for (tree, old) in [(&store.blocks, &before.1), (&store.df, &before.2)] {
        for key in tree.iter().keys() {
            let key = key.unwrap();
            if unmerged(&key) {
                tree.remove(key).unwrap();
            }
        }
        for (key, value) in old.iter().filter(|(key, _)| unmerged(key)) {
            tree.insert(key, value).unwrap();
        }
    }
    drop(store);

    // What the next store holds when it opens (read here, before its merger can start).
    let (journal, df) = (
        db.open_tree("journal").unwrap(),
        db.open_tree("df").unwrap(),
    );
    let (held, _) = pending::Pending::load(&journal, &df).unwrap().len(&scope);
    assert!(0 < held && held < journalled, "{held} of {journalled}");
    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Sync, Analyzer::default()).unwrap();
    assert!(assert_searches_exact(&store).await > 400);
    assert_index_consistent(&store);
    assert!(assert_searches_exact(&store).await > 400);
}

/// A store of format 6, whose entries had no validity, has each entry made valid from its
/// timestamp when opened (see `contract::before_validity`), once.
#[tokio::test]
async fn gives_the_entries_of_a_format_6_store_their_validity() {
    let db = adk_common::kv::Db::temporary().unwrap();
    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    contract::before_validity(&store).await;
    // As format 6 left it: nothing saying the entries were converted.
    db.open_tree("index").unwrap().remove("validity").unwrap();
    drop(store);

    let store =
        EmbeddedMemoryStore::from_db(db.clone(), SyncMode::Periodic, Analyzer::default()).unwrap();
    contract::assert_validity_converted(&store).await;
    assert!(store.closed.is_empty().unwrap());
    drop(store);
    let store = EmbeddedMemoryStore::from_db(db, SyncMode::Periodic, Analyzer::default()).unwrap();
    contract::assert_validity_converted(&store).await;
}

/// Text of `words` words drawn from a vocabulary of 20,000 with Zipf(1) frequencies, as the
/// benchmarks' corpus (chat turns of 12-40 words).
fn zipf_text(seed: u64, cdf: &[f64]) -> String {
    let mut x = seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let n = 12 + next() % 29;
    (0..n)
        .map(|_| {
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            format!("w{}", cdf.partition_point(|&c| c < u))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keys per tree after loading `entries` entries spread over `users` users in batches of
/// `batch`, all merged.
async fn key_counts(entries: u64, users: u64, batch: u64) -> Vec<(&'static str, u64)> {
    let (_dir, store) = open().await;
    let mut cdf: Vec<f64> = (1..=20_000).map(|r| 1.0 / f64::from(r)).collect();
    let mut sum = 0.0;
    for c in &mut cdf {
        sum += *c;
        *c = sum;
    }
    cdf.iter_mut().for_each(|c| *c /= sum);
    let users: Vec<String> = (0..users).map(|u| format!("u{u}")).collect();
    for (call, first) in (0..entries).step_by(batch as usize).enumerate() {
        let user = &users[call % users.len()];
        let scope = Scope {
            app_name: "app",
            user_id: user,
        };
        let batch = (first..(first + batch).min(entries))
            .map(|i| entry(&format!("m{i}"), &zipf_text(i, &cdf)))
            .collect();
        store
            .add_events(scope, &format!("s{call}"), batch)
            .await
            .unwrap();
    }
    for user in &users {
        let scope = Scope {
            app_name: "app",
            user_id: user,
        };
        store
            .merge_journal(&scope_key(scope), journal::Merger::Background)
            .unwrap();
    }
    let trees = [
        ("entries", &store.entries),
        ("buckets", &store.buckets),
        ("turns", &store.turns),
        ("ids", &store.ids),
        ("blocks", &store.blocks),
        ("df", &store.df),
        ("journal", &store.journal),
        ("stats", &store.stats),
        ("metadata", &store.metadata),
        ("expiries", &store.expiries),
        ("revisions", &store.revisions),
    ];
    trees
        .map(|(name, tree)| (name, tree.len().unwrap()))
        .to_vec()
}

/// Prints the keys per tree of a spread load and of one user's (`cargo test -p memory-svc
/// --lib key_counts -- --ignored --nocapture`): what the index costs in keys.
#[tokio::test]
#[ignore = "a measurement: prints figures"]
async fn measure_key_counts() {
    for (entries, users, batch) in [(30_000, 100, 100), (30_000, 1, 1_000)] {
        let counts = key_counts(entries, users, batch).await;
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        println!(
            "{entries} entries over {users} users: {total} keys, {:.2} per entry",
            total as f64 / entries as f64
        );
        for (name, n) in counts {
            println!(
                "  {name:<10} {n:>8}  {:.2} per entry",
                n as f64 / entries as f64
            );
        }
    }
}
