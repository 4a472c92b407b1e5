//! Writes to the PostgreSQL store. A call is one transaction that first locks its scope's
//! `memory_scopes` row, so writes to one user's memory are serialised across replicas (as the
//! sled store serialises them in one process); it loads what the shared planner reads in a few
//! set-based queries, and applies the planned edits in bulk.
//!
//! What a write holds the lock for is what limits one user's ingestion, so the texts of the
//! call are analysed before it is taken (`plan::prepared`, about half of a batch's time in the
//! service), the entries and the blocks are written by pipelined statements, and the blocks of
//! spans no write reached yet are inserted without a conflict check (see [`add_postings`]).
//!
//! Each transaction takes one row lock of `memory_scopes` first and then touches rows of that
//! scope only, so two writes cannot wait for each other's rows in opposite orders (deadlock).
//! Taking it rewrites the row, which gives the scope a new version (`super::scope_version`):
//! what every replica's caches of the scope's blocks and vectors are checked against, so no
//! write may change a scope's rows without it.
//!
//! The same lock is what keeps block bounds honest with several replicas writing: a block's
//! postings and its bounds change in one statement of a transaction that holds the scope, so
//! a committed block's `max_tf` and `min_len` always bound its committed postings. Appends
//! widen the bounds (`greatest`, `least`); a block that loses postings is rewritten with the
//! bounds of what is left.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use prost::Message;

use super::{
    super::{
        index::{Analysis, Terms},
        maxscore::Posting,
        plan::{self, Context, Edit, Loaded, Stats, Stored, Write},
        vectors::{self, VectorEdits, Vectors},
        Entry, Result, Scope,
    },
    blocks::{self, span_of, Encoded},
    schema::{db_int, stored, ENTRY},
};

/// Runs `write` in `tx` and returns the call's count, and its vector changes if it changed
/// anything; the caller commits.
pub(super) async fn write(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    write: &Write,
    vectors: &Vectors,
    analysis: &mut Analysis,
) -> Result<(u32, Option<VectorEdits>)> {
    let stats = super::scopes::lock(tx, scope).await?;
    let loaded = load(tx, scope, write, stats).await?;
    let plan = plan::plan(write, loaded, analysis);
    if plan.edits.is_empty() {
        return Ok((plan.count, None));
    }
    let vector_edits = vectors::edits(&plan.edits, vectors);
    apply(tx, scope, plan.edits, stats.next_seq, plan.stats).await?;
    super::vectors::apply(tx, scope, &vector_edits).await?;
    Ok((plan.count, Some(vector_edits)))
}

/// What `write` reads, in the locked scope whose statistics are `stats`.
async fn load(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    write: &Write,
    stats: Stats,
) -> Result<Loaded> {
    let reads = write.reads();
    let (app, user) = (&scope.app_name, &scope.user_id);
    let mut loaded = Loaded {
        stats,
        // The lock created the scope's row.
        written: true,
        ..Loaded::default()
    };
    let mut keep = |rows: Vec<tokio_postgres::Row>| -> Result<()> {
        for row in &rows {
            loaded.entries.push(stored(row)?);
        }
        Ok(())
    };
    if !reads.slots.is_empty() {
        let (sessions, ids): (Vec<&str>, Vec<&str>) = reads.slots.iter().copied().unzip();
        keep(
            tx.query(
                // One probe of `memory_slots` per slot, whatever the table's statistics say
                // (`OFFSET 0` keeps the planner from flattening the probe into a join, which
                // on the stale statistics of a freshly loaded table read the user's entries
                // whole).
                &format!(
                    "SELECT e.* FROM unnest($3::text[], $4::text[]) AS s(slot_session, slot_id)
                     CROSS JOIN LATERAL (
                         SELECT {ENTRY} FROM memory_entries
                         WHERE app_name = $1 AND user_id = $2
                           AND session_id = s.slot_session AND id = s.slot_id
                         OFFSET 0
                     ) AS e"
                ),
                &[app, user, &sessions, &ids],
            )
            .await?,
        )?;
    }
    for (column, value) in [("session_id", reads.session), ("id", reads.id)] {
        if let Some(value) = value {
            keep(
                tx.query(
                    &format!(
                        "SELECT {ENTRY} FROM memory_entries
                         WHERE app_name = $1 AND user_id = $2 AND {column} = $3"
                    ),
                    &[app, user, &value],
                )
                .await?,
            )?;
        }
    }
    if !reads.tombstones.is_empty() {
        let rows = tx
            .query(
                "SELECT id FROM memory_tombstones
                 WHERE app_name = $1 AND user_id = $2 AND id = ANY($3)",
                &[app, user, &reads.tombstones],
            )
            .await?;
        for row in rows {
            loaded.tombstoned.insert(row.try_get(0)?);
        }
    }
    if !reads.sessions.is_empty() {
        keep(
            tx.query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND session_id = ANY($3)"
                ),
                &[app, user, &reads.sessions],
            )
            .await?,
        )?;
    }
    if let Some(id) = reads.sessions_holding {
        keep(
            tx.query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND session_id <> ''
                       AND session_id IN (SELECT session_id FROM memory_entries
                                          WHERE app_name = $1 AND user_id = $2 AND id = $3)"
                ),
                &[app, user, &id],
            )
            .await?,
        )?;
    }
    if let Some(session_id) = reads.tail {
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND session_id = $3
                     ORDER BY seq DESC LIMIT 1"
                ),
                &[app, user, &session_id],
            )
            .await?;
        loaded.tail = row.as_ref().map(stored).transpose()?;
    }
    if reads.all {
        let rows = tx
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 ORDER BY seq"
                ),
                &[app, user],
            )
            .await?;
        for row in &rows {
            loaded.entries.push(stored(row)?);
        }
    }
    if reads.count {
        let row = tx
            .query_one(
                "SELECT count(*) FROM memory_entries WHERE app_name = $1 AND user_id = $2",
                &[app, user],
            )
            .await?;
        let n: i64 = row.try_get(0)?;
        loaded.count = u64::try_from(n).unwrap_or(0);
    }
    Ok(loaded)
}

/// An entry to write at `seq`, with its index terms.
struct Indexed {
    seq: u64,
    entry: Entry,
    context: Context,
    terms: Terms,
}

/// Applies planned edits in bulk: a clear first, then removals (an entry rewritten in place is
/// removed, then inserted at the same seq), insertions, tombstones and the statistics. Every
/// seq stored before is below `stored_below`.
async fn apply(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    edits: Vec<Edit>,
    stored_below: u64,
    stats: Stats,
) -> Result<()> {
    let (app, user) = (&scope.app_name, &scope.user_id);
    let mut clear = false;
    let mut removed: Vec<Stored> = Vec::new();
    let mut inserted = Vec::new();
    let (mut tombstoned, mut lifted) = (Vec::new(), Vec::new());
    for edit in edits {
        match edit {
            Edit::Clear => clear = true,
            Edit::Remove(old) => removed.push(old),
            Edit::Insert {
                seq,
                entry,
                context,
                terms,
            } => inserted.push(Indexed {
                seq,
                entry,
                context,
                terms,
            }),
            Edit::Tombstone(id) => tombstoned.push(id),
            Edit::Lift(id) => lifted.push(id),
        }
    }
    if clear {
        for table in ["memory_entries", "memory_blocks", "memory_tombstones"] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE app_name = $1 AND user_id = $2"),
                &[app, user],
            )
            .await?;
        }
        clear_streams(tx, scope).await?;
    }
    if !removed.is_empty() {
        let seqs: Vec<i64> = removed.iter().map(|s| db_int(s.seq)).collect();
        tx.execute(
            "DELETE FROM memory_entries WHERE app_name = $1 AND user_id = $2 AND seq = ANY($3)",
            &[app, user, &seqs],
        )
        .await?;
        remove_postings(tx, scope, &removed).await?;
    }
    if !inserted.is_empty() {
        // Pipelined: the entries' statement is sent first, and the database inserts them
        // while the blocks are encoded.
        inserted.sort_by_key(|item| item.seq);
        tokio::try_join!(
            insert_entries(tx, scope, &inserted),
            add_postings(tx, scope, &inserted, stored_below),
        )?;
    }
    if !lifted.is_empty() {
        tx.execute(
            "DELETE FROM memory_tombstones WHERE app_name = $1 AND user_id = $2 AND id = ANY($3)",
            &[app, user, &lifted],
        )
        .await?;
    }
    if !tombstoned.is_empty() {
        tx.execute(
            "INSERT INTO memory_tombstones (app_name, user_id, id)
             SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING",
            &[app, user, &tombstoned],
        )
        .await?;
    }
    tx.execute(
        "UPDATE memory_scopes SET docs = $3, total_len = $4, next_seq = $5
         WHERE app_name = $1 AND user_id = $2",
        &[
            app,
            user,
            &db_int(stats.docs),
            &db_int(stats.total_len),
            &db_int(stats.next_seq),
        ],
    )
    .await?;
    Ok(())
}

/// Removes the scope's streams: their buffered events and the event ids they remember. The
/// streams' rows go first: deleting one waits for an append or a handoff holding it, and the
/// next statement (read committed: a fresh snapshot) then sees the events it wrote. Of the
/// buffered events, only those of the streams deleted go: a stream first appended to after the
/// first statement keeps its row and its events, whole, as an append after the delete.
async fn clear_streams(tx: &Transaction<'_>, scope: Scope<'_>) -> Result<()> {
    let (app, user) = (&scope.app_name, &scope.user_id);
    let streams: Vec<String> = tx
        .query(
            "DELETE FROM memory_streams WHERE app_name = $1 AND user_id = $2 RETURNING stream_id",
            &[app, user],
        )
        .await?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    tx.execute(
        "DELETE FROM memory_stream_events WHERE app_name = $1 AND user_id = $2
         AND (job_id IS NOT NULL OR stream_id = ANY($3))",
        &[app, user, &streams],
    )
    .await?;
    Ok(())
}

/// Takes the postings of `removed` entries out of their blocks: reads the blocks, and writes
/// back what is left with its bounds, or deletes a block left empty.
async fn remove_postings(tx: &Transaction<'_>, scope: Scope<'_>, removed: &[Stored]) -> Result<()> {
    let mut doomed = BTreeMap::<(&str, i64), Vec<u64>>::new();
    for s in removed {
        for term in &s.terms {
            doomed
                .entry((term.as_str(), span_of(s.seq)))
                .or_default()
                .push(s.seq);
        }
    }
    if doomed.is_empty() {
        return Ok(());
    }
    let (terms, spans): (Vec<&str>, Vec<i64>) = doomed.keys().copied().unzip();
    let (app, user) = (&scope.app_name, &scope.user_id);
    let read = tx
        .prepare_cached(
            "SELECT b.* FROM unnest($3::text[], $4::bigint[]) AS d(term, span)
             CROSS JOIN LATERAL (
                 SELECT term, span, block FROM memory_blocks
                 WHERE app_name = $1 AND user_id = $2 AND term = d.term AND span = d.span
                 OFFSET 0
             ) AS b",
        )
        .await?;
    let rows = tx.query(&read, &[app, user, &terms, &spans]).await?;
    let mut kept = Vec::new();
    let (mut emptied, mut emptied_spans) = (Vec::new(), Vec::new());
    let (mut k_terms, mut k_spans, mut k_counts, mut k_tfs, mut k_lens, mut k_blocks) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for row in &rows {
        let (term, span, block): (&str, i64, &[u8]) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        kept.clear();
        blocks::decode(span, block, &mut kept)?;
        if let Some(seqs) = doomed.get(&(term, span)) {
            kept.retain(|p| !seqs.contains(&p.seq));
        }
        if kept.is_empty() {
            emptied.push(term);
            emptied_spans.push(span);
            continue;
        }
        let mut e = Encoded::default();
        kept.iter().for_each(|&p| e.push(p));
        k_terms.push(term);
        k_spans.push(span);
        k_counts.push(i32::try_from(kept.len()).unwrap_or(i32::MAX));
        k_tfs.push(i64::from(e.max_tf));
        k_lens.push(i64::from(e.min_len));
        k_blocks.push(e.bytes);
    }
    if !k_terms.is_empty() {
        let rewrite = tx.prepare_cached(REWRITE_BLOCKS).await?;
        tx.execute(
            &rewrite,
            &[
                app, user, &k_terms, &k_spans, &k_counts, &k_tfs, &k_lens, &k_blocks,
            ],
        )
        .await?;
    }
    if !emptied.is_empty() {
        let delete = tx.prepare_cached(DELETE_BLOCKS).await?;
        tx.execute(&delete, &[app, user, &emptied, &emptied_spans])
            .await?;
    }
    Ok(())
}

/// Rewrites blocks that lost postings: `$3..$8` are each block's term, span, size, bounds and
/// postings. Each row is found by a fenced probe of the primary key and updated by its `ctid`
/// (a TID scan). Written as a join (`UPDATE … FROM unnest(…) WHERE b.term = d.term …`), the
/// generic plan on statistics taken while the user had few blocks (or none: a table not
/// analysed since it grew) hashed every block of the user: 20-40 ms per write at 10k entries,
/// 200 ms at 100k, for an entry rewritten or deleted.
pub(super) const REWRITE_BLOCKS: &str = "UPDATE memory_blocks b
     SET postings = d.postings, max_tf = d.max_tf, min_len = d.min_len, block = d.block
     FROM (
         SELECT d.*, x.ctid AS row
         FROM unnest($3::text[], $4::bigint[], $5::integer[], $6::bigint[], $7::bigint[],
             $8::bytea[]) AS d(term, span, postings, max_tf, min_len, block)
         CROSS JOIN LATERAL (
             SELECT ctid FROM memory_blocks
             WHERE app_name = $1 AND user_id = $2 AND term = d.term AND span = d.span
             OFFSET 0
         ) AS x
     ) AS d
     WHERE b.ctid = d.row";

/// Deletes the blocks of (term `$3`, span `$4`) pairs, found as [`REWRITE_BLOCKS`] finds them.
pub(super) const DELETE_BLOCKS: &str = "DELETE FROM memory_blocks b
     USING (
         SELECT x.ctid AS row FROM unnest($3::text[], $4::bigint[]) AS d(term, span)
         CROSS JOIN LATERAL (
             SELECT ctid FROM memory_blocks
             WHERE app_name = $1 AND user_id = $2 AND term = d.term AND span = d.span
             OFFSET 0
         ) AS x
     ) AS d
     WHERE b.ctid = d.row";

/// Appends the postings of `inserted` entries (in seq order) to their blocks (creating blocks
/// as needed), without reading the blocks (see [`blocks`]). Every stored posting has a seq
/// below the scope's `next_seq` as the write found it (`stored_below`), so a span past the one
/// holding `stored_below - 1` holds no block yet: its blocks are inserted as they are, and only
/// the blocks of the spans before (the span the last write ended in, and entries rewritten in
/// place) are upserted. An insert skips the conflict check's index probe and the arbiter's
/// bookkeeping, which cost about as much as the insert itself; an ingestion of new entries
/// writes most of its blocks into new spans.
async fn add_postings(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    inserted: &[Indexed],
    stored_below: u64,
) -> Result<()> {
    let mut grouped = BTreeMap::<(&str, i64), (i32, Encoded)>::new();
    for item in inserted.iter() {
        for (term, tf) in &item.terms.counts {
            let (n, block) = grouped
                .entry((term.as_str(), span_of(item.seq)))
                .or_default();
            *n += 1;
            block.push(Posting {
                seq: item.seq,
                tf: *tf,
                len: item.terms.len,
            });
        }
    }
    let last_stored_span = span_of(stored_below.saturating_sub(1));
    let (mut fresh, mut extended) = (BlockRows::default(), BlockRows::default());
    for ((term, span), (n, block)) in grouped {
        let rows = if span > last_stored_span {
            &mut fresh
        } else {
            &mut extended
        };
        rows.terms.push(term);
        rows.spans.push(span);
        rows.counts.push(n);
        rows.tfs.push(i64::from(block.max_tf));
        rows.lens.push(i64::from(block.min_len));
        rows.bytes.push(block.bytes);
    }
    const COLUMNS: &str = "INSERT INTO memory_blocks (app_name, user_id, term, span, postings,
             max_tf, min_len, block)
         SELECT $1, $2, d.term, d.span, d.postings, d.max_tf, d.min_len, d.block
         FROM unnest($3::text[], $4::bigint[], $5::integer[], $6::bigint[], $7::bigint[],
             $8::bytea[]) AS d(term, span, postings, max_tf, min_len, block)";
    let upsert = format!(
        "{COLUMNS}
         ON CONFLICT (app_name, user_id, term, span) DO UPDATE SET
             postings = memory_blocks.postings + EXCLUDED.postings,
             max_tf = greatest(memory_blocks.max_tf, EXCLUDED.max_tf),
             min_len = least(memory_blocks.min_len, EXCLUDED.min_len),
             block = memory_blocks.block || EXCLUDED.block"
    );
    let (insert, append) =
        tokio::try_join!(tx.prepare_cached(COLUMNS), tx.prepare_cached(&upsert))?;
    for (statement, rows) in [(&insert, &fresh), (&append, &extended)] {
        if rows.terms.is_empty() {
            continue;
        }
        tx.execute(
            statement,
            &[
                &scope.app_name,
                &scope.user_id,
                &rows.terms,
                &rows.spans,
                &rows.counts,
                &rows.tfs,
                &rows.lens,
                &rows.bytes,
            ],
        )
        .await?;
    }
    Ok(())
}

/// `memory_blocks` rows to write, as the columns of one statement.
#[derive(Default)]
struct BlockRows<'a> {
    terms: Vec<&'a str>,
    spans: Vec<i64>,
    counts: Vec<i32>,
    tfs: Vec<i64>,
    lens: Vec<i64>,
    bytes: Vec<Vec<u8>>,
}

/// Inserts new entries, in one statement.
async fn insert_entries(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    inserted: &[Indexed],
) -> Result<()> {
    let mut seqs = Vec::new();
    let (mut sessions, mut ids, mut authors, mut metadata) = (vec![], vec![], vec![], vec![]);
    let (mut ts_s, mut ts_n, mut contents, mut terms, mut lens) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut befores, mut afters, mut generated, mut expiries) = (vec![], vec![], vec![], vec![]);
    let (mut valid_s, mut valid_n, mut invalid_s, mut invalid_n) = (vec![], vec![], vec![], vec![]);
    for item in inserted {
        let e = &item.entry;
        let len = i32::try_from(item.terms.len).unwrap_or(i32::MAX);
        seqs.push(db_int(item.seq));
        sessions.push(e.session_id.as_str());
        ids.push(e.id.as_str());
        authors.push(e.author.as_str());
        metadata.push(e.custom_metadata.as_str());
        ts_s.push(e.timestamp.map(|t| t.seconds));
        ts_n.push(e.timestamp.map(|t| t.nanos));
        contents.push(e.content.encode_to_vec());
        befores.push(item.context.before.as_str());
        afters.push(item.context.after.as_str());
        generated.push(e.kind.generated);
        expiries.push(e.kind.expire_ms);
        valid_s.push(e.validity.from.map(|t| t.seconds));
        valid_n.push(e.validity.from.map(|t| t.nanos));
        invalid_s.push(e.validity.until.map(|t| t.seconds));
        invalid_n.push(e.validity.until.map(|t| t.nanos));
        // Arrays of arrays must be rectangular in PostgreSQL, so each entry's terms travel as
        // one tab-joined string (terms are words: they never contain a tab).
        let names: Vec<&str> = item.terms.counts.iter().map(|(t, _)| t.as_str()).collect();
        terms.push(names.join("\t"));
        lens.push(len);
    }
    let statement = tx
        .prepare_cached(
            "INSERT INTO memory_entries (app_name, user_id, seq, session_id, id, author, ts_s, ts_n,
             custom_metadata, content, terms, len, context_before, context_after, generated,
             expire_ms, valid_s, valid_n, invalid_s, invalid_n)
         SELECT $1, $2, d.seq, d.session_id, d.id, d.author, d.ts_s, d.ts_n, d.metadata,
             d.content, CASE WHEN d.terms = '' THEN '{}'::text[]
                             ELSE string_to_array(d.terms, E'\\t') END, d.len,
             d.before, d.after, d.generated, d.expire_ms, d.valid_s, d.valid_n, d.invalid_s,
             d.invalid_n
         FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
             $8::integer[], $9::text[], $10::bytea[], $11::text[], $12::integer[],
             $13::text[], $14::text[], $15::boolean[], $16::bigint[], $17::bigint[],
             $18::integer[], $19::bigint[], $20::integer[])
             AS d(seq, session_id, id, author, ts_s, ts_n, metadata, content, terms, len,
                  before, after, generated, expire_ms, valid_s, valid_n, invalid_s, invalid_n)",
        )
        .await?;
    tx.execute(
        &statement,
        &[
            &scope.app_name,
            &scope.user_id,
            &seqs,
            &sessions,
            &ids,
            &authors,
            &ts_s,
            &ts_n,
            &metadata,
            &contents,
            &terms,
            &lens,
            &befores,
            &afters,
            &generated,
            &expiries,
            &valid_s,
            &valid_n,
            &invalid_s,
            &invalid_n,
        ],
    )
    .await?;
    let indexed = inserted
        .iter()
        .map(|item| (db_int(item.seq), item.entry.custom_metadata.as_str()));
    super::metadata::insert(tx, scope, indexed).await
}
