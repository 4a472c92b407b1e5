//! Composite keys of the embedded stores (and of the caches keyed like them).
//!
//! A key is a sequence of components (strings, integers, timestamps). Strings are written with
//! every `0x00` byte escaped as `0x00 0xFF` and a `0x00 0x00` terminator, so:
//! - no two component lists encode to the same bytes (`"a/b"+"c"` never aliases `"a"+"b/c"`,
//!   nor `"a\0"+"b"` aliases `"a"+"\0b"`);
//! - a key built from a prefix of components is a byte prefix of exactly the keys that start with
//!   those components, so a prefix scan of (app, user) never reaches another user;
//! - byte order equals component order (strings compare as their UTF-8 bytes), which keeps
//!   listings ordered by (time, user_id, id) the way ADK orders them.
//!
//! (A length prefix would also prevent aliasing, but it sorts `"b"` before `"aa"`.)

use prost_types::Timestamp;

/// Builds a key component by component.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a string component.
    pub fn str(mut self, s: &str) -> Self {
        self.0.reserve(s.len() + 2);
        for &b in s.as_bytes() {
            if b == 0 {
                self.0.extend_from_slice(&[0, 0xFF]);
            } else {
                self.0.push(b);
            }
        }
        self.0.extend_from_slice(&[0, 0]);
        self
    }

    /// Appends a fixed-width big-endian integer component.
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Appends a timestamp component that sorts chronologically (negative seconds included).
    pub fn timestamp(mut self, t: &Timestamp) -> Self {
        self.0
            .extend_from_slice(&((t.seconds as u64) ^ (1 << 63)).to_be_bytes());
        self.0
            .extend_from_slice(&(t.nanos.max(0) as u32).to_be_bytes());
        self
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Key> for sled::IVec {
    fn from(key: Key) -> Self {
        key.0.into()
    }
}

impl From<Key> for Vec<u8> {
    fn from(key: Key) -> Self {
        key.0
    }
}

/// Reads the components of an encoded key back, in order.
#[derive(Debug, Clone)]
pub struct KeyReader<'a> {
    rest: &'a [u8],
}

impl<'a> KeyReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next string component, or `None` if the bytes are not a well-formed string.
    pub fn str(&mut self) -> Option<String> {
        // Copied a run at a time between escapes: listings read an id from every key.
        let mut out = Vec::new();
        let mut rest = self.rest;
        loop {
            let zero = rest.iter().position(|&b| b == 0)?;
            out.extend_from_slice(&rest[..zero]);
            match *rest.get(zero + 1)? {
                0 => {
                    self.rest = &rest[zero + 2..];
                    return String::from_utf8(out).ok();
                }
                0xFF => out.push(0),
                _ => return None,
            }
            rest = &rest[zero + 2..];
        }
    }

    /// The next integer component.
    pub fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        Some(u64::from_be_bytes(*head))
    }

    /// The next timestamp component.
    pub fn timestamp(&mut self) -> Option<Timestamp> {
        let seconds = (self.u64()? ^ (1 << 63)) as i64;
        let (head, rest) = self.rest.split_first_chunk::<4>()?;
        self.rest = rest;
        let nanos = i32::try_from(u32::from_be_bytes(*head)).ok()?;
        Some(Timestamp { seconds, nanos })
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// The smallest key greater than every key that starts with `prefix`, for range ends.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    // A prefix of only 0xFF bytes has no finite upper bound short of the whole keyspace.
    vec![0xFF; prefix.len() + 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_never_alias() {
        let pairs = [
            ("a/b", "c"),
            ("a", "b/c"),
            ("a\0", "b"),
            ("a", "\0b"),
            ("", "ab"),
        ];
        for (i, (a1, b1)) in pairs.iter().enumerate() {
            for (a2, b2) in &pairs[i + 1..] {
                let k1 = Key::new().str(a1).str(b1);
                let k2 = Key::new().str(a2).str(b2);
                assert_ne!(k1, k2, "{a1:?}+{b1:?} vs {a2:?}+{b2:?}");
                assert!(!k2.as_bytes().starts_with(Key::new().str(a1).as_bytes()) || a1 == a2);
            }
        }
    }

    #[test]
    fn byte_order_is_component_order() {
        let words = ["", "\0", "\0\0", "a", "a\0", "a\u{1}", "aa", "b", "é"];
        for w1 in words {
            for w2 in words {
                let (k1, k2) = (Key::new().str(w1).u64(7), Key::new().str(w2).u64(3));
                assert_eq!(w1.cmp(w2).then(7.cmp(&3)), k1.as_bytes().cmp(k2.as_bytes()));
            }
        }
        let t = |seconds, nanos| Key::new().timestamp(&Timestamp { seconds, nanos });
        assert!(t(-5, 0).as_bytes() < t(-1, 999).as_bytes());
        assert!(t(-1, 999).as_bytes() < t(0, 0).as_bytes());
        assert!(t(0, 1).as_bytes() < t(1, 0).as_bytes());
    }

    #[test]
    fn reader_round_trips() {
        let ts = Timestamp {
            seconds: -3,
            nanos: 42,
        };
        let key = Key::new().str("a\0b").u64(9).timestamp(&ts).str("");
        let mut r = KeyReader::new(key.as_bytes());
        assert_eq!(r.str().as_deref(), Some("a\0b"));
        assert_eq!(r.u64(), Some(9));
        assert_eq!(r.timestamp(), Some(ts));
        assert_eq!(r.str().as_deref(), Some(""));
        assert!(r.is_empty());
        assert_eq!(KeyReader::new(&[b'a', 0, 7]).str(), None);
        assert_eq!(KeyReader::new(b"ab").str(), None);
        assert_eq!(KeyReader::new(&[b'a', 0, 0xFF]).str(), None);
        let key = Key::new().str("\0\0é\0").str("id");
        let mut r = KeyReader::new(key.as_bytes());
        assert_eq!(r.str().as_deref(), Some("\0\0é\0"));
        assert_eq!(r.str().as_deref(), Some("id"));
        assert!(r.is_empty());
        assert_eq!(KeyReader::new(&[1, 2]).u64(), None);
    }

    #[test]
    fn prefix_end_bounds_the_prefix() {
        let p = Key::new().str("app");
        let inside = Key::new().str("app").str("zzz");
        let outside = Key::new().str("app\u{1}");
        let end = prefix_end(p.as_bytes());
        assert!(inside.as_bytes() < end.as_slice());
        assert!(outside.as_bytes() >= end.as_slice());
        assert_eq!(prefix_end(&[1, 0xFF]), vec![2]);
    }
}
