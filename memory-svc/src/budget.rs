//! The memory budget (`--memory-budget`): the bytes memory-svc's sizeable in-memory structures
//! may hold together, and each one's share of them.
//!
//! A pod whose process passes its memory limit is killed. Bounding the database's page cache
//! alone is not enough: the postings waiting for a merge, a merge under way and the writes being
//! committed grow with the data and the load. Each of them draws from its share here: the cache
//! is sized from it, merges start earlier and take fewer records, and writes wait for room
//! instead of growing. What the budget leaves of the limit is for what it cannot count: the
//! allocator's overhead, requests being decoded, the program itself.

use std::sync::Arc;

use adk_common::{serve::flags::human_bytes, sled::cache::container_memory_limit};
use metrics::gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget is one in this many bytes of the container's memory limit (half the
/// limit was OOM-killed at 256 MiB: sled and the allocator hold about as much again beyond
/// what the budget counts)...
const LIMIT_DIVISOR: u64 = 4;

/// ... or, without one, of the machine's memory.
const MACHINE_DIVISOR: u64 = 4;

/// The budget of a process that finds neither limit (not on Linux).
const FALLBACK_BYTES: u64 = 4 << 30;

/// Where the budget came from, for the startup log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSource {
    /// `--memory-budget`.
    Flag,
    /// A share of this cgroup memory limit, in bytes.
    CgroupLimit(u64),
    /// A share of this much memory of the machine, in bytes.
    Machine(u64),
    /// Neither could be read.
    Fallback,
}

/// The budget and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub bytes: u64,
    pub source: BudgetSource,
}

/// The structures that draw from the budget, and their shares of it (in eighths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The database's page cache (unless `--cache-bytes` sets it).
    StoreCache,
    /// Journalled postings held in memory until a merge moves them into the blocks.
    PendingPostings,
    /// The records and blocks of a merge under way.
    Merges,
    /// Writes being planned and committed.
    Writes,
    /// Searched users' vectors (unless `--vector-cache-bytes` sets it).
    VectorCache,
}

impl Part {
    pub const ALL: [Part; 5] = [
        Part::StoreCache,
        Part::PendingPostings,
        Part::Merges,
        Part::Writes,
        Part::VectorCache,
    ];

    /// The part's label in the log and the metrics.
    pub fn label(self) -> &'static str {
        match self {
            Part::StoreCache => "store_cache",
            Part::PendingPostings => "pending_postings",
            Part::Merges => "merges",
            Part::Writes => "writes",
            Part::VectorCache => "vector_cache",
        }
    }

    /// Eighths of the budget: writes and the postings waiting get as much as the cache, since
    /// ingestion is what grows.
    fn eighths(self) -> u64 {
        match self {
            Part::StoreCache | Part::PendingPostings | Part::Writes => 2,
            Part::Merges | Part::VectorCache => 1,
        }
    }
}

impl MemoryBudget {
    /// `flag` when given, else a share of this process's cgroup memory limit, else of the
    /// machine's memory.
    pub fn choose(flag: Option<u64>) -> Self {
        Self::from(flag, container_memory_limit(), machine_memory())
    }

    fn from(flag: Option<u64>, limit: Option<u64>, machine: Option<u64>) -> Self {
        let (bytes, source) = match (flag, limit, machine) {
            (Some(bytes), _, _) => (bytes, BudgetSource::Flag),
            (None, Some(limit), _) => (limit / LIMIT_DIVISOR, BudgetSource::CgroupLimit(limit)),
            (None, None, Some(total)) => (total / MACHINE_DIVISOR, BudgetSource::Machine(total)),
            (None, None, None) => (FALLBACK_BYTES, BudgetSource::Fallback),
        };
        Self { bytes, source }
    }

    /// Whether the budget comes from a limit (the flag or a cgroup's), not the machine's size.
    pub fn is_limited(&self) -> bool {
        matches!(
            self.source,
            BudgetSource::Flag | BudgetSource::CgroupLimit(_)
        )
    }

    /// The bytes `part` may hold.
    pub fn share(&self, part: Part) -> u64 {
        self.bytes / 8 * part.eighths()
    }

    /// The budget and its shares for people, as the startup log shows them.
    pub fn describe(&self) -> String {
        let from = match self.source {
            BudgetSource::Flag => "--memory-budget".to_owned(),
            BudgetSource::CgroupLimit(limit) => {
                format!("a quarter of the cgroup memory limit of {}", size(limit))
            }
            BudgetSource::Machine(total) => {
                format!("a quarter of the machine's {}", size(total))
            }
            BudgetSource::Fallback => "no memory limit or size found".to_owned(),
        };
        let shares: Vec<String> = (Part::ALL.iter())
            .map(|&part| format!("{} {}", part.label(), size(self.share(part))))
            .collect();
        format!("{} ({from}): {}", size(self.bytes), shares.join(", "))
    }

    /// Sets the `memory_budget_bytes` gauges: the budget, and each part's share.
    pub fn record(&self) {
        gauge!("memory_budget_bytes", "part" => "total").set(self.bytes as f64);
        for part in Part::ALL {
            gauge!("memory_budget_bytes", "part" => part.label()).set(self.share(part) as f64);
        }
    }
}

/// A share handed out to work in flight, by its bytes: work whose bytes are not free waits until
/// earlier work gives them back. Counted in KiB (the semaphore counts in `u32`).
#[derive(Debug)]
pub struct Room {
    free: Arc<Semaphore>,
    kib: u32,
}

/// Bytes of a [`Room`] taken by one piece of work, given back when dropped.
pub type Taken = OwnedSemaphorePermit;

impl Room {
    /// A room of `bytes`.
    pub fn new(bytes: u64) -> Self {
        let kib = u32::try_from(bytes / 1024)
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        Self {
            free: Arc::new(Semaphore::new(kib as usize)),
            kib,
        }
    }

    /// Waits until `bytes` are free, and takes them. Work larger than the room takes all of it,
    /// so it runs, alone. `None` only if the room were closed, which it never is.
    pub async fn take(&self, bytes: u64) -> Option<Taken> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.kib);
        self.free.clone().acquire_many_owned(kib).await.ok()
    }

    /// The bytes taken now.
    pub fn used(&self) -> u64 {
        u64::from(self.kib).saturating_sub(self.free.available_permits() as u64) * 1024
    }
}

/// Sets the `memory_budget_used_bytes` gauge of `part`.
pub fn record_use(part: Part, bytes: u64) {
    gauge!("memory_budget_used_bytes", "part" => part.label()).set(bytes as f64);
}

fn size(bytes: u64) -> String {
    human_bytes(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn machine_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_a_quarter_of_the_limit_or_of_the_machine() {
        let budget = MemoryBudget::from(Some(100 << 20), Some(1 << 30), Some(8 << 30));
        assert_eq!(
            (budget.bytes, budget.source),
            (100 << 20, BudgetSource::Flag)
        );
        let budget = MemoryBudget::from(None, Some(512 << 20), Some(8 << 30));
        assert_eq!(budget.bytes, 128 << 20);
        assert_eq!(budget.share(Part::StoreCache), 32 << 20);
        let budget = MemoryBudget::from(None, None, Some(8 << 30));
        assert_eq!(budget.bytes, 2 << 30);
        assert_eq!(MemoryBudget::from(None, None, None).bytes, FALLBACK_BYTES);
    }

    #[test]
    fn the_shares_add_up_to_the_budget_at_most() {
        let budget = MemoryBudget::from(Some(128 << 20), None, None);
        let sum: u64 = Part::ALL.iter().map(|&p| budget.share(p)).sum();
        assert_eq!(sum, 128 << 20);
        assert!(budget
            .describe()
            .starts_with("128 MiB (--memory-budget): store_cache 32 MiB"));
    }

    #[tokio::test]
    async fn work_waits_for_the_bytes_earlier_work_holds() {
        let room = Room::new(10 << 10);
        let first = room.take(6 << 10).await;
        assert_eq!(room.used(), 6 << 10);
        // More than is free: it waits until the first gives its bytes back.
        let second = room.take(6 << 10);
        tokio::pin!(second);
        assert!(futures_poll_once(second.as_mut()).await.is_none());
        drop(first);
        let second = second.await;
        assert_eq!(room.used(), 6 << 10);
        drop(second);
        // Larger than the room: it takes all of it.
        let all = room.take(1 << 30).await;
        assert_eq!(room.used(), 10 << 10);
        drop(all);
        assert_eq!(room.used(), 0);
    }

    /// The future's output if it is ready at once.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::time::timeout(std::time::Duration::from_millis(50), f)
            .await
            .ok()
    }

    #[test]
    fn the_machine_memory_is_read() {
        assert!(machine_memory().is_some_and(|bytes| bytes > 1 << 20));
    }
}
