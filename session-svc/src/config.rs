//! Command-line flags; each reads the environment variable `SESSION_SVC_<FLAG>` when not given
//! (e.g. `--data-dir` ← `SESSION_SVC_DATA_DIR`).

use std::{net::SocketAddr, path::PathBuf};

use adk_common::{postgres::StoreLocation, serve::flags::ServeFlags, snapshot::AdminCommand};
use clap::Parser;

/// The start of the environment variable each flag falls back to (`SESSION_SVC_DATA_DIR`, ...).
pub const ENV_PREFIX: &str = "SESSION_SVC";

/// gRPC session service for agents: sessions, ordered events and scoped state, kept in sled
/// (embedded, one process) or PostgreSQL (shared by any number of replicas).
#[derive(Debug, Clone, Parser)]
#[command(name = "session-svc", version = adk_version::version!())]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (the address is printed once ready).
    #[arg(long, default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,

    /// Directory of the embedded database (when --store is not given).
    #[arg(long, default_value = "./data/session")]
    pub data_dir: PathBuf,

    /// Where data lives: `embedded:PATH` (the embedded database, one process per directory;
    /// `sled:PATH` means the same; the default is the --data-dir) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DB` (shared by any number of replicas).
    #[arg(long)]
    pub store: Option<StoreLocation>,

    /// Largest event AppendEvent accepts, in bytes (events may carry images).
    #[arg(long, default_value_t = 16 << 20)]
    pub max_event_bytes: usize,

    /// How long WatchEvents keeps the app change feed, in seconds: a consumer can resume from
    /// a cursor this old; older cursors get OUT_OF_RANGE.
    #[arg(long, default_value_t = 24 * 3600)]
    pub change_retention_secs: u64,

    /// Lifetime of sessions created without `ttl` or `expire_time`, in seconds (0: forever).
    #[arg(long, default_value_t = 0)]
    pub default_session_ttl_secs: u64,

    #[command(flatten)]
    pub serve: ServeFlags,

    /// Backup commands instead of serving.
    #[command(subcommand)]
    pub admin: Option<AdminCommand>,
}

/// The configuration for people, as the startup log shows it.
impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let store = self.store();
        write!(
            f,
            "listen {}, store {store:?} ({}), events up to {}, change feed kept {} s, ",
            self.listen,
            self.serve.store_settings(&store),
            adk_common::serve::flags::human_bytes(self.max_event_bytes),
            self.change_retention_secs
        )?;
        match self.default_session_ttl_secs {
            0 => f.write_str("sessions kept until deleted")?,
            secs => write!(f, "sessions expire after {secs} s by default")?,
        }
        write!(f, ", {}", self.serve)
    }
}

impl Config {
    /// The command line (with environment fallbacks) of this process.
    pub fn from_env() -> Self {
        adk_common::serve::flags::parse_flags(ENV_PREFIX)
    }

    /// Where data lives: `--store` (with `--pg-ca-file`), else the embedded database in
    /// `--data-dir`.
    pub fn store(&self) -> StoreLocation {
        self.store
            .clone()
            .unwrap_or_else(|| StoreLocation::Embedded(self.data_dir.clone()))
            .with_root_cert(self.serve.pg_ca_file.as_deref())
    }

    /// Defaults for `data_dir`, listening on an ephemeral loopback port (tests, scripts).
    pub fn ephemeral(data_dir: PathBuf) -> Self {
        // The flags' defaults, written once in their attributes.
        let mut config = Self::parse_from(["session-svc"]);
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.data_dir = data_dir;
        config
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use adk_common::postgres::StoreLocation;

    use super::Config;

    #[test]
    fn the_startup_log_names_only_the_settings_of_the_store_in_use() {
        let sled = Config::ephemeral(PathBuf::from("/data")).to_string();
        assert!(
            sled.contains("store embedded:/data (durability sync)"),
            "{sled}"
        );
        assert!(!sled.contains("connections"), "{sled}");

        let postgres = Config {
            store: Some(StoreLocation::Postgres("postgres://adk@db/adk".into())),
            ..Config::ephemeral(PathBuf::from("/data"))
        }
        .to_string();
        assert!(postgres.contains("(at most 16 connections)"), "{postgres}");
        assert!(!postgres.contains("durability"), "{postgres}");
    }
}
