//! The vectors of recently searched scopes, kept in memory as one [`Matrix`] per scope so that
//! a semantic search scores them without reading the store (at 100k vectors, reading them is
//! most of a search). Bounded by `--vector-cache-bytes`; the least recently searched scope goes
//! first. Each store keeps its copy current its own way:
//!
//! - The sled store's process is the only writer of its scopes. A write to a scope hands its
//!   vector changes to the scope's matrix once committed ([`VectorCache::apply`]), while it
//!   still holds the scope's scan lock: no search reads the scope meanwhile, and matrices take
//!   writes in the order they committed. Without this, the first search after each write would
//!   read every vector of the user again (about 0.25 s at 100k entries). A write whose changes
//!   are not at hand (the background embedding of old entries) drops the matrix instead
//!   ([`VectorCache::written`]), and the next search reads the scope again. A search that read
//!   a scope while such a write committed must not keep what it read (it may predate the
//!   write): each write counts itself in a stripe of counters chosen by its scope, and a matrix
//!   is kept only if its scope's stripe did not move while it was read, or, for a matrix a
//!   write took out to change, while it was out.
//! - Other replicas write the PostgreSQL store's scopes too. Every search reads the scope's
//!   version first (what every write to the scope changes, see `pg::vectors::version`); a matrix
//!   is served only to a search that read the version it was kept under. A matrix read after
//!   the version may hold later writes than its version says: it is then kept under a version
//!   no later search reads, and read again (never served stale). A write of this replica to a
//!   scope whose matrix it keeps reads the version it locks and the one it leaves, and a
//!   matrix kept at the first takes the write's changes and is kept at the second
//!   ([`VectorCache::apply_at`]); so only other replicas' writes make a search read again.
use std::{
    hash::BuildHasher,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use lru::LruCache;

use super::vectors::{Matrix, VectorEdits};

/// A store's vector cache until it is told its size: the vectors of about 170k entries of a
/// 384-dimension model.
pub const DEFAULT_BYTES: usize = 256 << 20;

/// Write counters (more stripes: fewer searches that cannot keep their reading because of a
/// write to another scope).
const STRIPES: usize = 64;

/// Scopes' vectors, by scope key. Cheap to share (one per store).
#[derive(Debug)]
pub struct VectorCache {
    capacity: usize,
    state: Mutex<State>,
    hasher: std::collections::hash_map::RandomState,
}

#[derive(Debug)]
struct State {
    /// Each scope's matrix and the version it was kept under.
    matrices: LruCache<Vec<u8>, (u64, Arc<Matrix>)>,
    /// Bytes of `matrices`.
    bytes: usize,
    writes: [u64; STRIPES],
}

impl State {
    /// Keeps `scope`'s `matrix` (which fits in `capacity`), making room by dropping the least
    /// recently searched scopes.
    fn put(&mut self, capacity: usize, scope: &[u8], version: u64, matrix: Arc<Matrix>) {
        let size = matrix.bytes();
        while self.bytes + size > capacity {
            match self.matrices.pop_lru() {
                Some((_, (_, old))) => self.bytes -= old.bytes(),
                None => break,
            }
        }
        self.bytes += size;
        self.matrices.put(scope.to_vec(), (version, matrix));
    }
}

/// A scope's matrix taken out to be changed, with what its stripe had counted then.
struct Taken {
    stripe: usize,
    writes: u64,
    version: u64,
    matrix: Arc<Matrix>,
}

/// What a search that missed the cache saw before reading its scope.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    stripe: usize,
    writes: u64,
}

impl VectorCache {
    /// A cache of at most `capacity` bytes (0: none is kept).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Mutex::new(State {
                matrices: LruCache::unbounded(),
                bytes: 0,
                writes: [0; STRIPES],
            }),
            hasher: Default::default(),
        }
    }

    /// The most one scope's matrix may take.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes of the matrices kept.
    pub fn held(&self) -> usize {
        self.lock().bytes
    }

    /// The scope's matrix at `version` (the store's version of the scope's vectors; 0 where
    /// writes call [`VectorCache::written`] instead), or what to hand [`VectorCache::keep`]
    /// after reading the scope.
    pub fn get(&self, scope: &[u8], version: u64) -> Result<Arc<Matrix>, Reading> {
        let stripe = self.stripe(scope);
        let mut state = self.lock();
        match state.matrices.get(scope) {
            Some((kept, matrix)) if *kept == version => Ok(Arc::clone(matrix)),
            _ => Err(Reading {
                stripe,
                writes: state.writes[stripe],
            }),
        }
    }

    /// Keeps `matrix`, read from the store after `reading` and the scope's `version`, unless a
    /// write may have changed the scope since; makes room by dropping the least recently
    /// searched scopes.
    pub fn keep(&self, scope: &[u8], reading: Reading, version: u64, matrix: Matrix) {
        let size = matrix.bytes();
        if size > self.capacity {
            return;
        }
        let mut state = self.lock();
        if state.writes[reading.stripe] != reading.writes {
            return;
        }
        if let Some((_, old)) = state.matrices.pop(scope) {
            state.bytes -= old.bytes();
        }
        state.put(self.capacity, scope, version, Arc::new(matrix));
    }

    /// After a write to the scope committed, with `edits` its vector changes: the scope's
    /// matrix takes them, or is dropped where it cannot. The caller must still hold off the
    /// scope's other writes and its searches (the sled store's scan lock), so that a matrix
    /// takes each write once, in the order they committed.
    pub fn apply(&self, scope: &[u8], edits: &VectorEdits) {
        let Some(mut taken) = self.take(scope) else {
            return;
        };
        // Changed outside the lock (a removal, or room for more rows, moves the whole matrix):
        // the caller keeps this scope's searches out meanwhile. No search holds the matrix
        // then; were one to, it is dropped rather than copied.
        let changed =
            !edits.clear && Arc::get_mut(&mut taken.matrix).is_some_and(|m| m.apply(&edits.ops));
        if changed {
            self.put_back(scope, taken);
        }
    }

    /// Whether a matrix of the scope is kept, at whatever version.
    pub fn holds(&self, scope: &[u8]) -> bool {
        self.lock().matrices.contains(scope)
    }

    /// After a write to the scope committed that changed its version from `from` to `to`, with
    /// `edits` its vector changes (the PostgreSQL store, whose versions say what a matrix
    /// holds): a matrix kept at `from` holds the state the write changed, so it takes `edits`
    /// and is kept at `to`. Any other stays as it is, for the version check to judge. Writes
    /// to a scope commit one at a time, but reach here in any order: one that finds the
    /// matrix out (another write changing it) leaves it to that write, whose putting back
    /// then fails (the stripe moved), so a matrix never takes writes out of order.
    pub fn apply_at(&self, scope: &[u8], from: u64, to: u64, edits: &VectorEdits) {
        let Some(mut taken) = self.take(scope) else {
            return;
        };
        if taken.version != from {
            self.put_back(scope, taken);
            return;
        }
        // As in `apply`: a matrix a search holds is dropped rather than copied.
        if !edits.clear && Arc::get_mut(&mut taken.matrix).is_some_and(|m| m.apply(&edits.ops)) {
            taken.version = to;
            self.put_back(scope, taken);
        }
    }

    /// The scope's matrix, out of the cache while a write changes it.
    fn take(&self, scope: &[u8]) -> Option<Taken> {
        let stripe = self.stripe(scope);
        let mut state = self.lock();
        state.writes[stripe] += 1;
        let (version, matrix) = state.matrices.pop(scope)?;
        state.bytes -= matrix.bytes();
        Some(Taken {
            stripe,
            writes: state.writes[stripe],
            version,
            matrix,
        })
    }

    /// Keeps a matrix [`VectorCache::take`] gave, changed, unless a write dropped the scope
    /// meanwhile: one that drops it without the scan lock (the background embedding) may have
    /// committed before the write that took it, and the matrix would lack its vectors.
    fn put_back(&self, scope: &[u8], taken: Taken) {
        if taken.matrix.bytes() > self.capacity {
            return;
        }
        let mut state = self.lock();
        if state.writes[taken.stripe] == taken.writes {
            state.put(self.capacity, scope, taken.version, taken.matrix);
        }
    }

    /// After a write to the scope committed whose vector changes are not at hand: its matrix
    /// is out of date.
    pub fn written(&self, scope: &[u8]) {
        let stripe = self.stripe(scope);
        let mut state = self.lock();
        state.writes[stripe] += 1;
        if let Some((_, old)) = state.matrices.pop(scope) {
            state.bytes -= old.bytes();
        }
    }

    /// After the vectors of every scope changed (another model).
    pub fn clear(&self) {
        let mut state = self.lock();
        state.writes.iter_mut().for_each(|w| *w += 1);
        state.matrices.clear();
        state.bytes = 0;
    }

    fn stripe(&self, scope: &[u8]) -> usize {
        (self.hasher.hash_one(scope) % STRIPES as u64) as usize
    }

    /// The state stays whole under a panic elsewhere: every change above is a few statements
    /// that cannot panic, so a poisoned lock is taken over.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::vectors::{encode, rank, VectorOp};

    fn matrix(n: u64) -> Matrix {
        let stored = (0..n).map(|seq| Ok((seq, encode(&[1.0, 0.0]))));
        rank(stored, &[1.0, 0.0], usize::MAX).unwrap().1.unwrap()
    }

    #[test]
    fn a_write_drops_the_scope_and_what_was_read_before_it() {
        let cache = VectorCache::new(1 << 20);
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        assert_eq!(cache.get(b"a", 0).unwrap().bytes(), matrix(3).bytes());
        cache.written(b"a");
        let reading = cache.get(b"a", 0).unwrap_err();
        // A write commits while the scope is read: what was read is not kept.
        cache.written(b"a");
        cache.keep(b"a", reading, 0, matrix(3));
        assert!(cache.get(b"a", 0).is_err());
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        cache.clear();
        assert!(cache.get(b"a", 0).is_err());
    }

    #[test]
    fn a_write_changes_the_kept_matrix_in_place() {
        let cache = VectorCache::new(1 << 20);
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        let put = |seq| (seq, VectorOp::Put(Arc::from(vec![0.0, 1.0])));
        let edits = VectorEdits {
            clear: false,
            ops: BTreeMap::from([put(3), put(4), (0, VectorOp::Delete)]),
        };
        cache.apply(b"a", &edits);
        let kept = cache.get(b"a", 0).unwrap();
        assert_eq!(kept.bytes(), matrix(4).bytes());
        let best = kept.rank(&[0.0, 1.0]).unwrap().next().unwrap();
        assert_eq!((best.seq, best.score), (3, 1.0));
        assert_eq!(cache.lock().bytes, kept.bytes());
        // A matrix a search still holds is dropped, not copied; so is a cleared scope's.
        cache.apply(b"a", &edits);
        assert!(cache.get(b"a", 0).is_err());
        assert_eq!(cache.lock().bytes, 0);
        drop(kept);
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        let clear = VectorEdits {
            clear: true,
            ops: BTreeMap::new(),
        };
        cache.apply(b"a", &clear);
        assert!(cache.get(b"a", 0).is_err());
        // Growing past the cache drops it.
        let small = VectorCache::new(matrix(3).bytes());
        let reading = small.get(b"a", 0).unwrap_err();
        small.keep(b"a", reading, 0, matrix(3));
        small.apply(b"a", &edits);
        assert!(
            small.get(b"a", 0).is_err(),
            "4 rows are more than the cache holds"
        );
        assert_eq!(small.lock().bytes, 0);
    }

    #[test]
    fn a_scope_dropped_while_a_write_changes_its_matrix_stays_dropped() {
        let cache = VectorCache::new(1 << 20);
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        let taken = cache.take(b"a").unwrap();
        cache.written(b"a");
        cache.put_back(b"a", taken);
        assert!(cache.get(b"a", 0).is_err());
        assert_eq!(cache.lock().bytes, 0);
        // Undisturbed, the matrix goes back.
        let reading = cache.get(b"a", 0).unwrap_err();
        cache.keep(b"a", reading, 0, matrix(3));
        let taken = cache.take(b"a").unwrap();
        cache.put_back(b"a", taken);
        assert_eq!(cache.lock().bytes, matrix(3).bytes());
    }

    #[test]
    fn a_matrix_is_served_only_at_the_version_it_was_kept_under() {
        let cache = VectorCache::new(1 << 20);
        let reading = cache.get(b"a", 7).unwrap_err();
        cache.keep(b"a", reading, 7, matrix(3));
        assert!(cache.get(b"a", 7).is_ok());
        // Another replica wrote: the scope's version moved on.
        let reading = cache.get(b"a", 8).unwrap_err();
        assert!(cache.get(b"a", 7).is_ok(), "a miss drops nothing");
        cache.keep(b"a", reading, 8, matrix(4));
        assert!(cache.get(b"a", 7).is_err());
        assert_eq!(cache.get(b"a", 8).unwrap().bytes(), matrix(4).bytes());
    }

    #[test]
    fn the_least_recently_searched_scope_makes_room() {
        let one = matrix(10).bytes();
        let cache = VectorCache::new(2 * one);
        for scope in [&b"a"[..], b"b"] {
            let reading = cache.get(scope, 0).unwrap_err();
            cache.keep(scope, reading, 0, matrix(10));
        }
        assert!(cache.get(b"a", 0).is_ok());
        let reading = cache.get(b"c", 0).unwrap_err();
        cache.keep(b"c", reading, 0, matrix(10));
        assert!(cache.get(b"b", 0).is_err(), "b was searched least recently");
        assert!(cache.get(b"a", 0).is_ok() && cache.get(b"c", 0).is_ok());
        // Larger than the whole cache: never kept.
        let reading = cache.get(b"d", 0).unwrap_err();
        cache.keep(b"d", reading, 0, matrix(30));
        assert!(cache.get(b"d", 0).is_err() && cache.get(b"a", 0).is_ok());
    }
}
