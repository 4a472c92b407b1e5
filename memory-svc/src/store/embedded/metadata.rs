//! The embedded store's side of the metadata index (see [`crate::store::metadata`]): the `metadata` tree
//! holds a key (app, user, metadata key, encoded value, seq) per indexed value, its value the
//! seq. Writes keep it in step with `entries` in their transactions (see [`super::write`]);
//! [`super::migrate::build_metadata`] builds it for a store written before it was kept.

use std::collections::BTreeSet;

use adk_common::keys::Key;

use super::{records::u64_value, EmbeddedMemoryStore, Result};
use crate::{filter::Filter, store::metadata};

/// The index keys of an entry of `scope` stored at `seq` with this metadata.
pub(super) fn keys(scope: &Key, seq: u64, custom_metadata: &str) -> Vec<Vec<u8>> {
    metadata::values(custom_metadata)
        .into_iter()
        .map(|(key, value)| {
            let mut k = scope.clone().str(&key).into_vec();
            k.extend_from_slice(&value);
            k.extend_from_slice(&seq.to_be_bytes());
            k
        })
        .collect()
}

impl EmbeddedMemoryStore {
    /// The seqs of `scope` that may pass `filter`, in order; `None` when the index cannot
    /// narrow it (every entry is a candidate).
    pub(super) fn candidates(&self, scope: &Key, filter: &Filter) -> Result<Option<BTreeSet<u64>>> {
        let Some(plan) = metadata::Plan::of(filter) else {
            return Ok(None);
        };
        let mut found = Vec::with_capacity(plan.scans.len());
        for scan in &plan.scans {
            let prefix = scope.clone().str(&scan.key).into_vec();
            let low = [prefix.as_slice(), &scan.low].concat();
            let high = [prefix.as_slice(), &scan.high].concat();
            let mut seqs = BTreeSet::new();
            for value in self.metadata.range(low..high).values() {
                seqs.insert(u64_value(&value?, "metadata index")?);
            }
            found.push(seqs);
        }
        Ok(Some(plan.combine(found)))
    }
}
