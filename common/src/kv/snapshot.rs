//! Snapshots of a redb database: written from one read transaction, restored in large commits.

use std::path::Path;

use super::{Batch, Db, Error, FILE};
use crate::snapshot::{Dump, Each, Load, SnapshotError};

/// How many entries a restore commits at once.
const RESTORE_BATCH: usize = 10_000;

impl From<Error> for SnapshotError {
    fn from(e: Error) -> Self {
        Self::Storage(e.into())
    }
}

impl Dump for Db {
    /// Reads every tree in one read transaction: the snapshot is consistent across trees even
    /// with writers running.
    fn dump(&self, each: &mut Each<'_>) -> Result<(), SnapshotError> {
        let snapshot = self.snapshot()?;
        for name in self.tree_names()? {
            let tree = self.open_tree(&name)?;
            for entry in snapshot.tree(&tree)?.range::<&[u8]>(..)? {
                let (key, value) = entry?;
                each(name.as_bytes(), &key, &value)?;
            }
        }
        Ok(())
    }
}

/// A redb database being restored: entries wait in batches of one tree until the tree changes
/// or the batch is full.
pub struct Restoring {
    db: Db,
    tree: Vec<u8>,
    batch: Batch,
}

impl Restoring {
    fn commit(&mut self) -> Result<(), SnapshotError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let name = std::str::from_utf8(&self.tree)
            .map_err(|_| SnapshotError::Format("a tree name is not UTF-8".into()))?;
        self.db
            .open_tree(name)?
            .apply_batch(std::mem::take(&mut self.batch))?;
        Ok(())
    }
}

impl Load for Restoring {
    fn create(dir: &Path) -> Result<Self, SnapshotError> {
        Ok(Self {
            db: Db::open(&dir.join(FILE), super::RESTORE_CACHE_BYTES)?,
            tree: Vec::new(),
            batch: Batch::default(),
        })
    }

    fn insert(&mut self, tree: &[u8], key: Vec<u8>, value: Vec<u8>) -> Result<(), SnapshotError> {
        if tree != self.tree || self.batch.len() >= RESTORE_BATCH {
            self.commit()?;
            tree.clone_into(&mut self.tree);
        }
        self.batch.insert(key, value);
        Ok(())
    }

    fn finish(mut self) -> Result<(), SnapshotError> {
        self.commit()?;
        self.db.flush()?;
        Ok(())
    }
}
