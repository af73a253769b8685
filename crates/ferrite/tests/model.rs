//! Random operation sequences checked against a `BTreeMap` model, over pools of a few dozen
//! pages so that eviction, write-back and re-reads happen all the time. A failure prints its
//! seed; `FERRITE_SEED=<seed> cargo test --test model` replays it.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{assert_check, seeds, tiny, Rng, TempDir};
use ferrite::{Db, Tree, MAX_KEY_LEN, MAX_VALUE_LEN};

/// Keys from a small space (so that overwrites and deletes hit), of mixed lengths, sharing
/// prefixes (so that prefix truncation matters), sometimes very long.
fn random_key(rng: &mut Rng) -> Vec<u8> {
    let id = rng.below(2000);
    match rng.below(10) {
        0 => {
            let mut key = vec![b'L'; MAX_KEY_LEN - 8];
            key.extend_from_slice(&id.to_be_bytes());
            key
        }
        1..=3 => format!("user/{:05}/profile", id % 300).into_bytes(),
        _ => id.to_be_bytes().to_vec(),
    }
}

fn random_value(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(20) {
        0 => MAX_VALUE_LEN - rng.below(100) as usize,
        1 => 1024 + rng.below(1024) as usize,
        2 => 0,
        _ => rng.below(200) as usize,
    };
    rng.bytes(len)
}

fn bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

fn valid_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

fn check_scan(tree: &Tree, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut Rng, seed: u64) {
    let (lo, hi) = (bound(rng), bound(rng));
    if !valid_range(&lo, &hi) {
        return;
    }
    let reverse = rng.below(2) == 0;
    let range = (lo.clone(), hi.clone());
    let got: Vec<_> = if reverse { tree.range_rev(range) } else { tree.range(range) }
        .collect::<Result<_, _>>()
        .unwrap();
    let mut want: Vec<_> = model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        want.reverse();
    }
    assert_eq!(got.len(), want.len(), "seed {seed}: scan {lo:?}..{hi:?} reverse={reverse}");
    assert!(got == want, "seed {seed}: scan {lo:?}..{hi:?} reverse={reverse} differs");
}

/// One random operation against both the tree and the model.
fn step(tree: &Tree, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut Rng, seed: u64) {
    let key = random_key(rng);
    match rng.below(100) {
        0..=39 => {
            let value = random_value(rng);
            tree.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        40..=59 => {
            let removed = tree.delete(&key).unwrap();
            assert_eq!(removed, model.remove(&key).is_some(), "seed {seed}: delete");
        }
        60..=64 => {
            let found = tree.update(&key, |v| v.iter_mut().for_each(|b| *b = b.wrapping_add(1)));
            let model_found =
                model.get_mut(&key).map(|v| v.iter_mut().for_each(|b| *b = b.wrapping_add(1)));
            assert_eq!(found.unwrap(), model_found.is_some(), "seed {seed}: update");
        }
        65..=66 => check_scan(tree, model, rng, seed),
        _ => {
            assert_eq!(tree.get(&key).unwrap(), model.get(&key).cloned(), "seed {seed}: get");
        }
    }
}

#[test]
fn single_thread_matches_model() {
    for seed in seeds(6) {
        let dir = TempDir::with_prefix("model").unwrap();
        let mut rng = Rng::new(seed);
        let mut model = BTreeMap::new();
        {
            let db = Db::open(dir.path(), tiny(24)).unwrap();
            let tree = db.tree("t").unwrap();
            for _ in 0..4000 {
                step(&tree, &mut model, &mut rng, seed);
            }
            assert_check(&db);
            db.pool().check_invariants();
            db.close().unwrap();
        }
        // Everything survives a reopen.
        let db = Db::open(dir.path(), tiny(24)).unwrap();
        let tree = db.open_tree("t").unwrap();
        let all: Vec<_> = tree.iter().collect::<Result<_, _>>().unwrap();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(all == want, "seed {seed}: contents after reopen differ");
        for _ in 0..500 {
            step(&tree, &mut model, &mut rng, seed);
        }
        assert_check(&db);
        db.close().unwrap();
    }
}

#[test]
fn deleting_everything_shrinks_the_tree_back() {
    let dir = TempDir::with_prefix("shrink").unwrap();
    let db = Db::open(dir.path(), tiny(32)).unwrap();
    let tree = db.tree("t").unwrap();
    let keys: Vec<Vec<u8>> = (0..20_000u64).map(|i| i.to_be_bytes().to_vec()).collect();
    for key in &keys {
        tree.put(key, [7u8; 100]).unwrap();
    }
    let grown = db.check().unwrap().trees[0].1.clone();
    assert!(grown.depth >= 3, "20k entries should need 3 levels, got {}", grown.depth);
    for key in keys.iter().rev() {
        assert!(tree.delete(key).unwrap());
    }
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.all_faults());
    let shrunk = &report.trees[0].1;
    assert_eq!(shrunk.keys, 0);
    assert!(shrunk.leaf_pages + shrunk.inner_pages <= 3, "left {shrunk:?}");
    assert!(report.free_pages >= grown.leaf_pages, "freed pages are kept for reuse");
    db.close().unwrap();
}

#[test]
fn threads_on_disjoint_keys_match_their_models() {
    for seed in seeds(2) {
        let dir = TempDir::with_prefix("threads").unwrap();
        let db = Arc::new(Db::open(dir.path(), tiny(48)).unwrap());
        let tree = db.tree("t").unwrap();
        let handles: Vec<_> = (0..4u8)
            .map(|thread| {
                let tree = tree.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(seed * 100 + thread as u64);
                    let mut model = BTreeMap::new();
                    for _ in 0..3000 {
                        let mut key = vec![thread];
                        key.extend(random_key(&mut rng));
                        key.truncate(MAX_KEY_LEN);
                        match rng.below(10) {
                            0..=5 => {
                                let value = random_value(&mut rng);
                                tree.put(&key, &value).unwrap();
                                model.insert(key, value);
                            }
                            6..=7 => {
                                assert_eq!(
                                    tree.delete(&key).unwrap(),
                                    model.remove(&key).is_some()
                                );
                            }
                            _ => assert_eq!(tree.get(&key).unwrap(), model.get(&key).cloned()),
                        }
                    }
                    (thread, model)
                })
            })
            .collect();
        for handle in handles {
            let (thread, model) = handle.join().unwrap();
            let lo = [thread];
            let hi = [thread + 1];
            let got: Vec<_> = tree.range(&lo[..]..&hi[..]).collect::<Result<_, _>>().unwrap();
            let want: Vec<_> = model.into_iter().collect();
            assert!(got == want, "seed {seed}: thread {thread}'s keys differ");
        }
        assert_check(&db);
        db.pool().check_invariants();
    }
}

#[test]
fn concurrent_updates_on_shared_keys_are_atomic() {
    let dir = TempDir::with_prefix("counters").unwrap();
    let db = Db::open(dir.path(), tiny(32)).unwrap();
    let tree = db.tree("counters").unwrap();
    let keys = 300u64;
    for k in 0..keys {
        // Some counters live in Value pages: a long key pushes the pair out of line.
        let mut key = k.to_be_bytes().to_vec();
        if k % 3 == 0 {
            key.resize(MAX_KEY_LEN, b'x');
        }
        tree.put(&key, vec![0u8; if k % 3 == 0 { 600 } else { 8 }]).unwrap();
    }
    let threads = 4u64;
    let rounds = 2000u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let tree = tree.clone();
            s.spawn(move || {
                let mut rng = Rng::new(t);
                for _ in 0..rounds {
                    let k = rng.below(keys);
                    let mut key = k.to_be_bytes().to_vec();
                    if k % 3 == 0 {
                        key.resize(MAX_KEY_LEN, b'x');
                    }
                    let found = tree
                        .update(&key, |v| {
                            let n = u64::from_le_bytes(v[..8].try_into().unwrap());
                            v[..8].copy_from_slice(&(n + 1).to_le_bytes());
                        })
                        .unwrap();
                    assert!(found);
                    // Interleave structure changes elsewhere in the tree.
                    let filler = (1_000_000 + rng.below(5000)).to_be_bytes();
                    if rng.below(2) == 0 {
                        tree.put(filler, [1u8; 150]).unwrap();
                    } else {
                        tree.delete(filler).unwrap();
                    }
                }
            });
        }
    });
    let total: u64 = tree
        .range(..&1_000_000u64.to_be_bytes()[..])
        .map(|e| {
            let (_, v) = e.unwrap();
            u64::from_le_bytes(v[..8].try_into().unwrap())
        })
        .sum();
    assert_eq!(total, threads * rounds, "every increment counted exactly once");
    assert_check(&db);
}

/// Scans running beside writers that split and merge leaves all the time: every scan ends
/// without error (the scans' guards, which compare each leaf's fences with the leaf the scan
/// left, must not take a concurrent split or merge for corruption), in order, and sees every
/// key that stayed in the tree throughout. A large pool keeps versions still, so the fence
/// comparison runs; a small one evicts under the scans.
#[test]
fn scans_beside_splits_and_merges_never_report_corruption() {
    for pool_pages in [4096, 48] {
        let dir = TempDir::with_prefix("scan-splits").unwrap();
        let db = Db::open(dir.path(), tiny(pool_pages)).unwrap();
        let tree = db.tree("t").unwrap();
        let key = |i: u64| i.to_be_bytes();
        let stable: Vec<u64> = (0..1000).map(|i| i * 4).collect();
        for &i in &stable {
            tree.put(key(i), b"stable").unwrap();
        }
        let writing = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|s| {
            for thread in 0..2u64 {
                let (tree, writing) = (tree.clone(), &writing);
                s.spawn(move || {
                    let mut rng = Rng::new(thread);
                    for _ in 0..3000 {
                        // Keys between the stable ones, with values large enough that a few
                        // fill a leaf: puts split leaves, deletes merge them.
                        let i = rng.below(1000) * 4 + 1 + rng.below(3);
                        if rng.below(2) == 0 {
                            tree.put(key(i), [7u8; 400]).unwrap();
                        } else {
                            tree.delete(key(i)).unwrap();
                        }
                    }
                    writing.store(false, std::sync::atomic::Ordering::Relaxed);
                });
            }
            for reverse in [false, true] {
                let (tree, writing, stable) = (tree.clone(), &writing, &stable);
                s.spawn(move || {
                    let mut scans = 0;
                    while scans < 3 || writing.load(std::sync::atomic::Ordering::Relaxed) {
                        let scan = if reverse { tree.iter_rev() } else { tree.iter() };
                        let mut keys: Vec<u64> = scan
                            .map(|entry| u64::from_be_bytes(entry.unwrap().0.try_into().unwrap()))
                            .collect();
                        if reverse {
                            keys.reverse();
                        }
                        assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan out of order");
                        let seen: Vec<u64> = keys.into_iter().filter(|i| i % 4 == 0).collect();
                        assert!(seen == *stable, "a scan missed stable keys");
                        scans += 1;
                    }
                });
            }
        });
        assert_check(&db);
    }
}
