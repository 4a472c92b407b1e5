//! The PostgreSQL database the suites run against, when `ADK_TEST_POSTGRES` names one: a
//! fresh schema per server, or one loaded from a dump.
//!
//! A server's schema outlives it (a test restarts servers on the same data), so nothing drops it
//! when the server stops. Instead the first schema a test process makes is preceded by a sweep of
//! those made more than an hour before: each run of the suites clears what earlier runs left.

use std::path::Path;

/// The variable naming the PostgreSQL database the suites run against.
pub const POSTGRES_VAR: &str = "ADK_TEST_POSTGRES";

/// The database the suites run against, if any (see the crate docs).
pub fn postgres_url() -> Option<String> {
    std::env::var(POSTGRES_VAR)
        .ok()
        .filter(|url| !url.is_empty())
}

/// A schema name no other server of any test run uses, ending in the microseconds since the
/// epoch it was made at (see [`sweep_schemas`]).
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

/// How old a schema of [`unique_schema_name`]'s form is when [`sweep_schemas`] drops it:
/// older than any test process lives, so no server of a run still going loses its data.
const LEFT_BEHIND: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// Drops the schemas of [`unique_schema_name`]'s form made more than [`LEFT_BEHIND`] ago.
pub async fn sweep_schemas(url: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let before = now.saturating_sub(LEFT_BEHIND).as_micros();
    let listed = "SELECT nspname FROM pg_namespace WHERE nspname ~ '^t[0-9]+_[0-9]+_[0-9]+$'";
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects to the test database");
    let driver = tokio::spawn(connection);
    let rows = client.query(listed, &[]).await.expect("lists the schemas");
    for row in rows {
        let schema: String = row.get(0);
        let made = schema
            .rsplit('_')
            .next()
            .and_then(|m| m.parse::<u128>().ok());
        if made.is_some_and(|made| made < before) {
            // Another process sweeping at the same time may drop it first.
            let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
            let _ = client.batch_execute(&sql).await;
        }
    }
    drop(client);
    let _ = driver.await;
}

/// [`sweep_schemas`], once per process.
async fn sweep(url: &str) {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT.get_or_init(|| sweep_schemas(url)).await;
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
    sweep(url).await;
    let schema = unique_schema_name();
    execute(url, &format!("CREATE SCHEMA {schema}")).await;
    with_schema(url, &schema)
}

/// Loads `dump`, a plain SQL dump (`pg_dump --inserts`) of the schema `dumped`, as a fresh
/// schema of the database at `url`; the returned connection string uses it.
pub async fn restore_schema(url: &str, dump: &str, dumped: &str) -> String {
    sweep(url).await;
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
