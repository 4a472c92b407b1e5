//! session-svc and memory-svc running in this process, on a sled directory or a PostgreSQL
//! schema.

use std::path::{Path, PathBuf};

use adk_common::postgres::StoreLocation;
use adk_proto::memory::v1::memory_service_client::MemoryServiceClient;
use adk_proto::session::v1::{
    session_service_client::SessionServiceClient, AppendEventResponse, Event, Session,
};
use session_svc::{config::Config, server};
use tempfile::TempDir;
use tonic::transport::Channel;

use crate::{
    postgres::{fresh_schema, postgres_url},
    requests::{append_request, create_request, get_request},
};

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
