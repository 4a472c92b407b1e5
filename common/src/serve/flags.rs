//! The flags every server has, and what they turn into: how it serves ([`ServeOptions`]), who
//! may call it ([`Authenticator`]), how it logs.

use std::{io::IsTerminal, net::SocketAddr, path::PathBuf, time::Duration};

use tracing_subscriber::EnvFilter;

use crate::{
    durability::SyncMode,
    serve::auth::{Authenticator, TokensFileError},
};

/// Flags every server has. Each flag also reads an environment variable (see [`parse_flags`]).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeFlags {
    /// `sync`: reply after writes are flushed to disk (fsync). `periodic`: reply after commit
    /// and write and fsync in the background every ~500 ms: a crash (of the process or the
    /// machine) may lose the last moments of acknowledged writes. (Embedded stores only; on
    /// PostgreSQL durability is the database's `synchronous_commit`.)
    #[arg(long, value_enum, default_value_t)]
    pub sync: SyncMode,

    /// Connections each process opens to PostgreSQL at most (with a `postgres://` store).
    #[arg(long, default_value_t = 16)]
    pub pg_max_connections: usize,

    /// Root certificate(s) (PEM) PostgreSQL's server certificate must chain to, for a
    /// `postgres://` store whose connection string has no `sslrootcert` (which wins). Use with
    /// `sslmode=verify-full` (or `verify-ca`) in the connection string; see README.md.
    #[arg(long)]
    pub pg_ca_file: Option<PathBuf>,

    /// Capacity of the embedded database's page cache, in bytes (embedded stores only).
    /// session-svc's (sled): by default an eighth of the container's memory limit (cgroup v2
    /// `memory.max` or v1 `memory.limit_in_bytes`) when there is one, else sled's default of
    /// 1 GiB; memory-svc's (redb): by default a quarter of its --memory-budget. See
    /// deploy/README.md for sizing.
    #[arg(long)]
    pub cache_bytes: Option<u64>,

    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,

    /// TLS certificate chain (PEM). With --tls-key the server accepts TLS only.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificate (PEM): clients must present a certificate it signed (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// JSON file of bearer tokens and the apps (and users) each may access. Without it, no
    /// authentication.
    #[arg(long)]
    pub tokens_file: Option<PathBuf>,

    /// Calls handled at once; more are answered RESOURCE_EXHAUSTED right away (health checks
    /// are exempt, and an open stream counts only while it is being set up).
    #[arg(long, default_value_t = 1024)]
    pub max_concurrent_requests: usize,

    /// Seconds that in-flight calls and streams get to finish after SIGTERM.
    #[arg(long, default_value_t = 10)]
    pub shutdown_grace_secs: u64,

    /// Log line format; the level comes from RUST_LOG (default `info`).
    #[arg(long, value_enum, default_value_t)]
    pub log_format: LogFormat,
}

impl Default for ServeFlags {
    /// The flags' own defaults (their clap attributes), as a command line without them gets.
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Alone {
            #[command(flatten)]
            flags: ServeFlags,
        }
        <Alone as clap::Parser>::parse_from(["server"]).flags
    }
}

/// The flags for people, as the startup log shows them, but for those of one kind of store
/// (see [`ServeFlags::store_settings`]).
impl std::fmt::Display for ServeFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on_off = |set: bool| if set { "on" } else { "off" };
        write!(f, "TLS {}", on_off(self.tls_cert.is_some()))?;
        if self.tls_client_ca.is_some() {
            f.write_str(" with client certificates")?;
        }
        write!(f, ", tokens {}", on_off(self.tokens_file.is_some()))?;
        match self.metrics_listen {
            Some(addr) => write!(f, ", metrics on {addr}")?,
            None => f.write_str(", metrics off")?,
        }
        write!(
            f,
            ", at most {} calls at once, {} s shutdown grace",
            self.max_concurrent_requests, self.shutdown_grace_secs
        )
    }
}

impl ServeFlags {
    /// The flags that apply to `store`'s kind, for people: a sled store's durability, a
    /// PostgreSQL store's connection limit.
    pub fn store_settings(&self, store: &crate::postgres::StoreLocation) -> String {
        match store {
            crate::postgres::StoreLocation::Embedded(_) => match self.sync {
                SyncMode::Sync => "durability sync".to_owned(),
                SyncMode::Periodic => "durability periodic".to_owned(),
            },
            crate::postgres::StoreLocation::Postgres(_) => {
                format!("at most {} connections", self.pg_max_connections)
            }
        }
    }
}

/// A size for people: whole MiB or KiB when it is one, else bytes.
pub fn human_bytes(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl ServeFlags {
    pub fn options(&self) -> ServeOptions {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        };
        ServeOptions {
            grace: Duration::from_secs(self.shutdown_grace_secs),
            tls,
            metrics_listen: self.metrics_listen,
            max_concurrent_requests: self.max_concurrent_requests,
        }
    }

    pub fn authenticator(&self) -> Result<Authenticator, TokensFileError> {
        match &self.tokens_file {
            Some(path) => Authenticator::from_file(path),
            None => Ok(Authenticator::open()),
        }
    }
}

/// Parses a server's command line (see [`command`]).
pub fn parse_flags<T: clap::Parser>(prefix: &str) -> T {
    T::from_arg_matches(&command::<T>(prefix).get_matches()).unwrap_or_else(|e| e.exit())
}

/// A server's command line, where every long flag falls back to an environment variable named
/// `{prefix}_{FLAG}`: `--data-dir` reads `SESSION_SVC_DATA_DIR` for prefix `SESSION_SVC`.
pub fn command<T: clap::CommandFactory>(prefix: &str) -> clap::Command {
    T::command().mut_args(|arg| {
        if arg.get_long().is_some() && arg.get_id() != "help" && arg.get_id() != "version" {
            let name = format!("{prefix}_{}", arg.get_id().as_str().to_uppercase());
            arg.env(name)
        } else {
            arg
        }
    })
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Installs the global `tracing` subscriber. The filter comes from `RUST_LOG` (default `info`).
/// Logs go to stderr, so stdout carries only the "listening on" line scripts wait for.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second call (several servers in one test process) keeps the first subscriber.
    let _ = match format {
        // Colour only on a terminal, and not when NO_COLOR is set (https://no-color.org).
        LogFormat::Plain => builder
            .with_ansi(
                std::io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            )
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Files of a TLS server identity; with `client_ca`, clients must present a certificate it
/// signed (mutual TLS).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// How a server runs, beside its own service.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long in-flight calls and streams may run on after a shutdown request.
    pub grace: Duration,
    pub tls: Option<TlsFiles>,
    /// Where to serve Prometheus `/metrics`, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// Calls handled at once before shedding.
    pub max_concurrent_requests: usize,
}
