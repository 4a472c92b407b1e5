//! Posting lists, stored in blocks.
//!
//! A term has one posting per entry holding it: the entry's seq, the term's frequency in it and
//! the entry's length. A term's postings are cut into blocks of consecutive seqs, each stored as
//! one value under (app, user, term, first seq); the block holding a seq is the last one whose
//! key is not above it. One key per block rather than per posting is what makes long lists
//! cheap to read: a scan decodes a few bytes per posting instead of taking a tree step (and two
//! allocations) per posting, and a lookup that skips a block does not decode it.
//!
//! A block's value is its postings in increasing seq order, each three LEB128 varints: the
//! distance from the previous seq (from the key's first seq, for the first posting), the term
//! frequency and the entry length. Appends fill the last block up to [`BLOCK_LEN`] postings;
//! postings inserted into an older block (an entry rewritten in place) let it grow to twice that
//! before it is split. A block emptied by removals is deleted.
//!
//! [`TermEdit`] changes one term's blocks within a write plan; [`Cursor`] reads them for a
//! search.

use std::collections::{BTreeMap, BTreeSet};

use adk_common::keys::Key;
use sled::{Batch, IVec, Tree};

use super::{Result, StoreError};

/// Postings an appended-to block holds before a new one is started.
pub const BLOCK_LEN: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    pub seq: u64,
    /// Occurrences of the term in the entry.
    pub tf: u32,
    /// The entry's length in terms.
    pub len: u32,
}

/// The value of a block whose key names `first` (which must not be above its first seq).
pub fn encode(first: u64, postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(postings.len() * 4);
    let mut prev = first;
    for p in postings {
        put_varint(&mut out, p.seq - prev);
        put_varint(&mut out, u64::from(p.tf));
        put_varint(&mut out, u64::from(p.len));
        prev = p.seq;
    }
    out
}

/// Decodes the block stored under first seq `first` into `out` (cleared first).
pub fn decode(first: u64, bytes: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    out.clear();
    let mut rest = bytes;
    let mut seq = first;
    while !rest.is_empty() {
        let delta = varint(&mut rest)?;
        // Only the first posting may sit at the block's first seq itself.
        if delta == 0 && !out.is_empty() {
            return Err(corrupt("postings out of order"));
        }
        seq = seq
            .checked_add(delta)
            .ok_or_else(|| corrupt("seq overflow"))?;
        let tf = u32::try_from(varint(&mut rest)?).map_err(|_| corrupt("tf overflow"))?;
        let len = u32::try_from(varint(&mut rest)?).map_err(|_| corrupt("length overflow"))?;
        out.push(Posting { seq, tf, len });
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(bytes: &mut &[u8]) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes
            .split_first()
            .ok_or_else(|| corrupt("truncated varint"))?;
        *bytes = rest;
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(corrupt("varint too long"))
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("posting block: {what}"))
}

/// The seq that ends a block key, after `prefix_len` bytes of (app, user, term).
fn block_seq(key: &[u8], prefix_len: usize) -> Result<u64> {
    key.get(prefix_len..)
        .and_then(|rest| <[u8; 8]>::try_from(rest).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt("key without a sequence number"))
}

/// One term's postings and document frequency as a write plan changes them. Blocks are read
/// from the tree when first needed and written back by [`TermEdit::finish`].
#[derive(Debug)]
pub struct TermEdit {
    /// (app, user, term): the df key, and the prefix of the term's block keys.
    prefix: Key,
    df: u64,
    df_read: u64,
    /// The blocks read or created, by first seq; empty ones are deleted when finishing.
    blocks: BTreeMap<u64, Vec<Posting>>,
    dirty: BTreeSet<u64>,
    /// Whether `blocks` holds the term's last stored block, so appends need no lookup.
    has_tail: bool,
}

impl TermEdit {
    /// Starts editing the term whose keys start with `prefix`, reading its df from `df_tree`.
    pub fn new(prefix: Key, df_tree: &Tree) -> Result<Self> {
        let df = match df_tree.get(&prefix)? {
            Some(v) => df_value(&v)?,
            None => 0,
        };
        Ok(Self {
            prefix,
            df,
            df_read: df,
            blocks: BTreeMap::new(),
            dirty: BTreeSet::new(),
            has_tail: false,
        })
    }

    /// Adds a posting. `append` says its seq is above every seq stored so far (a new entry).
    pub fn insert(&mut self, tree: &Tree, p: Posting, append: bool) -> Result<()> {
        let first = match self.locate(tree, p.seq, append)? {
            Some(first) => first,
            None => {
                // Below the term's first block: a block of its own.
                self.blocks.insert(p.seq, vec![p]);
                self.dirty.insert(p.seq);
                self.df += 1;
                return Ok(());
            }
        };
        let block = self.blocks.entry(first).or_default();
        if append && block.len() >= BLOCK_LEN {
            self.blocks.insert(p.seq, vec![p]);
            self.dirty.insert(p.seq);
            self.df += 1;
            return Ok(());
        }
        match block.binary_search_by_key(&p.seq, |q| q.seq) {
            Ok(i) => block[i] = p,
            Err(i) => {
                block.insert(i, p);
                self.df += 1;
            }
        }
        self.dirty.insert(first);
        if block.len() >= 2 * BLOCK_LEN {
            let upper = block.split_off(BLOCK_LEN);
            let key = upper[0].seq;
            self.blocks.insert(key, upper);
            self.dirty.insert(key);
        }
        Ok(())
    }

    /// Removes the posting of `seq`, if there is one.
    pub fn remove(&mut self, tree: &Tree, seq: u64) -> Result<()> {
        let Some(first) = self.locate(tree, seq, false)? else {
            return Ok(());
        };
        let block = self.blocks.entry(first).or_default();
        if let Ok(i) = block.binary_search_by_key(&seq, |q| q.seq) {
            block.remove(i);
            self.df -= 1;
            self.dirty.insert(first);
        }
        Ok(())
    }

    /// The first seq of the block that holds (or would hold) `seq`, read into `blocks`;
    /// `None` if `seq` is below every block.
    fn locate(&mut self, tree: &Tree, seq: u64, append: bool) -> Result<Option<u64>> {
        let planned = self.blocks.range(..=seq).next_back().map(|(&k, _)| k);
        if append && self.has_tail {
            return Ok(planned);
        }
        // The plan never drops a block it read (an emptied one stays, to be deleted when
        // finishing), so the right block is the later of the last planned and the last stored
        // one at or below `seq`.
        let start = self.prefix.clone().u64(0);
        let end = self.prefix.clone().u64(seq);
        let stored = match tree.range(start..=end).next_back() {
            Some(kv) => {
                let (key, value) = kv?;
                let first = block_seq(&key, self.prefix.as_bytes().len())?;
                if planned.is_none_or(|p| p < first) {
                    let mut postings = Vec::new();
                    decode(first, &value, &mut postings)?;
                    self.blocks.insert(first, postings);
                }
                Some(first)
            }
            None => None,
        };
        // An append's block is the last stored one: every stored seq is below it.
        self.has_tail |= append;
        Ok(planned.max(stored))
    }

    /// Queues the changed blocks and df into the batches of their trees.
    pub fn finish(&self, blocks: &mut Batch, df: &mut Batch) {
        for &first in &self.dirty {
            let key = self.prefix.clone().u64(first);
            match self.blocks.get(&first) {
                Some(postings) if !postings.is_empty() => {
                    blocks.insert(key, encode(first, postings));
                }
                _ => blocks.remove(key),
            }
        }
        if self.df != self.df_read {
            if self.df == 0 {
                df.remove(self.prefix.as_bytes());
            } else {
                df.insert(self.prefix.as_bytes(), &self.df.to_be_bytes()[..]);
            }
        }
    }
}

/// A document frequency as stored.
pub fn df_value(bytes: &[u8]) -> Result<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| StoreError::Corrupt("document frequency: not 8 bytes".into()))
}

/// Reads one term's postings in seq order, for a search: either one by one ([`Cursor::current`],
/// [`Cursor::advance`]) or by looking seqs up in increasing order ([`Cursor::seek`]), which
/// skips the blocks in between without decoding them. A cursor that has sought is not scanned
/// again.
pub struct Cursor {
    iter: sled::Iter,
    prefix_len: usize,
    /// The current block, decoded.
    block: Vec<Posting>,
    pos: usize,
    /// The next block, read ahead because its first seq is where the current one ends.
    next: Option<(u64, IVec)>,
}

impl Cursor {
    /// A cursor on the blocks of the term whose block keys start with `prefix`.
    pub fn new(tree: &Tree, prefix: &Key) -> Result<Self> {
        let mut cursor = Self {
            iter: tree.scan_prefix(prefix),
            prefix_len: prefix.as_bytes().len(),
            block: Vec::new(),
            pos: 0,
            next: None,
        };
        cursor.next = cursor.read()?;
        cursor.load_next()?;
        Ok(cursor)
    }

    fn read(&mut self) -> Result<Option<(u64, IVec)>> {
        match self.iter.next() {
            Some(kv) => {
                let (key, value) = kv?;
                Ok(Some((block_seq(&key, self.prefix_len)?, value)))
            }
            None => Ok(None),
        }
    }

    /// Makes the next non-empty block current (or leaves the cursor exhausted).
    fn load_next(&mut self) -> Result<()> {
        self.block.clear();
        self.pos = 0;
        while self.block.is_empty() {
            let Some((first, value)) = self.next.take() else {
                return Ok(());
            };
            self.next = self.read()?;
            decode(first, &value, &mut self.block)?;
        }
        Ok(())
    }

    /// The posting the cursor is at; `None` once every posting has been read.
    pub fn current(&self) -> Option<Posting> {
        self.block.get(self.pos).copied()
    }

    pub fn advance(&mut self) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.block.len() {
            self.load_next()?;
        }
        Ok(())
    }

    /// The posting of `seq`, if the term has one. Seqs must be sought in increasing order.
    pub fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        if self.next.as_ref().is_some_and(|(first, _)| *first <= seq) {
            // Blocks that end before `seq` are passed over undecoded.
            let mut target = None;
            while let Some((first, value)) = self.next.take_if(|(first, _)| *first <= seq) {
                target = Some((first, value));
                self.next = self.read()?;
            }
            if let Some((first, value)) = target {
                decode(first, &value, &mut self.block)?;
                self.pos = 0;
            }
        }
        self.pos += self.block[self.pos.min(self.block.len())..].partition_point(|p| p.seq < seq);
        Ok(self.current().filter(|p| p.seq == seq))
    }
}
