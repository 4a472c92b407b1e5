//! The size of sled's page cache, and opening a sled database with it.
//!
//! sled keeps recently used pages in memory up to a capacity (1 GiB unless told otherwise). In a
//! container with a memory limit, that cache plus the allocator's overhead, the index and the
//! requests in flight must stay below the limit, or the kernel kills the process. So the capacity
//! is `--cache-bytes` when given, else an eighth of the cgroup memory limit when the process has
//! one, else sled's own default. sled holds much more than its accounted cache (its page table,
//! pages being rewritten, the allocator's fragmentation): RELIABILITY.md, "Bounded memory",
//! measured what stays under a limit, and an eighth is what did.

use std::path::Path;

/// sled's default cache capacity, used when neither the flag nor a cgroup limit says otherwise.
pub const SLED_DEFAULT_CACHE_BYTES: u64 = 1 << 30;

/// The part of a cgroup memory limit given to the cache by default: one in this many bytes.
const LIMIT_SHARE_DIVISOR: u64 = 8;

/// Values at or above this mean "no limit" (cgroup v1 writes `PAGE_COUNTER_MAX` pages, about
/// 2^63, for an unlimited group).
const NO_LIMIT_FROM: u64 = 1 << 60;

/// Where the chosen capacity came from, for the startup log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheSource {
    /// `--cache-bytes`.
    Flag,
    /// A share of this cgroup memory limit, in bytes.
    CgroupLimit(u64),
    /// No flag and no limit: sled's default.
    Default,
}

/// The cache capacity a server runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SledCache {
    pub bytes: u64,
    pub source: CacheSource,
}

impl SledCache {
    /// `flag` when given, else a share of this process's cgroup memory limit, else sled's
    /// default.
    pub fn choose(flag: Option<u64>) -> Self {
        Self::from_limit(flag, container_memory_limit())
    }

    fn from_limit(flag: Option<u64>, limit: Option<u64>) -> Self {
        match (flag, limit) {
            (Some(bytes), _) => Self {
                bytes,
                source: CacheSource::Flag,
            },
            (None, Some(limit)) => Self {
                bytes: limit / LIMIT_SHARE_DIVISOR,
                source: CacheSource::CgroupLimit(limit),
            },
            (None, None) => Self {
                bytes: SLED_DEFAULT_CACHE_BYTES,
                source: CacheSource::Default,
            },
        }
    }

    /// Opens (or creates) the sled database in `dir` with this cache capacity.
    pub fn open(&self, dir: &Path) -> sled::Result<sled::Db> {
        not_held_elsewhere(dir)?;
        sled::Config::new()
            .path(dir)
            .cache_capacity(self.bytes)
            .open()
    }

    /// Logs the capacity and where it came from; publishes it as the `sled_cache_bytes` gauge.
    pub fn announce(&self) {
        match self.source {
            CacheSource::Flag => {
                tracing::info!(bytes = self.bytes, "sled cache from --cache-bytes")
            }
            CacheSource::CgroupLimit(limit) => tracing::info!(
                bytes = self.bytes,
                cgroup_limit = limit,
                "sled cache: an eighth of the cgroup memory limit"
            ),
            CacheSource::Default => tracing::info!(
                bytes = self.bytes,
                "sled cache: sled's default (no --cache-bytes, no cgroup memory limit)"
            ),
        }
        self.record();
    }

    /// Sets the `sled_cache_bytes` gauge (again before each scrape, see `StoreHooks`).
    pub fn record(&self) {
        metrics::gauge!("sled_cache_bytes").set(self.bytes as f64);
    }
}

/// This process's cgroup memory limit (the container's), if it has one.
pub fn container_memory_limit() -> Option<u64> {
    memory_limit(Path::new("/sys/fs/cgroup"), &own_cgroups())
}

/// The lines of `/proc/self/cgroup` (empty when it cannot be read, e.g. not on Linux).
fn own_cgroups() -> String {
    std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default()
}

/// The memory limit of the process whose `/proc/self/cgroup` is `cgroups`, with the cgroup
/// filesystem mounted at `root`: cgroup v2 (`memory.max`) first, then v1
/// (`memory/memory.limit_in_bytes`). For each, the process's own group is read, then the
/// mount's root, which is the container's own group when the runtime mounts it that way.
fn memory_limit(root: &Path, cgroups: &str) -> Option<u64> {
    let mut candidates = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.is_empty() {
            candidates.push(root.join(relative).join("memory.max"));
            candidates.push(root.join("memory.max"));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(
                root.join("memory")
                    .join(relative)
                    .join("memory.limit_in_bytes"),
            );
            candidates.push(root.join("memory/memory.limit_in_bytes"));
        }
    }
    candidates
        .iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .and_then(|text| parse_limit(&text))
}

/// `max` (v2) or a value too large to be a real limit (v1) means none.
fn parse_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|&bytes| bytes < NO_LIMIT_FROM)
}

/// Fails when another process holds the lock sled takes on the database in `dir` (its file
/// `db`), saying so: sled's own error is an opaque "could not acquire lock ... WouldBlock".
fn not_held_elsewhere(dir: &Path) -> sled::Result<()> {
    use fs2::FileExt;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("db"))
    else {
        // No database yet, or one sled will say more about.
        return Ok(());
    };
    match file.try_lock_exclusive() {
        // Released when `file` is closed, before sled takes it.
        Ok(()) => Ok(()),
        Err(e) if e.kind() == fs2::lock_contended_error().kind() => {
            Err(sled::Error::Io(std::io::Error::new(
                e.kind(),
                "another process holds its lock: is a server already running on it?",
            )))
        }
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn cgroup_v2_limit_of_the_own_group_then_the_mount_root() {
        let root = tempfile::tempdir().unwrap();
        let own = "0::/kubepods/pod1/c1\n";
        assert_eq!(memory_limit(root.path(), own), None);
        write(root.path(), "memory.max", "max\n");
        assert_eq!(memory_limit(root.path(), own), None);
        write(root.path(), "memory.max", "2147483648\n");
        assert_eq!(memory_limit(root.path(), own), Some(2 << 30));
        write(root.path(), "kubepods/pod1/c1/memory.max", "1073741824\n");
        assert_eq!(memory_limit(root.path(), own), Some(1 << 30));
    }

    #[test]
    fn cgroup_v1_limit_and_its_unlimited_value() {
        let root = tempfile::tempdir().unwrap();
        let own = "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n";
        write(
            root.path(),
            "memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        assert_eq!(memory_limit(root.path(), own), None);
        write(
            root.path(),
            "memory/docker/abc/memory.limit_in_bytes",
            "536870912\n",
        );
        assert_eq!(memory_limit(root.path(), own), Some(512 << 20));
    }

    #[test]
    fn the_flag_wins_then_a_share_of_the_limit_then_sleds_default() {
        assert_eq!(
            SledCache::from_limit(Some(64 << 20), Some(1 << 30)),
            SledCache {
                bytes: 64 << 20,
                source: CacheSource::Flag
            }
        );
        assert_eq!(
            SledCache::from_limit(None, Some(1 << 30)),
            SledCache {
                bytes: 128 << 20,
                source: CacheSource::CgroupLimit(1 << 30)
            }
        );
        assert_eq!(
            SledCache::from_limit(None, None).bytes,
            SLED_DEFAULT_CACHE_BYTES
        );
    }
}
