//! Appends that arrive together commit in one sled transaction.
//!
//! sled 0.34 makes every transaction (and every `apply_batch`) seal its in-memory log buffer
//! twice and hand each sealed piece to its I/O threads as a separate `pwrite` +
//! `sync_file_range`, under a process-wide lock that also excludes flushes. With one
//! transaction per append, that was ~1.8 synchronous disk writes per append (7,000/s at
//! 3,900 appends/s, measured) plus the thread wake-ups that go with them, and the server could
//! not go faster than those writes followed one another. So appends queue here and one task
//! applies every append waiting at that moment, one after another, inside one transaction, then
//! flushes once: the fixed costs are paid once per batch. An append is answered only after that
//! flush (in `--sync sync`), so acknowledged still means on disk.
//!
//! Each append in a batch still succeeds or fails on its own. All its checks (session exists,
//! event id, expected sequence, readable records) come before its first write, so a rejected
//! append leaves nothing behind; later appends in the batch read the earlier ones' writes
//! (sled transactions read their own writes), exactly as if they had committed one by one.
//! Only a storage error fails the whole batch, and then every append in it gets that error;
//! none is acknowledged, because the batch commits atomically or not at all.

use std::{convert::Infallible, panic::AssertUnwindSafe};

use adk_common::durability::{FlushError, GroupCommit};
use prost::Message;
use prost_types::Timestamp;
use sled::{
    transaction::{TransactionError, TransactionalTree, UnabortableTransactionError},
    Transactional, Tree,
};
use tokio::sync::{mpsc, oneshot};

use super::{
    apply_shared_delta,
    keys::{app_prefix, by_time_key, by_user_time_key, event_key, session_key},
    records::{decode_record, decode_u64, ChangeRecord},
};
use crate::{
    error::{Result, SessionError},
    store::{admission, decode_event, not_found, Admission, Append, Appended, SessionKey},
    time::now,
};

/// At most this many appends share a transaction, so one batch's latency stays bounded.
const MAX_BATCH: usize = 256;

/// A batch stops growing at this many event bytes (a larger single event is a batch of one),
/// so a burst of big events does not build one huge transaction in memory.
const MAX_BATCH_BYTES: usize = 4 << 20;

/// What failed a whole batch: every append in it gets a copy, and none was acknowledged.
#[derive(Debug, Clone)]
pub(super) enum BatchFailure {
    /// The transaction failed (an I/O error is then recorded as a disk failure by the caller).
    Storage(sled::Error),
    /// The batch committed but the flush after it failed (already recorded as a disk failure).
    Durability(FlushError),
}

impl From<BatchFailure> for SessionError {
    fn from(failure: BatchFailure) -> Self {
        match failure {
            BatchFailure::Storage(e) => e.into(),
            BatchFailure::Durability(e) => e.into(),
        }
    }
}

/// What a batch sends back for one append: its own outcome, durable when `Ok`, or what failed
/// the whole batch.
pub(super) type Outcome = std::result::Result<Result<Appended>, BatchFailure>;

/// What the batching thread is asked to do.
pub(super) enum Request {
    Append(Box<Pending>),
    /// Finish the batch in hand, release the database and say so: a server shutting down
    /// lets the next one (in this process) open the same directory at once.
    Stop(oneshot::Sender<()>),
}

/// One append waiting for its batch.
pub(super) struct Pending {
    pub key: SessionKey,
    pub append: Append,
    pub reply: oneshot::Sender<Outcome>,
}

/// The trees an append writes.
pub(super) struct AppendTrees {
    pub sessions: Tree,
    pub events: Tree,
    pub event_ids: Tree,
    pub app_state: Tree,
    pub user_state: Tree,
    pub by_time: Tree,
    pub by_user_time: Tree,
    pub changes: Tree,
    pub change_heads: Tree,
}

/// Starts the batching thread; it ends on [`Request::Stop`] or when the returned sender (every
/// clone) is dropped.
pub(super) fn start(
    trees: AppendTrees,
    commit: GroupCommit,
) -> std::io::Result<mpsc::UnboundedSender<Request>> {
    let (tx, rx) = mpsc::unbounded_channel();
    // A thread of its own, because the transaction and the flush block: the async workers stay
    // free to serve while a batch commits, and the batch needs no hand-off to a blocking pool.
    std::thread::Builder::new()
        .name("session-appender".into())
        .spawn(move || run(trees, commit, rx))?;
    Ok(tx)
}

fn run(trees: AppendTrees, commit: GroupCommit, mut rx: mpsc::UnboundedReceiver<Request>) {
    let mut stop = None;
    while stop.is_none() {
        let first = match rx.blocking_recv() {
            Some(Request::Append(first)) => *first,
            Some(Request::Stop(done)) => {
                stop = Some(done);
                break;
            }
            None => break,
        };
        let mut bytes = first.append.event.encoded_len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(Request::Append(next)) => {
                    bytes += next.append.event.encoded_len();
                    batch.push(*next);
                }
                Ok(Request::Stop(done)) => {
                    stop = Some(done);
                    break;
                }
                Err(_) => break,
            }
        }
        let (replies, work): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|p| (p.reply, (p.key, p.append)))
            .unzip();
        // Flushing right here rather than through the group-commit task saves the hand-offs,
        // and nothing would be gained by overlapping the flush with the next batch's
        // transaction: sled makes its flushes and its transactions exclude each other. A panic
        // inside sled fails this batch, not every later one.
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let results = apply(&trees, &work).map_err(BatchFailure::Storage)?;
            commit
                .flush_blocking(work.len())
                .map_err(BatchFailure::Durability)?;
            Ok(results)
        }))
        .unwrap_or_else(|_| {
            Err(BatchFailure::Storage(sled::Error::ReportableBug(
                "the append batch panicked".into(),
            )))
        });
        match outcome {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    // A caller that went away (cancelled request) needs no answer.
                    let _ = reply.send(Ok(result));
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
    // The trees and the group commit (which holds the database too) go first: once the caller
    // hears back, this thread holds no database handle, so the directory can be opened again.
    drop(trees);
    drop(commit);
    if let Some(done) = stop {
        let _ = done.send(());
    }
}

/// Applies `work` in order in one transaction; one result per append.
fn apply(
    trees: &AppendTrees,
    work: &[(SessionKey, Append)],
) -> std::result::Result<Vec<Result<Appended>>, sled::Error> {
    let all = (
        &trees.sessions,
        &trees.events,
        &trees.event_ids,
        &trees.app_state,
        &trees.user_state,
        &trees.by_time,
        &trees.by_user_time,
        &trees.changes,
        &trees.change_heads,
    );
    let now = now();
    let done = all.transaction(|view| {
        let mut results = Vec::with_capacity(work.len());
        for (key, append) in work {
            results.push(append_one(view, key, append, &now)?);
        }
        Ok::<_, sled::transaction::ConflictableTransactionError<Infallible>>(results)
    });
    done.map_err(|e| match e {
        TransactionError::Storage(e) => e,
        TransactionError::Abort(never) => match never {},
    })
}

type View = (
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
);

/// One append inside the batch's transaction. The outer error (storage) fails the batch; the
/// inner one rejects this append only, and is returned before anything is written.
fn append_one(
    view: &View,
    key: &SessionKey,
    append: &Append,
    now: &Timestamp,
) -> std::result::Result<Result<Appended>, UnabortableTransactionError> {
    let (
        sessions,
        events,
        event_ids,
        app_state,
        user_state,
        by_time,
        by_user_time,
        changes,
        change_heads,
    ) = view;
    let skey = session_key(key);
    let id_key = skey.clone().str(&append.event.id);
    let app_key = app_prefix(&key.app_name);

    // Checks first: nothing below may reject the append once something is written.
    let record = match sessions.get(skey.as_bytes())?.map(|b| decode_record(&b)) {
        Some(Ok(record)) if record.is_live(now) => record,
        Some(Err(e)) => return Ok(Err(e)),
        _ => return Ok(Err(not_found(key))),
    };
    let stored = match event_ids.get(id_key.as_bytes())? {
        None => None,
        Some(seq) => {
            let seq = match decode_u64(&seq) {
                Ok(seq) => seq,
                Err(e) => return Ok(Err(e)),
            };
            let found = events
                .get(event_key(&skey, seq))?
                .ok_or_else(|| SessionError::corrupt(format!("event {seq} is missing")))
                .and_then(|bytes| decode_event(&bytes));
            match found {
                Ok(event) => Some(event),
                Err(e) => return Ok(Err(e)),
            }
        }
    };
    let sequence = match admission(
        append,
        stored,
        record.last_sequence,
        record.last_update_time(),
    ) {
        Ok(Admission::Retry(appended)) => return Ok(Ok(*appended)),
        Ok(Admission::Write(sequence)) => sequence,
        Err(e) => return Ok(Err(e)),
    };
    // The head is read and bumped inside the transaction, so positions follow commit order
    // with no gaps.
    let change = match change_heads
        .get(app_key.as_bytes())?
        .map(|h| decode_u64(&h))
    {
        Some(Ok(head)) => head + 1,
        Some(Err(e)) => return Ok(Err(e)),
        None => 1,
    };

    let mut event = append.event.clone();
    event.sequence = sequence;
    let timestamp = event.timestamp.unwrap_or_default();
    events.insert(event_key(&skey, sequence), event.encode_to_vec())?;
    event_ids.insert(id_key.as_bytes(), &sequence.to_be_bytes())?;
    apply_shared_delta(key, &append.delta, app_state, user_state)?;
    let previous = record.last_update_time();
    by_time.remove(by_time_key(key, &previous))?;
    by_user_time.remove(by_user_time_key(key, &previous))?;
    by_time.insert(by_time_key(key, &timestamp), &[])?;
    by_user_time.insert(by_user_time_key(key, &timestamp), &[])?;
    let mut record = record;
    record.set_state(&append.delta.session);
    record.last_sequence = sequence;
    record.last_update_time = Some(timestamp);
    sessions.insert(skey.as_bytes(), record.encode_to_vec())?;
    change_heads.insert(app_key.as_bytes(), &change.to_be_bytes())?;
    let change_record = ChangeRecord {
        user_id: key.user_id.clone(),
        session_id: key.session_id.clone(),
        sequence,
        commit_time: Some(*now),
    };
    changes.insert(
        app_key.u64(change).into_vec(),
        change_record.encode_to_vec(),
    )?;
    Ok(Ok(Appended {
        event,
        last_sequence: sequence,
        last_update_time: timestamp,
        change,
    }))
}
