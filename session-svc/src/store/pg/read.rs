//! Reading session records, state and events.

use adk_proto::session::v1::{Event, Session};
use deadpool_postgres::{GenericClient, Transaction};
use prost::bytes::Bytes;
use prost_types::Timestamp;
use tokio_postgres::{IsolationLevel, Row};

use super::{to_i64, to_u64, Params};
use crate::{
    error::Result,
    state::Entry,
    store::{EncodedEvent, EventWindow, SessionKey},
    time::{self, now},
};

pub(super) const RECORD: &str = record_columns!();

/// One session's record.
pub(super) const SELECT_RECORD: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3"
);

/// A `sessions` row.
pub(super) struct Record {
    pub(super) incarnation: i64,
    pub(super) create_time: Timestamp,
    pub(super) last_update_time: Timestamp,
    pub(super) expire_time: Option<Timestamp>,
    pub(super) last_sequence: u64,
}

impl Record {
    pub(super) fn is_live(&self, now: &Timestamp) -> bool {
        time::is_live(self.expire_time.as_ref(), now)
    }
}

/// Reads events 1..=last as `window` selects. Trailing windows read newest first and stop
/// after what they return (the index on sequence makes the `after` bound one backward probe).
pub(super) async fn read_events(
    tx: &Transaction<'_>,
    key: &SessionKey,
    last: u64,
    window: EventWindow,
) -> Result<Vec<EncodedEvent>> {
    if window.num_recent == Some(0) || last == 0 {
        return Ok(Vec::new());
    }
    let limit = window.num_recent.map_or(i64::MAX, |n| to_i64(n as u64));
    let last = to_i64(last);
    let rows = match (&window.after, window.num_recent) {
        (None, None) => {
            tx.query(
                "SELECT sequence, body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND sequence <= $4
                 ORDER BY sequence",
                &[&key.app_name, &key.user_id, &key.session_id, &last],
            )
            .await?
        }
        (None, Some(_)) => {
            tx.query(
                "SELECT sequence, body FROM events
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND sequence <= $4
                 ORDER BY sequence DESC LIMIT $5",
                &[&key.app_name, &key.user_id, &key.session_id, &last, &limit],
            )
            .await?
        }
        (Some(after), _) => {
            // The trailing run of events not older than `after` (as the sled store walks it).
            tx.query(
                "SELECT sequence, body FROM events
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
    let mut events = rows.iter().map(encoded_event).collect::<Result<Vec<_>>>()?;
    if window.num_recent.is_some() || window.after.is_some() {
        events.reverse();
    }
    Ok(events)
}

/// A row of `sequence, body` from `events`.
pub(super) fn encoded_event(row: &Row) -> Result<EncodedEvent> {
    Ok(EncodedEvent {
        sequence: to_u64(row.try_get(0)?)?,
        bytes: Bytes::copy_from_slice(row.try_get(1)?),
    })
}

/// The record of a live (existing, unexpired) session, read through `client` (a connection or
/// a transaction), with a statement prepared once per connection.
pub(super) async fn live_record(
    client: &impl GenericClient,
    key: &SessionKey,
) -> Result<Option<Record>> {
    Ok(stored_record(client, key)
        .await?
        .filter(|r| r.is_live(&now())))
}

/// The record of a session, expired or not (see [`live_record`]).
pub(super) async fn stored_record(
    client: &impl GenericClient,
    key: &SessionKey,
) -> Result<Option<Record>> {
    let statement = client.prepare_cached(SELECT_RECORD).await?;
    let row = client
        .query_opt(&statement, &[&key.app_name, &key.user_id, &key.session_id])
        .await?;
    row.map(|r| record(&r)).transpose()
}

/// A read-only transaction whose statements all see one snapshot.
pub(super) async fn read_snapshot(
    client: &mut deadpool_postgres::Object,
) -> Result<Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

/// A user's state: every version of each key, in the order [`keep_newest`] folds.
pub(super) const USER_STATE: &str = "SELECT key, value FROM user_state
     WHERE app_name = $1 AND user_id = $2 ORDER BY key, version";

/// An app's state: every version of each key, in the order [`keep_newest`] folds.
pub(super) const APP_STATE: &str =
    "SELECT key, value FROM app_state WHERE app_name = $1 ORDER BY key, version";

/// Entries (key and value) that `sql` reads in key order.
pub(super) async fn entries(
    tx: &Transaction<'_>,
    sql: &str,
    params: &Params<'_>,
) -> Result<Vec<Entry>> {
    tx.query(sql, params)
        .await?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// A shared scope's entries from the versions [`USER_STATE`] or [`APP_STATE`] read (through
/// `client`, a connection or a transaction): each key's newest version.
pub(super) async fn shared_entries(
    client: &impl GenericClient,
    sql: &str,
    params: &Params<'_>,
) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for row in client.query(sql, params).await? {
        keep_newest(&mut entries, row.try_get(0)?, row.try_get(1)?);
    }
    Ok(entries)
}

/// Adds a version read in key order, each key's versions oldest first, to `entries`: it
/// replaces the one before when it is of the same key. (Versions other than a key's newest are
/// left only by writers that overlapped, until the key's next write deletes them.)
pub(super) fn keep_newest(entries: &mut Vec<Entry>, key: String, value: String) {
    match entries.last_mut() {
        Some(last) if last.0 == key => last.1 = value,
        _ => entries.push((key, value)),
    }
}

/// Reads the [`RECORD`] columns at the start of `row`.
pub(super) fn record(row: &Row) -> Result<Record> {
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

pub(super) fn session(
    key: &SessionKey,
    record: &Record,
    state: String,
    events: Vec<Event>,
) -> Session {
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
