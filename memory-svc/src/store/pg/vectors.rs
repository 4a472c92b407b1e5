//! Entry vectors in PostgreSQL: `memory_vectors` and `memory_vector_model` (see [`super::schema`]).
//! A write applies its vector edits in its own transaction ([`apply`]); the background embedding
//! of older entries stores its vectors under the scope's lock, as writes do ([`put`]). So every
//! transaction that changes a scope's vectors rewrites its `memory_scopes` row, which is what
//! its cached copy is checked against ([`version`]).

use adk_common::keys::Key;
use deadpool_postgres::{GenericClient, Transaction};
use prost::Message;

use super::{
    super::{
        index::text_of,
        vectors::{self, Unembedded, VectorEdits, VectorOp},
        Result, Scope,
    },
    schema::db_int,
};

/// The version of the scope's vectors, `None` for a scope never written (it has none): the
/// scope's version ([`super::scope_version`]) and that of the `memory_vector_model` row, which a
/// change of model rewrites.
pub(super) async fn version(client: &impl GenericClient, scope: Scope<'_>) -> Result<Option<u64>> {
    read_version(client, scope, "").await
}

/// [`version`] read by a write before it changes the scope, locking the scope's row (so it is
/// the version no other write can change until this one commits).
pub(super) async fn locked_version(tx: &Transaction<'_>, scope: Scope<'_>) -> Result<Option<u64>> {
    read_version(tx, scope, " FOR UPDATE OF s").await
}

async fn read_version(
    client: &impl GenericClient,
    scope: Scope<'_>,
    locking: &str,
) -> Result<Option<u64>> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT s.xmin::text, s.next_seq, (SELECT m.xmin::text FROM memory_vector_model m)
             FROM memory_scopes s WHERE s.app_name = $1 AND s.user_id = $2{locking}"
        ))
        .await?;
    let Some(row) = client
        .query_opt(&statement, &[&scope.app_name, &scope.user_id])
        .await?
    else {
        return Ok(None);
    };
    let model: Option<&str> = row.try_get(2)?;
    Ok(Some(super::scope_version(
        row.try_get(0)?,
        row.try_get(1)?,
        model,
    )))
}

/// The scope's key in the vector cache.
pub(super) fn cache_key(scope: Scope<'_>) -> Vec<u8> {
    Key::new()
        .str(scope.app_name)
        .str(scope.user_id)
        .as_bytes()
        .to_vec()
}

/// Applies a write's vector edits in its transaction, after its entry edits.
pub(super) async fn apply(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    edits: &VectorEdits,
) -> Result<()> {
    let (app, user) = (&scope.app_name, &scope.user_id);
    if edits.clear {
        tx.execute(
            "DELETE FROM memory_vectors WHERE app_name = $1 AND user_id = $2",
            &[app, user],
        )
        .await?;
    }
    let (mut put_seqs, mut put_vectors, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for (&seq, op) in &edits.ops {
        match op {
            VectorOp::Put(v) => {
                put_seqs.push(db_int(seq));
                put_vectors.push(vectors::encode(v));
            }
            VectorOp::Delete => deleted.push(db_int(seq)),
        }
    }
    if !deleted.is_empty() {
        tx.execute(
            "DELETE FROM memory_vectors WHERE app_name = $1 AND user_id = $2 AND seq = ANY($3)",
            &[app, user, &deleted],
        )
        .await?;
    }
    if !put_seqs.is_empty() {
        upsert(tx, scope, &put_seqs, &put_vectors).await?;
    }
    Ok(())
}

/// Stores the vectors of one scope's entries that still have the text they were computed from,
/// holding the scope's lock (so no write to it runs meanwhile); returns how many were stored.
pub(super) async fn put(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    vectors: &[(Unembedded, Vec<f32>)],
) -> Result<usize> {
    super::scopes::lock(tx, scope).await?;
    let seqs: Vec<i64> = vectors.iter().map(|(u, _)| db_int(u.seq)).collect();
    let rows = tx
        .query(
            "SELECT seq, content FROM memory_entries
             WHERE app_name = $1 AND user_id = $2 AND seq = ANY($3)",
            &[&scope.app_name, &scope.user_id, &seqs],
        )
        .await?;
    let mut current = std::collections::HashMap::new();
    for row in &rows {
        let seq: i64 = row.try_get(0)?;
        let content: &[u8] = row.try_get(1)?;
        if let Ok(content) = adk_proto::session::v1::Content::decode(content) {
            current.insert(seq, text_of(&content));
        }
    }
    let (mut put_seqs, mut put_vectors) = (Vec::new(), Vec::new());
    for (u, v) in vectors {
        if current.get(&db_int(u.seq)) == Some(&u.text) {
            put_seqs.push(db_int(u.seq));
            put_vectors.push(vectors::encode(v));
        }
    }
    if !put_seqs.is_empty() {
        upsert(tx, scope, &put_seqs, &put_vectors).await?;
    }
    Ok(put_seqs.len())
}

/// Stores `vectors[i]` (encoded) for the entry at `seqs[i]`.
async fn upsert(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    seqs: &[i64],
    vectors: &[Vec<u8>],
) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_vectors (app_name, user_id, seq, vector)
         SELECT $1, $2, seq, vector FROM unnest($3::bigint[], $4::bytea[]) AS v(seq, vector)
         ON CONFLICT (app_name, user_id, seq) DO UPDATE SET vector = EXCLUDED.vector",
        &[&scope.app_name, &scope.user_id, &seqs, &vectors],
    )
    .await?;
    Ok(())
}
