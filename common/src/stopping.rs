//! Stopping a server: the signal long-running work listens for, and the tracker of that work, so
//! that shutdown waits for it before the store is closed.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// Tells long-running work (watch streams, stream readers, background loops) that the server is
/// stopping, and tracks the tasks doing it, so that shutdown waits for them to end before the
/// store is flushed and closed.
#[derive(Debug, Clone)]
pub struct Stopping {
    pub(crate) cancel: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

impl Stopping {
    /// Resolves once the server starts shutting down.
    pub async fn wait(&self) {
        self.cancel.cancelled().await
    }

    /// Runs `task` in the background; shutdown waits (within its grace period) for it to end,
    /// so it must end soon after [`wait`](Self::wait) resolves.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }
}

/// The trigger of a server's [`Stopping`] signal, and the tracker of its tasks.
#[derive(Debug)]
pub struct Shutdown(pub(crate) Stopping);

impl Shutdown {
    pub fn new() -> Self {
        Self(Stopping {
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// The signal handed to the server's service before it starts.
    pub fn signal(&self) -> Stopping {
        self.0.clone()
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}
