//! Ranked search on the PostgreSQL store, reading only the posting blocks the pruning needs.
//!
//! A search runs in one read-only REPEATABLE READ transaction, so the statistics, document
//! frequencies, block bounds, postings and entries it reads are of one snapshot: a bound read
//! is the bound of the postings read (writers keep them so, see [`super::write`]).
//!
//! 1. One round trip (two statements pipelined) reads the scope's statistics and the bounds
//!    and sizes of the query terms' blocks (a term's document frequency is the sum of its
//!    blocks' sizes), and the blocks themselves of the terms of at most [`PRELOADED`]
//!    postings: a rare term's spans are the best, read in any case, so a search of rare
//!    words needs no other round trip before its entries. A span's bound is the sum
//!    of its blocks' bounds: the score of the block's highest frequency at its lowest length
//!    (a BM25 contribution grows with the frequency and shrinks with the length).
//! 2. The other blocks are read span by span, highest bound first, one statement per round: a first
//!    round of about [`FIRST_ROUND`] postings, each next one [`GROWTH`] times larger. Each
//!    round's spans are ranked by [`maxscore::top_k`], exactly as the sled store ranks its
//!    lists, and merged with the best entries of the rounds before (spans hold disjoint seqs,
//!    so no posting is ranked twice); once `limit` entries are held, a span whose bound cannot
//!    beat the `limit`-th score holds no result and is never read. With filters, the entries that would
//!    enter the results are read (one round trip per ranking that met new ones) and checked
//!    before they count.
//! 3. The results' entries are read.
//!
//! Exactness: every entry of a span read is scored from all its query terms' postings (all
//! blocks of a span are read together), summed in query-term order as on sled; a span left
//! unread has only entries scoring strictly below the `limit`-th score (bounds carry the same
//! rounding margin as MaxScore's), so neither its entries nor their order could change the
//! results.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::{types::ToSql, IsolationLevel};

use super::{
    super::{
        index,
        maxscore::{self, cannot_beat, Cursor, Posting, Ranked, TermList},
        Entry, Hit, Result, Scope, SearchQuery,
    },
    blocks,
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

/// A term's postings read in one round, in seq order, for [`maxscore::top_k`].
struct Loaded<'a> {
    postings: &'a [Posting],
    pos: usize,
}

impl Cursor for Loaded<'_> {
    fn current(&self) -> Option<Posting> {
        self.postings.get(self.pos).copied()
    }

    fn advance(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }

    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        let rest = self.postings.get(self.pos..).unwrap_or_default();
        self.pos += rest.partition_point(|p| p.seq < seq);
        Ok(self.current().filter(|p| p.seq == seq))
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
            tx.prepare_cached(
                "SELECT docs, total_len FROM memory_scopes WHERE app_name = $1 AND user_id = $2"
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
                            CASE WHEN d.df <= $4 THEN block END
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
        let (scope_params, term_params): (&[&(dyn ToSql + Sync)], &[&(dyn ToSql + Sync)]) =
            (&[app, user], &[app, user, &terms, &PRELOADED]);
        let (stats, bounds) = tokio::try_join!(
            tx.query_opt(&stats, scope_params),
            tx.query(&bounds, term_params),
        )?;
        let Some(stats) = stats else {
            return Ok(Vec::new());
        };
        let (docs, total_len): (i64, i64) = (stats.try_get(0)?, stats.try_get(1)?);
        if docs <= 0 {
            return Ok(Vec::new());
        }
        let n = docs as f64;
        let avg_len = total_len as f64 / n;
        let mut df = HashMap::<&str, i64>::with_capacity(terms.len());
        for row in &bounds {
            let postings: i32 = row.try_get(2)?;
            *df.entry(row.try_get(0)?).or_default() += i64::from(postings);
        }
        // The terms in entries, in query order (the order scores are summed in), with idfs.
        let lists: Vec<(&str, f64)> = terms
            .iter()
            .filter_map(|t| {
                let df = *df.get(t.as_str()).filter(|df| **df > 0)?;
                Some((t.as_str(), index::idf(n, df as f64)))
            })
            .collect();
        let position: HashMap<&str, usize> = lists
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (*t, i))
            .collect();
        let mut spans = HashMap::<i64, Span>::new();
        // The blocks that came with their bounds, by query term and span.
        let mut preloaded: Vec<HashMap<i64, Vec<Posting>>> = vec![HashMap::new(); lists.len()];
        for row in &bounds {
            let Some(&i) = position.get(row.try_get::<_, &str>(0)?) else {
                continue;
            };
            let span: i64 = row.try_get(1)?;
            if let Some(block) = row.try_get::<_, Option<&[u8]>>(5)? {
                blocks::decode(span, block, preloaded[i].entry(span).or_default())?;
            }
            let (postings, max_tf, min_len): (i32, i64, i64) =
                (row.try_get(2)?, row.try_get(3)?, row.try_get(4)?);
            let s = spans.entry(span).or_insert(Span {
                span,
                bound: 0.0,
                postings: 0,
                terms: Vec::new(),
            });
            s.bound += index::score(lists[i].1, max_tf as f64, min_len as f64, avg_len);
            s.postings += u64::try_from(postings).unwrap_or(0);
            s.terms.push(i);
        }
        let mut order: Vec<Span> = spans.into_values().collect();
        order.sort_by(|a, b| b.bound.total_cmp(&a.bound).then(a.span.cmp(&b.span)));
        // Bounds bound only when no idf is negative (see `maxscore`).
        let prune = lists.iter().all(|(_, idf)| *idf >= 0.0);

        // Filtered searches: the entries read so far, `None` for those the filters refuse.
        let mut checked = HashMap::<u64, Option<Entry>>::new();
        // The best entries of the spans read so far. Spans hold disjoint seqs and an entry's
        // score depends only on its own postings, so the best of all spans read is the best of
        // this list and of each new round's spans: a round ranks only the postings it read.
        let mut best = Vec::<Ranked<()>>::new();
        let (mut next, mut round) = (0, FIRST_ROUND);
        loop {
            let theta = match best.last() {
                Some(worst) if best.len() == query.limit => worst.score,
                _ => f64::NEG_INFINITY,
            };
            // This round's blocks: those that came with the bounds, and the others to read.
            let mut fresh: Vec<BTreeMap<i64, Vec<Posting>>> = vec![BTreeMap::new(); lists.len()];
            let (mut pick_terms, mut pick_spans) = (Vec::new(), Vec::new());
            let (mut picked, mut postings) = (false, 0);
            while let Some(s) = order.get(next).filter(|_| postings < round) {
                if prune && cannot_beat(s.bound, theta) {
                    next = order.len();
                    break;
                }
                for &i in &s.terms {
                    match preloaded[i].remove(&s.span) {
                        Some(block) => {
                            fresh[i].insert(s.span, block);
                        }
                        None => {
                            pick_terms.push(lists[i].0);
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
                    if let Some(&i) = position.get(term) {
                        let postings = fresh[i].entry(span).or_default();
                        blocks::decode(span, block, postings)?;
                    }
                }
            }
            let fresh: Vec<Vec<Posting>> = fresh
                .into_iter()
                .map(|blocks| blocks.into_values().flatten().collect())
                .collect();
            let ranked = loop {
                let mut unknown = Vec::new();
                let cursors = lists
                    .iter()
                    .zip(&fresh)
                    .map(|(&(_, idf), postings)| TermList {
                        idf,
                        cursor: Loaded {
                            postings: postings.as_slice(),
                            pos: 0,
                        },
                    })
                    .collect();
                // An entry not read yet counts as admitted for this ranking, which is then done
                // again once it is read.
                let ranked = maxscore::top_k(cursors, avg_len, query.limit, |seq| {
                    if !filtered {
                        return Ok(Some(()));
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
                for seq in unknown {
                    let entry = found.remove(&seq).filter(|e| query.admits(e));
                    checked.insert(seq as u64, entry);
                }
            };
            best.extend(ranked);
            best.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
            best.truncate(query.limit);
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
