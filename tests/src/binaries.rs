//! Server binaries run as processes (the `CARGO_BIN_EXE_...` of the calling test).

use std::path::Path;

use tonic::transport::Channel;

use crate::postgres::{postgres_url, schema_for};

/// A server process, killed (SIGKILL) at the latest when dropped, so a failing test leaves
/// none behind.
pub struct ServerProcess(std::process::Child);

impl ServerProcess {
    /// The process id (to send it signals).
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL, then wait until the process is gone.
    pub fn kill(&mut self) {
        // Already exited is fine: either way it is gone after `wait`.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts a server binary (`CARGO_BIN_EXE_...` of the calling test) listening on an ephemeral
/// loopback port with `data_dir` (or, on PostgreSQL, the schema standing for it), waits for its
/// ready line, and returns the process with a channel to it.
pub async fn spawn_binary(binary: &str, data_dir: &Path) -> (ServerProcess, Channel) {
    spawn_binary_with(binary, data_dir, &[]).await
}

/// [`spawn_binary`] with more flags.
pub async fn spawn_binary_with(
    binary: &str,
    data_dir: &Path,
    flags: &[&str],
) -> (ServerProcess, Channel) {
    use std::io::BufRead;
    let mut command = std::process::Command::new(binary);
    command.args(flags);
    if let Some(url) = postgres_url() {
        command.arg("--store").arg(schema_for(&url, data_dir).await);
    }
    let mut child = command
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the server starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    })
    .await
    .expect("reader task")
    .expect("reads the ready line");
    // "<name> listening on <addr>"
    let addr = match line.trim().split_once(" listening on ") {
        Some((_, addr)) => addr.to_owned(),
        None => panic!("unexpected first line {line:?}"),
    };
    let child = ServerProcess(child);
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid address")
        .connect()
        .await
        .expect("connects");
    (child, channel)
}

/// Runs a server binary on the sled database in `data_dir` that it must refuse: returns what
/// it wrote on stderr once it has exited with a failure. Panics if it serves instead (its ready
/// line) or exits successfully.
pub fn refused_data_dir(binary: &str, env_prefix: &str, data_dir: &Path) -> String {
    let mut command = std::process::Command::new(binary);
    // Flags fall back to <PREFIX>_* variables: none may leak in.
    for (name, _) in std::env::vars() {
        if name.starts_with(env_prefix) {
            command.env_remove(name);
        }
    }
    let out = command
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{binary} served: {stdout}");
    assert!(
        !stdout.contains("listening on"),
        "{binary} served: {stdout}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}
