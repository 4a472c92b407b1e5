use super::*;

fn entries(iter: Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.collect::<Result<_>>().unwrap()
}

fn kv(key: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
    (key.as_bytes().to_vec(), value.as_bytes().to_vec())
}

#[test]
fn a_tree_reads_back_what_it_was_given_in_key_order() {
    let db = Db::temporary().unwrap();
    let tree = db.open_tree("t").unwrap();
    assert!(tree.is_empty().unwrap());
    assert_eq!(tree.insert("b", "2").unwrap(), None);
    assert_eq!(tree.insert("a", "1").unwrap(), None);
    assert_eq!(tree.insert("b", "3").unwrap(), Some(b"2".to_vec()));
    tree.insert("ab", "4").unwrap();
    assert_eq!(tree.get("b").unwrap(), Some(b"3".to_vec()));
    assert!(tree.contains_key("a").unwrap() && !tree.contains_key("c").unwrap());
    assert_eq!(tree.len().unwrap(), 3);
    assert_eq!(
        entries(tree.iter()),
        vec![kv("a", "1"), kv("ab", "4"), kv("b", "3")]
    );
    assert_eq!(
        entries(tree.scan_prefix("a")),
        vec![kv("a", "1"), kv("ab", "4")]
    );
    assert_eq!(entries(tree.range("ab".."b")), vec![kv("ab", "4")]);
    assert_eq!(
        tree.iter()
            .keys()
            .rev()
            .collect::<Result<Vec<_>>>()
            .unwrap(),
        vec![b"b".to_vec(), b"ab".to_vec(), b"a".to_vec()]
    );
    assert_eq!(tree.first().unwrap(), Some(kv("a", "1")));
    assert_eq!(tree.last().unwrap(), Some(kv("b", "3")));
    assert_eq!(tree.remove("a").unwrap(), Some(b"1".to_vec()));
    tree.clear().unwrap();
    assert!(tree.is_empty().unwrap());
    // Trees are separate, and listed by name.
    let other = db.open_tree("u").unwrap();
    other.insert("a", "x").unwrap();
    assert_eq!(tree.get("a").unwrap(), None);
    assert_eq!(
        db.tree_names().unwrap(),
        vec!["t".to_owned(), "u".to_owned()]
    );
    assert!(db.drop_tree("u").unwrap());
    assert_eq!(db.tree_names().unwrap(), vec!["t".to_owned()]);
}

#[test]
fn a_prefix_of_ff_bytes_scans_to_the_end_of_the_keyspace() {
    let db = Db::temporary().unwrap();
    let tree = db.open_tree("t").unwrap();
    for key in [&[0xFE][..], &[0xFF], &[0xFF, 0xFF, 0x01], &[0xFF, 0xFF]] {
        tree.insert(key, "v").unwrap();
    }
    let keys: Vec<_> = tree
        .scan_prefix([0xFF])
        .keys()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(
        keys,
        vec![vec![0xFF], vec![0xFF, 0xFF], vec![0xFF, 0xFF, 0x01]]
    );
    assert_eq!(tree.scan_prefix([]).count(), 4);
}

#[test]
fn a_batch_applies_its_edits_in_order_in_one_commit() {
    let db = Db::temporary().unwrap();
    let tree = db.open_tree("t").unwrap();
    tree.insert("gone", "x").unwrap();
    let mut batch = Batch::default();
    batch.insert("k", "1");
    batch.insert("k", "2");
    batch.remove("gone");
    batch.insert("later", "y");
    batch.remove("later");
    tree.apply_batch(batch).unwrap();
    assert_eq!(entries(tree.iter()), vec![kv("k", "2")]);
}

#[test]
fn an_iteration_sees_the_tree_as_it_was_when_it_started() {
    let db = Db::temporary().unwrap();
    let tree = db.open_tree("t").unwrap();
    tree.insert("a", "1").unwrap();
    tree.insert("b", "2").unwrap();
    let mut iter = tree.iter();
    assert_eq!(iter.next().unwrap().unwrap(), kv("a", "1"));
    tree.remove("b").unwrap();
    tree.insert("c", "3").unwrap();
    assert_eq!(iter.next().unwrap().unwrap(), kv("b", "2"));
    assert!(iter.next().is_none());
}

#[test]
fn a_transaction_commits_every_tree_or_none() {
    let db = Db::temporary().unwrap();
    let (a, b) = (db.open_tree("a").unwrap(), db.open_tree("b").unwrap());
    let committed: std::result::Result<u32, TransactionError<&str>> =
        (&a, &b).transaction(|(a, b)| {
            a.insert("k", "1")?;
            let mut batch = Batch::default();
            batch.insert("k", "2");
            b.apply_batch(&batch)?;
            assert_eq!(
                b.get("k")?,
                Some(b"2".to_vec()),
                "a transaction reads its own writes"
            );
            Ok(7)
        });
    assert_eq!(committed.unwrap(), 7);
    assert_eq!(a.get("k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(b.get("k").unwrap(), Some(b"2".to_vec()));

    let aborted = (&a, &b).transaction(|(a, b)| {
        a.insert("k", "changed")?;
        b.remove("k")?;
        Err::<(), _>(TransactionError::Abort("no"))
    });
    assert!(matches!(aborted, Err(TransactionError::Abort("no"))));
    assert_eq!(a.get("k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(b.get("k").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_write_inside_a_transaction_fails_instead_of_waiting_for_itself() {
    let db = Db::temporary().unwrap();
    let (a, b) = (db.open_tree("a").unwrap(), db.open_tree("b").unwrap());
    let result = a.transaction(|a| {
        a.insert("k", "1")?;
        // Reads are free; a write outside the transaction's trees would deadlock.
        assert_eq!(b.get("k")?, None);
        Ok::<_, TransactionError<()>>(b.insert("k", "2").is_err())
    });
    assert!(result.unwrap(), "the nested write was refused");
    // The mark is cleared: writes go on.
    b.insert("k", "3").unwrap();
    assert_eq!(a.get("k").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn flushed_writes_and_ids_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE);
    let first = {
        let db = Db::open(&path, 1 << 20).unwrap();
        db.open_tree("t").unwrap().insert("k", "v").unwrap();
        let ids = (db.generate_id().unwrap(), db.generate_id().unwrap());
        assert!(ids.1 > ids.0);
        db.flush().unwrap();
        ids.1
    };
    let db = Db::open(&path, 1 << 20).unwrap();
    assert_eq!(
        db.open_tree("t").unwrap().get("k").unwrap(),
        Some(b"v".to_vec())
    );
    assert!(
        db.generate_id().unwrap() > first,
        "an id is never handed out twice"
    );
    db.advance_ids(first + 5 * ID_STEP).unwrap();
    assert!(db.generate_id().unwrap() > first + 5 * ID_STEP);
    assert!(db.size_on_disk().unwrap() > 0);
}

#[test]
fn a_snapshot_restores_into_an_equal_database() {
    use crate::snapshot::{restore, write, Expect, Header, Progress};
    let db = Db::temporary().unwrap();
    let (a, b) = (db.open_tree("a").unwrap(), db.open_tree("b").unwrap());
    // More than a restore commits at once.
    let mut batch = Batch::default();
    for i in 0..25_000u32 {
        batch.insert(i.to_be_bytes(), i.to_le_bytes());
    }
    a.apply_batch(batch).unwrap();
    b.insert("k", "v").unwrap();
    let mut body = Vec::new();
    assert_eq!(write(&db, &mut body).unwrap(), 25_001);
    let mut file = Header::file_start("memory-svc", body.len() as u64);
    file.extend(body);

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("restored");
    let expect = Expect {
        service: "memory-svc",
        accept_unlabelled: false,
    };
    let count = restore::<Restoring>(expect, &data_dir, &file[..], &mut Progress::hidden());
    assert_eq!(count.unwrap(), 25_001);
    let restored = Db::open(&data_dir.join(FILE), 1 << 20).unwrap();
    assert_eq!(restored.tree_names().unwrap(), db.tree_names().unwrap());
    for name in db.tree_names().unwrap() {
        let (from, to) = (
            db.open_tree(&name).unwrap(),
            restored.open_tree(&name).unwrap(),
        );
        assert_eq!(entries(to.iter()), entries(from.iter()), "tree {name}");
    }
}

#[test]
fn storage_errors_keep_their_kind() {
    let full = Error::Io(std::io::Error::from(std::io::ErrorKind::StorageFull));
    assert_eq!(StorageError::from(full).kind(), StorageErrorKind::Full);
    let corrupt = Error::Corrupted("page".into());
    assert_eq!(
        StorageError::from(corrupt).kind(),
        StorageErrorKind::Corrupt
    );
    assert!(io_failure(&Error::Io(std::io::Error::other("boom"))).is_some());
}

#[test]
fn an_open_database_holds_its_file_lock() {
    use fs2::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE);
    let db = Db::open(&path, 1 << 20).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    assert!(
        file.try_lock_exclusive().is_err(),
        "the lock file::released waits for"
    );
    drop(db);
    file.try_lock_exclusive().unwrap();
}
