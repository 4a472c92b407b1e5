//! The embedded key-value database: named trees of byte keys, kept in one redb file.
//!
//! A [`Tree`] is a redb table of byte keys and byte values, ordered by key. Reads each see the
//! last committed state; a tree's own writes (`insert`, `remove`, `apply_batch`) each commit on
//! their own, and [`Transactional::transaction`] commits the edits of several trees at once.
//!
//! # Durability
//! Every commit is made without an fsync ([`redb::Durability::None`]): it is visible to readers at
//! once, and durable at the next [`Db::flush`], which the group commit calls for every writer
//! waiting at the time (see [`crate::durability`]). A crash loses what no flush covered, never
//! part of a commit. Flushes save the allocator's state too (redb's quick repair), so opening
//! after a crash does not walk the whole file.
//!
//! # Memory
//! redb keeps the pages it reads and writes in one cache of a set size ([`Db::open`]); unlike
//! sled it keeps nothing per page outside that cache, so what the database holds in memory does
//! not grow with the data.
//!
//! # One writer
//! redb runs one write transaction at a time, and a thread that opened one and asked for another
//! would wait for itself forever. A write asked for while the same thread's transaction is open
//! fails at once instead ([`redb::Error::TransactionInProgress`]): reads are free to run inside a
//! transaction, writes go through its own trees.

mod snapshot;
#[cfg(test)]
mod tests;

use std::{
    cell::{Cell, RefCell},
    ops::{Bound, RangeBounds},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use redb::{
    backends::InMemoryBackend, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition, TableHandle, WriteTransaction,
};

use crate::{
    keys::prefix_end,
    storage::{StorageError, StorageErrorKind},
    versions,
};

pub use redb::Error;
pub use snapshot::Restoring;

/// The name of the database file in a store's data directory.
pub const FILE: &str = "store.redb";

/// The page cache of a restore, which only writes.
const RESTORE_CACHE_BYTES: usize = 64 << 20;

/// The result of a database call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A table of byte keys and byte values.
type Table<'n> = TableDefinition<'n, &'static [u8], &'static [u8]>;

/// The table of the database's own counters (see [`Db::generate_id`]).
const META: Table<'static> = TableDefinition::new("__kv_meta");

/// The key of the highest id [`Db::generate_id`] may hand out before it records a higher one.
const IDS_RESERVED: &[u8] = b"ids_reserved";

/// How many ids one record reserves: a restart skips at most this many.
const ID_STEP: u64 = 1 << 20;

impl From<Error> for StorageError {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => StorageErrorKind::Full,
            Error::Corrupted(_) => StorageErrorKind::Corrupt,
            _ => StorageErrorKind::Internal,
        };
        Self::new(kind, format!("storage error: {e}"))
    }
}

/// The I/O failure behind `e`, if it is one: after one the disk cannot be trusted with writes.
pub fn io_failure(e: &Error) -> Option<&std::io::Error> {
    match e {
        Error::Io(io) => Some(io),
        _ => None,
    }
}

thread_local! {
    /// Whether this thread has a write transaction open (see the module docs).
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// The tree holding the format version, under [`versions::RECORD_KEY`].
const FORMAT_TREE: &str = "format";

/// Checks the format version `db` records against `supported`, and records `supported` if the
/// database is older, or new (see [`versions::check_recorded`]).
pub fn open_format(db: &Db, what: &str, supported: u32) -> std::result::Result<(), StorageError> {
    let tree = db.open_tree(FORMAT_TREE)?;
    let stored = tree.get(versions::RECORD_KEY)?;
    if versions::check_recorded(what, stored.as_deref(), supported)? {
        tree.insert(versions::RECORD_KEY, supported.to_be_bytes())?;
        db.flush()?;
    }
    Ok(())
}

/// An open database. Cheap to clone; the file is closed when the last clone is dropped.
#[derive(Clone)]
pub struct Db(Arc<Inner>);

struct Inner {
    db: redb::Database,
    /// The file, or `None` for a database in memory.
    path: Option<PathBuf>,
    /// The next id [`Db::generate_id`] hands out, and the first it may not without recording
    /// a new reservation.
    ids: Mutex<(u64, u64)>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.0.path).finish()
    }
}

impl Db {
    /// Opens the database file at `path`, creating it if there is none, with a cache of
    /// `cache_bytes` for the pages it reads and writes.
    pub fn open(path: &Path, cache_bytes: usize) -> Result<Self> {
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(path)?;
        Self::new(db, Some(path.to_owned()))
    }

    /// A database held in memory only, for tests.
    pub fn temporary() -> Result<Self> {
        let db = redb::Builder::new().create_with_backend(InMemoryBackend::new())?;
        Self::new(db, None)
    }

    fn new(db: redb::Database, path: Option<PathBuf>) -> Result<Self> {
        let reserved = {
            let read = db.begin_read()?;
            match read.open_table(META) {
                Ok(meta) => match meta.get(IDS_RESERVED)? {
                    Some(value) => u64_of(value.value())?,
                    None => 0,
                },
                Err(redb::TableError::TableDoesNotExist(_)) => 0,
                Err(e) => return Err(e.into()),
            }
        };
        // Ids up to `reserved` may have been handed out before a restart: start after them.
        Ok(Self(Arc::new(Inner {
            db,
            path,
            ids: Mutex::new((reserved, reserved)),
        })))
    }

    /// The tree `name`, created if it does not exist yet.
    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        let exists = {
            let read = self.0.db.begin_read()?;
            let exists = read.list_tables()?.any(|table| table.name() == name);
            exists
        };
        if !exists {
            self.write(|txn| {
                txn.open_table(Table::new(name))?;
                Ok::<_, Error>(())
            })?;
        }
        Ok(Tree {
            db: self.clone(),
            name: name.into(),
        })
    }

    /// The names of every tree.
    pub fn tree_names(&self) -> Result<Vec<String>> {
        let read = self.0.db.begin_read()?;
        let names = read
            .list_tables()?
            .map(|table| table.name().to_owned())
            .filter(|name| name != META.name())
            .collect();
        Ok(names)
    }

    /// Removes the tree `name` and everything in it; returns whether there was one.
    pub fn drop_tree(&self, name: &str) -> Result<bool> {
        self.write(|txn| Ok::<_, Error>(txn.delete_table(Table::new(name))?))
    }

    /// Makes every commit so far durable.
    pub fn flush(&self) -> Result<()> {
        let (mut txn, _writing) = self.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.set_quick_repair(true);
        Ok(txn.commit()?)
    }

    /// A number never handed out before in this database, higher than every earlier one.
    pub fn generate_id(&self) -> Result<u64> {
        let mut ids = self.0.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.0 == ids.1 {
            let reserved = ids.1 + ID_STEP;
            self.write(|txn| {
                txn.open_table(META)?
                    .insert(IDS_RESERVED, &reserved.to_be_bytes()[..])?;
                Ok::<_, Error>(())
            })?;
            // Durable before any id of the range is used, so a crash never hands one out twice.
            self.flush()?;
            ids.1 = reserved;
        }
        ids.0 += 1;
        Ok(ids.0)
    }

    /// Makes every id [`Db::generate_id`] hands out from now on higher than `past` (ids handed
    /// out by the database this one was converted from).
    pub fn advance_ids(&self, past: u64) -> Result<()> {
        let mut ids = self.0.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if past < ids.0 {
            return Ok(());
        }
        self.write(|txn| {
            txn.open_table(META)?
                .insert(IDS_RESERVED, &past.to_be_bytes()[..])?;
            Ok::<_, Error>(())
        })?;
        self.flush()?;
        *ids = (past, past);
        Ok(())
    }

    /// The size of the database file, in bytes (0 for one in memory).
    pub fn size_on_disk(&self) -> Result<u64> {
        match &self.0.path {
            Some(path) => Ok(std::fs::metadata(path)?.len()),
            None => Ok(0),
        }
    }

    /// A consistent view of every tree as of now, for reads that must agree with each other.
    pub fn snapshot(&self) -> Result<Snapshot> {
        Ok(Snapshot(self.0.db.begin_read()?))
    }

    /// Runs `f` in a write transaction and commits it if `f` succeeds (without an fsync: see
    /// the module docs); drops it otherwise.
    fn write<R, E: From<Error>>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        let (txn, _writing) = self.begin_write()?;
        let value = f(&txn)?;
        txn.commit().map_err(|e| E::from(e.into()))?;
        Ok(value)
    }

    /// A write transaction committing without an fsync, and the mark of this thread's
    /// transaction (kept until the transaction is committed or dropped).
    fn begin_write(&self) -> Result<(WriteTransaction, Writing)> {
        if WRITING.get() {
            return Err(Error::TransactionInProgress);
        }
        let writing = Writing::mark();
        let mut txn = self.0.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        Ok((txn, writing))
    }
}

/// This thread's mark of an open write transaction; dropped (after the transaction, which is
/// declared before it), it clears the mark, also when the transaction's closure panics.
struct Writing;

impl Writing {
    fn mark() -> Self {
        WRITING.set(true);
        Self
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.set(false);
    }
}

/// A read-only view of the database as of its creation (see [`Db::snapshot`]).
pub struct Snapshot(ReadTransaction);

impl Snapshot {
    /// `tree` as this snapshot sees it.
    pub fn tree(&self, tree: &Tree) -> Result<View> {
        Ok(View(self.0.open_table(tree.def())?))
    }
}

/// One tree as a [`Snapshot`] sees it.
pub struct View(redb::ReadOnlyTable<&'static [u8], &'static [u8]>);

impl View {
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(key.as_ref())?.map(|v| v.value().to_vec()))
    }

    /// The entries whose keys start with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<Iter> {
        let (start, end) = prefix_bounds(prefix.as_ref());
        self.range_of(start, end)
    }

    /// The entries in `range`, in key order.
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Result<Iter> {
        self.range_of(owned(range.start_bound()), owned(range.end_bound()))
    }

    fn range_of(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Result<Iter> {
        let bounds = (
            start.as_ref().map(Vec::as_slice),
            end.as_ref().map(Vec::as_slice),
        );
        Ok(Iter::over(self.0.range::<&[u8]>(bounds)?))
    }
}

/// A tree of the database. Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    db: Db,
    name: Arc<str>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Tree").field(&self.name).finish()
    }
}

impl Tree {
    fn def(&self) -> Table<'_> {
        Table::new(&self.name)
    }

    /// Runs `f` on the tree as the last commit left it.
    fn read<R>(
        &self,
        f: impl FnOnce(&redb::ReadOnlyTable<&'static [u8], &'static [u8]>) -> Result<R>,
    ) -> Result<R> {
        let txn = self.db.0.db.begin_read()?;
        f(&txn.open_table(self.def())?)
    }

    /// Runs `f` on the tree in a write transaction of its own.
    fn edit<R>(
        &self,
        f: impl FnOnce(&mut redb::Table<'_, &'static [u8], &'static [u8]>) -> Result<R>,
    ) -> Result<R> {
        self.db.write(|txn| f(&mut txn.open_table(self.def())?))
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.read(|table| Ok(table.get(key.as_ref())?.map(|v| v.value().to_vec())))
    }

    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.read(|table| Ok(table.get(key.as_ref())?.is_some()))
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.edit(|table| {
            let old = table.insert(key.as_ref(), value.as_ref())?;
            Ok(old.map(|v| v.value().to_vec()))
        })
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.edit(|table| Ok(table.remove(key.as_ref())?.map(|v| v.value().to_vec())))
    }

    /// Applies every edit of `batch` in one commit.
    pub fn apply_batch(&self, batch: Batch) -> Result<()> {
        self.edit(|table| batch.apply_to(table))
    }

    /// Removes every entry.
    pub fn clear(&self) -> Result<()> {
        self.edit(|table| {
            table.retain(|_, _| false)?;
            Ok(())
        })
    }

    /// The number of entries.
    pub fn len(&self) -> Result<u64> {
        self.read(|table| Ok(table.len()?))
    }

    pub fn is_empty(&self) -> Result<bool> {
        self.read(|table| Ok(table.is_empty()?))
    }

    /// The entry of the lowest key.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.read(|table| {
            Ok(table
                .first()?
                .map(|(k, v)| (k.value().to_vec(), v.value().to_vec())))
        })
    }

    /// The entry of the highest key.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.read(|table| {
            Ok(table
                .last()?
                .map(|(k, v)| (k.value().to_vec(), v.value().to_vec())))
        })
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8]>(..)
    }

    /// The entries whose keys start with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let (start, end) = prefix_bounds(prefix.as_ref());
        self.range_of(start, end)
    }

    /// The entries in `range`, in key order.
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter {
        self.range_of(owned(range.start_bound()), owned(range.end_bound()))
    }

    /// Iterates from the state of the last commit; a failure to start is the iterator's
    /// first item, as sled's iterators report theirs.
    fn range_of(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Iter {
        let started = self
            .db
            .snapshot()
            .and_then(|snapshot| snapshot.tree(self)?.range_of(start, end));
        match started {
            Ok(iter) => iter,
            Err(e) => Iter::failed(e),
        }
    }
}

/// The bounds of the keys starting with `prefix`.
fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    // A prefix of only 0xFF bytes (or none) reaches the end of the keyspace.
    let end = if prefix.iter().all(|&b| b == 0xFF) {
        Bound::Unbounded
    } else {
        Bound::Excluded(prefix_end(prefix))
    };
    (Bound::Included(prefix.to_vec()), end)
}

fn owned<K: AsRef<[u8]>>(bound: Bound<&K>) -> Bound<Vec<u8>> {
    bound.map(|k| k.as_ref().to_vec())
}

fn u64_of(bytes: &[u8]) -> Result<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| Error::Corrupted("the database's id reservation".into()))
}

/// The entries of a range of a tree, as of when the iteration started: later commits do not
/// change what it yields.
pub struct Iter(Option<IterState>);

/// A range of a tree as redb iterates it.
type Range = redb::Range<'static, &'static [u8], &'static [u8]>;

enum IterState {
    Range(Box<Range>),
    Failed(Error),
}

impl Iter {
    fn over(range: Range) -> Self {
        Self(Some(IterState::Range(Box::new(range))))
    }

    fn failed(e: Error) -> Self {
        Self(Some(IterState::Failed(e)))
    }

    /// The keys only.
    pub fn keys(self) -> impl DoubleEndedIterator<Item = Result<Vec<u8>>> {
        self.map(|entry| entry.map(|(key, _)| key))
    }

    /// The values only.
    pub fn values(self) -> impl DoubleEndedIterator<Item = Result<Vec<u8>>> {
        self.map(|entry| entry.map(|(_, value)| value))
    }

    /// The next entry from the end `step` takes; after a failure, nothing more.
    fn next_with(
        &mut self,
        step: impl FnOnce(&mut Range) -> Option<<Range as Iterator>::Item>,
    ) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        match self.0.as_mut()? {
            IterState::Range(range) => match step(range)? {
                Ok((k, v)) => Some(Ok((k.value().to_vec(), v.value().to_vec()))),
                Err(e) => {
                    self.0 = None;
                    Some(Err(e.into()))
                }
            },
            IterState::Failed(_) => match self.0.take() {
                Some(IterState::Failed(e)) => Some(Err(e)),
                _ => None,
            },
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(Iterator::next)
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_with(DoubleEndedIterator::next_back)
    }
}

/// Edits of one tree, applied together by [`Tree::apply_batch`] or [`TxTree::apply_batch`].
#[derive(Debug, Clone, Default)]
pub struct Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>);

impl Batch {
    pub fn insert(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.0.push((key.into(), Some(value.into())));
    }

    pub fn remove(&mut self, key: impl Into<Vec<u8>>) {
        self.0.push((key.into(), None));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Applies the edits in the order they were made: a later edit of a key wins.
    fn apply_to(&self, table: &mut redb::Table<'_, &'static [u8], &'static [u8]>) -> Result<()> {
        for (key, value) in &self.0 {
            match value {
                Some(value) => {
                    table.insert(key.as_slice(), value.as_slice())?;
                }
                None => {
                    table.remove(key.as_slice())?;
                }
            }
        }
        Ok(())
    }
}

/// Why a transaction did not commit: its closure gave up with `E`, or the database failed.
#[derive(Debug)]
pub enum TransactionError<E> {
    Abort(E),
    Storage(Error),
}

impl<E> From<Error> for TransactionError<E> {
    fn from(e: Error) -> Self {
        Self::Storage(e)
    }
}

impl<E> From<redb::StorageError> for TransactionError<E> {
    fn from(e: redb::StorageError) -> Self {
        Self::Storage(e.into())
    }
}

/// A tree inside a transaction over several (see [`Transactional`]).
pub struct TxTree<'t>(RefCell<redb::Table<'t, &'static [u8], &'static [u8]>>);

impl<'t> TxTree<'t> {
    fn open(txn: &'t WriteTransaction, tree: &Tree) -> Result<Self> {
        Ok(Self(RefCell::new(txn.open_table(tree.def())?)))
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let table = self.0.borrow();
        let value = table.get(key.as_ref())?.map(|v| v.value().to_vec());
        Ok(value)
    }

    pub fn insert(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        let mut table = self.0.borrow_mut();
        let old = table.insert(key.as_ref(), value.as_ref())?;
        Ok(old.map(|v| v.value().to_vec()))
    }

    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let mut table = self.0.borrow_mut();
        let old = table.remove(key.as_ref())?;
        Ok(old.map(|v| v.value().to_vec()))
    }

    pub fn apply_batch(&self, batch: &Batch) -> Result<()> {
        batch.apply_to(&mut self.0.borrow_mut())
    }
}

/// Trees that commit together: `(&a, &b).transaction(|(a, b)| ...)` runs the closure on both
/// in one write transaction, committed if it returns `Ok`. The trees must be of one database
/// and distinct.
pub trait Transactional {
    /// The trees as the closure sees them.
    type View<'t>;

    fn transaction<R, E>(
        &self,
        f: impl FnOnce(&Self::View<'_>) -> std::result::Result<R, TransactionError<E>>,
    ) -> std::result::Result<R, TransactionError<E>>;
}

impl Transactional for Tree {
    type View<'t> = TxTree<'t>;

    fn transaction<R, E>(
        &self,
        f: impl FnOnce(&TxTree<'_>) -> std::result::Result<R, TransactionError<E>>,
    ) -> std::result::Result<R, TransactionError<E>> {
        self.db.write(|txn| f(&TxTree::open(txn, self)?))
    }
}

macro_rules! transactional_tuple {
    ($first:ident $(, $rest:ident)*) => {
        impl Transactional for (&Tree, $(transactional_tuple!(@tree $rest),)*) {
            type View<'t> = (TxTree<'t>, $(transactional_tuple!(@tx $rest),)*);

            #[allow(non_snake_case)]
            fn transaction<R, E>(
                &self,
                f: impl FnOnce(&Self::View<'_>) -> std::result::Result<R, TransactionError<E>>,
            ) -> std::result::Result<R, TransactionError<E>> {
                let ($first, $($rest,)*) = *self;
                $first.db.write(|txn| {
                    let view = (TxTree::open(txn, $first)?, $(TxTree::open(txn, $rest)?,)*);
                    f(&view)
                })
            }
        }
    };
    (@tree $t:ident) => { &Tree };
    (@tx $t:ident) => { TxTree<'t> };
}

transactional_tuple!(a, b);
transactional_tuple!(a, b, c);
transactional_tuple!(a, b, c, d);
transactional_tuple!(a, b, c, d, e);
transactional_tuple!(a, b, c, d, e, f);
transactional_tuple!(a, b, c, d, e, f, g);
transactional_tuple!(a, b, c, d, e, f, g, h);
transactional_tuple!(a, b, c, d, e, f, g, h, i);
transactional_tuple!(a, b, c, d, e, f, g, h, i, j);
transactional_tuple!(a, b, c, d, e, f, g, h, i, j, k);
transactional_tuple!(a, b, c, d, e, f, g, h, i, j, k, l);
transactional_tuple!(a, b, c, d, e, f, g, h, i, j, k, l, m);
transactional_tuple!(a, b, c, d, e, f, g, h, i, j, k, l, m, n);
