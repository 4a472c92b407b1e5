//! Purge records in the embedded store (see [`crate::purge`]): the `purges` tree, keyed by id, written and
//! removed durably; and the users of an app, from the `stats` records of its scopes.

use adk_common::keys::{Key, KeyReader};
use prost::Message;

use super::{
    super::{PurgeRecord, Result, StoreError},
    records::decode,
    EmbeddedMemoryStore,
};

impl EmbeddedMemoryStore {
    pub(super) fn put_purge_now(&self, purge: &PurgeRecord) -> Result<()> {
        self.purges
            .insert(purge.id.as_bytes(), purge.encode_to_vec())?;
        Ok(())
    }

    pub(super) fn remove_purge_now(&self, id: &str) -> Result<()> {
        self.purges.remove(id.as_bytes())?;
        Ok(())
    }

    pub(super) fn purges_now(&self) -> Result<Vec<PurgeRecord>> {
        let mut purges = self
            .purges
            .iter()
            .values()
            .map(|value| decode::<PurgeRecord>(&value?, "purge"))
            .collect::<Result<Vec<_>>>()?;
        purges.sort_by_key(|p| p.create_ms);
        Ok(purges)
    }

    /// The users of `app`: the scopes of its `stats` records.
    pub(super) fn users_now(&self, app: &str) -> Result<Vec<String>> {
        let prefix = Key::new().str(app);
        let mut users = Vec::new();
        for key in self.stats.scan_prefix(&prefix).keys() {
            let key = key?;
            let mut reader = KeyReader::new(&key);
            match (reader.str(), reader.str()) {
                (Some(_), Some(user)) => users.push(user),
                _ => return Err(StoreError::corrupt("stats key")),
            }
        }
        Ok(users)
    }
}
