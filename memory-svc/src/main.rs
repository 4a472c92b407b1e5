//! The `memory-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use memory_svc::{budget::MemoryBudget, config::Config, server};

/// The servers allocate with jemalloc: after a burst of writes it hands freed memory back to the
/// system, where glibc's malloc kept about 2.7x more resident (BENCHMARKS.md, "Peak RSS at 1M
/// events"), which a pod's memory limit counts.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Under a memory limit, freed pages go straight back to the system: jemalloc's default keeps
/// them ten seconds, and a cgroup counts them (30-50 MB of a burst of writes in a 256 MiB
/// cgroup). Without a limit they stay: returning each at once halved ingestion. jemalloc's
/// other defaults stand: one arena with 4 KiB thread caches (`_RJEM_MALLOC_CONF=narenas:1,
/// tcache_max:4096`) took 27 MB more off that cgroup's peak but slowed searches at 100,000
/// entries 1.3-1.5x (BENCHMARKS.md, "Memory budget").
fn return_freed_pages_at_once() {
    // `arenas.*` for the arenas made from now on; each one made so far has its own setting
    // (jemalloc refuses the all-arenas index for these).
    let set = |name: &str| {
        let name = format!("{name}\0");
        // SAFETY: the name is a NUL-terminated jemalloc option whose value is an ssize_t.
        unsafe { tikv_jemalloc_ctl::raw::write::<isize>(name.as_bytes(), 0) }
    };
    for name in ["arenas.dirty_decay_ms", "arenas.muzzy_decay_ms"] {
        if let Err(e) = set(name) {
            tracing::warn!(option = name, "jemalloc refused: {e}");
        }
    }
    // SAFETY: `arenas.narenas` is a NUL-terminated jemalloc option whose value is an unsigned.
    let arenas = unsafe { tikv_jemalloc_ctl::raw::read::<u32>(b"arenas.narenas\0") }.unwrap_or(0);
    for arena in 0..arenas {
        let initialized = format!("arena.{arena}.initialized\0");
        // SAFETY: a NUL-terminated jemalloc option whose value is a bool.
        if !unsafe { tikv_jemalloc_ctl::raw::read::<bool>(initialized.as_bytes()) }.unwrap_or(false)
        {
            continue;
        }
        for decay in ["dirty_decay_ms", "muzzy_decay_ms"] {
            let name = format!("arena.{arena}.{decay}");
            if let Err(e) = set(&name) {
                tracing::warn!(option = %name, "jemalloc refused: {e}");
            }
        }
    }
}

fn main() -> ExitCode {
    // Before the runtime starts any thread: it sets environment variables.
    #[cfg(feature = "local-embedder")]
    memory_svc::embed::local::configure_threads();
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(run()),
        Err(e) => {
            eprintln!("memory-svc: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> ExitCode {
    let config = Config::from_env();
    if let Some(command) = config.admin {
        return command.run::<adk_common::kv::Restoring>("memory-svc").await;
    }
    adk_common::serve::flags::init_logging(config.serve.log_format);
    tracing::info!("starting: {config}");
    if MemoryBudget::choose(config.memory_budget).is_limited() {
        return_freed_pages_at_once();
    }
    adk_common::serve::run_until_signal("memory-svc", server::start(config).await).await
}
