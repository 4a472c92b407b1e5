//! Opening the store's database: the redb file in the data directory, converted first from the
//! sled database that releases before it kept there.
//!
//! The conversion copies every tree of the sled database, byte for byte, into a new redb file
//! in a directory of its own beside sled's files; once that file is flushed it is renamed into
//! place, and only then are sled's files removed. A conversion cut short leaves sled's database
//! as it was and the next open starts over; a removal cut short is finished by the next open.
//! The layouts of earlier formats stay as they were copied, and the store converts them at
//! open as it always did (see [`super::migrate`]).

use std::path::Path;

use adk_common::{
    kv::{self, Batch, Db},
    versions,
};

use super::{
    super::Result,
    migrate::{FORMAT, STORE},
};

/// What sled keeps in a data directory; a directory holding its `db` file is a sled store.
const SLED_FILES: [&str; 3] = ["db", "conf", "blobs"];

/// The tree every sled database has.
const SLED_DEFAULT_TREE: &[u8] = b"__sled__default";

/// Where a conversion builds the redb file before it is renamed into place.
const BUILDING: &str = ".converting";

/// Entries copied per commit.
const BATCH: usize = 10_000;

/// The page cache of the sled database while it is read for the conversion.
const SLED_CACHE_BYTES: u64 = 64 << 20;

/// Opens the store's database in `dir` (created if need be) with a page cache of
/// `cache_bytes`, converting a sled store found there first.
pub(super) fn open(dir: &Path, cache_bytes: usize) -> Result<Db> {
    std::fs::create_dir_all(dir).map_err(kv::Error::from)?;
    let file = dir.join(kv::FILE);
    if !file.exists() && dir.join(SLED_FILES[0]).exists() {
        convert(dir, cache_bytes)?;
    }
    if file.exists() {
        remove_sled(dir)?;
    }
    Ok(Db::open(&file, cache_bytes)?)
}

/// Copies the sled database in `dir` into the redb file beside it.
fn convert(dir: &Path, cache_bytes: usize) -> Result<()> {
    let building = dir.join(BUILDING);
    if building.exists() {
        std::fs::remove_dir_all(&building).map_err(kv::Error::from)?;
    }
    std::fs::create_dir(&building).map_err(kv::Error::from)?;
    let sled = sled::Config::new()
        .path(dir)
        .cache_capacity(SLED_CACHE_BYTES)
        .open()?;
    // A store of a newer format is refused as it is, not converted.
    let format = sled.open_tree("format")?.get(versions::RECORD_KEY)?;
    versions::check_recorded(STORE, format.as_deref(), FORMAT)?;
    // sled's own default tree, which the store never wrote, is left behind.
    let names: Vec<_> = (sled.tree_names().into_iter())
        .filter(|name| name.as_ref() != SLED_DEFAULT_TREE)
        .collect();
    tracing::info!(
        dir = %dir.display(),
        trees = names.len(),
        "converting the sled store to redb"
    );
    let db = Db::open(&building.join(kv::FILE), cache_bytes)?;
    let mut copied = 0u64;
    for name in names {
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| super::super::StoreError::corrupt("a sled tree's name"))?;
        let (from, to) = (sled.open_tree(&name)?, db.open_tree(&name)?);
        let mut batch = Batch::default();
        for entry in from.iter() {
            let (key, value) = entry?;
            batch.insert(key.to_vec(), value.to_vec());
            if batch.len() == BATCH {
                to.apply_batch(std::mem::take(&mut batch))?;
            }
            copied += 1;
        }
        to.apply_batch(batch)?;
    }
    // Ids sled handed out (revision numbers) are never handed out again.
    db.advance_ids(sled.generate_id()?)?;
    db.flush()?;
    drop((db, sled));
    std::fs::rename(building.join(kv::FILE), dir.join(kv::FILE)).map_err(kv::Error::from)?;
    std::fs::remove_dir(&building).map_err(kv::Error::from)?;
    tracing::info!(entries = copied, "converted the sled store to redb");
    Ok(())
}

/// Removes what sled kept in `dir`, once the redb file has taken its place.
fn remove_sled(dir: &Path) -> Result<()> {
    let remove = |path: &Path| -> std::io::Result<()> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    };
    for entry in std::fs::read_dir(dir).map_err(kv::Error::from)? {
        let entry = entry.map_err(kv::Error::from)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if SLED_FILES.contains(&name.as_ref()) || name.starts_with("snap.") {
            remove(&entry.path()).map_err(kv::Error::from)?;
        }
    }
    Ok(())
}
