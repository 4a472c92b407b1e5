//! Converting a database written by an older version, when it is opened: the postings
//! layout ([`migrate`]), the entries' kinds ([`convert_kinds`]), the metadata index
//! ([`build_metadata`]), the entries' validity ([`convert_validity`]) and the index's analysis
//! ([`reindex`]). (And first, refusing one of a newer format: [`FORMAT`].)

use std::collections::{HashMap, HashSet};

use adk_common::{
    keys::{Key, KeyReader},
    kv::{Batch, Tree},
};
use metrics::counter;
use prost::Message;

use super::{
    super::{
        generation::converted_kind, plan::Write, JobRecord, Result, RevisionRecord, Scope,
        StoreError, Vectors,
    },
    generation::done_key,
    postings::{self, Posting},
    records::{decode, scope_key, u64_value, EntryRecord},
    EmbeddedMemoryStore,
};

/// The tree holding what the index was built with, and its key for the analysis identity.
const INDEX: &str = "index";
const ANALYSIS: &[u8] = b"analysis";
/// The key in [`INDEX`] saying that the `turns` tree holds every entry of a session.
const TURNS: &[u8] = b"turns";
/// The key in [`INDEX`] saying that entries carry their kind and finished jobs are in
/// `jobs_done` (format 4).
const KINDS: &[u8] = b"kinds";
/// The key in [`INDEX`] saying that the `metadata` tree indexes every entry (format 6).
const METADATA: &[u8] = b"metadata";
/// The key in [`INDEX`] saying that every entry carries its validity (format 8).
const VALIDITY: &[u8] = b"validity";

/// Builds the `turns` tree from the `buckets` tree in a store written before it was kept.
/// The tree is only trusted once [`TURNS`] is stored, after it is on disk: a build cut short
/// starts over at the next open.
pub(super) fn build_turns(db: &adk_common::kv::Db, buckets: &Tree, turns: &Tree) -> Result<()> {
    let index = db.open_tree(INDEX)?;
    if index.contains_key(TURNS)? {
        return Ok(());
    }
    turns.clear()?;
    let mut batch = Batch::default();
    for kv in buckets.iter() {
        let (key, seq) = kv?;
        let mut reader = KeyReader::new(&key);
        let (Some(app_name), Some(user_id), Some(session_id)) =
            (reader.str(), reader.str(), reader.str())
        else {
            return Err(StoreError::corrupt("memory slot key"));
        };
        if !session_id.is_empty() {
            let turn = Key::new().str(&app_name).str(&user_id).str(&session_id);
            batch.insert(turn.u64(u64_value(&seq, "slot")?).into_vec(), Vec::new());
        }
    }
    turns.apply_batch(batch)?;
    db.flush()?;
    index.insert(TURNS, Vec::new())?;
    db.flush()?;
    Ok(())
}

/// Gives the entries of a store of format 3 their kind and expiry (see [`converted_kind`]:
/// from the `revisions` and `expiries` the generator wrote, never from metadata), keeps only
/// the expiries of generated entries (the sweep deletes what they name), and keys the finished jobs in `jobs_done`.
/// Done once: [`KINDS`] is stored after the rest is on disk. A conversion cut short starts over
/// at the next open and decides the same: it reads nothing it changes but the expiries it
/// drops, which no generated entry reads.
pub(super) fn convert_kinds(store: &EmbeddedMemoryStore) -> Result<()> {
    let index = store.db.open_tree(INDEX)?;
    if index.contains_key(KINDS)? {
        return Ok(());
    }
    // The last revision of each (app, user, memory id): revisions are keyed in the order they
    // were recorded.
    let mut last = HashMap::new();
    for kv in store.revisions.iter() {
        let (key, value) = kv?;
        let mut reader = KeyReader::new(&key);
        let (Some(app_name), Some(user_id)) = (reader.str(), reader.str()) else {
            return Err(StoreError::corrupt("revision key"));
        };
        let revision: RevisionRecord = decode(&value, "revision")?;
        let id = Key::new()
            .str(&app_name)
            .str(&user_id)
            .str(&revision.memory_id);
        last.insert(id.into_vec(), revision);
    }
    let mut entries = Batch::default();
    // The expiries of generated entries: every other one goes (a raw entry's, or one whose
    // entry is gone).
    let mut kept = HashSet::new();
    let mut generated = 0u64;
    for kv in store.entries.iter() {
        let (key, value) = kv?;
        let mut reader = KeyReader::new(&key);
        let (Some(app_name), Some(user_id)) = (reader.str(), reader.str()) else {
            return Err(StoreError::corrupt("memory entry key"));
        };
        let mut record: EntryRecord = decode(&value, "entry")?;
        let id = Key::new().str(&app_name).str(&user_id).str(&record.id);
        let expire_ms = store
            .expiries
            .get(&id)?
            .map(|at| u64_value(&at, "expiry").map(|at| at as i64))
            .transpose()?;
        let entry = record.clone().into_entry();
        let kind = converted_kind(&entry, last.get(id.as_bytes()), expire_ms);
        if kind.generated {
            generated += 1;
            (record.generated, record.expire_ms) = (true, kind.expire_ms);
            entries.insert(key, record.encode_to_vec());
            if kind.expire_ms.is_some() {
                kept.insert(id.into_vec());
            }
        }
    }
    let mut expiries = Batch::default();
    for key in store.expiries.iter().keys() {
        let key = key?;
        if !kept.contains(&key) {
            expiries.remove(key);
        }
    }
    let mut done = Batch::default();
    for value in store.jobs.iter().values() {
        let job: JobRecord = decode(&value?, "job")?;
        if !job.is_open() {
            done.insert(done_key(&job).into_vec(), Vec::new());
        }
    }
    store.entries.apply_batch(entries)?;
    store.expiries.apply_batch(expiries)?;
    store.jobs_done.apply_batch(done)?;
    store.db.flush()?;
    index.insert(KINDS, Vec::new())?;
    store.db.flush()?;
    if generated > 0 {
        tracing::info!(generated, "marked the generated memories");
    }
    Ok(())
}

/// Indexes every scope again when its index was built by another analysis than the store's
/// (an older version, or another default language), before the store serves anything.
/// Entries, their order, ids and tombstones stay as they are; each entry gets the context its
/// neighbours make (a store of the version before contexts has none stored). The identity is
/// stored once every scope is done, so a conversion cut short starts over at the next open,
/// which gives the same index.
pub(super) fn reindex(store: &EmbeddedMemoryStore) -> Result<()> {
    let index = store.db.open_tree(INDEX)?;
    let identity = store.analyzer.identity();
    let stored = index.get(ANALYSIS)?;
    if stored.as_deref() == Some(identity.as_bytes()) {
        return Ok(());
    }
    let scopes = store
        .stats
        .iter()
        .keys()
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if !scopes.is_empty() {
        let from = stored.map_or("none".into(), |s| String::from_utf8_lossy(&s).into_owned());
        tracing::info!(scopes = scopes.len(), %from, to = %identity, "re-indexing memory");
    }
    for (done, raw) in scopes.iter().enumerate() {
        let mut reader = KeyReader::new(raw);
        let (Some(app_name), Some(user_id)) = (reader.str(), reader.str()) else {
            return Err(StoreError::corrupt("memory stats key"));
        };
        let scope = scope_key(Scope {
            app_name: &app_name,
            user_id: &user_id,
        });
        let entries = store.write_now(&scope, &Write::Reindex, &Vectors::default(), &[])?;
        counter!("memory_reindexed_entries_total").increment(u64::from(entries));
        tracing::info!(
            app_name,
            user_id,
            entries,
            progress = format!("{}/{}", done + 1, scopes.len()),
            "re-indexed"
        );
    }
    store.db.flush()?;
    index.insert(ANALYSIS, identity.as_bytes())?;
    store.db.flush()?;
    Ok(())
}

/// Builds the `metadata` tree (see [`super::metadata`]) from the entries of a store written
/// before it was kept. The tree is only trusted once [`METADATA`] is stored, after it is on
/// disk: a build cut short starts over at the next open.
pub(super) fn build_metadata(store: &EmbeddedMemoryStore) -> Result<()> {
    let index = store.db.open_tree(INDEX)?;
    if index.contains_key(METADATA)? {
        return Ok(());
    }
    store.metadata.clear()?;
    let (mut batch, mut queued) = (Batch::default(), 0usize);
    for kv in store.entries.iter() {
        let (key, value) = kv?;
        let mut reader = KeyReader::new(&key);
        let (Some(app_name), Some(user_id), Some(seq)) = (reader.str(), reader.str(), reader.u64())
        else {
            return Err(StoreError::corrupt("memory entry key"));
        };
        let record: EntryRecord = decode(&value, "entry")?;
        let scope = Key::new().str(&app_name).str(&user_id);
        for key in super::metadata::keys(&scope, seq, &record.custom_metadata) {
            batch.insert(key, &seq.to_be_bytes()[..]);
            queued += 1;
        }
        // Applied in parts, to bound the memory the batch takes.
        if queued >= 100_000 {
            store.metadata.apply_batch(std::mem::take(&mut batch))?;
            queued = 0;
        }
    }
    store.metadata.apply_batch(batch)?;
    store.db.flush()?;
    index.insert(METADATA, Vec::new())?;
    store.db.flush()?;
    Ok(())
}

/// Gives every entry of a store written before format 8 its validity: valid from its timestamp
/// (an event's time; a generated memory's, the time of its generation), still valid. Nothing
/// else of an entry changes, and no entry is closed, so the `closed` tree stays empty. Done
/// once: [`VALIDITY`] is stored after the rest is on disk; a conversion cut short starts over
/// at the next open and sets the same times.
pub(super) fn convert_validity(store: &EmbeddedMemoryStore) -> Result<()> {
    let index = store.db.open_tree(INDEX)?;
    if index.contains_key(VALIDITY)? {
        return Ok(());
    }
    let (mut batch, mut queued, mut converted) = (Batch::default(), 0usize, 0u64);
    for kv in store.entries.iter() {
        let (key, value) = kv?;
        let mut record: EntryRecord = decode(&value, "entry")?;
        if record.valid_from.is_none() && record.timestamp.is_some() {
            record.valid_from = record.timestamp;
            batch.insert(key, record.encode_to_vec());
            queued += 1;
            converted += 1;
        }
        // Applied in parts, to bound the memory the batch takes.
        if queued >= 10_000 {
            store.entries.apply_batch(std::mem::take(&mut batch))?;
            queued = 0;
        }
    }
    store.entries.apply_batch(batch)?;
    store.db.flush()?;
    index.insert(VALIDITY, Vec::new())?;
    store.db.flush()?;
    if converted > 0 {
        tracing::info!(entries = converted, "memories valid from their timestamps");
    }
    Ok(())
}

/// The tree of one key per posting that [`migrate`] converts.
pub(super) const OLD_POSTINGS: &str = "postings";

/// The version of the memory store's layout: raise it with any change a binary of the previous
/// version would misread (see [`adk_common::versions`]). 2: entries have contexts and the
/// index is of stems (an older binary would search it by whole words). 3: a term's df value
/// may carry its count of appended blocks (an older binary would take it for corrupt).
/// 4: an entry's kind and expiry are in its record (an older binary would take them from its
/// metadata, and keep neither when it rewrites the entry). 5: the postings of recent writes
/// may be in the `journal` tree rather than in the blocks (an older binary would search
/// without them). 6: entries' metadata is indexed in the `metadata` tree (an older binary
/// would not keep it in step with its writes). 7: event streams buffer events in the `streams`
/// and `stream_events` trees (an older binary would never hand them to generation, and would
/// keep the ids of handed-off events forever); the trees start empty, so nothing is converted.
/// 8: entries carry their validity, and the
/// `closed` tree indexes those no longer valid (an older binary would return superseded
/// memories as valid, and drop validity when it rewrites an entry). 9: a term of few postings
/// keeps them in its df value instead of blocks (an older binary would take the value for
/// corrupt); the blocks of a term written before stay valid, so nothing is converted.
pub(super) const FORMAT: u32 = 9;

/// What the format checks call the store.
pub(super) const STORE: &str = "memory store";

/// Refuses a database of a newer format than [`FORMAT`] (recording [`FORMAT`] in an older one).
///
/// Converts a database written before the `blocks` and `df` trees: builds them from the old
/// `postings` tree (keys app, user, term, seq; values term frequency and entry length, two u32s
/// big-endian), then drops it. Runs before the store serves anything. Until the old tree is
/// dropped it is what counts: a conversion cut short leaves it in place, and the next open
/// starts over from cleared new trees.
pub(super) fn migrate(db: &adk_common::kv::Db, blocks: &Tree, df: &Tree) -> Result<()> {
    adk_common::kv::open_format(db, STORE, FORMAT)?;
    if !db.tree_names()?.iter().any(|name| name == OLD_POSTINGS) {
        return Ok(());
    }
    let old = db.open_tree(OLD_POSTINGS)?;
    tracing::info!(postings = old.len()?, "converting postings to blocks");
    blocks.clear()?;
    df.clear()?;
    let (mut block_batch, mut df_batch) = (Batch::default(), Batch::default());
    // The (app, user, term) being converted, its postings not yet queued, and its df.
    let (mut prefix, mut block, mut count) = (Vec::new(), Vec::new(), 0u64);
    let mut queued = 0;
    for kv in old.iter() {
        let (key, value) = kv?;
        let split = key
            .len()
            .checked_sub(8)
            .ok_or_else(|| StoreError::corrupt("posting key without a sequence number"))?;
        let (term, seq) = key.split_at(split);
        if term != prefix.as_slice() {
            flush_block(&prefix, &mut block, &mut block_batch);
            if count > 0 {
                df_batch.insert(prefix.as_slice(), &count.to_be_bytes()[..]);
            }
            (prefix, count) = (term.to_vec(), 0);
        } else if block.len() == postings::BLOCK_LEN {
            flush_block(&prefix, &mut block, &mut block_batch);
        }
        let packed = u64_value(&value, "posting")?;
        block.push(Posting {
            seq: u64_value(seq, "posting key")?,
            tf: (packed >> 32) as u32,
            len: packed as u32,
        });
        count += 1;
        queued += 1;
        // Applied in parts, to bound the memory the batches take.
        if queued % 100_000 == 0 {
            blocks.apply_batch(std::mem::take(&mut block_batch))?;
            df.apply_batch(std::mem::take(&mut df_batch))?;
        }
    }
    flush_block(&prefix, &mut block, &mut block_batch);
    if count > 0 {
        df_batch.insert(prefix.as_slice(), &count.to_be_bytes()[..]);
    }
    blocks.apply_batch(block_batch)?;
    df.apply_batch(df_batch)?;
    // The new trees are on disk before the old one goes.
    db.flush()?;
    db.drop_tree(OLD_POSTINGS)?;
    db.flush()?;
    tracing::info!(postings = queued, "converted postings to blocks");
    Ok(())
}

/// Queues `block`, the next postings of the term whose keys start with `prefix`, as one block,
/// and empties it.
fn flush_block(prefix: &[u8], block: &mut Vec<Posting>, batch: &mut Batch) {
    if let Some(first) = block.first().map(|p| p.seq) {
        let key = [prefix, &first.to_be_bytes()[..]].concat();
        batch.insert(key, postings::encode(first, block));
        block.clear();
    }
}
