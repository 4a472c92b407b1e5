//! The PostgreSQL store: memories shared by any number of stateless replicas.
//!
//! # Schema (version 1, created by the service itself; see [`MIGRATIONS`])
//! | table               | primary key             | holds                                        |
//! |---------------------|-------------------------|----------------------------------------------|
//! | `memory_scopes`     | app, user               | BM25 statistics, next ingestion `seq`        |
//! | `memory_entries`    | app, user, seq          | the entry; unique per (session, id) slot     |
//! | `memory_postings`   | app, user, term, seq    | term frequency and entry length              |
//! | `memory_tombstones` | app, user, id           | deleted ids, not re-ingested                 |
//!
//! Every key starts with (app, user): no statement reads or writes outside one user's memory,
//! and a distributed engine can shard by it.
//!
//! # Writes
//! A call is one transaction that first locks its scope's `memory_scopes` row, so writes to one
//! user's memory are serialised across replicas (as the sled store serialises them in one
//! process). It reads what the call touches in a few set-based queries, decides in Rust exactly
//! as the sled store does, and writes in bulk.
//!
//! # Search
//! The query terms' postings are read in one query; scores are summed in Rust with the same
//! formula and in the same order as the sled store ([`super::index`]), so both rank alike.

use std::collections::{HashMap, HashSet};

use adk_common::{
    keys::{Key, KeyReader},
    page, postgres,
};
use adk_proto::session::v1::Content;
use deadpool_postgres::{Pool, Transaction};
use prost::Message;
use prost_types::Timestamp;
use tokio_postgres::Row;

use super::{
    index::{self, Terms},
    DeleteTarget, Entry, Hit, MemoryStore, Result, Scope, SearchQuery, StoreError,
};
use crate::text;

const MIGRATIONS: &[&str] = &[r#"
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
"#];

/// The `memory_entries` columns [`stored`] reads, in order.
const ENTRY: &str = "seq, session_id, id, author, ts_s, ts_n, custom_metadata, content, terms, len";

/// Candidates fetched at a time while filtering ranked search results.
const FETCH: usize = 64;

/// Memory store on a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PgMemoryStore {
    pool: Pool,
}

impl std::fmt::Debug for PgMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemoryStore").finish_non_exhaustive()
    }
}

/// An entry as stored, with the terms it was indexed under (kept, not recomputed: removing it
/// must find exactly its postings, even after a tokenizer change).
#[derive(Debug, Clone)]
struct Stored {
    seq: i64,
    entry: Entry,
    terms: Vec<String>,
    len: u32,
}

/// An entry to write at `seq`, with its index terms.
struct Indexed {
    seq: i64,
    entry: Entry,
    terms: Terms,
}

/// A scope's BM25 statistics and next ingestion number.
#[derive(Debug, Clone, Copy)]
struct Stats {
    docs: i64,
    total_len: i64,
    next_seq: i64,
}

/// What one write call does, planned against the stored state inside its transaction.
enum Op<'a> {
    Replace {
        session_id: &'a str,
        entries: &'a [Entry],
    },
    AddEvents {
        session_id: &'a str,
        entries: &'a [Entry],
    },
    AddMemories(&'a [Entry]),
    Delete(&'a DeleteTarget),
}

/// The writes of one call, decided in Rust and then applied in bulk.
struct Plan<'t, 'c> {
    tx: &'t Transaction<'c>,
    scope: Scope<'t>,
    stats: Stats,
    /// Entries by (session, id) slot, as stored (loaded for the slots the call touches).
    slots: HashMap<(String, String), Stored>,
    tombstoned: HashSet<String>,
    removed: Vec<Stored>,
    inserted: Vec<Indexed>,
    tombstones_added: Vec<String>,
    tombstones_lifted: Vec<String>,
    clear: bool,
}

impl<'t, 'c> Plan<'t, 'c> {
    /// Locks the scope (creating its row) and reads its statistics.
    async fn begin(tx: &'t Transaction<'c>, scope: Scope<'t>) -> Result<Self> {
        let row = tx
            .query_one(
                "INSERT INTO memory_scopes (app_name, user_id, docs, total_len, next_seq)
                 VALUES ($1, $2, 0, 0, 1)
                 ON CONFLICT (app_name, user_id) DO UPDATE SET docs = memory_scopes.docs
                 RETURNING docs, total_len, next_seq",
                &[&scope.app_name, &scope.user_id],
            )
            .await?;
        Ok(Self {
            tx,
            scope,
            stats: Stats {
                docs: row.try_get(0)?,
                total_len: row.try_get(1)?,
                next_seq: row.try_get(2)?,
            },
            slots: HashMap::new(),
            tombstoned: HashSet::new(),
            removed: Vec::new(),
            inserted: Vec::new(),
            tombstones_added: Vec::new(),
            tombstones_lifted: Vec::new(),
            clear: false,
        })
    }

    /// Loads the entries stored in these (session, id) slots, and which of the ids are
    /// tombstoned.
    async fn load_slots(&mut self, slots: &[(&str, &str)]) -> Result<()> {
        let (sessions, ids): (Vec<&str>, Vec<&str>) = slots.iter().copied().unzip();
        let rows = self
            .tx
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries e
                     JOIN unnest($3::text[], $4::text[]) AS s(slot_session, slot_id)
                       ON e.session_id = s.slot_session AND e.id = s.slot_id
                     WHERE e.app_name = $1 AND e.user_id = $2"
                ),
                &[&self.scope.app_name, &self.scope.user_id, &sessions, &ids],
            )
            .await?;
        self.keep(&rows)?;
        let tombstones = self
            .tx
            .query(
                "SELECT id FROM memory_tombstones
                 WHERE app_name = $1 AND user_id = $2 AND id = ANY($3)",
                &[&self.scope.app_name, &self.scope.user_id, &ids],
            )
            .await?;
        for row in tombstones {
            self.tombstoned.insert(row.try_get(0)?);
        }
        Ok(())
    }

    /// Loads the entries a `WHERE` condition on `$3` selects, and returns them.
    async fn load_where(&mut self, condition: &str, value: &str) -> Result<Vec<Stored>> {
        let rows = self
            .tx
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND {condition} ORDER BY seq"
                ),
                &[&self.scope.app_name, &self.scope.user_id, &value],
            )
            .await?;
        self.keep(&rows)
    }

    fn keep(&mut self, rows: &[Row]) -> Result<Vec<Stored>> {
        let mut kept = Vec::with_capacity(rows.len());
        for row in rows {
            let stored = stored(row)?;
            let slot = (stored.entry.session_id.clone(), stored.entry.id.clone());
            self.slots.insert(slot, stored.clone());
            kept.push(stored);
        }
        Ok(kept)
    }

    fn has_slot(&self, session_id: &str, id: &str) -> bool {
        self.slots
            .contains_key(&(session_id.to_owned(), id.to_owned()))
    }

    /// Writes `entry` into its (session, id) slot: in place when the slot is taken, so it keeps
    /// its place in ingestion order, else as the newest entry.
    fn put(&mut self, entry: Entry) {
        let slot = (entry.session_id.clone(), entry.id.clone());
        let seq = match self.slots.get(&slot).cloned() {
            Some(old) if old.entry == entry => return,
            Some(old) => {
                let seq = old.seq;
                self.remove(old);
                seq
            }
            None => {
                let seq = self.stats.next_seq;
                self.stats.next_seq += 1;
                seq
            }
        };
        let terms = Terms::of(&entry.content);
        if terms.len > 0 {
            self.stats.docs += 1;
            self.stats.total_len += i64::from(terms.len);
        }
        self.slots.insert(
            slot,
            Stored {
                seq,
                entry: entry.clone(),
                terms: terms.counts.iter().map(|(t, _)| t.clone()).collect(),
                len: terms.len,
            },
        );
        self.inserted.push(Indexed { seq, entry, terms });
    }

    fn remove(&mut self, stored: Stored) {
        if stored.len > 0 {
            self.stats.docs = (self.stats.docs - 1).max(0);
            self.stats.total_len = (self.stats.total_len - i64::from(stored.len)).max(0);
        }
        self.slots
            .remove(&(stored.entry.session_id.clone(), stored.entry.id.clone()));
        self.removed.push(stored);
    }

    /// Plans `op`; returns the count the call reports.
    async fn plan(&mut self, op: &Op<'_>) -> Result<u32> {
        match op {
            Op::Replace {
                session_id,
                entries,
            } => {
                let stale = self.load_where("session_id = $3", session_id).await?;
                let slots: Vec<_> = entries
                    .iter()
                    .map(|e| (*session_id, e.id.as_str()))
                    .collect();
                self.load_slots(&slots).await?;
                let mut kept = HashSet::new();
                for entry in entries.iter() {
                    if kept.contains(entry.id.as_str()) || self.tombstoned.contains(&entry.id) {
                        continue;
                    }
                    self.put(Entry {
                        session_id: (*session_id).to_owned(),
                        ..entry.clone()
                    });
                    kept.insert(entry.id.as_str());
                }
                for old in stale {
                    if !kept.contains(old.entry.id.as_str()) {
                        self.remove(old);
                    }
                }
                Ok(count(kept.len()))
            }
            Op::AddEvents {
                session_id,
                entries,
            } => {
                let slots: Vec<_> = entries
                    .iter()
                    .map(|e| (*session_id, e.id.as_str()))
                    .collect();
                self.load_slots(&slots).await?;
                let mut added = 0;
                for entry in entries.iter() {
                    if self.tombstoned.contains(&entry.id) || self.has_slot(session_id, &entry.id) {
                        continue;
                    }
                    self.put(Entry {
                        session_id: (*session_id).to_owned(),
                        ..entry.clone()
                    });
                    added += 1;
                }
                Ok(added)
            }
            Op::AddMemories(entries) => {
                let slots: Vec<_> = entries
                    .iter()
                    .map(|e| (e.session_id.as_str(), e.id.as_str()))
                    .collect();
                self.load_slots(&slots).await?;
                // Of several writes to one slot only the last is applied: it would overwrite
                // the others.
                let last: HashMap<_, _> = slots.iter().enumerate().map(|(i, s)| (*s, i)).collect();
                for (i, entry) in entries.iter().enumerate() {
                    if last.get(&(entry.session_id.as_str(), entry.id.as_str())) != Some(&i) {
                        continue;
                    }
                    if self.tombstoned.remove(&entry.id) {
                        self.tombstones_lifted.push(entry.id.clone());
                    }
                    self.put(entry.clone());
                }
                Ok(0)
            }
            Op::Delete(DeleteTarget::MemoryId(id)) => {
                let found = self.load_where("id = $3", id).await?;
                if !found.is_empty() {
                    self.tombstones_added.push(id.clone());
                }
                let n = count(found.len());
                for stored in found {
                    self.remove(stored);
                }
                Ok(n)
            }
            Op::Delete(DeleteTarget::Session(session_id)) => {
                let found = self.load_where("session_id = $3", session_id).await?;
                let n = count(found.len());
                for stored in found {
                    self.remove(stored);
                }
                Ok(n)
            }
            Op::Delete(DeleteTarget::All) => {
                let row = self
                    .tx
                    .query_one(
                        "SELECT count(*) FROM memory_entries WHERE app_name = $1 AND user_id = $2",
                        &[&self.scope.app_name, &self.scope.user_id],
                    )
                    .await?;
                let n: i64 = row.try_get(0)?;
                self.clear = true;
                // The next seq is kept, so a page token issued before cannot skip entries added
                // after.
                self.stats.docs = 0;
                self.stats.total_len = 0;
                Ok(u32::try_from(n).unwrap_or(u32::MAX))
            }
        }
    }

    /// Applies the plan: removals first (an entry rewritten in place is removed, then
    /// inserted at the same seq), then insertions, tombstones and statistics.
    async fn commit(self) -> Result<()> {
        let (tx, scope) = (self.tx, self.scope);
        let (app, user) = (&scope.app_name, &scope.user_id);
        if self.clear {
            for table in ["memory_entries", "memory_postings", "memory_tombstones"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE app_name = $1 AND user_id = $2"),
                    &[app, user],
                )
                .await?;
            }
        }
        if !self.removed.is_empty() {
            let seqs: Vec<i64> = self.removed.iter().map(|s| s.seq).collect();
            let (terms, term_seqs): (Vec<&str>, Vec<i64>) = self
                .removed
                .iter()
                .flat_map(|s| s.terms.iter().map(move |t| (t.as_str(), s.seq)))
                .unzip();
            tx.execute(
                "DELETE FROM memory_entries WHERE app_name = $1 AND user_id = $2 AND seq = ANY($3)",
                &[app, user, &seqs],
            )
            .await?;
            tx.execute(
                "DELETE FROM memory_postings p
                 USING unnest($3::text[], $4::bigint[]) AS d(term, seq)
                 WHERE p.app_name = $1 AND p.user_id = $2 AND p.term = d.term AND p.seq = d.seq",
                &[app, user, &terms, &term_seqs],
            )
            .await?;
        }
        if !self.inserted.is_empty() {
            insert_entries(tx, scope, &self.inserted).await?;
        }
        if !self.tombstones_lifted.is_empty() {
            tx.execute(
                "DELETE FROM memory_tombstones WHERE app_name = $1 AND user_id = $2 AND id = ANY($3)",
                &[app, user, &self.tombstones_lifted],
            )
            .await?;
        }
        if !self.tombstones_added.is_empty() {
            tx.execute(
                "INSERT INTO memory_tombstones (app_name, user_id, id)
                 SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING",
                &[app, user, &self.tombstones_added],
            )
            .await?;
        }
        tx.execute(
            "UPDATE memory_scopes SET docs = $3, total_len = $4, next_seq = $5
             WHERE app_name = $1 AND user_id = $2",
            &[
                app,
                user,
                &self.stats.docs,
                &self.stats.total_len,
                &self.stats.next_seq,
            ],
        )
        .await?;
        Ok(())
    }
}

async fn insert_entries(
    tx: &Transaction<'_>,
    scope: Scope<'_>,
    inserted: &[Indexed],
) -> Result<()> {
    let mut seqs = Vec::new();
    let (mut sessions, mut ids, mut authors, mut metadata) = (vec![], vec![], vec![], vec![]);
    let (mut ts_s, mut ts_n, mut contents, mut terms, mut lens) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut p_terms, mut p_seqs, mut p_tfs, mut p_lens) = (vec![], vec![], vec![], vec![]);
    for item in inserted {
        let e = &item.entry;
        let len = i32::try_from(item.terms.len).unwrap_or(i32::MAX);
        seqs.push(item.seq);
        sessions.push(e.session_id.as_str());
        ids.push(e.id.as_str());
        authors.push(e.author.as_str());
        metadata.push(e.custom_metadata.as_str());
        ts_s.push(e.timestamp.map(|t| t.seconds));
        ts_n.push(e.timestamp.map(|t| t.nanos));
        contents.push(e.content.encode_to_vec());
        // Arrays of arrays must be rectangular in PostgreSQL, so each entry's terms travel as
        // one tab-joined string (terms are words: they never contain a tab).
        let names: Vec<&str> = item.terms.counts.iter().map(|(t, _)| t.as_str()).collect();
        terms.push(names.join("\t"));
        lens.push(len);
        for (term, tf) in &item.terms.counts {
            p_terms.push(term.as_str());
            p_seqs.push(item.seq);
            p_tfs.push(i32::try_from(*tf).unwrap_or(i32::MAX));
            p_lens.push(len);
        }
    }
    tx.execute(
        "INSERT INTO memory_entries (app_name, user_id, seq, session_id, id, author, ts_s, ts_n,
             custom_metadata, content, terms, len)
         SELECT $1, $2, d.seq, d.session_id, d.id, d.author, d.ts_s, d.ts_n, d.metadata,
             d.content, CASE WHEN d.terms = '' THEN '{}'::text[]
                             ELSE string_to_array(d.terms, E'\\t') END, d.len
         FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
             $8::integer[], $9::text[], $10::bytea[], $11::text[], $12::integer[])
             AS d(seq, session_id, id, author, ts_s, ts_n, metadata, content, terms, len)",
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
        ],
    )
    .await?;
    if !p_terms.is_empty() {
        tx.execute(
            "INSERT INTO memory_postings (app_name, user_id, term, seq, tf, len)
             SELECT $1, $2, d.term, d.seq, d.tf, d.len
             FROM unnest($3::text[], $4::bigint[], $5::integer[], $6::integer[])
                 AS d(term, seq, tf, len)",
            &[
                &scope.app_name,
                &scope.user_id,
                &p_terms,
                &p_seqs,
                &p_tfs,
                &p_lens,
            ],
        )
        .await?;
    }
    Ok(())
}

/// Reads the [`ENTRY`] columns of a row.
fn stored(row: &Row) -> Result<Stored> {
    let ts_s: Option<i64> = row.try_get(4)?;
    let ts_n: Option<i32> = row.try_get(5)?;
    let content: &[u8] = row.try_get(7)?;
    let content = Content::decode(content)
        .map_err(|e| StoreError::Corrupt(format!("memory content: {e}")))?;
    let len: i32 = row.try_get(9)?;
    Ok(Stored {
        seq: row.try_get(0)?,
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
        },
        terms: row.try_get(8)?,
        len: u32::try_from(len).unwrap_or(0),
    })
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The page-token key of an entry: the sled store's, so tokens mean the same in both.
fn entry_key(scope: Scope<'_>, seq: i64) -> Key {
    Key::new()
        .str(scope.app_name)
        .str(scope.user_id)
        .u64(u64::try_from(seq).unwrap_or(0))
}

impl PgMemoryStore {
    /// Connects with at most `max_connections` and brings the schema up to date.
    pub async fn open(url: &str, max_connections: usize) -> Result<Self> {
        let pool = postgres::pool(url, max_connections)?;
        postgres::migrate(&pool, "memory-svc", MIGRATIONS).await?;
        Ok(Self { pool })
    }

    /// Publishes the connection pool's size as gauges (read at each metrics scrape).
    pub fn record_pool(&self) {
        postgres::record_pool(&self.pool, "memory-svc");
    }

    /// Plans and applies `op` in one transaction holding the scope's lock; run again whole if
    /// the transaction loses a race.
    async fn write(&self, scope: Scope<'_>, op: Op<'_>) -> Result<u32> {
        postgres::retry_conflicts(
            || async {
                let mut client = self.pool.get().await?;
                let tx = client.transaction().await?;
                let mut plan = Plan::begin(&tx, scope).await?;
                let out = plan.plan(&op).await?;
                plan.commit().await?;
                tx.commit().await?;
                Ok(out)
            },
            |e: &StoreError| matches!(e, StoreError::Postgres(e) if e.is_conflict()),
        )
        .await
    }

    /// The entries still stored at these seqs.
    async fn entries(&self, scope: Scope<'_>, seqs: &[i64]) -> Result<HashMap<i64, Entry>> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND seq = ANY($3)"
                ),
                &[&scope.app_name, &scope.user_id, &seqs],
            )
            .await?;
        let mut by_seq = HashMap::with_capacity(rows.len());
        for row in &rows {
            let s = stored(row)?;
            by_seq.insert(s.seq, s.entry);
        }
        Ok(by_seq)
    }
}

impl MemoryStore for PgMemoryStore {
    async fn replace_session(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> Result<u32> {
        let op = Op::Replace {
            session_id,
            entries: &entries,
        };
        self.write(scope, op).await
    }

    async fn add_events(
        &self,
        scope: Scope<'_>,
        session_id: &str,
        entries: Vec<Entry>,
    ) -> Result<u32> {
        // The first copy of an id wins.
        let mut seen = HashSet::new();
        let entries: Vec<Entry> = entries
            .into_iter()
            .filter(|e| seen.insert(e.id.clone()))
            .collect();
        let op = Op::AddEvents {
            session_id,
            entries: &entries,
        };
        self.write(scope, op).await
    }

    async fn add_memories(&self, scope: Scope<'_>, entries: Vec<Entry>) -> Result<()> {
        self.write(scope, Op::AddMemories(&entries)).await?;
        Ok(())
    }

    async fn search(&self, scope: Scope<'_>, query: &SearchQuery) -> Result<Vec<Hit>> {
        let terms = text::query_terms(&query.text);
        if terms.is_empty() || query.limit == 0 {
            return Ok(Vec::new());
        }
        let client = self.pool.get().await?;
        let stats = client
            .query_opt(
                "SELECT docs, total_len FROM memory_scopes WHERE app_name = $1 AND user_id = $2",
                &[&scope.app_name, &scope.user_id],
            )
            .await?;
        let Some(stats) = stats else {
            return Ok(Vec::new());
        };
        let (docs, total_len): (i64, i64) = (stats.try_get(0)?, stats.try_get(1)?);
        if docs == 0 {
            return Ok(Vec::new());
        }
        let rows = client
            .query(
                "SELECT term, seq, tf, len FROM memory_postings
                 WHERE app_name = $1 AND user_id = $2 AND term = ANY($3)",
                &[&scope.app_name, &scope.user_id, &terms],
            )
            .await?;
        let mut postings: HashMap<String, Vec<(i64, f64, f64)>> = HashMap::new();
        for row in &rows {
            let (tf, len): (i32, i32) = (row.try_get(2)?, row.try_get(3)?);
            postings.entry(row.try_get(0)?).or_default().push((
                row.try_get(1)?,
                f64::from(tf),
                f64::from(len),
            ));
        }
        // Summed term by term in query order, as the sled store sums, so scores are equal to
        // the last bit.
        let n = docs as f64;
        let avg_len = total_len as f64 / n;
        let mut scores = HashMap::<i64, f64>::new();
        for term in &terms {
            let Some(list) = postings.get(term) else {
                continue;
            };
            let idf = index::idf(n, list.len() as f64);
            for &(seq, tf, len) in list {
                *scores.entry(seq).or_default() += index::score(idf, tf, len, avg_len);
            }
        }
        let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut hits = Vec::new();
        for chunk in ranked.chunks(FETCH) {
            let seqs: Vec<i64> = chunk.iter().map(|(seq, _)| *seq).collect();
            let mut fetched = self.entries(scope, &seqs).await?;
            // Searches do not lock out writers: an entry removed since its posting was read is
            // simply no longer there.
            for &(seq, score) in chunk {
                let Some(entry) = fetched.remove(&seq) else {
                    continue;
                };
                if query.admits(&entry) {
                    hits.push(Hit { entry, score });
                    if hits.len() == query.limit {
                        return Ok(hits);
                    }
                }
            }
        }
        Ok(hits)
    }

    async fn delete(&self, scope: Scope<'_>, target: &DeleteTarget) -> Result<u32> {
        self.write(scope, Op::Delete(target)).await
    }

    async fn list(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        page_token: &str,
    ) -> Result<(Vec<Entry>, String)> {
        let prefix = Key::new().str(scope.app_name).str(scope.user_id);
        let after = match page::decode(page_token, prefix.as_bytes())? {
            Some(last) => {
                let mut r = KeyReader::new(&last[prefix.as_bytes().len()..]);
                match (r.u64(), r.is_empty()) {
                    (Some(seq), true) => i64::try_from(seq).unwrap_or(i64::MAX),
                    _ => return Err(page::PageTokenError::Malformed.into()),
                }
            }
            None => 0,
        };
        // A page of at least one entry, so paging always makes progress.
        let size = page_size.max(1);
        let client = self.pool.get().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {ENTRY} FROM memory_entries
                     WHERE app_name = $1 AND user_id = $2 AND seq > $3 ORDER BY seq LIMIT $4"
                ),
                &[
                    &scope.app_name,
                    &scope.user_id,
                    &after,
                    &i64::try_from(size + 1).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        let mut page = Vec::with_capacity(size);
        let mut last = None;
        for row in rows.iter().take(size) {
            let s = stored(row)?;
            last = Some(s.seq);
            page.push(s.entry);
        }
        let next = match last {
            Some(seq) if rows.len() > size => page::encode(entry_key(scope, seq).as_bytes()),
            _ => String::new(),
        };
        Ok((page, next))
    }
}
