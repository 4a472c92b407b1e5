//! The embedded store: sessions in sled.
//!
//! # Layout
//! Keys are [`adk_common::keys::Key`]s, so no identifier can alias another and prefix scans
//! stay inside one app, user or session.
//!
//! | tree            | key                                  | value                        |
//! |-----------------|--------------------------------------|------------------------------|
//! | `sessions`      | app, user, session                   | [`SessionRecord`], own state |
//! | `events`        | app, user, session, sequence (u64)   | encoded `Event`              |
//! | `event_ids`     | app, user, session, event id         | sequence (u64)               |
//! | `app_state`     | app, state key                       | JSON value text              |
//! | `user_state`    | app, user, state key                 | JSON value text              |
//! | `by_time`       | app, last_update_time, user, session | (empty): ListSessions index  |
//! | `by_user_time`  | app, user, last_update_time, session | (empty): ListSessions index  |
//! | `by_expiry`     | expire_time, app, user, session      | (empty): TTL sweeper index   |
//! | `changes`       | app, position (u64)                  | [`ChangeRecord`]: WatchEvents |
//! | `change_heads`  | app                                  | latest position (u64)        |
//!
//! A session's own state (keys without a scope prefix) lives in its record, which every append
//! rewrites anyway: a session is read with one key, a user's listing with one scan. Format 1
//! kept it in a `session_state` tree, a key per state key; [`SledSessionStore::from_db`] moves it.
//!
//! Every write is one sled transaction over the trees it touches, followed by a group-commit
//! flush, so it is atomic and durable before the caller hears of it. Appends that arrive
//! together share one transaction ([`appender`]), each still accepted or rejected on its own.

mod appender;
mod keys;
mod migrate;
mod records;
#[cfg(test)]
mod tests;

use std::{
    collections::{hash_map::Entry as Slot, BTreeMap, HashMap},
    ops::Bound,
    path::Path,
};

use adk_common::{
    durability::{GroupCommit, SyncMode},
    keys::{prefix_end, Key, KeyReader},
    snapshot::SnapshotError,
    snapshot::Snapshotter,
    snapshot::WriteGate,
};
use adk_proto::session::v1::Session;
use metrics::gauge;
use prost::Message;
use prost_types::Timestamp;
use sled::{
    transaction::{
        ConflictableTransactionError, TransactionError, TransactionalTree,
        UnabortableTransactionError,
    },
    Transactional, Tree,
};
use tokio::sync::{mpsc, oneshot, RwLockReadGuard};

use self::{
    keys::{
        app_prefix, by_expiry_key, by_time_key, by_user_time_key, event_key, session_key,
        user_prefix, user_time_order,
    },
    migrate::move_state_into_records,
    records::{
        change_position, decode_record, decode_u64, encoded_event, scan_entries, scan_keys,
        session_of, ChangeRecord, SessionRecord,
    },
};
use super::{
    decode_event, not_found,
    token::{self, SessionListing, SessionPlace},
    Append, Appended, Change, Changes, EncodedEvent, EventWindow, NewSession, Page, SessionKey,
    SessionOrder, SessionPage, SessionQuery, SessionStore, StoredSession,
};
use crate::{
    error::{Result, SessionError},
    state::{self, Entry},
    time::{self, now},
};

/// What a deletion transaction found.
enum Removal {
    Removed,
    AlreadyGone,
    /// An append or a re-creation got in first; read the session again.
    Changed,
}

/// The version of the layout below: raise it with any change a binary of the previous
/// version would misread (see [`adk_common::versions`]). Format 2 moved each session's own
/// state into its record.
const FORMAT: u32 = 2;

/// Session store on a sled database.
#[derive(Debug, Clone)]
pub struct SledSessionStore {
    db: sled::Db,
    sessions: Tree,
    events: Tree,
    event_ids: Tree,
    app_state: Tree,
    user_state: Tree,
    by_time: Tree,
    by_user_time: Tree,
    by_expiry: Tree,
    changes: Tree,
    change_heads: Tree,
    commit: GroupCommit,
    gate: WriteGate,
    /// Appends go through the batching task (see [`appender`]).
    appends: mpsc::UnboundedSender<appender::Request>,
}

impl SledSessionStore {
    /// Uses the session trees of an open database (see [`adk_common::sled::cache::SledCache::open`]).
    /// Must be called inside a tokio runtime.
    pub fn from_db(db: sled::Db, sync: SyncMode) -> Result<Self> {
        adk_common::sled::open(&db, "session store", FORMAT)?;
        let trees = appender::AppendTrees {
            sessions: db.open_tree("sessions")?,
            events: db.open_tree("events")?,
            event_ids: db.open_tree("event_ids")?,
            app_state: db.open_tree("app_state")?,
            user_state: db.open_tree("user_state")?,
            by_time: db.open_tree("by_time")?,
            by_user_time: db.open_tree("by_user_time")?,
            changes: db.open_tree("changes")?,
            change_heads: db.open_tree("change_heads")?,
        };
        let (sessions, events) = (trees.sessions.clone(), trees.events.clone());
        move_state_into_records(&db, &trees.sessions)?;
        let commit = GroupCommit::start(db.clone(), sync);
        // Counted once at startup (a scan); writes keep the gauges current from then on. Added
        // rather than set, so stores sharing a process (tests) each count their own.
        gauge!("store_sessions").increment(sessions.len() as f64);
        gauge!("store_events").increment(events.len() as f64);
        Ok(Self {
            sessions,
            events,
            event_ids: trees.event_ids.clone(),
            app_state: trees.app_state.clone(),
            user_state: trees.user_state.clone(),
            by_time: trees.by_time.clone(),
            by_user_time: trees.by_user_time.clone(),
            by_expiry: db.open_tree("by_expiry")?,
            changes: trees.changes.clone(),
            change_heads: trees.change_heads.clone(),
            commit: commit.clone(),
            gate: WriteGate::default(),
            appends: appender::start(trees, commit).map_err(sled::Error::Io)?,
            db,
        })
    }

    /// Publishes the database's size on disk as a gauge (read at each metrics scrape).
    pub fn record_size(&self) {
        if let Ok(bytes) = self.db.size_on_disk() {
            gauge!("store_size_bytes", "service" => "session-svc").set(bytes as f64);
        }
    }

    /// Refuses writes once the disk has failed; otherwise holds writers' share of the gate.
    async fn begin_write(&self) -> Result<RwLockReadGuard<'_, ()>> {
        self.commit.check_writable()?;
        Ok(self.gate.writing().await)
    }

    /// Converts a failed write, recording an I/O error (a full disk, say) as a disk failure
    /// first: once converted, the error no longer says it came from the disk.
    fn write_failed(&self, e: sled::Error) -> SessionError {
        if let sled::Error::Io(io) = &e {
            self.commit.fail(&io.to_string());
        }
        e.into()
    }

    /// The outcome of a write transaction, its storage failure converted by
    /// [`Self::write_failed`].
    fn tx_result<T>(&self, r: std::result::Result<T, TransactionError<SessionError>>) -> Result<T> {
        r.map_err(|e| match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => self.write_failed(e),
        })
    }

    /// Watches for a disk failure (the health service turns NOT_SERVING on one).
    pub fn failures(&self) -> tokio::sync::watch::Receiver<Option<std::sync::Arc<str>>> {
        self.commit.failures()
    }

    /// Stops taking appends, lets the batch in hand finish, stops the group-commit flusher, and
    /// flushes everything to disk (at shutdown). Afterwards no task or thread of the store
    /// holds the database.
    pub async fn close(&self) -> Result<()> {
        let (done, stopped) = oneshot::channel();
        // Already stopped (or gone) is fine: either way no batch is running.
        if self.appends.send(appender::Request::Stop(done)).is_ok() {
            let _ = stopped.await;
        }
        self.commit.stop().await;
        self.db.flush_async().await?;
        Ok(())
    }

    fn record(&self, key: &[u8]) -> Result<Option<SessionRecord>> {
        self.sessions
            .get(key)?
            .map(|bytes| decode_record(&bytes))
            .transpose()
    }

    fn live_record(&self, key: &[u8]) -> Result<Option<SessionRecord>> {
        let now = now();
        Ok(self.record(key)?.filter(|r| r.is_live(&now)))
    }

    /// A user's whole listing, read with one scan of their records and sorted into `order`.
    /// `None` if the user has more than `most` live sessions: a listing of several pages walks
    /// the index instead. A scan costs sled one tree descent, where the index walk costs one per
    /// listed session.
    fn whole_user_listing(
        &self,
        app_name: &str,
        user_id: &str,
        order: SessionOrder,
        most: usize,
    ) -> Result<Option<Vec<(SessionKey, SessionRecord)>>> {
        let prefix = Key::new().str(app_name).str(user_id);
        let now = now();
        let mut live = Vec::new();
        for kv in self.sessions.scan_prefix(prefix.as_bytes()) {
            let (k, v) = kv?;
            let record = decode_record(&v)?;
            // Expired sessions stay until swept; they are not shown.
            if !record.is_live(&now) {
                continue;
            }
            if live.len() == most {
                return Ok(None);
            }
            let session_id = KeyReader::new(&k[prefix.as_bytes().len()..])
                .str()
                .ok_or_else(|| SessionError::corrupt("unreadable session key"))?;
            let key = SessionKey {
                app_name: app_name.to_owned(),
                user_id: user_id.to_owned(),
                session_id,
            };
            live.push((key, record));
        }
        live.sort_unstable_by(|(a, ra), (b, rb)| {
            let ((a_s, a_n, a_id), (b_s, b_n, b_id)) =
                (user_time_order(a, ra), user_time_order(b, rb));
            match order {
                SessionOrder::OldestFirst => (a_s, a_n, a_id).cmp(&(b_s, b_n, b_id)),
                SessionOrder::NewestFirst => (b_s, b_n).cmp(&(a_s, a_n)).then(a_id.cmp(b_id)),
            }
        });
        Ok(Some(live))
    }

    /// The places of a listing's index in `order`, after `after` (from the start for `None`).
    fn places<'a>(
        index: &Tree,
        listing: SessionListing<'a>,
        order: SessionOrder,
        after: Option<&SessionPlace>,
    ) -> Box<dyn Iterator<Item = Result<SessionPlace>> + 'a> {
        let parse = move |kv: sled::Result<(sled::IVec, sled::IVec)>| {
            let (key, _) = kv?;
            listing
                .parse(&key)
                .ok_or_else(|| SessionError::corrupt("unreadable ListSessions index key"))
        };
        let prefix = listing.prefix();
        let start = Bound::Included(prefix.as_bytes().to_vec());
        let end = Bound::Excluded(prefix_end(prefix.as_bytes()));
        match (order, after) {
            (SessionOrder::OldestFirst, None) => {
                Box::new(index.range::<Vec<u8>, _>((start, end)).map(parse))
            }
            (SessionOrder::OldestFirst, Some(place)) => {
                let start = Bound::Excluded(listing.key(place).into_vec());
                Box::new(index.range::<Vec<u8>, _>((start, end)).map(parse))
            }
            (SessionOrder::NewestFirst, None) => Box::new(TiesAscending::new(
                index.range::<Vec<u8>, _>((start, end)).rev().map(parse),
            )),
            (SessionOrder::NewestFirst, Some(place)) => {
                // The rest of the place's ties, then the older sessions.
                let tie = listing.at(&place.last_update_time);
                let ties = index
                    .range::<Vec<u8>, _>((
                        Bound::Excluded(listing.key(place).into_vec()),
                        Bound::Excluded(prefix_end(tie.as_bytes())),
                    ))
                    .map(parse);
                let older = index
                    .range::<Vec<u8>, _>((start, Bound::Excluded(tie.into_vec())))
                    .rev()
                    .map(parse);
                Box::new(ties.chain(TiesAscending::new(older)))
            }
        }
    }

    /// The live sessions a listing's index holds (expired ones stay in it until swept).
    fn count_live(&self, index: &Tree, listing: SessionListing<'_>) -> Result<usize> {
        let now = now();
        let mut count = 0;
        for place in Self::places(index, listing, SessionOrder::OldestFirst, None) {
            let place = place?;
            let key = SessionKey {
                app_name: listing.app_name.to_owned(),
                user_id: place.user_id,
                session_id: place.session_id,
            };
            if self
                .record(session_key(&key).as_bytes())?
                .is_some_and(|r| r.is_live(&now))
            {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Builds a session without events from its record, reading the app and user state.
    fn assemble(&self, key: &SessionKey, record: &SessionRecord) -> Result<Session> {
        let app_state = scan_entries(&self.app_state, app_prefix(&key.app_name).as_bytes())?;
        let user_state = scan_entries(&self.user_state, user_prefix(key).as_bytes())?;
        Ok(session_of(key.clone(), record, &app_state, &user_state))
    }

    /// Reads events 1..=last_sequence as `window` selects, walking back from the end when only
    /// trailing events are wanted, so it reads only what it returns (plus one to stop).
    fn events_in_window(
        &self,
        skey: &Key,
        last: u64,
        window: EventWindow,
    ) -> Result<Vec<EncodedEvent>> {
        if window.num_recent == Some(0) || last == 0 {
            return Ok(Vec::new());
        }
        let range = self
            .events
            .range(event_key(skey, 1)..=event_key(skey, last));
        let read = |kv| encoded_event(kv, skey);
        if window.num_recent.is_none() && window.after.is_none() {
            return range.map(|kv| read(kv?)).collect();
        }
        let limit = window.num_recent.unwrap_or(usize::MAX);
        let mut events = Vec::new();
        for kv in range.rev() {
            if events.len() == limit {
                break;
            }
            let event = read(kv?)?;
            if let Some(after) = &window.after {
                if time::is_before(&event.timestamp()?, after) {
                    break;
                }
            }
            events.push(event);
        }
        events.reverse();
        Ok(events)
    }

    /// Removes a session if it still is the version `expected` describes; `false` if it
    /// changed meanwhile (the caller re-reads and tries again).
    fn delete_version(&self, key: &SessionKey, expected: &SessionRecord) -> Result<bool> {
        let skey = session_key(key);
        // Transactions cannot scan, so the keys are gathered first; the transaction then
        // checks that no append slipped in between (any append bumps last_sequence).
        let id_keys = scan_keys(&self.event_ids, skey.as_bytes())?;
        let trees = (
            &self.sessions,
            &self.events,
            &self.event_ids,
            &self.by_time,
            &self.by_user_time,
            &self.by_expiry,
        );
        let done = trees.transaction(
            |(sessions, events, event_ids, by_time, by_user_time, by_expiry)| {
                let Some(bytes) = sessions.get(skey.as_bytes())? else {
                    return Ok(Removal::AlreadyGone);
                };
                let current = decode_record(&bytes).map_err(ConflictableTransactionError::Abort)?;
                if current.incarnation != expected.incarnation
                    || current.last_sequence != expected.last_sequence
                {
                    return Ok(Removal::Changed);
                }
                for k in &id_keys {
                    event_ids.remove(k.as_slice())?;
                }
                for seq in 1..=current.last_sequence {
                    events.remove(event_key(&skey, seq))?;
                }
                let ts = current.last_update_time();
                by_time.remove(by_time_key(key, &ts))?;
                by_user_time.remove(by_user_time_key(key, &ts))?;
                if let Some(expire) = &current.expire_time {
                    by_expiry.remove(by_expiry_key(key, expire))?;
                }
                sessions.remove(skey.as_bytes())?;
                Ok(Removal::Removed)
            },
        );
        match self.tx_result(done)? {
            Removal::Removed => {
                gauge!("store_sessions").decrement(1.0);
                gauge!("store_events").decrement(expected.last_sequence as f64);
                Ok(true)
            }
            Removal::AlreadyGone => Ok(true),
            Removal::Changed => Ok(false),
        }
    }
}

impl SessionStore for SledSessionStore {
    async fn create(&self, new: NewSession) -> Result<Session> {
        let key = &new.key;
        let skey = session_key(key);
        // An expired session that the sweeper has not removed yet must not block its name.
        if let Some(old) = self.record(skey.as_bytes())? {
            if !old.is_live(&now()) {
                self.delete(key).await?;
            }
        }
        let writing = self.begin_write().await?;
        let mut record = SessionRecord {
            incarnation: self.db.generate_id()?,
            create_time: Some(new.create_time),
            last_update_time: Some(new.create_time),
            last_sequence: 0,
            expire_time: new.expire_time,
            state: BTreeMap::new(),
        };
        record.set_state(&new.state.session);
        let trees = (
            &self.sessions,
            &self.app_state,
            &self.user_state,
            &self.by_time,
            &self.by_user_time,
            &self.by_expiry,
        );
        let created = trees.transaction(
            |(sessions, app_state, user_state, by_time, by_user_time, by_expiry)| {
                if sessions.get(skey.as_bytes())?.is_some() {
                    return abort(SessionError::SessionExists {
                        session_id: key.session_id.clone(),
                    });
                }
                apply_shared_delta(key, &new.state, app_state, user_state)?;
                by_time.insert(by_time_key(key, &new.create_time), &[])?;
                by_user_time.insert(by_user_time_key(key, &new.create_time), &[])?;
                if let Some(expire) = &new.expire_time {
                    by_expiry.insert(by_expiry_key(key, expire), &[])?;
                }
                sessions.insert(skey.as_bytes(), record.encode_to_vec())?;
                Ok(())
            },
        );
        self.tx_result(created)?;
        drop(writing);
        gauge!("store_sessions").increment(1.0);
        self.commit.wait_durable().await?;
        self.assemble(key, &record)
    }

    async fn get_encoded(
        &self,
        key: &SessionKey,
        window: EventWindow,
    ) -> Result<Option<StoredSession>> {
        let skey = session_key(key);
        // Reads of several sled trees are not one snapshot: an append committing while the
        // state is read would show its delta without its event. Every append rewrites the
        // record in the same transaction, so the state read between two equal reads of the
        // record is the state after exactly `last_sequence` events. Stored events never change,
        // so they are read after that check, keeping the window an append can disturb small.
        loop {
            let Some(record) = self.live_record(skey.as_bytes())? else {
                return Ok(None);
            };
            let session = self.assemble(key, &record)?;
            if self.record(skey.as_bytes())?.as_ref() == Some(&record) {
                let events = self.events_in_window(&skey, record.last_sequence, window)?;
                return Ok(Some(StoredSession { session, events }));
            }
        }
    }

    async fn list(&self, query: SessionQuery<'_>) -> Result<SessionPage> {
        let SessionQuery {
            app_name,
            user_id,
            order,
            page_size,
            page_token,
            ..
        } = query;
        let app_state = scan_entries(&self.app_state, app_prefix(app_name).as_bytes())?;
        if let (Some(user), true) = (user_id, page_token.is_empty()) {
            let most = query.offset.saturating_add(page_size);
            if let Some(live) = self.whole_user_listing(app_name, user, order, most)? {
                let total = live.len();
                let user_state = scan_entries(
                    &self.user_state,
                    Key::new().str(app_name).str(user).as_bytes(),
                )?;
                let items = live
                    .into_iter()
                    .skip(query.offset)
                    .map(|(key, record)| session_of(key, &record, &app_state, &user_state))
                    .collect();
                return Ok(SessionPage {
                    page: Page {
                        items,
                        next_page_token: String::new(),
                    },
                    total_size: query.count.then_some(total),
                });
            }
        }
        let listing = SessionListing { app_name, user_id };
        let index = match user_id {
            Some(_) => &self.by_user_time,
            None => &self.by_time,
        };
        let after = listing.resume_after(page_token)?;
        let mut skip = if after.is_none() { query.offset } else { 0 };
        // Each listed user's state, read once per page (a user's listing reads one).
        let mut user_states: HashMap<String, Vec<Entry>> = HashMap::new();
        let now = now();
        let mut live = Vec::with_capacity(page_size);
        let mut next_page_token = String::new();
        let mut last_place = None;
        for place in Self::places(index, listing, order, after.as_ref()) {
            let place = place?;
            if live.len() == page_size {
                // The token names the last entry read, so the next page starts right after it.
                next_page_token = last_place
                    .as_ref()
                    .map(|place| listing.token(place))
                    .unwrap_or_default();
                break;
            }
            let key = SessionKey {
                app_name: app_name.to_owned(),
                user_id: place.user_id.clone(),
                session_id: place.session_id.clone(),
            };
            // Expired sessions stay in the index until swept; they are not shown.
            if let Some(record) = self
                .record(session_key(&key).as_bytes())?
                .filter(|r| r.is_live(&now))
            {
                if skip > 0 {
                    skip -= 1;
                } else {
                    live.push((key, record));
                }
            }
            last_place = Some(place);
        }
        let mut items = Vec::with_capacity(live.len());
        for (key, record) in live {
            let user_state = match user_states.entry(key.user_id.clone()) {
                Slot::Occupied(known) => known.into_mut(),
                Slot::Vacant(unread) => unread.insert(scan_entries(
                    &self.user_state,
                    user_prefix(&key).as_bytes(),
                )?),
            };
            items.push(session_of(key, &record, &app_state, user_state));
        }
        let total_size = if query.count {
            Some(self.count_live(index, listing)?)
        } else {
            None
        };
        Ok(SessionPage {
            page: Page {
                items,
                next_page_token,
            },
            total_size,
        })
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        let skey = session_key(key);
        let writing = self.begin_write().await?;
        while let Some(record) = self.record(skey.as_bytes())? {
            if self.delete_version(key, &record)? {
                break;
            }
        }
        drop(writing);
        self.commit.wait_durable().await?;
        Ok(())
    }

    async fn append(&self, key: &SessionKey, append: Append) -> Result<Appended> {
        let writing = self.begin_write().await?;
        let (reply, answer) = oneshot::channel();
        let pending = appender::Pending {
            key: key.clone(),
            append,
            reply,
        };
        // The batching task lives as long as any handle to this store, so neither side can be
        // gone while this call runs; if it somehow were, the append was not stored.
        let stopped = || sled::Error::ReportableBug("the append writer stopped".into());
        self.appends
            .send(appender::Request::Append(Box::new(pending)))
            .map_err(|_| stopped())?;
        let outcome = answer.await.map_err(|_| stopped())?;
        // The batch was flushed before it answered: `Ok` is durable.
        let appended = outcome.map_err(|failure| match failure {
            appender::BatchFailure::Storage(e) => self.write_failed(e),
            durability => durability.into(),
        })??;
        drop(writing);
        // A retry (change 0) stored nothing.
        if appended.change != 0 {
            gauge!("store_events").increment(1.0);
        }
        Ok(appended)
    }

    async fn list_events_encoded(
        &self,
        key: &SessionKey,
        after_sequence: u64,
        page_size: usize,
        page_token: &str,
    ) -> Result<Page<EncodedEvent>> {
        let skey = session_key(key);
        let Some(record) = self.live_record(skey.as_bytes())? else {
            return Err(not_found(key));
        };
        let after = after_sequence.max(token::events_resume_after(key, page_token)?);
        let mut items = Vec::new();
        let mut next_page_token = String::new();
        if let Some(first) = after.checked_add(1).filter(|f| *f <= record.last_sequence) {
            let range = self
                .events
                .range(event_key(&skey, first)..=event_key(&skey, record.last_sequence));
            for kv in range {
                if items.len() == page_size {
                    let last: &EncodedEvent = &items[page_size - 1];
                    next_page_token = token::events_token(key, last.sequence);
                    break;
                }
                items.push(encoded_event(kv?, &skey)?);
            }
        }
        Ok(Page {
            items,
            next_page_token,
        })
    }

    async fn changes(&self, app_name: &str, after: u64, limit: usize) -> Result<Changes> {
        let prefix = app_prefix(app_name);
        let head = self
            .change_heads
            .get(prefix.as_bytes())?
            .map(|h| decode_u64(&h))
            .transpose()?
            .unwrap_or(0);
        let mut oldest = head + 1;
        if let Some(kv) = self.changes.scan_prefix(prefix.as_bytes()).next() {
            oldest = change_position(&kv?.0, &prefix)?;
        }
        let mut items = Vec::with_capacity(limit.min(head.saturating_sub(after) as usize));
        if let Some(first) = after.checked_add(1) {
            let range = self
                .changes
                .range(prefix.clone().u64(first).into_vec()..prefix_end(prefix.as_bytes()));
            for kv in range.take(limit) {
                let (k, v) = kv?;
                let record = ChangeRecord::decode(&v[..])
                    .map_err(|e| SessionError::corrupt(format!("change record: {e}")))?;
                let key = SessionKey {
                    app_name: app_name.to_owned(),
                    user_id: record.user_id,
                    session_id: record.session_id,
                };
                let event = self
                    .events
                    .get(event_key(&session_key(&key), record.sequence))?
                    .map(|bytes| decode_event(&bytes))
                    .transpose()?;
                items.push(Change {
                    position: change_position(&k, &prefix)?,
                    user_id: key.user_id,
                    session_id: key.session_id,
                    event,
                });
            }
        }
        Ok(Changes {
            items,
            oldest,
            head,
            // One process commits in position order: whatever is committed is readable.
            unreadable: Vec::new(),
        })
    }

    async fn trim_changes(&self, before: Timestamp) -> Result<usize> {
        let writing = self.begin_write().await?;
        let mut trimmed = 0;
        let mut next_app = Vec::new();
        // Positions of an app follow commit order, so each app's expired changes are a prefix
        // of its range: trim from the front until the first one to keep, then skip to the next
        // app.
        while let Some(kv) = self.changes.range(next_app.clone()..).next() {
            let (first, _) = kv?;
            let app_name = KeyReader::new(&first)
                .str()
                .ok_or_else(|| SessionError::corrupt("unreadable change key"))?;
            let prefix = app_prefix(&app_name);
            for kv in self.changes.scan_prefix(prefix.as_bytes()) {
                let (k, v) = kv?;
                let record = ChangeRecord::decode(&v[..])
                    .map_err(|e| SessionError::corrupt(format!("change record: {e}")))?;
                let committed = record.commit_time.unwrap_or_default();
                if !time::is_before(&committed, &before) {
                    break;
                }
                self.changes.remove(k)?;
                trimmed += 1;
            }
            next_app = prefix_end(prefix.as_bytes());
        }
        drop(writing);
        if trimmed > 0 {
            self.commit.wait_durable().await?;
        }
        Ok(trimmed)
    }

    async fn sweep_expired(&self, now: Timestamp, limit: usize) -> Result<Vec<SessionKey>> {
        let end = Key::new().timestamp(&now);
        let writing = self.begin_write().await?;
        let mut swept = Vec::new();
        let mut stale_index = Vec::new();
        for kv in self.by_expiry.range(..end.as_bytes()).take(limit) {
            let (index_key, _) = kv?;
            let mut r = KeyReader::new(&index_key);
            let key = r.timestamp().and_then(|_| {
                Some(SessionKey {
                    app_name: r.str()?,
                    user_id: r.str()?,
                    session_id: r.str()?,
                })
            });
            let key = key.ok_or_else(|| SessionError::corrupt("unreadable expiry index key"))?;
            // Only a session that has expired goes; a newer one of the same name stays.
            match self.record(session_key(&key).as_bytes())? {
                Some(record) if !record.is_live(&now) => {
                    if self.delete_version(&key, &record)? {
                        swept.push(key);
                    }
                }
                _ => stale_index.push(index_key),
            }
        }
        for k in stale_index {
            self.by_expiry.remove(k)?;
        }
        drop(writing);
        if !swept.is_empty() {
            self.commit.wait_durable().await?;
        }
        Ok(swept)
    }

    async fn user_state(&self, app_name: &str, user_id: &str) -> Result<Vec<Entry>> {
        scan_entries(
            &self.user_state,
            Key::new().str(app_name).str(user_id).as_bytes(),
        )
    }

    async fn app_state(&self, app_name: &str) -> Result<Vec<Entry>> {
        scan_entries(&self.app_state, app_prefix(app_name).as_bytes())
    }

    async fn apps(&self) -> Result<Vec<String>> {
        // Session keys start with the app: read one key, then skip past that app's keys.
        let mut apps = Vec::new();
        let mut from = Vec::new();
        while let Some(entry) = self.sessions.range(from..).next() {
            let (key, _) = entry?;
            let app = KeyReader::new(&key)
                .str()
                .ok_or_else(|| SessionError::corrupt("unreadable session key"))?;
            from = prefix_end(app_prefix(&app).as_bytes());
            apps.push(app);
        }
        Ok(apps)
    }
}

impl Snapshotter for SledSessionStore {
    async fn snapshot(&self, path: &Path) -> Result<u64, SnapshotError> {
        self.gate.snapshot(&self.db, path).await
    }
}

// === transactions ===

type TxResult<T> = std::result::Result<T, ConflictableTransactionError<SessionError>>;

fn abort<T>(e: SessionError) -> TxResult<T> {
    Err(ConflictableTransactionError::Abort(e))
}

/// Writes the shared scopes of a split delta, a shallow replace per key (S0.5); the session's
/// own scope goes into its record ([`SessionRecord::set_state`]).
fn apply_shared_delta(
    key: &SessionKey,
    delta: &state::ScopedDelta,
    app_state: &TransactionalTree,
    user_state: &TransactionalTree,
) -> std::result::Result<(), UnabortableTransactionError> {
    for (name, value) in &delta.app {
        app_state.insert(
            app_prefix(&key.app_name).str(name).into_vec(),
            value.as_bytes(),
        )?;
    }
    for (name, value) in &delta.user {
        user_state.insert(user_prefix(key).str(name).into_vec(), value.as_bytes())?;
    }
    Ok(())
}

/// Index places read newest first (keys in descending order) with each run of places of the
/// same time turned around, so that ties keep the listing's ascending (user, session) order.
struct TiesAscending<I> {
    places: I,
    /// The rest of the current run, in descending order: popped from the end.
    run: Vec<SessionPlace>,
    /// The first place of the next run, read while finding where the current one ends.
    next: Option<SessionPlace>,
}

impl<I: Iterator<Item = Result<SessionPlace>>> TiesAscending<I> {
    fn new(places: I) -> Self {
        Self {
            places,
            run: Vec::new(),
            next: None,
        }
    }
}

impl<I: Iterator<Item = Result<SessionPlace>>> Iterator for TiesAscending<I> {
    type Item = Result<SessionPlace>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(place) = self.run.pop() {
            return Some(Ok(place));
        }
        let first = match self.next.take() {
            Some(place) => place,
            None => match self.places.next()? {
                Ok(place) => place,
                Err(e) => return Some(Err(e)),
            },
        };
        let time = first.last_update_time;
        self.run.push(first);
        for place in self.places.by_ref() {
            match place {
                Ok(place) if place.last_update_time == time => self.run.push(place),
                Ok(place) => {
                    self.next = Some(place);
                    break;
                }
                Err(e) => return Some(Err(e)),
            }
        }
        self.run.pop().map(Ok)
    }
}
