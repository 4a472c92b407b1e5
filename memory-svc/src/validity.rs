//! Validity in time: when what a memory says became true (`valid_from`) and, once a later fact
//! superseded it, when it stopped (`invalid_at`). A memory is valid at `t` when
//! `valid_from <= t < invalid_at` (an absent `valid_from`: since ever; an absent `invalid_at`:
//! still). [`Validity::given`] is the one place an entry's validity is decided and checked;
//! [`ValidAt::admits`] the one place an entry is tested against a search's or listing's
//! `as_of` and `include_superseded`.
//!
//! Superseded memories are few beside the rest, but a search for what a memory says finds the
//! memory that said otherwise: both stores index the entries whose validity is closed (sled's
//! `closed` tree, PostgreSQL's partial index `memory_closed`), read the scope's closed entries
//! once per search and leave out those [`ValidAt::hides_closed`] names before ranking, so a
//! superseded fact neither reads its entry nor sends the search the filtering way.

use adk_common::validate::{timestamp, InvalidArgument};
use prost_types::Timestamp;

/// When an entry is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Validity {
    /// When it became true; `None`: since ever.
    pub from: Option<Timestamp>,
    /// When it stopped being true; `None`: it still is.
    pub until: Option<Timestamp>,
}

/// A timestamp's order: (seconds, nanos).
fn key(t: &Timestamp) -> (i64, i32) {
    (t.seconds, t.nanos)
}

/// Whether `a` is before `b`.
pub fn before(a: &Timestamp, b: &Timestamp) -> bool {
    key(a) < key(b)
}

impl Validity {
    /// Valid from `from` on, still.
    pub fn from(from: Option<Timestamp>) -> Self {
        Self { from, until: None }
    }

    /// The validity a write gives an entry: `valid_from` when given, else `default_from`; an
    /// `invalid_at` given must come after it. `field` names the entry in errors
    /// (`memories[0]`).
    pub fn given(
        field: &str,
        valid_from: Option<Timestamp>,
        invalid_at: Option<Timestamp>,
        default_from: Option<Timestamp>,
    ) -> Result<Self, InvalidArgument> {
        timestamp(&format!("{field}.valid_from"), valid_from.as_ref())?;
        timestamp(&format!("{field}.invalid_at"), invalid_at.as_ref())?;
        let from = valid_from.or(default_from);
        if let (Some(from), Some(until)) = (&from, &invalid_at) {
            if !before(from, until) {
                return Err(InvalidArgument::new(
                    format!("{field}.invalid_at"),
                    format!("must be after valid_from ({from})"),
                ));
            }
        }
        Ok(Self {
            from,
            until: invalid_at,
        })
    }

    /// This validity closed at `at`, the start of the fact that supersedes it; at its own start
    /// if `at` is before it (a fact superseded by one valid from earlier was never valid alone,
    /// and is kept as history only).
    pub fn closed_at(self, at: Timestamp) -> Self {
        let until = match self.from {
            Some(from) if before(&at, &from) => from,
            _ => at,
        };
        Self {
            from: self.from,
            until: Some(until),
        }
    }
}

/// What a search or listing asks of its memories' validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValidAt {
    /// The time the memories must be valid at; `None`: no condition, every memory passes (a
    /// purge's matching, the stores' own calls).
    pub at: Option<Timestamp>,
    /// Whether `at` is the caller's `as_of` rather than the time of the request. Entries valid
    /// from after the request are rare, so a search finds them among its results; as of another
    /// time, any entry may be, and each candidate is checked.
    pub as_of: bool,
    /// Whether memories valid from `at` or before pass whether or not they still were then.
    pub include_superseded: bool,
}

impl ValidAt {
    /// Checks a request's `as_of` (`as_of_field` in errors): memories valid then, or with none
    /// valid `now`.
    pub fn parse(
        as_of_field: &str,
        as_of: Option<Timestamp>,
        include_superseded: bool,
        now: Timestamp,
    ) -> Result<Self, InvalidArgument> {
        timestamp(as_of_field, as_of.as_ref())?;
        Ok(Self {
            as_of: as_of.is_some(),
            at: Some(as_of.unwrap_or(now)),
            include_superseded,
        })
    }

    /// Whether an entry with this validity passes.
    pub fn admits(&self, validity: &Validity) -> bool {
        let Some(at) = &self.at else {
            return true;
        };
        validity.from.as_ref().is_none_or(|from| !before(at, from))
            && validity
                .until
                .as_ref()
                .is_none_or(|until| !self.hides_closed(until))
    }

    /// Whether an entry no longer valid from `until` on fails, whatever its start: what the
    /// stores test their closed entries with, before ranking.
    pub fn hides_closed(&self, until: &Timestamp) -> bool {
        match &self.at {
            Some(at) if !self.include_superseded => !before(at, until),
            _ => false,
        }
    }

    /// Whether any closed entry may fail (the stores then read theirs).
    pub fn hides_any_closed(&self) -> bool {
        self.at.is_some() && !self.include_superseded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp { seconds, nanos: 0 }
    }

    fn at(seconds: i64, include_superseded: bool) -> ValidAt {
        ValidAt {
            at: Some(t(seconds)),
            as_of: true,
            include_superseded,
        }
    }

    #[test]
    fn valid_from_inclusive_until_exclusive() {
        let berlin = Validity {
            from: Some(t(10)),
            until: Some(t(20)),
        };
        assert!(!at(9, false).admits(&berlin));
        assert!(at(10, false).admits(&berlin));
        assert!(at(19, false).admits(&berlin));
        assert!(!at(20, false).admits(&berlin));
        assert!(at(20, true).admits(&berlin));
        assert!(!at(9, true).admits(&berlin), "not valid yet");
        assert!(ValidAt::default().admits(&berlin));
        assert!(at(0, false).admits(&Validity::default()), "since ever");
    }

    #[test]
    fn given_validity_is_checked() {
        let v = Validity::given("memories[0]", None, Some(t(5)), Some(t(1))).unwrap();
        assert_eq!((v.from, v.until), (Some(t(1)), Some(t(5))));
        let e = Validity::given("memories[1]", Some(t(5)), Some(t(5)), None).unwrap_err();
        assert_eq!(e.field, "memories[1].invalid_at");
        let bad = Timestamp {
            seconds: 0,
            nanos: -1,
        };
        let e = Validity::given("memories[2]", Some(bad), None, None).unwrap_err();
        assert_eq!(e.field, "memories[2].valid_from");
    }

    #[test]
    fn closing_before_the_start_closes_at_the_start() {
        let v = Validity::from(Some(t(10)));
        assert_eq!(v.closed_at(t(15)).until, Some(t(15)));
        assert_eq!(v.closed_at(t(5)).until, Some(t(10)));
    }
}
