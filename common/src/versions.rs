//! Stores written by another release. Each store records the version of its layout: a sled
//! database its format ([`crate::sled::open`]), a PostgreSQL schema its schema version
//! ([`crate::postgres::migrate`]). One rule for both, [`check`]: a binary opens a store of its
//! own version or older (upgrading it) and refuses a newer one, naming both versions, rather
//! than misread it or write into it.

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
