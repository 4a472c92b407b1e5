//! [`Ctx`]: the settings every scenario shares, from the global flags.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::{flags::Cli, Result};

/// Settings every scenario shares.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub quick: bool,
    pub bin_dir: PathBuf,
    pub duration: Duration,
    pub warmup: Duration,
    pub max_ops: u64,
    pub seed_sync: String,
    pub postgres: Option<String>,
    /// The schemas made in `postgres` for the servers' data, dropped when the run ends.
    pub schemas: Arc<Mutex<Vec<String>>>,
}

impl Ctx {
    /// The settings `cli`'s global flags give; the servers' directory defaults to this
    /// executable's.
    pub fn new(cli: &Cli) -> Result<Self> {
        let bin_dir = match &cli.bin_dir {
            Some(d) => d.clone(),
            None => std::env::current_exe()?
                .parent()
                .ok_or("no directory for this executable")?
                .to_path_buf(),
        };
        let (duration, warmup) = if cli.quick {
            (Duration::from_secs_f64(1.0), Duration::from_secs_f64(0.2))
        } else {
            (
                Duration::from_secs_f64(cli.duration),
                Duration::from_secs_f64(cli.warmup),
            )
        };
        Ok(Self {
            quick: cli.quick,
            bin_dir,
            duration,
            warmup,
            max_ops: cli.max_ops,
            seed_sync: cli.seed_sync.clone(),
            postgres: cli.postgres.clone(),
            schemas: Arc::default(),
        })
    }

    /// `sizes`, each capped at `cap` in quick mode.
    pub fn shrink(&self, sizes: Vec<u64>, cap: u64) -> Vec<u64> {
        if self.quick {
            sizes.into_iter().map(|s| s.min(cap)).collect()
        } else {
            sizes
        }
    }
}
