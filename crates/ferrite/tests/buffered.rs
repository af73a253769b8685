//! The change buffer (`change_buffer/`) against a model: puts into leaves that are not in
//! memory wait in the buffer, and every read (gets, scans both ways, the task API), every
//! other change (deletes, updates, batches, transactions, dropping a tree) and a reopen must
//! see exactly what a plain map holds.

mod common;

use std::collections::BTreeMap;

use common::{tiny, Rng, TempDir};
use ferrite::{Db, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A pool of 40 frames and a small buffer: trees of a few thousand keys outgrow the frames.
fn options() -> Options {
    Options { workers: 0, change_buffer_bytes: Some(24 << 10), direct_io: false, ..tiny(40 + 6) }
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// Puts the even keys below 4000 into `tree` (and `model`) in key order, in batches: enough
/// that the leaves outgrow the pool (sequential: no buffering).
fn fill_even_keys(db: &Db, tree: &ferrite::Tree, model: &mut Model) {
    let mut batch = WriteBatch::new();
    for i in (0..4000).step_by(2) {
        batch.put(tree, key(i), [7; 60]);
        model.insert(key(i), vec![7; 60]);
        if batch.len() == 8 {
            db.write(&batch).unwrap();
            batch = WriteBatch::new();
        }
    }
    db.write(&batch).unwrap();
}

fn assert_same(tree: &ferrite::Tree, model: &Model, when: &str) {
    let all: Model = tree.iter().map(|e| e.unwrap()).collect();
    assert!(all == *model, "{when}: a full scan differs ({} against {})", all.len(), model.len());
    let mut back: Vec<_> = tree.iter_rev().map(|e| e.unwrap()).collect();
    back.reverse();
    let forward: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(back == forward, "{when}: a reverse scan differs");
}

#[test]
fn buffered_puts_are_seen_by_every_read_and_change_and_survive_reopening() {
    let dir = TempDir::with_prefix("buffered-model").unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(11);
    let mut buffered_seen = 0;
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        fill_even_keys(&db, &tree, &mut model);
        for step in 0..6000u64 {
            let k = key(rng.below(4000));
            match rng.below(20) {
                0..=11 => {
                    let value = vec![(step % 251) as u8; 1 + rng.below(90) as usize];
                    tree.put(&k, &value).unwrap();
                    model.insert(k.clone(), value);
                }
                12 | 13 => {
                    assert_eq!(tree.delete(&k).unwrap(), model.remove(&k).is_some(), "{step}");
                }
                14 => {
                    let present = tree.update(&k, |v| v[0] = v[0].wrapping_add(1)).unwrap();
                    assert_eq!(present, model.contains_key(&k), "update at {step}");
                    if let Some(v) = model.get_mut(&k) {
                        v[0] = v[0].wrapping_add(1);
                    }
                }
                15 => {
                    let mut batch = WriteBatch::new();
                    let other = key(rng.below(4000));
                    batch.put(&tree, &k, b"batched").delete(&tree, &other);
                    db.write(&batch).unwrap();
                    model.insert(k.clone(), b"batched".to_vec());
                    model.remove(&other);
                }
                16 => {
                    let mut txn = db.transaction();
                    let seen = txn.get(&tree, &k).unwrap();
                    assert_eq!(seen.as_ref(), model.get(&k), "a transaction's read at {step}");
                    txn.put(&tree, &k, b"txn").unwrap();
                    txn.commit().unwrap();
                    model.insert(k.clone(), b"txn".to_vec());
                }
                _ => {
                    let low = key(rng.below(4000));
                    let got: Vec<_> = tree.range(&low[..]..).take(20).map(|e| e.unwrap()).collect();
                    let want: Vec<_> = model
                        .range(low.clone()..)
                        .take(20)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(got, want, "a range scan at {step}");
                }
            }
            assert_eq!(tree.get(&k).unwrap().as_ref(), model.get(&k), "get at {step}");
            buffered_seen = buffered_seen.max(db.change_buffer().0);
        }
        assert!(buffered_seen > 50, "puts went to the change buffer: at most {buffered_seen}");
        // The buffer filled and drained, each drain moving at least one entry on average.
        let (drains, drained) = db.change_buffer_drains();
        assert!(drains > 10 && drained >= drains, "{drains} drains moved {drained} entries");
        // Its memory came out of the pool's frames as it filled: every flex frame is lent.
        assert_eq!(db.pool().retired_frames(), db.pool().flex_frames());
        assert!(
            db.change_buffer().1 <= db.change_buffer_budget() + 200,
            "{:?}",
            db.change_buffer()
        );
        assert_same(&tree, &model, "before closing");
        // A tree dropped with entries in the buffer leaves none behind.
        let doomed = db.tree("doomed").unwrap();
        for i in 0..3000 {
            doomed.put(key(i * 7 % 3000), [1; 80]).unwrap();
        }
        // `check` counts each tree's buffered entries; the log check, the buffered changes.
        let report = db.check().unwrap();
        let buffered =
            |name: &str| report.trees.iter().find(|(n, _)| n == name).unwrap().1.buffered;
        assert!(
            buffered("doomed") > 0,
            "the doomed tree has buffered entries: {:?} {:?}",
            report.trees,
            db.change_buffer()
        );
        assert_eq!(buffered("t") + buffered("doomed"), db.change_buffer().0 as u64);
        assert!(report.is_ok(), "{:?}", report.all_faults());
        let log = db.check_log().unwrap().expect("a log");
        assert!(log.buffered_changes >= buffered("doomed"), "{log:?}");
        db.drop_tree("doomed").unwrap();
        assert!(db.check().unwrap().is_ok());
    }
    // Closing drained the buffer into the leaves: a read-only open sees everything.
    let read_only = Options { read_only: true, ..options() };
    let db = Db::open(dir.path(), read_only).unwrap();
    assert_same(&db.open_tree("t").unwrap(), &model, "after a clean close");
    assert!(db.open_tree("doomed").is_err());
    assert!(db.check().unwrap().is_ok());
}

/// Bounded scans while puts wait in the buffer: keys in groups (`g005-017`), so that leaf
/// fences fall between groups as separators no key has (`g006`). A scan of one group reaches
/// the end of a leaf whose fence lies past the scan's end: it must stop there, not take the
/// next leaf's part of the buffer with its ends inverted (which panicked in `BTreeMap::range`:
/// found by the power-cut suite, reading an object's extents). A range whose start lies past
/// its end is empty.
#[test]
fn bounded_scans_stop_at_a_fence_past_their_end_while_puts_wait() {
    let dir = TempDir::with_prefix("buffered-fences").unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    // Far more than the pool's frames hold, so that leaves leave memory and puts wait.
    const GROUPS: u64 = 200;
    let key = |group: u64, i: u64| format!("g{group:03}-{i:03}").into_bytes();
    let mut model = Model::new();
    let mut batch = WriteBatch::new();
    for group in 0..GROUPS {
        for i in (0..40).step_by(2) {
            batch.put(&tree, key(group, i), [group as u8; 60]);
            model.insert(key(group, i), vec![group as u8; 60]);
            if batch.len() == 8 {
                db.write(&batch).unwrap();
                batch = WriteBatch::new();
            }
        }
    }
    db.write(&batch).unwrap();
    let mut rng = Rng::new(5);
    let mut buffered = 0;
    for _ in 0..400 {
        let k = key(rng.below(GROUPS), rng.below(40));
        tree.put(&k, b"later").unwrap();
        model.insert(k, b"later".to_vec());
        buffered = buffered.max(db.change_buffer().0);
    }
    assert!(db.change_buffer().0 > 0, "puts wait in the buffer (at most {buffered})");
    for group in 0..GROUPS {
        let (low, high) =
            (format!("g{group:03}-").into_bytes(), format!("g{group:03}-\u{7f}").into_bytes());
        let expected: Vec<_> =
            model.range(low.clone()..=high.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
        let got: Vec<_> = tree.range(&low[..]..=&high[..]).map(|e| e.unwrap()).collect();
        assert_eq!(got, expected, "group {group}");
        let mut back: Vec<_> = tree.range_rev(&low[..]..=&high[..]).map(|e| e.unwrap()).collect();
        back.reverse();
        assert_eq!(back, expected, "group {group}, reverse");
        assert_eq!(tree.range(&high[..]..&low[..]).count(), 0, "an inverted range");
        assert_eq!(tree.range_rev(&high[..]..=&low[..]).count(), 0, "an inverted range, reverse");
    }
    assert_eq!(tree.iter().map(|e| e.unwrap()).collect::<Model>(), model);
}

/// A transaction's put of a key it did not read, whose leaf is out of memory, waits in the
/// buffer as a `Tree::put` would; it still conflicts with the transactions that read the key
/// or scanned its range, and nothing of it is lost across a reopen.
#[test]
fn transactions_blind_puts_wait_in_the_buffer_and_still_conflict() {
    let dir = TempDir::with_prefix("buffered-txn").unwrap();
    let (mut model, mut small_model) = (Model::new(), Model::new());
    let mut rng = Rng::new(23);
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        let small = db.tree("small").unwrap();
        fill_even_keys(&db, &tree, &mut model);
        let mut buffered_seen = 0;
        for step in 0..3000u64 {
            // A blind put into the big tree, and a read-then-put of a small tree's key.
            let (k, j) = (key(rng.below(4000)), key(rng.below(50)));
            let value = vec![(step % 251) as u8; 1 + rng.below(90) as usize];
            let mut txn = db.transaction();
            txn.put(&tree, &k, &value).unwrap();
            let seen = txn.get(&small, &j).unwrap();
            assert_eq!(seen.as_ref(), small_model.get(&j), "a read at {step}");
            txn.put(&small, &j, step.to_be_bytes()).unwrap();
            txn.commit().unwrap();
            model.insert(k, value);
            small_model.insert(j, step.to_be_bytes().to_vec());
            buffered_seen = buffered_seen.max(db.change_buffer().0);
            // Transactions fill a sixteenth of the budget at most.
            let (held, share) = (db.change_buffer().1, db.change_buffer_budget() / 16);
            assert!(held <= share, "{held} bytes held by the buffer at {step}, share {share}");
        }
        assert!(buffered_seen >= 5, "blind puts went to the buffer: at most {buffered_seen}");
        let (drains, drained) = db.change_buffer_drains();
        assert!(drains > 10 && drained >= drains, "{drains} drains moved {drained} entries");
        // Conflicts: a transaction reads a key or scans a range, another's blind put of the
        // key (or into the range) waits in the buffer, and the first's commit fails.
        let (mut point_conflicts, mut range_conflicts, mut went_to_buffer) = (0, 0, 0);
        for round in 0..40u64 {
            let k = key(rng.below(4000));
            let mut reader = db.transaction();
            let seen = reader.get(&tree, &k).unwrap();
            assert_eq!(seen.as_ref(), model.get(&k));
            let scanned = reader.scan(&tree, &k[..].., 3, false).unwrap();
            let want: Vec<_> =
                model.range(k.clone()..).take(3).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(scanned, want, "round {round}");
            reader.put(&small, b"reader", round.to_be_bytes()).unwrap();
            // Push the leaf out of memory, so that the blind put does not read it.
            assert_same(&small, &small_model, "between");
            let _ = tree.iter().count();
            let (held, _) = db.change_buffer();
            // The key read, or a new key inside the part of the range the scan depended on.
            let blind = if round % 2 == 0 { k.clone() } else { [&k[..], b"+"].concat() };
            let mut writer = db.transaction();
            writer.put(&tree, &blind, b"blind").unwrap();
            writer.commit().unwrap();
            model.insert(blind.clone(), b"blind".to_vec());
            went_to_buffer += usize::from(db.change_buffer().0 > held);
            match reader.commit() {
                Err(ferrite::Error::Conflict { .. }) if round % 2 == 0 => point_conflicts += 1,
                Err(ferrite::Error::Conflict { .. }) => range_conflicts += 1,
                other => panic!("round {round}: the reader committed over a blind put: {other:?}"),
            }
        }
        assert_eq!((point_conflicts, range_conflicts), (20, 20));
        // (The transactions' share of this tiny buffer is 1.5 KiB, about a dozen entries:
        // the others read their leaf. Measured: 7.)
        assert!(went_to_buffer >= 4, "{went_to_buffer} of 40 blind puts went to the buffer");
        assert_same(&tree, &model, "before closing");
    }
    let db = Db::open(dir.path(), options()).unwrap();
    assert_same(&db.tree("t").unwrap(), &model, "after reopening");
    assert_same(&db.tree("small").unwrap(), &small_model, "after reopening");
}

#[test]
fn tasks_put_into_the_buffer_and_read_it_back() {
    let dir = TempDir::with_prefix("buffered-tasks").unwrap();
    let db = Db::open(dir.path(), Options { workers: 2, ..options() }).unwrap();
    let tree = db.tree("t").unwrap();
    let n = 3000u64;
    let handles: Vec<_> = (0..8u64)
        .map(|task| {
            let tree = tree.clone();
            db.spawn(async move {
                for i in (task..n).step_by(8) {
                    let i = i * 7919 % n;
                    tree.put_async(&key(i), &[i as u8; 100]).await.unwrap();
                }
            })
            .unwrap()
        })
        .collect();
    for h in handles {
        h.wait();
    }
    let (entries, _) = db.change_buffer();
    let check = tree.clone();
    let counted = db
        .spawn(async move {
            for i in 0..n {
                let got = check.get_async(&key(i)).await.unwrap();
                assert_eq!(got, Some(vec![i as u8; 100]), "key {i}");
            }
            let mut count = 0;
            let mut last = Vec::new();
            check
                .scan_async(b"", usize::MAX, |k, v| {
                    assert!(k > &last[..], "keys in order");
                    assert_eq!(v.len(), 100);
                    last = k.to_vec();
                    count += 1;
                })
                .await
                .unwrap()
        })
        .unwrap()
        .wait();
    assert_eq!(counted, n as usize);
    assert!(entries > 0, "no put went to the change buffer");
    // Updates by tasks change the newest value, buffered or not (regression: `update_async`
    // once changed the leaf's older value under a buffered one).
    let (buffered_before, _) = db.change_buffer();
    let updater = tree.clone();
    db.spawn(async move {
        for i in 0..n {
            assert!(updater.update_async(&key(i), |v| v[0] = v[0].wrapping_add(1)).await.unwrap());
        }
    })
    .unwrap()
    .wait();
    assert!(buffered_before > 0 && db.change_buffer().0 < buffered_before, "updates drained");
    for i in (0..n).step_by(37) {
        let mut want = vec![i as u8; 100];
        want[0] = want[0].wrapping_add(1);
        assert_eq!(tree.get(key(i)).unwrap(), Some(want), "key {i} after its update");
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..options() }).unwrap();
    assert_eq!(db.change_buffer(), (0, 0), "closing drained the buffer");
    let reopened = db.open_tree("t").unwrap();
    assert_eq!(reopened.iter().count(), n as usize);
    let mut want = vec![7u8; 100];
    want[0] = 8;
    assert_eq!(reopened.get(key(7)).unwrap(), Some(want));
}

/// The budget's default and bounds: a quarter of the pool from 16 MiB up (at most 128 MiB),
/// none below, none when read-only; too large, or leaving the frames under the minimum, is
/// refused at open.
#[test]
fn the_change_buffer_budget_is_a_quarter_of_the_pool_within_bounds() {
    let budget = |pool_bytes: u64, change_buffer_bytes| {
        Options { pool_bytes, change_buffer_bytes, ..Options::default() }.change_buffer_budget()
    };
    assert_eq!(budget(64 << 20, None), 16 << 20);
    assert_eq!(budget(8 << 20, None), 0);
    assert_eq!(budget(4 << 30, None), ferrite::MAX_CHANGE_BUFFER_BYTES);
    assert_eq!(budget(64 << 20, Some(0)), 0);
    let dir = TempDir::with_prefix("buffered-options").unwrap();
    let db =
        Db::open(dir.path(), Options { workers: 0, direct_io: false, ..tiny(64 << 8) }).unwrap();
    assert_eq!(db.change_buffer_budget(), 16 << 20, "a 64 MiB pool");
    // Every frame holds pages until puts need the buffer: it may borrow a quarter of them.
    assert_eq!(db.pool().pool_pages(), (64 << 20) / 4096);
    assert_eq!(db.pool().flex_frames(), (16 << 20) / 4096);
    assert_eq!(db.pool().retired_frames(), 0, "nothing lent before a put needs it");
    db.close().unwrap();
    let read_only = Options { read_only: true, workers: 0, direct_io: false, ..tiny(64 << 8) };
    assert_eq!(read_only.change_buffer_budget(), 0);
    let db = Db::open(dir.path(), read_only).unwrap();
    assert_eq!(db.change_buffer_budget(), 0, "nothing is put: no change buffer");
    assert_eq!(db.pool().pool_pages(), (64 << 20) / 4096);
    assert_eq!(db.pool().flex_frames(), 0, "none to lend");
    db.close().unwrap();
    for (change_buffer_bytes, wanted) in [
        (ferrite::MAX_CHANGE_BUFFER_BYTES + 1, "above the most"),
        ((64 << 20) - 4096, "below the minimum"),
    ] {
        let options =
            Options { change_buffer_bytes: Some(change_buffer_bytes), workers: 0, ..tiny(64 << 8) };
        let Err(err) = Db::open(dir.path(), options) else { panic!("{wanted}: not refused") };
        assert!(err.to_string().contains(wanted), "{err}");
    }
}

/// Checkpoints copy the change buffer without the commit lock, a chunk at a time, while
/// commits go on (`ChangeBuffer::snapshot`): a crash after such checkpoints must still
/// recover every acknowledged put, buffered or not, with its last value.
#[test]
fn checkpoints_taken_while_tasks_buffer_puts_lose_nothing_at_a_crash() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let dir = TempDir::with_prefix("buffered-checkpoints").unwrap();
    // A buffer of several snapshot chunks (1,024 entries each) over 40 frames.
    let options = || Options {
        workers: 2,
        change_buffer_bytes: Some(512 << 10),
        direct_io: false,
        ..tiny(40 + 128)
    };
    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let checkpoints;
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        let mut batch = WriteBatch::new();
        // Past the whole pool (168 frames), so that puts find leaves out of memory and the
        // buffer borrows its frames.
        for i in 0..8000 {
            batch.put(&tree, key(i), [b'p'; 100]);
            acknowledged.lock().unwrap().insert(key(i), vec![b'p'; 100]);
            if batch.len() == 8 {
                db.write(&batch).unwrap();
                batch = WriteBatch::new();
            }
        }
        let done = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..8u64)
            .map(|task| {
                let (tree, acknowledged) = (tree.clone(), Arc::clone(&acknowledged));
                db.spawn(async move {
                    // Each task its own keys (so its model is the truth), three rounds over
                    // them: values change under the buffer, and buffered keys are put again.
                    for round in 0..3u64 {
                        for j in 0..300u64 {
                            let i = (j * 8 + task) * 3 % 8000;
                            let value = format!("{round}-{i}").into_bytes();
                            tree.put_async(&key(i), &value).await.unwrap();
                            acknowledged.lock().unwrap().insert(key(i), value);
                        }
                    }
                })
                .unwrap()
            })
            .collect();
        let waiter = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                for h in handles {
                    h.wait();
                }
                done.store(true, Ordering::Release);
            })
        };
        let mut taken = 0;
        let mut most_buffered = 0;
        while !done.load(Ordering::Acquire) {
            // What the buffer held as the checkpoint began (its copy is about as large).
            most_buffered = most_buffered.max(db.change_buffer().0);
            db.checkpoint().unwrap();
            taken += 1;
        }
        waiter.join().unwrap();
        assert!(most_buffered > 1024, "the buffer spanned chunks: at most {most_buffered}");
        checkpoints = taken;
        db.abandon();
    }
    assert!(checkpoints >= 2, "{checkpoints} checkpoints");
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(db.recovery_report().buffered > 0, "{:?}", db.recovery_report());
    let tree = db.open_tree("t").unwrap();
    let model = acknowledged.lock().unwrap().clone();
    assert_same(&tree, &model, "after the crash");
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
}
