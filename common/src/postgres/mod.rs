//! PostgreSQL plumbing shared by both services: where the store lives (`--store`), the
//! connection pool (over TLS as the connection string asks, see [`tls`]), versioned schema
//! migrations, retrying transactions that lost a race, and the LISTEN connection that carries
//! other replicas' notifications.
//!
//! Each service keeps its own SQL (in its `store` module); this module knows nothing of sessions
//! or memories.

pub mod tls;

use std::{
    fmt,
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    str::FromStr,
    time::Duration,
};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Transaction};
use tokio::task::JoinHandle;
use tokio_postgres::{error::SqlState, AsyncMessage};
use tokio_postgres_rustls::MakeRustlsConnect;

use tls::Connection;

use crate::{
    storage::{StorageError, StorageErrorKind},
    versions,
};

/// Where a service keeps its data: the `--store` flag.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// `embedded:PATH` (or `sled:PATH`, its earlier name): the service's embedded database in a
    /// directory (one process per directory).
    Embedded(PathBuf),
    /// `postgres://...` or `postgresql://...`: a PostgreSQL database shared by any number of
    /// replicas.
    Postgres(String),
}

impl FromStr for StoreLocation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s
            .strip_prefix("embedded:")
            .or_else(|| s.strip_prefix("sled:"))
        {
            if path.is_empty() {
                return Err("embedded: needs a directory, e.g. embedded:./data".into());
            }
            return Ok(Self::Embedded(PathBuf::from(path)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Connection::parse(s).map_err(|e| e.to_string())?;
            return Ok(Self::Postgres(s.to_owned()));
        }
        Err("expected embedded:PATH or postgres://USER@HOST/DB".into())
    }
}

impl StoreLocation {
    /// The same location, with `root_cert` (`--pg-ca-file`) as the PostgreSQL root certificate
    /// unless the connection string names one (see [`tls::with_root_cert`]).
    pub fn with_root_cert(self, root_cert: Option<&Path>) -> Self {
        match (self, root_cert) {
            (Self::Postgres(url), Some(path)) => Self::Postgres(tls::with_root_cert(&url, path)),
            (location, _) => location,
        }
    }
}

/// Connection strings carry passwords: they are never printed.
impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Embedded(path) => write!(f, "embedded:{}", path.display()),
            Self::Postgres(url) => match Connection::parse(url) {
                Ok(c) => write!(f, "postgres://… (sslmode={})", c.ssl_mode.name()),
                Err(_) => f.write_str("postgres://…"),
            },
        }
    }
}

/// A failure talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("no database connection: {}", describe_pool(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database error: {}", describe(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("invalid PostgreSQL connection string: {0}")]
    Config(String),
    #[error(transparent)]
    TooNew(#[from] versions::TooNew),
}

impl PgError {
    /// The transaction lost a race (serialization failure or deadlock) and can simply run again.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        )
    }

    /// The database could not be reached (as opposed to refusing a statement): UNAVAILABLE.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Pool(_) => true,
            Self::Db(e) => match e.as_db_error() {
                // The server ended the session or is not accepting any: shutting down
                // (57P01), crashed (57P02), starting up (57P03), or a connection failure (08).
                Some(db) => {
                    let code = db.code().code();
                    code.starts_with("57P") || code.starts_with("08")
                }
                // No server error and an I/O cause: the connection, not the statement, failed.
                None => {
                    e.is_closed()
                        || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
                }
            },
            Self::Config(_) | Self::TooNew(_) => false,
        }
    }

    fn code(&self) -> Option<&SqlState> {
        match self {
            Self::Db(e) => e.code(),
            _ => None,
        }
    }
}

/// What a PostgreSQL failure means to the caller.
impl From<PgError> for StorageError {
    fn from(e: PgError) -> Self {
        let kind = if e.is_unavailable() {
            StorageErrorKind::Unavailable
        } else if e.is_conflict() {
            StorageErrorKind::Conflict
        } else {
            StorageErrorKind::Internal
        };
        Self::new(kind, e)
    }
}

impl From<tokio_postgres::Error> for StorageError {
    fn from(e: tokio_postgres::Error) -> Self {
        PgError::from(e).into()
    }
}

impl From<deadpool_postgres::PoolError> for StorageError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        PgError::from(e).into()
    }
}

/// The server's own words for what it refused (tokio-postgres shows only "db error"), or the
/// whole chain of causes (it shows only the first: "error performing TLS handshake").
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// [`describe`] for the error of a connection the pool could not open.
fn describe_pool(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

/// Reads the connection string `url`: the server and the TLS connector to reach it with.
fn connection(url: &str) -> Result<(tokio_postgres::Config, MakeRustlsConnect), PgError> {
    let connection = Connection::parse(url)?;
    let tls = connection.tls()?;
    Ok((connection.config, tls))
}

/// Opens a pool of at most `max_connections` to the database `url` names.
pub fn pool(url: &str, max_connections: usize) -> Result<Pool, PgError> {
    let (config, tls) = connection(url)?;
    let manager = Manager::from_config(
        config,
        tls,
        ManagerConfig {
            // A connection left in a bad state by a cancelled call is tested before reuse.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(max_connections.max(1))
        .build()
        .map_err(|e| PgError::Config(e.to_string()))
}

/// How often [`health`] checks the database, and how long a check may take.
const HEALTH_INTERVAL: Duration = Duration::from_secs(1);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks every second that the database `pool` connects to answers: the receiver holds
/// `Some(reason)` while it does not, `None` while it does (the server's health follows it).
/// The check has a connection of its own, outside the pool: a pool busy with calls is not a
/// database gone. Checks stop when every receiver is gone.
pub fn health(pool: Pool) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
    use deadpool::managed::Manager as _;
    let (tx, rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        let mut connection: Option<deadpool_postgres::ClientWrapper> = None;
        loop {
            let check = async {
                let client = match connection.take() {
                    Some(client) if !client.is_closed() => client,
                    _ => pool.manager().create().await?,
                };
                client.simple_query("").await?;
                Ok::<_, PgError>(client)
            };
            let failure: Option<std::sync::Arc<str>> =
                match tokio::time::timeout(HEALTH_TIMEOUT, check).await {
                    Ok(Ok(client)) => {
                        connection = Some(client);
                        None
                    }
                    Ok(Err(e)) => Some(e.to_string().into()),
                    Err(_) => Some(
                        format!(
                            "the database did not answer within {} s",
                            HEALTH_TIMEOUT.as_secs()
                        )
                        .into(),
                    ),
                };
            tx.send_if_modified(|current| {
                if current.is_some() == failure.is_some() {
                    return false;
                }
                match &failure {
                    Some(reason) => tracing::warn!(%reason, "database unreachable"),
                    None => tracing::info!("database reachable again"),
                }
                *current = failure;
                true
            });
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(HEALTH_INTERVAL) => {}
            }
        }
    });
    rx
}

/// Publishes the pool's connections (open, and idle among them) as gauges labelled `service`.
pub fn record_pool(pool: &Pool, service: &'static str) {
    let status = pool.status();
    metrics::gauge!("store_pg_connections", "service" => service, "state" => "open")
        .set(status.size as f64);
    metrics::gauge!("store_pg_connections", "service" => service, "state" => "idle")
        .set(status.available as f64);
}

/// Brings the schema of `component` up to date: step `i` of `steps` is version `i + 1`, run in
/// one transaction with its version record in `schema_versions`. Replicas starting at once
/// queue on an advisory lock (one per schema, taken before anything is read or created), so
/// each step runs exactly once. A schema at a version newer than `steps` reach was written by a
/// newer release: refused ([`versions::check`]), nothing is changed.
pub async fn migrate(pool: &Pool, component: &str, steps: &[&str]) -> Result<(), PgError> {
    migrate_converting(pool, component, steps, |_, _| Box::pin(async { Ok(()) })).await
}

/// A conversion of stored data that SQL alone cannot make (see [`migrate_converting`]).
pub type Conversion<'t, E> = Pin<Box<dyn Future<Output = Result<(), E>> + Send + 't>>;

/// [`migrate`], then `convert` in the same transaction, under the same lock, given the version
/// the schema was at before: it runs exactly once for each step, like the steps, and a
/// failure rolls back the steps too.
pub async fn migrate_converting<E, C>(
    pool: &Pool,
    component: &str,
    steps: &[&str],
    convert: C,
) -> Result<(), E>
where
    E: From<PgError>,
    C: for<'t> FnOnce(&'t Transaction<'t>, u32) -> Conversion<'t, E>,
{
    let supported = u32::try_from(steps.len()).unwrap_or(u32::MAX);
    let mut client = pool.get().await.map_err(PgError::from)?;
    let tx = client.transaction().await.map_err(PgError::from)?;
    let current = migrate_in(&tx, component, steps, supported).await?;
    convert(&tx, current).await?;
    tx.commit().await.map_err(PgError::from)?;
    Ok(())
}

/// The steps of [`migrate`] in `tx`; returns the version the schema was at before them.
async fn migrate_in(
    tx: &Transaction<'_>,
    component: &str,
    steps: &[&str],
    supported: u32,
) -> Result<u32, PgError> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('adk schema ' || coalesce(current_schema(), '')))",
        &[],
    )
    .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (
             component text PRIMARY KEY,
             version integer NOT NULL
         )",
    )
    .await?;
    let current: i32 = tx
        .query_opt(
            "SELECT version FROM schema_versions WHERE component = $1",
            &[&component],
        )
        .await?
        .map(|row| row.get(0))
        .unwrap_or(0);
    let current = u32::try_from(current).unwrap_or(0);
    versions::check(&format!("{component} database schema"), current, supported)?;
    for (version, step) in (1..=supported).zip(steps) {
        if version <= current {
            continue;
        }
        tx.batch_execute(step).await?;
        tx.execute(
            "INSERT INTO schema_versions (component, version) VALUES ($1, $2)
             ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            &[&component, &i32::try_from(version).unwrap_or(i32::MAX)],
        )
        .await?;
        tracing::info!(component, version, "database schema migrated");
    }
    Ok(current)
}

/// Runs `attempt` until it does not fail with a conflict (see [`PgError::is_conflict`]), at most
/// a few times; `conflict` tells whether an error is one.
///
/// Each attempt must be a whole transaction, from `BEGIN` (and its idempotency check) to
/// `COMMIT`: a conflict means the server rolled the transaction back, so nothing of it was
/// applied and running it again is safe. Nothing else is retried here; in particular a lost
/// connection may have lost the answer to a `COMMIT` that took effect, so such an error is
/// returned, never re-run blindly.
pub async fn retry_conflicts<T, E, F, Fut>(
    mut attempt: F,
    conflict: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    const ATTEMPTS: u32 = 20;
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if tries < ATTEMPTS && conflict(&e) => {
                metrics::counter!("store_pg_conflict_retries").increment(1);
                // A growing, jittered pause, so the winners finish and the losers do not all
                // come back at the same instant.
                let ceiling = 1 + u64::from(tries.min(10)) * 2;
                tokio::time::sleep(Duration::from_micros(500 + jitter() % (ceiling * 1000))).await;
                tries += 1;
            }
            result => return result,
        }
    }
}

/// A random number from the standard library's per-process hash keys.
fn jitter() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// What a [`listen`] connection reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// A `NOTIFY` payload.
    Payload(String),
    /// The connection was (re)established: notifications sent while it was down are lost, so
    /// everything that waits on them should read again.
    Subscribed,
}

/// Keeps a dedicated connection listening on `channel` (reconnecting after failures) and hands
/// every notification to `deliver`; ends when `deliver` returns `false`.
pub fn listen(
    url: &str,
    channel: String,
    deliver: impl Fn(Notification) -> bool + Send + Sync + 'static,
) -> Result<JoinHandle<()>, PgError> {
    let (config, tls) = connection(url)?;
    Ok(tokio::spawn(async move {
        const FIRST_RETRY: Duration = Duration::from_millis(100);
        let mut backoff = FIRST_RETRY;
        loop {
            let mut subscribed = false;
            match listen_once(&config, &tls, &channel, &deliver, &mut subscribed).await {
                Ok(()) => return,
                Err(error) => {
                    tracing::warn!(error, %channel, "notification connection lost; reconnecting");
                    // A connection that was up is replaced at once; failures to connect back
                    // off, up to 5 s.
                    if subscribed {
                        backoff = FIRST_RETRY;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }))
}

/// One connection's life: `Ok` when `deliver` asked to stop, `Err(why)` when the connection
/// was lost; `subscribed` tells whether it got as far as listening.
async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    channel: &str,
    deliver: &(impl Fn(Notification) -> bool + Send + Sync),
    subscribed: &mut bool,
) -> Result<(), String> {
    let (client, mut connection) = config
        .connect(tls.clone())
        .await
        .map_err(|e| describe(&e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // The connection delivers notifications only while it is polled, and the client's LISTEN
    // needs it polled too, so it runs on its own task.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n.payload().to_owned()).is_err() {
                        return String::new();
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return describe(&e),
                None => return "closed by the server".to_owned(),
            }
        }
    });
    let outcome = async {
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(|e| describe(&e))?;
        *subscribed = true;
        if !deliver(Notification::Subscribed) {
            return Ok(());
        }
        while let Some(payload) = rx.recv().await {
            if !deliver(Notification::Payload(payload)) {
                return Ok(());
            }
        }
        // The driver ended: it says why.
        Err(String::new())
    }
    .await;
    drop(client);
    match outcome {
        Err(e) if e.is_empty() => Err(driver.await.unwrap_or_else(|e| e.to_string())),
        other => {
            driver.abort();
            other
        }
    }
}
