//! The PostgreSQL memory schema, and how a stored entry is read back.
//!
//! Schema version 12, created by the service itself ([`MIGRATIONS`], then [`convert`]):
//!
//! | table               | primary key             | holds                                        |
//! |---------------------|-------------------------|----------------------------------------------|
//! | `memory_scopes`     | app, user               | BM25 statistics, next ingestion `seq`        |
//! | `memory_entries`    | app, user, seq          | the entry, its kind, expiry and validity; unique per (session, id) slot |
//! | `memory_blocks`     | app, user, term, span   | the term's postings in a span, their bounds  |
//! | `memory_tombstones` | app, user, id           | deleted ids, not re-ingested                 |
//! | `memory_index`      | (one row)               | the analysis the index was built with        |
//! | `memory_vectors`    | app, user, seq          | the entry's embedding (little-endian `f32`s) |
//! | `memory_vector_model` | (one row)             | the model that made the vectors              |
//! | `memory_revisions`  | app, user, seq          | changes generation made (`RevisionRecord`)   |
//! | `memory_jobs`       | id                      | generation jobs (`JobRecord`), due and end times |
//! | `memory_metadata`   | app, user, key, value, seq | entries by metadata value (`super::metadata`) |
//! | `memory_purges`     | id                      | purges not yet finished (`PurgeRecord`)      |
//! | `memory_streams`    | app, user, stream       | streams with buffered events, their count and last time |
//! | `memory_stream_events` | app, user, stream, event id | every event a stream was given: buffered (`event`), or handed to `job_id` |
//!
//! `memory_entries` is also indexed by (session, app, user, seq), which finds a session's last
//! entry (its tail, for the context of appended events) in one index probe, and by expiry
//! (the generated memories that expire), for the sweep.
//!
//! Version 2 added each entry's context (`context_before`, `context_after`) and `memory_index`;
//! a store of version 1 is re-indexed when opened (see `PgMemoryStore::open`). Version 3 added
//! the vectors (see `super::vectors`): a `bytea` scored in the service, so that no extension is
//! needed and both stores rank alike. Version 4
//! replaced the row per posting (`memory_postings`) by posting blocks (see [`super::blocks`]; a
//! term's document frequency is the sum of its blocks' `postings`): the step drops the old
//! postings and forgets the analysis identity, so the store re-indexes every scope when opened,
//! which writes the blocks.
//!
//! A block is rewritten by every write that appends to it, so `memory_blocks` keeps blocks of
//! up to 8 KB inline and uncompressed (`toast_tuple_target`): PostgreSQL would otherwise
//! compress a block of a common term (past 2 KB) again at each append, and decompress it at
//! each read. Version 5 added memory generation (see `super::generation`). Version 6 made an
//! entry's kind and expiry columns of `memory_entries` (`generated`, `expire_ms`) instead of
//! something read from its metadata, and gave finished jobs their end time (`done_ms`), by
//! which they are pruned; [`convert`] fills them from what schema 5 stored and drops
//! `memory_expiries`.
//!
//! Version 7 leads every secondary index of `memory_entries` with its own column (session, id)
//! instead of (app, user). Led by (app, user), each of them matched a lookup of entries by
//! (app, user, seq) as well as the primary key does while the statistics say a user has few
//! entries (a freshly grown table, or a user far larger than the average, which is all a
//! prepared statement's generic plan knows). The planner then read entries through one of
//! them with `seq` as a filter: every probe walked the user's whole index, and a search of a
//! 100k-entry memory took 80-750 ms instead of 3 ms. Led by their own column, they serve only
//! the lookups that name it, and a lookup by seq has the primary key alone.
//!
//! Version 8 added `memory_metadata`, the index of the entries' metadata values (see
//! [`super::metadata`]); [`convert`] fills it from the entries of an older schema. Its index by
//! seq, which the cascading deletes use, is led by `seq` for the reason above. Version 9 added
//! `memory_purges`, the purges asked to delete until they have run to their end.
//!
//! Version 10 added event streams (see [`super::streams`]): `memory_streams` and
//! `memory_stream_events`, whose handed-off events go with their job when it is pruned (the
//! foreign key cascades). Both start empty: nothing is converted.
//! Version 11 gave entries their validity (see [`crate::validity`]): `valid_s`, `valid_n`
//! (when what the entry says became true, seconds and nanos; an older entry's is its timestamp,
//! set by the step itself) and `invalid_s`, `invalid_n` (when it stopped; null while valid).
//! The partial index `memory_closed` holds the entries no longer valid, which a search reads
//! to leave the superseded ones out before ranking. Led by (app, user) unlike the others: a
//! partial index serves only the queries that name its condition (`invalid_s IS NOT NULL`),
//! so no lookup by seq can be planned through it.
//! Version 12 has autovacuum visit `memory_metadata` after inserts of 1% of its rows instead of
//! PostgreSQL's default 20%. A filter's candidates are read by an index-only scan, which reads
//! the table too for every row on a page a vacuum has not yet marked all-visible: at 100,000
//! entries, the 1,000 rows of a 1% filter cost 0.2 ms from the index alone and several times
//! that from the table. The default left up to a sixth of a growing table (its newest entries,
//! the ones searched most) on such pages.
//!
//! Every primary key starts with (app, user): no statement reads or writes outside one user's
//! memory, and a distributed engine can shard by it.

use adk_common::postgres::Conversion;
use adk_proto::session::v1::Content;
use deadpool_postgres::Transaction;
use prost::Message;
use prost_types::Timestamp;
use tokio_postgres::Row;

use super::super::{
    generation::converted_kind,
    plan::{Context, Stored},
    Entry, JobRecord, Kind, Result, RevisionRecord, StoreError,
};
use crate::validity::Validity;

pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE memory_scopes (
    app_name  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    docs      bigint NOT NULL,
    total_len bigint NOT NULL,
    next_seq  bigint NOT NULL,
    PRIMARY KEY (app_name, user_id)
);
CREATE TABLE memory_entries (
    app_name        text COLLATE "C" NOT NULL,
    user_id         text COLLATE "C" NOT NULL,
    seq             bigint NOT NULL,
    session_id      text COLLATE "C" NOT NULL,
    id              text COLLATE "C" NOT NULL,
    author          text NOT NULL,
    ts_s            bigint,
    ts_n            integer,
    custom_metadata text NOT NULL,
    content         bytea NOT NULL,
    terms           text[] NOT NULL,
    len             integer NOT NULL,
    PRIMARY KEY (app_name, user_id, seq)
);
CREATE UNIQUE INDEX memory_slots ON memory_entries (app_name, user_id, session_id, id);
CREATE INDEX memory_ids ON memory_entries (app_name, user_id, id);
CREATE TABLE memory_postings (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    term     text COLLATE "C" NOT NULL,
    seq      bigint NOT NULL,
    tf       integer NOT NULL,
    len      integer NOT NULL,
    PRIMARY KEY (app_name, user_id, term, seq)
);
CREATE TABLE memory_tombstones (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    id       text COLLATE "C" NOT NULL,
    PRIMARY KEY (app_name, user_id, id)
);
"#,
    r#"
ALTER TABLE memory_entries
    ADD COLUMN context_before text NOT NULL DEFAULT '',
    ADD COLUMN context_after  text NOT NULL DEFAULT '';
CREATE TABLE memory_index (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    analysis text NOT NULL
);
"#,
    r#"
CREATE TABLE memory_vectors (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    seq      bigint NOT NULL,
    vector   bytea NOT NULL,
    PRIMARY KEY (app_name, user_id, seq)
);
CREATE TABLE memory_vector_model (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    model       text NOT NULL,
    dimension   integer NOT NULL,
    fingerprint text NOT NULL
);
"#,
    r#"
DROP TABLE memory_postings;
CREATE TABLE memory_blocks (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    term     text COLLATE "C" NOT NULL,
    span     bigint NOT NULL,
    postings integer NOT NULL,
    max_tf   bigint NOT NULL,
    min_len  bigint NOT NULL,
    block    bytea NOT NULL,
    PRIMARY KEY (app_name, user_id, term, span)
) WITH (fillfactor = 75, toast_tuple_target = 8160);
DELETE FROM memory_index;
CREATE INDEX memory_session_seqs ON memory_entries (app_name, user_id, session_id, seq);
"#,
    r#"
CREATE TABLE memory_revisions (
    app_name  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    seq       bigint GENERATED ALWAYS AS IDENTITY,
    memory_id text COLLATE "C" NOT NULL,
    record    bytea NOT NULL,
    PRIMARY KEY (app_name, user_id, seq)
);
CREATE TABLE memory_expiries (
    app_name  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    memory_id text COLLATE "C" NOT NULL,
    expire_ms bigint NOT NULL,
    PRIMARY KEY (app_name, user_id, memory_id)
);
CREATE INDEX memory_expiries_due ON memory_expiries (expire_ms);
CREATE TABLE memory_jobs (
    id       text COLLATE "C" PRIMARY KEY,
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    open     boolean NOT NULL,
    due_ms   bigint NOT NULL,
    record   bytea NOT NULL
);
CREATE INDEX memory_jobs_due ON memory_jobs (due_ms) WHERE open;
"#,
    r#"
ALTER TABLE memory_entries
    ADD COLUMN generated boolean NOT NULL DEFAULT false,
    ADD COLUMN expire_ms bigint;
CREATE INDEX memory_expiring ON memory_entries (expire_ms) WHERE expire_ms IS NOT NULL;
ALTER TABLE memory_jobs ADD COLUMN done_ms bigint;
CREATE INDEX memory_jobs_done ON memory_jobs (done_ms) WHERE NOT open;
"#,
    r#"
DROP INDEX memory_slots, memory_ids, memory_session_seqs;
CREATE UNIQUE INDEX memory_slots ON memory_entries (session_id, id, app_name, user_id);
CREATE INDEX memory_ids ON memory_entries (id, app_name, user_id);
CREATE INDEX memory_session_seqs ON memory_entries (session_id, app_name, user_id, seq);
"#,
    r#"
CREATE TABLE memory_metadata (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    value    bytea NOT NULL,
    seq      bigint NOT NULL,
    PRIMARY KEY (app_name, user_id, key, value, seq),
    FOREIGN KEY (app_name, user_id, seq) REFERENCES memory_entries ON DELETE CASCADE
);
CREATE INDEX memory_metadata_seqs ON memory_metadata (seq, app_name, user_id);
"#,
    r#"
CREATE TABLE memory_purges (
    id        text COLLATE "C" PRIMARY KEY,
    create_ms bigint NOT NULL,
    record    bytea NOT NULL
);
"#,
    r#"
CREATE TABLE memory_streams (
    app_name  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    stream_id text COLLATE "C" NOT NULL,
    buffered  integer NOT NULL,
    last_ms   bigint NOT NULL,
    PRIMARY KEY (app_name, user_id, stream_id)
);
CREATE TABLE memory_stream_events (
    app_name  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    stream_id text COLLATE "C" NOT NULL,
    event_id  text COLLATE "C" NOT NULL,
    seq       bigint GENERATED ALWAYS AS IDENTITY,
    event     bytea,
    job_id    text COLLATE "C" REFERENCES memory_jobs ON DELETE CASCADE,
    PRIMARY KEY (app_name, user_id, stream_id, event_id)
);
CREATE INDEX memory_stream_events_jobs ON memory_stream_events (job_id)
    WHERE job_id IS NOT NULL;
"#,
    r#"
ALTER TABLE memory_entries
    ADD COLUMN valid_s   bigint,
    ADD COLUMN valid_n   integer,
    ADD COLUMN invalid_s bigint,
    ADD COLUMN invalid_n integer;
UPDATE memory_entries SET valid_s = ts_s, valid_n = ts_n WHERE ts_s IS NOT NULL;
CREATE INDEX memory_closed ON memory_entries (app_name, user_id, seq, invalid_s, invalid_n)
    WHERE invalid_s IS NOT NULL;
"#,
    "ALTER TABLE memory_metadata SET (autovacuum_vacuum_insert_scale_factor = 0.01);",
];

/// Fills what version 6 added from what an older schema stored, when [`MIGRATIONS`] took it
/// past version 5 (`from`: the version it was at), in their transaction. An entry's kind and
/// expiry are decided by [`converted_kind`] from the revisions and the `memory_expiries` the
/// generator wrote, never from metadata; a finished job's end time is its record's last update.
pub(super) fn convert<'t>(tx: &'t Transaction<'t>, from: u32) -> Conversion<'t, StoreError> {
    Box::pin(async move {
        if from < 6 {
            convert_kinds(tx).await?;
        }
        if from < 8 {
            super::metadata::backfill(tx).await?;
        }
        Ok(())
    })
}

/// Version 6's columns, filled from what schema 5 stored (see [`convert`]).
async fn convert_kinds(tx: &Transaction<'_>) -> Result<()> {
    {
        // Only an entry in no session with a revision can be generated: the others stay raw.
        // Each is read with the last revision of its id (one pass over the revisions, not one
        // probe per entry: they are not indexed by memory id).
        let rows = tx
            .query(
                "WITH last AS (
                     SELECT DISTINCT ON (app_name, user_id, memory_id)
                         app_name, user_id, memory_id, record
                     FROM memory_revisions
                     ORDER BY app_name, user_id, memory_id, seq DESC)
                 SELECT e.app_name, e.user_id, e.seq, e.content, l.record, x.expire_ms
                 FROM memory_entries e
                 JOIN last l ON l.app_name = e.app_name AND l.user_id = e.user_id
                     AND l.memory_id = e.id
                 LEFT JOIN memory_expiries x ON x.app_name = e.app_name
                     AND x.user_id = e.user_id AND x.memory_id = e.id
                 WHERE e.session_id = ''",
                &[],
            )
            .await?;
        let (mut apps, mut users, mut seqs, mut expiries) = (vec![], vec![], vec![], vec![]);
        for row in &rows {
            let content: &[u8] = row.try_get(3)?;
            let entry = Entry {
                content: Content::decode(content)
                    .map_err(|e| StoreError::corrupt(format!("memory content: {e}")))?,
                ..Entry::default()
            };
            let last: &[u8] = row.try_get(4)?;
            let last = RevisionRecord::decode(last)
                .map_err(|e| StoreError::corrupt(format!("revision: {e}")))?;
            let kind = converted_kind(&entry, Some(&last), row.try_get(5)?);
            if kind.generated {
                apps.push(row.try_get::<_, String>(0)?);
                users.push(row.try_get::<_, String>(1)?);
                seqs.push(row.try_get::<_, i64>(2)?);
                expiries.push(kind.expire_ms);
            }
        }
        tx.execute(
            "UPDATE memory_entries e SET generated = true, expire_ms = d.expire_ms
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
                 AS d(app_name, user_id, seq, expire_ms)
             WHERE e.app_name = d.app_name AND e.user_id = d.user_id AND e.seq = d.seq",
            &[&apps, &users, &seqs, &expiries],
        )
        .await?;
        if !seqs.is_empty() {
            tracing::info!(generated = seqs.len(), "marked the generated memories");
        }
        let (mut ids, mut ends) = (vec![], vec![]);
        for row in tx
            .query("SELECT id, record FROM memory_jobs WHERE NOT open", &[])
            .await?
        {
            let record: &[u8] = row.try_get(1)?;
            let job =
                JobRecord::decode(record).map_err(|e| StoreError::corrupt(format!("job: {e}")))?;
            ids.push(job.id);
            ends.push(job.update_ms);
        }
        tx.execute(
            "UPDATE memory_jobs j SET done_ms = d.done_ms
             FROM unnest($1::text[], $2::bigint[]) AS d(id, done_ms) WHERE j.id = d.id",
            &[&ids, &ends],
        )
        .await?;
        tx.batch_execute("DROP TABLE memory_expiries").await?;
        Ok(())
    }
}

/// The `memory_entries` columns [`stored`] reads, in order.
pub(super) const ENTRY: &str = "seq, session_id, id, author, ts_s, ts_n, custom_metadata, \
     content, terms, len, context_before, context_after, generated, expire_ms, valid_s, valid_n, \
     invalid_s, invalid_n";

/// The time in a row's columns `seconds` and `nanos`, if it holds one.
pub(super) fn time(row: &Row, seconds: usize, nanos: usize) -> Result<Option<Timestamp>> {
    let s: Option<i64> = row.try_get(seconds)?;
    let n: Option<i32> = row.try_get(nanos)?;
    Ok(s.map(|seconds| Timestamp {
        seconds,
        nanos: n.unwrap_or(0),
    }))
}

/// Reads the [`ENTRY`] columns of a row.
pub(super) fn stored(row: &Row) -> Result<Stored> {
    let ts_s: Option<i64> = row.try_get(4)?;
    let ts_n: Option<i32> = row.try_get(5)?;
    let content: &[u8] = row.try_get(7)?;
    let content = Content::decode(content)
        .map_err(|e| StoreError::corrupt(format!("memory content: {e}")))?;
    let seq: i64 = row.try_get(0)?;
    let len: i32 = row.try_get(9)?;
    Ok(Stored {
        seq: u64::try_from(seq).map_err(|_| StoreError::corrupt(format!("memory seq {seq}")))?,
        context: Context {
            before: row.try_get(10)?,
            after: row.try_get(11)?,
        },
        entry: Entry {
            id: row.try_get(2)?,
            session_id: row.try_get(1)?,
            author: row.try_get(3)?,
            timestamp: ts_s.map(|seconds| Timestamp {
                seconds,
                nanos: ts_n.unwrap_or(0),
            }),
            custom_metadata: row.try_get(6)?,
            content,
            kind: Kind {
                generated: row.try_get(12)?,
                expire_ms: row.try_get(13)?,
            },
            validity: Validity {
                from: time(row, 14, 15)?,
                until: time(row, 16, 17)?,
            },
        },
        terms: row.try_get(8)?,
        len: u32::try_from(len).unwrap_or(0),
    })
}

/// A seq or counter as the database stores it (bigint).
pub(super) fn db_int(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}
