//! The posting blocks of recently searched terms, kept in memory so that a search of a scope
//! no replica wrote since does not read them from the database again: a query of common words
//! reads hundreds of blocks (several hundred kilobytes at 100k entries), which is most of its
//! time, and the same common words recur in every user's questions.
//!
//! Each term of a scope is kept with the scope's version it was read at: every write to a scope
//! rewrites its `memory_scopes` row under the scope's lock (see `super::write::lock`), so a
//! version names one state of all the scope's blocks. A search reads the version
//! (`super::scope_version`) in its own snapshot, with the statistics, and uses a kept term only
//! when the versions agree; it reads the others (bounds and blocks) and keeps them under its
//! version. Nothing is ever served that the search's snapshot would not have read: what is kept
//! under a version was read in a snapshot of that version.
//!
//! A term is kept with all its blocks' bounds (a search reads them all) and the blocks searches
//! read so far (a pruned search reads only the best spans). When the scope's version moved on,
//! a search reads the term's bounds again, each with the id of the transaction that wrote its
//! row (`xmin`), and keeps using every kept block whose row that write did not touch.
//!
//! Bounded by `--posting-cache-bytes`; the least recently searched term goes first, and a term
//! larger than an eighth of it is not kept (`ADMIT_SHARE`).

use std::{
    collections::HashMap,
    mem::size_of,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use adk_common::keys::Key;
use lru::LruCache;

use super::super::{maxscore::Posting, Scope};

/// Default `--posting-cache-bytes`: the blocks of about 4M postings, e.g. every block of the 20
/// most common words of a user with 200k entries; small enough for the PostgreSQL overlay's
/// 256 MiB pods.
pub const DEFAULT_BYTES: usize = 64 << 20;

/// A term is kept only if it takes at most this share of the capacity: a few terms larger than
/// the cache can hold together (the common words of a user of 1M entries, ~11 MB each against
/// a 64 MiB cache) would only push each other and every smaller term out, search after search.
const ADMIT_SHARE: usize = 8;

/// Bytes counted for a kept term beyond its bounds and postings (key, maps, allocations).
const OVERHEAD: usize = 256;
/// Bytes counted per kept block beyond its postings.
const BLOCK_OVERHEAD: usize = 48;

/// A block's bounds and size, as `memory_blocks` stores them, and which row version they are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Bound {
    pub span: i64,
    pub postings: i32,
    pub max_tf: i64,
    pub min_len: i64,
    /// The id of the transaction that wrote the row (`xmin`): every write of a block gives its
    /// row a new one, so a block kept with the same bound (this included) is the stored block.
    pub written: i64,
}

/// One term of a scope, at one version.
#[derive(Debug, Clone, Default)]
pub(super) struct Term {
    /// Every block's bounds.
    pub bounds: Vec<Bound>,
    /// The blocks read so far, decoded, by span.
    pub blocks: HashMap<i64, Arc<[Posting]>>,
}

impl Term {
    /// The kept blocks whose rows are as `bounds` (read since, at another version) say: those
    /// no write touched since they were read.
    pub fn unwritten(&self, bounds: &[Bound]) -> Vec<(i64, Arc<[Posting]>)> {
        let kept: HashMap<i64, &Bound> = self.bounds.iter().map(|b| (b.span, b)).collect();
        bounds
            .iter()
            .filter(|b| kept.get(&b.span).is_some_and(|k| *k == *b))
            .filter_map(|b| Some((b.span, Arc::clone(self.blocks.get(&b.span)?))))
            .collect()
    }

    fn bytes(&self, key: &[u8]) -> usize {
        let postings: usize = self.blocks.values().map(|b| b.len()).sum();
        OVERHEAD
            + key.len()
            + self.bounds.len() * size_of::<Bound>()
            + self.blocks.len() * BLOCK_OVERHEAD
            + postings * size_of::<Posting>()
    }
}

/// Kept terms, by scope and term. Cheap to share (one per store).
#[derive(Debug)]
pub(super) struct BlockCache {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Each term's blocks, the version they were read at, and the bytes counted for them.
    terms: LruCache<Vec<u8>, (u64, Arc<Term>, usize)>,
    bytes: usize,
}

impl BlockCache {
    /// A cache of at most `capacity` bytes (0: nothing is kept).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Mutex::new(State {
                terms: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    /// The term as kept, and the version it was read at.
    pub fn get(&self, scope: Scope<'_>, term: &str) -> Option<(u64, Arc<Term>)> {
        let mut state = self.lock();
        let (version, term, _) = state.terms.get(&key(scope, term))?;
        Some((*version, Arc::clone(term)))
    }

    /// Keeps `term`, read at `version`, with the blocks other searches kept at that version;
    /// makes room by dropping the least recently searched terms.
    pub fn keep(&self, scope: Scope<'_>, name: &str, version: u64, mut term: Term) {
        if self.capacity == 0 {
            return;
        }
        let key = key(scope, name);
        let mut state = self.lock();
        if let Some((kept, old, bytes)) = state.terms.pop(&key) {
            state.bytes -= bytes;
            if kept == version {
                for (span, block) in &old.blocks {
                    term.blocks
                        .entry(*span)
                        .or_insert_with(|| Arc::clone(block));
                }
            }
        }
        let size = term.bytes(&key);
        if size <= self.capacity / ADMIT_SHARE {
            while state.bytes + size > self.capacity {
                match state.terms.pop_lru() {
                    Some((_, (_, _, bytes))) => state.bytes -= bytes,
                    None => break,
                }
            }
            state.bytes += size;
            state.terms.put(key, (version, Arc::new(term), size));
        }
        metrics::gauge!("memory_block_cache_bytes").set(state.bytes as f64);
    }

    /// The state stays whole under a panic elsewhere: every change above is a few statements
    /// that cannot panic, so a poisoned lock is taken over.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(scope: Scope<'_>, term: &str) -> Vec<u8> {
    Key::new()
        .str(scope.app_name)
        .str(scope.user_id)
        .str(term)
        .as_bytes()
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: Scope<'static> = Scope {
        app_name: "app",
        user_id: "u",
    };

    /// The term as kept at `version`, if it is.
    fn at(cache: &BlockCache, scope: Scope<'_>, name: &str, version: u64) -> Option<Arc<Term>> {
        cache
            .get(scope, name)
            .and_then(|(kept, term)| (kept == version).then_some(term))
    }

    fn term(spans: &[i64], postings: usize) -> Term {
        let block: Arc<[Posting]> = (0..postings as u64)
            .map(|seq| Posting { seq, tf: 1, len: 1 })
            .collect();
        Term {
            bounds: spans
                .iter()
                .map(|&span| Bound {
                    span,
                    postings: postings as i32,
                    max_tf: 1,
                    min_len: 1,
                    written: 1,
                })
                .collect(),
            blocks: spans.iter().map(|&s| (s, Arc::clone(&block))).collect(),
        }
    }

    #[test]
    fn a_term_is_served_only_at_the_version_it_was_read_at() {
        let cache = BlockCache::new(1 << 20);
        assert!(at(&cache, SCOPE, "tea", 7).is_none());
        cache.keep(SCOPE, "tea", 7, term(&[0], 3));
        assert_eq!(at(&cache, SCOPE, "tea", 7).unwrap().bounds.len(), 1);
        // Another replica wrote the scope: its version moved on.
        assert!(at(&cache, SCOPE, "tea", 8).is_none());
        assert!(at(&cache, SCOPE, "coffee", 7).is_none());
        let other = Scope {
            app_name: "app",
            user_id: "v",
        };
        assert!(at(&cache, other, "tea", 7).is_none());
        cache.keep(SCOPE, "tea", 8, term(&[0, 1], 3));
        assert!(at(&cache, SCOPE, "tea", 7).is_none());
        assert_eq!(at(&cache, SCOPE, "tea", 8).unwrap().bounds.len(), 2);
    }

    #[test]
    fn blocks_read_by_searches_of_one_version_add_up() {
        let cache = BlockCache::new(1 << 20);
        let mut first = term(&[0, 1, 2], 4);
        first.blocks.remove(&2);
        cache.keep(SCOPE, "tea", 1, first);
        let mut second = term(&[0, 1, 2], 4);
        second.blocks.retain(|span, _| *span == 2);
        cache.keep(SCOPE, "tea", 1, second);
        assert_eq!(at(&cache, SCOPE, "tea", 1).unwrap().blocks.len(), 3);
        // A later version starts again from what it read.
        let mut later = term(&[0, 1, 2], 4);
        later.blocks.retain(|span, _| *span == 0);
        cache.keep(SCOPE, "tea", 2, later);
        assert_eq!(at(&cache, SCOPE, "tea", 2).unwrap().blocks.len(), 1);
    }

    #[test]
    fn blocks_whose_rows_were_not_written_since_are_still_the_blocks() {
        let kept = term(&[0, 1, 2, 3], 4);
        let mut now = kept.bounds.clone();
        // A write appended to span 2's block, rewrote span 1's with the same bounds, removed
        // span 3's and started span 4's.
        now[2].postings += 1;
        now[2].written = 9;
        now[1].written = 9;
        now.truncate(3);
        now.push(Bound { span: 4, ..now[0] });
        let mut spans: Vec<i64> = kept.unwritten(&now).into_iter().map(|(s, _)| s).collect();
        spans.sort_unstable();
        assert_eq!(spans, [0]);
        // A block never read is not made up.
        let mut unread = kept.clone();
        unread.blocks.remove(&0);
        assert!(unread.unwritten(&kept.bounds).iter().all(|(s, _)| *s != 0));
    }

    #[test]
    fn the_least_recently_searched_term_makes_room() {
        let one = term(&[0], 100).bytes(&key(SCOPE, "t0"));
        let cache = BlockCache::new(ADMIT_SHARE * one);
        let names: Vec<String> = (0..=ADMIT_SHARE).map(|i| format!("t{i}")).collect();
        for name in &names[..ADMIT_SHARE] {
            cache.keep(SCOPE, name, 0, term(&[0], 100));
        }
        assert!(at(&cache, SCOPE, "t0", 0).is_some());
        cache.keep(SCOPE, &names[ADMIT_SHARE], 0, term(&[0], 100));
        assert!(
            at(&cache, SCOPE, "t1", 0).is_none(),
            "t1 was searched least recently"
        );
        assert!(names
            .iter()
            .filter(|n| *n != "t1")
            .all(|n| at(&cache, SCOPE, n, 0).is_some()));
        // Larger than its share of the cache: never kept, and nothing is pushed out for it.
        cache.keep(SCOPE, "big", 0, term(&[0], 200));
        assert!(at(&cache, SCOPE, "big", 0).is_none() && at(&cache, SCOPE, "t0", 0).is_some());
        // Nothing is kept by a cache of no bytes.
        let none = BlockCache::new(0);
        none.keep(SCOPE, "a", 0, term(&[0], 1));
        assert!(at(&none, SCOPE, "a", 0).is_none());
    }
}
