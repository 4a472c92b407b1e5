//! Waiting at shutdown for an embedded database's file lock to be released, so that its
//! directory can be opened again at once (by a restart in the same process, say).

use std::{path::PathBuf, time::Duration};

use crate::BoxError;

/// How long shutdown waits for a database's lock once the server and its store have stopped.
/// Only sled's own I/O threads may still hold the database then, for moments; a wait this long
/// means a handle was not dropped.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves once no handle of this process holds the database locking `lock_file`.
///
/// Dropping the last handle of a sled database does not release the lock at once: sled's I/O
/// threads finish with their own references right after waking the flush that waited for them.
/// So this waits for the lock itself (a blocking lock taken and given back at once) rather than
/// guessing when they are done. redb closes its file with its last handle, and takes the same
/// kind of lock (`flock`), so the wait also tells when a handle outlived the server.
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
