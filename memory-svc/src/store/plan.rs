//! The memory ingestion rules, once for both stores: what a write call changes, decided from
//! what the store holds.
//!
//! A store runs every write in three steps: it loads what [`Write::reads`] names (inside its
//! transaction, or against the state its commit checks), [`plan`] decides the [`Edit`]s, and
//! the store applies them. Only the loading and the applying know a storage layout; the rules
//! live here:
//! - a session's ingestion (`replace_session`, `add_events`) keeps the first copy of an id and
//!   skips tombstoned ids;
//! - `add_events` adds only ids the session does not hold yet;
//! - `replace_session` removes the session's entries its new entries do not fill again;
//! - of several direct writes to one (session, id) slot the last wins, and a direct write lifts
//!   its id's tombstone;
//! - an entry written into a taken slot keeps the slot's seq (its place in ingestion order), and
//!   one identical to the stored entry, beside the same neighbours, changes nothing and the
//!   plan does not analyse it: a session added again after every turn (ADK's per-turn memory
//!   callback) has its new turns analysed, and the turn before them, whose context they change;
//! - deleting an id that has entries tombstones it; deleting everything keeps the next seq, so a
//!   page token issued before cannot skip entries added after;
//! - an entry of a session is indexed with its [`Context`]: the text of the entries before and
//!   after it in the session, in ingestion (seq) order. Every write keeps that true: the
//!   neighbours of an entry added, rewritten or deleted are re-indexed with their new context,
//!   so nothing of a deleted or overwritten text stays stored or findable. `add_events` loads
//!   only the session's last entry, since what it adds comes after it. Entries of no session
//!   have no context.

use std::collections::{HashMap, HashSet};

use super::{
    index::{text_of, Analysis, Terms},
    DeleteTarget, Entry,
};
use crate::analysis::{Analyzer, WriteLanguage};

/// A write call, as the trait receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// [`super::MemoryStore::replace_session`].
    Replace {
        session_id: String,
        entries: Vec<Entry>,
    },
    /// [`super::MemoryStore::add_events`].
    AddEvents {
        session_id: String,
        entries: Vec<Entry>,
    },
    /// [`super::MemoryStore::add_memories`].
    AddMemories(Vec<Entry>),
    /// [`super::MemoryStore::delete`].
    Delete(DeleteTarget),
    /// Index every entry of the scope again, as the current analysis indexes it (contexts
    /// included: a store written before they were kept gets them here).
    Reindex,
}

/// What a store must load before [`plan`] can decide a [`Write`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reads<'a> {
    /// The entries stored in these (session, id) slots.
    pub slots: Vec<(&'a str, &'a str)>,
    /// Every entry of this session.
    pub session: Option<&'a str>,
    /// Every entry with this id, in any session.
    pub id: Option<&'a str>,
    /// Which of these ids are tombstoned.
    pub tombstones: Vec<&'a str>,
    /// The number of entries of the scope.
    pub count: bool,
    /// The entry of this session with the highest seq (its last turn), into [`Loaded::tail`].
    pub tail: Option<&'a str>,
    /// Every entry of every (non-empty) session holding an entry with this id.
    pub sessions_holding: Option<&'a str>,
    /// Every entry of these sessions.
    pub sessions: Vec<&'a str>,
    /// Every entry of the scope.
    pub all: bool,
}

impl Write {
    /// The texts of the entries the write brings, which its language is detected over.
    fn texts(&self) -> Vec<String> {
        match self {
            Self::Replace { entries, .. }
            | Self::AddEvents { entries, .. }
            | Self::AddMemories(entries) => entries.iter().map(|e| text_of(&e.content)).collect(),
            Self::Delete(_) | Self::Reindex => Vec::new(),
        }
    }

    /// What [`plan`] needs to know of the stored state.
    pub fn reads(&self) -> Reads<'_> {
        match self {
            // The session's entries include every slot the new entries could fill.
            Self::Replace {
                session_id,
                entries,
            } => Reads {
                session: Some(session_id),
                tombstones: ids(entries),
                ..Reads::default()
            },
            Self::AddEvents {
                session_id,
                entries,
            } => Reads {
                slots: entries
                    .iter()
                    .map(|e| (session_id.as_str(), e.id.as_str()))
                    .collect(),
                tombstones: ids(entries),
                tail: Some(session_id),
                ..Reads::default()
            },
            Self::AddMemories(entries) => Reads {
                slots: entries
                    .iter()
                    .map(|e| (e.session_id.as_str(), e.id.as_str()))
                    .collect(),
                tombstones: ids(entries),
                sessions: {
                    let mut sessions: Vec<&str> = entries
                        .iter()
                        .map(|e| e.session_id.as_str())
                        .filter(|s| !s.is_empty())
                        .collect();
                    sessions.sort_unstable();
                    sessions.dedup();
                    sessions
                },
                ..Reads::default()
            },
            Self::Delete(DeleteTarget::MemoryId(id)) => Reads {
                id: Some(id),
                sessions_holding: Some(id),
                ..Reads::default()
            },
            Self::Delete(DeleteTarget::Session(session_id)) => Reads {
                session: Some(session_id),
                ..Reads::default()
            },
            Self::Delete(DeleteTarget::All) => Reads {
                count: true,
                ..Reads::default()
            },
            Self::Reindex => Reads {
                all: true,
                ..Reads::default()
            },
        }
    }

    /// The entries the write stores (none for a delete or a re-indexing).
    pub fn entries(&self) -> &[Entry] {
        match self {
            Self::Replace { entries, .. }
            | Self::AddEvents { entries, .. }
            | Self::AddMemories(entries) => entries,
            Self::Delete(_) | Self::Reindex => &[],
        }
    }
}

/// The ids of `entries`, in order.
fn ids(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.id.as_str()).collect()
}

/// A scope's BM25 statistics and next ingestion number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Entries with at least one term: BM25's N.
    pub docs: u64,
    /// Their summed lengths, for the average document length.
    pub total_len: u64,
    /// The seq the next new entry gets.
    pub next_seq: u64,
}

impl Stats {
    fn add(&mut self, len: u32) {
        if len > 0 {
            self.docs += 1;
            self.total_len += u64::from(len);
        }
    }

    fn subtract(&mut self, len: u32) {
        if len > 0 {
            self.docs = self.docs.saturating_sub(1);
            self.total_len = self.total_len.saturating_sub(u64::from(len));
        }
    }
}

/// The text of the turns around an ingested entry in its session, indexed with it at a lower
/// weight so that a reply is found by the words of what it replies to; empty where there is no
/// such turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Context {
    pub before: String,
    pub after: String,
}

impl Context {
    /// The turns, without the missing ones.
    pub fn turns(&self) -> Vec<String> {
        [&self.before, &self.after]
            .into_iter()
            .filter(|t| !t.is_empty())
            .cloned()
            .collect()
    }
}

/// An entry as stored, with the terms it was indexed under (kept, not recomputed: removing it
/// must find exactly its postings, even after an analysis change).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub seq: u64,
    pub entry: Entry,
    pub context: Context,
    /// Its distinct terms, sorted.
    pub terms: Vec<String>,
    /// Its length in terms.
    pub len: u32,
}

/// What a store loaded for a [`Write`], as its [`Write::reads`] named.
#[derive(Debug, Default)]
pub struct Loaded {
    pub stats: Stats,
    /// Whether the scope was ever written to (a scope never written to has nothing to clear).
    pub written: bool,
    /// Every entry loaded, whichever read found it (an entry found twice is listed twice).
    pub entries: Vec<Stored>,
    /// The ids among those asked for that are tombstoned.
    pub tombstoned: HashSet<String>,
    /// The number of entries of the scope, when asked for.
    pub count: u64,
    /// The session's last entry, when asked for and there is one.
    pub tail: Option<Stored>,
}

/// One change to the stored state. Edits are applied in order: an entry rewritten in place is
/// removed, then inserted at the same seq.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Remove this stored entry and its postings.
    Remove(Stored),
    /// Store `entry` at `seq` with its `context`, indexed under `terms`.
    Insert {
        seq: u64,
        entry: Entry,
        context: Context,
        terms: Terms,
    },
    /// Tombstone an id: ingestion skips it from now on.
    Tombstone(String),
    /// Lift an id's tombstone.
    Lift(String),
    /// Remove every entry, posting and tombstone of the scope.
    Clear,
}

/// What a write call changes, and what it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub edits: Vec<Edit>,
    /// The scope's statistics once the edits are applied.
    pub stats: Stats,
    /// The count the call returns: entries the session now holds (replace), entries added,
    /// entries removed; 0 for direct writes.
    pub count: u32,
}

impl Plan {
    /// Entries added minus entries removed.
    pub fn entry_delta(&self) -> i64 {
        self.edits
            .iter()
            .map(|edit| match edit {
                Edit::Insert { .. } => 1,
                Edit::Remove(_) => -1,
                // A clear reports what it removes.
                Edit::Clear => -i64::from(self.count),
                Edit::Tombstone(_) | Edit::Lift(_) => 0,
            })
            .sum()
    }
}

/// The analysis of the texts `write` brings, made before it is planned: each entry's fields,
/// and for the turns of a session the texts of the turns beside it in the call, which are their
/// context unless the stored state changes which turns are neighbours (then [`plan`] analyses
/// what is missing). An entry whose id `held` holds with the same analysed fields (text, author,
/// metadata) is passed over: the plan leaves it as it is, or analyses it itself when its context
/// changed. A store that loads nothing first passes no `held`.
pub fn prepared(write: &Write, analyzer: Analyzer, held: &[Stored]) -> Analysis {
    let held: HashMap<&str, &Entry> = held
        .iter()
        .map(|s| (s.entry.id.as_str(), &s.entry))
        .collect();
    let is_held = |e: &Entry| {
        held.get(e.id.as_str()).is_some_and(|h| {
            h.content == e.content && h.author == e.author && h.custom_metadata == e.custom_metadata
        })
    };
    let mut analysis = Analysis::new(analyzer);
    let texts = write.texts();
    analysis.detect_over(&texts);
    match write {
        Write::Replace { entries, .. } | Write::AddEvents { entries, .. } => {
            for (i, entry) in entries.iter().enumerate().filter(|(_, e)| !is_held(e)) {
                let before = i.checked_sub(1).map(|j| texts[j].as_str());
                let after = texts.get(i + 1).map(String::as_str);
                let context: Vec<&str> = before.into_iter().chain(after).collect();
                analysis.prepare(entry, &context);
            }
        }
        Write::AddMemories(entries) => {
            for entry in entries.iter().filter(|e| !is_held(e)) {
                analysis.prepare(entry, &[]);
            }
        }
        Write::Delete(_) | Write::Reindex => {}
    }
    analysis
}

/// Decides what `write` changes in a scope whose state `loaded` holds, indexing text through
/// `analysis` (see [`prepared`]), which keeps what it analyses.
pub fn plan(write: &Write, loaded: Loaded, analysis: &mut Analysis) -> Plan {
    if !analysis.has_language() {
        analysis.detect_over(&write.texts());
    }
    let mut p = Planner::new(loaded, analysis);
    let count = match write {
        Write::Replace {
            session_id,
            entries,
        } => {
            let mut kept = HashSet::new();
            let mut turns = Vec::new();
            for entry in entries {
                if kept.contains(entry.id.as_str()) || p.tombstoned.contains(&entry.id) {
                    continue;
                }
                turns.push(Entry {
                    session_id: session_id.clone(),
                    ..entry.clone()
                });
                kept.insert(entry.id.as_str());
            }
            let stale: Vec<Stored> =
                p.loaded_where(|e| e.session_id == *session_id && !kept.contains(e.id.as_str()));
            for old in stale {
                p.remove(old);
            }
            p.write_session(session_id, turns);
            count(kept.len())
        }
        Write::AddEvents {
            session_id,
            entries,
        } => {
            let mut added = HashSet::new();
            let mut turns = Vec::new();
            for entry in entries {
                if added.contains(entry.id.as_str())
                    || p.tombstoned.contains(&entry.id)
                    || p.slots
                        .contains_key(&(session_id.clone(), entry.id.clone()))
                {
                    continue;
                }
                turns.push(Entry {
                    session_id: session_id.clone(),
                    ..entry.clone()
                });
                added.insert(entry.id.as_str());
            }
            // The new turns follow the session's last one, which now has a next turn.
            if let (Some(tail), Some(first)) = (p.tail.take(), turns.first()) {
                let context = Context {
                    before: tail.context.before.clone(),
                    after: text_of(&first.content),
                };
                let before = text_of(&tail.entry.content);
                p.put(tail.entry, context);
                p.put_conversation(turns, before);
            } else {
                p.put_conversation(turns, String::new());
            }
            count(added.len())
        }
        Write::AddMemories(entries) => {
            // Of several writes to one slot only the last is applied: it would overwrite the
            // others.
            let last: HashMap<_, _> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| ((e.session_id.as_str(), e.id.as_str()), i))
                .collect();
            let mut sessions: Vec<(&str, Vec<Entry>)> = Vec::new();
            for (i, entry) in entries.iter().enumerate() {
                if last.get(&(entry.session_id.as_str(), entry.id.as_str())) != Some(&i) {
                    continue;
                }
                if p.tombstoned.remove(&entry.id) {
                    p.edits.push(Edit::Lift(entry.id.clone()));
                }
                if entry.session_id.is_empty() {
                    p.put(entry.clone(), Context::default());
                } else if let Some((_, turns)) =
                    sessions.iter_mut().find(|(s, _)| *s == entry.session_id)
                {
                    turns.push(entry.clone());
                } else {
                    sessions.push((&entry.session_id, vec![entry.clone()]));
                }
            }
            for (session_id, turns) in sessions {
                p.write_session(session_id, turns);
            }
            0
        }
        Write::Delete(DeleteTarget::MemoryId(id)) => {
            let found = p.loaded_where(|e| e.id == *id);
            if !found.is_empty() {
                p.edits.push(Edit::Tombstone(id.clone()));
            }
            let n = count(found.len());
            let sessions: HashSet<String> =
                found.iter().map(|s| s.entry.session_id.clone()).collect();
            for old in found {
                p.remove(old);
            }
            for session_id in sessions.iter().filter(|s| !s.is_empty()) {
                // The neighbours re-indexed are analysed in their conversation's language.
                let texts: Vec<String> = p
                    .loaded_where(|e| e.session_id == *session_id)
                    .iter()
                    .map(|s| text_of(&s.entry.content))
                    .collect();
                p.analysis.detect_over(&texts);
                p.write_session(session_id, Vec::new());
            }
            n
        }
        Write::Delete(DeleteTarget::Session(session_id)) => {
            let found = p.loaded_where(|e| e.session_id == *session_id);
            let n = count(found.len());
            for old in found {
                p.remove(old);
            }
            n
        }
        Write::Delete(DeleteTarget::All) => {
            if p.written {
                p.edits.push(Edit::Clear);
                p.stats.docs = 0;
                p.stats.total_len = 0;
            }
            u32::try_from(p.count).unwrap_or(u32::MAX)
        }
        Write::Reindex => {
            let all = p.loaded_where(|_| true);
            let contexts = derived_contexts(&all);
            let languages = session_languages(p.analysis.analyzer(), &all);
            let n = count(all.len());
            for (old, context) in all.into_iter().zip(contexts) {
                p.analysis
                    .set_language(languages[old.entry.session_id.as_str()]);
                p.reindex(old, context);
            }
            n
        }
    };
    Plan {
        edits: p.edits,
        stats: p.stats,
        count,
    }
}

/// The language of each session of `entries` (entries of no session together), as a write of
/// its entries would detect it: what a re-index analyses each entry in.
fn session_languages(analyzer: Analyzer, entries: &[Stored]) -> HashMap<String, WriteLanguage> {
    let mut sessions: HashMap<String, Vec<String>> = HashMap::new();
    for s in entries {
        sessions
            .entry(s.entry.session_id.clone())
            .or_default()
            .push(text_of(&s.entry.content));
    }
    sessions
        .into_iter()
        .map(|(session, texts)| (session, analyzer.write_language(&texts)))
        .collect()
}

/// The context of each of `entries` (in seq order) from the entries next to it in its session.
fn derived_contexts(entries: &[Stored]) -> Vec<Context> {
    let mut sessions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in entries.iter().enumerate() {
        if !s.entry.session_id.is_empty() {
            sessions.entry(&s.entry.session_id).or_default().push(i);
        }
    }
    let mut contexts = vec![Context::default(); entries.len()];
    for turns in sessions.values() {
        for (k, &i) in turns.iter().enumerate() {
            let text = |j: Option<&usize>| j.map(|&j| text_of(&entries[j].entry.content));
            contexts[i] = Context {
                before: text(k.checked_sub(1).and_then(|k| turns.get(k))).unwrap_or_default(),
                after: text(turns.get(k + 1)).unwrap_or_default(),
            };
        }
    }
    contexts
}

/// The state a plan is decided against, updated as it goes.
struct Planner<'a> {
    analysis: &'a mut Analysis,
    stats: Stats,
    written: bool,
    count: u64,
    /// The loaded entries by (session, id) slot, as the edits so far leave them.
    slots: HashMap<(String, String), Stored>,
    tombstoned: HashSet<String>,
    /// The last entry of the session being continued.
    tail: Option<Stored>,
    edits: Vec<Edit>,
}

impl<'a> Planner<'a> {
    fn new(loaded: Loaded, analysis: &'a mut Analysis) -> Self {
        let slots = loaded
            .entries
            .into_iter()
            .chain(loaded.tail.clone())
            .map(|s| ((s.entry.session_id.clone(), s.entry.id.clone()), s))
            .collect();
        Self {
            analysis,
            tail: loaded.tail,
            stats: loaded.stats,
            written: loaded.written,
            count: loaded.count,
            slots,
            tombstoned: loaded.tombstoned,
            edits: Vec::new(),
        }
    }

    /// The stored entries `select` picks, in seq order.
    fn loaded_where(&self, select: impl Fn(&Entry) -> bool) -> Vec<Stored> {
        let mut found: Vec<Stored> = self
            .slots
            .values()
            .filter(|s| select(&s.entry))
            .cloned()
            .collect();
        found.sort_by_key(|s| s.seq);
        found
    }

    /// Writes the turns of a conversation in order, each with the text of its neighbours as
    /// context; `before` is the text of the turn before the first.
    fn put_conversation(&mut self, turns: Vec<Entry>, before: String) {
        let texts: Vec<String> = turns.iter().map(|e| text_of(&e.content)).collect();
        for (i, entry) in turns.into_iter().enumerate() {
            let context = Context {
                before: if i == 0 {
                    before.clone()
                } else {
                    texts[i - 1].clone()
                },
                after: texts.get(i + 1).cloned().unwrap_or_default(),
            };
            self.put(entry, context);
        }
    }

    /// Writes `entry` into its (session, id) slot: in place when the slot is taken, so it keeps
    /// its place in ingestion order, else as the newest entry. An entry the slot holds already,
    /// with the same context, is left as it is: it is indexed as the store's analysis indexes
    /// it, since a store indexed by another analysis is re-indexed whole when opened.
    fn put(&mut self, entry: Entry, context: Context) {
        let slot = (entry.session_id.clone(), entry.id.clone());
        let seq = match self.slots.get(&slot) {
            Some(old) if old.entry == entry && old.context == context => return,
            Some(old) => {
                let old = old.clone();
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
        let terms = Terms::analysed(self.analysis, &entry, &context.turns());
        self.insert(seq, entry, context, terms);
    }

    /// Writes `updates` into a session whose entries are all loaded: each into its slot, the
    /// new ones after the others in order, and gives every entry of the session the context its
    /// neighbours now make (entries whose text and context stay as they were are left alone).
    fn write_session(&mut self, session_id: &str, updates: Vec<Entry>) {
        let mut turns: Vec<Entry> = self
            .loaded_where(|e| e.session_id == session_id)
            .into_iter()
            .map(|s| s.entry)
            .collect();
        for update in updates {
            match turns.iter_mut().find(|t| t.id == update.id) {
                Some(turn) => *turn = update,
                None => turns.push(update),
            }
        }
        let texts: Vec<String> = turns.iter().map(|e| text_of(&e.content)).collect();
        for (k, entry) in turns.into_iter().enumerate() {
            let context = Context {
                before: k
                    .checked_sub(1)
                    .map(|j| texts[j].clone())
                    .unwrap_or_default(),
                after: texts.get(k + 1).cloned().unwrap_or_default(),
            };
            self.put(entry, context);
        }
    }

    /// Indexes a stored entry again, in place, whatever it was indexed under.
    fn reindex(&mut self, old: Stored, context: Context) {
        let (seq, entry) = (old.seq, old.entry.clone());
        let terms = Terms::analysed(self.analysis, &entry, &context.turns());
        self.remove(old);
        self.insert(seq, entry, context, terms);
    }

    fn insert(&mut self, seq: u64, entry: Entry, context: Context, terms: Terms) {
        self.stats.add(terms.len);
        self.slots.insert(
            (entry.session_id.clone(), entry.id.clone()),
            Stored {
                seq,
                entry: entry.clone(),
                context: context.clone(),
                terms: terms.counts.iter().map(|(t, _)| t.clone()).collect(),
                len: terms.len,
            },
        );
        self.edits.push(Edit::Insert {
            seq,
            entry,
            context,
            terms,
        });
    }

    fn remove(&mut self, old: Stored) {
        self.stats.subtract(old.len);
        self.slots
            .remove(&(old.entry.session_id.clone(), old.entry.id.clone()));
        self.edits.push(Edit::Remove(old));
    }
}

/// A count as the calls report it.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::{part, Content, Part};

    use super::*;

    fn entry(session_id: &str, id: &str, text: &str) -> Entry {
        Entry {
            id: id.into(),
            session_id: session_id.into(),
            content: Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(part::Data::Text(text.into())),
                    ..Default::default()
                }],
            },
            ..Default::default()
        }
    }

    /// Plans as the stores do: with the texts the write brings analysed beforehand.
    fn plan(write: &Write, loaded: Loaded, analyzer: &Analyzer) -> Plan {
        super::plan(write, loaded, &mut prepared(write, *analyzer, &[]))
    }

    fn stored(seq: u64, session_id: &str, id: &str, text: &str) -> Stored {
        let entry = entry(session_id, id, text);
        let terms = Terms::of(&Analyzer::default(), &entry, &[]);
        Stored {
            seq,
            context: Context::default(),
            terms: terms.counts.into_iter().map(|(t, _)| t).collect(),
            len: terms.len,
            entry,
        }
    }

    /// The turns of session "s" from (id, text) pairs, seqs from 1, each with its neighbours'
    /// texts as context.
    fn stored_session(turns: &[(&str, &str)]) -> Vec<Stored> {
        let text = |i: Option<usize>| i.and_then(|i| turns.get(i)).map_or("", |t| t.1);
        turns
            .iter()
            .enumerate()
            .map(|(i, &(id, body))| {
                let mut turn = stored(i as u64 + 1, "s", id, body);
                turn.context = context(text(i.checked_sub(1)), text(Some(i + 1)));
                turn
            })
            .collect()
    }

    /// A scope holding `entries` (one term each), with `next_seq` after them.
    fn scope(entries: Vec<Stored>, tombstoned: &[&str]) -> Loaded {
        let next_seq = entries.iter().map(|s| s.seq + 1).max().unwrap_or(1);
        Loaded {
            stats: Stats {
                docs: entries.len() as u64,
                total_len: entries.iter().map(|s| u64::from(s.len)).sum(),
                next_seq,
            },
            written: true,
            count: entries.len() as u64,
            entries,
            tombstoned: tombstoned.iter().map(|&id| id.to_owned()).collect(),
            tail: None,
        }
    }

    /// The edits as (kind, seq or id) pairs.
    fn summary(plan: &Plan) -> Vec<(&'static str, String)> {
        plan.edits
            .iter()
            .map(|edit| match edit {
                Edit::Remove(s) => ("remove", s.seq.to_string()),
                Edit::Insert { seq, entry, .. } => ("insert", format!("{seq}:{}", entry.id)),
                Edit::Tombstone(id) => ("tombstone", id.clone()),
                Edit::Lift(id) => ("lift", id.clone()),
                Edit::Clear => ("clear", String::new()),
            })
            .collect()
    }

    #[test]
    fn each_call_reads_what_its_rules_need() {
        let replace = Write::Replace {
            session_id: "s".into(),
            entries: vec![entry("", "a", "x")],
        };
        assert_eq!(
            replace.reads(),
            Reads {
                session: Some("s"),
                tombstones: vec!["a"],
                ..Reads::default()
            }
        );
        let add = Write::AddEvents {
            session_id: "s".into(),
            entries: vec![entry("", "a", "x")],
        };
        assert_eq!(add.reads().slots, [("s", "a")]);
        let direct = Write::AddMemories(vec![entry("t", "a", "x")]);
        assert_eq!(direct.reads().slots, [("t", "a")]);
        assert_eq!(direct.reads().tombstones, ["a"]);
        let by_id = Write::Delete(DeleteTarget::MemoryId("a".into()));
        assert_eq!(by_id.reads().id, Some("a"));
        assert!(Write::Delete(DeleteTarget::All).reads().count);
    }

    #[test]
    fn replace_keeps_the_first_copy_skips_tombstones_and_removes_stale_entries() {
        let loaded = scope(
            vec![
                stored(1, "s", "a", "alpha"),
                stored(2, "s", "b", "beta"),
                stored(3, "s", "c", "gamma"),
                stored(4, "other", "b", "beta"),
            ],
            &["t"],
        );
        let write = Write::Replace {
            session_id: "s".into(),
            entries: vec![
                entry("", "a", "alpha"),
                entry("", "c", "delta"),
                entry("", "a", "shadowed"),
                entry("", "t", "tombstoned"),
                entry("", "n", "new"),
            ],
        };
        let plan = plan(&write, loaded, &Analyzer::default());
        // "b" is stale; "a" is re-indexed in place (its next turn is now "c"); "c" is
        // rewritten at its seq; "n" is new.
        assert_eq!(
            summary(&plan),
            [
                ("remove", "2".into()),
                ("remove", "1".into()),
                ("insert", "1:a".into()),
                ("remove", "3".into()),
                ("insert", "3:c".into()),
                ("insert", "5:n".into()),
            ]
        );
        assert_eq!(plan.count, 3);
        // Two units per word of text, one per word of context: a 2 + 1, c 2 + 1 + 1, n 2 + 1,
        // and the other session's b 2.
        assert_eq!(
            plan.stats,
            Stats {
                docs: 4,
                total_len: 12,
                next_seq: 6
            }
        );
        assert_eq!(plan.entry_delta(), 0);
    }

    #[test]
    fn add_events_adds_only_new_untombstoned_ids_once() {
        let loaded = scope(vec![stored(1, "s", "a", "alpha")], &["t"]);
        let write = Write::AddEvents {
            session_id: "s".into(),
            entries: vec![
                entry("", "a", "rewritten"),
                entry("", "b", "first"),
                entry("", "b", "second"),
                entry("", "t", "tombstoned"),
            ],
        };
        let plan = plan(&write, loaded, &Analyzer::default());
        assert_eq!(summary(&plan), [("insert", "2:b".into())]);
        let Edit::Insert { entry, .. } = &plan.edits[0] else {
            unreachable!()
        };
        assert_eq!(
            (entry.session_id.as_str(), entry.content.parts.len()),
            ("s", 1)
        );
        assert_eq!(plan.count, 1);
    }

    #[test]
    fn direct_writes_keep_the_last_per_slot_and_lift_tombstones() {
        let loaded = scope(vec![stored(1, "", "m", "old")], &["t"]);
        let write = Write::AddMemories(vec![
            entry("", "m", "first"),
            entry("", "t", "back"),
            entry("", "m", "last"),
            entry("x", "m", "another slot"),
        ]);
        let plan = plan(&write, loaded, &Analyzer::default());
        assert_eq!(
            summary(&plan),
            [
                ("lift", "t".into()),
                ("insert", "2:t".into()),
                ("remove", "1".into()),
                ("insert", "1:m".into()),
                ("insert", "3:m".into()),
            ]
        );
        let Edit::Insert { entry, .. } = &plan.edits[3] else {
            unreachable!()
        };
        assert_eq!(entry.content, super::tests::entry("", "m", "last").content);
        assert_eq!(plan.stats.next_seq, 4);
    }

    #[test]
    fn an_identical_write_changes_nothing_and_is_not_analysed() {
        let write = Write::AddMemories(vec![entry("", "m", "same words")]);
        let mut analysis = Analysis::new(Analyzer::default());
        let unchanged = super::plan(
            &write,
            scope(vec![stored(1, "", "m", "same words")], &[]),
            &mut analysis,
        );
        assert!(unchanged.edits.is_empty());
        assert!(!analysis.has_analysed("same words"));
        // Nor analysed beforehand by a store that loaded the entry first.
        let held = [stored(1, "", "m", "same words")];
        let analyzer = Analyzer::default();
        assert!(!prepared(&write, analyzer, &held).has_analysed("same words"));
        assert!(prepared(&write, analyzer, &[]).has_analysed("same words"));
        // Another text in the slot is analysed and written in place.
        let write = Write::AddMemories(vec![entry("", "m", "other words")]);
        let changed = super::plan(
            &write,
            scope(vec![stored(1, "", "m", "same words")], &[]),
            &mut analysis,
        );
        assert_eq!(
            summary(&changed),
            [("remove", "1".into()), ("insert", "1:m".into())]
        );
        assert!(analysis.has_analysed("other words"));
    }

    /// ADK's per-turn memory callback adds the whole session again after every turn: only the
    /// new turn and the one before it, whose context it changes, are analysed and written.
    #[test]
    fn a_session_added_again_with_one_more_turn_analyses_only_its_end() {
        let turns = stored_session(&[("a", "alpha"), ("b", "beta"), ("c", "gamma")]);
        let write = Write::Replace {
            session_id: "s".into(),
            entries: ["alpha", "beta", "gamma", "delta"]
                .iter()
                .zip(["a", "b", "c", "d"])
                .map(|(text, id)| entry("", id, text))
                .collect(),
        };
        let mut analysis = Analysis::new(Analyzer::default());
        let plan = super::plan(&write, scope(turns, &[]), &mut analysis);
        assert_eq!(
            summary(&plan),
            [
                ("remove", "3".into()),
                ("insert", "3:c".into()),
                ("insert", "4:d".into())
            ]
        );
        assert_eq!(
            contexts(&plan),
            [
                ("c".into(), context("beta", "delta")),
                ("d".into(), context("gamma", "")),
            ]
        );
        assert!(!analysis.has_analysed("alpha"));
    }

    #[test]
    fn deletes_count_what_they_remove_and_tombstone_found_ids() {
        let entries = || {
            vec![
                stored(1, "s", "a", "alpha"),
                stored(2, "t", "a", "alpha"),
                stored(3, "s", "b", "beta"),
            ]
        };
        let by_id = Write::Delete(DeleteTarget::MemoryId("a".into()));
        let plan_id = plan(&by_id, scope(entries(), &[]), &Analyzer::default());
        assert_eq!(
            summary(&plan_id),
            [
                ("tombstone", "a".into()),
                ("remove", "1".into()),
                ("remove", "2".into()),
            ]
        );
        assert_eq!((plan_id.count, plan_id.stats.docs), (2, 1));
        let absent = Write::Delete(DeleteTarget::MemoryId("ghost".into()));
        assert!(plan(&absent, scope(entries(), &[]), &Analyzer::default())
            .edits
            .is_empty());

        let by_session = Write::Delete(DeleteTarget::Session("s".into()));
        let plan_session = plan(&by_session, scope(entries(), &[]), &Analyzer::default());
        assert_eq!(
            summary(&plan_session),
            [("remove", "1".into()), ("remove", "3".into())]
        );

        let all = plan(
            &Write::Delete(DeleteTarget::All),
            scope(entries(), &[]),
            &Analyzer::default(),
        );
        assert_eq!(
            (summary(&all), all.count),
            (vec![("clear", String::new())], 3)
        );
        assert_eq!(
            all.stats,
            Stats {
                docs: 0,
                total_len: 0,
                next_seq: 4
            }
        );
        assert_eq!(all.entry_delta(), -3);
        // A scope never written to has nothing to clear.
        let fresh = plan(
            &Write::Delete(DeleteTarget::All),
            Loaded::default(),
            &Analyzer::default(),
        );
        assert!(fresh.edits.is_empty());
    }

    /// The context each insert of `plan` indexes, by entry id.
    fn contexts(plan: &Plan) -> Vec<(String, Context)> {
        plan.edits
            .iter()
            .filter_map(|edit| match edit {
                Edit::Insert { entry, context, .. } => Some((entry.id.clone(), context.clone())),
                _ => None,
            })
            .collect()
    }

    fn context(before: &str, after: &str) -> Context {
        Context {
            before: before.into(),
            after: after.into(),
        }
    }

    #[test]
    fn add_events_continues_the_session_after_its_last_turn() {
        let mut loaded = scope(vec![stored(1, "s", "q", "did you hear back")], &[]);
        loaded.tail = loaded.entries.pop();
        let write = Write::AddEvents {
            session_id: "s".into(),
            entries: vec![entry("", "r", "they offered it"), entry("", "t", "great")],
        };
        let plan = plan(&write, loaded, &Analyzer::default());
        assert_eq!(
            contexts(&plan),
            [
                ("q".into(), context("", "they offered it")),
                ("r".into(), context("did you hear back", "great")),
                ("t".into(), context("they offered it", "")),
            ]
        );
        assert_eq!(plan.count, 2);
    }

    /// The analysis a store prepares before it locks the scope changes no term: a write plans
    /// exactly as with an analysis started afresh, for turns in several languages (a turn is
    /// analysed in its neighbour's language as context), a skipped turn (the neighbours the
    /// call does not foresee) and a session's stored last turn.
    #[test]
    fn a_prepared_analysis_plans_what_a_fresh_one_plans() {
        let analyzer = Analyzer::default();
        let german = "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag gebellt.";
        let english = "My neighbour's dogs were barking all afternoon yesterday.";
        let mut loaded = scope(
            vec![stored(1, "s", "q", "Gestern war es laut bei uns")],
            &["skip"],
        );
        loaded.tail = loaded.entries.pop();
        let mut metadata = entry("", "m", english);
        metadata.custom_metadata = r#"{"topic": "Nachbarn"}"#.into();
        metadata.author = "Aisha".into();
        let write = Write::AddEvents {
            session_id: "s".into(),
            entries: vec![
                entry("", "r", german),
                entry("", "skip", "ignored turn"),
                metadata,
                entry("", "t", german),
            ],
        };
        let fresh = super::plan(&write, loaded, &mut Analysis::new(analyzer));
        let mut loaded = scope(
            vec![stored(1, "s", "q", "Gestern war es laut bei uns")],
            &["skip"],
        );
        loaded.tail = loaded.entries.pop();
        let prepared = super::plan(&write, loaded, &mut prepared(&write, analyzer, &[]));
        assert_eq!(prepared, fresh);
        assert_eq!(prepared.count, 3);
    }

    #[test]
    fn deleting_a_turn_takes_it_out_of_its_neighbours_context() {
        let turns = stored_session(&[("a", "one"), ("b", "secret"), ("c", "three")]);
        let write = Write::Delete(DeleteTarget::MemoryId("b".into()));
        let plan = plan(&write, scope(turns, &[]), &Analyzer::default());
        assert_eq!(
            contexts(&plan),
            [
                ("a".into(), context("", "three")),
                ("c".into(), context("one", "")),
            ]
        );
        assert_eq!(plan.count, 1);
    }

    #[test]
    fn reindexing_keeps_every_entry_in_its_place() {
        let entries = vec![
            stored(1, "s", "a", "one"),
            stored(2, "", "m", "loose"),
            stored(3, "s", "b", "two"),
        ];
        let write = Write::Reindex;
        let plan = plan(&write, scope(entries, &[]), &Analyzer::default());
        assert_eq!(
            summary(&plan),
            [
                ("remove", "1".into()),
                ("insert", "1:a".into()),
                ("remove", "2".into()),
                ("insert", "2:m".into()),
                ("remove", "3".into()),
                ("insert", "3:b".into()),
            ]
        );
        assert_eq!(
            contexts(&plan),
            [
                ("a".into(), context("", "two")),
                ("m".into(), context("", "")),
                ("b".into(), context("one", "")),
            ]
        );
        assert_eq!(plan.stats.next_seq, 4);
        assert_eq!(plan.entry_delta(), 0);
    }
}
