//! The generation job queue, revisions and expiries in the embedded store (see `store::generation`). Jobs
//! are kept by id in `jobs`; the open ones are also keyed by due time in `job_queue`, so the
//! job due first is the first key. A claim or a finish moves a job's queue key and rewrites its
//! record in one transaction; a finish that ends the job keys it in `jobs_done` by the time it
//! ended, where pruning finds the jobs past the retention, oldest first.

use std::{collections::HashMap, convert::Infallible, ops::Bound};

use adk_common::{
    keys::{prefix_end, Key, KeyReader},
    kv::{TransactionError, Transactional},
};
use adk_proto::memory::v1::GenerationState;
use prost::Message;

use super::{
    super::{token, Expired, JobRecord, Result, Revision, RevisionRecord, Scope, StoreError},
    records::{decode, key_seq, scope_key},
    EmbeddedMemoryStore,
};

/// A job's key in `job_queue`.
pub(super) fn queue_key(job: &JobRecord) -> Key {
    Key::new()
        .u64(u64::try_from(job.due_ms).unwrap_or(0))
        .str(&job.id)
}

/// A finished job's key in `jobs_done`.
pub(super) fn done_key(job: &JobRecord) -> Key {
    Key::new()
        .u64(u64::try_from(job.update_ms).unwrap_or(0))
        .str(&job.id)
}

impl EmbeddedMemoryStore {
    /// Runs `work` as a write (see [`EmbeddedMemoryStore::write_changed`]) and waits until it is
    /// durable.
    pub(super) async fn durably<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.commit.check_writable()?;
        let writing = self.gate.writing_owned().await;
        let out = self
            .blocking(move |store| {
                let _writing = writing;
                work(store)
            })
            .await;
        self.commit.wait_durable().await?;
        out
    }

    pub(super) fn enqueue_now(&self, job: &JobRecord) -> Result<()> {
        let (jobs, queue) = (&self.jobs, &self.job_queue);
        (jobs, queue)
            .transaction(|(jobs, queue)| {
                jobs.insert(job.id.as_bytes(), job.encode_to_vec())?;
                queue.insert(queue_key(job).as_bytes(), Vec::new())?;
                Ok(())
            })
            .map_err(storage)
    }

    pub(super) fn claim_now(
        &self,
        id: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<JobRecord>> {
        let id = match id {
            Some(id) => id.to_owned(),
            None => {
                let Some(key) = self.job_queue.iter().keys().next() else {
                    return Ok(None);
                };
                let key = key?;
                let mut reader = KeyReader::new(&key);
                match (reader.u64(), reader.str()) {
                    (Some(due), Some(id)) if due <= u64::try_from(now_ms).unwrap_or(0) => id,
                    (Some(_), Some(_)) => return Ok(None),
                    _ => return Err(StoreError::corrupt("job queue key")),
                }
            }
        };
        let (jobs, queue) = (&self.jobs, &self.job_queue);
        (jobs, queue)
            .transaction(|(jobs, queue)| {
                let Some(bytes) = jobs.get(id.as_bytes())? else {
                    return Ok(None);
                };
                let mut job = JobRecord::decode(&*bytes).map_err(|e| {
                    TransactionError::Abort(StoreError::corrupt(format!("job: {e}")))
                })?;
                if !job.is_open() || job.due_ms > now_ms {
                    return Ok(None);
                }
                queue.remove(queue_key(&job).as_bytes())?;
                job.attempts += 1;
                job.state = GenerationState::Running as i32;
                job.update_ms = now_ms;
                job.due_ms = now_ms.saturating_add(lease_ms);
                queue.insert(queue_key(&job).as_bytes(), Vec::new())?;
                jobs.insert(id.as_bytes(), job.encode_to_vec())?;
                Ok(Some(job))
            })
            .map_err(aborted)
    }

    /// Ends the open jobs of `app`'s `user` (see [`JobRecord::ended_by_delete`]). The open jobs
    /// are the queue's, which holds only those.
    pub(super) fn end_jobs_now(&self, app: &str, user: &str) -> Result<()> {
        let mut ids = Vec::new();
        for key in self.job_queue.iter().keys() {
            let key = key?;
            let mut reader = KeyReader::new(&key);
            let (Some(_due), Some(id)) = (reader.u64(), reader.str()) else {
                return Err(StoreError::corrupt("job queue key"));
            };
            ids.push(id);
        }
        let mut ending = Vec::new();
        for id in ids {
            if let Some(bytes) = self.jobs.get(id.as_bytes())? {
                let job: JobRecord = decode(&bytes, "job")?;
                if job.app_name == app && job.user_id == user {
                    ending.push(id);
                }
            }
        }
        if ending.is_empty() {
            return Ok(());
        }
        let (jobs, queue, done) = (&self.jobs, &self.job_queue, &self.jobs_done);
        (jobs, queue, done)
            .transaction(|(jobs, queue, done)| {
                for id in &ending {
                    // Read again here: the job may have finished since the scan.
                    let Some(bytes) = jobs.get(id.as_bytes())? else {
                        continue;
                    };
                    let job = JobRecord::decode(&*bytes).map_err(|e| {
                        TransactionError::Abort(StoreError::corrupt(format!("job: {e}")))
                    })?;
                    if !job.is_open() {
                        continue;
                    }
                    queue.remove(queue_key(&job).as_bytes())?;
                    let ended = job.ended_by_delete();
                    done.insert(done_key(&ended).as_bytes(), Vec::new())?;
                    jobs.insert(id.as_bytes(), ended.encode_to_vec())?;
                }
                Ok(())
            })
            .map_err(aborted)
    }

    /// Fails unless the job `id` is open: its writes are refused once a delete ended it.
    pub(super) fn check_job_open(&self, id: &str) -> Result<()> {
        let open = match self.jobs.get(id.as_bytes())? {
            Some(bytes) => decode::<JobRecord>(&bytes, "job")?.is_open(),
            None => false,
        };
        if open {
            Ok(())
        } else {
            Err(StoreError::JobEnded(id.to_owned()))
        }
    }

    pub(super) fn finish_now(&self, job: &JobRecord) -> Result<bool> {
        let (jobs, queue, done) = (&self.jobs, &self.job_queue, &self.jobs_done);
        (jobs, queue, done)
            .transaction(|(jobs, queue, done)| {
                let Some(bytes) = jobs.get(job.id.as_bytes())? else {
                    return Ok(false);
                };
                let stored = JobRecord::decode(&*bytes).map_err(|e| {
                    TransactionError::Abort(StoreError::corrupt(format!("job: {e}")))
                })?;
                if stored.attempts != job.attempts || !stored.is_open() {
                    return Ok(false);
                }
                queue.remove(queue_key(&stored).as_bytes())?;
                if job.is_open() {
                    queue.insert(queue_key(job).as_bytes(), Vec::new())?;
                } else {
                    done.insert(done_key(job).as_bytes(), Vec::new())?;
                }
                jobs.insert(job.id.as_bytes(), job.encode_to_vec())?;
                Ok(true)
            })
            .map_err(aborted)
    }

    pub(super) fn job_now(
        &self,
        app_name: &str,
        user_id: &str,
        id: &str,
    ) -> Result<Option<JobRecord>> {
        let Some(bytes) = self.jobs.get(id.as_bytes())? else {
            return Ok(None);
        };
        let job: JobRecord = decode(&bytes, "job")?;
        Ok(Some(job).filter(|j| j.app_name == app_name && j.user_id == user_id))
    }

    pub(super) fn revisions_now(
        &self,
        scope: Scope<'_>,
        memory_id: Option<&str>,
        page_size: usize,
        after: Option<u64>,
    ) -> Result<(Vec<Revision>, String)> {
        let prefix = scope_key(scope);
        let start = match after {
            Some(seq) => Bound::Excluded(prefix.clone().u64(seq).into_vec()),
            None => Bound::Included(prefix.clone().into_vec()),
        };
        let end = Bound::Excluded(prefix_end(prefix.as_bytes()));
        let mut page = Vec::new();
        let mut last = None;
        for kv in self.revisions.range::<Vec<u8>>((start, end)) {
            let (key, value) = kv?;
            let revision: RevisionRecord = decode(&value, "revision")?;
            if memory_id.is_some_and(|id| id != revision.memory_id) {
                continue;
            }
            if page.len() == page_size.max(1) {
                // One more matches: there is a next page, from the last one returned.
                return Ok((
                    page,
                    last.map_or_else(String::new, |seq| token::encode(scope, seq)),
                ));
            }
            let seq = key_seq(&key, prefix.as_bytes().len())?;
            last = Some(seq);
            page.push(Revision {
                seq,
                record: revision,
            });
        }
        Ok((page, String::new()))
    }

    pub(super) fn revision_now(&self, scope: Scope<'_>, seq: u64) -> Result<Option<Revision>> {
        let key = scope_key(scope).u64(seq);
        self.revisions
            .get(key.as_bytes())?
            .map(|value| {
                Ok(Revision {
                    seq,
                    record: decode(&value, "revision")?,
                })
            })
            .transpose()
    }

    /// Reads the revisions scope by scope (a scope's keys are together, in the order they
    /// were recorded), and removes those of each scope recorded before `before_ms` that a later
    /// revision of their memory follows.
    pub(super) fn prune_revisions_now(&self, before_ms: i64, n: usize) -> Result<usize> {
        let mut pruned = 0;
        // The current scope's key prefix, and its revisions: key, memory id, time.
        let mut scope: Option<Vec<u8>> = None;
        let mut group: Vec<(Vec<u8>, String, i64)> = Vec::new();
        let mut iter = self.revisions.iter();
        loop {
            let next = iter.next().transpose()?;
            let prefix = match &next {
                Some((key, _)) => {
                    let mut reader = KeyReader::new(key);
                    let (Some(app_name), Some(user_id)) = (reader.str(), reader.str()) else {
                        return Err(StoreError::corrupt("revision key"));
                    };
                    let scope = Scope {
                        app_name: &app_name,
                        user_id: &user_id,
                    };
                    Some(scope_key(scope).into_vec())
                }
                None => None,
            };
            if prefix != scope {
                pruned += self.prune_group(&group, before_ms, n - pruned)?;
                group.clear();
                scope = prefix;
            }
            let Some((key, value)) = next else {
                return Ok(pruned);
            };
            if pruned == n {
                return Ok(pruned);
            }
            let revision: RevisionRecord = decode(&value, "revision")?;
            group.push((key, revision.memory_id, revision.create_ms));
        }
    }

    /// Removes up to `n` of one scope's revisions (in the order recorded) older than
    /// `before_ms` and followed by a later one of their memory.
    fn prune_group(
        &self,
        group: &[(Vec<u8>, String, i64)],
        before_ms: i64,
        n: usize,
    ) -> Result<usize> {
        let last: HashMap<&str, usize> = group
            .iter()
            .enumerate()
            .map(|(i, (_, memory_id, _))| (memory_id.as_str(), i))
            .collect();
        let mut pruned = 0;
        for (i, (key, memory_id, create_ms)) in group.iter().enumerate() {
            if pruned == n {
                break;
            }
            if *create_ms < before_ms && last.get(memory_id.as_str()) != Some(&i) {
                self.revisions.remove(key)?;
                pruned += 1;
            }
        }
        Ok(pruned)
    }

    pub(super) fn prune_jobs_now(&self, before_ms: i64, n: usize) -> Result<usize> {
        let mut pruned = 0;
        for key in self.jobs_done.iter().keys().take(n) {
            let key = key?;
            let mut reader = KeyReader::new(&key);
            let (Some(ended), Some(id)) = (reader.u64(), reader.str()) else {
                return Err(StoreError::corrupt("finished job key"));
            };
            if ended >= u64::try_from(before_ms).unwrap_or(0) {
                break;
            }
            // The ids of the events it took from a stream go with it.
            let handed_off = match self.jobs.get(id.as_bytes())? {
                Some(bytes) => Self::handed_off_keys(&decode(&bytes, "job")?),
                None => Vec::new(),
            };
            let (jobs, done, events) = (&self.jobs, &self.jobs_done, &self.stream_events);
            (jobs, done, events)
                .transaction(|(jobs, done, events)| {
                    jobs.remove(id.as_bytes())?;
                    done.remove(&key)?;
                    for event in &handed_off {
                        Self::remove_handed_off(events, event.as_bytes(), &id)?;
                    }
                    Ok(())
                })
                .map_err(aborted)?;
            pruned += 1;
        }
        Ok(pruned)
    }

    pub(super) fn expired_now(&self, now_ms: i64, n: usize) -> Result<Vec<Expired>> {
        let mut out = Vec::new();
        for kv in self.expiries.iter() {
            let (key, value) = kv?;
            let at: [u8; 8] = value
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::corrupt("expiry: not 8 bytes"))?;
            if i64::from_be_bytes(at) > now_ms {
                continue;
            }
            let mut reader = KeyReader::new(&key);
            let (Some(app_name), Some(user_id), Some(memory_id)) =
                (reader.str(), reader.str(), reader.str())
            else {
                return Err(StoreError::corrupt("expiry key"));
            };
            out.push(Expired {
                app_name,
                user_id,
                memory_id,
            });
            if out.len() == n {
                break;
            }
        }
        Ok(out)
    }
}

fn storage(e: TransactionError<Infallible>) -> StoreError {
    match e {
        TransactionError::Abort(never) => match never {},
        TransactionError::Storage(e) => e.into(),
    }
}

pub(super) fn aborted(e: TransactionError<StoreError>) -> StoreError {
    match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => e.into(),
    }
}
