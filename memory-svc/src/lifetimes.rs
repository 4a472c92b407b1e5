//! Default lifetimes of memories, per app and per the way a memory was written
//! (`--memory-ttl APP:ACTION=DURATION`, repeated or comma-separated): `created` for entries
//! written by `AddMemory`, `generated` for memories generation adds, `updated` for those it
//! rewrites. `APP` is an app name or `*` for every app without a rule of its own for that
//! action. A generation request's own `ttl` wins over both generation defaults. A memory past
//! its lifetime is neither found nor listed, and the background sweep removes it.

use std::{fmt, str::FromStr, time::Duration};

/// How a memory was written, as `--memory-ttl` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Written by `AddMemory`.
    Created,
    /// Rewritten by generation (a consolidation that updated it).
    Updated,
    /// Added by generation.
    Generated,
}

impl Action {
    const ALL: [(Self, &'static str); 3] = [
        (Self::Created, "created"),
        (Self::Updated, "updated"),
        (Self::Generated, "generated"),
    ];
}

/// The app a rule of every app names.
const EVERY_APP: &str = "*";

/// One `--memory-ttl` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryTtl {
    /// An app name, or `*`.
    pub app: String,
    pub action: Action,
    pub ttl: Duration,
}

impl FromStr for MemoryTtl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || format!("{s:?}: expected APP:ACTION=DURATION (e.g. travel:created=30d)");
        let (rule, duration) = s.split_once('=').ok_or_else(syntax)?;
        let (app, action) = rule.rsplit_once(':').ok_or_else(syntax)?;
        if app.is_empty() {
            return Err(format!("{s:?}: the app is empty (`*` names every app)"));
        }
        let action = Action::ALL
            .iter()
            .find(|(_, name)| *name == action)
            .map(|(action, _)| *action)
            .ok_or_else(|| {
                format!("{s:?}: the action {action:?} is not created, updated or generated")
            })?;
        let ttl = humantime::parse_duration(duration)
            .map_err(|e| format!("{s:?}: the duration {duration:?}: {e}"))?;
        if ttl.is_zero() {
            return Err(format!("{s:?}: the duration must be longer than 0"));
        }
        Ok(Self {
            app: app.to_owned(),
            action,
            ttl,
        })
    }
}

impl fmt::Display for MemoryTtl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = Action::ALL
            .iter()
            .find(|(action, _)| *action == self.action)
            .map_or("", |(_, name)| name);
        write!(
            f,
            "{}:{action}={}",
            self.app,
            humantime::format_duration(self.ttl)
        )
    }
}

/// Every `--memory-ttl` rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifetimes {
    rules: Vec<MemoryTtl>,
}

impl Lifetimes {
    pub fn new(rules: Vec<MemoryTtl>) -> Self {
        Self { rules }
    }

    /// Whether some memories get a lifetime.
    pub fn any(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The lifetime of a memory of `app` written by `action`: the app's own rule, else the
    /// rule of every app; of several rules for one, the last.
    pub fn of(&self, app: &str, action: Action) -> Option<Duration> {
        let last = |name: &str| {
            self.rules
                .iter()
                .rev()
                .find(|r| r.action == action && r.app == name)
                .map(|r| r.ttl)
        };
        last(app).or_else(|| last(EVERY_APP))
    }

    /// When a memory of `app` written by `action` at `now_ms` expires, if it does.
    pub fn expiry(&self, app: &str, action: Action, now_ms: i64) -> Option<i64> {
        self.of(app, action)
            .map(|ttl| now_ms.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_name_what_is_wrong() {
        let rule: MemoryTtl = "travel:created=30d".parse().unwrap();
        assert_eq!(
            rule,
            MemoryTtl {
                app: "travel".into(),
                action: Action::Created,
                ttl: Duration::from_secs(30 * 86_400),
            }
        );
        assert_eq!(rule.to_string(), "travel:created=30days");
        let every: MemoryTtl = "*:generated=1h 30m".parse().unwrap();
        assert_eq!(
            (every.app.as_str(), every.ttl),
            ("*", Duration::from_secs(5400))
        );
        for (bad, says) in [
            ("travel=30d", "APP:ACTION=DURATION"),
            ("travel:created", "APP:ACTION=DURATION"),
            (":created=1d", "the app is empty"),
            ("travel:deleted=1d", "not created, updated or generated"),
            ("travel:created=soon", "the duration"),
            ("travel:created=0s", "longer than 0"),
        ] {
            let err = bad.parse::<MemoryTtl>().unwrap_err();
            assert!(err.contains(says) && err.contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn an_apps_own_rule_wins_over_every_apps_and_the_last_over_earlier_ones() {
        let rules = [
            "*:created=1h",
            "travel:created=2h",
            "travel:created=3h",
            "*:updated=4h",
        ]
        .map(|r| r.parse().unwrap());
        let lifetimes = Lifetimes::new(rules.to_vec());
        let hours = |h: u64| Some(Duration::from_secs(h * 3600));
        assert_eq!(lifetimes.of("travel", Action::Created), hours(3));
        assert_eq!(lifetimes.of("shop", Action::Created), hours(1));
        assert_eq!(lifetimes.of("travel", Action::Updated), hours(4));
        assert_eq!(lifetimes.of("travel", Action::Generated), None);
        assert_eq!(
            lifetimes.expiry("shop", Action::Created, 1000),
            Some(3_601_000)
        );
        assert!(!Lifetimes::default().any());
    }
}
