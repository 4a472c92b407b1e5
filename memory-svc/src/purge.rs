//! Purges: deleting every memory of an app (or of one user) that passes a filter. A dry run
//! counts the memories that match and samples them; a forced purge is one durable operation:
//! its request is recorded before anything is deleted and removed once it has run to its end,
//! and [`resume`] takes up, at startup, those a stopped process left unfinished. Matching is
//! the listing's ([`Memories::list`]: the same filters, the same checks, but whatever the
//! memories' validity: superseded facts are purged too), and each match is
//! deleted as `DeleteMemory` deletes by memory id (its id tombstoned): running a purge again
//! finds what it has not deleted yet, so an operation cut short anywhere finishes alike.

use adk_common::validate::{identifier, InvalidArgument};
use adk_proto::memory::v1::{ListMemoriesRequest, PurgeMemoriesRequest};
use metrics::counter;
use prost::Message;

use crate::{
    error::Result,
    generate::jobs::now_ms,
    memories::{listing_filter, Memories},
    store::{DeleteTarget, Entry, MemoryStore, PurgeRecord, Scope, SearchQuery, StoreError},
    validity::ValidAt,
};

/// Matching memories a purge returns as its sample.
pub const SAMPLE: usize = 10;

/// Memories listed per page while matching.
const PAGE: i32 = 100;

/// What a purge found, or deleted.
#[derive(Debug, Default)]
pub struct Purged {
    /// Memories that match (a dry run) or that were deleted (forced).
    pub count: u64,
    /// The first of them, in (user, ingestion) order.
    pub sample: Vec<Entry>,
    /// A forced purge's operation id.
    pub operation_id: String,
}

impl<S: MemoryStore> Memories<S> {
    /// A dry run of `req`, or with `force` the purge itself, recorded first.
    pub async fn purge(&self, req: PurgeMemoriesRequest) -> Result<Purged> {
        identifier("app_name", &req.app_name)?;
        if !req.user_id.is_empty() {
            identifier("user_id", &req.user_id)?;
        }
        let filtered = req
            .filter
            .as_ref()
            .is_some_and(|f| !f.any_of.is_empty() || !f.topics.is_empty())
            || req.kind != 0
            || !req.author.is_empty()
            || req.after_timestamp.is_some()
            || req.before_timestamp.is_some();
        if !filtered {
            return Err(InvalidArgument::new(
                "filter",
                "a purge needs a filter, kind, author or time bound (DeleteMemory with all \
                 deletes a user's whole memory)",
            )
            .into());
        }
        // The filters are checked before anything is recorded.
        listing_filter(&listing(&req, &req.user_id, String::new(), PAGE))?;
        if !req.force {
            return self.run(&req, false).await;
        }
        let record = PurgeRecord {
            id: uuid::Uuid::new_v4().to_string(),
            request: req.encode_to_vec(),
            create_ms: now_ms(),
        };
        self.store().put_purge(&record).await?;
        tracing::info!(operation = %record.id, app = %req.app_name, user = %req.user_id, "purge started");
        let mut purged = self.run(&req, true).await?;
        self.store().remove_purge(&record.id).await?;
        tracing::info!(operation = %record.id, deleted = purged.count, "purge finished");
        purged.operation_id = record.id;
        Ok(purged)
    }

    /// Matches `req`'s memories, user by user, and deletes them when `delete`.
    async fn run(&self, req: &PurgeMemoriesRequest, delete: bool) -> Result<Purged> {
        let users = match req.user_id.as_str() {
            "" => self.store().users(&req.app_name).await?,
            user => vec![user.to_owned()],
        };
        let mut purged = Purged::default();
        for user in &users {
            let scope = Scope {
                app_name: &req.app_name,
                user_id: user,
            };
            let mut token = String::new();
            loop {
                let listing = listing(req, user, token, PAGE);
                let filter = SearchQuery {
                    valid_at: ValidAt::default(),
                    ..listing_filter(&listing)?
                };
                let (page, next) = self.listed(listing, filter).await?;
                for entry in page {
                    if delete {
                        let target = DeleteTarget::MemoryId(entry.id.clone());
                        let deleted = self.store().delete(scope, &target).await?;
                        counter!("memory_purged_total").increment(u64::from(deleted));
                    }
                    purged.count += 1;
                    if purged.sample.len() < SAMPLE {
                        purged.sample.push(entry);
                    }
                }
                if next.is_empty() {
                    break;
                }
                token = next;
            }
        }
        Ok(purged)
    }
}

/// Runs the purges a stopped process left unfinished, oldest first (at startup).
pub async fn resume<S: MemoryStore>(memories: &Memories<S>) -> Result<()> {
    for record in memories.store().purges().await? {
        let req = PurgeMemoriesRequest::decode(record.request.as_slice())
            .map_err(|e| StoreError::corrupt(format!("purge {}: {e}", record.id)))?;
        tracing::info!(operation = %record.id, app = %req.app_name, user = %req.user_id, "purge resumed");
        let purged = memories.run(&req, true).await?;
        memories.store().remove_purge(&record.id).await?;
        tracing::info!(operation = %record.id, deleted = purged.count, "purge finished");
    }
    Ok(())
}

/// The listing of `user`'s memories that `req` purges, from `page_token` on.
fn listing(
    req: &PurgeMemoriesRequest,
    user: &str,
    page_token: String,
    page_size: i32,
) -> ListMemoriesRequest {
    ListMemoriesRequest {
        app_name: req.app_name.clone(),
        user_id: user.to_owned(),
        page_size,
        page_token,
        kind: req.kind,
        filter: req.filter.clone(),
        after_timestamp: req.after_timestamp,
        before_timestamp: req.before_timestamp,
        author: req.author.clone(),
        ..Default::default()
    }
}
