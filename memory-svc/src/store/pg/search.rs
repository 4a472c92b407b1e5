//! Ranked search on the PostgreSQL store, reading only the posting blocks the pruning needs.
//!
//! A search runs in one read-only REPEATABLE READ transaction, so the statistics, document
//! frequencies, block bounds, postings and entries it reads are of one snapshot: a bound read
//! is the bound of the postings read (writers keep them so, see [`super::write`]).
//!
//! 1. One round trip (two statements pipelined) reads the scope's statistics and version and
//!    the bounds and sizes of the query terms' blocks (a term's document frequency is the sum
//!    of its blocks' sizes), and the blocks themselves of the terms of at most [`PRELOADED`]
//!    postings: a rare term's spans are the best, read in any case, so a search of rare
//!    words needs no other round trip before its entries. The terms kept in memory at the
//!    search's version ([`super::cache`]) are not read; those kept at another version are
//!    read in a second round trip, and their kept blocks that no write touched since are
//!    used. A span's bound is the sum of its blocks' bounds: the score
//!    of the block's highest frequency at its lowest length (a BM25 contribution grows with
//!    the frequency and shrinks with the length).
//! 2. The other blocks, less those kept, are read span by span, highest bound first, one
//!    statement per round: a first round of about [`FIRST_ROUND`] postings, each next one
//!    [`GROWTH`] times larger. Each round's spans are ranked by [`maxscore::top_k`], exactly as
//!    the sled store ranks its lists, and merged with the best entries of the rounds before
//!    (spans hold disjoint seqs, so no posting is ranked twice); once `limit` entries are
//!    held, a span whose bound cannot beat the `limit`-th score holds no result and is never
//!    read. With filters, the entries that would enter the results are read (one round trip
//!    per ranking that met new ones) and checked before they count.
//! 3. The results' entries are read, and the terms' bounds and the blocks read are kept.
//!
//! Exactness: every entry of a span read is scored from all its query terms' postings (all
//! blocks of a span are read together), summed in query-term order as on sled; a span left
//! unread has only entries scoring strictly below the `limit`-th score (bounds carry the same
//! rounding margin as MaxScore's), so neither its entries nor their order could change the
//! results.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use tokio_postgres::{types::ToSql, IsolationLevel};

use super::{
    super::{
        index,
        maxscore::{self, cannot_beat, Among, Cursor, Posting, Ranked, TermList},
        Entry, Hit, Result, Scope, SearchQuery,
    },
    blocks,
    cache::{Bound, Term},
    schema::{db_int, stored, ENTRY},
    PgMemoryStore,
};

/// Postings the first round of blocks reads, about: enough for the usual `limit` to find its
/// results among the best spans of a query with a rare term.
const FIRST_ROUND: u64 = 2048;
/// How much larger each further round is than the one before.
const GROWTH: u64 = 4;
/// A term with at most this many postings has its blocks read with its bounds.
#[cfg(not(test))]
const PRELOADED: i64 = 1024;
/// Few under test, so that the test corpora's searches read blocks both ways.
#[cfg(test)]
const PRELOADED: i64 = 8;

/// A span of seqs holding postings of the query's terms.
struct Span {
    span: i64,
    /// No entry of the span scores above this.
    bound: f64,
    postings: u64,
    /// The query terms (by their place in the query's lists) with a block in the span.
    terms: Vec<usize>,
}

/// A term's blocks of one round, in span (so seq) order, for [`maxscore::top_k`]: a cursor
/// over the blocks as kept, without copying them into one list.
struct Loaded<'a> {
    /// The blocks after the one the cursor is in.
    rest: &'a [Arc<[Posting]>],
    /// The block the cursor is in (empty past the last), and its place in it.
    block: &'a [Posting],
    pos: usize,
}

impl<'a> Loaded<'a> {
    fn new(blocks: &'a [Arc<[Posting]>]) -> Self {
        let mut cursor = Self {
            rest: blocks,
            block: &[],
            pos: 0,
        };
        cursor.settle();
        cursor
    }

    /// Moves past the ends of blocks, so that the cursor is at a posting or past the last.
    fn settle(&mut self) {
        while self.pos >= self.block.len() {
            let Some((next, rest)) = self.rest.split_first() else {
                return;
            };
            (self.block, self.rest, self.pos) = (next, rest, 0);
        }
    }
}

impl Cursor for Loaded<'_> {
    fn current(&self) -> Option<Posting> {
        self.block.get(self.pos).copied()
    }

    fn advance(&mut self) -> Result<()> {
        self.pos += 1;
        self.settle();
        Ok(())
    }

    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        // MaxScore seeks a little ahead, mostly within the block the cursor is in: blocks are
        // walked one by one, and the posting found by galloping from the cursor's place.
        while self.block.last().is_some_and(|p| p.seq < seq) {
            self.pos = self.block.len();
            self.settle();
            if self.pos >= self.block.len() {
                return Ok(None);
            }
        }
        let from = self.block.get(self.pos..).unwrap_or_default();
        let (mut below, mut step) = (0, 1);
        while from.get(below + step).is_some_and(|p| p.seq < seq) {
            below += step;
            step *= 2;
        }
        let until = (below + step).min(from.len());
        let within = from.get(below..until).unwrap_or_default();
        self.pos += below + within.partition_point(|p| p.seq < seq);
        Ok(self.current().filter(|p| p.seq == seq))
    }
}

/// A query term's blocks: the bounds of all, and the blocks kept or read so far.
struct TermBlocks {
    /// As kept in memory at the search's version, or as just read (with no blocks).
    kept: Arc<Term>,
    /// Blocks this search read (or that came with the bounds), by span.
    read: HashMap<i64, Arc<[Posting]>>,
    /// Whether the search knows more of the term than the cache: it read the bounds or blocks.
    new: bool,
}

impl TermBlocks {
    fn block(&self, span: i64) -> Option<&Arc<[Posting]>> {
        self.read.get(&span).or_else(|| self.kept.blocks.get(&span))
    }
}

impl PgMemoryStore {
    /// [`super::super::MemoryStore::search`], checking every candidate entry against the
    /// query's filters when `filtered`, else only ranking postings.
    pub(super) async fn ranked(
        &self,
        scope: Scope<'_>,
        query: &SearchQuery,
        filtered: bool,
    ) -> Result<Vec<Hit>> {
        let terms = self.analyzer.query_terms(&query.text, query.language);
        if terms.is_empty() || query.limit == 0 {
            return Ok(Vec::new());
        }
        let (app, user) = (&scope.app_name, &scope.user_id);
        let mut client = self.pool.get().await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let (stats, bounds, blocks_of) = tokio::try_join!(
            // The scope's version (see `super::scope_version`) is read in the search's
            // snapshot, with the statistics.
            tx.prepare_cached(
                "SELECT docs, total_len, xmin::text, next_seq FROM memory_scopes
                 WHERE app_name = $1 AND user_id = $2"
            ),
            // Both read by lateral probes of the primary key, one per term or (term, span):
            // a plan that does not depend on the table's statistics (`OFFSET 0` keeps the
            // planner from flattening a probe into a join). Planned on the stale
            // statistics of a freshly loaded table ("2 rows per user"), `term = ANY($3)` read
            // every block of the user.
            // A term of few postings comes with its blocks: a search reads them anyway (a
            // rare term's spans are the best). Its size is summed first, so that a common
            // term's blocks are not carried through the statement only to be dropped (a
            // window over the blocks' rows did that: +1.3 ms for three common terms at 100k).
            tx.prepare_cached(
                "SELECT b.* FROM unnest($3::text[]) AS q(term)
                 CROSS JOIN LATERAL (
                     SELECT sum(postings) AS df FROM memory_blocks
                     WHERE app_name = $1 AND user_id = $2 AND term = q.term
                     OFFSET 0
                 ) AS d
                 CROSS JOIN LATERAL (
                     SELECT term, span, postings, max_tf, min_len,
                            CASE WHEN d.df <= $4 THEN block END, xmin::text::bigint
                     FROM memory_blocks
                     WHERE app_name = $1 AND user_id = $2 AND term = q.term
                     OFFSET 0
                 ) AS b"
            ),
            tx.prepare_cached(
                "SELECT b.* FROM unnest($3::text[], $4::bigint[]) AS d(term, span)
                 CROSS JOIN LATERAL (
                     SELECT term, span, block FROM memory_blocks
                     WHERE app_name = $1 AND user_id = $2 AND term = d.term AND span = d.span
                     OFFSET 0
                 ) AS b"
            ),
        )?;
        // The terms kept in memory, at the version they were read at. The others' bounds are
        // read with the statistics; these are read only if the scope changed since.
        let kept: Vec<Option<(u64, Arc<Term>)>> = terms
            .iter()
            .map(|t| self.block_cache.get(scope, t))
            .collect();
        let unkept: Vec<&str> = (terms.iter().zip(&kept))
            .filter(|(_, k)| k.is_none())
            .map(|(t, _)| t.as_str())
            .collect();
        let (scope_params, unkept_params): (&[&(dyn ToSql + Sync)], &[&(dyn ToSql + Sync)]) =
            (&[app, user], &[app, user, &unkept, &PRELOADED]);
        // The superseded entries and a filter's candidates are read with the statistics
        // (pipelined: one round trip).
        let (stats, mut rows, hidden, candidates) = tokio::try_join!(
            async { Ok(tx.query_opt(&stats, scope_params).await?) },
            async {
                if unkept.is_empty() {
                    return Ok(Vec::new());
                }
                Ok(tx.query(&bounds, unkept_params).await?)
            },
            hidden(&tx, scope, query),
            async {
                if !filtered {
                    return Ok(None);
                }
                super::metadata::candidates(&tx, scope, &query.filter).await
            },
        )?;
        let Some(stats) = stats else {
            return Ok(Vec::new());
        };
        let (docs, total_len): (i64, i64) = (stats.try_get(0)?, stats.try_get(1)?);
        if docs <= 0 {
            return Ok(Vec::new());
        }
        let version = super::scope_version(stats.try_get(2)?, stats.try_get(3)?, ());
        let stale: Vec<&str> = (terms.iter().zip(&kept))
            .filter(|(_, k)| k.as_ref().is_some_and(|(v, _)| *v != version))
            .map(|(t, _)| t.as_str())
            .collect();
        if !stale.is_empty() {
            rows.extend(tx.query(&bounds, &[app, user, &stale, &PRELOADED]).await?);
        }
        // Every query term's blocks, in query order.
        let mut read = HashMap::<&str, (Vec<Bound>, HashMap<i64, Arc<[Posting]>>)>::new();
        for row in &rows {
            let (term, span): (&str, i64) = (row.try_get(0)?, row.try_get(1)?);
            let (bounds, blocks) = read.entry(term).or_default();
            bounds.push(Bound {
                span,
                postings: row.try_get(2)?,
                max_tf: row.try_get(3)?,
                min_len: row.try_get(4)?,
                written: row.try_get(6)?,
            });
            if let Some(block) = row.try_get::<_, Option<&[u8]>>(5)? {
                let mut postings = Vec::new();
                blocks::decode(span, block, &mut postings)?;
                blocks.insert(span, postings.into());
            }
        }
        let mut known: Vec<TermBlocks> = (terms.iter().zip(kept))
            .map(|(term, kept)| match kept {
                Some((v, kept)) if v == version => TermBlocks {
                    kept,
                    read: HashMap::new(),
                    new: false,
                },
                stale => {
                    let (bounds, mut read) = read.remove(term.as_str()).unwrap_or_default();
                    if let Some((_, stale)) = stale {
                        for (span, block) in stale.unwritten(&bounds) {
                            read.entry(span).or_insert(block);
                        }
                    }
                    TermBlocks {
                        kept: Arc::new(Term {
                            bounds,
                            blocks: HashMap::new(),
                        }),
                        read,
                        new: true,
                    }
                }
            })
            .collect();

        let n = docs as f64;
        let avg_len = total_len as f64 / n;
        // The terms in entries, in query order (the order scores are summed in), with their
        // place among the query's terms and their idfs.
        let lists: Vec<(usize, f64)> = known
            .iter()
            .enumerate()
            .filter_map(|(q, term)| {
                let df: i64 = term.kept.bounds.iter().map(|b| i64::from(b.postings)).sum();
                (df > 0).then(|| (q, index::idf(n, df as f64)))
            })
            .collect();
        let mut spans = HashMap::<i64, Span>::new();
        for (i, &(q, idf)) in lists.iter().enumerate() {
            for b in &known[q].kept.bounds {
                let s = spans.entry(b.span).or_insert(Span {
                    span: b.span,
                    bound: 0.0,
                    postings: 0,
                    terms: Vec::new(),
                });
                s.bound += index::score(idf, b.max_tf as f64, b.min_len as f64, avg_len);
                s.postings += u64::try_from(b.postings).unwrap_or(0);
                s.terms.push(i);
            }
        }
        let mut order: Vec<Span> = spans.into_values().collect();
        order.sort_by(|a, b| b.bound.total_cmp(&a.bound).then(a.span.cmp(&b.span)));
        // Bounds bound only when no idf is negative (see `maxscore`).
        let prune = lists.iter().all(|(_, idf)| *idf >= 0.0);

        // Filtered searches: the entries read so far, `None` for those the filters refuse; the
        // metadata filter's candidates, when its index narrows it (others are refused unread).
        let mut checked = HashMap::<u64, Option<Entry>>::new();
        // Few candidates are sought in the lists rather than the lists scanned: only the spans
        // holding one are read, all in the first round (seeking them costs little, and each
        // round costs round trips).
        let postings = order.iter().map(|s| s.postings).sum();
        let among =
            (candidates.as_ref()).filter(|c| maxscore::among_few(c.len(), lists.len(), postings));
        if let Some(among) = among {
            order.retain(|s| among.range(blocks::seqs_of(s.span)).next().is_some());
        }
        // The best entries of the spans read so far. Spans hold disjoint seqs and an entry's
        // score depends only on its own postings, so the best of all spans read is the best of
        // this list and of each new round's spans: a round ranks only the postings it read.
        let mut best = Vec::<Ranked<()>>::new();
        // Rounds read the spans most likely to hold the results first, so that pruning can
        // leave the others unread; seeking few candidates costs little, so their spans are read
        // in one round, saving the rounds' round trips.
        let first = if among.is_some() {
            u64::MAX
        } else {
            FIRST_ROUND
        };
        let (mut next, mut round) = (0, first);
        loop {
            let theta = match best.last() {
                Some(worst) if best.len() == query.limit => worst.score,
                _ => f64::NEG_INFINITY,
            };
            // This round's blocks: those known already, and the others to read.
            let mut fresh: Vec<Vec<(i64, Arc<[Posting]>)>> = vec![Vec::new(); lists.len()];
            let (mut pick_terms, mut pick_spans) = (Vec::new(), Vec::new());
            let (mut picked, mut postings) = (false, 0);
            while let Some(s) = order.get(next).filter(|_| postings < round) {
                if prune && cannot_beat(s.bound, theta) {
                    next = order.len();
                    break;
                }
                for &i in &s.terms {
                    let q = lists[i].0;
                    match known[q].block(s.span) {
                        Some(block) => fresh[i].push((s.span, Arc::clone(block))),
                        None => {
                            pick_terms.push(terms[q].as_str());
                            pick_spans.push(s.span);
                        }
                    }
                }
                picked = true;
                postings += s.postings;
                next += 1;
            }
            if !picked {
                break;
            }
            round = round.saturating_mul(GROWTH);
            if !pick_spans.is_empty() {
                for row in tx
                    .query(&blocks_of, &[app, user, &pick_terms, &pick_spans])
                    .await?
                {
                    let (term, span, block): (&str, i64, &[u8]) =
                        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                    let Some(i) = lists.iter().position(|&(q, _)| terms[q] == term) else {
                        continue;
                    };
                    let mut postings = Vec::new();
                    blocks::decode(span, block, &mut postings)?;
                    let postings: Arc<[Posting]> = postings.into();
                    let known = &mut known[lists[i].0];
                    known.read.insert(span, Arc::clone(&postings));
                    known.new = true;
                    fresh[i].push((span, postings));
                }
            }
            // A term's blocks in seq order, for its cursor: each span is picked once a round.
            let fresh: Vec<Vec<Arc<[Posting]>>> = fresh
                .into_iter()
                .map(|mut blocks| {
                    blocks.sort_unstable_by_key(|(span, _)| *span);
                    let blocks = blocks.into_iter().map(|(_, block)| block);
                    blocks.filter(|b| !b.is_empty()).collect()
                })
                .collect();
            let ranked = loop {
                let mut unknown = Vec::new();
                let cursors = lists
                    .iter()
                    .zip(&fresh)
                    .map(|(&(_, idf), blocks)| {
                        let cursor = Loaded::new(blocks);
                        Ok(TermList {
                            idf,
                            cursor: match among {
                                Some(among) => Among::only(cursor, among)?,
                                None => Among::all(cursor),
                            },
                        })
                    })
                    .collect::<Result<_>>()?;
                // An entry not read yet counts as admitted for this ranking, which is then done
                // again once it is read.
                // The rounds before hold `limit` entries at `theta` or above: an entry of this
                // round that cannot reach it is pruned from the start.
                let ranked = maxscore::top_k(cursors, avg_len, query.limit, theta, |seq| {
                    if hidden.contains(&seq) {
                        return Ok(None);
                    }
                    if !filtered {
                        return Ok(Some(()));
                    }
                    if candidates.as_ref().is_some_and(|c| !c.contains(&seq)) {
                        return Ok(None);
                    }
                    Ok(match checked.get(&seq) {
                        Some(entry) => entry.as_ref().map(|_| ()),
                        None => {
                            unknown.push(db_int(seq));
                            Some(())
                        }
                    })
                })?;
                if unknown.is_empty() {
                    break ranked;
                }
                let mut found = entries(&tx, scope, &unknown).await?;
                let mut refused = false;
                for seq in unknown {
                    let entry = found.remove(&seq).filter(|e| query.admits(e));
                    refused |= entry.is_none();
                    checked.insert(seq as u64, entry);
                }
                // Ranked again with the same answers, the same entries would come out.
                if !refused {
                    break ranked;
                }
            };
            best.extend(ranked);
            best.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
            best.truncate(query.limit);
        }
        for (term, known) in terms.iter().zip(known) {
            if known.new {
                let kept = Term {
                    bounds: known.kept.bounds.clone(),
                    blocks: known.read,
                };
                self.block_cache.keep(scope, term, version, kept);
            }
        }
        let ranked = best;
        let mut found = if filtered {
            HashMap::new()
        } else {
            let seqs: Vec<i64> = ranked.iter().map(|r| db_int(r.seq)).collect();
            entries(&tx, scope, &seqs).await?
        };
        Ok(ranked
            .into_iter()
            .filter_map(|Ranked { score, seq, .. }| {
                let entry = match checked.remove(&seq) {
                    Some(entry) => entry,
                    None => found.remove(&db_int(seq)),
                }?;
                Some(Hit { entry, score })
            })
            .collect())
    }
}

/// The seqs of `scope` the query leaves out for their closed validity (see
/// [`SearchQuery::hidden`]): read from the partial index `memory_closed`, which holds only the
/// entries no longer valid.
pub(super) async fn hidden(
    client: &impl deadpool_postgres::GenericClient,
    scope: Scope<'_>,
    query: &SearchQuery,
) -> Result<HashSet<u64>> {
    if !query.valid_at.hides_any_closed() {
        return Ok(HashSet::new());
    }
    let statement = client
        .prepare_cached(
            "SELECT seq, invalid_s, invalid_n FROM memory_entries
             WHERE app_name = $1 AND user_id = $2 AND invalid_s IS NOT NULL",
        )
        .await?;
    let rows = client
        .query(&statement, &[&scope.app_name, &scope.user_id])
        .await?;
    let mut closed = Vec::with_capacity(rows.len());
    for row in &rows {
        let seq: i64 = row.try_get(0)?;
        if let Some(until) = super::schema::time(row, 1, 2)? {
            closed.push((u64::try_from(seq).unwrap_or(0), until));
        }
    }
    Ok(query.hidden(closed))
}

/// The entries stored at these seqs.
pub(super) async fn entries(
    tx: &impl deadpool_postgres::GenericClient,
    scope: Scope<'_>,
    seqs: &[i64],
) -> Result<HashMap<i64, Entry>> {
    let statement = tx
        .prepare_cached(&format!(
            "SELECT e.* FROM unnest($3::bigint[]) AS q(seq)
             CROSS JOIN LATERAL (
                 SELECT {ENTRY} FROM memory_entries
                 WHERE app_name = $1 AND user_id = $2 AND seq = q.seq
                 OFFSET 0
             ) AS e"
        ))
        .await?;
    let rows = tx
        .query(&statement, &[&scope.app_name, &scope.user_id, &seqs])
        .await?;
    let mut by_seq = HashMap::with_capacity(rows.len());
    for row in &rows {
        let s = stored(row)?;
        by_seq.insert(db_int(s.seq), s.entry);
    }
    Ok(by_seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(seqs: &[&[u64]]) -> Vec<Arc<[Posting]>> {
        seqs.iter()
            .map(|block| {
                block
                    .iter()
                    .map(|&seq| Posting { seq, tf: 1, len: 1 })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_cursor_reads_and_seeks_across_blocks() {
        let blocks = blocks(&[&[1, 3], &[17, 20, 31], &[40]]);
        let mut cursor = Loaded::new(&blocks);
        let mut read = Vec::new();
        while let Some(p) = cursor.current() {
            read.push(p.seq);
            cursor.advance().unwrap();
        }
        assert_eq!(read, [1, 3, 17, 20, 31, 40]);

        let mut cursor = Loaded::new(&blocks);
        assert_eq!(cursor.seek(3).unwrap().map(|p| p.seq), Some(3));
        assert_eq!(cursor.seek(18).unwrap(), None);
        assert_eq!(cursor.current().map(|p| p.seq), Some(20));
        assert_eq!(cursor.seek(31).unwrap().map(|p| p.seq), Some(31));
        assert_eq!(cursor.seek(40).unwrap().map(|p| p.seq), Some(40));
        assert_eq!(cursor.seek(41).unwrap(), None);
        assert_eq!(cursor.current(), None);
        assert!(Loaded::new(&[]).current().is_none());
    }
}
