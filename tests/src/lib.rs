//! Test harness: boots the services in-process on an ephemeral loopback port with a fresh
//! store, and offers small builders for requests.
//!
//! The store is a sled database in a temporary directory, or, when the environment variable
//! `ADK_TEST_POSTGRES` holds a PostgreSQL connection string, a fresh schema in that database
//! for each server: the same suites then run against the PostgreSQL backend.
//!
//! Helpers panic on failure: they run only inside tests, where a panic is the failure report.

pub mod chat_model;
pub mod pg_cluster;

use std::path::{Path, PathBuf};

use adk_proto::memory::v1::{
    memory_service_client::MemoryServiceClient, MemoryEntry, SearchMemoryRequest,
};
use adk_proto::session::v1::{
    part::Data, session_service_client::SessionServiceClient, AppendEventRequest,
    AppendEventResponse, Content, CreateSessionRequest, Event, EventActions, GetSessionRequest,
    Part, Session, WatchSessionRequest,
};
use prost_types::Timestamp;
use session_svc::{config::Config, server};
use tempfile::TempDir;
use tonic::transport::Channel;

use adk_common::postgres::StoreLocation;
pub use adk_common::sled::durability::SyncMode;

/// The variable naming the PostgreSQL database the suites run against.
pub const POSTGRES_VAR: &str = "ADK_TEST_POSTGRES";

/// The database the suites run against, if any (see the crate docs).
pub fn postgres_url() -> Option<String> {
    std::env::var(POSTGRES_VAR)
        .ok()
        .filter(|url| !url.is_empty())
}

/// A schema name no other server of any test run uses.
fn unique_schema_name() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "t{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or_default()
    )
}

/// Runs `sql` (statements separated by semicolons) on the database at `url`.
async fn execute(url: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects to the test database");
    let driver = tokio::spawn(connection);
    client.batch_execute(sql).await.expect("runs the SQL");
    drop(client);
    let _ = driver.await;
}

/// The connection string of `url` with `schema` as the search path.
fn with_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-csearch_path%3D{schema}")
}

/// A fresh, empty schema in the database at `url`; the returned connection string uses it.
pub async fn fresh_schema(url: &str) -> String {
    let schema = unique_schema_name();
    execute(url, &format!("CREATE SCHEMA {schema}")).await;
    with_schema(url, &schema)
}

/// Loads `dump`, a plain SQL dump (`pg_dump --inserts`) of the schema `dumped`, as a fresh
/// schema of the database at `url`; the returned connection string uses it.
pub async fn restore_schema(url: &str, dump: &str, dumped: &str) -> String {
    let schema = unique_schema_name();
    // Lines starting with a backslash are psql's own commands (`\restrict`), not SQL.
    let sql: String = dump
        .lines()
        .filter(|line| !line.starts_with('\\'))
        .map(|line| line.replace(dumped, &schema) + "\n")
        .collect();
    execute(url, &sql).await;
    with_schema(url, &schema)
}

/// A memory entry as JSON, its content both as text, for people, and as its protobuf encoding
/// in hex, for an exact comparison (the listings of `fixtures/`).
pub fn memory_entry_json(m: &adk_proto::memory::v1::MemoryEntry) -> serde_json::Value {
    use prost::Message;
    let content = m.content.clone().unwrap_or_default();
    let text: String = content
        .parts
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let hex: String = content
        .encode_to_vec()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    serde_json::json!({
        "id": m.id,
        "session_id": m.session_id,
        "author": m.author,
        "timestamp": m.timestamp.map(|t| serde_json::json!({"seconds": t.seconds, "nanos": t.nanos})),
        "custom_metadata": m.custom_metadata,
        "text": text,
        "content_pb_hex": hex,
    })
}

/// Every session of the given `(app, user)` listings as the fixtures of `fixtures/` spell them:
/// each listing in its order, and each session as GetSession returns it, its state text as sent
/// (key order included) and each event's protobuf encoding in hex, for an exact comparison.
pub async fn sessions_json(
    client: &mut SessionServiceClient<Channel>,
    listings: &[(&str, &str)],
) -> serde_json::Value {
    use adk_proto::session::v1::ListSessionsRequest;
    use prost::Message;
    let time = |t: &Option<Timestamp>| t.map(|t| serde_json::json!([t.seconds, t.nanos]));
    let session_json = |s: &Session| {
        let events: Vec<String> = s
            .events
            .iter()
            .map(|e| {
                e.encode_to_vec()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        serde_json::json!({
            "id": s.id, "app_name": s.app_name, "user_id": s.user_id, "state": s.state,
            "create_time": time(&s.create_time), "last_update_time": time(&s.last_update_time),
            "last_sequence": s.last_sequence, "expire_time": time(&s.expire_time),
            "events": events,
        })
    };
    let mut out = Vec::new();
    for (app, user) in listings {
        let listed = client
            .list_sessions(ListSessionsRequest {
                app_name: (*app).into(),
                user_id: Some((*user).into()),
                page_size: 1000,
                page_token: String::new(),
            })
            .await
            .expect("list_sessions")
            .into_inner();
        assert!(listed.next_page_token.is_empty(), "one page");
        let mut sessions = Vec::new();
        for s in &listed.sessions {
            let whole = client
                .get_session(get_request(app, user, &s.id))
                .await
                .expect("get_session")
                .into_inner();
            sessions.push(session_json(&whole));
        }
        out.push(serde_json::json!({
            "app_name": app, "user_id": user,
            "listed": listed.sessions.iter().map(session_json).collect::<Vec<_>>(),
            "sessions": sessions,
        }));
    }
    serde_json::Value::Array(out)
}

/// A session-svc running in this process.
pub struct SessionServer {
    pub addr: std::net::SocketAddr,
    pub client: SessionServiceClient<Channel>,
    running: Option<adk_common::serve::Running>,
    dir: Dir,
}

/// Where a server keeps its data (kept across restarts).
enum Dir {
    Owned(TempDir, Option<String>),
    Borrowed(PathBuf),
}

impl Dir {
    /// A temporary directory, and a fresh schema when the suites run on PostgreSQL.
    async fn fresh() -> Self {
        let schema = match postgres_url() {
            Some(url) => Some(fresh_schema(&url).await),
            None => None,
        };
        Dir::Owned(TempDir::new().expect("temp dir"), schema)
    }

    fn path(&self) -> &Path {
        match self {
            Dir::Owned(d, _) => d.path(),
            Dir::Borrowed(p) => p,
        }
    }

    fn store(&self) -> Option<StoreLocation> {
        match self {
            Dir::Owned(_, Some(url)) => Some(StoreLocation::Postgres(url.clone())),
            _ => None,
        }
    }
}

impl SessionServer {
    /// A server with durable writes on a fresh temporary directory.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A server on a fresh temporary directory, with `configure` applied to its config.
    pub async fn start_with(configure: impl FnOnce(&mut Config)) -> Self {
        Self::boot(Dir::fresh().await, configure).await
    }

    /// A server on an existing data directory (for restarts).
    pub async fn start_in(path: &Path) -> Self {
        Self::boot(Dir::Borrowed(path.to_owned()), |_| {}).await
    }

    async fn boot(dir: Dir, configure: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::ephemeral(dir.path().to_owned());
        config.store = dir.store();
        configure(&mut config);
        let running = server::start(config).await.expect("server starts");
        let addr = running.addr;
        let client = SessionServiceClient::connect(format!("http://{addr}"))
            .await
            .expect("client connects")
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        Self {
            addr,
            client,
            running: Some(running),
            dir,
        }
    }

    /// Stops the server (flushing its store) and starts a new one on the same directory.
    pub async fn restart(mut self) -> Self {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("clean shutdown");
        }
        let dir = std::mem::replace(&mut self.dir, Dir::Borrowed(PathBuf::new()));
        Self::boot(dir, |_| {}).await
    }

    /// Where this server serves `/metrics`, if configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.running.as_ref().and_then(|r| r.metrics_addr)
    }

    /// Shuts the server down (SIGTERM's path) and waits until it has stopped.
    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("clean shutdown");
        }
    }

    /// A new client on its own connection.
    pub async fn connect(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::connect(format!("http://{}", self.addr))
            .await
            .expect("client connects")
    }

    /// Creates a session with an initial state (a JSON value) and returns it.
    pub async fn create(
        &self,
        app: &str,
        user: &str,
        id: &str,
        state: serde_json::Value,
    ) -> Session {
        self.client
            .clone()
            .create_session(create_request(app, user, id, &state.to_string()))
            .await
            .expect("create_session")
            .into_inner()
    }

    /// Appends an event and returns the response.
    pub async fn append(
        &self,
        app: &str,
        user: &str,
        id: &str,
        event: Event,
    ) -> AppendEventResponse {
        self.client
            .clone()
            .append_event(append_request(app, user, id, event))
            .await
            .expect("append_event")
            .into_inner()
    }

    /// Gets a session with all its events.
    pub async fn get(&self, app: &str, user: &str, id: &str) -> Session {
        self.client
            .clone()
            .get_session(get_request(app, user, id))
            .await
            .expect("get_session")
            .into_inner()
    }
}

/// A memory-svc running in this process.
pub struct MemoryServer {
    pub addr: std::net::SocketAddr,
    pub client: MemoryServiceClient<Channel>,
    running: Option<adk_common::serve::Running>,
    dir: Dir,
    session_endpoint: String,
}

impl MemoryServer {
    /// A server with durable writes on a fresh temporary directory, resolving session
    /// references at `session_endpoint`.
    pub async fn start(session_endpoint: &str) -> Self {
        Self::boot(Dir::fresh().await, session_endpoint.to_owned(), None).await
    }

    /// A server on a fresh temporary directory, with `configure` applied to its config.
    pub async fn start_with(
        session_endpoint: &str,
        configure: impl FnOnce(&mut memory_svc::config::Config),
    ) -> Self {
        let dir = Dir::fresh().await;
        let mut config =
            memory_svc::config::Config::ephemeral(dir.path().to_owned(), session_endpoint.into());
        config.store = dir.store();
        configure(&mut config);
        Self::boot_config(dir, config).await
    }

    /// A server on `store` (`None`: sled in a fresh temporary directory, whatever the
    /// environment says).
    pub async fn start_on(session_endpoint: &str, store: Option<StoreLocation>) -> Self {
        let dir = Dir::Owned(TempDir::new().expect("temp dir"), None);
        Self::boot(dir, session_endpoint.to_owned(), store).await
    }

    async fn boot(dir: Dir, session_endpoint: String, store: Option<StoreLocation>) -> Self {
        let mut config =
            memory_svc::config::Config::ephemeral(dir.path().to_owned(), session_endpoint);
        config.store = store.or_else(|| dir.store());
        Self::boot_config(dir, config).await
    }

    async fn boot_config(dir: Dir, config: memory_svc::config::Config) -> Self {
        let session_endpoint = config.session_endpoint.clone();
        let running = memory_svc::server::start(config)
            .await
            .expect("server starts");
        let addr = running.addr;
        let client = MemoryServiceClient::connect(format!("http://{addr}"))
            .await
            .expect("client connects");
        Self {
            addr,
            client,
            running: Some(running),
            dir,
            session_endpoint,
        }
    }

    /// A server on `store`, with `configure` applied to its config: a server started on the
    /// store of another, once that one has shut down, is a restart with other flags.
    pub async fn start_on_with(
        session_endpoint: &str,
        store: StoreLocation,
        configure: impl FnOnce(&mut memory_svc::config::Config),
    ) -> Self {
        let dir = Dir::Owned(TempDir::new().expect("temp dir"), None);
        let mut config =
            memory_svc::config::Config::ephemeral(dir.path().to_owned(), session_endpoint.into());
        config.store = Some(store);
        configure(&mut config);
        Self::boot_config(dir, config).await
    }

    /// Where this server serves `/metrics`, if configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.running.as_ref().and_then(|r| r.metrics_addr)
    }

    /// Stops the server (flushing its store) and starts a new one on the same directory.
    pub async fn restart(mut self) -> Self {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("clean shutdown");
        }
        let dir = std::mem::replace(&mut self.dir, Dir::Borrowed(PathBuf::new()));
        Self::boot(dir, self.session_endpoint.clone(), None).await
    }

    /// Shuts the server down (SIGTERM's path) and waits until it has stopped.
    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("clean shutdown");
        }
    }
}

/// GETs `/metrics` with a bare HTTP/1.1 request.
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The value of the sample with this name whose labels contain every `label`.
pub fn sample(exposition: &str, name: &str, labels: &[&str]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let matches = (series == name || series.starts_with(&format!("{name}{{")))
            && labels.iter().all(|l| series.contains(l));
        matches.then(|| value.parse().unwrap())
    })
}

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

/// The connection string of the schema standing for `data_dir` in the database at `url`: a
/// fresh one the first time (its name is kept in the directory), the same one after, so a
/// server restarted on the same directory finds the same data and no other test's.
pub async fn schema_for(url: &str, data_dir: &Path) -> String {
    let marker = data_dir.join("postgres-url");
    if let Ok(kept) = std::fs::read_to_string(&marker) {
        return kept;
    }
    let fresh = fresh_schema(url).await;
    std::fs::write(&marker, &fresh).expect("writes the schema marker");
    fresh
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

/// A CreateSessionRequest with `state` as its text (any text: refusals are tested too), no
/// time to live.
pub fn create_request(app: &str, user: &str, id: &str, state: &str) -> CreateSessionRequest {
    CreateSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        state: state.into(),
        ..Default::default()
    }
}

/// A GetSessionRequest for the whole session (every event, no reply budget).
pub fn get_request(app: &str, user: &str, id: &str) -> GetSessionRequest {
    GetSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

/// A GetSessionRequest for the session's state and last sequence, without events.
pub fn state_request(app: &str, user: &str, id: &str) -> GetSessionRequest {
    GetSessionRequest {
        num_recent_events: Some(0),
        ..get_request(app, user, id)
    }
}

/// A WatchSessionRequest from the first event on, without partial events.
pub fn watch_request(app: &str, user: &str, id: &str) -> WatchSessionRequest {
    WatchSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        ..Default::default()
    }
}

/// A SearchMemoryRequest with the server's default limit and no filter.
pub fn search_request(app: &str, user: &str, query: &str) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        ..Default::default()
    }
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

/// An AppendEventRequest without concurrency check.
pub fn append_request(app: &str, user: &str, id: &str, event: Event) -> AppendEventRequest {
    AppendEventRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: id.into(),
        event: Some(event),
        expected_last_sequence: None,
    }
}

/// A text event by `author`.
pub fn text_event(author: &str, text: &str) -> Event {
    Event {
        author: author.into(),
        invocation_id: "e-test".into(),
        content: Some(Content {
            role: Some(if author == "user" { "user" } else { "model" }.into()),
            parts: vec![Part {
                data: Some(Data::Text(text.into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// A memory entry `id` by `author` holding `text` (an empty id: the server makes one).
pub fn text_memory(id: &str, author: &str, text: &str) -> MemoryEntry {
    MemoryEntry {
        id: id.into(),
        author: author.into(),
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![Part {
                data: Some(Data::Text(text.into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// An event whose only effect is a state delta.
pub fn delta_event(delta: serde_json::Value) -> Event {
    Event {
        author: "agent".into(),
        actions: Some(EventActions {
            state_delta: delta.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A timestamp `seconds` after the epoch.
pub fn ts(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

/// Parses a JSON text field of a response.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("valid JSON")
}
