//! The `AdminService`: streams a snapshot of a running server's sled store to a caller granted
//! every app (see [`crate::snapshot`] for the format and the commands that use it).

use std::{
    io::{BufReader, Read},
    path::PathBuf,
    pin::Pin,
    sync::Arc,
};

use adk_proto::admin::v1::{admin_service_server::AdminService, SnapshotChunk, SnapshotRequest};
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, Stream};
use tonic::{Request, Response, Status};

use crate::{
    serve::auth::grant,
    snapshot::{Header, Snapshotter, CHUNK_BYTES},
};

/// `adk.admin.v1.AdminService` over a store.
#[derive(Debug)]
pub struct AdminGrpc<T> {
    /// The service whose store this is, named in the snapshot's header.
    service: &'static str,
    store: Arc<T>,
    /// Where snapshots are written before they are streamed (inside the data directory, so
    /// they land on the same volume, which has room for a copy of the data).
    scratch_dir: PathBuf,
}

impl<T> AdminGrpc<T> {
    pub fn new(service: &'static str, store: Arc<T>, scratch_dir: PathBuf) -> Self {
        Self {
            service,
            store,
            scratch_dir,
        }
    }
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<SnapshotChunk, Status>> + Send>>;

#[tonic::async_trait]
impl<T: Snapshotter> AdminService for AdminGrpc<T> {
    type SnapshotStream = ChunkStream;

    async fn snapshot(
        &self,
        request: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        grant(&request)?.check_everything()?;
        let internal = |e: &dyn std::fmt::Display| {
            tracing::error!(error = %e, "snapshot failed");
            Status::internal(format!("snapshot failed: {e}"))
        };
        std::fs::create_dir_all(&self.scratch_dir).map_err(|e| internal(&e))?;
        let file = tempfile::Builder::new()
            .prefix("snapshot-")
            .tempfile_in(&self.scratch_dir)
            .map_err(|e| internal(&e))?;
        let entries = self
            .store
            .snapshot(file.path())
            .await
            .map_err(|e| internal(&e))?;
        let body_bytes = file.as_file().metadata().map_err(|e| internal(&e))?.len();
        tracing::info!(entries, body_bytes, "snapshot taken");
        let (tx, rx) = mpsc::channel(4);
        let start = Header::file_start(self.service, body_bytes);
        // The temporary file is removed when this task drops it, streamed or not.
        tokio::task::spawn_blocking(move || {
            // The header goes first, in a chunk of its own.
            if tx.blocking_send(Ok(SnapshotChunk { data: start })).is_err() {
                return;
            }
            let mut reader = match file.reopen() {
                Ok(f) => BufReader::new(f),
                Err(e) => {
                    let _ = tx.blocking_send(Err(Status::internal(e.to_string())));
                    return;
                }
            };
            loop {
                let mut data = vec![0; CHUNK_BYTES];
                match reader.read(&mut data) {
                    Ok(0) => return,
                    Ok(n) => {
                        data.truncate(n);
                        if tx.blocking_send(Ok(SnapshotChunk { data })).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(Status::internal(e.to_string())));
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
