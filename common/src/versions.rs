//! Stores written by another release. Each store records the version of its layout: an embedded
//! database its format ([`check_recorded`], for [`crate::sled::open`] and
//! [`crate::kv::open_format`]), a PostgreSQL schema its schema version
//! ([`crate::postgres::migrate`]). One rule for both, [`check`]: a binary opens a store of its
//! own version or older (upgrading it) and refuses a newer one, naming both versions, rather
//! than misread it or write into it.

use crate::storage::{StorageError, StorageErrorKind};

/// A store at a version newer than this binary knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {what} is at version {stored}, written by a newer release; this binary knows versions \
     up to {supported}: run a release that knows version {stored}, or restore a backup taken \
     before the upgrade"
)]
pub struct TooNew {
    pub what: String,
    pub stored: u32,
    pub supported: u32,
}

/// The rule: a store at `stored` may be opened by a binary knowing versions up to `supported`
/// (and upgraded by it) only if `stored <= supported`. `what` names the store in the message.
pub fn check(what: &str, stored: u32, supported: u32) -> Result<(), TooNew> {
    if stored > supported {
        return Err(TooNew {
            what: what.to_owned(),
            stored,
            supported,
        });
    }
    Ok(())
}

/// The key an embedded database records its format version under, as a big-endian u32.
pub const RECORD_KEY: &[u8] = b"version";

/// Checks the format version an embedded database records (`stored`, the value under
/// [`RECORD_KEY`]) against `supported`; returns whether the caller must record `supported`
/// (the database is older, or new). The record comes before any conversion the caller then
/// runs: from then on older binaries refuse the database even if the conversion is cut short,
/// so conversions must carry on at the next open. A database without a record predates the
/// records: version 1.
pub fn check_recorded(
    what: &str,
    stored: Option<&[u8]>,
    supported: u32,
) -> Result<bool, StorageError> {
    let stored = match stored {
        None => None,
        Some(bytes) => Some(u32::from_be_bytes(bytes.try_into().map_err(|_| {
            StorageError::corrupt(format!("the {what}'s format version"))
        })?)),
    };
    check(what, stored.unwrap_or(1), supported)
        .map_err(|e| StorageError::new(StorageErrorKind::Internal, e))?;
    Ok(stored != Some(supported))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_version_is_refused_naming_both() {
        assert!(check("x", 1, 2).is_ok());
        assert!(check("x", 2, 2).is_ok());
        let e = check("memory store", 3, 2).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("the memory store is at version 3"),
            "{text}"
        );
        assert!(text.contains("up to 2"), "{text}");
    }
}
