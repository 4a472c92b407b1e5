//! The `memory_scopes` row of each (app, user): its statistics, and the lock every transaction
//! that changes the scope (a write, the background embedding of its entries) takes by rewriting
//! it.

use deadpool_postgres::Transaction;

use super::super::{plan::Stats, Result, Scope};

/// Locks the scope (creating its row) and reads its statistics.
pub(super) async fn lock(tx: &Transaction<'_>, scope: Scope<'_>) -> Result<Stats> {
    let row = tx
        .query_one(
            "INSERT INTO memory_scopes (app_name, user_id, docs, total_len, next_seq)
             VALUES ($1, $2, 0, 0, 1)
             ON CONFLICT (app_name, user_id) DO UPDATE SET docs = memory_scopes.docs
             RETURNING docs, total_len, next_seq",
            &[&scope.app_name, &scope.user_id],
        )
        .await?;
    let counter = |i| -> Result<u64> {
        let v: i64 = row.try_get(i)?;
        Ok(u64::try_from(v).unwrap_or(0))
    };
    Ok(Stats {
        docs: counter(0)?,
        total_len: counter(1)?,
        next_seq: counter(2)?,
    })
}
