//! Online backups: the snapshot file format of a sled database, the `AdminService` that streams
//! a snapshot out of a running server, and the `snapshot` / `restore` commands of both binaries.
//!
//! A snapshot file is `ADKSNAP1` followed by length-delimited [`Record`]s (every entry of every
//! tree) and a final record with an empty tree name carrying the entry count, so a truncated
//! file is detected on restore. The store pauses its writers while the file is written to local
//! disk (see [`Snapshotter`]), so the snapshot is consistent across trees; it is streamed to the
//! client afterwards, at the client's pace, without holding writers up.

use std::{
    fs::File,
    future::Future,
    io::{BufReader, BufWriter, Read, Write},
    path::{Path, PathBuf},
    pin::Pin,
    process::ExitCode,
    sync::Arc,
};

use adk_proto::admin::v1::{admin_service_server::AdminService, SnapshotChunk, SnapshotRequest};
use prost::Message;
use tokio::sync::{mpsc, OwnedRwLockReadGuard, RwLock, RwLockReadGuard};
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{transport::Channel, Request, Response, Status};

use crate::auth::grant;

const MAGIC: &[u8; 8] = b"ADKSNAP1";

/// Bytes per streamed chunk.
const CHUNK_BYTES: usize = 256 * 1024;

/// Why a snapshot could not be taken or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage error: {0}")]
    Storage(#[from] sled::Error),
    #[error("not a snapshot file: {0}")]
    Format(String),
    #[error("{0} is not empty: restore only into a fresh data directory")]
    NotEmpty(PathBuf),
}

/// One entry of one tree.
#[derive(Clone, PartialEq, prost::Message)]
struct Record {
    /// Empty for the final record, whose `value` is the entry count (u64, big-endian).
    #[prost(bytes = "vec", tag = "1")]
    tree: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    value: Vec<u8>,
}

/// Lets a store's writers run together and a snapshot run alone, so the snapshot sees no write
/// half applied.
#[derive(Debug, Clone, Default)]
pub struct WriteGate(Arc<RwLock<()>>);

impl WriteGate {
    /// Hold the returned guard while applying a write.
    pub async fn writing(&self) -> RwLockReadGuard<'_, ()> {
        self.0.read().await
    }

    /// [`WriteGate::writing`] for a write applied on another thread, which holds the guard
    /// until it is done even if the caller stops waiting for it.
    pub async fn writing_owned(&self) -> OwnedRwLockReadGuard<()> {
        self.0.clone().read_owned().await
    }

    /// Writes a snapshot of `db` to `path` with writers paused; returns the entry count.
    pub async fn snapshot(&self, db: &sled::Db, path: &Path) -> Result<u64, SnapshotError> {
        let paused = self.0.clone().write_owned().await;
        let (db, path) = (db.clone(), path.to_owned());
        tokio::task::spawn_blocking(move || {
            let _paused = paused;
            write(&db, File::create(path)?)
        })
        .await
        .map_err(|e| SnapshotError::Io(std::io::Error::other(e)))?
    }
}

/// A store that can write a consistent snapshot of itself.
pub trait Snapshotter: Send + Sync + 'static {
    /// Writes the snapshot to `path`, pausing writers meanwhile; returns the entry count.
    fn snapshot(&self, path: &Path) -> impl Future<Output = Result<u64, SnapshotError>> + Send;
}

/// Writes every entry of every tree of `db`. The caller keeps writers out meanwhile.
pub fn write(db: &sled::Db, out: impl Write) -> Result<u64, SnapshotError> {
    let mut out = BufWriter::new(out);
    out.write_all(MAGIC)?;
    let mut count = 0u64;
    let mut buf = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name)?;
        for kv in tree.iter() {
            let (key, value) = kv?;
            let record = Record {
                tree: name.to_vec(),
                key: key.to_vec(),
                value: value.to_vec(),
            };
            buf.clear();
            record
                .encode_length_delimited(&mut buf)
                .map_err(|e| SnapshotError::Format(e.to_string()))?;
            out.write_all(&buf)?;
            count += 1;
        }
    }
    let last = Record {
        tree: Vec::new(),
        key: Vec::new(),
        value: count.to_be_bytes().to_vec(),
    };
    buf.clear();
    last.encode_length_delimited(&mut buf)
        .map_err(|e| SnapshotError::Format(e.to_string()))?;
    out.write_all(&buf)?;
    out.flush()?;
    Ok(count)
}

/// Restores a snapshot into a new database at `data_dir`, which must not hold one yet.
pub fn restore(data_dir: &Path, input: impl Read) -> Result<u64, SnapshotError> {
    if data_dir.exists() && std::fs::read_dir(data_dir)?.next().is_some() {
        return Err(SnapshotError::NotEmpty(data_dir.to_owned()));
    }
    let mut input = BufReader::new(input);
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(SnapshotError::Format("missing ADKSNAP1 header".into()));
    }
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    let db = sled::open(data_dir)?;
    let mut rest = &bytes[..];
    let mut count = 0u64;
    loop {
        if rest.is_empty() {
            return Err(SnapshotError::Format("truncated: no final record".into()));
        }
        let record = Record::decode_length_delimited(&mut rest)
            .map_err(|e| SnapshotError::Format(e.to_string()))?;
        if record.tree.is_empty() {
            let expected = <[u8; 8]>::try_from(record.value.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| SnapshotError::Format("bad final record".into()))?;
            if expected != count || !rest.is_empty() {
                return Err(SnapshotError::Format(format!(
                    "expected {expected} entries, found {count}"
                )));
            }
            break;
        }
        db.open_tree(&record.tree)?
            .insert(record.key, record.value)?;
        count += 1;
    }
    db.flush()?;
    Ok(count)
}

/// `adk.admin.v1.AdminService` over a store.
#[derive(Debug)]
pub struct AdminGrpc<T> {
    store: Arc<T>,
    /// Where snapshots are written before they are streamed (inside the data directory, so
    /// they land on the same volume, which has room for a copy of the data).
    scratch_dir: PathBuf,
}

impl<T> AdminGrpc<T> {
    pub fn new(store: Arc<T>, scratch_dir: PathBuf) -> Self {
        Self { store, scratch_dir }
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
        tracing::info!(entries, "snapshot taken");
        let (tx, rx) = mpsc::channel(4);
        // The temporary file is removed when this task drops it, streamed or not.
        tokio::task::spawn_blocking(move || {
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

/// Backup commands of both binaries.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AdminCommand {
    /// Take a consistent snapshot of a running server and write it to a file.
    Snapshot {
        /// The server, e.g. http://127.0.0.1:50051.
        #[arg(long)]
        endpoint: String,
        /// File to write (written beside it first, then renamed into place).
        #[arg(long)]
        output: PathBuf,
        /// File holding a bearer token granted every app.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// CA certificate (PEM) for an https endpoint.
        #[arg(long)]
        ca: Option<PathBuf>,
    },
    /// Restore a snapshot file into a fresh data directory (the server must not be running on
    /// it).
    Restore {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        data_dir: PathBuf,
    },
}

impl AdminCommand {
    /// Runs the command, reporting on stdout/stderr.
    pub async fn run(self) -> ExitCode {
        let outcome = match self {
            AdminCommand::Snapshot {
                endpoint,
                output,
                token_file,
                ca,
            } => download(&endpoint, &output, token_file, ca)
                .await
                .map(|bytes| {
                    format!(
                        "snapshot of {endpoint} written to {} ({bytes} bytes)",
                        output.display()
                    )
                }),
            AdminCommand::Restore { input, data_dir } => File::open(&input)
                .map_err(|e| format!("cannot open {}: {e}", input.display()).into())
                .and_then(|f| restore(&data_dir, f).map_err(Into::into))
                .map(|n| format!("restored {n} entries into {}", data_dir.display())),
        };
        match outcome {
            Ok(message) => {
                println!("{message}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

async fn download(
    endpoint: &str,
    output: &Path,
    token_file: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> Result<u64, crate::server::BoxError> {
    let mut channel = Channel::from_shared(endpoint.to_owned())?;
    if let Some(ca) = ca {
        let pem = std::fs::read(&ca).map_err(|e| format!("cannot read {}: {e}", ca.display()))?;
        channel = channel.tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(pem)),
        )?;
    }
    let channel = channel
        .connect()
        .await
        .map_err(|e| format!("cannot reach {endpoint}: {e}"))?;
    let mut request = Request::new(SnapshotRequest {});
    if let Some(path) = token_file {
        let token = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {}", token.trim()).parse()?);
    }
    let mut client = adk_proto::admin::v1::admin_service_client::AdminServiceClient::new(channel);
    let mut stream = client.snapshot(request).await?.into_inner();
    let partial = output.with_extension("partial");
    let mut file = BufWriter::new(File::create(&partial)?);
    let mut bytes = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        file.write_all(&chunk.data)?;
        bytes += chunk.data.len() as u64;
    }
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&partial, output)?;
    Ok(bytes)
}
