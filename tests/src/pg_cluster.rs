//! A throwaway PostgreSQL cluster of a test's own: `initdb` in a temporary directory, a server
//! on a free loopback port, stopped and deleted on drop. For what the shared test database
//! cannot offer: server TLS settings, `pg_hba.conf` rules, restarts and crashes.
//!
//! The binaries are those of `ADK_TEST_PG_BIN`, else of the newest `/usr/lib/postgresql/*/bin`
//! (Debian's layout), else `pg_config --bindir`. PostgreSQL refuses to run as root: when the
//! tests do, the cluster belongs to the `postgres` user and its commands run through `runuser`.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::PathBuf,
    process::Output,
};

use tempfile::TempDir;
use tokio::process::Command;

/// The superuser the cluster is created with, and its password.
pub const USER: &str = "adk";
pub const PASSWORD: &str = "adk-cluster-pw";

/// What the server is started with.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// The server's certificate chain and private key (PEM): `ssl = on`.
    pub tls: Option<(String, String)>,
    /// With `tls`: `pg_hba.conf` admits TCP connections over TLS only (`hostssl`).
    pub tls_only: bool,
}

/// `pg_ctl stop` and `restart` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Disconnects the clients, checkpoints and stops.
    Fast,
    /// Kills every server process at once, as a crash would: recovery runs at the next start.
    Immediate,
}

impl StopMode {
    fn arg(self) -> &'static str {
        match self {
            Self::Fast => "fast",
            Self::Immediate => "immediate",
        }
    }
}

/// A running cluster; stopped (immediately) and deleted when dropped.
pub struct Cluster {
    dir: TempDir,
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
}

impl Cluster {
    /// Creates and starts a cluster. Panics (the test's failure) when PostgreSQL is missing.
    pub async fn start(options: ClusterOptions) -> Self {
        let bin = binaries().await;
        let dir = TempDir::new().expect("temp dir");
        let as_postgres = running_as_root();
        std::fs::write(dir.path().join("pw"), PASSWORD).expect("writes the password file");
        std::fs::create_dir(dir.path().join("sock")).expect("creates the socket directory");
        let path = dir.path().display();
        let mut conf = format!(
            "listen_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{path}/sock'\n\
             shared_buffers = 16MB\n\
             max_connections = 60\n"
        );
        let mut hba = String::from("local all all trust\n");
        if let Some((cert, key)) = &options.tls {
            std::fs::write(dir.path().join("server.crt"), cert).expect("writes the certificate");
            let key_path = dir.path().join("server.key");
            std::fs::write(&key_path, key).expect("writes the key");
            std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600))
                .expect("restricts the key");
            conf.push_str(&format!(
                "ssl = on\nssl_cert_file = '{path}/server.crt'\nssl_key_file = '{path}/server.key'\n"
            ));
            hba.push_str("hostssl all all 127.0.0.1/32 scram-sha-256\n");
        }
        if !(options.tls.is_some() && options.tls_only) {
            hba.push_str("host all all 127.0.0.1/32 scram-sha-256\n");
        }
        let mut cluster = Self {
            dir,
            bin,
            as_postgres,
            port: 0,
        };
        if as_postgres {
            cluster.run_as_root(&["chown", "-R", "postgres:"]).await;
        }
        cluster
            .pg(
                "initdb",
                &[
                    "-D",
                    "data",
                    "-U",
                    USER,
                    "--pwfile=pw",
                    "-E",
                    "UTF8",
                    "--no-sync",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                ],
            )
            .await;
        cluster.append("data/postgresql.conf", &conf);
        std::fs::write(cluster.dir.path().join("data/pg_hba.conf"), hba)
            .expect("writes pg_hba.conf");
        // A free port can be taken between choosing and binding it: then choose again.
        for _ in 0..5 {
            cluster.port = free_port();
            let started = cluster
                .pg_status(
                    "pg_ctl",
                    &[
                        "start",
                        "-w",
                        "-D",
                        "data",
                        "-l",
                        "server.log",
                        "-o",
                        &format!("-p {}", cluster.port),
                    ],
                )
                .await;
            if started.status.success() {
                // The port is kept for restarts.
                cluster.append(
                    "data/postgresql.conf",
                    &format!("port = {}\n", cluster.port),
                );
                return cluster;
            }
            if !cluster.log().contains("could not bind") {
                panic!("PostgreSQL does not start:\n{}", cluster.log());
            }
        }
        panic!("no free port for PostgreSQL:\n{}", cluster.log());
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection string to database `postgres` as the superuser, with `params` (e.g.
    /// `"sslmode=disable"`) appended.
    pub fn url(&self, params: &str) -> String {
        self.url_to("127.0.0.1", params)
    }

    /// [`Self::url`] naming the server `host` (which must resolve to 127.0.0.1).
    pub fn url_to(&self, host: &str, params: &str) -> String {
        let query = if params.is_empty() {
            String::new()
        } else {
            format!("?{params}")
        };
        format!(
            "postgres://{USER}:{PASSWORD}@{host}:{}/postgres{query}",
            self.port
        )
    }

    /// `pg_ctl stop -m mode`: clients lose their connections, new ones are refused.
    pub async fn stop(&self, mode: StopMode) {
        self.pg("pg_ctl", &["stop", "-w", "-D", "data", "-m", mode.arg()])
            .await;
    }

    /// `pg_ctl start` after [`Self::stop`].
    pub async fn start_again(&self) {
        self.pg("pg_ctl", &["start", "-w", "-D", "data", "-l", "server.log"])
            .await;
    }

    /// `pg_ctl restart -m mode`.
    pub async fn restart(&self, mode: StopMode) {
        self.pg(
            "pg_ctl",
            &[
                "restart",
                "-w",
                "-D",
                "data",
                "-m",
                mode.arg(),
                "-l",
                "server.log",
            ],
        )
        .await;
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Runs a PostgreSQL program in the cluster's directory; panics with its output on failure.
    async fn pg(&self, program: &str, args: &[&str]) {
        let out = self.pg_status(program, args).await;
        if !out.status.success() {
            panic!(
                "{program} {args:?} failed: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
        }
    }

    async fn pg_status(&self, program: &str, args: &[&str]) -> Output {
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
            c
        } else {
            Command::new(self.bin.join(program))
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    async fn run_as_root(&self, command: &[&str]) {
        let out = Command::new(command[0])
            .args(&command[1..])
            .arg(self.dir.path())
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", command[0]));
        assert!(out.status.success(), "{command:?} failed: {out:?}");
    }

    /// Adds `text` to a file of the cluster (rewritten in place: its owner stays).
    fn append(&self, file: &str, text: &str) {
        let path = self.dir.path().join(file);
        let mut content = std::fs::read_to_string(&path).expect("reads the cluster's file");
        content.push_str(text);
        std::fs::write(&path, content).expect("writes the cluster's file");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            std::process::Command::new(self.bin.join("pg_ctl"))
        };
        // Gone already is fine: the directory is deleted next either way.
        let _ = command
            .args(["stop", "-D", "data", "-m", "immediate"])
            .current_dir(self.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Whether this process runs as root: `/proc/self` belongs to the process's user.
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binds an ephemeral port")
}

/// The directory of `initdb` and `pg_ctl` (see the module docs).
async fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("ADK_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let version: u32 = e.file_name().to_str()?.parse().ok()?;
                    Some((version, e.path().join("bin")))
                })
                .filter(|(_, bin)| bin.join("initdb").exists())
                .max()
                .map(|(_, bin)| bin)
        });
    if let Some(bin) = newest {
        return bin;
    }
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .await
        .expect("PostgreSQL's binaries: set ADK_TEST_PG_BIN or install PostgreSQL");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
