//! Command-line flags, each with an environment-variable fallback.

use std::{net::SocketAddr, path::PathBuf};

use adk_common::{durability::SyncMode, server::LogFormat};
use clap::Parser;

/// gRPC session service for agents: sessions, ordered events and scoped state on sled.
#[derive(Debug, Clone, Parser)]
#[command(name = "session-svc", version)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (the address is printed once ready).
    #[arg(long, env = "SESSION_SVC_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,

    /// Directory of the sled database.
    #[arg(long, env = "SESSION_SVC_DATA_DIR", default_value = "./data/session")]
    pub data_dir: PathBuf,

    /// `sync`: reply after writes are flushed to disk (fsync). `periodic`: reply after commit
    /// and fsync in the background every ~500 ms: acknowledged writes survive a crash of the
    /// process, but a crash of the machine may lose the last moments of them.
    #[arg(long, env = "SESSION_SVC_SYNC", value_enum, default_value_t)]
    pub sync: SyncMode,

    /// Largest event AppendEvent accepts, in bytes (events may carry images).
    #[arg(long, env = "SESSION_SVC_MAX_EVENT_BYTES", default_value_t = 16 << 20)]
    pub max_event_bytes: usize,

    /// How long WatchEvents keeps the app change feed, in seconds: a consumer can resume from
    /// a cursor this old; older cursors get OUT_OF_RANGE.
    #[arg(long, env = "SESSION_SVC_CHANGE_RETENTION_SECS", default_value_t = 24 * 3600)]
    pub change_retention_secs: u64,

    /// Log line format.
    #[arg(long, env = "SESSION_SVC_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: LogFormat,
}

impl Config {
    /// Defaults for `data_dir`, listening on an ephemeral loopback port (tests, scripts).
    pub fn ephemeral(data_dir: PathBuf) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            sync: SyncMode::Sync,
            max_event_bytes: 16 << 20,
            change_retention_secs: 24 * 3600,
            log_format: LogFormat::Plain,
        }
    }
}
