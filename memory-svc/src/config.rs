//! Command-line flags, each with an environment-variable fallback.

use std::{net::SocketAddr, path::PathBuf};

use adk_common::{durability::SyncMode, server::LogFormat};
use clap::Parser;

/// gRPC memory service for agents: per-(app, user) long-term memory with ranked keyword search.
#[derive(Debug, Clone, Parser)]
#[command(name = "memory-svc", version)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (the address is printed once ready).
    #[arg(long, env = "MEMORY_SVC_LISTEN", default_value = "0.0.0.0:50052")]
    pub listen: SocketAddr,

    /// Directory of the sled database.
    #[arg(long, env = "MEMORY_SVC_DATA_DIR", default_value = "./data/memory")]
    pub data_dir: PathBuf,

    /// session-svc, for AddSessionToMemory with a session_ref.
    #[arg(
        long,
        env = "MEMORY_SVC_SESSION_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    pub session_endpoint: String,

    /// `sync`: reply after writes are flushed to disk (fsync). `periodic`: reply after commit
    /// and fsync in the background every ~500 ms.
    #[arg(long, env = "MEMORY_SVC_SYNC", value_enum, default_value_t)]
    pub sync: SyncMode,

    /// Largest request accepted, in bytes.
    #[arg(long, env = "MEMORY_SVC_MAX_REQUEST_BYTES", default_value_t = 64 << 20)]
    pub max_request_bytes: usize,

    /// Log line format.
    #[arg(long, env = "MEMORY_SVC_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: LogFormat,
}

impl Config {
    /// Defaults for `data_dir`, listening on an ephemeral loopback port (tests, scripts).
    pub fn ephemeral(data_dir: PathBuf, session_endpoint: String) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            session_endpoint,
            sync: SyncMode::Sync,
            max_request_bytes: 64 << 20,
            log_format: LogFormat::Plain,
        }
    }
}
