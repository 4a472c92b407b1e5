//! Event streams in the embedded store (see `store::streams`): `streams` holds each stream with buffered
//! events (their ids in the order they came), `stream_events` every event a stream was given,
//! by id. The store's transactions read and write keys, not ranges, so a handoff reads the buffered events by the ids of
//! the stream's record; it rewrites them without their content, queues the job and removes
//! the stream's record in one transaction over the four trees.

use std::collections::HashSet;

use adk_common::{
    keys::{Key, KeyReader},
    kv::{TransactionError, Transactional, TxTree},
};
use adk_proto::session::v1::Event;
use prost::Message;

use super::{
    super::{
        streams::{StreamEventRecord, StreamRecord},
        Appended, Buffered, JobRecord, Result, Scope, StoreError, StreamKey,
    },
    generation::{aborted, queue_key},
    records::{decode, scope_key},
    EmbeddedMemoryStore,
};

type Abort = TransactionError<StoreError>;

/// `streams`, `stream_events`, `jobs` and `job_queue` in a transaction.
type Trees<'t> = (TxTree<'t>, TxTree<'t>, TxTree<'t>, TxTree<'t>);

/// A stream's key in `streams`; with an event id, the event's in `stream_events`.
fn stream_key(stream: StreamKey<'_>) -> Key {
    Key::new()
        .str(stream.scope.app_name)
        .str(stream.scope.user_id)
        .str(stream.stream_id)
}

fn decoded<T: Message + Default>(bytes: &[u8], what: &str) -> std::result::Result<T, Abort> {
    T::decode(bytes).map_err(|e| Abort::Abort(StoreError::corrupt(format!("{what}: {e}"))))
}

/// Hands the buffered events of the stream keyed `key` (its record `record`) to `job` and
/// queues it, in the caller's transaction.
fn hand_off(
    (streams, events, jobs, queue): &Trees,
    key: &Key,
    record: &StreamRecord,
    mut job: JobRecord,
) -> std::result::Result<JobRecord, Abort> {
    for id in &record.buffered {
        let event_key = key.clone().str(id);
        let Some(bytes) = events.get(event_key.as_bytes())? else {
            return Err(Abort::Abort(StoreError::corrupt(format!(
                "stream event {id}: buffered but not stored"
            ))));
        };
        let stored: StreamEventRecord = decoded(&bytes, "stream event")?;
        job.events.extend(stored.event);
        let handed = StreamEventRecord {
            event: None,
            job_id: job.id.clone(),
        };
        events.insert(event_key.as_bytes(), handed.encode_to_vec())?;
    }
    jobs.insert(job.id.as_bytes(), job.encode_to_vec())?;
    queue.insert(queue_key(&job).as_bytes(), Vec::new())?;
    streams.remove(key.as_bytes())?;
    Ok(job)
}

impl EmbeddedMemoryStore {
    pub(super) fn append_stream_now(
        &self,
        stream: StreamKey<'_>,
        new: &[Event],
        now_ms: i64,
        trigger: usize,
        job: &JobRecord,
    ) -> Result<Appended> {
        let key = stream_key(stream);
        let trees = (
            &self.streams,
            &self.stream_events,
            &self.jobs,
            &self.job_queue,
        );
        trees
            .transaction(|trees| {
                let (streams, events, _, _) = trees;
                let mut record: StreamRecord = match streams.get(key.as_bytes())? {
                    Some(bytes) => decoded(&bytes, "stream")?,
                    None => StreamRecord::default(),
                };
                let mut appended = 0u32;
                let mut seen = HashSet::new();
                for event in new {
                    let event_key = key.clone().str(&event.id);
                    if !seen.insert(event.id.as_str())
                        || events.get(event_key.as_bytes())?.is_some()
                    {
                        continue;
                    }
                    let buffered = StreamEventRecord {
                        event: Some(event.clone()),
                        job_id: String::new(),
                    };
                    events.insert(event_key.as_bytes(), buffered.encode_to_vec())?;
                    record.buffered.push(event.id.clone());
                    appended += 1;
                }
                if appended == 0 {
                    return Ok(Appended {
                        appended,
                        buffered: count(&record),
                        job: None,
                    });
                }
                record.last_ms = now_ms;
                if record.buffered.len() >= trigger {
                    let job = hand_off(trees, &key, &record, job.clone())?;
                    return Ok(Appended {
                        appended,
                        buffered: 0,
                        job: Some(job),
                    });
                }
                streams.insert(key.as_bytes(), record.encode_to_vec())?;
                Ok(Appended {
                    appended,
                    buffered: count(&record),
                    job: None,
                })
            })
            .map_err(aborted)
    }

    pub(super) fn flush_stream_now(
        &self,
        stream: StreamKey<'_>,
        job: &JobRecord,
        quiet_since: Option<i64>,
    ) -> Result<Option<JobRecord>> {
        let key = stream_key(stream);
        let trees = (
            &self.streams,
            &self.stream_events,
            &self.jobs,
            &self.job_queue,
        );
        trees
            .transaction(|trees| {
                let Some(bytes) = trees.0.get(key.as_bytes())? else {
                    return Ok(None);
                };
                let record: StreamRecord = decoded(&bytes, "stream")?;
                if record.buffered.is_empty() || quiet_since.is_some_and(|at| record.last_ms > at) {
                    return Ok(None);
                }
                hand_off(trees, &key, &record, job.clone()).map(Some)
            })
            .map_err(aborted)
    }

    pub(super) fn buffered_streams_now(&self) -> Result<Vec<Buffered>> {
        self.streams_under(&Key::new())
    }

    pub(super) fn scope_streams_now(&self, scope: Scope<'_>) -> Result<Vec<Buffered>> {
        self.streams_under(&scope_key(scope))
    }

    /// The streams with buffered events whose keys start with `prefix`, in key order.
    fn streams_under(&self, prefix: &Key) -> Result<Vec<Buffered>> {
        let mut out = Vec::new();
        for kv in self.streams.scan_prefix(prefix) {
            let (key, value) = kv?;
            let mut reader = KeyReader::new(&key);
            let (Some(app_name), Some(user_id), Some(stream_id)) =
                (reader.str(), reader.str(), reader.str())
            else {
                return Err(StoreError::corrupt("stream key"));
            };
            let record: StreamRecord = decode(&value, "stream")?;
            out.push(Buffered {
                app_name,
                user_id,
                stream_id,
                events: count(&record),
                last_ms: record.last_ms,
            });
        }
        Ok(out)
    }

    /// Removes the streams of the scope keyed `scope`: their buffered events and the ids they
    /// remember. Its own transaction over the two trees, which the caller runs before clearing
    /// the scope's memories and durable with them: a process killed between the two leaves
    /// the memories (the caller's retry deletes them), never a buffer that would generate them
    /// again.
    pub(super) fn clear_streams_now(&self, scope: &Key) -> Result<()> {
        let mut streams = Vec::new();
        for key in self.streams.scan_prefix(scope).keys() {
            let key = key?;
            let mut reader = KeyReader::new(&key);
            let (Some(_), Some(_), Some(stream_id)) = (reader.str(), reader.str(), reader.str())
            else {
                return Err(StoreError::corrupt("stream key"));
            };
            streams.push(scope.clone().str(&stream_id));
        }
        let events = (self.stream_events.scan_prefix(scope).keys())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if streams.is_empty() && events.is_empty() {
            return Ok(());
        }
        (&self.streams, &self.stream_events)
            .transaction(|(streams_tx, events_tx)| {
                for key in &streams {
                    // Read again here: what was appended since the scan is in the record now.
                    let Some(bytes) = streams_tx.get(key.as_bytes())? else {
                        continue;
                    };
                    let record: StreamRecord = decoded(&bytes, "stream")?;
                    for id in &record.buffered {
                        events_tx.remove(key.clone().str(id).as_bytes())?;
                    }
                    streams_tx.remove(key.as_bytes())?;
                }
                for key in &events {
                    events_tx.remove(key)?;
                }
                Ok(())
            })
            .map_err(aborted)
    }

    /// The `stream_events` keys of the events a pruned job took from its stream, to remove
    /// with it.
    pub(super) fn handed_off_keys(job: &JobRecord) -> Vec<Key> {
        if job.stream_id.is_empty() {
            return Vec::new();
        }
        let stream = Key::new()
            .str(&job.app_name)
            .str(&job.user_id)
            .str(&job.stream_id);
        job.events
            .iter()
            .map(|event| stream.clone().str(&event.id))
            .collect()
    }

    /// Removes, in the caller's transaction, the event keyed `key` if it was handed to
    /// `job_id`: a user's streams deleted since (`DeleteMemory` of all) may have been given the
    /// same id again.
    pub(super) fn remove_handed_off(
        events: &TxTree<'_>,
        key: &[u8],
        job_id: &str,
    ) -> std::result::Result<(), Abort> {
        if let Some(bytes) = events.get(key)? {
            let stored: StreamEventRecord = decoded(&bytes, "stream event")?;
            if stored.job_id == job_id {
                events.remove(key)?;
            }
        }
        Ok(())
    }
}

fn count(record: &StreamRecord) -> u32 {
    u32::try_from(record.buffered.len()).unwrap_or(u32::MAX)
}
