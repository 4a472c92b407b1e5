//! Online backups: the snapshot file format of an embedded database, sled or redb (streamed out
//! of a running server by [`crate::serve::admin`]), and the `snapshot` / `restore` commands of
//! both binaries.
//!
//! A snapshot file is `ADKSNAP2`, a length-delimited [`Header`] naming the service that took it
//! and the format version, then the body: length-delimited [`Record`]s (every entry of every
//! tree) and a final record with an empty tree name carrying the entry count, so a truncated
//! file is detected on restore. Files of the first format (`ADKSNAP1` and the body, no header)
//! do not say which service they belong to: restore refuses them unless told to accept them.
//!
//! The store pauses its writers while the body is written to local disk (see [`Snapshotter`]),
//! so the snapshot is consistent across trees; it is streamed to the client afterwards, at the
//! client's pace, without holding writers up. A restore writes into a temporary directory beside
//! the target and renames it into place only once the whole snapshot is in, so a failed restore
//! leaves nothing behind. Both commands show their progress on stderr.

use std::{
    fs::File,
    future::Future,
    io::{BufReader, BufWriter, IsTerminal, Read, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use adk_proto::admin::v1::SnapshotRequest;
use prost::Message;
use tokio::sync::{OwnedRwLockReadGuard, RwLock, RwLockReadGuard};
use tokio_stream::StreamExt;
use tonic::{transport::Channel, Request, Status};

use crate::storage::StorageError;

/// The start of a snapshot file: the magic, then a [`Header`].
const MAGIC: &[u8; 8] = b"ADKSNAP2";

/// The start of a file of the first format: the magic, then the body (no header).
const UNLABELLED_MAGIC: &[u8; 8] = b"ADKSNAP1";

/// The version of the format this code writes and reads.
const FORMAT_VERSION: u32 = 2;

/// Largest record a snapshot may hold (a store entry: a session's event, say, is at most the
/// server's --max-event-bytes), so that a corrupt length cannot make a restore allocate
/// without bound.
const MAX_RECORD_BYTES: u64 = 1 << 30;

/// Bytes per streamed chunk.
pub(crate) const CHUNK_BYTES: usize = 256 * 1024;

/// Why a snapshot could not be taken or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Storage(#[from] StorageError),
    #[error("not a snapshot file: {0}")]
    Format(String),
    #[error("{0} is not empty: restore only into a fresh data directory")]
    NotEmpty(PathBuf),
    #[error("this is a snapshot of {found}, not of {expected}: restore it with {found}")]
    WrongService { found: String, expected: String },
    #[error(
        "this snapshot does not say which service took it (it is in the first snapshot format); \
         if you are sure it is a {expected} snapshot, restore it with --accept-unlabelled"
    )]
    Unlabelled { expected: String },
}

/// What a snapshot file says about itself, after the magic.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Header {
    /// The service whose store it holds: `session-svc` or `memory-svc`.
    #[prost(string, tag = "1")]
    service: String,
    #[prost(uint32, tag = "2")]
    format_version: u32,
    /// The size of the body that follows (for progress).
    #[prost(uint64, tag = "3")]
    body_bytes: u64,
}

impl Header {
    /// The magic and this header: the first bytes of a snapshot file.
    pub(crate) fn file_start(service: &str, body_bytes: u64) -> Vec<u8> {
        let header = Header {
            service: service.to_owned(),
            format_version: FORMAT_VERSION,
            body_bytes,
        };
        let mut bytes = MAGIC.to_vec();
        // Encoding into a Vec cannot run out of room.
        let _ = header.encode_length_delimited(&mut bytes);
        bytes
    }
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

    /// [`WriteGate::writing`] on a blocking thread (never on the async runtime's own: it
    /// blocks the thread until no snapshot runs).
    pub fn writing_blocking(&self) -> RwLockReadGuard<'_, ()> {
        self.0.blocking_read()
    }

    /// Writes the body of a snapshot of `db` to `path` with writers paused; returns the entry
    /// count.
    pub async fn snapshot(&self, db: &impl Dump, path: &Path) -> Result<u64, SnapshotError> {
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
    /// Writes the body of a snapshot to `path`, pausing writers meanwhile; returns the entry
    /// count.
    fn snapshot(&self, path: &Path) -> impl Future<Output = Result<u64, SnapshotError>> + Send;
}

/// What a [`Dump`] calls with the tree, key and value of each entry.
pub type Each<'a> = dyn FnMut(&[u8], &[u8], &[u8]) -> Result<(), SnapshotError> + 'a;

/// A database a snapshot can be taken of.
pub trait Dump: Clone + Send + 'static {
    /// Calls `each` with the tree, key and value of every entry of every tree.
    fn dump(&self, each: &mut Each<'_>) -> Result<(), SnapshotError>;
}

/// A database a snapshot can be restored into.
pub trait Load: Sized {
    /// Creates the database in the empty directory `dir`.
    fn create(dir: &Path) -> Result<Self, SnapshotError>;

    /// Adds `key` = `value` to the tree named `tree`.
    fn insert(&mut self, tree: &[u8], key: Vec<u8>, value: Vec<u8>) -> Result<(), SnapshotError>;

    /// Makes everything inserted durable.
    fn finish(self) -> Result<(), SnapshotError>;
}

/// Writes the body of a snapshot: every entry of every tree of `db`. The caller keeps writers
/// out meanwhile.
pub fn write(db: &impl Dump, out: impl Write) -> Result<u64, SnapshotError> {
    let mut out = BufWriter::new(out);
    let mut count = 0u64;
    let mut buf = Vec::new();
    db.dump(&mut |tree, key, value| {
        let record = Record {
            tree: tree.to_vec(),
            key: key.to_vec(),
            value: value.to_vec(),
        };
        buf.clear();
        record
            .encode_length_delimited(&mut buf)
            .map_err(|e| SnapshotError::Format(e.to_string()))?;
        out.write_all(&buf)?;
        count += 1;
        Ok(())
    })?;
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

/// What a restore expects of the snapshot it is given.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// The service restoring: a snapshot of another one is refused.
    pub service: &'a str,
    /// Accept a snapshot of the first format, which does not name its service.
    pub accept_unlabelled: bool,
}

/// Restores a snapshot into a new database at `data_dir`, which must not hold one yet; returns
/// the entry count. The database is built in a temporary directory beside `data_dir` and renamed
/// into place at the end: on any failure (a truncated or foreign snapshot, a full disk) nothing
/// is left behind and the restore can simply be run again.
pub fn restore<D: Load>(
    expect: Expect<'_>,
    data_dir: &Path,
    input: impl Read,
    progress: &mut Progress,
) -> Result<u64, SnapshotError> {
    if data_dir.exists() && std::fs::read_dir(data_dir)?.next().is_some() {
        return Err(SnapshotError::NotEmpty(data_dir.to_owned()));
    }
    let mut input = BufReader::new(Counted {
        inner: input,
        progress,
    });
    let mut magic = [0u8; 8];
    read_exact(&mut input, &mut magic)?;
    match &magic {
        MAGIC => {
            let header = Header::decode(read_record_bytes(&mut input)?.as_slice())
                .map_err(|e| SnapshotError::Format(format!("unreadable header: {e}")))?;
            if header.format_version != FORMAT_VERSION {
                return Err(SnapshotError::Format(format!(
                    "format version {} (this version reads {FORMAT_VERSION})",
                    header.format_version
                )));
            }
            if header.service != expect.service {
                return Err(SnapshotError::WrongService {
                    found: header.service,
                    expected: expect.service.to_owned(),
                });
            }
        }
        UNLABELLED_MAGIC if expect.accept_unlabelled => {}
        UNLABELLED_MAGIC => {
            return Err(SnapshotError::Unlabelled {
                expected: expect.service.to_owned(),
            })
        }
        _ => return Err(SnapshotError::Format("no snapshot header".into())),
    }
    let parent = match data_dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)?;
    let building = tempfile::Builder::new()
        .prefix(".restoring-")
        .tempdir_in(&parent)?;
    let count = restore_body::<D>(&mut input, building.path())?;
    if data_dir.exists() {
        // Checked empty above.
        std::fs::remove_dir(data_dir)?;
    }
    let built = building.keep();
    if let Err(e) = std::fs::rename(&built, data_dir) {
        // Best effort: the rename's error is the one to report.
        let _ = std::fs::remove_dir_all(&built);
        return Err(e.into());
    }
    input.into_inner().progress.finish();
    Ok(count)
}

/// Reads the records of a snapshot body into a new database at `dir`; returns their count.
fn restore_body<D: Load>(input: &mut impl Read, dir: &Path) -> Result<u64, SnapshotError> {
    let mut db = D::create(dir)?;
    let mut count = 0u64;
    loop {
        let record = Record::decode(read_record_bytes(input)?.as_slice())
            .map_err(|e| SnapshotError::Format(e.to_string()))?;
        if record.tree.is_empty() {
            let expected = <[u8; 8]>::try_from(record.value.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| SnapshotError::Format("bad final record".into()))?;
            if expected != count {
                return Err(SnapshotError::Format(format!(
                    "expected {}, found {count}",
                    entries(expected)
                )));
            }
            let mut rest = [0u8; 1];
            if input.read(&mut rest)? != 0 {
                return Err(SnapshotError::Format("data after the final record".into()));
            }
            break;
        }
        db.insert(&record.tree, record.key, record.value)?;
        count += 1;
    }
    db.finish()?;
    Ok(count)
}

/// The bytes of the next length-delimited message of `input`.
fn read_record_bytes(input: &mut impl Read) -> Result<Vec<u8>, SnapshotError> {
    // The length: a varint of at most ten bytes.
    let mut len = 0u64;
    for shift in (0..70).step_by(7) {
        let mut byte = [0u8; 1];
        read_exact(input, &mut byte)?;
        len |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            if len > MAX_RECORD_BYTES {
                return Err(SnapshotError::Format(format!("a record of {len} bytes")));
            }
            let mut bytes = Vec::new();
            input.take(len).read_to_end(&mut bytes)?;
            if bytes.len() as u64 != len {
                return Err(truncated());
            }
            return Ok(bytes);
        }
    }
    Err(SnapshotError::Format("bad record length".into()))
}

/// `read_exact`, with the end of the file reported as a truncated snapshot.
fn read_exact(input: &mut impl Read, buf: &mut [u8]) -> Result<(), SnapshotError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => truncated(),
        _ => SnapshotError::Io(e),
    })
}

fn truncated() -> SnapshotError {
    SnapshotError::Format("truncated: the file ends before the final record".into())
}

/// A reader that reports the bytes read to a [`Progress`].
struct Counted<'a, R> {
    inner: R,
    progress: &'a mut Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

/// Progress of a long copy, shown on stderr: bytes and percent, on one line rewritten in place
/// on a terminal, otherwise a line every tenth of the way.
#[derive(Debug)]
pub struct Progress {
    /// What is being done ("restoring"), or `None` to show nothing.
    label: Option<&'static str>,
    total: u64,
    done: u64,
    /// The last percentage shown.
    shown: Option<u64>,
    terminal: bool,
}

impl Progress {
    /// Progress of `label` over `total` bytes, shown on stderr.
    pub fn on_stderr(label: &'static str, total: u64) -> Self {
        Self {
            label: Some(label),
            total,
            done: 0,
            shown: None,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Progress that is not shown.
    pub fn hidden() -> Self {
        Self {
            label: None,
            total: 0,
            done: 0,
            shown: None,
            terminal: false,
        }
    }

    fn add(&mut self, bytes: u64) {
        self.done += bytes;
        let percent = (self.done * 100)
            .checked_div(self.total)
            .unwrap_or(100)
            .min(100);
        let step = if self.terminal { 1 } else { 10 };
        if self.shown.is_none_or(|shown| percent >= shown + step) {
            self.show(percent);
        }
    }

    fn show(&mut self, percent: u64) {
        let Some(label) = self.label else {
            return;
        };
        self.shown = Some(percent);
        let line = format!(
            "{label}: {} of {} ({percent}%)",
            size(self.done),
            size(self.total)
        );
        if self.terminal {
            eprint!("\r{line}");
        } else {
            eprintln!("{line}");
        }
    }

    /// Shows the end (100%, unless shown already), and ends the line on a terminal.
    fn finish(&mut self) {
        if self.shown != Some(100) {
            self.show(100);
        }
        if self.terminal && self.label.is_some() {
            eprintln!();
        }
    }
}

/// "1 entry", "2 entries".
fn entries(n: u64) -> String {
    format!("{n} {}", if n == 1 { "entry" } else { "entries" })
}

/// A size for people, in the largest unit it has one of: "61 bytes", "12.5 KiB", "3.0 GiB".
fn size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
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
        /// CA certificate (PEM) of an `https://` endpoint.
        #[arg(long, alias = "ca")]
        ca_cert: Option<PathBuf>,
    },
    /// Restore a snapshot file into a fresh data directory (the server must not be running on
    /// it). Nothing is left behind when the restore fails.
    Restore {
        /// The snapshot file (written by `snapshot`).
        #[arg(long)]
        input: PathBuf,
        /// The data directory to create: it must not exist or be empty. Start the server on it
        /// afterwards.
        #[arg(long)]
        data_dir: PathBuf,
        /// Accept a snapshot of the first format, which does not say which service took it.
        #[arg(long)]
        accept_unlabelled: bool,
    },
}

impl AdminCommand {
    /// Runs the command of `service`'s binary, whose store is a `D`, reporting on
    /// stdout/stderr.
    pub async fn run<D: Load>(self, service: &'static str) -> ExitCode {
        let outcome = match self {
            AdminCommand::Snapshot {
                endpoint,
                output,
                token_file,
                ca_cert,
            } => download(&endpoint, &output, token_file, ca_cert)
                .await
                .map(|(of, bytes)| {
                    format!(
                        "snapshot of {of} at {endpoint} written to {} ({bytes} bytes)",
                        output.display()
                    )
                }),
            AdminCommand::Restore {
                input,
                data_dir,
                accept_unlabelled,
            } => restore_file::<D>(
                Expect {
                    service,
                    accept_unlabelled,
                },
                &input,
                &data_dir,
            )
            .map(|n| format!("restored {} into {}", entries(n), data_dir.display())),
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

/// A failed Snapshot call, for people: what answers at `endpoint` when it is not gRPC.
fn call_failed(endpoint: &str, status: &Status) -> String {
    use std::error::Error as _;
    let message = status.message();
    match status.source() {
        // A status made of a transport failure after connecting, not one the server sent: what
        // answered does not speak gRPC (an HTTP/1 server's answer to HTTP/2 shows as a broken
        // frame, a cancelled call or a broken pipe, whichever the client notices first).
        Some(_) => format!(
            "the server at {endpoint} does not speak gRPC ({message}): is it an HTTP/1 server?"
        ),
        None => format!(
            "the server at {endpoint} answered {:?}: {message}",
            status.code()
        ),
    }
}

/// `restore` from the file at `input`, with progress.
fn restore_file<D: Load>(
    expect: Expect<'_>,
    input: &Path,
    data_dir: &Path,
) -> Result<u64, crate::BoxError> {
    let file = File::open(input).map_err(|e| format!("cannot open {}: {e}", input.display()))?;
    let mut progress = Progress::on_stderr("restoring", file.metadata()?.len());
    Ok(restore::<D>(expect, data_dir, file, &mut progress)?)
}

/// Streams a snapshot from the server at `endpoint` into `output`, with progress; returns the
/// service the snapshot is of and its size. The file is written beside `output` and renamed
/// into place once complete, so a failed download leaves nothing behind.
async fn download(
    endpoint: &str,
    output: &Path,
    token_file: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> Result<(String, u64), crate::BoxError> {
    // Like grpcurl and runner-client, a scheme-less endpoint means http://, or https:// with a CA.
    let url = if endpoint.contains("://") {
        endpoint.to_owned()
    } else if ca.is_some() {
        format!("https://{endpoint}")
    } else {
        format!("http://{endpoint}")
    };
    let mut channel = Channel::from_shared(url)?;
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
    let mut stream = client
        .snapshot(request)
        .await
        .map_err(|status| call_failed(endpoint, &status))?
        .into_inner();
    // The first chunk is the header: it names the service and the size of what follows.
    let start = stream
        .next()
        .await
        .ok_or("the server sent an empty snapshot")??
        .data;
    let header = start
        .strip_prefix(MAGIC.as_slice())
        .and_then(|rest| Header::decode_length_delimited(rest).ok())
        .ok_or("the server sent a snapshot without a header")?;
    let dir = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let partial = tempfile::Builder::new()
        .prefix(".snapshot-")
        .tempfile_in(dir)?;
    let mut file = BufWriter::new(partial.as_file());
    let mut progress = Progress::on_stderr("snapshot", start.len() as u64 + header.body_bytes);
    file.write_all(&start)?;
    progress.add(start.len() as u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        file.write_all(&chunk.data)?;
        progress.add(chunk.data.len() as u64);
    }
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    partial.persist(output)?;
    progress.finish();
    Ok((header.service, progress.done))
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_are_shown_in_a_unit_that_shows_them() {
        assert_eq!(size(61), "61 bytes");
        assert_eq!(size(12_800), "12.5 KiB");
        assert_eq!(size(5 << 20), "5.0 MiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
        assert_eq!(size(4096 << 30), "4096.0 GiB");
    }
}
