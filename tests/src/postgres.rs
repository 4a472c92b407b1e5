//! The PostgreSQL database the suites run against, when `ADK_TEST_POSTGRES` names one: a
//! fresh schema per server, or one loaded from a dump.

use std::path::Path;

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
