//! Postings in columns: the block format the sled store keeps on disk and the PostgreSQL store
//! keeps in memory between searches ([`super::pg`]'s block cache), and how a search reads it in
//! place.
//!
//! A block is a byte of column widths, then its postings in increasing seq order as three
//! columns of fixed-width big-endian values, each as narrow as its largest value allows: the
//! seq's offset from the block's first seq, the term frequency, the entry length. Chat turns
//! take 3-5 bytes per posting, and a lookup touches only the seq column.

use super::{maxscore::Posting, Result, StoreError};

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
#[derive(Debug, Default)]
pub struct Block {
    /// A copy of the stored value, in a buffer reused from block to block (reading a sled
    /// value in place costs a dispatch on its representation per access).
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
    pub fn load(&mut self, first: u64, bytes: &[u8]) -> Result<()> {
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

    /// A block of its own (see [`Block::load`]).
    pub fn new(first: u64, bytes: &[u8]) -> Result<Self> {
        let mut block = Self::default();
        block.load(first, bytes)?;
        Ok(block)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory the block takes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.bytes.capacity()
    }

    pub fn clear(&mut self) {
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
    pub fn seq(&self, i: usize) -> u64 {
        self.first.saturating_add(self.offset(i))
    }

    #[inline]
    pub fn posting(&self, i: usize) -> Posting {
        // Writes make these columns at most 4 bytes wide: the values fit.
        Posting {
            seq: self.seq(i),
            tf: self.value(self.starts[0], self.widths[1], i) as u32,
            len: self.value(self.starts[1], self.widths[2], i) as u32,
        }
    }

    /// The index of the first posting from index `from` on whose seq is not below `seq`.
    pub fn find(&self, from: usize, seq: u64) -> usize {
        let Some(target) = seq.checked_sub(self.first) else {
            return from;
        };
        let b = &self.bytes[1..];
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
fn search(from: usize, len: usize, target: u64, value: impl Fn(usize) -> u64) -> usize {
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
