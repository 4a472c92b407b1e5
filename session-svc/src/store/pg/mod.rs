//! The PostgreSQL store: sessions shared by any number of stateless replicas.
//!
//! # Files
//! - `schema`: the tables, created and migrated by the service itself.
//! - `write`: the statements of the write paths, and the lock order they keep.
//! - `read`: reading records, state and events.
//! - `list`: ListSessions.
//! - `notify`: the notifications other replicas' writes send.
//!
//! # Concurrency
//! Every write path takes row locks in one global order, so concurrent writers wait for each
//! other but never in a cycle (no deadlock, no `deadlock_timeout` stall):
//! 1. the session's row (`FOR UPDATE`, or its insertion), which serialises the writes to one
//!    session across replicas: sequences stay contiguous and `expected_last_sequence` is checked
//!    against the committed last sequence;
//! 2. rows only that session's writers touch (`events`, `session_state`, a new `changes` row);
//! 3. superseded versions of `user_state` and `app_state` rows, taken `SKIP LOCKED`: a writer
//!    never waits for them (see "Shared state").
//!
//! # Shared state
//! `user:` and `app:` keys are shared by every session of a user or an app. Were they rows
//! updated in place, each append writing a key would hold its row lock until its commit (WAL
//! flush included), and every other append writing that key would queue behind that commit.
//! Instead each write inserts a new version of the key (numbered by the `state_versions`
//! sequence, drawn in the append's last statements) and reads take each key's highest
//! version: writers of a key never wait for each other. The same statement deletes the
//! versions its own supersedes, skipping those another writer is deleting, so a key keeps one
//! version plus those of writers still in flight (or that overlapped with the last one).
//!
//! Of two appends writing a key, the one that draws the later version wins: an append that
//! starts after another was answered always wins over it, and appends to one session draw in
//! their order (the session's row is held from before the draw to the commit). Of two appends
//! overlapping in time either may win, as either may commit first. Readers see the highest
//! version committed in their snapshot, so a key's value never goes back to an older version.
//!
//! The sweeper and the change-feed trimmer take only rows nobody else holds (`SKIP LOCKED`).
//! A transaction that still fails with a deadlock or serialization failure was rolled back by
//! the server; it is run again whole, from its first statement (which re-reads the stored event
//! of the same id, so an append is never applied twice), a bounded number of times
//! ([`postgres::retry_conflicts`]). What still fails is answered `ABORTED`.
//!
//! # Change-feed positions
//! A change's position is the id of the transaction that appended it (`pg_current_xact_id()`).
//! Ids are taken when transactions start, not in commit order, so a reader only reads positions
//! below its snapshot's `xmin`: every transaction below that has ended, so nothing can appear
//! there later, and reading in position order never skips an event that committed late.
//! Positions increase but are not contiguous; `change_trims` remembers how far the feed was
//! trimmed, which is what tells an expired cursor.
//!
//! # Notifications
//! Appends and deletions `NOTIFY adk_sessions` with the session's name, delivered on commit.
//! Every replica listens and wakes its own watchers, which then read the store by sequence or
//! position: a lost notification delays an event, never loses it, and after a reconnection
//! every watcher reads again.

use adk_common::{postgres, stopping::Stopping, storage::StorageErrorKind};
use adk_proto::session::v1::Session;
use deadpool_postgres::{GenericClient, Pool, Transaction};
use prost::Message;
use prost_types::Timestamp;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;

/// Statement parameters.
type Params<'a> = [&'a (dyn ToSql + Sync)];

use super::{
    decode_event, not_found, token, Admission, Append, Appended, Change, Changes, EncodedEvent,
    EventWindow, NewSession, Notice, Page, SessionKey, SessionPage, SessionQuery, SessionStore,
    StoredSession,
};
use crate::{
    error::{Result, SessionError},
    state::{self, Entry},
    time::now,
};

/// The columns of `sessions` that `read::record` reads, in order.
macro_rules! record_columns {
    () => {
        "incarnation, create_s, create_n, update_s, update_n, expire_s, expire_n, last_sequence"
    };
}

mod list;
mod notify;
mod read;
mod schema;
#[cfg(test)]
mod tests;
mod write;

use read::{
    encoded_event, entries, live_record, read_events, read_snapshot, record, session,
    shared_entries, stored_record, Record, APP_STATE, USER_STATE,
};
use schema::{CHANNEL_SQL, MIGRATIONS};
use write::{remove, remove_contents, write_in_order, LOCK_SESSION, STORED_EVENT, WRITE_APPEND};

/// Session store on a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgSessionStore {
    pool: Pool,
    url: String,
    channel: String,
}

impl std::fmt::Debug for PgSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSessionStore").finish_non_exhaustive()
    }
}

impl PgSessionStore {
    /// Connects with at most `max_connections` and brings the schema up to date.
    pub async fn open(url: &str, max_connections: usize) -> Result<Self> {
        let pool = postgres::pool(url, max_connections)?;
        postgres::migrate(&pool, "session-svc", MIGRATIONS).await?;
        let channel = pool
            .get()
            .await?
            .query_one(CHANNEL_SQL, &[])
            .await?
            .try_get(0)?;
        Ok(Self {
            pool,
            url: url.to_owned(),
            channel,
        })
    }

    /// Publishes the connection pool's size as gauges (read at each metrics scrape).
    pub fn record_pool(&self) {
        postgres::record_pool(&self.pool, "session-svc");
    }

    /// Whether the database is reachable, checked every second (see [`postgres::health`]).
    pub fn health(&self) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
        postgres::health(self.pool.clone())
    }

    /// Creates the session and reads it back in the same transaction: read afterwards, a
    /// session with a short ttl could already have expired and be answered as not found.
    async fn try_create(&self, new: &NewSession) -> Result<Session> {
        let key = &new.key;
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let existing = tx
            .query_opt(
                LOCK_SESSION,
                &[&key.app_name, &key.user_id, &key.session_id],
            )
            .await?;
        if let Some(row) = existing {
            // An expired session that the sweeper has not removed yet must not block its name.
            if record(&row)?.is_live(&now()) {
                return Err(exists(key));
            }
            remove(&tx, key, &self.channel).await?;
        }
        let expire = new.expire_time.as_ref();
        let inserted = tx
            .execute(
                "INSERT INTO sessions (app_name, user_id, session_id, incarnation, create_s,
                     create_n, update_s, update_n, expire_s, expire_n, last_sequence)
                 VALUES ($1, $2, $3, nextval('session_incarnations'), $4, $5, $4, $5, $6, $7, 0)
                 ON CONFLICT DO NOTHING",
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &new.create_time.seconds,
                    &new.create_time.nanos,
                    &expire.map(|t| t.seconds),
                    &expire.map(|t| t.nanos),
                ],
            )
            .await?;
        // A concurrent create of the same name committed first.
        if inserted == 0 {
            return Err(exists(key));
        }
        write_in_order(&tx, key, None, &new.state).await?;
        let record = stored_record(&tx, key)
            .await?
            .ok_or_else(|| SessionError::corrupt("a created session was not stored"))?;
        let stored = Self::assemble(&tx, key, &record, EventWindow::NONE).await?;
        tx.commit().await?;
        Ok(stored.session)
    }

    async fn try_append(&self, key: &SessionKey, append: &Append) -> Result<Appended> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let (lock, lookup) = tokio::try_join!(
            tx.prepare_cached(LOCK_SESSION),
            tx.prepare_cached(STORED_EVENT)
        )?;
        let name: [&(dyn ToSql + Sync); 4] = [
            &key.app_name,
            &key.user_id,
            &key.session_id,
            &append.event.id,
        ];
        // Pipelined, in this order (see `write_in_order`): the lookup runs once the lock is held.
        let (row, stored) = tokio::join!(
            biased;
            tx.query_opt(&lock, &name[..3]),
            tx.query_opt(&lookup, &name),
        );
        let (row, stored) = (row?, stored?);
        let now = now();
        let (record, stored) = match row {
            Some(row) => (
                record(&row)?,
                stored.map(|row| row.try_get::<_, Vec<u8>>(0)).transpose()?,
            ),
            None => return Err(not_found(key)),
        };
        if !record.is_live(&now) {
            return Err(not_found(key));
        }
        let stored = stored.map(|bytes| decode_event(&bytes)).transpose()?;
        let sequence = match super::admission(
            append,
            stored,
            record.last_sequence,
            record.last_update_time,
        )? {
            Admission::Retry(appended) => return Ok(*appended),
            Admission::Write(sequence) => sequence,
        };
        let mut event = append.event.clone();
        event.sequence = sequence;
        let ts = event.timestamp.unwrap_or_default();
        let seq = to_i64(sequence);
        let notice = format!(
            "C\t{}\t{}\t{}\t{sequence}\t",
            key.app_name, key.user_id, key.session_id
        );
        let body = event.encode_to_vec();
        let params: [&(dyn ToSql + Sync); 13] = [
            &key.app_name,
            &key.user_id,
            &key.session_id,
            &seq,
            &record.incarnation,
            &event.id,
            &ts.seconds,
            &ts.nanos,
            &body,
            &now.seconds,
            &now.nanos,
            &self.channel,
            &notice,
        ];
        // Event, session row, change and notification in one statement, pipelined with the
        // state writes after it (one round trip).
        let write = tx.prepare_cached(WRITE_APPEND).await?;
        let written = write_in_order(&tx, key, Some((&write, &params)), &append.delta).await?;
        let change: i64 = written
            .ok_or_else(|| SessionError::corrupt("an append wrote no change"))?
            .try_get(0)?;
        tx.commit().await?;
        Ok(Appended {
            event,
            last_sequence: sequence,
            last_update_time: ts,
            change: to_u64(change)?,
        })
    }

    async fn try_delete(&self, key: &SessionKey) -> Result<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        remove(&tx, key, &self.channel).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn try_sweep(&self, now: &Timestamp, limit: usize) -> Result<Vec<SessionKey>> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        // SKIP LOCKED: replicas sweeping at once take different sessions.
        let rows = tx
            .query(
                "WITH doomed AS (
                     SELECT app_name, user_id, session_id FROM sessions
                     WHERE expire_s IS NOT NULL AND (expire_s, expire_n) < ($1, $2)
                     ORDER BY expire_s, expire_n LIMIT $3 FOR UPDATE SKIP LOCKED
                 )
                 DELETE FROM sessions s USING doomed d
                 WHERE s.app_name = d.app_name AND s.user_id = d.user_id
                   AND s.session_id = d.session_id
                 RETURNING s.app_name, s.user_id, s.session_id",
                &[&now.seconds, &now.nanos, &to_i64(limit as u64)],
            )
            .await?;
        let keys = rows
            .iter()
            .map(|row| {
                Ok(SessionKey {
                    app_name: row.try_get(0)?,
                    user_id: row.try_get(1)?,
                    session_id: row.try_get(2)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for key in &keys {
            remove_contents(&tx, key, &self.channel).await?;
        }
        tx.commit().await?;
        Ok(keys)
    }

    /// Deletes the changes committed before `before`; two replicas trimming at once take
    /// different rows (`SKIP LOCKED`) and mark the trimmed apps in key order.
    async fn try_trim_changes(&self, before: &Timestamp) -> Result<usize> {
        let client = self.pool.get().await?;
        // Only positions below the readable horizon go: one committed long ago may still be
        // unreadable while an older transaction anywhere in the cluster is open, and trimming it
        // would drop it unread and leave a reader starting at the horizon already out of range.
        let row = client
            .query_one(
                "WITH doomed AS (
                     SELECT app_name, position FROM changes
                     WHERE (commit_s, commit_n) < ($1, $2)
                       AND position < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
                     FOR UPDATE SKIP LOCKED
                 ), gone AS (
                     DELETE FROM changes c USING doomed d
                     WHERE c.app_name = d.app_name AND c.position = d.position
                     RETURNING c.app_name, c.position
                 ), marks AS (
                     INSERT INTO change_trims (app_name, trimmed)
                     SELECT app_name, max(position) FROM gone GROUP BY app_name
                     ORDER BY app_name
                     ON CONFLICT (app_name)
                     DO UPDATE SET trimmed = greatest(change_trims.trimmed, excluded.trimmed)
                 )
                 SELECT count(*) FROM gone",
                &[&before.seconds, &before.nanos],
            )
            .await?;
        let trimmed: i64 = row.try_get(0)?;
        Ok(usize::try_from(trimmed).unwrap_or(0))
    }

    /// The session's state and the events `window` selects, read inside `tx`.
    async fn assemble(
        tx: &Transaction<'_>,
        key: &SessionKey,
        record: &Record,
        window: EventWindow,
    ) -> Result<StoredSession> {
        let name: [&(dyn ToSql + Sync); 3] = [&key.app_name, &key.user_id, &key.session_id];
        let (session_state, user_state, app_state, events) = tokio::try_join!(
            entries(
                tx,
                "SELECT key, value FROM session_state
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 ORDER BY key",
                &name,
            ),
            shared_entries(tx, USER_STATE, &name[..2]),
            shared_entries(tx, APP_STATE, &name[..1]),
            read_events(tx, key, record.last_sequence, window),
        )?;
        let state = state::merge(state::pairs(&session_state), &app_state, &user_state);
        Ok(StoredSession {
            session: session(key, record, state, Vec::new()),
            events,
        })
    }
}

impl SessionStore for PgSessionStore {
    async fn create(&self, new: NewSession) -> Result<Session> {
        postgres::retry_conflicts(|| self.try_create(&new), is_conflict).await
    }

    async fn get_encoded(
        &self,
        key: &SessionKey,
        window: EventWindow,
    ) -> Result<Option<StoredSession>> {
        let mut client = self.pool.get().await?;
        // One snapshot: the state and events are those of the record read.
        let tx = read_snapshot(&mut client).await?;
        let Some(record) = live_record(&tx, key).await? else {
            return Ok(None);
        };
        let session = Self::assemble(&tx, key, &record, window).await?;
        tx.commit().await?;
        Ok(Some(session))
    }

    async fn list(&self, query: SessionQuery<'_>) -> Result<SessionPage> {
        list::list(self, query).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        postgres::retry_conflicts(|| self.try_delete(key), is_conflict).await
    }

    async fn append(&self, key: &SessionKey, append: Append) -> Result<Appended> {
        postgres::retry_conflicts(|| self.try_append(key, &append), is_conflict).await
    }

    async fn list_events_encoded(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        page_token: &str,
    ) -> Result<Page<EncodedEvent>> {
        let after = after_sequence.max(token::events_resume_after(key, page_token)?);
        let client = self.pool.get().await?;
        let Some(record) = live_record(&client, key).await? else {
            return Err(not_found(key));
        };
        let rows = client
            .query(
                "SELECT sequence, body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3
                   AND sequence > $4 AND sequence <= $5 AND incarnation = $6
                 ORDER BY sequence LIMIT $7",
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &to_i64(after),
                    &to_i64(record.last_sequence),
                    &record.incarnation,
                    &to_i64(page_size as u64 + 1),
                ],
            )
            .await?;
        let more = rows.len() > page_size;
        let items = rows
            .iter()
            .take(page_size)
            .map(encoded_event)
            .collect::<Result<Vec<_>>>()?;
        let next_page_token = match items.last() {
            Some(last) if more => token::events_token(key, last.sequence),
            _ => String::new(),
        };
        Ok(Page {
            items,
            next_page_token,
        })
    }

    async fn changes(&self, app_name: &str, after: u64, limit: usize) -> Result<Changes> {
        let mut client = self.pool.get().await?;
        // One snapshot: the horizon and the rows read below it.
        let tx = read_snapshot(&mut client).await?;
        let row = tx
            .query_one(
                "SELECT h.horizon,
                        (SELECT trimmed FROM change_trims WHERE app_name = $1),
                        ARRAY(SELECT position FROM changes
                              WHERE app_name = $1 AND position >= h.horizon
                              ORDER BY position)
                 FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint
                       AS horizon) h",
                &[&app_name],
            )
            .await?;
        let horizon: i64 = row.try_get(0)?;
        let trimmed: Option<i64> = row.try_get(1)?;
        let unreadable = row
            .try_get::<_, Vec<i64>>(2)?
            .into_iter()
            .map(to_u64)
            .collect::<Result<Vec<_>>>()?;
        let mut items = Vec::new();
        if limit > 0 {
            let rows = tx
                .query(
                    "SELECT c.position, c.user_id, c.session_id, e.body
                     FROM changes c
                     LEFT JOIN events e ON e.app_name = c.app_name AND e.user_id = c.user_id
                         AND e.session_id = c.session_id AND e.sequence = c.sequence
                         AND e.incarnation = c.incarnation
                     WHERE c.app_name = $1 AND c.position > $2 AND c.position < $3
                     ORDER BY c.position LIMIT $4",
                    &[&app_name, &to_i64(after), &horizon, &to_i64(limit as u64)],
                )
                .await?;
            for row in rows {
                items.push(Change {
                    position: to_u64(row.try_get(0)?)?,
                    user_id: row.try_get(1)?,
                    session_id: row.try_get(2)?,
                    event: row
                        .try_get::<_, Option<&[u8]>>(3)?
                        .map(decode_event)
                        .transpose()?,
                });
            }
        }
        tx.commit().await?;
        Ok(Changes {
            items,
            oldest: to_u64(trimmed.unwrap_or(0))? + 1,
            head: to_u64(horizon - 1)?,
            unreadable,
        })
    }

    async fn trim_changes(&self, before: Timestamp) -> Result<usize> {
        postgres::retry_conflicts(|| self.try_trim_changes(&before), is_conflict).await
    }

    async fn sweep_expired(&self, now: Timestamp, limit: usize) -> Result<Vec<SessionKey>> {
        postgres::retry_conflicts(|| self.try_sweep(&now, limit), is_conflict).await
    }

    async fn user_state(&self, app_name: &str, user_id: &str) -> Result<Vec<Entry>> {
        let client = self.pool.get().await?;
        shared_entries(&client, USER_STATE, &[&app_name, &user_id]).await
    }

    async fn app_state(&self, app_name: &str) -> Result<Vec<Entry>> {
        let client = self.pool.get().await?;
        shared_entries(&client, APP_STATE, &[&app_name]).await
    }

    async fn apps(&self) -> Result<Vec<String>> {
        let client = self.pool.get().await?;
        let rows = client.query(APPS, &[]).await?;
        rows.iter()
            .map(|row| row.try_get(0).map_err(Into::into))
            .collect()
    }

    fn notices(&self, stopping: &Stopping) -> Result<Option<mpsc::UnboundedReceiver<Notice>>> {
        notify::notices(&self.url, &self.channel, stopping)
    }
}

/// The distinct apps of `sessions`, walking its primary key from one app to the next (a loose
/// index scan) rather than reading every session.
const APPS: &str = "WITH RECURSIVE apps(app_name) AS (
        (SELECT app_name FROM sessions ORDER BY app_name LIMIT 1)
        UNION ALL
        SELECT (SELECT s.app_name FROM sessions s WHERE s.app_name > apps.app_name
                ORDER BY s.app_name LIMIT 1)
        FROM apps WHERE apps.app_name IS NOT NULL
    )
    SELECT app_name FROM apps WHERE app_name IS NOT NULL";

/// Sequences and positions are `bigint`; values past `i64::MAX` cannot occur in practice and
/// are clamped rather than wrapped.
fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| SessionError::corrupt(format!("negative sequence {v}")))
}

fn is_conflict(e: &SessionError) -> bool {
    matches!(e, SessionError::Storage(e) if e.kind() == StorageErrorKind::Conflict)
}

fn exists(key: &SessionKey) -> SessionError {
    SessionError::SessionExists {
        session_id: key.session_id.clone(),
    }
}
