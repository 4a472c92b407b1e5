//! Group commit: writes that commit at about the same time share one flush to disk.
//!
//! A writer commits its transaction, then awaits [`GroupCommit::wait_durable`]. One
//! background task takes every writer waiting at that moment, flushes the database once (on the
//! blocking pool), and releases them all; writers arriving during a flush are served by the next one. So
//! the cost of an fsync is shared by all concurrent writers instead of paid by each.
//!
//! A writer that is already on a blocking thread with many writes at once (the session store's
//! append batches) can instead flush there and then with [`GroupCommit::flush_blocking`]: the
//! batch is its own group, and no hand-off to the flusher task is paid.
//!
//! The flusher belongs to the store: the store's `close` calls [`GroupCommit::stop`], which
//! releases the writers still queued (after one last flush) and waits for the task to end, so a
//! server that has shut down holds no task over the database.
//!
//! It also remembers a disk failure (a failed flush, or a write the store reports failing with an
//! I/O error such as a full disk). After one, the database cannot be trusted to finish writes (sled
//! may wait forever for space), so the store refuses new writes at once with the reason, health turns
//! NOT_SERVING, and an orchestrator restarts the process; restarting recovers what was
//! acknowledged.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    sync::{mpsc, oneshot, watch, Mutex},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::storage::{StorageError, StorageErrorKind};

/// When a write counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SyncMode {
    /// Reply only after the write is flushed to disk (the default).
    #[default]
    Sync,
    /// Reply once the write is committed; the store flushes in the background about every
    /// [`PERIODIC_FLUSH`], so a crash (of the process or the machine) may lose the last moments
    /// of acknowledged writes.
    Periodic,
}

/// How often a store in [`SyncMode::Periodic`] is flushed (sled's own interval, which the
/// databases that do not flush on their own are given too).
pub const PERIODIC_FLUSH: Duration = Duration::from_millis(500);

/// A database whose committed writes a flush makes durable.
pub trait Flush: Send + Sync + 'static {
    /// Makes every write committed so far durable; blocks until it is.
    fn flush(&self) -> Result<(), StorageError>;

    /// Whether the database flushes every [`PERIODIC_FLUSH`] by itself (sled does), so that
    /// [`SyncMode::Periodic`] needs no flushes of the group commit's.
    fn flushes_on_its_own(&self) -> bool {
        false
    }
}

/// The flush failed (the write may not be durable), or the store failed earlier and takes no
/// more writes.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct FlushError(Arc<str>);

/// A failed flush: the store takes no more writes until a restart.
impl From<FlushError> for StorageError {
    fn from(e: FlushError) -> Self {
        Self::new(StorageErrorKind::Unavailable, e)
    }
}

type Waiter = oneshot::Sender<Result<(), FlushError>>;

impl Flush for crate::kv::Db {
    fn flush(&self) -> Result<(), StorageError> {
        Ok(crate::kv::Db::flush(self)?)
    }
}

impl Flush for sled::Db {
    fn flush(&self) -> Result<(), StorageError> {
        sled::Tree::flush(self)?;
        Ok(())
    }

    /// sled writes and fsyncs its log every 500 ms unless told otherwise.
    fn flushes_on_its_own(&self) -> bool {
        true
    }
}

/// Handle to the flusher task of one database. Cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    db: Arc<dyn Flush>,
    mode: SyncMode,
    /// Whether a write committed in [`SyncMode::Periodic`] waits for the next periodic flush.
    dirty: Arc<AtomicBool>,
    waiters: mpsc::UnboundedSender<Waiter>,
    /// `Some(reason)` once the disk has failed.
    failure: Arc<watch::Sender<Option<Arc<str>>>>,
    flusher: Arc<Flusher>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The flusher task and what stops it.
#[derive(Debug)]
struct Flusher {
    stop: CancellationToken,
    /// `None` once [`GroupCommit::stop`] has awaited it.
    task: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Starts the flusher task for `db`; it ends on [`stop`](Self::stop), or when the last
    /// handle is dropped. Must be called inside a tokio runtime.
    pub fn start(db: impl Flush, mode: SyncMode) -> Self {
        let db: Arc<dyn Flush> = Arc::new(db);
        let (waiters, rx) = mpsc::unbounded_channel();
        let failure = Arc::new(watch::Sender::new(None));
        let stop = CancellationToken::new();
        let dirty = Arc::new(AtomicBool::new(false));
        let periodic =
            (mode == SyncMode::Periodic && !db.flushes_on_its_own()).then(|| dirty.clone());
        let task = tokio::spawn(flush_loop(
            db.clone(),
            rx,
            periodic,
            failure.clone(),
            stop.clone(),
        ));
        Self {
            db,
            mode,
            dirty,
            waiters,
            failure,
            flusher: Arc::new(Flusher {
                stop,
                task: Mutex::new(Some(task)),
            }),
        }
    }

    /// Stops the flusher: writers already waiting are released after one last flush, later
    /// ones get an error at once. Returns when the task has ended (and dropped its database
    /// handle). The store calls it when it closes, after its last write.
    pub async fn stop(&self) {
        self.flusher.stop.cancel();
        if let Some(task) = self.flusher.task.lock().await.take() {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the group-commit flusher failed");
            }
        }
    }

    /// Fails at once if the disk has failed; writers call it before writing.
    pub fn check_writable(&self) -> Result<(), FlushError> {
        match &*self.failure.borrow() {
            None => Ok(()),
            Some(reason) => Err(FlushError(
                format!(
                    "the store stopped taking writes after a disk error ({reason}); \
                     fix the disk and restart the server"
                )
                .into(),
            )),
        }
    }

    /// Records a disk failure reported by the store (the first one wins).
    pub fn fail(&self, reason: &str) {
        record_failure(&self.failure, reason);
    }

    /// Watches for a disk failure (for the health service).
    pub fn failures(&self) -> watch::Receiver<Option<Arc<str>>> {
        self.failure.subscribe()
    }

    /// Resolves once every write committed before this call is on disk (in [`SyncMode::Sync`]).
    pub async fn wait_durable(&self) -> Result<(), FlushError> {
        if self.mode == SyncMode::Periodic {
            self.dirty.store(true, Ordering::Release);
            return Ok(());
        }
        let (tx, rx) = oneshot::channel();
        let stopped = || FlushError("the flusher has stopped".into());
        self.waiters.send(tx).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Makes every write committed before this call durable (in [`SyncMode::Sync`]) by flushing
    /// on the calling thread, which blocks; `writes` is how many writes it covers (for the
    /// batch-size histogram). A failure is recorded as a disk failure, as the flusher does.
    pub fn flush_blocking(&self, writes: usize) -> Result<(), FlushError> {
        if self.mode == SyncMode::Periodic {
            self.dirty.store(true, Ordering::Release);
            return Ok(());
        }
        let start = std::time::Instant::now();
        let result = self.db.flush().map_err(|e| {
            let reason = e.to_string();
            record_failure(&self.failure, &reason);
            FlushError(format!("flushing the store to disk failed: {reason}").into())
        });
        crate::metrics::record_flush(writes, start.elapsed().as_secs_f64());
        result
    }
}

/// Flushes for every group of waiters; with `periodic`, also every [`PERIODIC_FLUSH`] when a
/// write marked it since the last one. A last periodic flush runs when the loop stops.
async fn flush_loop(
    db: Arc<dyn Flush>,
    mut rx: mpsc::UnboundedReceiver<Waiter>,
    periodic: Option<Arc<AtomicBool>>,
    failure: Arc<watch::Sender<Option<Arc<str>>>>,
    stop: CancellationToken,
) {
    let mut batch = Vec::new();
    let mut closed = false;
    let mut ticks = tokio::time::interval(PERIODIC_FLUSH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let received = tokio::select! {
            received = rx.recv_many(&mut batch, usize::MAX) => received,
            // Closing refuses new waiters; the queued ones are still received, then 0 ends
            // the loop.
            () = stop.cancelled(), if !closed => {
                rx.close();
                closed = true;
                continue;
            }
            _ = ticks.tick(), if periodic.is_some() => {
                if periodic.as_ref().is_some_and(|dirty| dirty.swap(false, Ordering::AcqRel)) {
                    let _ = flush(&db, &failure, 0).await;
                }
                continue;
            }
        };
        if received == 0 {
            if periodic.is_some_and(|dirty| dirty.swap(false, Ordering::AcqRel)) {
                let _ = flush(&db, &failure, 0).await;
            }
            return;
        }
        let result = flush(&db, &failure, batch.len()).await;
        for waiter in batch.drain(..) {
            // A waiter that went away (cancelled request) needs no answer.
            let _ = waiter.send(result.clone());
        }
    }
}

/// Flushes `db` on the blocking pool for `writes` writers; a failure is recorded as a disk
/// failure.
async fn flush(
    db: &Arc<dyn Flush>,
    failure: &watch::Sender<Option<Arc<str>>>,
    writes: usize,
) -> Result<(), FlushError> {
    let db = db.clone();
    let start = std::time::Instant::now();
    let result = match tokio::task::spawn_blocking(move || db.flush()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let result = result.map_err(|reason| {
        record_failure(failure, &reason);
        FlushError(format!("flushing the store to disk failed: {reason}").into())
    });
    crate::metrics::record_flush(writes, start.elapsed().as_secs_f64());
    result
}

fn record_failure(failure: &watch::Sender<Option<Arc<str>>>, reason: &str) {
    failure.send_if_modified(|f| {
        if f.is_some() {
            return false;
        }
        tracing::error!(%reason, "disk failure: the store takes no more writes");
        *f = Some(reason.into());
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrent_waiters_are_all_released() {
        let dir = std::env::temp_dir().join(format!("gc-test-{}", std::process::id()));
        let db = sled::open(&dir).unwrap();
        let gc = GroupCommit::start(db.clone(), SyncMode::Sync);
        let tasks: Vec<_> = (0..32u32)
            .map(|i| {
                let (db, gc) = (db.clone(), gc.clone());
                tokio::spawn(async move {
                    db.insert(i.to_be_bytes(), &[1]).unwrap();
                    gc.wait_durable().await
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(db.len(), 32);
        drop(db);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A redb database that counts its flushes.
    struct Counted(crate::kv::Db, Arc<std::sync::atomic::AtomicUsize>);

    impl Flush for Counted {
        fn flush(&self) -> Result<(), StorageError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Flush::flush(&self.0)
        }
    }

    #[tokio::test]
    async fn periodic_mode_flushes_what_was_written_and_nothing_when_idle() {
        let db = crate::kv::Db::temporary().unwrap();
        let flushes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let gc = GroupCommit::start(Counted(db.clone(), flushes.clone()), SyncMode::Periodic);
        let tree = db.open_tree("t").unwrap();
        let count = || flushes.load(Ordering::SeqCst);
        // Idle: no flush at any tick.
        tokio::time::sleep(PERIODIC_FLUSH * 3).await;
        assert_eq!(count(), 0);
        // A write is acknowledged at once, and flushed at a later tick.
        tree.insert("k", "v").unwrap();
        gc.wait_durable().await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while count() == 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(PERIODIC_FLUSH / 5).await;
        }
        assert_eq!(count(), 1);
        // A write the ticks have not flushed yet is flushed by the stop.
        tree.insert("k", "w").unwrap();
        gc.wait_durable().await.unwrap();
        gc.stop().await;
        assert_eq!(count(), 2);
    }

    #[tokio::test]
    async fn stop_releases_queued_waiters_and_ends_the_flusher() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let gc = GroupCommit::start(db.clone(), SyncMode::Sync);
        let waiters: Vec<_> = (0..16u32)
            .map(|i| {
                db.insert(i.to_be_bytes(), &[1]).unwrap();
                let gc = gc.clone();
                tokio::spawn(async move { gc.wait_durable().await })
            })
            .collect();
        // Every waiter is queued before the stop (a current-thread runtime runs them in order).
        tokio::task::yield_now().await;
        gc.stop().await;
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        let late = gc.wait_durable().await.unwrap_err();
        assert!(late.to_string().contains("stopped"), "{late}");
        // The flusher's database handle is gone already: once the handles here are dropped
        // (and sled's I/O threads have let go of the lock), the database opens again.
        drop(gc);
        drop(db);
        crate::file_lock::released(dir.path().join("db"))
            .await
            .unwrap();
        let reopened = sled::open(dir.path()).unwrap();
        assert_eq!(reopened.len(), 16);
    }
}
