//! A release server spawned as a child process on 127.0.0.1:0 with its own data directory
//! (or, with `--postgres`, its own schema).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{ctx::Ctx, Result};

pub struct Server {
    pub addr: String,
    pub pid: u32,
    child: Child,
    data_dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts `name` with a fresh temporary data directory.
    pub async fn spawn(ctx: &Ctx, name: &str, args: &[&str]) -> Result<Self> {
        Self::spawn_in_cgroup(ctx, name, args, None).await
    }

    /// Starts `name` with a fresh temporary data directory, inside `cgroup` (a cgroup
    /// directory: the server joins it before it starts, so it sees the group's limits).
    pub async fn spawn_in_cgroup(
        ctx: &Ctx,
        name: &str,
        args: &[&str],
        cgroup: Option<&Path>,
    ) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("adk-bench-").tempdir()?;
        let mut s = Self::start(ctx, name, args, Some(dir.path()), cgroup).await?;
        s._dir = Some(dir);
        Ok(s)
    }

    /// Starts `name` on an existing data directory (kept by the caller).
    pub async fn spawn_in(ctx: &Ctx, name: &str, args: &[&str], data_dir: &Path) -> Result<Self> {
        Self::start(ctx, name, args, Some(data_dir), None).await
    }

    /// Starts `name`, a server that keeps no data (the gateway).
    pub async fn spawn_stateless(ctx: &Ctx, name: &str, args: &[&str]) -> Result<Self> {
        Self::start(ctx, name, args, None, None).await
    }

    async fn start(
        ctx: &Ctx,
        name: &str,
        args: &[&str],
        data_dir: Option<&Path>,
        cgroup: Option<&Path>,
    ) -> Result<Self> {
        let bin = ctx.bin_dir.join(name);
        if !bin.exists() {
            return Err(format!(
                "{} not found: build it with `cargo build --release -p {name}` or pass --bin-dir",
                bin.display()
            )
            .into());
        }
        let mut command = match cgroup {
            // The shell joins the group, then becomes the server (same pid).
            Some(group) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
                    .arg(group)
                    .arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        command.arg("--listen").arg("127.0.0.1:0");
        if let Some(data_dir) = data_dir {
            command.arg("--data-dir").arg(data_dir);
            if let Some(url) = &ctx.postgres {
                command
                    .arg("--store")
                    .arg(schema_for(ctx, url, data_dir).await?);
            }
        }
        let mut child = command
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("BENCH_SERVER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("server exited at once")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await? {
                if let Some((_, addr)) = line.split_once("listening on ") {
                    return Ok::<_, std::io::Error>(Some(addr.trim().to_owned()));
                }
            }
            Ok(None)
        })
        .await
        .map_err(|_| format!("{name} did not report its address within 120 s"))??
        .ok_or_else(|| format!("{name} exited before listening"))?;
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        println!("  started {name} pid {pid} on {addr} {}", args.join(" "));
        Ok(Self {
            addr,
            pid,
            child,
            data_dir: data_dir.map(Path::to_owned).unwrap_or_default(),
            _dir: None,
        })
    }

    /// Where the server keeps its data.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone()
    }

    /// (VmRSS, VmHWM) in KiB, from /proc/PID/status.
    pub fn rss_kb(&self) -> (u64, u64) {
        rss_kb_of(self.pid)
    }

    /// The bytes the server has passed to write(2) and its kin so far (`wchar` of /proc/PID/io:
    /// whether or not they have reached the disk yet).
    pub fn bytes_written(&self) -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid)).unwrap_or_default();
        io.lines()
            .find_map(|l| l.strip_prefix("wchar:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The CPU time the server has used so far (user and system, from /proc/PID/stat).
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // After the command name, which may hold spaces: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
            .sum();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_secs_f64(ticks as f64 / per_second as f64)
    }

    /// SIGTERM (graceful: drain and flush), then kill after 30 s.
    pub async fn stop(mut self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// (VmRSS, VmHWM) of process `pid` in KiB, from /proc/PID/status (0 when unreadable).
pub fn rss_kb_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The connection string of the schema standing for `data_dir` in the database at `url`
/// (created when missing): a restart on the same directory finds the same data. The schema is
/// dropped at the end of the run ([`drop_schemas`]).
async fn schema_for(ctx: &Ctx, url: &str, data_dir: &Path) -> Result<String> {
    let schema = schema_name(data_dir);
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await?;
    drop(client);
    let _ = driver.await;
    let mut schemas = ctx.schemas.lock().map_err(|_| "schema list poisoned")?;
    if !schemas.contains(&schema) {
        schemas.push(schema.clone());
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{separator}options=-csearch_path%3D{schema}"))
}

/// The schema standing for `data_dir` (see [`schema_for`]).
fn schema_name(data_dir: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    data_dir.hash(&mut hasher);
    format!("bench_{:016x}", hasher.finish())
}

/// On PostgreSQL, waits up to `within` for autovacuum to visit `table` of `server`'s schema
/// once more, and says how long that took (`None`: not within `within`, or not on
/// PostgreSQL). A table read by index-only scans (`memory_metadata`, for a filter's
/// candidates) is read from its index alone only once a vacuum has marked its pages all-visible;
/// until then every row found is looked up in the table too. A store that has been serving for
/// a minute is in that state, one just loaded is not: the wait measures the former.
pub async fn autovacuumed(
    ctx: &Ctx,
    server: &Server,
    table: &str,
    within: Duration,
) -> Result<Option<Duration>> {
    let Some(url) = &ctx.postgres else {
        return Ok(None);
    };
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    let schema = schema_name(&server.data_dir);
    let count = || async {
        let row = client
            .query_opt(
                "SELECT autovacuum_count FROM pg_stat_user_tables
                 WHERE schemaname = $1 AND relname = $2",
                &[&schema, &table],
            )
            .await?;
        let count = row.map(|r| r.try_get::<_, i64>(0)).transpose()?;
        Ok::<_, tokio_postgres::Error>(count.unwrap_or(0))
    };
    let (start, before) = (std::time::Instant::now(), count().await?);
    let mut visited = None;
    while start.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if count().await? > before {
            visited = Some(start.elapsed());
            break;
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(visited)
}

/// Drops the schemas the run made for its servers (all stopped by now), so that benchmarks on
/// a database leave nothing behind; a failure is reported, not fatal.
pub async fn drop_schemas(ctx: &Ctx) {
    let (Some(url), Ok(schemas)) = (&ctx.postgres, ctx.schemas.lock().map(|s| s.clone())) else {
        return;
    };
    if schemas.is_empty() {
        return;
    }
    let dropped = async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(connection);
        for schema in &schemas {
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await?;
        }
        drop(client);
        let _ = driver.await;
        Ok::<_, tokio_postgres::Error>(())
    };
    if let Err(e) = dropped.await {
        eprintln!("adk-bench: could not drop the schemas {schemas:?}: {e}");
    }
}
