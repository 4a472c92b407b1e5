//! Posting blocks as the PostgreSQL store keeps them: a term's postings cut by seq into spans
//! of [`SPAN`] seqs, one `memory_blocks` row per (term, span) holding the span's postings and
//! the bounds a search prunes with (the highest frequency and the lowest length in the block).
//!
//! A block's value is its postings as records of three LEB128 varints: the seq's offset in
//! its span, the term frequency, the entry length. Records are self-delimiting, so a write
//! appends new postings to a block in the database (`postings || new`) without reading it;
//! an entry rewritten in place appends a seq below the block's last, so a reader sorts a block
//! that is out of order. Spans are fixed, so every term's blocks of a span cover the same seqs
//! and a span's score bound is the sum of its blocks' bounds.

use super::super::{maxscore::Posting, Result, StoreError};

/// Seqs per span. A block of a term in every entry holds this many postings, ~4 bytes each
/// for entries of usual lengths: a common term's block is a few hundred bytes to 2 KB, below
/// the size at which PostgreSQL compresses a value or moves it out of its row.
#[cfg(not(test))]
pub const SPAN: u64 = 512;
/// Small spans under test, so that the test corpora span many and pruning skips some.
#[cfg(test)]
pub const SPAN: u64 = 16;

/// The span holding `seq`.
pub fn span_of(seq: u64) -> i64 {
    i64::try_from(seq / SPAN).unwrap_or(i64::MAX)
}

/// The seqs of `span`.
pub fn seqs_of(span: i64) -> std::ops::Range<u64> {
    let first = u64::try_from(span).unwrap_or(0).saturating_mul(SPAN);
    first..first.saturating_add(SPAN)
}

/// The postings of one block and their bounds, as a write sends them.
#[derive(Debug, Default)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// The highest term frequency and the lowest entry length among the postings.
    pub max_tf: u32,
    pub min_len: u32,
}

impl Encoded {
    pub fn push(&mut self, p: Posting) {
        if self.bytes.is_empty() {
            self.max_tf = p.tf;
            self.min_len = p.len;
        } else {
            self.max_tf = self.max_tf.max(p.tf);
            self.min_len = self.min_len.min(p.len);
        }
        for v in [p.seq % SPAN, u64::from(p.tf), u64::from(p.len)] {
            put(&mut self.bytes, v);
        }
    }
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads one varint at `*at`, moving past it.
fn get(bytes: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at).ok_or_else(|| corrupt("truncated"))?;
        *at += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(corrupt("varint too long"))
}

/// Appends the postings of the block of `span` to `out`, in seq order.
pub fn decode(span: i64, bytes: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    let base = u64::try_from(span).map_err(|_| corrupt("negative span"))? * SPAN;
    let start = out.len();
    let mut at = 0;
    while at < bytes.len() {
        let offset = get(bytes, &mut at)?;
        let (tf, len) = (get(bytes, &mut at)?, get(bytes, &mut at)?);
        if offset >= SPAN {
            return Err(corrupt("offset beyond its span"));
        }
        let narrow = |v: u64| u32::try_from(v).map_err(|_| corrupt("value too large"));
        out.push(Posting {
            seq: base + offset,
            tf: narrow(tf)?,
            len: narrow(len)?,
        });
    }
    let block = &mut out[start..];
    if block.windows(2).any(|w| w[0].seq >= w[1].seq) {
        block.sort_unstable_by_key(|p| p.seq);
        if block.windows(2).any(|w| w[0].seq == w[1].seq) {
            return Err(corrupt("a seq twice"));
        }
    }
    Ok(())
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

    fn encode(postings: &[Posting]) -> Encoded {
        let mut e = Encoded::default();
        postings.iter().for_each(|&q| e.push(q));
        e
    }

    #[test]
    fn blocks_round_trip_with_their_bounds() {
        let postings = [
            p(2 * SPAN, 3, 40),
            p(2 * SPAN + 5, 1, 7),
            p(3 * SPAN - 1, u32::MAX, 0),
        ];
        let e = encode(&postings);
        assert_eq!((e.max_tf, e.min_len), (u32::MAX, 0));
        let mut out = vec![p(1, 1, 1)];
        decode(2, &e.bytes, &mut out).unwrap();
        assert_eq!(out[1..], postings);
    }

    #[test]
    fn appended_postings_are_read_in_seq_order() {
        let mut bytes = encode(&[p(1, 1, 5), p(9, 2, 6)]).bytes;
        bytes.extend(encode(&[p(4, 4, 8)]).bytes);
        let mut out = Vec::new();
        decode(0, &bytes, &mut out).unwrap();
        assert_eq!(out, [p(1, 1, 5), p(4, 4, 8), p(9, 2, 6)]);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let twice = [encode(&[p(3, 1, 1)]).bytes, encode(&[p(3, 1, 1)]).bytes].concat();
        for bad in [
            &[0x80][..],
            &[1, 1],
            &[SPAN as u8, 1, 1],
            &twice,
            &[0xFF; 11],
        ] {
            let err = decode(0, bad, &mut Vec::new()).unwrap_err();
            assert!(
                matches!(&err, StoreError::Storage(e) if e.kind() == StorageErrorKind::Corrupt),
                "{bad:?}: {err}"
            );
        }
    }
}
