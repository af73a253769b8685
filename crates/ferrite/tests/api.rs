//! The public API's conveniences: keys and values of any byte type (`impl AsRef<[u8]>`) in
//! trees, batches and transactions; ranges of any key type, prefixes, `first` and `last`,
//! checked against a `BTreeMap` model; and `Db::flush`, which makes commits made with
//! `Durability::None` durable (checked on a crash image of the open database), costs
//! nothing when nothing is pending, and fails where nothing can be made durable.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{copy_dir, seeds, sim_options, tiny, Rng, TempDir};
use ferrite::testing::SimDisk;
use ferrite::{Db, Durability, Error, Iter, Options, Tree, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Options for the tests of what the API accepts and returns: no workers, and commits that
/// do not wait for the disk (thousands of puts, no sync each).
fn quick() -> Options {
    Options { workers: 0, durability: Durability::None, ..tiny(64) }
}

/// A scan's entries.
fn entries(iter: Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.collect::<ferrite::Result<_>>().expect("a scan")
}

/// The model's entries, as a scan returns them.
fn model_entries<'a>(
    iter: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn keys_and_values_are_any_byte_strings() {
    let dir = TempDir::with_prefix("api-asref").unwrap();
    let db = Db::open(dir.path(), quick()).unwrap();
    let tree = db.tree("t").unwrap();
    let owned_key = b"vec".to_vec();
    tree.put(b"array", b"bytes").unwrap();
    tree.put("str", "text").unwrap();
    tree.put(String::from("string"), String::from("owned text")).unwrap();
    tree.put(&owned_key, owned_key.clone()).unwrap();
    tree.put(&b"slice"[..], &b"borrowed"[..]).unwrap();
    tree.put([1u8, 2], 7u64.to_le_bytes()).unwrap();

    assert_eq!(tree.get("array").unwrap(), Some(b"bytes".to_vec()));
    assert_eq!(tree.get(b"str").unwrap(), Some(b"text".to_vec()));
    assert_eq!(tree.get(String::from("string")).unwrap(), Some(b"owned text".to_vec()));
    assert_eq!(tree.get(&owned_key).unwrap(), Some(b"vec".to_vec()));
    assert_eq!(tree.get(owned_key).unwrap(), Some(b"vec".to_vec()));
    assert_eq!(tree.get(&b"slice"[..]).unwrap(), Some(b"borrowed".to_vec()));
    assert_eq!(tree.get(vec![1u8, 2]).unwrap(), Some(7u64.to_le_bytes().to_vec()));
    assert_eq!(tree.get_with("str", |value| value.len()).unwrap(), Some(4));
    assert!(tree.update(String::from("str"), |value| value[0] = b'T').unwrap());
    assert_eq!(tree.get("str").unwrap(), Some(b"Text".to_vec()));
    assert!(tree.delete("array").unwrap());
    assert!(!tree.delete(Vec::from("array")).unwrap());
    // An empty key is refused whatever its type.
    assert!(matches!(tree.put("", "x"), Err(Error::KeyEmpty)));
    assert!(matches!(tree.get(String::new()), Err(Error::KeyEmpty)));

    // Objects: any key and bytes type too.
    tree.write_at("object", 4096, vec![9u8; 10]).unwrap();
    assert_eq!(tree.append(String::from("object"), "!").unwrap(), 4107);
    assert_eq!(tree.object_len(b"object").unwrap(), Some(4107));
    let mut buf = [0u8; 2];
    assert_eq!(tree.read_at("object", 4105, &mut buf).unwrap(), Some(2));
    assert_eq!(&buf, b"\x09!");
    assert!(tree.truncate("object", 4096).unwrap());
    assert_eq!(tree.object_stat("object").unwrap().map(|stat| stat.len), Some(4096));

    // A batch of every kind of key and value commits whole.
    let other = db.tree("other").unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put(&tree, "b-str", "one")
        .put(&tree, String::from("b-string"), Vec::from("two"))
        .put(&other, b"b-array", [3u8])
        .put(&other, vec![b'b', b'-', b'v'], &b"four"[..])
        .delete(&tree, String::from("string"));
    db.write(&batch).unwrap();
    assert_eq!(tree.get("b-str").unwrap(), Some(b"one".to_vec()));
    assert_eq!(tree.get("b-string").unwrap(), Some(b"two".to_vec()));
    assert_eq!(other.get("b-array").unwrap(), Some(vec![3]));
    assert_eq!(other.get("b-v").unwrap(), Some(b"four".to_vec()));
    assert_eq!(tree.get("string").unwrap(), None);

    // And a transaction.
    let mut txn = db.transaction();
    assert_eq!(txn.get(&tree, String::from("b-str")).unwrap(), Some(b"one".to_vec()));
    txn.put(&tree, "t-str", String::from("five")).unwrap();
    txn.delete(&tree, b"b-str").unwrap();
    txn.commit().unwrap();
    assert_eq!(tree.get("t-str").unwrap(), Some(b"five".to_vec()));
    assert_eq!(tree.get("b-str").unwrap(), None);
    db.close().unwrap();
}

/// A tree of `keys` (each key its own value), and its model.
fn filled(db: &Db, name: &str, keys: impl IntoIterator<Item = Vec<u8>>) -> (Tree, Model) {
    let tree = db.tree(name).unwrap();
    let mut model = Model::new();
    for key in keys {
        tree.put(&key, &key).unwrap();
        model.insert(key.clone(), key);
    }
    (tree, model)
}

#[test]
fn ranges_take_bounds_of_any_key_type() {
    let dir = TempDir::with_prefix("api-range").unwrap();
    let db = Db::open(dir.path(), quick()).unwrap();
    let words = ["apple", "banana", "cherry", "damson", "elder", "fig"];
    let (tree, model) = filled(&db, "words", words.map(|w| w.as_bytes().to_vec()));
    let want = |range: (Bound<&str>, Bound<&str>)| {
        let range =
            (range.0.map(|k| k.as_bytes().to_vec()), range.1.map(|k| k.as_bytes().to_vec()));
        model_entries(model.range(range))
    };
    use Bound::{Excluded, Included, Unbounded};

    assert_eq!(entries(tree.range("b".."d")), want((Included("b"), Excluded("d"))));
    assert_eq!(
        entries(tree.range("banana"..="damson")),
        want((Included("banana"), Included("damson")))
    );
    assert_eq!(entries(tree.range("c"..)), want((Included("c"), Unbounded)));
    assert_eq!(entries(tree.range(..="cherry")), want((Unbounded, Included("cherry"))));
    let (low, high) = (String::from("banana"), String::from("elder"));
    assert_eq!(
        entries(tree.range(low.clone()..high.clone())),
        want((Included("banana"), Excluded("elder")))
    );
    assert_eq!(entries(tree.range(b"cherry".to_vec()..)), want((Included("cherry"), Unbounded)));
    assert_eq!(entries(tree.range(..b"banana".to_vec())), want((Unbounded, Excluded("banana"))));
    assert_eq!(entries(tree.range(&b"b"[..]..&b"e"[..])), want((Included("b"), Excluded("e"))));
    assert_eq!(entries(tree.range::<&[u8], _>(..)), want((Unbounded, Unbounded)));
    assert_eq!(
        entries(tree.range::<[u8], _>((Excluded(&b"apple"[..]), Unbounded))),
        want((Excluded("apple"), Unbounded))
    );
    assert_eq!(
        entries(tree.range::<str, _>((Excluded("banana"), Included("elder")))),
        want((Excluded("banana"), Included("elder")))
    );
    // An empty range, and one past every key.
    assert_eq!(entries(tree.range("c".."c")), []);
    assert_eq!(entries(tree.range("zzz"..)), []);

    // Reversed: the same entries, from the other end.
    let reversed = |iter: Iter| {
        let mut entries = entries(iter);
        entries.reverse();
        entries
    };
    assert_eq!(reversed(tree.range_rev("b".."d")), want((Included("b"), Excluded("d"))));
    assert_eq!(reversed(tree.range_rev(low..=high)), want((Included("banana"), Included("elder"))));
    assert_eq!(reversed(tree.range_rev(..b"d".to_vec())), want((Unbounded, Excluded("d"))));
    assert_eq!(reversed(tree.range_rev::<&[u8], _>(..)), want((Unbounded, Unbounded)));
    assert_eq!(reversed(tree.iter_rev()), entries(tree.iter()));
    db.close().unwrap();
}

/// The keys the prefix tests use: short, of bytes that sit at the edges of the increment
/// (0x00, 0xfe, 0xff) and in between.
fn edge_key(rng: &mut Rng) -> Vec<u8> {
    const BYTES: [u8; 6] = [0x00, 0x01, b'a', b'b', 0xfe, 0xff];
    let len = 1 + rng.index(5);
    (0..len).map(|_| BYTES[rng.index(BYTES.len())]).collect()
}

#[test]
fn prefixes_match_a_model_at_the_edges() {
    for seed in seeds(8) {
        let dir = TempDir::with_prefix("api-prefix").unwrap();
        let db = Db::open(dir.path(), quick()).unwrap();
        let mut rng = Rng::new(seed);
        let keys: Vec<_> = (0..400).map(|_| edge_key(&mut rng)).collect();
        let (tree, model) = filled(&db, "t", keys);
        let mut prefixes: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"\xff".to_vec(),
            b"\xff\xff".to_vec(),
            b"\xff\xff\xff\xff\xff\xff".to_vec(),
            b"a\xff".to_vec(),
            b"a\xff\xff".to_vec(),
            b"\xfe\xff".to_vec(),
            b"\x00".to_vec(),
            b"a".to_vec(),
            b"zz".to_vec(), // matches nothing
        ];
        prefixes.extend((0..40).map(|_| edge_key(&mut rng)));
        for prefix in &prefixes {
            let want = model_entries(model.iter().filter(|(key, _)| key.starts_with(prefix)));
            assert_eq!(entries(tree.prefix(prefix)), want, "seed {seed}: prefix {prefix:x?}");
            let mut back = entries(tree.prefix_rev(prefix));
            back.reverse();
            assert_eq!(back, want, "seed {seed}: reverse prefix {prefix:x?}");
        }
        assert_eq!(entries(tree.prefix("zz")), []);
        assert_eq!(entries(tree.prefix([])), entries(tree.iter()));
        db.close().unwrap();
    }
}

#[test]
fn first_and_last_are_the_ends_of_the_tree() {
    let dir = TempDir::with_prefix("api-ends").unwrap();
    let db = Db::open(dir.path(), quick()).unwrap();
    let tree = db.tree("t").unwrap();
    assert_eq!(tree.first().unwrap(), None);
    assert_eq!(tree.last().unwrap(), None);
    tree.put("m", "1").unwrap();
    let only = Some((b"m".to_vec(), b"1".to_vec()));
    assert_eq!((tree.first().unwrap(), tree.last().unwrap()), (only.clone(), only));

    let mut rng = Rng::new(seeds(1)[0]);
    let mut model = Model::from([(b"m".to_vec(), b"1".to_vec())]);
    for step in 0..600 {
        let key = edge_key(&mut rng);
        match rng.below(3) {
            0 => {
                tree.delete(&key).unwrap();
                model.remove(&key);
            }
            _ => {
                tree.put(&key, step.to_string()).unwrap();
                model.insert(key, step.to_string().into_bytes());
            }
        }
        let ends = |entry: Option<(&Vec<u8>, &Vec<u8>)>| entry.map(|(k, v)| (k.clone(), v.clone()));
        assert_eq!(tree.first().unwrap(), ends(model.first_key_value()), "step {step}");
        assert_eq!(tree.last().unwrap(), ends(model.last_key_value()), "step {step}");
    }
    // Emptied again.
    for key in model.keys() {
        tree.delete(key).unwrap();
    }
    assert_eq!((tree.first().unwrap(), tree.last().unwrap()), (None, None));
    db.close().unwrap();
}

/// Whether the crash image of the open database in `dir` (copied into `image`) holds
/// `keys` of tree `t`, each its own value: all of them (true) or none (false; the tree
/// itself may be missing). Some but not all fails the test: in these tests nothing but
/// `Db::flush` writes the log, so a crash keeps every put or none.
fn image_holds(dir: &std::path::Path, image: &std::path::Path, keys: &[String]) -> bool {
    copy_dir(dir, image);
    let db = Db::open(image, Options { workers: 0, ..tiny(64) }).unwrap();
    let tree = match db.open_tree("t") {
        Ok(tree) => tree,
        Err(Error::TreeNotFound { .. }) => return false,
        Err(e) => panic!("opening the image's tree: {e}"),
    };
    let found = keys.iter().filter(|key| tree.get(key).unwrap() == Some(key.as_bytes().to_vec()));
    let found = found.count();
    assert!(found == 0 || found == keys.len(), "{found} of {} keys in the image", keys.len());
    db.close().unwrap();
    found == keys.len()
}

#[test]
fn flush_makes_commits_without_durability_survive_a_crash() {
    let dir = TempDir::with_prefix("api-flush").unwrap();
    let options = Options { workers: 0, durability: Durability::None, ..tiny(256) };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    let keys: Vec<String> = (0..200).map(|i| format!("key-{i:03}")).collect();
    for key in &keys {
        tree.put(key, key).unwrap();
    }
    // Nothing wrote the log yet (no sync asked, no buffer full, no checkpoint): a crash
    // now loses the puts, so the image after the flush shows the flush's work.
    let before = TempDir::with_prefix("api-flush-before").unwrap();
    assert!(!image_holds(dir.path(), before.path(), &keys), "the puts before a flush");
    db.flush().unwrap();
    let after = TempDir::with_prefix("api-flush-image").unwrap();
    assert!(image_holds(dir.path(), after.path(), &keys), "the puts after a flush");
    db.close().unwrap();
}

#[test]
fn flush_in_a_task_makes_its_puts_durable() {
    let dir = TempDir::with_prefix("api-flush-task").unwrap();
    let options = Options { workers: 1, durability: Durability::None, ..tiny(256) };
    let db = std::sync::Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("t").unwrap();
    let keys: Vec<String> = (0..50).map(|i| format!("task-{i:02}")).collect();
    let (task_db, task_keys) = (db.clone(), keys.clone());
    db.spawn(async move {
        for key in &task_keys {
            tree.put_async(key, key).await?;
        }
        task_db.flush_async().await
    })
    .unwrap()
    .wait()
    .unwrap();
    let image = TempDir::with_prefix("api-flush-task-image").unwrap();
    assert!(image_holds(dir.path(), image.path(), &keys), "the task's puts after its flush");
}

#[test]
fn flush_syncs_only_what_is_pending_and_reports_a_failed_log() {
    let disk = SimDisk::new(1);
    let options = Options { durability: Durability::None, ..sim_options(&disk) };
    let db = Db::open("sim", options).unwrap();
    let tree = db.tree("t").unwrap();
    tree.put("a", "1").unwrap();
    let syncs = disk.syncs();
    db.flush().unwrap();
    assert!(disk.syncs() > syncs, "a flush with a put pending syncs the log");
    let syncs = disk.syncs();
    db.flush().unwrap();
    db.flush().unwrap();
    assert_eq!(disk.syncs(), syncs, "a flush with nothing pending syncs nothing");

    // The log's sync fails: the flush says so, and so does every flush after it.
    tree.put("b", "2").unwrap();
    disk.fail_next_sync();
    assert!(db.flush().is_err(), "a failed sync is a failed flush");
    assert!(matches!(db.flush(), Err(Error::LogFailed { .. })));
    db.abandon();
}

#[test]
fn flush_of_a_read_only_database_is_an_error() {
    let dir = TempDir::with_prefix("api-flush-ro").unwrap();
    let db = Db::open(dir.path(), quick()).unwrap();
    db.tree("t").unwrap().put("k", "v").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, read_only: true, ..tiny(64) }).unwrap();
    assert!(matches!(db.flush(), Err(Error::ReadOnly)));
    assert_eq!(db.tree("t").unwrap().get("k").unwrap(), Some(b"v".to_vec()));
}

/// Iterators are double-ended: `next` and `next_back` taken in a random order over random
/// ranges (forward and `range_rev`) give exactly what the model's double-ended range gives,
/// each entry once, over a tree of many leaves (some keys still in the change buffer, which
/// the cursors merge in). A back end begun after the front has moved stops where it is.
#[test]
fn ranges_are_double_ended_like_the_model() {
    for seed in seeds(6) {
        let dir = TempDir::with_prefix("api-double-ended").unwrap();
        let db = Db::open(dir.path(), Options { change_buffer_bytes: Some(64 << 10), ..quick() })
            .unwrap();
        let tree = db.tree("t").unwrap();
        let mut rng = Rng::new(seed);
        let mut model = Model::new();
        for i in 0..3000u64 {
            let key = format!("k{:05}", rng.below(5000)).into_bytes();
            let value = vec![b'v'; (i % 300) as usize];
            tree.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        for round in 0..40 {
            let a = format!("k{:05}", rng.below(5200)).into_bytes();
            let b = format!("k{:05}", rng.below(5200)).into_bytes();
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            let reverse = round % 2 == 1;
            let mut iter = match reverse {
                false => tree.range(low.clone()..high.clone()),
                true => tree.range_rev(low.clone()..high.clone()),
            };
            let mut expected = model.range(low..high).map(|(k, v)| (k.clone(), v.clone()));
            loop {
                let back = rng.below(3) == 0;
                let got = if back { iter.next_back() } else { iter.next() };
                // A `range_rev` iterator's front is the model's back, and its back the front.
                let want = if back == reverse { expected.next() } else { expected.next_back() };
                let done = want.is_none();
                assert_eq!(
                    got.map(Result::unwrap),
                    want,
                    "seed {seed}, round {round}, back {back}"
                );
                if done {
                    break;
                }
            }
            assert!(iter.next().is_none() && iter.next_back().is_none(), "ended stays ended");
        }
        drop(tree);
        db.close().unwrap();
    }
}

/// The pool counts the pages it reads from disk per tree: after a reopen (a cold pool), a
/// scan of one tree reads its pages and no other tree's; the catalog's own reads are named;
/// a Value page counts for its tree; a dropped tree's reads stay, under its number.
#[test]
fn reads_are_counted_per_tree() {
    let dir = TempDir::with_prefix("reads-by-tree").unwrap();
    let options = || Options { direct_io: false, ..quick() };
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for (name, count) in [("big", 3000u32), ("small", 40), ("doomed", 500)] {
            let tree = db.tree(name).unwrap();
            for i in 0..count {
                tree.put(i.to_be_bytes(), [name.len() as u8; 100]).unwrap();
            }
        }
        // One value long enough for a Value page.
        db.tree("small").unwrap().put(b"long", [9u8; 3000]).unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    let count = |name: &str| {
        let reads = db.reads_by_tree().unwrap();
        reads.iter().find(|(n, _)| n == name).map_or(0, |&(_, pages)| pages)
    };
    let big = db.tree("big").unwrap();
    let before_scan = count("big");
    assert_eq!(big.iter().count(), 3000);
    // 3000 entries of ~110 bytes: about 90 leaves and their inner node, read once each.
    let scanned = count("big") - before_scan;
    assert!((80..=140).contains(&scanned), "{scanned} pages of big read by its scan");
    assert_eq!(count("small"), 0, "a tree nobody read");
    assert!(count("(catalog)") > 0, "opening the trees read the catalog");
    let small = db.tree("small").unwrap();
    assert_eq!(small.get(b"long").unwrap().map(|v| v.len()), Some(3000));
    assert!(count("small") >= 2, "its leaf and the Value page: {}", count("small"));
    // Most read first.
    let reads = db.reads_by_tree().unwrap();
    assert_eq!(reads[0].0, "big", "{reads:?}");
    assert!(reads.windows(2).all(|w| w[0].1 >= w[1].1), "{reads:?}");
    // A dropped tree keeps the reads it had, under its number.
    let doomed = db.tree("doomed").unwrap();
    assert_eq!(doomed.iter().count(), 500);
    let doomed_reads = count("doomed");
    assert!(doomed_reads > 0);
    drop(doomed);
    db.drop_tree("doomed").unwrap();
    let reads = db.reads_by_tree().unwrap();
    let dropped: Vec<_> = reads.iter().filter(|(n, _)| n.starts_with("(dropped tree ")).collect();
    assert_eq!(dropped.len(), 1, "{reads:?}");
    assert!(dropped[0].1 >= doomed_reads, "{reads:?}");
}

/// The census of the pool names each tree's pages in memory, and the dirty ones: after a
/// reopen nothing of a tree is in memory until it is read; a scan brings its pages in
/// clean; puts make some dirty, and a flush writes them back.
#[test]
fn the_pool_census_counts_pages_per_tree() {
    let dir = TempDir::with_prefix("resident-by-tree").unwrap();
    // A pool of 1,024 pages: room for every page of both trees.
    let options = || Options { direct_io: false, pool_bytes: 4 << 20, ..quick() };
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for (name, count) in [("big", 3000u32), ("small", 40)] {
            let tree = db.tree(name).unwrap();
            for i in 0..count {
                tree.put(i.to_be_bytes(), [name.len() as u8; 100]).unwrap();
            }
        }
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    let census = |name: &str| {
        let census = db.resident_by_tree().unwrap();
        census.iter().find(|t| t.name == name).map_or((0, 0), |t| (t.pages, t.dirty))
    };
    assert_eq!(census("big"), (0, 0), "{:?}", db.resident_by_tree().unwrap());
    let big = db.tree("big").unwrap();
    assert_eq!(big.iter().count(), 3000);
    // About 90 leaves and their inner node, all in a pool this size, none changed.
    let (pages, dirty) = census("big");
    assert!((80..=140).contains(&pages), "{pages} pages of big in memory");
    assert_eq!(dirty, 0);
    let census_now = db.resident_by_tree().unwrap();
    assert_eq!(census_now[0].name, "big", "most first: {census_now:?}");
    assert!(census_now.iter().map(|t| t.pages).sum::<u64>() <= db.stats().unwrap().pool.pool_pages);
    // Puts into a few leaves of big: those leaves are dirty until written back.
    for i in [0u32, 1500, 2999] {
        big.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    let (_, dirty) = census("big");
    assert!((1..=6).contains(&dirty), "{dirty} pages of big dirty after three puts");
    db.flush().unwrap();
    db.checkpoint().unwrap();
    assert_eq!(census("big").1, 0, "written back");
}
