//! Closed-loop load: `concurrency` workers each issue one operation at a time for a warm-up and
//! then a measured period; latencies go to an HDR histogram (microseconds). Each result is a
//! [`Row`] of the run's [`Report`], with the machine's load average beside it.

use std::{
    future::Future,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;

use crate::{ctx::Ctx, server::Server, BoxError, Result};

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

pub fn record(hist: &mut Histogram<u64>, lat: Duration) {
    hist.saturating_record((lat.as_micros() as u64).max(1));
}

/// Runs `op(worker)` in a closed loop on `concurrency` workers and returns the measured row.
pub async fn drive<F, Fut>(
    ctx: &Ctx,
    label: &str,
    concurrency: usize,
    server: &Server,
    op: F,
) -> Result<Row>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let measure_from = start + ctx.warmup;
    let deadline = measure_from + ctx.duration;
    let budget = Arc::new(std::sync::atomic::AtomicU64::new(ctx.max_ops));
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let op = op.clone();
        let budget = budget.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = new_hist();
            let mut ops = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= deadline {
                    break;
                }
                op(w).await?;
                let t1 = Instant::now();
                if t0 >= measure_from {
                    record(&mut hist, t1 - t0);
                    ops += 1;
                    if budget.fetch_sub(1, std::sync::atomic::Ordering::Relaxed) <= 1 {
                        break;
                    }
                }
            }
            Ok::<_, BoxError>((hist, ops, Instant::now()))
        }));
    }
    let mut hist = new_hist();
    let mut ops = 0;
    let mut end = measure_from;
    for t in tasks {
        let (h, o, e) = t.await??;
        hist.add(&h).ok();
        ops += o;
        end = end.max(e);
    }
    let secs = (end - measure_from).as_secs_f64();
    let row = Row::from_hist(label, ops, secs, &hist, server);
    row.print();
    Ok(row)
}

/// One result line.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: String,
    pub unit: &'static str,
    pub ops: u64,
    pub secs: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub load: String,
}

impl Row {
    pub fn from_hist(
        label: &str,
        ops: u64,
        secs: f64,
        hist: &Histogram<u64>,
        server: &Server,
    ) -> Self {
        let (rss_kb, hwm_kb) = server.rss_kb();
        Self {
            label: label.to_owned(),
            unit: "ops",
            ops,
            secs,
            p50_us: hist.value_at_quantile(0.50),
            p95_us: hist.value_at_quantile(0.95),
            p99_us: hist.value_at_quantile(0.99),
            max_us: hist.max(),
            rss_kb,
            hwm_kb,
            load: loadavg(),
        }
    }

    /// A row with only the server's memory (no operations).
    pub fn info(label: &str, server: &Server) -> Self {
        let (rss_kb, hwm_kb) = server.rss_kb();
        Self {
            label: label.to_owned(),
            unit: "ops",
            ops: 0,
            secs: 0.0,
            p50_us: 0,
            p95_us: 0,
            p99_us: 0,
            max_us: 0,
            rss_kb,
            hwm_kb,
            load: loadavg(),
        }
    }

    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs
        } else {
            0.0
        }
    }

    pub fn print(&self) {
        println!(
            "{:<72} {:>10.0} {}/s  p50 {:>8}  p95 {:>8}  p99 {:>8}  max {:>8}  ({} in {:.1}s)  RSS {:.1} MB peak {:.1} MB  load {}",
            self.label,
            self.rate(),
            self.unit,
            ms(self.p50_us),
            ms(self.p95_us),
            ms(self.p99_us),
            ms(self.max_us),
            self.ops,
            self.secs,
            self.rss_kb as f64 / 1024.0,
            self.hwm_kb as f64 / 1024.0,
            self.load
        );
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "scenario": self.label, "unit": self.unit, "ops": self.ops, "secs": self.secs,
            "rate_per_s": self.rate(), "p50_us": self.p50_us, "p95_us": self.p95_us,
            "p99_us": self.p99_us, "max_us": self.max_us, "rss_kb": self.rss_kb,
            "peak_rss_kb": self.hwm_kb, "loadavg": self.load,
        })
    }
}

/// The 1, 5 and 15 minute load averages of the machine (empty where there are none).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Prints the load average at `when` (the start or end of a run).
pub fn print_load(when: &str) {
    println!("# load average at {when}: {}", loadavg());
}

fn ms(us: u64) -> String {
    format!("{:.3}ms", us as f64 / 1000.0)
}

/// Every row of a run, printed as a Markdown table at the end.
pub struct Report {
    rows: Vec<Row>,
    json: Option<PathBuf>,
}

impl Report {
    pub fn new(json: Option<PathBuf>) -> Self {
        Self {
            rows: Vec::new(),
            json,
        }
    }

    pub fn push(&mut self, row: Row) {
        if let Some(path) = &self.json {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{}", row.json());
            }
        }
        self.rows.push(row);
    }

    pub fn print_table(&self) {
        println!();
        println!("| scenario | rate | p50 | p95 | p99 | server RSS after / peak (MB) | load avg |");
        println!("|---|---:|---:|---:|---:|---:|---|");
        for r in &self.rows {
            if r.ops == 0 {
                println!(
                    "| {} | | | | | {:.1} / {:.1} | {} |",
                    r.label,
                    r.rss_kb as f64 / 1024.0,
                    r.hwm_kb as f64 / 1024.0,
                    r.load
                );
            } else {
                println!(
                    "| {} | {:.0} {}/s | {} | {} | {} | {:.1} / {:.1} | {} |",
                    r.label,
                    r.rate(),
                    r.unit,
                    ms(r.p50_us),
                    ms(r.p95_us),
                    ms(r.p99_us),
                    r.rss_kb as f64 / 1024.0,
                    r.hwm_kb as f64 / 1024.0,
                    r.load
                );
            }
        }
    }
}
