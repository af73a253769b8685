//! What readers see of commits made beside them: a write batch or transaction is visible
//! whole or not at all, to point reads on threads and in tasks, across trees, for values in
//! leaves, on Value pages and in the change buffer.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::collections::BTreeMap;

use common::{seeds, tiny, Rng, TempDir};
use ferrite::{Db, Durability, Error, Options, Snapshot, Tree, WriteBatch};

/// Batches each reader thread sees go by, at least.
const BATCHES: u64 = 3_000;

/// The batch number a value carries (its first 8 bytes).
fn number(value: Option<Vec<u8>>) -> u64 {
    let value = value.expect("the key is always there");
    u64::from_be_bytes(value[..8].try_into().unwrap())
}

/// A value of `len` bytes carrying batch number `n`.
fn value(n: u64, len: usize) -> Vec<u8> {
    let mut v = n.to_be_bytes().to_vec();
    v.resize(len, b'.');
    v
}

/// The keys every batch writes: (tree, key, value length). Spread over two trees, over
/// leaves far apart (the trees are filled first), inline and on a Value page.
fn targets(t: &Tree, u: &Tree) -> Vec<(Tree, Vec<u8>, usize)> {
    vec![
        (t.clone(), b"k0000".to_vec(), 16),
        (t.clone(), b"k1999".to_vec(), 3_000),
        (u.clone(), b"k1000".to_vec(), 16),
        (t.clone(), b"k1000".to_vec(), 100),
    ]
}

/// Reads the batch keys in a random order, over and over while batches are written: every
/// read must see a batch at least as new as the read before it (a reader that saw part of
/// a batch would then see an older value of a key the batch had not reached yet).
fn read_in_order(targets: &[(Tree, Vec<u8>, usize)], done: &AtomicBool, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut last = 0;
    let mut reads = 0;
    while !done.load(Ordering::Acquire) {
        for _ in 0..targets.len() {
            let (tree, key, _) = &targets[rng.below(targets.len() as u64) as usize];
            let n = number(tree.get(key).unwrap());
            assert!(
                n >= last,
                "read batch {n} of {key:?} after batch {last}: part of a batch seen"
            );
            last = n;
            reads += 1;
        }
    }
    reads
}

fn filled(dir: &TempDir, options: Options) -> (Db, Tree, Tree) {
    let db = Db::open(dir.path(), options).unwrap();
    let (t, u) = (db.tree("t").unwrap(), db.tree("u").unwrap());
    for i in 0..2_000u32 {
        let key = format!("k{i:04}");
        t.put(&key, value(0, 100)).unwrap();
        u.put(&key, value(0, 100)).unwrap();
    }
    (db, t, u)
}

#[test]
fn point_reads_see_each_batch_whole_or_not_at_all() {
    let dir = TempDir::with_prefix("isolation-batches").unwrap();
    let options = Options { workers: 0, durability: Durability::None, ..tiny(256) };
    let (db, t, u) = filled(&dir, options);
    let targets = targets(&t, &u);
    for (tree, key, len) in &targets {
        tree.put(key, value(0, *len)).unwrap();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (targets, done) = (&targets, &done);
                s.spawn(move || read_in_order(targets, done, 7 + r))
            })
            .collect();
        for n in 1..=BATCHES {
            let mut batch = WriteBatch::new();
            for (tree, key, len) in &targets {
                batch.put(tree, key, value(n, *len));
            }
            db.write(&batch).unwrap();
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
    for (tree, key, _) in &targets {
        assert_eq!(number(tree.get(key).unwrap()), BATCHES);
    }
}

#[test]
fn transactions_are_seen_whole_by_tasks_and_threads() {
    let dir = TempDir::with_prefix("isolation-txn").unwrap();
    let options = Options { workers: 2, durability: Durability::None, ..tiny(256) };
    let (db, t, u) = filled(&dir, options);
    let targets = Arc::new(targets(&t, &u));
    for (tree, key, len) in targets.iter() {
        tree.put(key, value(0, *len)).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    // Readers in tasks, on both workers, beside a reader thread.
    let tasks: Vec<_> = (0..4u64)
        .map(|r| {
            let (targets, done) = (targets.clone(), done.clone());
            db.spawn(async move {
                let mut rng = Rng::new(100 + r);
                let (mut last, mut reads) = (0, 0u64);
                while !done.load(Ordering::Acquire) {
                    let (tree, key, _) = &targets[rng.below(targets.len() as u64) as usize];
                    let n = number(tree.get_async(key).await.unwrap());
                    assert!(n >= last, "a task read batch {n} after batch {last}");
                    last = n;
                    reads += 1;
                    if reads % 16 == 0 {
                        ferrite::sched::yield_now().await;
                    }
                }
                reads
            })
            .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        let reader = s.spawn(|| read_in_order(&targets, &done, 3));
        for n in 1..=BATCHES / 2 {
            let mut txn = db.transaction();
            for (tree, key, len) in targets.iter() {
                // Read-modify-write: the transaction's value follows what it read.
                let seen = number(txn.get(tree, key).unwrap());
                assert_eq!(seen, n - 1);
                txn.put(tree, key, value(seen + 1, *len)).unwrap();
            }
            txn.commit().unwrap();
        }
        done.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
    });
    for task in tasks {
        assert!(task.wait() > 0);
    }
}

type Model = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys per tree in the snapshot model test: leaves far beyond the pool.
const KEYS: u64 = 1_500;

/// Checks snapshot `snap` of trees `trees` against the models of the moment it was taken:
/// every entry forward and backward, and point reads of keys present and absent.
fn check_snapshot(snap: &Snapshot, trees: &[Tree], models: &[Model], rng: &mut Rng) {
    for (tree, model) in trees.iter().zip(models) {
        let forward: Vec<_> = snap.iter(tree).collect::<ferrite::Result<_>>().unwrap();
        let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(
            forward == expected,
            "snapshot {} of {}: the scan differs",
            snap.seq(),
            tree.name()
        );
        let mut backward: Vec<_> = snap.iter_rev(tree).collect::<ferrite::Result<_>>().unwrap();
        backward.reverse();
        assert!(backward == expected, "snapshot {}: the reverse scan differs", snap.seq());
        for _ in 0..20 {
            let key = format!("k{:04}", rng.below(KEYS)).into_bytes();
            assert_eq!(snap.get(tree, &key).unwrap(), model.get(&key).cloned(), "key {key:?}");
        }
    }
}

/// Random batches over two trees (inline values and values on Value pages, deletes; a pool
/// of a few pages, so that old versions of evicted pages are read back from the file, and a
/// change buffer), with up to four snapshots alive at a time, each checked against a copy of
/// the model taken with it, while later batches change what it saw.
#[test]
fn snapshots_read_every_tree_as_of_their_moment() {
    for seed in 1..=6u64 {
        let dir = TempDir::with_prefix("isolation-snapshots").unwrap();
        let options = Options {
            workers: 0,
            durability: Durability::None,
            change_buffer_bytes: Some(16 << 10),
            direct_io: false,
            ..tiny(48)
        };
        let db = Db::open(dir.path(), options).unwrap();
        let trees = [db.tree("t").unwrap(), db.tree("u").unwrap()];
        let mut models = [Model::new(), Model::new()];
        let mut rng = Rng::new(seed);
        for i in 0..KEYS {
            for (tree, model) in trees.iter().zip(models.iter_mut()) {
                let (key, value) = (format!("k{i:04}").into_bytes(), vec![b'0'; 100]);
                tree.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        let mut snaps: Vec<(Snapshot, [Model; 2])> = Vec::new();
        let mut buffered = 0;
        for round in 0..300 {
            let mut batch = WriteBatch::new();
            for _ in 0..1 + rng.below(6) {
                let t = rng.below(2) as usize;
                let key = format!("k{:04}", rng.below(KEYS)).into_bytes();
                if rng.below(5) == 0 {
                    batch.delete(&trees[t], &key);
                    models[t].remove(&key);
                } else {
                    let len = if rng.below(8) == 0 {
                        1_600 + rng.below(2_000)
                    } else {
                        1 + rng.below(120)
                    };
                    let value = vec![b'a' + (round % 26) as u8; len as usize];
                    batch.put(&trees[t], &key, &value);
                    models[t].insert(key, value);
                }
            }
            db.write(&batch).unwrap();
            // Single puts too: into leaves out of memory, they wait in the change buffer.
            let key = format!("k{:04}", rng.below(KEYS)).into_bytes();
            trees[1].put(&key, b"single").unwrap();
            models[1].insert(key, b"single".to_vec());
            buffered = buffered.max(db.change_buffer().0);
            if rng.below(10) == 0 && snaps.len() < 4 {
                snaps.push((db.snapshot().unwrap(), models.clone()));
            }
            if rng.below(15) == 0 && !snaps.is_empty() {
                let at = rng.below(snaps.len() as u64) as usize;
                let (snap, seen) = &snaps[at];
                check_snapshot(snap, &trees, seen, &mut rng);
                if rng.below(2) == 0 {
                    snaps.remove(at);
                }
            }
        }
        for (snap, seen) in &snaps {
            check_snapshot(snap, &trees, seen, &mut rng);
        }
        assert!(buffered > 0, "puts waited in the change buffer");
        assert!(db.stats().unwrap().snapshots == snaps.len() as u64);
        drop(snaps);
        let stats = db.stats().unwrap();
        assert_eq!((stats.snapshots, stats.snapshot_bytes), (0, 0), "every copy dropped");
        // And the trees as they are now.
        for (tree, model) in trees.iter().zip(&models) {
            let now: Vec<_> = tree.iter().collect::<ferrite::Result<_>>().unwrap();
            assert_eq!(now.len(), model.len());
        }
        assert!(db.check().unwrap().is_ok());
    }
}

/// Money moves between accounts in two trees, one batch per transfer, while readers sum
/// every account through snapshots (scans and point reads): the total never changes.
#[test]
fn snapshots_see_transfers_whole_while_they_run() {
    const ACCOUNTS: u64 = 300;
    let dir = TempDir::with_prefix("isolation-transfers").unwrap();
    let options = Options { workers: 0, durability: Durability::None, ..tiny(128) };
    let db = Db::open(dir.path(), options).unwrap();
    let trees = [db.tree("checking").unwrap(), db.tree("savings").unwrap()];
    let key = |i: u64| format!("acct{i:05}").into_bytes();
    for i in 0..ACCOUNTS {
        for tree in &trees {
            tree.put(key(i), 1_000u64.to_be_bytes()).unwrap();
        }
    }
    let total = 2 * ACCOUNTS * 1_000;
    let balance = |v: &[u8]| u64::from_be_bytes(v[..8].try_into().unwrap());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (db, trees, done) = (&db, &trees, &done);
                s.spawn(move || {
                    let mut checked = 0;
                    while !done.load(Ordering::Acquire) {
                        let snap = db.snapshot().unwrap();
                        let mut sum = 0;
                        if r == 0 {
                            for tree in trees {
                                for entry in snap.iter(tree) {
                                    sum += balance(&entry.unwrap().1);
                                }
                            }
                        } else {
                            for i in 0..ACCOUNTS {
                                for tree in trees {
                                    sum += balance(&snap.get(tree, key(i)).unwrap().unwrap());
                                }
                            }
                        }
                        assert_eq!(sum, total, "snapshot {} saw part of a transfer", snap.seq());
                        checked += 1;
                    }
                    checked
                })
            })
            .collect();
        let mut rng = Rng::new(99);
        let mut balances = vec![[1_000u64; 2]; ACCOUNTS as usize];
        for _ in 0..4_000 {
            let (from, to) = (rng.below(ACCOUNTS) as usize, rng.below(ACCOUNTS) as usize);
            let (ft, tt) = (rng.below(2) as usize, rng.below(2) as usize);
            if (from, ft) == (to, tt) {
                continue;
            }
            let amount = rng.below(balances[from][ft] + 1);
            balances[from][ft] -= amount;
            balances[to][tt] += amount;
            let mut batch = WriteBatch::new();
            batch.put(&trees[ft], key(from as u64), balances[from][ft].to_be_bytes());
            batch.put(&trees[tt], key(to as u64), balances[to][tt].to_be_bytes());
            db.write(&batch).unwrap();
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            assert!(reader.join().unwrap() > 0, "each reader checked a snapshot");
        }
    });
    assert_eq!(db.stats().unwrap().snapshot_bytes, 0);
}

/// Plain scans read through a snapshot of their own: summed by `Tree::iter` on threads and
/// by `Tree::scan_async` in tasks while transfers commit, the accounts' total never moves.
#[test]
fn plain_scans_see_transfers_whole() {
    const ACCOUNTS: u64 = 400;
    let dir = TempDir::with_prefix("isolation-scans").unwrap();
    let options = Options { workers: 2, durability: Durability::None, ..tiny(128) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let accounts = db.tree("accounts").unwrap();
    let key = |i: u64| format!("acct{i:05}").into_bytes();
    for i in 0..ACCOUNTS {
        accounts.put(key(i), 1_000u64.to_be_bytes()).unwrap();
    }
    let total = ACCOUNTS * 1_000;
    let balance = |v: &[u8]| u64::from_be_bytes(v[..8].try_into().unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (accounts, done) = (accounts.clone(), done.clone());
            db.spawn(async move {
                let mut scans = 0u64;
                while !done.load(Ordering::Acquire) {
                    let mut sum = 0;
                    let seen = accounts
                        .scan_async(b"", usize::MAX, |_, v| sum += balance(v))
                        .await
                        .unwrap();
                    assert_eq!((seen as u64, sum), (ACCOUNTS, total), "a task's scan");
                    scans += 1;
                }
                scans
            })
            .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut scans = 0;
            while !done.load(Ordering::Acquire) {
                let sum: u64 = accounts.iter().map(|e| balance(&e.unwrap().1)).sum();
                assert_eq!(sum, total, "a thread's scan saw part of a transfer");
                let back: u64 = accounts.iter_rev().map(|e| balance(&e.unwrap().1)).sum();
                assert_eq!(back, total, "a reverse scan saw part of a transfer");
                scans += 1;
            }
            scans
        });
        let mut rng = Rng::new(5);
        let mut balances = vec![1_000u64; ACCOUNTS as usize];
        for _ in 0..3_000 {
            let (from, to) = (rng.below(ACCOUNTS) as usize, rng.below(ACCOUNTS) as usize);
            let amount = rng.below(balances[from] + 1);
            balances[from] -= amount;
            balances[to] += amount;
            let mut batch = WriteBatch::new();
            batch.put(&accounts, key(from as u64), balances[from].to_be_bytes());
            batch.put(&accounts, key(to as u64), balances[to].to_be_bytes());
            db.write(&batch).unwrap();
        }
        done.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
    });
    for task in tasks {
        assert!(task.wait() > 0);
    }
    assert_eq!(db.stats().unwrap().snapshots, 0, "each scan's snapshot ended with it");
}

/// Past `Options::snapshot_bytes`, the oldest snapshot ends: its reads fail with
/// `SnapshotTooOld`, newer snapshots and the trees go on.
#[test]
fn the_oldest_snapshot_ends_when_copies_pass_the_limit() {
    let dir = TempDir::with_prefix("isolation-limit").unwrap();
    let options = Options {
        workers: 0,
        durability: Durability::None,
        snapshot_bytes: 16 * 4096,
        ..tiny(256)
    };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..2_000u32 {
        tree.put(format!("k{i:05}"), [b'x'; 100]).unwrap();
    }
    let old = db.snapshot().unwrap();
    assert_eq!(old.get(&tree, "k00007").unwrap().as_deref(), Some(&[b'x'; 100][..]));
    // Change every leaf: far more than 16 pages to copy.
    for i in 0..2_000u32 {
        tree.put(format!("k{i:05}"), [b'y'; 100]).unwrap();
    }
    let stats = db.stats().unwrap();
    assert_eq!((stats.snapshots, stats.snapshots_expired), (0, 1));
    assert!(stats.snapshot_bytes <= 16 * 4096);
    match old.get(&tree, "k00007") {
        Err(Error::SnapshotTooOld { limit_bytes, .. }) => assert_eq!(limit_bytes, 16 * 4096),
        other => panic!("a read through an ended snapshot: {other:?}"),
    }
    let err = old.iter(&tree).find_map(|entry| entry.err());
    assert!(matches!(err, Some(Error::SnapshotTooOld { .. })), "{err:?}");
    let new = db.snapshot().unwrap();
    assert_eq!(new.get(&tree, "k00007").unwrap().as_deref(), Some(&[b'y'; 100][..]));
    assert_eq!(new.iter(&tree).count(), 2_000);
}

#[test]
fn snapshots_refuse_what_they_cannot_read() {
    let dir = TempDir::with_prefix("isolation-refuse").unwrap();
    let db = Arc::new(Db::open(dir.path(), Options { workers: 1, ..tiny(256) }).unwrap());
    let tree = db.tree("t").unwrap();
    let big = vec![7u8; ferrite::MAX_VALUE_LEN + 1];
    tree.put("big", &big).unwrap();
    tree.put("small", "v").unwrap();
    let snap = db.snapshot().unwrap();
    assert_eq!(snap.get(&tree, "small").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(snap.get(&tree, "big").unwrap().as_deref(), Some(&big[..]));
    // A tree of another database.
    let other_dir = TempDir::with_prefix("isolation-other").unwrap();
    let other = Db::open(other_dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let foreign = other.tree("t").unwrap();
    assert!(matches!(snap.get(&foreign, "small"), Err(Error::NotSupported { .. })));
    assert!(matches!(snap.iter(&foreign).next(), Some(Err(Error::NotSupported { .. }))));
    // Inside a task a snapshot is taken at once; its blocking reads are refused (they could
    // wait for a commit of the task's own worker), its async ones work, but for objects
    // (their reads block).
    let (db2, tree2) = (db.clone(), tree.clone());
    let outcome = db
        .spawn(async move {
            let snap = db2.snapshot().unwrap();
            let refused = matches!(snap.get(&tree2, "small"), Err(Error::NotSupported { .. }))
                && matches!(snap.iter(&tree2).next(), Some(Err(Error::NotSupported { .. })))
                && matches!(snap.get_async(&tree2, "big").await, Err(Error::NotSupported { .. }));
            (refused, snap.get_async(&tree2, "small").await.unwrap())
        })
        .unwrap()
        .wait();
    assert_eq!(outcome, (true, Some(b"v".to_vec())));
}

/// Values stored as objects read through snapshots as they were, however they changed
/// since: replaced whole, written at offsets (as fragments, and whole blocks copy-on-write),
/// appended to, truncated, deleted, their fragments merged, and the pages they freed wanted
/// by the writes after. Up to four live snapshots at once are checked against models, by
/// point reads and scans; then the database checks clean.
#[test]
fn snapshots_read_objects_as_they_were() {
    for seed in seeds(2) {
        let dir = TempDir::with_prefix("isolation-objects").unwrap();
        // A small page file: freed data pages are wanted again soon.
        let options = Options { workers: 0, object_merge_bytes_per_sec: 0, ..tiny(256) };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.tree("o").unwrap();
        let mut rng = Rng::new(seed);
        let keys = ["a", "b", "c", "d", "e"];
        let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let mut snaps: Vec<(Snapshot, BTreeMap<&str, Vec<u8>>)> = Vec::new();
        let mut checked = 0;
        for step in 0..600 {
            let key = keys[rng.index(keys.len())];
            let len = model.get(key).map_or(0, Vec::len);
            match rng.below(9) {
                0 | 1 => {
                    let n = match rng.below(4) {
                        0 => 1 + rng.index(100), // a plain value
                        _ => ferrite::MAX_VALUE_LEN + 1 + rng.index(40_000),
                    };
                    let value = rng.bytes(n);
                    tree.put(key, &value).unwrap();
                    model.insert(key, value);
                }
                2 | 3 => {
                    // Fragments (and sometimes whole blocks) at any offset.
                    let at = rng.index(len + 1);
                    let n = 1 + rng.index(6_000);
                    let bytes = rng.bytes(n);
                    tree.write_at(key, at as u64, &bytes).unwrap();
                    let value = model.entry(key).or_default();
                    value.resize(value.len().max(at + bytes.len()), 0);
                    value[at..at + bytes.len()].copy_from_slice(&bytes);
                }
                4 => {
                    // Whole blocks, copy-on-write.
                    let at = 4096 * rng.index(len / 4096 + 1);
                    let n = 4096 * (1 + rng.index(4));
                    let bytes = rng.bytes(n);
                    tree.write_at(key, at as u64, &bytes).unwrap();
                    let value = model.entry(key).or_default();
                    value.resize(value.len().max(at + bytes.len()), 0);
                    value[at..at + bytes.len()].copy_from_slice(&bytes);
                }
                5 => {
                    let n = 1 + rng.index(3_000);
                    let bytes = rng.bytes(n);
                    tree.append(key, &bytes).unwrap();
                    model.entry(key).or_default().extend_from_slice(&bytes);
                }
                6 => {
                    let to = rng.index(len + 1);
                    tree.truncate(key, to as u64).unwrap();
                    if let Some(value) = model.get_mut(key) {
                        value.resize(to, 0);
                    }
                }
                7 => {
                    tree.delete(key).unwrap();
                    model.remove(key);
                }
                _ => {
                    db.merge_fragments().unwrap();
                }
            }
            if rng.below(8) == 0 {
                snaps.push((db.snapshot().unwrap(), model.clone()));
                if snaps.len() > 4 {
                    snaps.remove(rng.index(snaps.len()));
                }
            }
            if step % 20 == 19 {
                for (snap, then) in &snaps {
                    for key in keys {
                        let got = snap.get(&tree, key).unwrap();
                        let want = then.get(key);
                        assert!(
                            got.as_ref() == want,
                            "seed {seed} step {step} key {key}: {:?} bytes read, {:?} expected",
                            got.as_ref().map(Vec::len),
                            want.map(Vec::len)
                        );
                    }
                    let scanned: Vec<(Vec<u8>, Vec<u8>)> =
                        snap.iter(&tree).map(Result::unwrap).collect();
                    let expected: Vec<(Vec<u8>, Vec<u8>)> =
                        then.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.clone())).collect();
                    assert!(scanned == expected, "seed {seed} step {step}: a scan differs");
                    checked += 1;
                }
            }
        }
        assert!(checked > 50, "seed {seed}: only {checked} snapshot checks");
        assert!(db.object_space_stats().merged_blocks > 0, "seed {seed}: nothing merged");
        drop(snaps);
        for key in keys {
            assert_eq!(tree.get(key).unwrap().as_ref(), model.get(key), "seed {seed} now");
        }
        common::assert_check(&db);
    }
}
