//! Posting lists, stored in blocks.
//!
//! A term has one posting per entry holding it: the entry's seq, the term's frequency in it and
//! the entry's length. A term's postings are cut into blocks of consecutive seqs, each stored as
//! one value under (app, user, term, first seq); the block holding a seq is the last one whose
//! key is not above it. One key per block rather than per posting is what makes long lists
//! cheap to read: a scan reads a few bytes per posting instead of taking a tree step (and two
//! allocations) per posting.
//!
//! A block's value is a byte of column widths, then its postings in increasing seq order as
//! three columns of fixed-width values (see [`Block`]), so a lookup is a search in place: the
//! lists a search only looks candidates up in are never decoded whole. Postings inserted into an
//! older block (an entry rewritten in place) let it grow to twice [`BLOCK_LEN`] before it is
//! split. A block emptied by removals is deleted.
//!
//! Appends are append-only: the new postings of a term that one merge of the index journal
//! (see [`super::journal`]) brings go into a new block of their own, so ingestion writes a few
//! bytes per term instead of rewriting the term's last block (whose size, and so the bytes
//! written per ingestion, would grow with the index). The small blocks this leaves at the end
//! of a list are merged (Lucene-style) by the merge that adds the [`MERGE_AT`]-th one since the
//! last such merge, into blocks of up to [`BLOCK_LEN`]: a list ends in at most that many small
//! blocks, and a posting is rewritten about `BLOCK_LEN / MERGE_AT` times on its way into a full
//! block instead of once per later write. How many blocks were appended since the last merge
//! is kept in the term's df value (see [`DfValue`]), which every change of the term rewrites
//! anyway.
//!
//! A term of few postings in a scope (at most [`INLINE_MAX`], which is most terms of most
//! users: a user's memory of a few hundred entries holds thousands of terms, nearly all in a
//! handful of entries) keeps them in its df value instead, as one block (Lucene's "pulsing"):
//! one key per (user, term) instead of two: the keys of rare terms are most of what a store's
//! size grows with when memories are spread over many users. A
//! term whose list outgrows the bound moves to blocks, and one whose removals bring it back
//! within the bound moves back into its df value; a term stored in blocks with fewer postings
//! (by a version before this form) is read as such and moves when next changed.
//!
//! [`TermEdit`] changes one term's postings (for a merge of the journal, or a write that
//! indexes directly); [`Cursor`] reads them for a search, from the df value or the blocks.

use std::collections::{btree_map, BTreeMap, BTreeSet};

use adk_common::{
    keys::Key,
    kv::{Batch, Tree},
};

use super::super::{maxscore, Result, StoreError};

/// Postings a block holds when appended to or merged; a merge cuts longer runs into blocks of
/// this many.
pub const BLOCK_LEN: usize = 256;

pub use super::super::maxscore::Posting;

/// A term's appended blocks are merged when a write brings their number to this.
pub const MERGE_AT: u32 = 8;

/// The most postings a term keeps in its df value rather than in blocks. A change of such a
/// term rewrites its whole list (at most a few hundred bytes), and a search reads the list with
/// its df. Above it, blocks' append-only writes keep what a change rewrites small.
pub const INLINE_MAX: u64 = 32;

/// Bytes per value in a block column, by the 2-bit code stored for the column.
const WIDTHS: [usize; 4] = [1, 2, 4, 8];

/// The code of the narrowest width that holds `max`.
fn width_code(max: u64) -> u8 {
    match max {
        0..=0xFF => 0,
        0x100..=0xFFFF => 1,
        0x1_0000..=0xFFFF_FFFF => 2,
        _ => 3,
    }
}

/// Appends the `width` low bytes of `v`, big-endian.
fn put(out: &mut Vec<u8>, v: u64, width: usize) {
    out.extend_from_slice(&v.to_be_bytes()[8 - width..]);
}

/// The value of a block whose key names `first` (which must not be above its first seq).
pub fn encode(first: u64, postings: &[Posting]) -> Vec<u8> {
    let max = |f: &dyn Fn(&Posting) -> u64| postings.iter().map(f).max().unwrap_or(0);
    let codes = [
        width_code(max(&|p| p.seq - first)),
        width_code(max(&|p| u64::from(p.tf))),
        width_code(max(&|p| u64::from(p.len))),
    ];
    let [wo, wt, wl] = codes.map(|c| WIDTHS[usize::from(c)]);
    let mut out = Vec::with_capacity(1 + postings.len() * (wo + wt + wl));
    out.push(codes[0] | codes[1] << 2 | codes[2] << 4);
    for p in postings {
        put(&mut out, p.seq - first, wo);
    }
    for p in postings {
        put(&mut out, u64::from(p.tf), wt);
    }
    for p in postings {
        put(&mut out, u64::from(p.len), wl);
    }
    out
}

/// Decodes the block stored under first seq `first` into `out` (cleared first).
pub fn decode(first: u64, bytes: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    let mut block = Block::default();
    block.load(first, bytes)?;
    out.clear();
    out.extend((0..block.len).map(|i| block.posting(i)));
    // Writes keep blocks sorted by binary search: they must be sorted to begin with.
    if out.windows(2).any(|w| w[0].seq >= w[1].seq) {
        return Err(corrupt("postings out of order"));
    }
    Ok(())
}

/// A stored block, read in place. After the width byte (2 bits per column) come three columns
/// of big-endian values of that width: each posting's seq minus the key's first seq (strictly
/// increasing), its term frequency, its entry length. The i-th posting is read, and a seq is
/// found by binary search, without decoding the others.
#[derive(Default)]
struct Block {
    /// A copy of the stored value, in a buffer reused from block to block.
    bytes: Vec<u8>,
    first: u64,
    len: usize,
    /// Of the seq, frequency and length columns.
    widths: [usize; 3],
    /// Where the frequency and length columns start.
    starts: [usize; 2],
}

impl Block {
    /// Checks the block's shape, so that reading it cannot fail afterwards. (The order of its
    /// seqs is checked only when a write decodes it: a search on a corrupt block may miss
    /// postings, but touches only the postings it needs.)
    fn load(&mut self, first: u64, bytes: &[u8]) -> Result<()> {
        let (&head, columns) = bytes.split_first().ok_or_else(|| corrupt("empty block"))?;
        let widths = [0, 2, 4].map(|shift| WIDTHS[usize::from(head >> shift & 3)]);
        let row: usize = widths.iter().sum();
        if head >> 6 != 0 || columns.len() % row != 0 {
            return Err(corrupt("bad block size"));
        }
        let len = columns.len() / row;
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.first = first;
        self.len = len;
        self.widths = widths;
        self.starts = [1 + len * widths[0], 1 + len * (widths[0] + widths[1])];
        Ok(())
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Value `i` of the column of `width`-byte values that starts at byte `start`.
    #[inline]
    fn value(&self, start: usize, width: usize, i: usize) -> u64 {
        let at = start + i * width;
        let b = &self.bytes;
        match width {
            1 => u64::from(b[at]),
            2 => u64::from(u16::from_be_bytes([b[at], b[at + 1]])),
            4 => u64::from(u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])),
            _ => b[at..at + width]
                .iter()
                .fold(0, |v, &b| v << 8 | u64::from(b)),
        }
    }

    #[inline]
    fn offset(&self, i: usize) -> u64 {
        self.value(1, self.widths[0], i)
    }

    #[inline]
    fn seq(&self, i: usize) -> u64 {
        self.first.saturating_add(self.offset(i))
    }

    #[inline]
    fn posting(&self, i: usize) -> Posting {
        // Writes make these columns at most 4 bytes wide: the values fit.
        Posting {
            seq: self.seq(i),
            tf: self.value(self.starts[0], self.widths[1], i) as u32,
            len: self.value(self.starts[1], self.widths[2], i) as u32,
        }
    }

    /// The index of the first posting from index `from` on whose seq is not below `seq`.
    fn find(&self, from: usize, seq: u64) -> usize {
        let Some(target) = seq.checked_sub(self.first) else {
            return from;
        };
        // A cursor on a term without blocks has never loaded one.
        let b = self.bytes.get(1..).unwrap_or_default();
        // One search per column width, so that the width is not dispatched on per step.
        match self.widths[0] {
            1 => search(from, self.len, target, |i| u64::from(b[i])),
            2 => search(from, self.len, target, |i| {
                u64::from(u16::from_be_bytes([b[2 * i], b[2 * i + 1]]))
            }),
            _ => search(from, self.len, target, |i| self.offset(i)),
        }
    }
}

/// The first index in `from..len` whose value (increasing with the index) is not below
/// `target`. Lookups go forward by small steps (a candidate is usually a few postings further
/// on), so the next few are tried before a binary search.
#[inline]
pub(super) fn search(from: usize, len: usize, target: u64, value: impl Fn(usize) -> u64) -> usize {
    let near = len.min(from + 8);
    let mut lo = from;
    while lo < near {
        if value(lo) >= target {
            return lo;
        }
        lo += 1;
    }
    let mut hi = len;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if value(mid) < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn corrupt(what: &str) -> StoreError {
    StoreError::corrupt(format!("posting block: {what}"))
}

/// The seq that ends a block key, after `prefix_len` bytes of (app, user, term).
fn block_seq(key: &[u8], prefix_len: usize) -> Result<u64> {
    key.get(prefix_len..)
        .and_then(|rest| <[u8; 8]>::try_from(rest).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt("key without a sequence number"))
}

/// One term's postings and document frequency as a merge changes them. Blocks are read
/// from the tree when first needed and written back by [`TermEdit::finish`], in the df value or
/// in blocks by their number (see [`INLINE_MAX`]).
#[derive(Debug)]
pub struct TermEdit {
    /// (app, user, term): the df key, and the prefix of the term's block keys.
    prefix: Key,
    value: DfValue,
    read: DfValue,
    /// Whether the stored df value held the postings.
    read_inline: bool,
    /// Whether `blocks` holds every posting of the term from the start: it had none in the
    /// `blocks` tree (a new term, or one whose postings were in its df value), so nothing is
    /// read from there.
    whole: bool,
    /// The blocks read or created, by first seq; empty ones are deleted when finishing.
    blocks: BTreeMap<u64, Vec<Posting>>,
    dirty: BTreeSet<u64>,
    /// The block this edit appends to, once it has appended.
    appending: Option<u64>,
}

impl TermEdit {
    /// Starts editing the term whose keys start with `prefix`, reading its df from `df_tree`.
    pub fn new(prefix: Key, df_tree: &Tree) -> Result<Self> {
        let stored = df_tree.get(&prefix)?;
        let value = match &stored {
            Some(v) => DfValue::decode(v)?,
            None => DfValue::default(),
        };
        let mut blocks = BTreeMap::new();
        let inline = stored.as_deref().map(inline_block).transpose()?.flatten();
        if let Some((first, bytes)) = inline {
            let mut postings = Vec::new();
            decode(first, bytes, &mut postings)?;
            blocks.insert(first, postings);
        }
        Ok(Self {
            prefix,
            value,
            read: value,
            read_inline: inline.is_some(),
            // A term's df value and blocks are written together, and a term of no posting has
            // neither: with no df value, no block is stored.
            whole: inline.is_some() || value.df == 0,
            blocks,
            dirty: BTreeSet::new(),
            appending: None,
        })
    }

    /// Whether the journal record of `generation` is in the blocks already (a merge cut short
    /// by a crash put this term's changes there before it could remove the record).
    pub fn has_merged(&self, generation: u64) -> bool {
        generation <= self.read.merged
    }

    /// Notes that the journal record of `generation` is merged into this term.
    pub fn merging(&mut self, generation: u64) {
        self.value.merged = generation;
    }

    /// Adds a posting. `append` says its seq is above every seq stored so far (a new entry):
    /// it goes into this edit's own block, and nothing stored is read.
    pub fn insert(&mut self, tree: &Tree, p: Posting, append: bool) -> Result<()> {
        // A plan made against a state that changed while it was read (to be planned again,
        // see `write`) may append out of order: such postings are inserted where they belong.
        if append && self.appends_after(p.seq) {
            self.append(p);
            return Ok(());
        }
        let first = match self.locate(tree, p.seq)? {
            Some(first) => first,
            None => {
                // Below the term's first block: a block of its own.
                self.start_block(p);
                return Ok(());
            }
        };
        let block = self.blocks.entry(first).or_default();
        match block.binary_search_by_key(&p.seq, |q| q.seq) {
            Ok(i) => block[i] = p,
            Err(i) => {
                block.insert(i, p);
                self.value.df += 1;
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

    /// Whether `seq` is above every seq this edit appended so far.
    fn appends_after(&self, seq: u64) -> bool {
        let last = self
            .appending
            .and_then(|first| self.blocks.get(&first)?.last());
        last.is_none_or(|q| q.seq < seq)
    }

    /// Adds the posting of a new entry, whose seq is above every other so far.
    fn append(&mut self, p: Posting) {
        let block = self.appending.and_then(|first| self.blocks.get_mut(&first));
        match block {
            Some(block) if block.len() < BLOCK_LEN => {
                block.push(p);
                self.value.df += 1;
            }
            _ => {
                self.start_block(p);
                self.appending = Some(p.seq);
                self.value.appended += 1;
            }
        }
    }

    /// A new block holding only `p`.
    fn start_block(&mut self, p: Posting) {
        self.blocks.insert(p.seq, vec![p]);
        self.dirty.insert(p.seq);
        self.value.df += 1;
    }

    /// Removes the posting of `seq`, if there is one.
    pub fn remove(&mut self, tree: &Tree, seq: u64) -> Result<()> {
        let Some(first) = self.locate(tree, seq)? else {
            return Ok(());
        };
        let block = self.blocks.entry(first).or_default();
        if let Ok(i) = block.binary_search_by_key(&seq, |q| q.seq) {
            block.remove(i);
            self.value.df -= 1;
            self.dirty.insert(first);
        }
        Ok(())
    }

    /// The first seq of the block that holds (or would hold) `seq`, read into `blocks`;
    /// `None` if `seq` is below every block.
    fn locate(&mut self, tree: &Tree, seq: u64) -> Result<Option<u64>> {
        let planned = self.blocks.range(..=seq).next_back().map(|(&k, _)| k);
        if self.whole {
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
                self.read_block(first, &value)?;
                Some(first)
            }
            None => None,
        };
        Ok(planned.max(stored))
    }

    /// Keeps the stored block `first` in `blocks`, unless the plan already holds it.
    fn read_block(&mut self, first: u64, value: &[u8]) -> Result<()> {
        if let btree_map::Entry::Vacant(slot) = self.blocks.entry(first) {
            let mut postings = Vec::new();
            decode(first, value, &mut postings)?;
            slot.insert(postings);
        }
        Ok(())
    }

    /// Merges the blocks appended since the last merge into as few blocks as [`BLOCK_LEN`]
    /// allows, once there are [`MERGE_AT`] of them.
    fn merge(&mut self, tree: &Tree) -> Result<()> {
        if self.value.appended < MERGE_AT {
            return Ok(());
        }
        // The stored ones among them are the last stored blocks. The count may be above what
        // is still stored (appended blocks emptied since), so the merge may take in an older
        // block too, which it keeps as it was.
        let Some(mut from) = self.blocks.keys().next_back().copied() else {
            return Ok(());
        };
        let stored = self.read.appended as usize;
        for kv in tree.scan_prefix(&self.prefix).rev().take(stored) {
            let (key, value) = kv?;
            let first = block_seq(&key, self.prefix.as_bytes().len())?;
            self.read_block(first, &value)?;
            from = from.min(first);
        }
        let mut run = Vec::new();
        for (&first, block) in self.blocks.range_mut(from..) {
            run.append(block);
            self.dirty.insert(first);
        }
        self.cut(run);
        Ok(())
    }

    /// Cuts every posting of a term held whole into full blocks (and a last one), as a merge
    /// of its appended blocks would: for a term that has just outgrown its df value.
    fn rechunk(&mut self) {
        let run: Vec<Posting> = std::mem::take(&mut self.blocks)
            .into_values()
            .flatten()
            .collect();
        // Nothing of the term is stored in blocks: only the new ones are written.
        self.dirty.clear();
        self.cut(run);
    }

    /// Puts `run` into blocks of [`BLOCK_LEN`] postings (the last one maybe shorter), each to
    /// be written.
    fn cut(&mut self, mut run: Vec<Posting>) {
        // Sorted already, unless the plan is one to be made again (see `insert`).
        run.sort_by_key(|p| p.seq);
        let mut last_len = 0;
        for chunk in run.chunks(BLOCK_LEN) {
            self.blocks.insert(chunk[0].seq, chunk.to_vec());
            self.dirty.insert(chunk[0].seq);
            last_len = chunk.len();
        }
        // A last block still short of full is appended to by the next merge.
        self.value.appended = u32::from(last_len < BLOCK_LEN);
    }

    /// Queues the term's changes into the batches of their trees: its postings in its df
    /// value if they are few enough (deleting its blocks if it had any), else in blocks (the
    /// appended ones merged if due).
    pub fn finish(&mut self, tree: &Tree, blocks: &mut Batch, df: &mut Batch) -> Result<()> {
        if self.dirty.is_empty() && self.value == self.read {
            return Ok(());
        }
        if self.value.df <= INLINE_MAX {
            return self.finish_inline(tree, blocks, df);
        }
        if self.whole {
            self.rechunk();
        } else {
            self.merge(tree)?;
        }
        for &first in &self.dirty {
            let key = self.prefix.clone().u64(first);
            match self.blocks.get(&first) {
                Some(postings) if !postings.is_empty() => {
                    blocks.insert(key, encode(first, postings));
                }
                _ => blocks.remove(key),
            }
        }
        // Its df is above INLINE_MAX: not 0.
        if self.value != self.read || self.read_inline {
            df.insert(self.prefix.as_bytes(), self.value.encode(None));
        }
        Ok(())
    }

    /// Queues the term's postings into its df value (or its removal, with none left), and the
    /// removal of every block it has.
    fn finish_inline(&mut self, tree: &Tree, blocks: &mut Batch, df: &mut Batch) -> Result<()> {
        if !self.whole {
            // Its postings leave the blocks: every stored one is read (there are few, each
            // holding a posting at least), and deleted.
            for kv in tree.scan_prefix(&self.prefix) {
                let (key, value) = kv?;
                self.read_block(block_seq(&key, self.prefix.as_bytes().len())?, &value)?;
                blocks.remove(key);
            }
        }
        let mut postings: Vec<Posting> = self.blocks.values().flatten().copied().collect();
        // Sorted already, unless the plan is one to be made again (see `insert`).
        postings.sort_by_key(|p| p.seq);
        self.value.df = postings.len() as u64;
        self.value.appended = 0;
        if postings.is_empty() {
            df.remove(self.prefix.as_bytes());
        } else {
            df.insert(self.prefix.as_bytes(), self.value.encode(Some(&postings)));
        }
        Ok(())
    }
}

/// What the `df` tree holds per term: its document frequency, how many blocks were appended to
/// its list since the last merge, and the generation of the last journal record merged into its
/// blocks. Stored as the df (8 bytes, big-endian), followed by the count (4 bytes) when it or
/// the generation is not 0, followed by the generation (8 bytes) when it is not 0. A term of
/// at most [`INLINE_MAX`] postings has all three, then its postings as one block: the block's
/// first seq (8 bytes) and value (see [`encode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct DfValue {
    df: u64,
    appended: u32,
    merged: u64,
}

impl DfValue {
    fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = || StoreError::corrupt("document frequency: bad length");
        let appended = |b: &[u8]| b.try_into().map(u32::from_be_bytes).map_err(|_| bad());
        let merged = |b: &[u8]| b.try_into().map(u64::from_be_bytes).map_err(|_| bad());
        let (appended, merged) = match bytes.len() {
            8 => (0, 0),
            12 => (appended(&bytes[8..])?, 0),
            20 => (appended(&bytes[8..12])?, merged(&bytes[12..])?),
            n if n > INLINE_AT => (appended(&bytes[8..12])?, merged(&bytes[12..INLINE_AT])?),
            _ => return Err(bad()),
        };
        Ok(Self {
            df: df_value(bytes)?,
            appended,
            merged,
        })
    }

    /// The value, with the term's `inline` postings (not empty) when it keeps them there.
    fn encode(&self, inline: Option<&[Posting]>) -> Vec<u8> {
        let mut out = self.df.to_be_bytes().to_vec();
        if self.appended > 0 || self.merged > 0 || inline.is_some() {
            out.extend_from_slice(&self.appended.to_be_bytes());
        }
        if self.merged > 0 || inline.is_some() {
            out.extend_from_slice(&self.merged.to_be_bytes());
        }
        if let Some(postings) = inline {
            let first = postings.first().map_or(0, |p| p.seq);
            out.extend_from_slice(&first.to_be_bytes());
            out.extend_from_slice(&encode(first, postings));
        }
        out
    }
}

/// Where the postings start in a df value that holds them (see [`DfValue`]).
const INLINE_AT: usize = 20;

/// The postings a df value holds, as a block's first seq and value; `None` for a term whose
/// postings are in blocks.
pub(super) fn inline_block(bytes: &[u8]) -> Result<Option<(u64, &[u8])>> {
    let Some(rest) = bytes.get(INLINE_AT..).filter(|rest| !rest.is_empty()) else {
        return Ok(None);
    };
    match rest.split_first_chunk::<8>() {
        Some((first, block)) if !block.is_empty() => Ok(Some((u64::from_be_bytes(*first), block))),
        _ => Err(StoreError::corrupt("document frequency: bad length")),
    }
}

/// A term's df value as a search reads it: its document frequency and where its postings are.
pub struct StoredTerm(Option<Vec<u8>>);

impl StoredTerm {
    /// The df value of the term whose keys start with `prefix`.
    pub fn read(df_tree: &Tree, prefix: &Key) -> Result<Self> {
        Ok(Self(df_tree.get(prefix)?))
    }

    /// Its document frequency (0 for a term of no entry).
    pub fn df(&self) -> Result<u64> {
        self.0.as_deref().map_or(Ok(0), df_value)
    }

    /// A cursor on its postings: those its value holds, else those in `blocks`.
    pub fn cursor(&self, blocks: &Tree, prefix: &Key) -> Result<Cursor> {
        match self.0.as_deref().map(inline_block).transpose()?.flatten() {
            Some((first, block)) => Cursor::inline(first, block),
            None => Cursor::new(blocks, prefix),
        }
    }
}

/// The generation of the last journal record merged into a term's blocks, from its `df` value
/// (0 when none is recorded).
pub fn merged_generation(bytes: &[u8]) -> Result<u64> {
    Ok(DfValue::decode(bytes)?.merged)
}

/// The document frequency in a `df` value (see [`DfValue`]).
pub fn df_value(bytes: &[u8]) -> Result<u64> {
    bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::corrupt("document frequency: bad length"))
}

/// Reads one term's postings in seq order, for a search: either one by one ([`Cursor::current`],
/// [`Cursor::advance`]) or by looking seqs up in increasing order ([`Cursor::seek`]), which
/// passes over the blocks in between without reading their postings. A cursor that has sought
/// is not scanned again.
pub struct Cursor {
    /// The term's blocks after the current one (none for postings held in the df value).
    iter: Option<adk_common::kv::Iter>,
    prefix_len: usize,
    block: Block,
    pos: usize,
    /// The posting at `pos`, read once.
    current: Option<Posting>,
    /// The next block, read ahead because its first seq is where the current one ends.
    next: Option<(u64, Vec<u8>)>,
}

impl Cursor {
    /// A cursor on the blocks of the term whose block keys start with `prefix`.
    fn new(tree: &Tree, prefix: &Key) -> Result<Self> {
        let mut cursor = Self {
            iter: Some(tree.scan_prefix(prefix)),
            prefix_len: prefix.as_bytes().len(),
            block: Block::default(),
            pos: 0,
            current: None,
            next: None,
        };
        cursor.next = cursor.read()?;
        cursor.load_next()?;
        Ok(cursor)
    }

    /// A cursor on the one block a df value holds, stored under first seq `first`.
    fn inline(first: u64, block: &[u8]) -> Result<Self> {
        let mut cursor = Self {
            iter: None,
            prefix_len: 0,
            block: Block::default(),
            pos: 0,
            current: None,
            next: None,
        };
        cursor.block.load(first, block)?;
        cursor.settle();
        Ok(cursor)
    }

    fn read(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(iter) = &mut self.iter else {
            return Ok(None);
        };
        match iter.next() {
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
        while self.block.len == 0 {
            let Some((first, value)) = self.next.take() else {
                break;
            };
            self.next = self.read()?;
            self.block.load(first, &value)?;
        }
        self.settle();
        Ok(())
    }

    /// Reads the posting at `pos`.
    fn settle(&mut self) {
        self.current = (self.pos < self.block.len).then(|| self.block.posting(self.pos));
    }

    /// The posting the cursor is at; `None` once every posting has been read.
    #[inline]
    pub fn current(&self) -> Option<Posting> {
        self.current
    }

    pub fn advance(&mut self) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.block.len {
            self.load_next()?;
        } else {
            self.settle();
        }
        Ok(())
    }

    /// The posting of `seq`, if the term has one. Seqs must be sought in increasing order.
    pub fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        if self.next.as_ref().is_some_and(|(first, _)| *first <= seq) {
            // Blocks that end before `seq` are passed over unread.
            let mut target = None;
            while let Some(block) = self.next.take_if(|(first, _)| *first <= seq) {
                target = Some(block);
                self.next = self.read()?;
            }
            if let Some((first, value)) = target {
                self.block.load(first, &value)?;
                self.pos = 0;
            }
        }
        self.pos = self.block.find(self.pos.min(self.block.len), seq);
        self.settle();
        Ok(self.current.filter(|p| p.seq == seq))
    }
}

impl maxscore::Cursor for Cursor {
    fn current(&self) -> Option<Posting> {
        Cursor::current(self)
    }

    fn advance(&mut self) -> Result<()> {
        Cursor::advance(self)
    }

    fn seek(&mut self, seq: u64) -> Result<Option<Posting>> {
        Cursor::seek(self, seq)
    }
}

#[cfg(test)]
mod tests {
    use adk_common::storage::StorageErrorKind;

    use super::*;

    fn p(seq: u64, tf: u32, len: u32) -> Posting {
        Posting { seq, tf, len }
    }

    #[test]
    fn blocks_round_trip_at_every_column_width() {
        let cases = [
            (5, vec![p(5, 1, 12), p(6, 2, 30), p(200, 1, 255)]),
            (0, vec![p(1, 300, 70_000), p(70_000, 1, 1)]),
            (7, vec![p(7, u32::MAX, u32::MAX), p(7 + (1 << 40), 1, 0)]),
            (9, vec![]),
        ];
        for (first, postings) in cases {
            let bytes = encode(first, &postings);
            let mut back = Vec::new();
            decode(first, &bytes, &mut back).unwrap();
            assert_eq!(back, postings);
        }
        // Narrow columns: one byte of widths, then 1 + 1 + 1 bytes per posting.
        assert_eq!(encode(5, &[p(5, 1, 12), p(6, 2, 30)]).len(), 7);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut out = Vec::new();
        for bad in [
            &[][..],
            &[0x40, 1, 1, 1],
            &[0, 1, 1],
            &[0, 1, 1, 1, 1, 1, 1],
        ] {
            let err = decode(0, bad, &mut out).unwrap_err();
            assert!(
                matches!(&err, StoreError::Storage(e) if e.kind() == StorageErrorKind::Corrupt),
                "{bad:?}: {err}"
            );
        }
    }
}
