//! What only sled stores use (session-svc's): opening a database with its page cache
//! ([`cache`]); and, here, the format version a database records, its errors as
//! [`StorageError`]s, and snapshots of it (see [`crate::snapshot`]).

pub mod cache;

use std::path::Path;

use crate::{
    snapshot::{Dump, Each, Load, SnapshotError},
    storage::{StorageError, StorageErrorKind},
    versions,
};

impl From<sled::Error> for StorageError {
    fn from(e: sled::Error) -> Self {
        let kind = match &e {
            sled::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
                StorageErrorKind::Full
            }
            sled::Error::Corruption { .. } => StorageErrorKind::Corrupt,
            _ => StorageErrorKind::Internal,
        };
        Self::new(kind, format!("storage error: {e}"))
    }
}

impl From<sled::Error> for SnapshotError {
    fn from(e: sled::Error) -> Self {
        Self::Storage(e.into())
    }
}

impl Dump for sled::Db {
    fn dump(&self, each: &mut Each<'_>) -> Result<(), SnapshotError> {
        for name in self.tree_names() {
            for entry in self.open_tree(&name)?.iter() {
                let (key, value) = entry?;
                each(&name, &key, &value)?;
            }
        }
        Ok(())
    }
}

/// A sled database being restored.
pub struct Restoring(sled::Db);

impl Load for Restoring {
    fn create(dir: &Path) -> Result<Self, SnapshotError> {
        Ok(Self(sled::open(dir)?))
    }

    fn insert(&mut self, tree: &[u8], key: Vec<u8>, value: Vec<u8>) -> Result<(), SnapshotError> {
        self.0.open_tree(tree)?.insert(key, value)?;
        Ok(())
    }

    fn finish(self) -> Result<(), SnapshotError> {
        self.0.flush()?;
        Ok(())
    }
}

/// The sled tree holding the format version, under [`versions::RECORD_KEY`].
const TREE: &str = "format";

/// Checks the format version the sled database `db` records against `supported`, and records
/// `supported` if the database is older, or new (see [`versions::check_recorded`]).
pub fn open(db: &sled::Db, what: &str, supported: u32) -> Result<(), StorageError> {
    let tree = db.open_tree(TREE)?;
    let stored = tree.get(versions::RECORD_KEY)?;
    if versions::check_recorded(what, stored.as_deref(), supported)? {
        tree.insert(versions::RECORD_KEY, &supported.to_be_bytes())?;
        db.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    #[test]
    fn a_full_disk_is_resource_exhausted_and_other_io_is_internal() {
        let full = sled::Error::Io(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert_eq!(
            StorageError::from(full).kind().code(),
            Code::ResourceExhausted
        );
        let other = sled::Error::Io(std::io::Error::other("boom"));
        assert_eq!(StorageError::from(other).kind().code(), Code::Internal);
    }

    #[test]
    fn sled_records_the_version_and_refuses_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        open(&db, "store", 1).unwrap();
        open(&db, "store", 2).unwrap();
        let e = open(&db, "store", 1).unwrap_err();
        assert!(e.to_string().contains("at version 2"), "{e}");
        assert_eq!(e.kind(), StorageErrorKind::Internal);
    }
}
