//! Close and reopen, scans with every kind of bound, trees created and dropped, and every
//! error a caller can run into.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{assert_check, copy_dir, tiny, TempDir};
use ferrite::{Db, Error, Options, MAX_KEY_LEN, MAX_VALUE_LEN, PAGE_FILE_NAME};

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i:08}-{}", "v".repeat((i % 97) as usize)).into_bytes()
}

#[test]
fn reopen_with_data_fifty_times_the_pool() {
    let dir = TempDir::with_prefix("reopen").unwrap();
    let pool_pages = 16;
    let n = 40_000u64; // ~5 MiB of entries against a 64 KiB pool
    {
        let db = Db::open(dir.path(), tiny(pool_pages)).unwrap();
        let a = db.tree("a").unwrap();
        let b = db.tree("b").unwrap();
        for i in 0..n {
            a.put(key(i), value(i)).unwrap();
            if i % 4 == 0 {
                b.put(key(i * 7), value(i)).unwrap();
            }
        }
        let stats = db.stats().unwrap();
        assert!(
            stats.pool.page_count >= 50 * pool_pages,
            "data ({} pages) should be 50x the pool ({pool_pages})",
            stats.pool.page_count
        );
        assert!(stats.pool.evictions > 0 && stats.pool.reads > 0);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), tiny(pool_pages)).unwrap();
    assert_eq!(db.tree_names().unwrap(), vec!["a".to_string(), "b".to_string()]);
    let a = db.open_tree("a").unwrap();
    let b = db.open_tree("b").unwrap();
    for i in 0..n {
        assert_eq!(a.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    assert_eq!(b.iter().count() as u64, n / 4);
    assert_check(&db);
    db.close().unwrap();
}

#[test]
fn scans_cross_many_leaves_with_every_bound() {
    let dir = TempDir::with_prefix("scans").unwrap();
    let db = Db::open(dir.path(), tiny(20)).unwrap();
    let tree = db.tree("s").unwrap();
    let mut model = BTreeMap::new();
    for i in (0..6000u64).map(|i| i * 3) {
        tree.put(key(i), value(i)).unwrap();
        model.insert(key(i).to_vec(), value(i));
    }
    let points = [0u64, 1, 3, 299, 300, 9000, 17_997, 17_998, 20_000];
    let mut bounds = vec![Bound::Unbounded];
    for p in points {
        bounds.push(Bound::Included(key(p).to_vec()));
        bounds.push(Bound::Excluded(key(p).to_vec()));
    }
    for lo in &bounds {
        for hi in &bounds {
            let range = (lo.clone(), hi.clone());
            let valid = match (lo, hi) {
                (Bound::Included(a), Bound::Included(b)) => a <= b,
                (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
                (
                    Bound::Included(a) | Bound::Excluded(a),
                    Bound::Included(b) | Bound::Excluded(b),
                ) => a < b,
            };
            if !valid {
                continue;
            }
            let want: Vec<_> =
                model.range(range.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
            let slices = (lo.as_ref().map(|k| k.as_slice()), hi.as_ref().map(|k| k.as_slice()));
            let forward: Vec<_> = tree.range::<&[u8], _>(slices).collect::<Result<_, _>>().unwrap();
            assert!(forward == want, "forward {lo:?}..{hi:?}");
            let mut backward: Vec<_> =
                tree.range_rev::<&[u8], _>(slices).collect::<Result<_, _>>().unwrap();
            backward.reverse();
            assert!(backward == want, "backward {lo:?}..{hi:?}");
        }
    }
    // Limits are the caller's: take() stops early without reading further leaves.
    let first: Vec<_> = tree.iter().take(5).map(|e| e.unwrap().0).collect();
    assert_eq!(first, (0..5).map(|i| key(i * 3).to_vec()).collect::<Vec<_>>());
    assert_check(&db);
}

#[test]
fn trees_are_created_listed_dropped_and_recreated() {
    let dir = TempDir::with_prefix("trees").unwrap();
    let db = Db::open(dir.path(), tiny(32)).unwrap();
    let orders = db.create_tree("orders").unwrap();
    assert!(matches!(db.create_tree("orders"), Err(Error::TreeExists { .. })));
    for i in 0..5000 {
        orders.put(key(i), value(i)).unwrap();
    }
    db.tree("users").unwrap().put(b"alice", b"1").unwrap();
    assert_eq!(db.tree_names().unwrap(), ["orders", "users"]);
    let before = db.check().unwrap();
    db.drop_tree("orders").unwrap();
    assert!(matches!(orders.get(key(1)), Err(Error::TreeNotFound { name }) if name == "orders"));
    assert!(matches!(db.open_tree("orders"), Err(Error::TreeNotFound { .. })));
    assert!(matches!(db.drop_tree("orders"), Err(Error::TreeNotFound { .. })));
    let after = db.check().unwrap();
    assert!(after.is_ok(), "{:?}", after.all_faults());
    assert!(after.free_pages > before.free_pages, "dropped pages are free for reuse");
    let again = db.create_tree("orders").unwrap();
    assert_eq!(again.get(key(1)).unwrap(), None);
    again.put(key(1), b"new").unwrap();
    // The freed pages are reused before the file grows.
    for i in 0..5000 {
        again.put(key(i), value(i)).unwrap();
    }
    assert_eq!(db.stats().unwrap().pool.page_count, after.page_count);
    assert_check(&db);
    db.close().unwrap();
    let db = Db::open(dir.path(), tiny(32)).unwrap();
    assert_eq!(db.tree_names().unwrap(), ["orders", "users"]);
    assert_eq!(db.open_tree("users").unwrap().get(b"alice").unwrap().as_deref(), Some(&b"1"[..]));
    assert_check(&db);
}

#[test]
fn bad_keys_values_and_names_are_refused() {
    let dir = TempDir::with_prefix("limits").unwrap();
    let db = Db::open(dir.path(), tiny(16)).unwrap();
    let tree = db.tree("t").unwrap();
    let long_key = vec![1u8; MAX_KEY_LEN + 1];
    assert!(
        matches!(tree.put(&long_key, b"v"), Err(Error::KeyTooLarge { len, max }) if len == MAX_KEY_LEN + 1 && max == MAX_KEY_LEN)
    );
    assert!(matches!(tree.get(&long_key), Err(Error::KeyTooLarge { .. })));
    assert!(matches!(tree.put(b"", b"v"), Err(Error::KeyEmpty)));
    // A value past the in-leaf limit is an object; past the largest object it is refused.
    let long_value = vec![1u8; MAX_VALUE_LEN + 1];
    tree.put(b"k", &long_value).unwrap();
    assert_eq!(tree.get(b"k").unwrap(), Some(long_value));
    assert!(matches!(
        tree.truncate(b"k", ferrite::MAX_OBJECT_LEN + 1),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(matches!(
        tree.write_at(b"k", ferrite::MAX_OBJECT_LEN, b"x"),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(matches!(db.tree("\0objects"), Err(Error::BadTreeName { .. })), "Ferrite's own");
    // The largest key with the largest value works, and so does 1 KiB with 1 KiB.
    let max_key = vec![2u8; MAX_KEY_LEN];
    let max_value = vec![3u8; MAX_VALUE_LEN];
    tree.put(&max_key, &max_value).unwrap();
    tree.put([4u8; 1024], [5u8; 1024]).unwrap();
    assert_eq!(tree.get(&max_key).unwrap(), Some(max_value));
    assert_eq!(tree.get([4u8; 1024]).unwrap(), Some(vec![5u8; 1024]));
    assert!(matches!(db.tree(""), Err(Error::BadTreeName { .. })));
    assert!(matches!(db.tree(&"n".repeat(256)), Err(Error::BadTreeName { .. })));
    assert!(matches!(db.open_tree("missing"), Err(Error::TreeNotFound { .. })));
    assert_check(&db);
}

#[test]
fn a_corrupt_page_is_an_error_naming_page_and_file() {
    let dir = TempDir::with_prefix("corrupt").unwrap();
    {
        let db = Db::open(dir.path(), tiny(16)).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..3000 {
            tree.put(key(i), value(i)).unwrap();
        }
        db.close().unwrap();
    }
    let file = dir.path().join(PAGE_FILE_NAME);
    let mut bytes = std::fs::read(&file).unwrap();
    // Page 10 is one of the tree's nodes: flip a byte in its middle.
    let page = 10;
    bytes[page * 4096 + 2000] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let db = Db::open(dir.path(), tiny(16)).unwrap();
    let tree = db.open_tree("t").unwrap();
    let errors: Vec<Error> = (0..3000).filter_map(|i| tree.get(key(i)).err()).collect();
    assert!(!errors.is_empty(), "reading every key must reach the corrupt page");
    for e in &errors {
        match e {
            Error::Corrupt { page: p, file: f, reason } => {
                assert_eq!(*p, page as u64);
                assert_eq!(f, &file);
                assert!(reason.contains("checksum"), "{reason}");
            }
            other => panic!("expected a corruption error, got {other}"),
        }
    }
    let message = errors[0].to_string();
    assert!(message.contains("page 10") && message.contains(PAGE_FILE_NAME), "{message}");
    let report = db.check().unwrap();
    assert!(!report.is_ok());
    assert!(report.all_faults().iter().any(|f| f.contains("page 10")));
}

#[test]
fn directories_that_are_not_databases_are_refused() {
    let dir = TempDir::with_prefix("not-db").unwrap();
    // A file, not a directory.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"hello").unwrap();
    assert!(matches!(Db::open(&file, tiny(16)), Err(Error::NotADatabase { .. })));
    // A directory holding something else.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"hi").unwrap();
    let err = Db::open(&other, tiny(16)).unwrap_err();
    assert!(err.to_string().contains("not a Ferrite data directory"), "{err}");
    // A missing directory when not asked to create one.
    let missing = dir.path().join("missing");
    let options = Options { create_if_missing: false, ..tiny(16) };
    assert!(matches!(Db::open(&missing, options), Err(Error::NotADatabase { .. })));
    assert!(!missing.exists(), "nothing is created when not asked to");
    // A page file that is not ours.
    let fake = dir.path().join("fake");
    std::fs::create_dir(&fake).unwrap();
    std::fs::write(fake.join(PAGE_FILE_NAME), vec![7u8; 8192]).unwrap();
    let err = Db::open(&fake, tiny(16)).unwrap_err();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
}

/// Every file under `dir` (but the lock file) and its bytes, by path.
fn dir_bytes(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name() != Some(std::ffi::OsStr::new("LOCK")) {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_directory_opens_once_and_an_unclean_one_is_recovered() {
    let dir = TempDir::with_prefix("lock").unwrap();
    let db = Db::open(dir.path(), tiny(16)).unwrap();
    assert!(matches!(Db::open(dir.path(), tiny(16)), Err(Error::Locked { .. })));
    db.tree("t").unwrap().put(b"k", b"v").unwrap();
    // Simulate a crash: the files as they are while the database is open.
    let copy = TempDir::with_prefix("lock-copy").unwrap();
    copy_dir(dir.path(), copy.path());
    db.close().unwrap();
    // Read-only, the log is replayed into memory: the put is there, and nothing on disk
    // changes (a writable open recovers the same state below).
    let before = dir_bytes(copy.path());
    let read_only = Options { read_only: true, create_if_missing: false, ..tiny(16) };
    let image = Db::open(copy.path(), read_only).unwrap();
    assert!(image.recovery_report().in_memory && image.recovery_report().records >= 2);
    assert_eq!(image.open_tree("t").unwrap().get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_check(&image);
    image.close().unwrap();
    assert!(dir_bytes(copy.path()) == before, "a read-only open changed the directory");
    // Opened for writing, recovery replays the log: the acknowledged put is there.
    let recovered = Db::open(copy.path(), tiny(16)).unwrap();
    assert!(recovered.recovery_report().records >= 2, "{:?}", recovered.recovery_report());
    assert_eq!(recovered.open_tree("t").unwrap().get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_check(&recovered);
    drop(recovered);
    // A closed database refuses further use of its handles.
    let db = Db::open(dir.path(), tiny(16)).unwrap();
    assert_eq!(db.recovery_report().pages_applied, 0, "a clean close leaves nothing to replay");
    let tree = db.open_tree("t").unwrap();
    db.close().unwrap();
    assert!(matches!(tree.get(b"k"), Err(Error::Closed)));
}

#[test]
fn bad_options_are_refused() {
    let dir = TempDir::with_prefix("options").unwrap();
    let small_pool = Options { pool_bytes: 4096, ..Options::default() };
    assert!(matches!(Db::open(dir.path(), small_pool), Err(Error::BadOptions { .. })));
    let tiny_file = Options { max_size_bytes: 4096, ..tiny(16) };
    assert!(matches!(Db::open(dir.path(), tiny_file), Err(Error::BadOptions { .. })));
}

#[test]
fn a_full_database_says_so() {
    let dir = TempDir::with_prefix("full").unwrap();
    let options = Options { max_size_bytes: 64 * 4096, ..tiny(16) };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    let mut result = Ok(());
    for i in 0..100_000u64 {
        result = tree.put(key(i), [0u8; 100]);
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(result, Err(Error::DatabaseFull { max_pages: 64 })), "{result:?}");
}

#[test]
fn read_only_changes_nothing_on_disk() {
    let dir = TempDir::with_prefix("read-only").unwrap();
    {
        let db = Db::open(dir.path(), tiny(16)).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..2000 {
            tree.put(key(i), value(i)).unwrap();
        }
        db.close().unwrap();
    }
    let file = dir.path().join(PAGE_FILE_NAME);
    let before = std::fs::read(&file).unwrap();
    let db = Db::open(dir.path(), Options { read_only: true, ..tiny(16) }).unwrap();
    let tree = db.open_tree("t").unwrap();
    for i in (0..2000).step_by(7) {
        assert_eq!(tree.get(key(i)).unwrap(), Some(value(i)));
    }
    assert_eq!(tree.iter().count(), 2000);
    assert!(matches!(tree.put(b"k", b"v"), Err(Error::ReadOnly)));
    assert!(matches!(tree.delete(key(1)), Err(Error::ReadOnly)));
    assert!(matches!(tree.update(key(1), |_| ()), Err(Error::ReadOnly)));
    assert!(matches!(db.create_tree("u"), Err(Error::ReadOnly)));
    assert!(matches!(db.drop_tree("t"), Err(Error::ReadOnly)));
    assert_check(&db);
    db.close().unwrap();
    assert!(before == std::fs::read(&file).unwrap(), "a read-only open wrote to the page file");
    let missing = dir.path().join("missing");
    let err = Db::open(&missing, Options { read_only: true, ..tiny(16) }).unwrap_err();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
}

#[test]
fn pages_striped_over_three_devices_and_the_list_is_enforced() {
    let dir = TempDir::with_prefix("stripe").unwrap();
    let devices: Vec<_> = (0..3).map(|i| dir.path().join(format!("dev{i}"))).collect();
    let striped = |devices: &[std::path::PathBuf]| Options {
        devices: devices.to_vec(),
        stripe_chunk_bytes: 16 * 1024,
        ..tiny(16)
    };
    let data = dir.path().join("data");
    {
        let db = Db::open(&data, striped(&devices)).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..5000 {
            tree.put(key(i), value(i)).unwrap();
        }
        db.close().unwrap();
    }
    for device in &devices {
        let len = std::fs::metadata(device).unwrap().len();
        assert!(len > 0, "every device holds pages: {} is empty", device.display());
    }
    assert!(!data.join(PAGE_FILE_NAME).exists(), "no page file in the directory itself");
    // The same list again: everything is there, also through workers on every device.
    let options = Options { workers: 2, ..striped(&devices) };
    let db = Db::open(&data, options).unwrap();
    let tree = db.open_tree("t").unwrap();
    let handles: Vec<_> = (0..5000u64)
        .step_by(50)
        .map(|i| {
            let tree = tree.clone();
            db.spawn(async move { tree.get_async(&key(i)).await.unwrap() }).unwrap()
        })
        .collect();
    for (n, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait(), Some(value(n as u64 * 50)));
    }
    assert_check(&db);
    db.close().unwrap();
    // Another order, another list, another chunk, or none: refused, naming the list.
    let mut reordered = devices.clone();
    reordered.swap(1, 2);
    for wrong in [
        striped(&reordered),
        striped(&devices[..2]),
        Options { stripe_chunk_bytes: 64 * 1024, ..striped(&devices) },
    ] {
        let err = Db::open(&data, wrong).unwrap_err();
        assert!(matches!(err, Error::BadOptions { .. }), "{err}");
        assert!(err.to_string().contains("dev0"), "{err}");
    }
    let err = Db::open(&data, tiny(16)).unwrap_err();
    assert!(
        err.to_string().contains("keeps its pages on") && err.to_string().contains("dev2"),
        "{err}"
    );
    assert!(!data.join(PAGE_FILE_NAME).exists(), "no empty database was made beside the stripe");
}

/// A value a little past what one Value page holds (4,056 bytes) keeps the rest, its tail, in
/// its leaf: a 4 KiB item with a small header is one page in the pool, not a two-block object.
/// Every way in and out of that form: put, get, update, scans, overwrites to and from the
/// other forms, delete, reopen and the checker.
#[test]
fn values_just_past_a_page_keep_their_tail_in_the_leaf() {
    let page_part = ferrite::MAX_VALUE_LEN - 504; // what a Value page holds
    assert_eq!(page_part, 4056);
    let lengths = [1500, page_part - 1, page_part, page_part + 1, 4116, MAX_VALUE_LEN];
    let patterned = |len: usize, salt: u8| -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
    };
    let dir = TempDir::with_prefix("tails").unwrap();
    let mut model = BTreeMap::new();
    {
        let db = Db::open(dir.path(), tiny(24)).unwrap();
        let tree = db.tree("t").unwrap();
        // Many of each, so that leaves split and pages go in and out of a small pool.
        for i in 0..600u64 {
            let value = patterned(lengths[i as usize % lengths.len()], i as u8);
            tree.put(key(i), &value).unwrap();
            model.insert(key(i).to_vec(), value);
        }
        for (k, v) in &model {
            assert_eq!(tree.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
        }
        // One Value page per value past the leaf's limit (all but the 1,500-byte ones, which
        // sit in their leaves), and no object.
        let report = db.check().unwrap();
        assert_eq!(report.objects.objects, 0);
        assert_eq!(report.trees.iter().map(|(_, t)| t.value_pages).sum::<u64>(), 500);
        // An update changes the page's part and the tail together.
        for i in (0..600u64).step_by(7) {
            let found = tree.update(key(i), |v| v.iter_mut().for_each(|b| *b ^= 0x5a)).unwrap();
            assert!(found);
            model.get_mut(&key(i)[..]).unwrap().iter_mut().for_each(|b| *b ^= 0x5a);
        }
        // Overwrites move values between every form: inline, one page, page and tail, object.
        for i in (0..600u64).step_by(5) {
            let len = [10, page_part, page_part + 300, MAX_VALUE_LEN + 1][(i / 5) as usize % 4];
            let value = patterned(len, 7);
            tree.put(key(i), &value).unwrap();
            model.insert(key(i).to_vec(), value);
        }
        for i in (0..600u64).step_by(11) {
            assert!(tree.delete(key(i)).unwrap());
            model.remove(&key(i)[..]);
        }
        let scanned: Vec<_> = tree.iter().map(|entry| entry.unwrap()).collect();
        let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(scanned == expected, "a scan differs from the model");
        let backwards: Vec<_> =
            tree.range_rev::<&[u8], _>(..).map(|entry| entry.unwrap()).collect();
        assert!(backwards.iter().rev().eq(expected.iter()), "a reverse scan differs");
        assert_check(&db);
    }
    let db = Db::open(dir.path(), tiny(24)).unwrap();
    let tree = db.tree("t").unwrap();
    for (k, v) in &model {
        assert_eq!(tree.get(k).unwrap().as_ref(), Some(v), "key {k:?} after reopening");
    }
    assert_check(&db);
}
