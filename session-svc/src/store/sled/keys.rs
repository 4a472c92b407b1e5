//! The keys of the store's trees (see the table in the store's module docs).

use adk_common::keys::Key;
use prost_types::Timestamp;

use super::records::SessionRecord;
use crate::store::{
    token::{SessionListing, SessionPlace},
    SessionKey,
};

pub(super) fn session_key(key: &SessionKey) -> Key {
    Key::new()
        .str(&key.app_name)
        .str(&key.user_id)
        .str(&key.session_id)
}

pub(super) fn app_prefix(app_name: &str) -> Key {
    Key::new().str(app_name)
}

pub(super) fn user_prefix(key: &SessionKey) -> Key {
    Key::new().str(&key.app_name).str(&key.user_id)
}

pub(super) fn event_key(skey: &Key, sequence: u64) -> Vec<u8> {
    skey.clone().u64(sequence).into_vec()
}

/// The key of the index of an app's sessions by time (the ListSessions order, see
/// [`crate::store::token`]).
pub(super) fn by_time_key(key: &SessionKey, ts: &Timestamp) -> Key {
    index_key(key, ts, None)
}

pub(super) fn by_expiry_key(key: &SessionKey, expire: &Timestamp) -> Key {
    Key::new()
        .timestamp(expire)
        .str(&key.app_name)
        .str(&key.user_id)
        .str(&key.session_id)
}

/// The key of the index of a user's sessions by time.
pub(super) fn by_user_time_key(key: &SessionKey, ts: &Timestamp) -> Key {
    index_key(key, ts, Some(&key.user_id))
}

pub(super) fn index_key(key: &SessionKey, ts: &Timestamp, user_id: Option<&str>) -> Key {
    let listing = SessionListing {
        app_name: &key.app_name,
        user_id,
    };
    listing.key(&SessionPlace {
        last_update_time: *ts,
        user_id: key.user_id.clone(),
        session_id: key.session_id.clone(),
    })
}

/// A session's place in the `by_user_time` index's order, without building its key: the key
/// holds the time (seconds, then nanos, as [`Key::timestamp`] writes them) and then the id,
/// each encoded so that bytes sort as the values do.
pub(super) fn user_time_order<'a>(
    key: &'a SessionKey,
    record: &SessionRecord,
) -> (i64, i32, &'a str) {
    let ts = record.last_update_time();
    (ts.seconds, ts.nanos.max(0), &key.session_id)
}
