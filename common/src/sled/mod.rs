//! What only sled stores use: opening a database with its page cache ([`cache`]), group commit
//! ([`durability`]), composite keys ([`keys`]), online backups ([`snapshot`]); and, here, the
//! format version a database records, its errors as [`StorageError`]s, and waiting for its lock
//! to be released at shutdown.

pub mod cache;
pub mod durability;
pub mod keys;
pub mod snapshot;

use std::{path::PathBuf, time::Duration};

use crate::{
    storage::{StorageError, StorageErrorKind},
    versions, BoxError,
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

/// The sled tree holding the format version, under [`KEY`] as a big-endian u32.
const TREE: &str = "format";
const KEY: &[u8] = b"version";

/// Checks the format version of the sled database `db` against `supported` ([`versions::check`]), then
/// records `supported` if the database is older, or new. The record comes before any conversion
/// the caller then runs: from then on older binaries refuse the database even if the conversion
/// is cut short, so conversions must carry on at the next open. A database without a record
/// predates the records: version 1.
pub fn open(db: &sled::Db, what: &str, supported: u32) -> Result<(), StorageError> {
    let tree = db.open_tree(TREE)?;
    let stored = match tree.get(KEY)? {
        None => None,
        Some(bytes) => Some(u32::from_be_bytes(bytes.as_ref().try_into().map_err(
            |_| StorageError::corrupt(format!("the {what}'s format version")),
        )?)),
    };
    versions::check(what, stored.unwrap_or(1), supported)
        .map_err(|e| StorageError::new(StorageErrorKind::Internal, e))?;
    if stored != Some(supported) {
        tree.insert(KEY, &supported.to_be_bytes())?;
        db.flush()?;
    }
    Ok(())
}

/// How long shutdown waits for a sled database's lock once the server and its store have
/// stopped. Only sled's own I/O threads may still hold the database then, for moments; a wait
/// this long means a handle was not dropped.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves once no handle of this process holds the sled database locking `lock_file`.
///
/// Dropping the last handle does not release the lock at once: sled's I/O threads finish with
/// their own references right after waking the flush that waited for them. So this waits for
/// the lock itself (a blocking lock taken and given back at once) rather than guessing when
/// they are done.
pub async fn released(lock_file: PathBuf) -> Result<(), BoxError> {
    let shown = lock_file.display().to_string();
    let waiting = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use fs2::FileExt;
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock_file)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        // Named in full: std's own File::unlock is newer than this crate's minimum Rust.
        FileExt::lock_exclusive(&file)?;
        FileExt::unlock(&file)
    });
    match tokio::time::timeout(RELEASE_TIMEOUT, waiting).await {
        Ok(joined) => Ok(joined??),
        Err(_) => Err(format!(
            "{shown} is still locked {} s after the store closed: a handle on the database \
             outlived the server",
            RELEASE_TIMEOUT.as_secs()
        )
        .into()),
    }
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
