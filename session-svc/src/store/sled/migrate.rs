//! Conversions of databases written in an older format, run at open.

use adk_common::keys::{Key, KeyReader};
use prost::Message;
use sled::{
    transaction::{ConflictableTransactionError, TransactionError},
    Transactional, Tree,
};

use super::records::{decode_record, state_value};
use crate::error::{Result, SessionError};

/// Format 1 kept each session's own state in a `session_state` tree, a key per state key
/// (app, user, session, state key). Moves it into the records, a session per transaction that
/// also removes what it moved, so a conversion cut short carries on at the next open; then
/// drops the tree. State left by a session that no longer exists is dropped with it.
pub(super) fn move_state_into_records(db: &sled::Db, sessions: &Tree) -> Result<()> {
    const OLD: &[u8] = b"session_state";
    if !db.tree_names().iter().any(|name| name == OLD) {
        return Ok(());
    }
    let old = db.open_tree(OLD)?;
    let mut moved = 0u64;
    while let Some(first) = old.iter().keys().next() {
        let first = first?;
        let mut reader = KeyReader::new(&first);
        let (Some(app_name), Some(user_id), Some(session_id)) =
            (reader.str(), reader.str(), reader.str())
        else {
            return Err(SessionError::corrupt("unreadable state key"));
        };
        let skey = Key::new().str(&app_name).str(&user_id).str(&session_id);
        let mut keys = Vec::new();
        let mut entries = Vec::new();
        for kv in old.scan_prefix(skey.as_bytes()) {
            let (k, v) = kv?;
            let name = KeyReader::new(&k[skey.as_bytes().len()..])
                .str()
                .ok_or_else(|| SessionError::corrupt("unreadable state key"))?;
            entries.push((name.clone(), state_value(&name, &v)?));
            keys.push(k);
        }
        let done = (sessions, &old).transaction(|(sessions, old)| {
            if let Some(bytes) = sessions.get(skey.as_bytes())? {
                let mut record =
                    decode_record(&bytes).map_err(ConflictableTransactionError::Abort)?;
                record.set_state(&entries);
                sessions.insert(skey.as_bytes(), record.encode_to_vec())?;
            }
            for k in &keys {
                old.remove(k)?;
            }
            Ok(())
        });
        done.map_err(|e| match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => e.into(),
        })?;
        moved += 1;
    }
    drop(old);
    db.drop_tree(OLD)?;
    db.flush()?;
    tracing::info!(
        sessions = moved,
        "moved each session's own state into its record (format 2)"
    );
    Ok(())
}
