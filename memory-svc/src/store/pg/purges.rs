//! Purge records in PostgreSQL (see [`crate::purge`]): `memory_purges`, by id; and the users
//! of an app, from its scopes in `memory_scopes`.

use prost::Message;

use super::{
    super::{PurgeRecord, Result, StoreError},
    PgMemoryStore,
};

impl PgMemoryStore {
    pub(super) async fn put_purge_now(&self, purge: &PurgeRecord) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO memory_purges (id, create_ms, record) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record",
                &[&purge.id, &purge.create_ms, &purge.encode_to_vec()],
            )
            .await?;
        Ok(())
    }

    pub(super) async fn purges_now(&self) -> Result<Vec<PurgeRecord>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT record FROM memory_purges ORDER BY create_ms, id",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let record: &[u8] = row.try_get(0)?;
                PurgeRecord::decode(record).map_err(|e| StoreError::corrupt(format!("purge: {e}")))
            })
            .collect()
    }

    pub(super) async fn remove_purge_now(&self, id: &str) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute("DELETE FROM memory_purges WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    pub(super) async fn users_now(&self, app: &str) -> Result<Vec<String>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT user_id FROM memory_scopes WHERE app_name = $1 ORDER BY user_id",
                &[&app],
            )
            .await?;
        rows.iter().map(|row| Ok(row.try_get(0)?)).collect()
    }
}
