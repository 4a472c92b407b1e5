//! The PostgreSQL side of the metadata index (see [`crate::store::metadata`]): the
//! `memory_metadata` table holds a row (app, user, key, encoded value, seq) per indexed value,
//! written with its entry and removed with it (a cascading foreign key). A filter's ranges are
//! read in one statement of primary-key range scans, one per range.

use std::collections::BTreeSet;

use deadpool_postgres::{GenericClient, Transaction};

use super::super::{metadata, Result, Scope};
use crate::filter::Filter;

/// Indexes the metadata of entries just inserted, given as (seq, metadata) pairs.
pub(super) async fn insert<'a>(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    entries: impl IntoIterator<Item = (i64, &'a str)>,
) -> Result<()> {
    let (mut seqs, mut keys, mut values) = (vec![], vec![], vec![]);
    for (seq, custom_metadata) in entries {
        for (key, value) in metadata::values(custom_metadata) {
            seqs.push(seq);
            keys.push(key);
            values.push(value);
        }
    }
    if seqs.is_empty() {
        return Ok(());
    }
    let statement = tx
        .prepare_cached(
            "INSERT INTO memory_metadata (app_name, user_id, key, value, seq)
             SELECT $1, $2, d.key, d.value, d.seq
             FROM unnest($3::text[], $4::bytea[], $5::bigint[]) AS d(key, value, seq)
             ON CONFLICT DO NOTHING",
        )
        .await?;
    tx.execute(
        &statement,
        &[&scope.app_name, &scope.user_id, &keys, &values, &seqs],
    )
    .await?;
    Ok(())
}

/// The seqs each of a filter's scans finds (`$3`: scan numbers, `$4`: keys, `$5` and `$6`: the
/// ranges' ends): one range probe of the primary key per scan (`OFFSET 0` keeps each a probe, a
/// plan that does not depend on the statistics, as in `super::search`), its seqs in one array
/// (a row per seq cost a thousand rows' framing and decoding for a 1% filter at 100,000).
pub(super) const CANDIDATES: &str =
    "SELECT q.scan, m.seqs FROM unnest($3::int[], $4::text[], $5::bytea[], $6::bytea[])
         AS q(scan, key, low, high)
     CROSS JOIN LATERAL (
         SELECT array_agg(r.seq) AS seqs FROM (
             SELECT seq FROM memory_metadata
             WHERE app_name = $1 AND user_id = $2 AND key = q.key
                 AND value >= q.low AND value < q.high
             OFFSET 0
         ) AS r
     ) AS m";

/// The seqs of `scope` that may pass `filter`, in order; `None` when the index cannot narrow
/// it (every entry is a candidate).
pub(super) async fn candidates(
    client: &impl GenericClient,
    scope: Scope<'_>,
    filter: &Filter,
) -> Result<Option<BTreeSet<u64>>> {
    let Some(plan) = metadata::Plan::of(filter) else {
        return Ok(None);
    };
    let (mut keys, mut lows, mut highs, mut scans) = (vec![], vec![], vec![], vec![]);
    for (i, scan) in plan.scans.iter().enumerate() {
        keys.push(scan.key.as_str());
        lows.push(scan.low.as_slice());
        highs.push(scan.high.as_slice());
        scans.push(i as i32);
    }
    let statement = client.prepare_cached(CANDIDATES).await?;
    let rows = client
        .query(
            &statement,
            &[
                &scope.app_name,
                &scope.user_id,
                &scans,
                &keys,
                &lows,
                &highs,
            ],
        )
        .await?;
    let mut found = vec![BTreeSet::new(); plan.scans.len()];
    for row in &rows {
        let (scan, seqs): (i32, Option<Vec<i64>>) = (row.try_get(0)?, row.try_get(1)?);
        if let Some(set) = found.get_mut(scan as usize) {
            set.extend(
                seqs.into_iter()
                    .flatten()
                    .filter_map(|s| u64::try_from(s).ok()),
            );
        }
    }
    Ok(Some(plan.combine(found)))
}

/// Indexes the metadata of every stored entry (a store converted from schema 7), in `tx`.
pub(super) async fn backfill(tx: &Transaction<'_>) -> Result<()> {
    let rows = tx
        .query(
            "SELECT app_name, user_id, seq, custom_metadata FROM memory_entries
             WHERE custom_metadata <> '' ORDER BY app_name, user_id",
            &[],
        )
        .await?;
    let mut indexed = 0usize;
    for scope_rows in rows.chunk_by(|a, b| {
        a.get::<_, &str>(0) == b.get::<_, &str>(0) && a.get::<_, &str>(1) == b.get::<_, &str>(1)
    }) {
        let Some(first) = scope_rows.first() else {
            continue;
        };
        let (app_name, user_id): (&str, &str) = (first.try_get(0)?, first.try_get(1)?);
        let mut entries = Vec::with_capacity(scope_rows.len());
        for row in scope_rows {
            entries.push((row.try_get::<_, i64>(2)?, row.try_get::<_, &str>(3)?));
        }
        indexed += entries.len();
        insert(tx, Scope { app_name, user_id }, entries).await?;
    }
    if indexed > 0 {
        tracing::info!(entries = indexed, "indexed the memories' metadata");
    }
    Ok(())
}
