//! Event streams in PostgreSQL (see `store::streams`): `memory_streams` holds each stream with
//! buffered events (their count, the time of the last), `memory_stream_events` every event a
//! stream was given, in the order they came (`seq`). Every call locks the stream's row first
//! (`FOR UPDATE`): appends to one stream, and the handoffs of replicas' quiet timers, take
//! turns, so a buffer is handed to one job only.

use adk_proto::session::v1::Event;
use deadpool_postgres::Transaction;
use prost::Message;

use super::{
    super::{Appended, Buffered, JobRecord, Result, Scope, StoreError, StreamKey},
    generation::insert_job,
    PgMemoryStore,
};

/// The stream's key as statement parameters 1 to 3.
fn names<'a>(stream: &'a StreamKey<'a>) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 3] {
    [
        &stream.scope.app_name,
        &stream.scope.user_id,
        &stream.stream_id,
    ]
}

/// Hands the stream's buffered events to `job` and queues it, in `tx` (which holds the
/// stream's row).
async fn hand_off(
    tx: &Transaction<'_>,
    stream: StreamKey<'_>,
    mut job: JobRecord,
) -> Result<JobRecord> {
    let [app, user, id] = names(&stream);
    let rows = tx
        .query(
            "SELECT event FROM memory_stream_events
             WHERE app_name = $1 AND user_id = $2 AND stream_id = $3 AND job_id IS NULL
             ORDER BY seq",
            &[app, user, id],
        )
        .await?;
    for row in &rows {
        let event: &[u8] = row.try_get(0)?;
        job.events.push(
            Event::decode(event).map_err(|e| StoreError::corrupt(format!("stream event: {e}")))?,
        );
    }
    insert_job(tx, &job).await?;
    tx.execute(
        "UPDATE memory_stream_events SET event = NULL, job_id = $4
         WHERE app_name = $1 AND user_id = $2 AND stream_id = $3 AND job_id IS NULL",
        &[app, user, id, &job.id],
    )
    .await?;
    tx.execute(
        "DELETE FROM memory_streams WHERE app_name = $1 AND user_id = $2 AND stream_id = $3",
        &[app, user, id],
    )
    .await?;
    Ok(job)
}

impl PgMemoryStore {
    pub(super) async fn append_stream_now(
        &self,
        stream: StreamKey<'_>,
        events: Vec<Event>,
        now_ms: i64,
        trigger: usize,
        job: JobRecord,
    ) -> Result<Appended> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let [app, user, id] = names(&stream);
        tx.execute(
            "INSERT INTO memory_streams (app_name, user_id, stream_id, buffered, last_ms)
             VALUES ($1, $2, $3, 0, $4) ON CONFLICT DO NOTHING",
            &[app, user, id, &now_ms],
        )
        .await?;
        let buffered: i32 = tx
            .query_one(
                "SELECT buffered FROM memory_streams
                 WHERE app_name = $1 AND user_id = $2 AND stream_id = $3 FOR UPDATE",
                &[app, user, id],
            )
            .await?
            .try_get(0)?;
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let encoded: Vec<Vec<u8>> = events.iter().map(Message::encode_to_vec).collect();
        let appended = tx
            .execute(
                "INSERT INTO memory_stream_events (app_name, user_id, stream_id, event_id, event)
                 SELECT $1, $2, $3, d.id, d.event
                 FROM unnest($4::text[], $5::bytea[]) WITH ORDINALITY AS d(id, event, n)
                 ORDER BY d.n
                 ON CONFLICT DO NOTHING",
                &[app, user, id, &ids, &encoded],
            )
            .await?;
        let appended = u32::try_from(appended).unwrap_or(u32::MAX);
        let buffered = u32::try_from(buffered)
            .map_err(|_| StoreError::corrupt("stream: negative count"))?
            .saturating_add(appended);
        let outcome = if appended > 0 && buffered as usize >= trigger {
            Appended {
                appended,
                buffered: 0,
                job: Some(hand_off(&tx, stream, job).await?),
            }
        } else {
            if buffered == 0 {
                // Nothing new, nothing waiting: the row this call made goes.
                tx.execute(
                    "DELETE FROM memory_streams
                     WHERE app_name = $1 AND user_id = $2 AND stream_id = $3",
                    &[app, user, id],
                )
                .await?;
            } else if appended > 0 {
                tx.execute(
                    "UPDATE memory_streams SET buffered = $4, last_ms = $5
                     WHERE app_name = $1 AND user_id = $2 AND stream_id = $3",
                    &[
                        app,
                        user,
                        id,
                        &i32::try_from(buffered).unwrap_or(i32::MAX),
                        &now_ms,
                    ],
                )
                .await?;
            }
            Appended {
                appended,
                buffered,
                job: None,
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    pub(super) async fn flush_stream_now(
        &self,
        stream: StreamKey<'_>,
        job: JobRecord,
        quiet_since: Option<i64>,
    ) -> Result<Option<JobRecord>> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let [app, user, id] = names(&stream);
        let row = tx
            .query_opt(
                "SELECT buffered, last_ms FROM memory_streams
                 WHERE app_name = $1 AND user_id = $2 AND stream_id = $3 FOR UPDATE",
                &[app, user, id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (buffered, last_ms): (i32, i64) = (row.try_get(0)?, row.try_get(1)?);
        if buffered <= 0 || quiet_since.is_some_and(|at| last_ms > at) {
            return Ok(None);
        }
        let job = hand_off(&tx, stream, job).await?;
        tx.commit().await?;
        Ok(Some(job))
    }

    pub(super) async fn buffered_streams_now(&self) -> Result<Vec<Buffered>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT app_name, user_id, stream_id, buffered, last_ms FROM memory_streams
                 WHERE buffered > 0",
                &[],
            )
            .await?;
        rows.iter().map(buffered).collect()
    }

    pub(super) async fn scope_streams_now(&self, scope: Scope<'_>) -> Result<Vec<Buffered>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT app_name, user_id, stream_id, buffered, last_ms FROM memory_streams
                 WHERE app_name = $1 AND user_id = $2 AND buffered > 0 ORDER BY stream_id",
                &[&scope.app_name, &scope.user_id],
            )
            .await?;
        rows.iter().map(buffered).collect()
    }
}

/// A `memory_streams` row as selected above.
fn buffered(row: &tokio_postgres::Row) -> Result<Buffered> {
    Ok(Buffered {
        app_name: row.try_get(0)?,
        user_id: row.try_get(1)?,
        stream_id: row.try_get(2)?,
        events: u32::try_from(row.try_get::<_, i32>(3)?).unwrap_or(0),
        last_ms: row.try_get(4)?,
    })
}
