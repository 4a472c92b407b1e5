//! Protobuf timestamps: the current time, and their order (`prost_types::Timestamp` has none).

use std::time::SystemTime;

use prost_types::Timestamp;

/// The current time.
pub fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

/// Whether `a` is strictly earlier than `b` (both normalized, as every stored time is).
pub fn is_before(a: &Timestamp, b: &Timestamp) -> bool {
    (a.seconds, a.nanos) < (b.seconds, b.nanos)
}

/// Whether a session expiring at `expire_time` (never, if `None`) is still live at `now`.
pub fn is_live(expire_time: Option<&Timestamp>, now: &Timestamp) -> bool {
    expire_time.is_none_or(|t| is_before(now, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(seconds: i64, nanos: i32) -> Timestamp {
        Timestamp { seconds, nanos }
    }

    #[test]
    fn order_is_seconds_then_nanos() {
        assert!(is_before(&ts(1, 999), &ts(2, 0)));
        assert!(is_before(&ts(2, 0), &ts(2, 1)));
        assert!(!is_before(&ts(2, 1), &ts(2, 1)));
        assert!(!is_before(&ts(3, 0), &ts(2, 5)));
    }

    #[test]
    fn a_session_is_live_strictly_before_its_expiry() {
        assert!(is_live(None, &ts(5, 0)));
        assert!(is_live(Some(&ts(5, 1)), &ts(5, 0)));
        assert!(!is_live(Some(&ts(5, 0)), &ts(5, 0)));
    }
}
