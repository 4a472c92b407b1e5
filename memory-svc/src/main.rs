//! The `memory-svc` binary: parse flags, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use memory_svc::{config::Config, server};

/// The servers allocate with jemalloc: after a burst of writes it hands freed memory back to the
/// system, where glibc's malloc kept about 2.7x more resident (BENCHMARKS.md, "Peak RSS at 1M
/// events"), which a pod's memory limit counts.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: freed pages go straight back to the system (its
/// default keeps them ten seconds, and a cgroup counts them), one arena, not four per core (each
/// keeps its own free pages), and threads cache only allocations of up to 4 KiB (not 32 KiB: the
/// blocking pool's threads each kept their own). A burst of writes allocates and frees far more
/// than it keeps: in a 256 MiB cgroup the first two took 30-50 MB off memory-svc's RSS while
/// ingesting, and the last two 27 MB more (BENCHMARKS.md, "Memory budget").
/// `_RJEM_MALLOC_CONF` in the environment overrides them.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 60] = b"dirty_decay_ms:0,muzzy_decay_ms:0,narenas:1,tcache_max:4096\0";

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
        return command.run("memory-svc").await;
    }
    adk_common::serve::flags::init_logging(config.serve.log_format);
    tracing::info!("starting: {config}");
    adk_common::serve::run_until_signal("memory-svc", server::start(config).await).await
}
