//! The contract of [`MemoryStore`], as tests every backend must pass: [`memory_store_suite!`]
//! runs each of them on a fresh store of one backend (sled always, PostgreSQL when
//! `ADK_TEST_POSTGRES` names a database). A behaviour both stores share is tested here, once;
//! a backend's own tests check only its layout.

use adk_proto::session::v1::{part, Content, Part};
use prost_types::Timestamp;

use super::{
    index::{self, Terms, UNIT},
    DeleteTarget, Entry, MemoryStore, Scope, SearchQuery, StoreError,
};
use crate::{analysis::Analyzer, filter::Filter};

/// Declares one `#[tokio::test]` per contract test, each on the store `$open` gives: an async
/// expression of type `(guard, store)`, the guard kept alive during the test (a temporary
/// directory, say). With `needs_postgres` the tests are ignored unless asked for
/// (`--include-ignored`, as the PostgreSQL pass does), and `$open` fails without a database.
macro_rules! memory_store_suite {
    ($open:expr $(, $needs:ident)?) => {
        $crate::store::contract::memory_store_suite!(
            @tests ($($needs)?) $open;
            indexes_the_text_of_all_parts,
            empty_queries_find_nothing,
            replace_session_replaces_its_entries,
            a_session_added_after_every_turn_is_indexed_as_if_added_once,
            add_events_keeps_the_first_copy,
            add_memories_upserts_in_place,
            deleted_ids_stay_deleted,
            delete_by_session_and_all,
            scopes_are_isolated,
            ranks_by_bm25,
            ties_keep_ingestion_order,
            finds_substrings_of_unspaced_scripts,
            limit_and_filters,
            lists_in_pages,
            concurrent_writes_to_one_scope_all_land,
            pruned_search_equals_exhaustive_scoring,
            jobs_are_leased_and_a_stale_attempt_cannot_finish,
            changes_keep_revisions_and_expiries,
            revisions_are_read_by_number_and_pruned_but_the_last,
            raw_entries_with_a_lifetime_expire,
            kinds_are_stored_not_read_from_metadata,
            finished_jobs_are_pruned_after_the_retention,
            streams_buffer_each_id_once_and_hand_over_in_order,
            superseded_entries_are_left_out_unless_asked_for,
            deleting_all_of_a_user_drops_their_streams,
        );
    };
    (@tests () $open:expr; $($test:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let (_guard, store) = $open.await;
            $crate::store::contract::$test(store).await;
        }
    )*};
    (@tests (needs_postgres) $open:expr; $($test:ident,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs PostgreSQL (ADK_TEST_POSTGRES)"]
        async fn $test() {
            let (_guard, store) = $open.await;
            $crate::store::contract::$test(store).await;
        }
    )*};
}

pub(crate) use memory_store_suite;

pub(crate) const SCOPE: Scope<'static> = Scope {
    app_name: "app",
    user_id: "user",
};

fn text_part(text: &str) -> Part {
    Part {
        data: Some(part::Data::Text(text.into())),
        ..Default::default()
    }
}

pub(crate) fn entry(id: &str, text: &str) -> Entry {
    Entry {
        id: id.into(),
        author: "user".into(),
        content: Content {
            role: Some("user".into()),
            parts: vec![text_part(text)],
        },
        ..Default::default()
    }
}

/// Entries from (id, text) pairs.
pub(crate) fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
    pairs.iter().map(|(id, text)| entry(id, text)).collect()
}

pub(crate) fn query(text: &str) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        limit: 10,
        ..Default::default()
    }
}

pub(crate) fn memory_id(id: &str) -> DeleteTarget {
    DeleteTarget::MemoryId(id.into())
}

// The calls below work on SCOPE and fail the test on error.

pub(crate) async fn replace(store: &impl MemoryStore, session: &str, entries: Vec<Entry>) -> u32 {
    store
        .replace_session(SCOPE, session, entries)
        .await
        .unwrap()
}

pub(crate) async fn add(store: &impl MemoryStore, session: &str, entries: Vec<Entry>) -> u32 {
    store.add_events(SCOPE, session, entries).await.unwrap()
}

pub(crate) async fn memorize(store: &impl MemoryStore, entries: Vec<Entry>) {
    store.add_memories(SCOPE, entries).await.unwrap()
}

pub(crate) async fn delete(store: &impl MemoryStore, target: DeleteTarget) -> u32 {
    store.delete(SCOPE, &target).await.unwrap()
}

/// The ids a search finds, best first.
async fn found(store: &impl MemoryStore, scope: Scope<'_>, q: &SearchQuery) -> Vec<String> {
    let hits = store.search(scope, q).await.unwrap();
    hits.into_iter().map(|h| h.entry.id).collect()
}

pub(crate) async fn search(store: &impl MemoryStore, text: &str) -> Vec<String> {
    found(store, SCOPE, &query(text)).await
}

/// The ids of all entries, in listing order.
pub(crate) async fn listed(store: &impl MemoryStore, scope: Scope<'_>) -> Vec<String> {
    let (entries, next) = store
        .list(scope, 1000, "", &Filter::default())
        .await
        .unwrap();
    assert_eq!(next, "");
    entries.into_iter().map(|e| e.id).collect()
}

pub async fn indexes_the_text_of_all_parts<S: MemoryStore + Clone>(store: S) {
    let mut e = entry("a", "visible answer");
    e.content.parts.push(Part {
        thought: Some(true),
        ..text_part("hidden reasoning")
    });
    e.content.parts.push(text_part("tail"));
    let no_text = Entry {
        content: Content::default(),
        ..entry("b", "")
    };
    memorize(&store, vec![e.clone(), no_text]).await;

    assert_eq!(search(&store, "reasoning").await, ["a"]);
    assert_eq!(search(&store, "answer").await, ["a"]);
    assert!(search(&store, "answertail").await.is_empty());
    // Stored whole and listable, but an entry without text is not indexed.
    let (listed, _) = store.list(SCOPE, 10, "", &Filter::default()).await.unwrap();
    assert_eq!(listed[0], e);
    assert_eq!(listed[1].id, "b");
    assert_scores_exact(&store, &["answer reasoning tail"]).await;
}

pub async fn empty_queries_find_nothing<S: MemoryStore + Clone>(store: S) {
    memorize(&store, entries(&[("a", "something")])).await;
    assert!(search(&store, "").await.is_empty());
    assert!(search(&store, " ?! ").await.is_empty());
    assert!(search(&store, "absent").await.is_empty());
}

pub async fn replace_session_replaces_its_entries<S: MemoryStore + Clone>(store: S) {
    let session = entries(&[("a", "alpha"), ("b", "beta"), ("c", "gamma")]);
    assert_eq!(replace(&store, "s1", session).await, 3);
    assert_eq!(replace(&store, "s2", entries(&[("x", "xi")])).await, 1);

    // Fewer events shrink the bucket; a changed one is rewritten in its place.
    let shorter = entries(&[("a", "alpha"), ("c", "delta")]);
    assert_eq!(replace(&store, "s1", shorter).await, 2);
    assert_eq!(listed(&store, SCOPE).await, ["a", "c", "x"]);
    assert!(search(&store, "beta gamma").await.is_empty());
    // `c` says it; `a`, the turn before it, has it as context.
    assert_eq!(search(&store, "delta").await, ["c", "a"]);

    // Of two entries with one id the first is kept; entries record their session.
    let dup = entries(&[("d", "first"), ("d", "second")]);
    assert_eq!(replace(&store, "s1", dup).await, 1);
    assert_eq!(listed(&store, SCOPE).await, ["x", "d"]);
    assert!(search(&store, "second").await.is_empty());
    let (listed_entries, _) = store.list(SCOPE, 10, "", &Filter::default()).await.unwrap();
    assert_eq!(listed_entries[1].session_id, "s1");

    assert_eq!(replace(&store, "s1", vec![]).await, 0);
    assert_eq!(listed(&store, SCOPE).await, ["x"]);
    assert_scores_exact(&store, &["xi"]).await;
}

/// ADK's per-turn memory callback adds the whole session again after every turn. Turns added
/// before are left as they are (only the last one's context changes), and the index ends as
/// that of the session added once: every score is the one scoring all entries gives.
pub async fn a_session_added_after_every_turn_is_indexed_as_if_added_once<
    S: MemoryStore + Clone,
>(
    store: S,
) {
    let turns = [
        ("t1", "planning a trip to lisbon"),
        ("t2", "which month suits lisbon"),
        ("t3", "may is warm and quiet"),
        ("t4", "book the flights for may"),
        ("t5", "done, flights booked"),
    ];
    for n in 1..=turns.len() {
        assert_eq!(replace(&store, "s", entries(&turns[..n])).await, n as u32);
        // The same session again: nothing to write.
        assert_eq!(replace(&store, "s", entries(&turns[..n])).await, n as u32);
    }
    assert_eq!(listed(&store, SCOPE).await, ["t1", "t2", "t3", "t4", "t5"]);
    // "may" is said by t3 and t4, and is in the context of t2 and t5.
    let mut found = search(&store, "may").await;
    found.sort();
    assert_eq!(found, ["t2", "t3", "t4", "t5"]);
    assert_scores_exact(&store, &["may", "lisbon", "flights booked", "trip quiet"]).await;
}

pub async fn add_events_keeps_the_first_copy<S: MemoryStore + Clone>(store: S) {
    let first = entries(&[("a", "original"), ("a", "shadowed")]);
    assert_eq!(add(&store, "s1", first).await, 1);
    let again = entries(&[("a", "rewritten"), ("b", "new")]);
    assert_eq!(add(&store, "s1", again).await, 1);
    // `b` continues the session after `a`: `a`'s text is its context.
    assert_eq!(search(&store, "original").await, ["a", "b"]);
    assert!(search(&store, "rewritten shadowed").await.is_empty());

    // Another session, or none, is another bucket.
    assert_eq!(add(&store, "s2", entries(&[("a", "other")])).await, 1);
    assert_eq!(add(&store, "", entries(&[("a", "loose")])).await, 1);
    assert_eq!(listed(&store, SCOPE).await, ["a", "b", "a", "a"]);
}

pub async fn add_memories_upserts_in_place<S: MemoryStore + Clone>(store: S) {
    memorize(
        &store,
        entries(&[("m1", "old"), ("m2", "two"), ("m1", "newer")]),
    )
    .await;
    memorize(&store, entries(&[("m3", "three")])).await;
    memorize(&store, entries(&[("m2", "second")])).await;
    assert_eq!(listed(&store, SCOPE).await, ["m2", "m1", "m3"]);
    assert!(search(&store, "old two").await.is_empty());
    assert_eq!(search(&store, "newer second").await.len(), 2);
    assert_scores_exact(&store, &["newer second three"]).await;
}

pub async fn deleted_ids_stay_deleted<S: MemoryStore + Clone>(store: S) {
    replace(&store, "s1", entries(&[("a", "alpha"), ("b", "beta")])).await;
    add(&store, "s2", entries(&[("a", "alpha")])).await;
    memorize(&store, entries(&[("a", "alpha")])).await;

    // Every copy of the id goes, in every session.
    assert_eq!(delete(&store, memory_id("a")).await, 3);
    assert!(search(&store, "alpha").await.is_empty());

    // Re-ingesting does not bring it back.
    let session = entries(&[("a", "alpha"), ("b", "beta")]);
    assert_eq!(replace(&store, "s1", session).await, 1);
    assert_eq!(add(&store, "s3", entries(&[("a", "alpha")])).await, 0);
    assert_eq!(listed(&store, SCOPE).await, ["b"]);

    // Deleting an id that is not there tombstones nothing.
    assert_eq!(delete(&store, memory_id("ghost")).await, 0);
    assert_eq!(add(&store, "s1", entries(&[("ghost", "boo")])).await, 1);

    // An explicit write lifts the tombstone.
    memorize(&store, entries(&[("a", "alpha")])).await;
    assert_eq!(add(&store, "s3", entries(&[("a", "alpha")])).await, 1);
    assert_eq!(search(&store, "alpha").await, ["a", "a"]);
}

pub async fn delete_by_session_and_all<S: MemoryStore + Clone>(store: S) {
    replace(&store, "s1", entries(&[("a", "alpha"), ("b", "beta")])).await;
    replace(&store, "s2", entries(&[("c", "gamma")])).await;
    memorize(&store, entries(&[("d", "delta")])).await;
    delete(&store, memory_id("d")).await;

    let s1 = || DeleteTarget::Session("s1".into());
    assert_eq!(delete(&store, s1()).await, 2);
    assert_eq!(delete(&store, s1()).await, 0);
    assert_eq!(listed(&store, SCOPE).await, ["c"]);
    // Deleting a session tombstones nothing.
    assert_eq!(replace(&store, "s1", entries(&[("a", "alpha")])).await, 1);

    let (_, token) = store.list(SCOPE, 1, "", &Filter::default()).await.unwrap();
    assert_eq!(delete(&store, DeleteTarget::All).await, 2);
    assert!(listed(&store, SCOPE).await.is_empty());
    assert!(search(&store, "alpha gamma").await.is_empty());

    // Tombstones went too; ingestion numbering goes on, so a token issued before skips
    // nothing added after.
    assert_eq!(add(&store, "", entries(&[("d", "delta")])).await, 1);
    assert_eq!(search(&store, "delta").await, ["d"]);
    let (page, _) = store
        .list(SCOPE, 10, &token, &Filter::default())
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["d"]
    );
    assert_scores_exact(&store, &["delta"]).await;

    let fresh = Scope {
        app_name: "app",
        user_id: "nobody",
    };
    assert_eq!(store.delete(fresh, &DeleteTarget::All).await.unwrap(), 0);
}

pub async fn scopes_are_isolated<S: MemoryStore + Clone>(store: S) {
    let scopes = [
        ("a/b", "c"),
        ("a", "b/c"),
        ("a", "b"),
        ("ab", "c"),
        ("a", "bc"),
    ]
    .map(|(app_name, user_id)| Scope { app_name, user_id });
    for (i, &scope) in scopes.iter().enumerate() {
        let e = entry("same-id", &format!("shared word{i}"));
        store.replace_session(scope, "s", vec![e]).await.unwrap();
    }
    for (i, &scope) in scopes.iter().enumerate() {
        assert_eq!(found(&store, scope, &query("shared")).await.len(), 1);
        assert_eq!(
            found(&store, scope, &query(&format!("word{i}")))
                .await
                .len(),
            1
        );
        let other = format!("word{}", (i + 1) % scopes.len());
        assert!(found(&store, scope, &query(&other)).await.is_empty());
    }

    // Statistics are per scope too: N = df = 1, whatever the other scopes hold.
    let hits = store.search(scopes[0], &query("shared")).await.unwrap();
    let idf = (1.0f64 + 0.5 / 1.5).ln();
    assert!((hits[0].score - idf).abs() < 1e-12, "{}", hits[0].score);

    // Deletes stay inside their scope, tombstones too.
    let deletes = [
        memory_id("same-id"),
        DeleteTarget::All,
        DeleteTarget::Session("s".into()),
    ];
    for (&scope, target) in scopes.iter().zip(&deletes) {
        assert_eq!(store.delete(scope, target).await.unwrap(), 1);
    }
    for (i, &scope) in scopes.iter().enumerate() {
        assert_eq!(
            listed(&store, scope).await.len(),
            usize::from(i > 2),
            "{scope:?}"
        );
    }
    let e = entry("same-id", "back");
    assert_eq!(store.add_events(scopes[1], "t", vec![e]).await.unwrap(), 1);

    // A page token works only for the scope it was issued for.
    let extra = vec![entry("x", "")];
    store.add_events(scopes[3], "t", extra).await.unwrap();
    let (_, token) = store
        .list(scopes[3], 1, "", &Filter::default())
        .await
        .unwrap();
    assert!(!token.is_empty());
    let err = store
        .list(scopes[4], 1, &token, &Filter::default())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidPageToken(_)), "{err}");
}

pub async fn ranks_by_bm25<S: MemoryStore + Clone>(store: S) {
    let docs = entries(&[
        ("c1", "common alpha beta"),
        ("c2", "common beta gamma"),
        ("c3", "common gamma delta"),
        ("r", "rare delta alpha"),
    ]);
    memorize(&store, docs).await;
    // The rarer term weighs more; equal scores come in ingestion order.
    assert_eq!(search(&store, "common rare").await, ["r", "c1", "c2", "c3"]);
    // Matching more terms weighs more.
    assert_eq!(search(&store, "gamma beta").await, ["c2", "c1", "c3"]);

    // More occurrences weigh more (at equal length).
    memorize(
        &store,
        entries(&[("t1", "cat dog dog"), ("t2", "cat cat dog")]),
    )
    .await;
    let hits = store.search(SCOPE, &query("cat")).await.unwrap();
    assert_eq!(hits[0].entry.id, "t2");
    assert!(hits[0].score > hits[1].score && hits[1].score > 0.0);
}

pub async fn ties_keep_ingestion_order<S: MemoryStore + Clone>(store: S) {
    // One session each, so that no entry has another as context.
    for id in ["z", "m", "a"] {
        add(&store, id, entries(&[(id, "same words")])).await;
    }
    assert_eq!(search(&store, "same").await, ["z", "m", "a"]);
    // Rewriting the entries in place, last first: the order holds.
    for id in ["a", "m", "z"] {
        replace(&store, id, entries(&[(id, "same words again")])).await;
    }
    assert_eq!(search(&store, "words").await, ["z", "m", "a"]);
}

pub async fn finds_substrings_of_unspaced_scripts<S: MemoryStore + Clone>(store: S) {
    let docs = entries(&[
        ("ota", "太田さんです"),
        ("yamada", "山田太郎です"),
        ("hanako", "山田花子です"),
        ("ja", "私はPythonでADKを使っています"),
        ("ko", "저는 파이썬을 좋아합니다"),
    ]);
    memorize(&store, docs).await;
    assert_eq!(search(&store, "太郎").await, ["yamada"]);
    assert_eq!(search(&store, "太").await, ["ota", "yamada"]);
    // The document with the whole substring outranks those with parts of it.
    assert_eq!(search(&store, "山田太郎").await, ["yamada", "hanako"]);
    assert_eq!(search(&store, "python").await, ["ja"]);
    assert_eq!(search(&store, "ADK").await, ["ja"]);
    assert!(search(&store, "thon").await.is_empty());
    assert_eq!(search(&store, "파이썬").await, ["ko"]);
}

pub async fn limit_and_filters<S: MemoryStore + Clone>(store: S) {
    let mut docs: Vec<Entry> = (0..6)
        .map(|i| Entry {
            timestamp: Some(Timestamp {
                seconds: 100 + i,
                nanos: 0,
            }),
            ..entry(&format!("e{i}"), "note")
        })
        .collect();
    docs[1].author = "model".into();
    docs[4].author = "model".into();
    docs.push(entry("untimed", "note"));
    memorize(&store, docs).await;
    let t = |seconds| Some(Timestamp { seconds, nanos: 0 });

    let mut q = query("note");
    q.limit = 2;
    assert_eq!(found(&store, SCOPE, &q).await, ["e0", "e1"]);

    let mut q = query("note");
    q.author = Some("model".into());
    assert_eq!(found(&store, SCOPE, &q).await, ["e1", "e4"]);

    // `after` is inclusive, `before` exclusive; an entry without a time is outside.
    let mut q = query("note");
    (q.after, q.before) = (t(102), t(105));
    assert_eq!(found(&store, SCOPE, &q).await, ["e2", "e3", "e4"]);

    // Filters apply before the limit.
    (q.limit, q.author) = (1, Some("model".into()));
    assert_eq!(found(&store, SCOPE, &q).await, ["e4"]);

    q.limit = 0;
    assert!(found(&store, SCOPE, &q).await.is_empty());
}

pub async fn lists_in_pages<S: MemoryStore + Clone>(store: S) {
    memorize(
        &store,
        (0..5).map(|i| entry(&format!("e{i}"), "x")).collect(),
    )
    .await;

    let mut token = String::new();
    let mut pages = Vec::new();
    loop {
        let (page, next) = store
            .list(SCOPE, 2, &token, &Filter::default())
            .await
            .unwrap();
        pages.push(page.into_iter().map(|e| e.id).collect::<Vec<_>>());
        if next.is_empty() {
            break;
        }
        token = next;
    }
    assert_eq!(pages, [vec!["e0", "e1"], vec!["e2", "e3"], vec!["e4"]]);

    // A page is never empty while entries remain, and the last one has no token.
    let (page, next) = store.list(SCOPE, 0, "", &Filter::default()).await.unwrap();
    assert_eq!((page.len(), next.is_empty()), (1, false));
    let (page, next) = store.list(SCOPE, 5, "", &Filter::default()).await.unwrap();
    assert_eq!((page.len(), next.as_str()), (5, ""));

    let err = store
        .list(SCOPE, 2, "not a token!", &Filter::default())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidPageToken(_)), "{err}");
}

pub async fn concurrent_writes_to_one_scope_all_land<S: MemoryStore + Clone>(store: S) {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                add(
                    &store,
                    "s",
                    vec![entry(&format!("e{i}"), "concurrent words here")],
                )
                .await
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 1);
    }
    assert_scores_exact(&store, &["concurrent words"]).await;
    assert_eq!(listed(&store, SCOPE).await.len(), 16);
}

pub async fn pruned_search_equals_exhaustive_scoring<S: MemoryStore + Clone>(store: S) {
    generated_corpus(&store).await;
    assert!(assert_searches_exact(&store).await > 400);
}
/// A deterministic pseudo-random sequence (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Text like chat turns: a few very common words in most entries, some mid-frequency ones,
/// and a long tail of rare ones; repeats give term frequencies above 1.
fn generated_text(rng: &mut Rng) -> String {
    let words = 1 + rng.below(30);
    (0..words)
        .map(|_| match rng.below(10) {
            0..=4 => ["the", "is", "a", "my", "to"][rng.below(5) as usize].to_owned(),
            5..=7 => format!("mid{}", rng.below(40)),
            _ => format!("rare{}", rng.below(2000)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An entry of the generated corpus: random author, and a time (or none).
fn generated_entry(rng: &mut Rng, id: &str) -> Entry {
    Entry {
        author: ["user", "model"][rng.below(2) as usize].into(),
        timestamp: (rng.below(10) > 0).then(|| Timestamp {
            seconds: rng.below(1000) as i64,
            nanos: 0,
        }),
        ..entry(id, &generated_text(rng))
    }
}

/// Fills SCOPE with a corpus long enough for common terms to span many blocks, then
/// rewrites and deletes entries so that blocks are edited in the middle, split, emptied
/// and created below a term's first block.
pub(crate) async fn generated_corpus(store: &impl MemoryStore) {
    let mut rng = Rng(7);
    for session in 0..12 {
        let batch = (0..100)
            .map(|i| generated_entry(&mut rng, &format!("e{session}-{i}")))
            .collect();
        add(store, &format!("s{session}"), batch).await;
    }
    // In-place rewrites: new texts at old seqs.
    let rewritten = (0..60)
        .map(|i| {
            let id = format!("e0-{}", i * 3 % 100);
            Entry {
                session_id: "s0".into(),
                ..generated_entry(&mut rng, &id)
            }
        })
        .collect();
    memorize(store, rewritten).await;
    // "spread" first appears in one late entry, then in 600 earlier ones: below the first
    // block, then growing one block past twice its size (the sled store's blocks hold 256).
    memorize(store, vec![entry("late", "spread the word")]).await;
    let spread = (1..7)
        .flat_map(|session| (0..100).map(move |i| (session, i)))
        .map(|(session, i)| Entry {
            session_id: format!("s{session}"),
            ..entry(
                &format!("e{session}-{i}"),
                &format!("spread mid{} is", i % 7),
            )
        })
        .collect();
    memorize(store, spread).await;
    delete(store, DeleteTarget::Session("s5".into())).await;
    delete(store, memory_id("e7-3")).await;
    delete(store, memory_id("late")).await;
}

/// Every entry of a scope as a search sees it: (entry, term frequencies, length). The suite
/// ingests each session's turns in order, so an entry's context is the text of the entries
/// next to it in its session.
async fn indexed(store: &impl MemoryStore, scope: Scope<'_>) -> Vec<(Entry, Terms)> {
    let (entries, _) = store
        .list(scope, usize::MAX, "", &Filter::default())
        .await
        .unwrap();
    let text = |e: &Entry| index::text_of(&e.content);
    (0..entries.len())
        .map(|i| {
            let e = &entries[i];
            let same =
                |j: &usize| !e.session_id.is_empty() && entries[*j].session_id == e.session_id;
            let before = (0..i).rev().find(same).map(|j| text(&entries[j]));
            let after = (i + 1..entries.len()).find(same).map(|j| text(&entries[j]));
            let context: Vec<String> = before.into_iter().chain(after).collect();
            (e.clone(), Terms::of(&Analyzer::default(), e, &context))
        })
        .collect()
}

/// The results of `q` by scoring every entry: today's formula, spelled out separately.
fn brute_force(docs: &[(Entry, Terms)], q: &SearchQuery) -> Vec<(String, String, u64)> {
    let n = docs.iter().filter(|(_, r)| r.len > 0).count() as f64;
    let avg = docs.iter().map(|(_, r)| f64::from(r.len)).sum::<f64>() / n;
    let tf = |r: &Terms, term: &str| {
        r.counts
            .iter()
            .find(|(t, _)| t == term)
            .map(|(_, tf)| f64::from(*tf))
    };
    let terms = Analyzer::default().query_terms(&q.text, q.language);
    let idfs: Vec<f64> = terms
        .iter()
        .map(|term| {
            let df = docs.iter().filter(|(_, r)| tf(r, term).is_some()).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mut scored: Vec<(f64, usize)> = Vec::new();
    for (i, (_, r)) in docs.iter().enumerate() {
        let mut score = None;
        for (term, idf) in terms.iter().zip(&idfs) {
            if let Some(tf) = tf(r, term) {
                let tf = tf / f64::from(UNIT);
                let norm = 1.2 * (1.0 - 0.5 + 0.5 * f64::from(r.len) / avg);
                *score.get_or_insert(0.0) += idf * tf * (1.2 + 1.0) / (tf + norm);
            }
        }
        if let Some(score) = score {
            scored.push((score, i));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .filter(|&(_, i)| q.admits(&docs[i].0))
        .take(q.limit)
        .map(|(score, i)| {
            (
                docs[i].0.id.clone(),
                docs[i].0.session_id.clone(),
                score.to_bits(),
            )
        })
        .collect()
}

/// Compares the store's results with [`brute_force`] for queries of common, mid-frequency
/// and rare words, limits and filters; returns how many searches were compared.
pub(crate) async fn assert_searches_exact(store: &impl MemoryStore) -> usize {
    let docs = indexed(store, SCOPE).await;
    let texts = [
        "the",
        "the is a",
        "my to the is a",
        "spread",
        "spread the",
        "mid3",
        "mid3 mid17 the",
        "the mid5 rare12 rare150",
        "rare1 rare2 rare3",
        "a rare77",
        "is mid1 mid2 mid3 mid4 mid5 my",
        "absent words only",
        "absent the",
    ];
    let t = |seconds| Some(Timestamp { seconds, nanos: 0 });
    let filters = [
        SearchQuery::default(),
        SearchQuery {
            author: Some("model".into()),
            ..Default::default()
        },
        SearchQuery {
            after: t(500),
            ..Default::default()
        },
        SearchQuery {
            before: t(100),
            ..Default::default()
        },
        SearchQuery {
            author: Some("user".into()),
            after: t(200),
            before: t(900),
            ..Default::default()
        },
        SearchQuery {
            author: Some("nobody".into()),
            ..Default::default()
        },
    ];
    let mut compared = 0;
    for text in texts {
        for filter in &filters {
            for limit in [1, 3, 10, 25, 100, 10_000] {
                let q = SearchQuery {
                    text: text.into(),
                    limit,
                    ..filter.clone()
                };
                let hits = store.search(SCOPE, &q).await.unwrap();
                let got: Vec<_> = hits
                    .into_iter()
                    .map(|h| (h.entry.id, h.entry.session_id, h.score.to_bits()))
                    .collect();
                assert_eq!(got, brute_force(&docs, &q), "{q:?}");
                compared += 1;
            }
        }
    }
    compared
}

/// Checks every score of these queries against scoring every listed entry, which holds only if
/// the store's statistics (entries with text, their total length) are right.
async fn assert_scores_exact(store: &impl MemoryStore, texts: &[&str]) {
    let docs = indexed(store, SCOPE).await;
    for text in texts {
        let q = query(text);
        let hits = store.search(SCOPE, &q).await.unwrap();
        let got: Vec<_> = hits
            .into_iter()
            .map(|h| (h.entry.id, h.entry.session_id, h.score.to_bits()))
            .collect();
        assert_eq!(got, brute_force(&docs, &q), "{q:?}");
    }
}

fn job(id: &str, due_ms: i64) -> super::JobRecord {
    super::JobRecord {
        id: id.into(),
        app_name: SCOPE.app_name.into(),
        user_id: SCOPE.user_id.into(),
        state: adk_proto::memory::v1::GenerationState::Pending as i32,
        due_ms,
        ..Default::default()
    }
}

pub async fn jobs_are_leased_and_a_stale_attempt_cannot_finish<S: MemoryStore + Clone>(store: S) {
    use adk_proto::memory::v1::GenerationState;
    store.enqueue(&job("later", 500)).await.unwrap();
    store.enqueue(&job("first", 100)).await.unwrap();
    // Nothing is due before its time; the job due first is claimed first.
    assert_eq!(store.claim(None, 50, 1000).await.unwrap(), None);
    let claimed = store.claim(None, 200, 1000).await.unwrap().unwrap();
    assert_eq!((claimed.id.as_str(), claimed.attempts), ("first", 1));
    assert_eq!(claimed.state, GenerationState::Running as i32);
    assert_eq!(claimed.due_ms, 1200);
    // Leased: not claimed again, by any worker, until the lease runs out.
    assert_eq!(store.claim(Some("first"), 300, 1000).await.unwrap(), None);
    let next = store.claim(None, 600, 1000).await.unwrap().unwrap();
    assert_eq!(next.id, "later");
    let taken_over = store.claim(None, 1300, 1000).await.unwrap().unwrap();
    assert_eq!((taken_over.id.as_str(), taken_over.attempts), ("first", 2));
    // The first attempt's worker comes back too late: its outcome is refused.
    let mut stale = claimed.clone();
    stale.state = GenerationState::Failed as i32;
    assert!(!store.finish(&stale).await.unwrap());
    let mut done = taken_over.clone();
    done.state = GenerationState::Succeeded as i32;
    done.added = 3;
    assert!(store.finish(&done).await.unwrap());
    assert_eq!(store.job(SCOPE, "first").await.unwrap(), Some(done.clone()));
    assert!(
        !store.finish(&done).await.unwrap(),
        "a finished job stays finished"
    );
    // A retry is due again at its time; jobs are read in their own scope only.
    let mut retry = next.clone();
    retry.state = GenerationState::Pending as i32;
    retry.due_ms = 5000;
    assert!(store.finish(&retry).await.unwrap());
    assert_eq!(store.claim(None, 4999, 1000).await.unwrap(), None);
    assert_eq!(
        store
            .claim(None, 5000, 1000)
            .await
            .unwrap()
            .unwrap()
            .attempts,
        2
    );
    let other = Scope {
        app_name: "app",
        user_id: "someone-else",
    };
    assert_eq!(store.job(other, "first").await.unwrap(), None);
}

pub async fn revisions_are_read_by_number_and_pruned_but_the_last<S: MemoryStore + Clone>(
    store: S,
) {
    use super::{RevisionRecord, Write};
    let other = Scope {
        app_name: "app",
        user_id: "someone-else",
    };
    // Three revisions of m1 (times 100, 200, 300), one of m2 (time 150), one of m1 in
    // another scope (time 100).
    for (scope, id, fact, at) in [
        (SCOPE, "m1", "tea", 100),
        (SCOPE, "m2", "coffee", 150),
        (SCOPE, "m1", "green tea", 200),
        (SCOPE, "m1", "black tea", 300),
        (other, "m1", "water", 100),
    ] {
        let revision = RevisionRecord {
            memory_id: id.into(),
            new_fact: fact.into(),
            create_ms: at,
            ..Default::default()
        };
        store
            .write_changed(
                scope,
                Write::AddMemories(vec![generated(id, fact, None)]),
                super::Vectors::default(),
                vec![revision],
            )
            .await
            .unwrap();
    }
    let (all, _) = store.revisions(SCOPE, None, 10, "").await.unwrap();
    let seqs: Vec<u64> = all.iter().map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let first = store.revision(SCOPE, seqs[0]).await.unwrap().unwrap();
    assert_eq!(
        (first.seq, first.record.new_fact.as_str()),
        (seqs[0], "tea")
    );
    // A revision is read only in its own scope.
    assert_eq!(store.revision(other, seqs[0]).await.unwrap(), None);

    // Before 250: m1's first two go; m2's only one, m1's last and the other scope's stay.
    assert_eq!(store.prune_revisions(250, 1).await.unwrap(), 1);
    assert_eq!(store.prune_revisions(250, 10).await.unwrap(), 1);
    assert_eq!(store.prune_revisions(250, 10).await.unwrap(), 0);
    let (kept, _) = store.revisions(SCOPE, None, 10, "").await.unwrap();
    let kept: Vec<&str> = kept.iter().map(|r| r.record.new_fact.as_str()).collect();
    assert_eq!(kept, ["coffee", "black tea"]);
    assert_eq!(store.revision(SCOPE, seqs[0]).await.unwrap(), None);
    let (theirs, _) = store.revisions(other, None, 10, "").await.unwrap();
    assert_eq!(theirs.len(), 1);
    // Whatever the time, the last revision of each memory stays.
    assert_eq!(store.prune_revisions(i64::MAX, 10).await.unwrap(), 0);
}

pub async fn raw_entries_with_a_lifetime_expire<S: MemoryStore + Clone>(store: S) {
    use super::{Expired, Kind};
    let note = Entry {
        kind: Kind {
            generated: false,
            expire_ms: Some(700),
        },
        ..entry("note", "green tea")
    };
    store
        .add_memories(SCOPE, vec![note, entry("lasting", "black tea")])
        .await
        .unwrap();
    assert!(store.expired(699, 10).await.unwrap().is_empty());
    assert_eq!(
        store.expired(1000, 10).await.unwrap(),
        [Expired {
            app_name: "app".into(),
            user_id: "user".into(),
            memory_id: "note".into(),
        }]
    );
    let tea = |now_ms| SearchQuery {
        text: "tea".into(),
        limit: 10,
        now_ms,
        ..SearchQuery::default()
    };
    let ids = |hits: Vec<super::Hit>| -> Vec<String> {
        let mut ids: Vec<String> = hits.into_iter().map(|h| h.entry.id).collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(store.search(SCOPE, &tea(500)).await.unwrap()),
        ["lasting", "note"]
    );
    assert_eq!(
        ids(store.search(SCOPE, &tea(1000)).await.unwrap()),
        ["lasting"]
    );
}

/// A generated memory named `id` with `fact` as its text, expiring at `expire_ms`.
fn generated(id: &str, fact: &str, expire_ms: Option<i64>) -> Entry {
    Entry {
        author: "memory".into(),
        kind: super::Kind::generated(expire_ms),
        ..entry(id, fact)
    }
}

pub async fn changes_keep_revisions_and_expiries<S: MemoryStore + Clone>(store: S) {
    use super::{Expired, RevisionRecord, Write};
    let revision = |id: &str, fact: &str| {
        vec![RevisionRecord {
            memory_id: id.into(),
            new_fact: fact.into(),
            ..Default::default()
        }]
    };
    let add =
        |id: &str, fact: &str, expire_ms| Write::AddMemories(vec![generated(id, fact, expire_ms)]);
    let vectors = super::Vectors::default;
    store
        .write_changed(
            SCOPE,
            add("m1", "tea", Some(100)),
            vectors(),
            revision("m1", "tea"),
        )
        .await
        .unwrap();
    store
        .write_changed(
            SCOPE,
            add("m2", "coffee", Some(900)),
            vectors(),
            revision("m2", "coffee"),
        )
        .await
        .unwrap();
    // Rewriting m1 without a TTL drops its expiry; the unchanged text still records a revision.
    store
        .write_changed(
            SCOPE,
            add("m1", "tea", None),
            vectors(),
            revision("m1", "tea again"),
        )
        .await
        .unwrap();
    assert_eq!(
        store.expired(1000, 10).await.unwrap(),
        [Expired {
            app_name: "app".into(),
            user_id: "user".into(),
            memory_id: "m2".into(),
        }]
    );
    assert!(store.expired(899, 10).await.unwrap().is_empty());
    let facts = |revisions: Vec<super::Revision>| -> Vec<String> {
        revisions.into_iter().map(|r| r.record.new_fact).collect()
    };
    let (m1, next) = store.revisions(SCOPE, Some("m1"), 10, "").await.unwrap();
    assert_eq!(
        (facts(m1), next.as_str()),
        (vec!["tea".to_owned(), "tea again".to_owned()], "")
    );
    let (page, next) = store.revisions(SCOPE, None, 2, "").await.unwrap();
    assert_eq!(facts(page), ["tea", "coffee"]);
    let (rest, last) = store.revisions(SCOPE, None, 2, &next).await.unwrap();
    assert_eq!(
        (facts(rest), last.as_str()),
        (vec!["tea again".to_owned()], "")
    );
    // Deleting the memory drops its expiry in the same transaction.
    let delete = Write::Delete(DeleteTarget::MemoryId("m2".into()));
    assert_eq!(
        store
            .write_changed(SCOPE, delete, vectors(), vec![])
            .await
            .unwrap(),
        1
    );
    assert!(store.expired(1000, 10).await.unwrap().is_empty());
    assert_eq!(listed(&store, SCOPE).await, ["m1"]);
    // So does a raw write into its slot, and deleting the whole memory.
    store
        .write_changed(SCOPE, add("m3", "milk", Some(500)), vectors(), vec![])
        .await
        .unwrap();
    store
        .add_memories(SCOPE, entries(&[("m3", "milk")]))
        .await
        .unwrap();
    assert!(store.expired(1000, 10).await.unwrap().is_empty());
    store
        .write_changed(SCOPE, add("m4", "sugar", Some(500)), vectors(), vec![])
        .await
        .unwrap();
    store.delete(SCOPE, &DeleteTarget::All).await.unwrap();
    assert!(store.expired(1000, 10).await.unwrap().is_empty());
}

/// An entry's kind and expiry are what the service wrote, whatever its metadata says; the
/// metadata is kept as written.
pub async fn kinds_are_stored_not_read_from_metadata<S: MemoryStore + Clone>(store: S) {
    let claims = r#"{"expire_time":"2001-01-01T00:00:00Z","kind":"generated"}"#;
    let forged = Entry {
        custom_metadata: claims.into(),
        ..entry("forged", "green tea")
    };
    let fact = generated("fact", "green tea", Some(2_000));
    store.add_memories(SCOPE, vec![forged, fact]).await.unwrap();
    let kind = |generated| SearchQuery {
        generated,
        now_ms: 1_000,
        ..query("tea")
    };
    assert_eq!(found(&store, SCOPE, &kind(Some(true))).await, ["fact"]);
    assert_eq!(found(&store, SCOPE, &kind(Some(false))).await, ["forged"]);
    assert_eq!(found(&store, SCOPE, &kind(None)).await.len(), 2);
    // Once the generated memory has expired, only it is left out.
    let later = SearchQuery {
        now_ms: 2_000,
        ..kind(None)
    };
    assert_eq!(found(&store, SCOPE, &later).await, ["forged"]);
    let (listed, _) = store.list(SCOPE, 10, "", &Filter::default()).await.unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|e| (e.id.as_str(), e.custom_metadata.as_str(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("forged", claims, super::Kind::default()),
            ("fact", "", super::Kind::generated(Some(2_000))),
        ]
    );
    let expired: Vec<_> = store.expired(5_000, 10).await.unwrap();
    assert_eq!(
        expired
            .iter()
            .map(|e| e.memory_id.as_str())
            .collect::<Vec<_>>(),
        ["fact"]
    );
}

pub async fn finished_jobs_are_pruned_after_the_retention<S: MemoryStore + Clone>(store: S) {
    use adk_proto::memory::v1::GenerationState;
    for (id, due) in [("old", 10), ("new", 20), ("open", 30)] {
        store.enqueue(&job(id, due)).await.unwrap();
    }
    let end = |mut job: super::JobRecord, state: GenerationState, at: i64| {
        job.state = state as i32;
        job.update_ms = at;
        job
    };
    let old = store.claim(Some("old"), 100, 1000).await.unwrap().unwrap();
    assert!(store
        .finish(&end(old, GenerationState::Failed, 1_000))
        .await
        .unwrap());
    let new = store.claim(Some("new"), 100, 1000).await.unwrap().unwrap();
    assert!(store
        .finish(&end(new, GenerationState::Succeeded, 2_000))
        .await
        .unwrap());
    // A job is pruned once it ended before the cut-off, never while it is open.
    assert_eq!(store.prune_jobs(1_000, 10).await.unwrap(), 0);
    assert_eq!(store.prune_jobs(1_001, 10).await.unwrap(), 1);
    assert_eq!(store.job(SCOPE, "old").await.unwrap(), None);
    assert!(store.job(SCOPE, "new").await.unwrap().is_some());
    assert_eq!(store.prune_jobs(i64::MAX, 10).await.unwrap(), 1);
    assert_eq!(store.job(SCOPE, "new").await.unwrap(), None);
    assert!(store.job(SCOPE, "open").await.unwrap().is_some());
    assert_eq!(store.prune_jobs(i64::MAX, 10).await.unwrap(), 0);
}

/// The entries a store kept before entries carried their kind, as [`assert_kinds_converted`]
/// expects them converted: all written raw (the old layout had no kind), with the revisions
/// the generator recorded. Returns the expiries the old layout kept beside them, by memory id,
/// for the backend's test to store its old way. Two jobs are queued, one of them finished.
pub(crate) async fn before_kinds(store: &impl MemoryStore) -> Vec<(&'static str, i64)> {
    use super::{RevisionRecord, Write};
    use adk_proto::memory::v1::{GenerationState, RevisionAction};
    let marked = r#"{"kind":"generated","topic":"preferences"}"#;
    let write = |id: &str, text: &str| {
        Write::AddMemories(vec![Entry {
            custom_metadata: marked.into(),
            author: "memory".into(),
            ..entry(id, text)
        }])
    };
    let revision = |id: &str, action: RevisionAction, fact: &str| {
        vec![RevisionRecord {
            memory_id: id.into(),
            action: action as i32,
            new_fact: fact.into(),
            ..Default::default()
        }]
    };
    let vectors = super::Vectors::default;
    for (id, text, revisions) in [
        // Generated, the first to expire.
        (
            "g1",
            "likes tea",
            vec![(RevisionAction::Added, "likes tea")],
        ),
        // Generated and updated, without expiry.
        (
            "g2",
            "lives in Berlin",
            vec![
                (RevisionAction::Added, "lives in Paris"),
                (RevisionAction::Updated, "lives in Berlin"),
            ],
        ),
        // Raw, claiming to be generated (and to expire, in the old expiries).
        ("forged", "likes coffee", vec![]),
        // Generated, then overwritten by a direct write with another text.
        (
            "over",
            "client text",
            vec![(RevisionAction::Added, "a fact")],
        ),
        // Generated, deleted, and written again by a client.
        (
            "again",
            "likes milk",
            vec![
                (RevisionAction::Added, "likes milk"),
                (RevisionAction::Deleted, ""),
            ],
        ),
    ] {
        store
            .write_embedded(SCOPE, write(id, text), vectors())
            .await
            .unwrap();
        for (action, fact) in revisions {
            store
                .write_changed(SCOPE, Write::Reindex, vectors(), revision(id, action, fact))
                .await
                .unwrap();
        }
    }
    // A generated memory in a session is none either.
    let in_session = Entry {
        session_id: "s".into(),
        ..entry("g1", "likes tea")
    };
    store.add_memories(SCOPE, vec![in_session]).await.unwrap();
    store.enqueue(&job("open", 10)).await.unwrap();
    store.enqueue(&job("ended", 10)).await.unwrap();
    let mut ended = store.claim(Some("ended"), 10, 100).await.unwrap().unwrap();
    ended.state = GenerationState::Succeeded as i32;
    ended.update_ms = 20;
    assert!(store.finish(&ended).await.unwrap());
    vec![("g1", 100), ("forged", 50), ("over", 60), ("gone", 70)]
}

/// Checks the store of [`before_kinds`] converted: only the entries the generator's revisions
/// vouch for are generated, with the expiries it recorded; metadata stays as it was.
pub(crate) async fn assert_kinds_converted(store: &impl MemoryStore) {
    use super::Kind;
    let (listed, _) = store
        .list(SCOPE, 100, "", &Filter::default())
        .await
        .unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|e| (e.id.as_str(), e.session_id.as_str(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("g1", "", Kind::generated(Some(100))),
            ("g2", "", Kind::generated(None)),
            ("forged", "", Kind::default()),
            ("over", "", Kind::default()),
            ("again", "", Kind::default()),
            ("g1", "s", Kind::default()),
        ]
    );
    assert!(listed[..5]
        .iter()
        .all(|e| e.custom_metadata.contains("generated")));
    let expired = store.expired(i64::MAX, 10).await.unwrap();
    assert_eq!(
        expired
            .iter()
            .map(|e| e.memory_id.as_str())
            .collect::<Vec<_>>(),
        ["g1"]
    );
    // The job that had ended is pruned by the time it ended; the open one never.
    assert_eq!(store.prune_jobs(20, 10).await.unwrap(), 0);
    assert_eq!(store.prune_jobs(21, 10).await.unwrap(), 1);
    assert_eq!(store.job(SCOPE, "ended").await.unwrap(), None);
    assert!(store.job(SCOPE, "open").await.unwrap().is_some());
}

fn stream_event(id: &str) -> adk_proto::session::v1::Event {
    adk_proto::session::v1::Event {
        id: id.into(),
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![text_part(id)],
        }),
        ..Default::default()
    }
}

pub async fn streams_buffer_each_id_once_and_hand_over_in_order<S: MemoryStore>(store: S) {
    use super::StreamKey;
    let stream = StreamKey {
        scope: SCOPE,
        stream_id: "s",
    };
    let ids = |job: &super::JobRecord| -> Vec<String> {
        job.events.iter().map(|e| e.id.clone()).collect()
    };
    let events = |ids: &[&str]| ids.iter().map(|id| stream_event(id)).collect::<Vec<_>>();
    let first = store
        .append_stream(stream, events(&["b", "a"]), 100, 4, job("j1", 0))
        .await
        .unwrap();
    assert_eq!((first.appended, first.buffered, first.job), (2, 2, None));
    let again = store
        .append_stream(stream, events(&["a"]), 150, 4, job("j1", 0))
        .await
        .unwrap();
    assert_eq!((again.appended, again.buffered), (0, 2));
    let buffered = store.buffered_streams().await.unwrap();
    assert_eq!(buffered.len(), 1);
    assert_eq!(
        (
            buffered[0].stream_id.as_str(),
            buffered[0].events,
            buffered[0].last_ms
        ),
        ("s", 2, 100),
        "a duplicate is no event: the stream's last time stays"
    );
    // Quiet since 99 is not quiet since the event of 100.
    assert_eq!(
        store
            .flush_stream(stream, job("j1", 0), Some(99))
            .await
            .unwrap(),
        None
    );
    let handed = store
        .flush_stream(stream, job("j1", 0), Some(100))
        .await
        .unwrap()
        .expect("the stream was quiet since 100");
    assert_eq!(ids(&handed), ["b", "a"], "in the order they came");
    assert_eq!(store.buffered_streams().await.unwrap(), []);
    assert_eq!(
        store
            .claim(Some("j1"), 0, 10)
            .await
            .unwrap()
            .map(|j| ids(&j)),
        Some(vec!["b".into(), "a".into()])
    );
    // Handed-off ids stay known; the trigger count hands over in the append's transaction.
    let third = store
        .append_stream(stream, events(&["a", "c", "d"]), 200, 2, job("j2", 0))
        .await
        .unwrap();
    assert_eq!((third.appended, third.buffered), (2, 0));
    assert_eq!(
        third.job.map(|j| ids(&j)),
        Some(vec!["c".into(), "d".into()])
    );
    assert_eq!(
        store
            .flush_stream(stream, job("j3", 0), None)
            .await
            .unwrap(),
        None
    );
    let other = StreamKey {
        scope: SCOPE,
        stream_id: "t",
    };
    let elsewhere = store
        .append_stream(other, events(&["a"]), 300, 2, job("j3", 0))
        .await
        .unwrap();
    assert_eq!((elsewhere.appended, elsewhere.buffered), (1, 1));
}

fn at(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

/// Entries whose validity is closed are left out of searches as of a time at or after their
/// end, before ranking: a search's limit counts only the valid ones; they come back as of a
/// time before, or with `include_superseded`. A closed entry rewritten as valid is valid
/// again.
pub async fn superseded_entries_are_left_out_unless_asked_for<S: MemoryStore + Clone>(store: S) {
    use crate::validity::{ValidAt, Validity};
    let valid = |id: &str, text: &str, from: i64, until: Option<i64>| Entry {
        validity: Validity {
            from: Some(at(from)),
            until: until.map(at),
        },
        ..entry(id, text)
    };
    // The superseded facts match best: each holds the query's words twice.
    memorize(
        &store,
        vec![
            valid("berlin", "home home Berlin", 10, Some(20)),
            valid("hamburg", "home home Hamburg", 5, Some(10)),
            valid("lisbon", "home Lisbon", 20, None),
            valid("later", "home Porto", 40, None),
        ],
    )
    .await;
    let asked = |seconds: i64, as_of: bool, include_superseded: bool| SearchQuery {
        limit: 1,
        valid_at: ValidAt {
            at: Some(at(seconds)),
            as_of,
            include_superseded,
        },
        ..query("home")
    };
    let held = &store;
    let now = |q: SearchQuery| async move { found(held, SCOPE, &q).await };
    assert_eq!(now(asked(30, false, false)).await, ["lisbon"]);
    assert_eq!(now(asked(15, true, false)).await, ["berlin"]);
    assert_eq!(now(asked(7, true, false)).await, ["hamburg"]);
    assert_eq!(now(asked(3, true, false)).await, Vec::<String>::new());
    assert_eq!(now(asked(30, false, true)).await.len(), 1);
    let everything = SearchQuery {
        limit: 10,
        ..asked(50, false, true)
    };
    assert_eq!(now(everything).await.len(), 4);
    // A future fact is found as of its time.
    let mut later = now(SearchQuery {
        limit: 10,
        ..asked(45, true, false)
    })
    .await;
    later.sort();
    assert_eq!(later, ["later", "lisbon"]);
    // A listing's entries are tested by the same rule.
    let (entries, _) = store
        .list(SCOPE, 100, "", &Filter::default())
        .await
        .unwrap();
    let admitted: Vec<&str> = entries
        .iter()
        .filter(|e| asked(30, false, false).admits(e))
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(admitted, ["lisbon"]);
    // Rewritten open, a closed entry is valid again.
    memorize(&store, vec![valid("berlin", "home home Berlin", 10, None)]).await;
    assert_eq!(now(asked(30, false, false)).await, ["berlin"]);
}

/// Writes entries as a store of sled format 6 or PostgreSQL schema 9 held them: without a
/// validity. The caller then takes the store back to that format.
pub(crate) async fn before_validity(store: &impl MemoryStore) {
    let stamped = |id: &str, text: &str, seconds: i64| Entry {
        timestamp: Some(at(seconds)),
        ..entry(id, text)
    };
    replace(
        store,
        "s",
        vec![
            stamped("t1", "moved to Berlin", 100),
            stamped("t2", "found a flat in Berlin", 200),
        ],
    )
    .await;
    memorize(store, vec![entry("note", "Berlin has lakes")]).await;
}

/// The entries [`before_validity`] wrote, as the conversion left them: valid from their
/// timestamps (an entry without one, since ever), none closed; a search as of now finds them
/// all, and one as of a time between them the one valid then.
pub(crate) async fn assert_validity_converted(store: &impl MemoryStore) {
    use crate::validity::{ValidAt, Validity};
    let (entries, _) = store
        .list(SCOPE, 100, "", &Filter::default())
        .await
        .unwrap();
    let validity: Vec<(&str, Validity)> = entries
        .iter()
        .map(|e| (e.id.as_str(), e.validity))
        .collect();
    assert_eq!(
        validity,
        [
            ("t1", Validity::from(Some(at(100)))),
            ("t2", Validity::from(Some(at(200)))),
            ("note", Validity::default()),
        ]
    );
    let as_of = |seconds: i64| SearchQuery {
        valid_at: ValidAt {
            at: Some(at(seconds)),
            as_of: true,
            include_superseded: false,
        },
        ..query("Berlin")
    };
    let mut now = found(store, SCOPE, &as_of(1_000)).await;
    now.sort();
    assert_eq!(now, ["note", "t1", "t2"]);
    let mut then = found(store, SCOPE, &as_of(150)).await;
    then.sort();
    assert_eq!(then, ["note", "t1"]);
}

pub async fn deleting_all_of_a_user_drops_their_streams<S: MemoryStore>(store: S) {
    use adk_proto::memory::v1::GenerationState;

    use super::StreamKey;
    let stream = |scope, stream_id| StreamKey { scope, stream_id };
    let stream_job = |id: &str, stream_id: &str| super::JobRecord {
        stream_id: stream_id.into(),
        ..job(id, 0)
    };
    let events = |ids: &[&str]| ids.iter().map(|id| stream_event(id)).collect::<Vec<_>>();
    let other = Scope {
        app_name: SCOPE.app_name,
        user_id: "someone-else",
    };
    // "h" hands a and b to j1, which ends; "w" and another user's "w" hold events.
    let handed = store
        .append_stream(
            stream(SCOPE, "h"),
            events(&["a", "b"]),
            100,
            2,
            stream_job("j1", "h"),
        )
        .await
        .unwrap();
    assert!(handed.job.is_some(), "the trigger count hands over");
    store
        .append_stream(
            stream(SCOPE, "w"),
            events(&["c"]),
            110,
            5,
            stream_job("j2", "w"),
        )
        .await
        .unwrap();
    store
        .append_stream(
            stream(other, "w"),
            events(&["c"]),
            120,
            5,
            stream_job("j3", "w"),
        )
        .await
        .unwrap();
    let listed = |streams: Vec<super::Buffered>| -> Vec<(String, u32, i64)> {
        streams
            .into_iter()
            .map(|b| (b.stream_id, b.events, b.last_ms))
            .collect()
    };
    assert_eq!(
        listed(store.scope_streams(SCOPE).await.unwrap()),
        [("w".to_owned(), 1, 110)]
    );
    assert_eq!(handed.job.map(|j| j.id), Some("j1".to_owned()));
    let mut j1 = store.claim(Some("j1"), 150, 1000).await.unwrap().unwrap();
    j1.state = GenerationState::Succeeded as i32;
    j1.update_ms = 200;
    assert!(store.finish(&j1).await.unwrap());

    // A user with streams and no memory still has something to delete.
    assert_eq!(store.delete(SCOPE, &DeleteTarget::All).await.unwrap(), 0);
    assert_eq!(store.scope_streams(SCOPE).await.unwrap(), []);
    assert_eq!(
        store
            .flush_stream(stream(SCOPE, "w"), stream_job("j4", "w"), None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        listed(store.scope_streams(other).await.unwrap()),
        [("w".to_owned(), 1, 120)],
        "another user's stream stays"
    );
    // The handed-off ids went too; a's new copy survives the pruning of j1, which took the old.
    let again = store
        .append_stream(
            stream(SCOPE, "h"),
            events(&["a"]),
            300,
            5,
            stream_job("j5", "h"),
        )
        .await
        .unwrap();
    assert_eq!((again.appended, again.buffered), (1, 1));
    assert_eq!(store.prune_jobs(i64::MAX, 10).await.unwrap(), 1);
    let flushed = store
        .flush_stream(stream(SCOPE, "h"), stream_job("j6", "h"), None)
        .await
        .unwrap()
        .expect("a is buffered");
    assert_eq!(flushed.events.len(), 1);
}
