//! The statements of the write paths. Every path takes its row locks in the order the
//! module docs of the store give (see "Concurrency" there), and writes shared state as the
//! same docs say (see "Shared state").

use deadpool_postgres::Transaction;
use tokio_postgres::{types::ToSql, Row, Statement};

use super::Params;
use crate::{
    error::Result,
    state::{Entry, ScopedDelta},
    store::SessionKey,
};

/// An append's first statement: the session's record, locked.
pub(super) const LOCK_SESSION: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3 FOR UPDATE"
);

/// The event stored under an id, if any: an append of that id is a retry. A statement of its
/// own, sent after [`LOCK_SESSION`]: in READ COMMITTED each statement reads a snapshot taken
/// when it starts, so it sees an append that committed while this one waited for the lock (a
/// subquery of the locking statement would read the snapshot from before the wait, miss that
/// event, and the retry would fail on the unique event id instead of being answered).
pub(super) const STORED_EVENT: &str = "SELECT body FROM events
     WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND event_id = $4";

/// An append's write: event, session row, change-log row and notification in one statement.
pub(super) const WRITE_APPEND: &str = "WITH ev AS (
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

/// Deletes a session with its events and state (nothing if it does not exist), and announces it.
pub(super) async fn remove(tx: &Transaction<'_>, key: &SessionKey, channel: &str) -> Result<()> {
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
pub(super) async fn remove_contents(
    tx: &Transaction<'_>,
    key: &SessionKey,
    channel: &str,
) -> Result<()> {
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

/// Upserts a session's state keys (S0.5: a shallow replace per key), in key order (`ORDER BY`).
/// Only writers of the session touch these rows, and they hold its row first.
pub(super) const UPSERT_SESSION_STATE: &str =
    "INSERT INTO session_state (app_name, user_id, session_id, key, value)
     SELECT $1, $2, $3, d.k, d.v FROM unnest($4::text[], $5::text[]) AS d(k, v) ORDER BY d.k
     ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = excluded.value";

/// Writes `user:` keys, shared by every session of the user, as new versions (see "Shared
/// state" in the store's module docs), and deletes the versions they supersede that no other
/// writer is deleting (`SKIP LOCKED`): it waits for no other writer.
pub(super) const WRITE_USER_STATE: &str = "WITH new AS (
         INSERT INTO user_state (app_name, user_id, key, version, value)
         SELECT $1, $2, d.k, nextval('state_versions'), d.v
         FROM unnest($3::text[], $4::text[]) AS d(k, v)
         RETURNING key, version
     ), old AS (
         SELECT o.key, o.version FROM user_state o JOIN new ON new.key = o.key
         WHERE o.app_name = $1 AND o.user_id = $2 AND o.key = ANY($3)
           AND o.version < new.version
         FOR UPDATE OF o SKIP LOCKED
     )
     DELETE FROM user_state s USING old
     WHERE s.app_name = $1 AND s.user_id = $2 AND s.key = old.key AND s.version = old.version";

/// Writes `app:` keys, shared by every session of the app, as [`WRITE_USER_STATE`] does.
pub(super) const WRITE_APP_STATE: &str = "WITH new AS (
         INSERT INTO app_state (app_name, key, version, value)
         SELECT $1, d.k, nextval('state_versions'), d.v
         FROM unnest($2::text[], $3::text[]) AS d(k, v)
         RETURNING key, version
     ), old AS (
         SELECT o.key, o.version FROM app_state o JOIN new ON new.key = o.key
         WHERE o.app_name = $1 AND o.key = ANY($2) AND o.version < new.version
         FOR UPDATE OF o SKIP LOCKED
     )
     DELETE FROM app_state s USING old
     WHERE s.app_name = $1 AND s.key = old.key AND s.version = old.version";

/// A delta's keys and values as the array parameters of the state writes.
pub(super) struct DeltaColumns {
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

/// The state writes of the three scopes, prepared once per connection.
pub(super) struct StateWrites {
    session: Statement,
    user: Statement,
    app: Statement,
}

impl StateWrites {
    async fn prepare(tx: &Transaction<'_>) -> Result<Self> {
        let (session, user, app) = tokio::try_join!(
            tx.prepare_cached(UPSERT_SESSION_STATE),
            tx.prepare_cached(WRITE_USER_STATE),
            tx.prepare_cached(WRITE_APP_STATE),
        )?;
        Ok(Self { session, user, app })
    }
}

/// Runs `first` (if any) and then the delta's state writes: the session's own rows, then the
/// `user:` versions, then the `app:` versions.
///
/// The statements are pipelined (one round trip) and sent in that order: they are prepared
/// beforehand, so each is sent when first polled, and `biased` polls them first to last (an
/// unbiased `join!` rotates which future it polls first). When one fails, the server rejects
/// the ones after it as part of an aborted transaction, so the first error in order is the
/// cause.
pub(super) async fn write_in_order(
    tx: &Transaction<'_>,
    key: &SessionKey,
    first: Option<(&Statement, &Params<'_>)>,
    delta: &ScopedDelta,
) -> Result<Option<Row>> {
    let writes = StateWrites::prepare(tx).await?;
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
        write_scope(tx, &writes.session, &session_params, !session.0.is_empty()),
        write_scope(tx, &writes.user, &user_params, !user.0.is_empty()),
        write_scope(tx, &writes.app, &app_params, !app.0.is_empty()),
    );
    let row = first?;
    session?;
    user?;
    app?;
    Ok(row)
}

/// Runs a scope's state write unless `run` is false (a scope the delta does not touch).
async fn write_scope(
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
