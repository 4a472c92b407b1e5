//! What the trees hold: the records of sessions and changes, stored values, and reading them
//! back.

use std::collections::BTreeMap;

use adk_common::keys::{Key, KeyReader};
use adk_proto::session::v1::Session;
use prost::{bytes::Bytes, Message};
use prost_types::Timestamp;
use sled::{IVec, Tree};

use crate::{
    error::{Result, SessionError},
    state::{self, Entry},
    store::{EncodedEvent, SessionKey},
    time,
};

/// What the `sessions` tree holds per session.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SessionRecord {
    /// Distinguishes a session from an earlier one of the same name that was deleted.
    #[prost(uint64, tag = "1")]
    pub(super) incarnation: u64,
    #[prost(message, optional, tag = "2")]
    pub(super) create_time: Option<Timestamp>,
    #[prost(message, optional, tag = "3")]
    pub(super) last_update_time: Option<Timestamp>,
    #[prost(uint64, tag = "4")]
    pub(super) last_sequence: u64,
    #[prost(message, optional, tag = "5")]
    pub(super) expire_time: Option<Timestamp>,
    /// The session's own state: JSON value text by key.
    #[prost(btree_map = "string, string", tag = "6")]
    pub(super) state: BTreeMap<String, String>,
}

impl SessionRecord {
    /// Applies the session scope of a delta: a shallow replace per key (S0.5).
    pub(super) fn set_state(&mut self, entries: &[Entry]) {
        for (name, value) in entries {
            self.state.insert(name.clone(), value.clone());
        }
    }

    pub(super) fn is_live(&self, now: &Timestamp) -> bool {
        time::is_live(self.expire_time.as_ref(), now)
    }

    pub(super) fn last_update_time(&self) -> Timestamp {
        self.last_update_time.unwrap_or_default()
    }
}

/// What the `changes` tree holds per committed event: where to find it.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ChangeRecord {
    #[prost(string, tag = "1")]
    pub(super) user_id: String,
    #[prost(string, tag = "2")]
    pub(super) session_id: String,
    #[prost(uint64, tag = "3")]
    pub(super) sequence: u64,
    #[prost(message, optional, tag = "4")]
    pub(super) commit_time: Option<Timestamp>,
}

pub(super) fn decode_record(bytes: &[u8]) -> Result<SessionRecord> {
    SessionRecord::decode(bytes).map_err(|e| SessionError::corrupt(format!("session record: {e}")))
}

pub(super) fn change_position(key: &[u8], app_prefix: &Key) -> Result<u64> {
    KeyReader::new(&key[app_prefix.as_bytes().len()..])
        .u64()
        .ok_or_else(|| SessionError::corrupt("unreadable change position"))
}

/// An entry of the `events` tree of the session `skey`; the value is shared with sled's
/// cache, not copied.
pub(super) fn encoded_event((key, value): (IVec, IVec), skey: &Key) -> Result<EncodedEvent> {
    let sequence = key
        .get(skey.as_bytes().len()..)
        .and_then(|rest| KeyReader::new(rest).u64())
        .ok_or_else(|| SessionError::corrupt("unreadable event key"))?;
    Ok(EncodedEvent {
        sequence,
        bytes: Bytes::from_owner(value),
    })
}

pub(super) fn decode_u64(bytes: &[u8]) -> Result<u64> {
    let array =
        <[u8; 8]>::try_from(bytes).map_err(|_| SessionError::corrupt("sequence is not 8 bytes"))?;
    Ok(u64::from_be_bytes(array))
}

/// A session without events, from its record (with its own state) and the shared scopes' state.
/// Takes the key's strings: a listing builds a thousand of these, and has the keys to give.
pub(super) fn session_of(
    key: SessionKey,
    record: &SessionRecord,
    app_state: &[Entry],
    user_state: &[Entry],
) -> Session {
    let own_state = record.state.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    Session {
        id: key.session_id,
        app_name: key.app_name,
        user_id: key.user_id,
        state: state::merge(own_state, app_state, user_state),
        events: Vec::new(),
        create_time: record.create_time,
        last_update_time: record.last_update_time,
        last_sequence: record.last_sequence,
        expire_time: record.expire_time,
    }
}

/// All entries under `prefix` whose key ends with one string component (a state key).
pub(super) fn scan_entries(tree: &Tree, prefix: &[u8]) -> Result<Vec<Entry>> {
    tree.scan_prefix(prefix)
        .map(|kv| {
            let (k, v) = kv?;
            let name = KeyReader::new(&k[prefix.len()..])
                .str()
                .ok_or_else(|| SessionError::corrupt("unreadable state key"))?;
            let value = state_value(&name, &v)?;
            Ok((name, value))
        })
        .collect()
}

/// A stored state value: JSON text.
pub(super) fn state_value(name: &str, value: &[u8]) -> Result<String> {
    String::from_utf8(value.to_vec())
        .map_err(|_| SessionError::corrupt(format!("state value of {name:?}")))
}

pub(super) fn scan_keys(tree: &Tree, prefix: &[u8]) -> Result<Vec<Vec<u8>>> {
    tree.scan_prefix(prefix)
        .keys()
        .map(|k| Ok(k?.to_vec()))
        .collect()
}
