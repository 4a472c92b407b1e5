//! The PostgreSQL store: sessions shared by any number of stateless replicas.
//!
//! # Schema (version 1, created by the service itself; see [`MIGRATIONS`])
//! | table           | primary key                          | holds                                   |
//! |-----------------|--------------------------------------|-----------------------------------------|
//! | `sessions`      | app, user, session                   | incarnation, times, `last_sequence`     |
//! | `session_state` | app, user, session, key              | JSON value text                         |
//! | `user_state`    | app, user, key                       | JSON value text                         |
//! | `app_state`     | app, key                             | JSON value text                         |
//! | `events`        | app, user, session, sequence         | event id (unique per session), time, encoded `Event` |
//! | `changes`       | app, position                        | which event: the WatchEvents feed       |
//! | `change_trims`  | app                                  | the highest position trimmed            |
//!
//! Identifiers use the `C` collation, so listings sort by bytes exactly as the sled store does,
//! and page tokens are the same keys the sled store issues. Every table's key starts with the
//! app, so a distributed engine can shard by it (see the README).
//!
//! # Concurrency
//! Every write path takes row locks in one global order, so concurrent writers wait for each
//! other but never in a cycle (no deadlock, no `deadlock_timeout` stall):
//! 1. the session's row (`FOR UPDATE`, or its insertion), which serialises the writes to one
//!    session across replicas: sequences stay contiguous and `expected_last_sequence` is checked
//!    against the committed last sequence;
//! 2. rows only that session's writers touch (`events`, `session_state`, a new `changes` row);
//! 3. `user_state`, then `app_state`, each in key order, last before the commit: these rows
//!    are shared by every session of a user or an app, so they are held as briefly as possible.
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

use std::collections::HashMap;

use adk_common::postgres::{self, Notification};
use adk_proto::session::v1::{Event, Session};
use deadpool_postgres::{GenericClient, Pool, Transaction};
use prost::Message;
use prost_types::Timestamp;
use tokio::sync::mpsc;
use tokio_postgres::{types::ToSql, IsolationLevel, Row, Statement};

/// Statement parameters.
type Params<'a> = [&'a (dyn ToSql + Sync)];

use super::{
    decode_event, not_found,
    token::{self, SessionListing, SessionPlace},
    Admission, Append, Appended, Change, Changes, EventWindow, NewSession, Notice, Page,
    SessionKey, SessionStore,
};
use crate::{
    error::{Result, SessionError},
    state::{self, Entry, ScopedDelta},
    time::{self, now},
};

/// The channel appends and deletions are announced on: one per schema, so deployments that
/// share a database in separate schemas do not hear each other (a name is at most 63 bytes).
const CHANNEL_SQL: &str = "SELECT 'adk_sessions_' || left(md5(current_schema()), 16)";

/// Schema versions, oldest first; each runs once, in a transaction.
const MIGRATIONS: &[&str] = &[r#"
CREATE SEQUENCE session_incarnations;
CREATE TABLE sessions (
    app_name      text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL,
    session_id    text COLLATE "C" NOT NULL,
    incarnation   bigint NOT NULL,
    create_s      bigint NOT NULL,
    create_n      integer NOT NULL,
    update_s      bigint NOT NULL,
    update_n      integer NOT NULL,
    expire_s      bigint,
    expire_n      integer,
    last_sequence bigint NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id)
);
CREATE INDEX sessions_by_time ON sessions (app_name, update_s, update_n, user_id, session_id);
CREATE INDEX sessions_by_user_time ON sessions (app_name, user_id, update_s, update_n, session_id);
CREATE INDEX sessions_by_expiry ON sessions (expire_s, expire_n) WHERE expire_s IS NOT NULL;
CREATE TABLE session_state (
    app_name   text COLLATE "C" NOT NULL,
    user_id    text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      text NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, key)
);
CREATE TABLE user_state (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
);
CREATE TABLE app_state (
    app_name text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (app_name, key)
);
CREATE TABLE events (
    app_name    text COLLATE "C" NOT NULL,
    user_id     text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    sequence    bigint NOT NULL,
    incarnation bigint NOT NULL,
    event_id    text COLLATE "C" NOT NULL,
    ts_s        bigint NOT NULL,
    ts_n        integer NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, sequence)
);
CREATE UNIQUE INDEX events_by_id ON events (app_name, user_id, session_id, event_id);
CREATE TABLE changes (
    app_name    text COLLATE "C" NOT NULL,
    position    bigint NOT NULL,
    user_id     text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    incarnation bigint NOT NULL,
    sequence    bigint NOT NULL,
    commit_s    bigint NOT NULL,
    commit_n    integer NOT NULL,
    PRIMARY KEY (app_name, position)
);
CREATE INDEX changes_by_time ON changes (commit_s, commit_n);
CREATE TABLE change_trims (
    app_name text COLLATE "C" PRIMARY KEY,
    trimmed  bigint NOT NULL
);
"#];

/// The columns of `sessions` that [`record`] reads, in order.
macro_rules! record_columns {
    () => {
        "incarnation, create_s, create_n, update_s, update_n, expire_s, expire_n, last_sequence"
    };
}
const RECORD: &str = record_columns!();

/// One session's record.
const SELECT_RECORD: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3"
);

/// An append's first statement: the session's record, locked.
const LOCK_SESSION: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3 FOR UPDATE"
);

/// The event stored under an id, if any: an append of that id is a retry. A statement of its
/// own, sent after [`LOCK_SESSION`]: in READ COMMITTED each statement reads a snapshot taken
/// when it starts, so it sees an append that committed while this one waited for the lock (a
/// subquery of the locking statement would read the snapshot from before the wait, miss that
/// event, and the retry would fail on the unique event id instead of being answered).
const STORED_EVENT: &str = "SELECT body FROM events
     WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND event_id = $4";

/// An append's write: event, session row, change-log row and notification in one statement.
const WRITE_APPEND: &str = "WITH ev AS (
         INSERT INTO events (app_name, user_id, session_id, sequence, incarnation,
             event_id, ts_s, ts_n, body)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ), se AS (
         UPDATE sessions SET last_sequence = $4, update_s = $7, update_n = $8
         WHERE app_name = $1 AND user_id = $2 AND session_id = $3
     ), ch AS (
         INSERT INTO changes (app_name, position, user_id, session_id, incarnation,
             sequence, commit_s, commit_n)
         VALUES ($1, pg_current_xact_id()::text::bigint, $2, $3, $5, $4, $10, $11)
         RETURNING position
     )
     SELECT position, pg_notify($12, $13 || position::text) FROM ch";

/// A `sessions` row.
struct Record {
    incarnation: i64,
    create_time: Timestamp,
    last_update_time: Timestamp,
    expire_time: Option<Timestamp>,
    last_sequence: u64,
}

impl Record {
    fn is_live(&self, now: &Timestamp) -> bool {
        time::is_live(self.expire_time.as_ref(), now)
    }
}

/// Session store on a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    url: String,
    channel: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
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

    async fn try_create(&self, new: &NewSession) -> Result<()> {
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
        tx.commit().await?;
        Ok(())
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
        // state upserts after it (one round trip).
        let write = tx.prepare_cached(WRITE_APPEND).await?;
        let written = write_in_order(&tx, key, Some((&write, &params)), &append.delta).await?;
        let change: i64 = written
            .ok_or_else(|| SessionError::Corrupt("an append wrote no change".into()))?
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
        let row = client
            .query_one(
                "WITH doomed AS (
                     SELECT app_name, position FROM changes
                     WHERE (commit_s, commit_n) < ($1, $2) FOR UPDATE SKIP LOCKED
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
    ) -> Result<Session> {
        let name: [&(dyn ToSql + Sync); 3] = [&key.app_name, &key.user_id, &key.session_id];
        let (session_state, user_state, app_state, events) = tokio::try_join!(
            entries(
                tx,
                "SELECT key, value FROM session_state
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 ORDER BY key",
                &name,
            ),
            entries(
                tx,
                "SELECT key, value FROM user_state
                 WHERE app_name = $1 AND user_id = $2 ORDER BY key",
                &name[..2],
            ),
            entries(
                tx,
                "SELECT key, value FROM app_state WHERE app_name = $1 ORDER BY key",
                &name[..1],
            ),
            read_events(tx, key, record.last_sequence, window),
        )?;
        Ok(session(
            key,
            record,
            state::merge(&session_state, &app_state, &user_state),
            events,
        ))
    }
}

impl SessionStore for PgStore {
    async fn create(&self, new: NewSession) -> Result<Session> {
        postgres::retry_conflicts(|| self.try_create(&new), is_conflict).await?;
        self.get(&new.key, EventWindow::NONE)
            .await?
            .ok_or_else(|| not_found(&new.key))
    }

    async fn get(&self, key: &SessionKey, window: EventWindow) -> Result<Option<Session>> {
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

    async fn list(
        &self,
        app_name: &str,
        user_id: Option<&str>,
        page_size: usize,
        page_token: &str,
    ) -> Result<Page<Session>> {
        let listing = SessionListing { app_name, user_id };
        let after = listing
            .resume_after(page_token)?
            .unwrap_or_else(|| SessionPlace {
                last_update_time: Timestamp {
                    seconds: i64::MIN,
                    nanos: i32::MIN,
                },
                user_id: String::new(),
                session_id: String::new(),
            });
        let SessionPlace {
            last_update_time: ts,
            user_id: after_user,
            session_id: after_session,
        } = after;
        let now = now();
        let limit = to_i64(page_size as u64 + 1);
        let mut client = self.pool.get().await?;
        // One snapshot: the page and the state shown with it.
        let tx = read_snapshot(&mut client).await?;
        let live = "(expire_s IS NULL OR (expire_s, expire_n) > ($6, $7))";
        let rows = match user_id {
            None => {
                tx.query(
                    &format!(
                        "SELECT {RECORD}, user_id, session_id FROM sessions
                         WHERE app_name = $1
                           AND (update_s, update_n, user_id, session_id) > ($2, $3, $4, $5)
                           AND {live}
                         ORDER BY update_s, update_n, user_id, session_id LIMIT $8"
                    ),
                    &[
                        &app_name,
                        &ts.seconds,
                        &ts.nanos,
                        &after_user,
                        &after_session,
                        &now.seconds,
                        &now.nanos,
                        &limit,
                    ],
                )
                .await?
            }
            Some(user) => {
                tx.query(
                    &format!(
                        "SELECT {RECORD}, user_id, session_id FROM sessions
                         WHERE app_name = $1 AND user_id = $4
                           AND (update_s, update_n, session_id) > ($2, $3, $5)
                           AND {live}
                         ORDER BY update_s, update_n, session_id LIMIT $8"
                    ),
                    &[
                        &app_name,
                        &ts.seconds,
                        &ts.nanos,
                        &user,
                        &after_session,
                        &now.seconds,
                        &now.nanos,
                        &limit,
                    ],
                )
                .await?
            }
        };
        let more = rows.len() > page_size;
        let mut listed = Vec::with_capacity(page_size);
        for row in rows.iter().take(page_size) {
            let key = SessionKey {
                app_name: app_name.to_owned(),
                user_id: row.try_get(8)?,
                session_id: row.try_get(9)?,
            };
            listed.push((key, record(row)?));
        }
        let users: Vec<&str> = listed.iter().map(|(k, _)| k.user_id.as_str()).collect();
        let sessions: Vec<&str> = listed.iter().map(|(k, _)| k.session_id.as_str()).collect();
        let app: [&(dyn ToSql + Sync); 1] = [&app_name];
        let (app_state, user_rows, session_rows) = tokio::try_join!(
            entries(
                &tx,
                "SELECT key, value FROM app_state WHERE app_name = $1 ORDER BY key",
                &app,
            ),
            async {
                Ok(tx
                    .query(
                        "SELECT user_id, key, value FROM user_state
                         WHERE app_name = $1 AND user_id = ANY($2) ORDER BY user_id, key",
                        &[&app_name, &users],
                    )
                    .await?)
            },
            async {
                Ok::<_, SessionError>(
                    tx.query(
                        "SELECT s.user_id, s.session_id, s.key, s.value
                         FROM session_state s
                         JOIN unnest($2::text[], $3::text[]) AS page(user_id, session_id)
                           ON s.user_id = page.user_id AND s.session_id = page.session_id
                         WHERE s.app_name = $1 ORDER BY s.user_id, s.session_id, s.key",
                        &[&app_name, &users, &sessions],
                    )
                    .await?,
                )
            },
        )?;
        tx.commit().await?;
        let mut user_state: HashMap<String, Vec<Entry>> = HashMap::new();
        for row in &user_rows {
            user_state
                .entry(row.try_get(0)?)
                .or_default()
                .push((row.try_get(1)?, row.try_get(2)?));
        }
        let mut session_state: HashMap<(String, String), Vec<Entry>> = HashMap::new();
        for row in &session_rows {
            session_state
                .entry((row.try_get(0)?, row.try_get(1)?))
                .or_default()
                .push((row.try_get(2)?, row.try_get(3)?));
        }
        let next_page_token = match listed.last() {
            Some((key, record)) if more => listing.token(&SessionPlace {
                last_update_time: record.last_update_time,
                user_id: key.user_id.clone(),
                session_id: key.session_id.clone(),
            }),
            _ => String::new(),
        };
        let items = listed
            .into_iter()
            .map(|(key, record)| {
                let own = session_state
                    .remove(&(key.user_id.clone(), key.session_id.clone()))
                    .unwrap_or_default();
                let user = user_state
                    .get(&key.user_id)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let merged = state::merge(&own, &app_state, user);
                session(&key, &record, merged, Vec::new())
            })
            .collect();
        Ok(Page {
            items,
            next_page_token,
        })
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        postgres::retry_conflicts(|| self.try_delete(key), is_conflict).await
    }

    async fn append(&self, key: &SessionKey, append: Append) -> Result<Appended> {
        postgres::retry_conflicts(|| self.try_append(key, &append), is_conflict).await
    }

    async fn list_events(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        page_token: &str,
    ) -> Result<Page<Event>> {
        let after = after_sequence.max(token::events_resume_after(key, page_token)?);
        let client = self.pool.get().await?;
        let Some(record) = live_record(&client, key).await? else {
            return Err(not_found(key));
        };
        let rows = client
            .query(
                "SELECT body FROM events
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
            .map(|row| decode_event(row.try_get(0)?))
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
        let rows = client
            .query(
                "SELECT key, value FROM user_state
                 WHERE app_name = $1 AND user_id = $2 ORDER BY key",
                &[&app_name, &user_id],
            )
            .await?;
        pairs(&rows)
    }

    async fn app_state(&self, app_name: &str) -> Result<Vec<Entry>> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT key, value FROM app_state WHERE app_name = $1 ORDER BY key",
                &[&app_name],
            )
            .await?;
        pairs(&rows)
    }

    fn notices(&self) -> Result<Option<mpsc::UnboundedReceiver<Notice>>> {
        let (tx, rx) = mpsc::unbounded_channel();
        postgres::listen(&self.url, self.channel.clone(), move |notification| {
            let notice = match &notification {
                Notification::Subscribed => Some(Notice::Resync),
                Notification::Payload(payload) => parse_notice(payload),
            };
            match notice {
                Some(notice) => tx.send(notice).is_ok(),
                None => {
                    tracing::warn!(payload = %notification_text(&notification), "unreadable notification");
                    true
                }
            }
        })?;
        Ok(Some(rx))
    }
}

/// Reads a payload written by an append (`C`) or a deletion (`D`). Identifiers never contain
/// control characters, so tabs separate the fields.
fn parse_notice(payload: &str) -> Option<Notice> {
    let mut fields = payload.split('\t');
    let kind = fields.next()?;
    let key = SessionKey {
        app_name: fields.next()?.to_owned(),
        user_id: fields.next()?.to_owned(),
        session_id: fields.next()?.to_owned(),
    };
    let notice = match kind {
        "C" => Notice::Committed {
            key,
            last_sequence: fields.next()?.parse().ok()?,
            change: fields.next()?.parse().ok()?,
        },
        "D" => Notice::Deleted(key),
        _ => return None,
    };
    fields.next().is_none().then_some(notice)
}

fn notification_text(notification: &Notification) -> &str {
    match notification {
        Notification::Payload(p) => p,
        Notification::Subscribed => "",
    }
}

/// Deletes a session with its events and state (nothing if it does not exist), and announces it.
async fn remove(tx: &Transaction<'_>, key: &SessionKey, channel: &str) -> Result<()> {
    let gone = tx
        .execute(
            "DELETE FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
            &[&key.app_name, &key.user_id, &key.session_id],
        )
        .await?;
    if gone > 0 {
        remove_contents(tx, key, channel).await?;
    }
    Ok(())
}

/// Deletes what a removed session row leaves: events and session state; announces the deletion.
async fn remove_contents(tx: &Transaction<'_>, key: &SessionKey, channel: &str) -> Result<()> {
    let params: [&(dyn ToSql + Sync); 3] = [&key.app_name, &key.user_id, &key.session_id];
    let notice = format!("D\t{}\t{}\t{}", key.app_name, key.user_id, key.session_id);
    let notify: [&(dyn ToSql + Sync); 2] = [&channel, &notice];
    tokio::try_join!(
        tx.execute(
            "DELETE FROM events WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
            &params,
        ),
        tx.execute(
            "DELETE FROM session_state WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
            &params,
        ),
        tx.execute("SELECT pg_notify($1, $2)", &notify),
    )?;
    Ok(())
}

/// Upserts a session's state keys (S0.5: a shallow replace per key). Rows are taken in key
/// order (`ORDER BY`), as in the two statements below, so writers never wait on each other in
/// opposite orders.
const UPSERT_SESSION_STATE: &str =
    "INSERT INTO session_state (app_name, user_id, session_id, key, value)
     SELECT $1, $2, $3, d.k, d.v FROM unnest($4::text[], $5::text[]) AS d(k, v) ORDER BY d.k
     ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = excluded.value";

/// Upserts `user:` keys; shared by every session of the user.
const UPSERT_USER_STATE: &str = "INSERT INTO user_state (app_name, user_id, key, value)
     SELECT $1, $2, d.k, d.v FROM unnest($3::text[], $4::text[]) AS d(k, v) ORDER BY d.k
     ON CONFLICT (app_name, user_id, key) DO UPDATE SET value = excluded.value";

/// Upserts `app:` keys; shared by every session of the app: the hottest rows.
const UPSERT_APP_STATE: &str = "INSERT INTO app_state (app_name, key, value)
     SELECT $1, d.k, d.v FROM unnest($2::text[], $3::text[]) AS d(k, v) ORDER BY d.k
     ON CONFLICT (app_name, key) DO UPDATE SET value = excluded.value";

/// A delta's keys and values as the array parameters of the upserts.
struct DeltaColumns {
    session: (Vec<String>, Vec<String>),
    user: (Vec<String>, Vec<String>),
    app: (Vec<String>, Vec<String>),
}

impl DeltaColumns {
    fn new(delta: &ScopedDelta) -> Self {
        let columns = |entries: &[Entry]| entries.iter().cloned().unzip();
        Self {
            session: columns(&delta.session),
            user: columns(&delta.user),
            app: columns(&delta.app),
        }
    }
}

/// The upsert statements, prepared once per connection.
struct Upserts {
    session: Statement,
    user: Statement,
    app: Statement,
}

impl Upserts {
    async fn prepare(tx: &Transaction<'_>) -> Result<Self> {
        let (session, user, app) = tokio::try_join!(
            tx.prepare_cached(UPSERT_SESSION_STATE),
            tx.prepare_cached(UPSERT_USER_STATE),
            tx.prepare_cached(UPSERT_APP_STATE),
        )?;
        Ok(Self { session, user, app })
    }
}

/// Runs `first` (if any) and then the delta's upserts in the lock order of every write path:
/// the session's own rows, then `user:` rows, then `app:` rows, each in key order. The hot
/// shared rows come last, so they are held only from their upsert to the commit.
///
/// The statements are pipelined (one round trip) and sent in that order: they are prepared
/// beforehand, so each is sent when first polled, and `biased` polls them first to last (an
/// unbiased `join!` rotates which future it polls first, which is how two appends once took the
/// user and app rows in opposite orders and deadlocked). When one fails, the server rejects the
/// ones after it as part of an aborted transaction, so the first error in order is the cause.
async fn write_in_order(
    tx: &Transaction<'_>,
    key: &SessionKey,
    first: Option<(&Statement, &Params<'_>)>,
    delta: &ScopedDelta,
) -> Result<Option<Row>> {
    let upserts = Upserts::prepare(tx).await?;
    let DeltaColumns { session, user, app } = DeltaColumns::new(delta);
    let session_params: [&(dyn ToSql + Sync); 5] = [
        &key.app_name,
        &key.user_id,
        &key.session_id,
        &session.0,
        &session.1,
    ];
    let user_params: [&(dyn ToSql + Sync); 4] = [&key.app_name, &key.user_id, &user.0, &user.1];
    let app_params: [&(dyn ToSql + Sync); 3] = [&key.app_name, &app.0, &app.1];
    let (first, session, user, app) = tokio::join!(
        biased;
        async {
            match first {
                Some((statement, params)) => tx.query_one(statement, params).await.map(Some),
                None => Ok(None),
            }
        },
        upsert(tx, &upserts.session, &session_params, !session.0.is_empty()),
        upsert(tx, &upserts.user, &user_params, !user.0.is_empty()),
        upsert(tx, &upserts.app, &app_params, !app.0.is_empty()),
    );
    let row = first?;
    session?;
    user?;
    app?;
    Ok(row)
}

/// Runs an upsert unless `run` is false (a scope the delta does not touch).
async fn upsert(
    tx: &Transaction<'_>,
    statement: &Statement,
    params: &Params<'_>,
    run: bool,
) -> Result<(), tokio_postgres::Error> {
    if run {
        tx.execute(statement, params).await?;
    }
    Ok(())
}

/// Reads events 1..=last as `window` selects. Trailing windows read newest first and stop
/// after what they return (the index on sequence makes the `after` bound one backward probe).
async fn read_events(
    tx: &Transaction<'_>,
    key: &SessionKey,
    last: u64,
    window: EventWindow,
) -> Result<Vec<Event>> {
    if window.num_recent == Some(0) || last == 0 {
        return Ok(Vec::new());
    }
    let limit = window.num_recent.map_or(i64::MAX, |n| to_i64(n as u64));
    let last = to_i64(last);
    let rows = match (&window.after, window.num_recent) {
        (None, None) => {
            tx.query(
                "SELECT body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND sequence <= $4
                 ORDER BY sequence",
                &[&key.app_name, &key.user_id, &key.session_id, &last],
            )
            .await?
        }
        (None, Some(_)) => {
            tx.query(
                "SELECT body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND sequence <= $4
                 ORDER BY sequence DESC LIMIT $5",
                &[&key.app_name, &key.user_id, &key.session_id, &last, &limit],
            )
            .await?
        }
        (Some(after), _) => {
            // The trailing run of events not older than `after` (as the sled store walks it).
            tx.query(
                "SELECT body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND sequence <= $4
                   AND sequence > (SELECT coalesce(max(sequence), 0) FROM events
                       WHERE app_name = $1 AND user_id = $2 AND session_id = $3
                         AND sequence <= $4 AND (ts_s, ts_n) < ($6, $7))
                 ORDER BY sequence DESC LIMIT $5",
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &last,
                    &limit,
                    &after.seconds,
                    &after.nanos,
                ],
            )
            .await?
        }
    };
    let mut events = rows
        .iter()
        .map(|row| decode_event(row.try_get(0)?))
        .collect::<Result<Vec<_>>>()?;
    if window.num_recent.is_some() || window.after.is_some() {
        events.reverse();
    }
    Ok(events)
}

/// The record of a live (existing, unexpired) session, read through `client` (a connection or
/// a transaction), with a statement prepared once per connection.
async fn live_record(client: &impl GenericClient, key: &SessionKey) -> Result<Option<Record>> {
    let statement = client.prepare_cached(SELECT_RECORD).await?;
    let row = client
        .query_opt(&statement, &[&key.app_name, &key.user_id, &key.session_id])
        .await?;
    Ok(row
        .map(|r| record(&r))
        .transpose()?
        .filter(|r| r.is_live(&now())))
}

/// A read-only transaction whose statements all see one snapshot.
async fn read_snapshot(client: &mut deadpool_postgres::Object) -> Result<Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

async fn entries(tx: &Transaction<'_>, sql: &str, params: &Params<'_>) -> Result<Vec<Entry>> {
    pairs(&tx.query(sql, params).await?)
}

fn pairs(rows: &[Row]) -> Result<Vec<Entry>> {
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// Reads the [`RECORD`] columns at the start of `row`.
fn record(row: &Row) -> Result<Record> {
    let expire_s: Option<i64> = row.try_get(5)?;
    let expire_n: Option<i32> = row.try_get(6)?;
    Ok(Record {
        incarnation: row.try_get(0)?,
        create_time: Timestamp {
            seconds: row.try_get(1)?,
            nanos: row.try_get(2)?,
        },
        last_update_time: Timestamp {
            seconds: row.try_get(3)?,
            nanos: row.try_get(4)?,
        },
        expire_time: expire_s.map(|seconds| Timestamp {
            seconds,
            nanos: expire_n.unwrap_or(0),
        }),
        last_sequence: to_u64(row.try_get(7)?)?,
    })
}

fn session(key: &SessionKey, record: &Record, state: String, events: Vec<Event>) -> Session {
    Session {
        id: key.session_id.clone(),
        app_name: key.app_name.clone(),
        user_id: key.user_id.clone(),
        state,
        events,
        create_time: Some(record.create_time),
        last_update_time: Some(record.last_update_time),
        last_sequence: record.last_sequence,
        expire_time: record.expire_time,
    }
}

/// Sequences and positions are `bigint`; values past `i64::MAX` cannot occur in practice and
/// are clamped rather than wrapped.
fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| SessionError::Corrupt(format!("negative sequence {v}")))
}

fn is_conflict(e: &SessionError) -> bool {
    matches!(e, SessionError::Postgres(e) if e.is_conflict())
}

fn exists(key: &SessionKey) -> SessionError {
    SessionError::SessionExists {
        session_id: key.session_id.clone(),
    }
}
