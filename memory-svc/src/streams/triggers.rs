//! When event streams are handed to generation, per app: the trigger count
//! (`--stream-trigger-events`) and the quiet time (`--stream-quiet`).

use std::{fmt, str::FromStr, time::Duration};

/// The most events a trigger count may be: the buffer a job takes at once.
pub const MAX_TRIGGER_EVENTS: u32 = 1000;

/// Events that trigger generation, for an app without a setting.
pub const DEFAULT_TRIGGER_EVENTS: u32 = 20;

/// The quiet time, for an app without a setting.
pub const DEFAULT_QUIET: Duration = Duration::from_secs(60);

/// The app a setting of every app names.
const EVERY_APP: &str = "*";

/// One `--stream-trigger-events` or `--stream-quiet` setting: `VALUE` for every app, or
/// `APP=VALUE` for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerApp<T> {
    /// An app name, or `*`.
    pub app: String,
    pub value: T,
}

impl<T: FromStr<Err = String>> FromStr for PerApp<T> {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (app, value) = match s.split_once('=') {
            Some(("", _)) => {
                return Err(format!(
                    "{s:?}: the app is empty (give VALUE for every app)"
                ))
            }
            Some((app, value)) => (app, value),
            None => (EVERY_APP, s),
        };
        Ok(Self {
            app: app.to_owned(),
            value: value.parse().map_err(|e| format!("{s:?}: {e}"))?,
        })
    }
}

impl<T: fmt::Display> fmt::Display for PerApp<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.app.as_str() {
            EVERY_APP => write!(f, "{}", self.value),
            app => write!(f, "{app}={}", self.value),
        }
    }
}

/// A trigger count: 1 to [`MAX_TRIGGER_EVENTS`] events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerEvents(pub u32);

impl FromStr for TriggerEvents {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<u32>() {
            Ok(n) if (1..=MAX_TRIGGER_EVENTS).contains(&n) => Ok(Self(n)),
            _ => Err(format!("the count must be 1 to {MAX_TRIGGER_EVENTS}")),
        }
    }
}

impl fmt::Display for TriggerEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A quiet time, longer than 0 (`90s`, `5m`, `500ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet(pub Duration);

impl FromStr for Quiet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match humantime::parse_duration(s) {
            Ok(d) if !d.is_zero() => Ok(Self(d)),
            Ok(_) => Err("the duration must be longer than 0".into()),
            Err(e) => Err(format!("the duration: {e} (e.g. 90s, 5m)")),
        }
    }
}

impl fmt::Display for Quiet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

/// When streams are handed to generation, per app.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Triggers {
    events: Vec<PerApp<TriggerEvents>>,
    quiet: Vec<PerApp<Quiet>>,
}

/// The last setting for `app`, else the last for every app.
fn of<T: Copy>(settings: &[PerApp<T>], app: &str) -> Option<T> {
    let last = |name: &str| settings.iter().rev().find(|s| s.app == name);
    last(app).or_else(|| last(EVERY_APP)).map(|s| s.value)
}

impl Triggers {
    pub fn new(events: Vec<PerApp<TriggerEvents>>, quiet: Vec<PerApp<Quiet>>) -> Self {
        Self { events, quiet }
    }

    /// The events that make `app`'s streams trigger: its setting, else every app's, else
    /// [`DEFAULT_TRIGGER_EVENTS`].
    pub fn events(&self, app: &str) -> usize {
        of(&self.events, app).map_or(DEFAULT_TRIGGER_EVENTS, |n| n.0) as usize
    }

    /// How long `app`'s streams wait for another event: its setting, else every app's, else
    /// [`DEFAULT_QUIET`].
    pub fn quiet(&self, app: &str) -> Duration {
        of(&self.quiet, app).map_or(DEFAULT_QUIET, |q| q.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_an_apps_own_wins() {
        let events = ["30", "travel=5", "shop=7", "travel=3"].map(|s| s.parse().unwrap());
        let quiet = ["2m", "travel=500ms"].map(|s| s.parse().unwrap());
        let triggers = Triggers::new(events.to_vec(), quiet.to_vec());
        assert_eq!(triggers.events("travel"), 3);
        assert_eq!(triggers.events("other"), 30);
        assert_eq!(triggers.quiet("travel"), Duration::from_millis(500));
        assert_eq!(triggers.quiet("shop"), Duration::from_secs(120));
        let only_travel = Triggers::new(vec![events[1].clone()], vec![]);
        assert_eq!(only_travel.events("shop"), DEFAULT_TRIGGER_EVENTS as usize);
        assert_eq!(only_travel.quiet("shop"), DEFAULT_QUIET);
        for (bad, says) in [
            ("0", "1 to 1000"),
            ("1001", "1 to 1000"),
            ("=5", "the app is empty"),
            ("travel=many", "1 to 1000"),
        ] {
            let err = bad.parse::<PerApp<TriggerEvents>>().unwrap_err();
            assert!(err.contains(says) && err.contains(bad), "{bad}: {err}");
        }
        for bad in ["0s", "soon", "travel="] {
            let err = bad.parse::<PerApp<Quiet>>().unwrap_err();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        let shown: PerApp<Quiet> = "travel=90s".parse().unwrap();
        assert_eq!(shown.to_string(), "travel=1m 30s");
    }
}
