//! What the embedded store keeps per entry and per scope, and how keys and values are read back.

use adk_common::keys::{Key, KeyReader};
use adk_proto::session::v1::Content;
use prost::Message;
use prost_types::Timestamp;

use super::super::{
    index::Terms,
    plan::{self, Context, Stored},
    Entry, Kind, Result, Scope, StoreError,
};
use crate::validity::Validity;

/// What the `entries` tree holds per entry.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct EntryRecord {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub session_id: String,
    #[prost(string, tag = "3")]
    pub author: String,
    #[prost(message, optional, tag = "4")]
    pub timestamp: Option<Timestamp>,
    #[prost(string, tag = "5")]
    pub custom_metadata: String,
    #[prost(message, optional, tag = "6")]
    pub content: Option<Content>,
    /// The entry's distinct terms, sorted. Kept so that removing the entry finds its postings
    /// exactly, even after a tokenizer change would index the same text differently.
    #[prost(message, repeated, tag = "7")]
    pub terms: Vec<TermCount>,
    /// The entry's length in index units (BM25's document length); 0 when it has no terms.
    #[prost(uint32, tag = "8")]
    pub len: u32,
    /// Its context (see `plan::Context`): the turn before it in its session...
    #[prost(string, tag = "9")]
    pub context_before: String,
    /// ... and the turn after it.
    #[prost(string, tag = "10")]
    pub context_after: String,
    /// Whether the generator wrote the entry (see `Kind`).
    #[prost(bool, tag = "11")]
    pub generated: bool,
    /// When a generated memory expires, ms since the epoch.
    #[prost(int64, optional, tag = "12")]
    pub expire_ms: Option<i64>,
    /// When what it says became true (see `Validity`).
    #[prost(message, optional, tag = "13")]
    pub valid_from: Option<Timestamp>,
    /// When it stopped being true.
    #[prost(message, optional, tag = "14")]
    pub invalid_at: Option<Timestamp>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TermCount {
    #[prost(string, tag = "1")]
    pub term: String,
    #[prost(uint32, tag = "2")]
    pub tf: u32,
}

/// Per-(app, user) counters.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub(super) struct Stats {
    /// Entries with at least one term: BM25's N.
    #[prost(uint64, tag = "1")]
    pub docs: u64,
    /// Their summed lengths, for the average document length.
    #[prost(uint64, tag = "2")]
    pub total_len: u64,
    #[prost(uint64, tag = "3")]
    pub next_seq: u64,
    /// Bumped by every commit, to detect writes that raced (see the module docs).
    #[prost(uint64, tag = "4")]
    pub generation: u64,
}

impl Stats {
    /// The counters the planner keeps.
    pub fn counters(&self) -> plan::Stats {
        plan::Stats {
            docs: self.docs,
            total_len: self.total_len,
            next_seq: self.next_seq,
        }
    }
}

impl EntryRecord {
    /// The record of `entry` with its `context`, indexed under `terms`.
    pub fn new(entry: Entry, context: Context, terms: Terms) -> Self {
        Self {
            id: entry.id,
            session_id: entry.session_id,
            author: entry.author,
            timestamp: entry.timestamp,
            custom_metadata: entry.custom_metadata,
            content: Some(entry.content),
            terms: terms
                .counts
                .into_iter()
                .map(|(term, tf)| TermCount { term, tf })
                .collect(),
            len: terms.len,
            context_before: context.before,
            context_after: context.after,
            generated: entry.kind.generated,
            expire_ms: entry.kind.expire_ms,
            valid_from: entry.validity.from,
            invalid_at: entry.validity.until,
        }
    }

    pub fn into_entry(self) -> Entry {
        Entry {
            id: self.id,
            session_id: self.session_id,
            author: self.author,
            timestamp: self.timestamp,
            custom_metadata: self.custom_metadata,
            content: self.content.unwrap_or_default(),
            kind: Kind {
                generated: self.generated,
                expire_ms: self.expire_ms,
            },
            validity: Validity {
                from: self.valid_from,
                until: self.invalid_at,
            },
        }
    }

    /// The entry stored at `seq`, as the planner sees it.
    pub fn into_stored(mut self, seq: u64) -> Stored {
        let terms = std::mem::take(&mut self.terms)
            .into_iter()
            .map(|t| t.term)
            .collect();
        let len = self.len;
        let context = Context {
            before: std::mem::take(&mut self.context_before),
            after: std::mem::take(&mut self.context_after),
        };
        Stored {
            seq,
            context,
            entry: self.into_entry(),
            terms,
            len,
        }
    }
}

/// The key prefix of everything stored for one (app, user).
pub(super) fn scope_key(scope: Scope<'_>) -> Key {
    Key::new().str(scope.app_name).str(scope.user_id)
}

pub(super) fn decode<M: Message + Default>(bytes: &[u8], what: &str) -> Result<M> {
    M::decode(bytes).map_err(|e| StoreError::corrupt(format!("{what}: {e}")))
}

pub(super) fn u64_value(bytes: &[u8], what: &str) -> Result<u64> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| StoreError::corrupt(format!("{what}: not 8 bytes")))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The seq that ends a key whose other components take `prefix_len` bytes.
pub(super) fn key_seq(key: &[u8], prefix_len: usize) -> Result<u64> {
    let mut rest = KeyReader::new(key.get(prefix_len..).unwrap_or_default());
    match rest.u64() {
        Some(seq) if rest.is_empty() => Ok(seq),
        _ => Err(StoreError::corrupt("key without a sequence number")),
    }
}

/// A time as the `closed` tree holds it: seconds and nanos, big-endian.
pub(super) fn time_value(t: &Timestamp) -> Vec<u8> {
    [&t.seconds.to_be_bytes()[..], &t.nanos.to_be_bytes()[..]].concat()
}

/// The time of a `closed` value.
pub(super) fn time_of_value(bytes: &[u8], what: &str) -> Result<Timestamp> {
    let corrupt = || StoreError::corrupt(format!("{what}: not 12 bytes"));
    let (seconds, nanos) = bytes.split_at_checked(8).ok_or_else(corrupt)?;
    Ok(Timestamp {
        seconds: i64::from_be_bytes(seconds.try_into().map_err(|_| corrupt())?),
        nanos: i32::from_be_bytes(nanos.try_into().map_err(|_| corrupt())?),
    })
}
