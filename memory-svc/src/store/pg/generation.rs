//! The generation job queue, revisions and expiries in PostgreSQL (see `store::generation`).
//! A finished job's end time (`done_ms`) is set with its outcome; pruning deletes by it.
//! A job is claimed with `FOR UPDATE SKIP LOCKED`: replicas polling together each take another
//! job (or none), never the same one, and the lease written in the same transaction keeps it
//! theirs until it runs out.

use adk_proto::memory::v1::GenerationState;
use deadpool_postgres::Transaction;
use prost::Message;

use super::{
    super::{token, Expired, JobRecord, Result, Revision, RevisionRecord, Scope, StoreError},
    schema::db_int,
    PgMemoryStore,
};

fn decode_job(bytes: &[u8]) -> Result<JobRecord> {
    JobRecord::decode(bytes).map_err(|e| StoreError::corrupt(format!("job: {e}")))
}

/// A `memory_revisions` row read as `seq, record`.
fn decode_revision(row: &tokio_postgres::Row) -> Result<Revision> {
    let seq: i64 = row.try_get(0)?;
    let record: &[u8] = row.try_get(1)?;
    Ok(Revision {
        seq: u64::try_from(seq).map_err(|_| StoreError::corrupt("revision seq"))?,
        record: RevisionRecord::decode(record)
            .map_err(|e| StoreError::corrupt(format!("revision: {e}")))?,
    })
}

/// Records a revision in `tx`.
pub(super) async fn revise(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    revision: &RevisionRecord,
) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_revisions (app_name, user_id, memory_id, record)
         VALUES ($1, $2, $3, $4)",
        &[
            &scope.app_name,
            &scope.user_id,
            &revision.memory_id,
            &revision.encode_to_vec(),
        ],
    )
    .await?;
    Ok(())
}

impl PgMemoryStore {
    pub(super) async fn enqueue_now(&self, job: &JobRecord) -> Result<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        insert_job(&tx, job).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn claim_now(
        &self,
        id: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<JobRecord>> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT record FROM memory_jobs
                 WHERE open AND due_ms <= $1 AND ($2::text IS NULL OR id = $2)
                 ORDER BY due_ms LIMIT 1 FOR UPDATE SKIP LOCKED",
                &[&now_ms, &id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut job = decode_job(row.try_get(0)?)?;
        job.attempts += 1;
        job.state = GenerationState::Running as i32;
        job.update_ms = now_ms;
        job.due_ms = now_ms.saturating_add(lease_ms);
        store_job(&tx, &job).await?;
        tx.commit().await?;
        Ok(Some(job))
    }

    pub(super) async fn finish_now(&self, job: &JobRecord) -> Result<bool> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT record FROM memory_jobs WHERE id = $1 FOR UPDATE",
                &[&job.id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let stored = decode_job(row.try_get(0)?)?;
        if stored.attempts != job.attempts || !stored.is_open() {
            return Ok(false);
        }
        store_job(&tx, job).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn job_now(&self, scope: Scope<'_>, id: &str) -> Result<Option<JobRecord>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT record FROM memory_jobs WHERE id = $1 AND app_name = $2 AND user_id = $3",
                &[&id, &scope.app_name, &scope.user_id],
            )
            .await?;
        row.map(|row| decode_job(row.try_get(0)?)).transpose()
    }

    pub(super) async fn revisions_now(
        &self,
        scope: Scope<'_>,
        memory_id: Option<&str>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Revision>, String)> {
        let after = token::decode(scope, page_token)?.map_or(0, db_int);
        let size = page_size.max(1);
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT seq, record FROM memory_revisions
                 WHERE app_name = $1 AND user_id = $2 AND seq > $3
                   AND ($4::text IS NULL OR memory_id = $4)
                 ORDER BY seq LIMIT $5",
                &[
                    &scope.app_name,
                    &scope.user_id,
                    &after,
                    &memory_id,
                    &db_int(size as u64 + 1),
                ],
            )
            .await?;
        let page = rows
            .iter()
            .take(size)
            .map(decode_revision)
            .collect::<Result<Vec<_>>>()?;
        let next = if rows.len() > size {
            token::encode(scope, page.last().map_or(0, |r| r.seq))
        } else {
            String::new()
        };
        Ok((page, next))
    }

    pub(super) async fn revision_now(
        &self,
        scope: Scope<'_>,
        seq: u64,
    ) -> Result<Option<Revision>> {
        self.pool
            .get()
            .await?
            .query_opt(
                "SELECT seq, record FROM memory_revisions
                 WHERE app_name = $1 AND user_id = $2 AND seq = $3",
                &[&scope.app_name, &scope.user_id, &db_int(seq)],
            )
            .await?
            .as_ref()
            .map(decode_revision)
            .transpose()
    }

    /// The revisions a later one of their memory follows, oldest first: those recorded
    /// before `before_ms` (their time is in the record) are deleted.
    pub(super) async fn prune_revisions_now(&self, before_ms: i64, n: usize) -> Result<usize> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT seq, record FROM memory_revisions r
                 WHERE EXISTS (SELECT 1 FROM memory_revisions l
                               WHERE l.app_name = r.app_name AND l.user_id = r.user_id
                                 AND l.memory_id = r.memory_id AND l.seq > r.seq)
                 ORDER BY seq LIMIT $1",
                &[&db_int(n as u64)],
            )
            .await?;
        let mut old = Vec::new();
        for row in &rows {
            let revision = decode_revision(row)?;
            if revision.record.create_ms < before_ms {
                old.push(db_int(revision.seq));
            }
        }
        if old.is_empty() {
            return Ok(0);
        }
        let pruned = client
            .execute("DELETE FROM memory_revisions WHERE seq = ANY($1)", &[&old])
            .await?;
        Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
    }

    pub(super) async fn prune_jobs_now(&self, before_ms: i64, n: usize) -> Result<usize> {
        let pruned = self
            .pool
            .get()
            .await?
            .execute(
                "DELETE FROM memory_jobs WHERE id IN (
                     SELECT id FROM memory_jobs WHERE NOT open AND done_ms < $1
                     ORDER BY done_ms LIMIT $2)",
                &[&before_ms, &db_int(n as u64)],
            )
            .await?;
        Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
    }

    pub(super) async fn expired_now(&self, now_ms: i64, n: usize) -> Result<Vec<Expired>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT app_name, user_id, id FROM memory_entries
                 WHERE expire_ms <= $1 ORDER BY expire_ms LIMIT $2",
                &[&now_ms, &db_int(n as u64)],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Expired {
                    app_name: row.try_get(0)?,
                    user_id: row.try_get(1)?,
                    memory_id: row.try_get(2)?,
                })
            })
            .collect()
    }
}

/// Queues a new job in `tx`.
pub(super) async fn insert_job(tx: &Transaction<'_>, job: &JobRecord) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_jobs (id, app_name, user_id, open, due_ms, record)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &job.id,
            &job.app_name,
            &job.user_id,
            &job.is_open(),
            &job.due_ms,
            &job.encode_to_vec(),
        ],
    )
    .await?;
    Ok(())
}

/// Ends the open jobs of `scope` (see [`JobRecord::ended_by_delete`]), for a delete of all its
/// memories in `tx`. Their rows are locked first, as a job's write locks its own (see
/// [`lock_open_job`]): the two take their locks in one order and never deadlock.
pub(super) async fn end_jobs(tx: &Transaction<'_>, scope: Scope<'_>) -> Result<()> {
    let rows = tx
        .query(
            "SELECT record FROM memory_jobs WHERE open AND app_name = $1 AND user_id = $2
             FOR UPDATE",
            &[&scope.app_name, &scope.user_id],
        )
        .await?;
    for row in &rows {
        let job = decode_job(row.try_get(0)?)?.ended_by_delete();
        store_job(tx, &job).await?;
    }
    Ok(())
}

/// Fails unless the job `id` is open, and keeps its row from changing until `tx`, one of the
/// job's writes, ends: a delete that would end the job waits for the write, or the write finds
/// the job ended.
pub(super) async fn lock_open_job(tx: &Transaction<'_>, id: &str) -> Result<()> {
    let row = tx
        .query_opt(
            "SELECT record FROM memory_jobs WHERE id = $1 FOR SHARE",
            &[&id],
        )
        .await?;
    match row {
        Some(row) if decode_job(row.try_get(0)?)?.is_open() => Ok(()),
        _ => Err(StoreError::JobEnded(id.to_owned())),
    }
}

/// Rewrites a job's record and the columns the queue and pruning read.
async fn store_job(tx: &Transaction<'_>, job: &JobRecord) -> Result<()> {
    tx.execute(
        "UPDATE memory_jobs SET open = $2, due_ms = $3, done_ms = $4, record = $5 WHERE id = $1",
        &[
            &job.id,
            &job.is_open(),
            &job.due_ms,
            &(!job.is_open()).then_some(job.update_ms),
            &job.encode_to_vec(),
        ],
    )
    .await?;
    Ok(())
}
