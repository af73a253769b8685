//! Objects: values of any size, written and read at any offset, against a `Vec<u8>` model,
//! through reopens and crashes of a simulated disk, and checked by `Db::check`.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};

use common::{assert_check, seeds, sim_options, tiny, Rng, TempDir};
use ferrite::testing::SimDisk;
use ferrite::{Db, Durability, Options, Tree, WriteBatch, MAX_VALUE_LEN};

const BLOCK: u64 = 4096;

fn options() -> Options {
    Options { workers: 0, ..tiny(512) }
}

/// Bytes for a write: distinct per (seed, step) so a misplaced block shows.
fn pattern(rng: &mut Rng, len: usize) -> Vec<u8> {
    let base = rng.next_u64();
    (0..len).map(|i| (base.wrapping_add(i as u64 * 7) >> (i % 5)) as u8 | 1).collect()
}

/// An offset and length that exercise blocks: aligned, unaligned, inside one block,
/// spanning many, past the end.
fn region(rng: &mut Rng, len: u64) -> (u64, usize) {
    let offset = match rng.below(4) {
        0 => rng.below(len + 1) / BLOCK * BLOCK,
        1 => rng.below(len + 2 * BLOCK),
        2 => len,
        _ => rng.below(len + 1),
    };
    let size = match rng.below(5) {
        0 => BLOCK as usize,
        1 => 1 + rng.below(64) as usize,
        2 => 1 + rng.below(2 * BLOCK) as usize,
        3 => (1 + rng.below(8)) as usize * BLOCK as usize,
        _ => 1 + rng.below(40_000) as usize,
    };
    (offset, size)
}

fn write_model(model: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let end = offset as usize + bytes.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(bytes);
}

fn assert_object(tree: &Tree, key: &[u8], model: &[u8], context: &str) {
    assert_eq!(tree.object_len(key).unwrap(), Some(model.len() as u64), "{context}: length");
    let got = tree.get(key).unwrap().expect("present");
    if got != model {
        let at =
            got.iter().zip(model).position(|(a, b)| a != b).unwrap_or(got.len().min(model.len()));
        panic!(
            "{context}: value differs first at byte {at} (lengths {} and {})",
            got.len(),
            model.len()
        );
    }
}

/// Checks and closes `db`, opens it again, and compares every object with its model.
fn reopen(
    db: Db,
    tree: Tree,
    dir: &std::path::Path,
    models: &BTreeMap<Vec<u8>, Vec<u8>>,
    context: &str,
) -> (Db, Tree) {
    drop(tree);
    assert_check(&db);
    db.close().unwrap();
    let db = Db::open(dir, options()).unwrap();
    let tree = db.tree("objects").unwrap();
    for (key, model) in models {
        assert_object(&tree, key, model, &format!("{context} after reopen"));
    }
    (db, tree)
}

/// Random write_at / read_at / truncate / append / put / delete on a few objects, with
/// reopens, every answer checked against the model; `check` at every reopen.
#[test]
fn objects_match_a_model_through_reopens() {
    for seed in seeds(6) {
        let dir = TempDir::with_prefix("objects-model").unwrap();
        let mut rng = Rng::new(seed);
        let mut models: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut db = Db::open(dir.path(), options()).unwrap();
        let mut tree = db.tree("objects").unwrap();
        for step in 0..400 {
            let key = format!("object-{}", rng.below(4)).into_bytes();
            let context = format!("seed {seed} step {step}");
            let len = models.get(&key).map_or(0, |m| m.len() as u64);
            match rng.below(100) {
                0..=44 => {
                    let (offset, size) = region(&mut rng, len);
                    let bytes = pattern(&mut rng, size);
                    tree.write_at(&key, offset, &bytes).unwrap();
                    write_model(models.entry(key.clone()).or_default(), offset, &bytes);
                }
                45..=64 => {
                    let (offset, size) = region(&mut rng, len);
                    let mut buf = vec![0xEEu8; size];
                    let got = tree.read_at(&key, offset, &mut buf).unwrap();
                    match models.get(&key) {
                        None => assert_eq!(got, None, "{context}: absent"),
                        Some(model) => {
                            let from = (offset as usize).min(model.len());
                            let want = &model[from..(from + size).min(model.len())];
                            assert_eq!(got, Some(want.len()), "{context}: read length");
                            assert!(
                                buf[..want.len()] == *want,
                                "{context}: read_at {offset}+{size}"
                            );
                        }
                    }
                }
                65..=72 => {
                    let new_len = match rng.below(3) {
                        0 => rng.below(len + 1),
                        1 => len + rng.below(3 * BLOCK),
                        _ => rng.below(len + 1) / BLOCK * BLOCK,
                    };
                    let present = tree.truncate(&key, new_len).unwrap();
                    assert_eq!(present, models.contains_key(&key), "{context}: truncate");
                    if let Some(model) = models.get_mut(&key) {
                        model.resize(new_len as usize, 0);
                    }
                }
                73..=80 => {
                    let size = 1 + rng.below(10_000) as usize;
                    let bytes = pattern(&mut rng, size);
                    let new_len = tree.append(&key, &bytes).unwrap();
                    let model = models.entry(key.clone()).or_default();
                    model.extend_from_slice(&bytes);
                    assert_eq!(new_len, model.len() as u64, "{context}: append");
                }
                81..=88 => {
                    let size = match rng.below(3) {
                        0 => rng.below(MAX_VALUE_LEN as u64) as usize,
                        1 => MAX_VALUE_LEN + 1 + rng.below(3 * BLOCK) as usize,
                        _ => rng.below(300_000) as usize,
                    };
                    let bytes = pattern(&mut rng, size);
                    tree.put(&key, &bytes).unwrap();
                    models.insert(key.clone(), bytes);
                }
                89..=93 => {
                    let removed = tree.delete(&key).unwrap();
                    assert_eq!(removed, models.remove(&key).is_some(), "{context}: delete");
                }
                _ => (db, tree) = reopen(db, tree, dir.path(), &models, &context),
            }
        }
        for (key, model) in &models {
            assert_object(&tree, key, model, &format!("seed {seed} at the end"));
        }
        drop(tree);
        assert_check(&db);
        db.close().unwrap();
    }
}

/// One random change for a batch or transaction, and the model after it.
enum Edit {
    WriteAt(Vec<u8>, u64, Vec<u8>),
    Truncate(Vec<u8>, u64),
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn random_edit(rng: &mut Rng, models: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Edit {
    let key = format!("object-{}", rng.below(3)).into_bytes();
    let len = models.get(&key).map_or(0, |m| m.len() as u64);
    match rng.below(10) {
        0..=4 => {
            let (offset, size) = region(rng, len);
            let bytes = pattern(rng, size);
            write_model(models.entry(key.clone()).or_default(), offset, &bytes);
            Edit::WriteAt(key, offset, bytes)
        }
        5 | 6 => {
            let new_len = match rng.below(2) {
                0 => rng.below(len + 1),
                _ => len + rng.below(2 * BLOCK),
            };
            if let Some(model) = models.get_mut(&key) {
                model.resize(new_len as usize, 0);
            }
            Edit::Truncate(key, new_len)
        }
        7 | 8 => {
            let size = match rng.below(2) {
                0 => rng.below(MAX_VALUE_LEN as u64) as usize,
                _ => rng.below(40_000) as usize,
            };
            let bytes = pattern(rng, size);
            models.insert(key.clone(), bytes.clone());
            Edit::Put(key, bytes)
        }
        _ => {
            models.remove(&key);
            Edit::Delete(key)
        }
    }
}

/// `write_at` and `truncate` inside write batches and transactions, mixed with puts and
/// deletes of the same keys, against a model: all of a batch applies in order, a
/// transaction's reads see its own edits, and everything survives reopens (`check` each
/// time).
#[test]
fn batches_and_transactions_edit_objects_as_a_model_does() {
    for seed in seeds(4) {
        let dir = TempDir::with_prefix("objects-batches").unwrap();
        let mut rng = Rng::new(seed);
        let mut models: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut db = Db::open(dir.path(), options()).unwrap();
        let mut tree = db.tree("objects").unwrap();
        for round in 0..80 {
            let context = format!("seed {seed} round {round}");
            let edits: Vec<Edit> =
                (0..1 + rng.below(5)).map(|_| random_edit(&mut rng, &mut models)).collect();
            if rng.below(2) == 0 {
                let mut batch = WriteBatch::new();
                for edit in &edits {
                    match edit {
                        Edit::WriteAt(key, offset, bytes) => {
                            batch.write_at(&tree, key, *offset, bytes)
                        }
                        Edit::Truncate(key, len) => batch.truncate(&tree, key, *len),
                        Edit::Put(key, value) => batch.put(&tree, key, value),
                        Edit::Delete(key) => batch.delete(&tree, key),
                    };
                }
                db.write(&batch).unwrap();
            } else {
                let mut txn = db.transaction();
                for edit in &edits {
                    match edit {
                        Edit::WriteAt(key, offset, bytes) => {
                            txn.write_at(&tree, key, *offset, bytes)
                        }
                        Edit::Truncate(key, len) => txn.truncate(&tree, key, *len),
                        Edit::Put(key, value) => txn.put(&tree, key, value),
                        Edit::Delete(key) => txn.delete(&tree, key),
                    }
                    .unwrap();
                }
                // Its reads see its own edits over what the tree holds.
                for key in edits.iter().map(|e| match e {
                    Edit::WriteAt(key, ..) | Edit::Truncate(key, _) => key,
                    Edit::Put(key, _) | Edit::Delete(key) => key,
                }) {
                    let seen = txn.get(&tree, key).unwrap();
                    assert!(
                        seen.as_ref() == models.get(key),
                        "{context}: transaction read of {key:?}"
                    );
                }
                txn.commit().unwrap();
            }
            for key in (0..3).map(|k| format!("object-{k}").into_bytes()) {
                match models.get(&key) {
                    Some(model) => {
                        let got = tree.get(&key).unwrap();
                        assert!(got.as_ref() == Some(model), "{context}: {key:?} differs");
                    }
                    None => assert_eq!(tree.get(&key).unwrap(), None, "{context}: {key:?}"),
                }
            }
            if round % 20 == 19 {
                (db, tree) = reopen(db, tree, dir.path(), &models, &context);
            }
        }
        drop(tree);
        assert_check(&db);
        db.close().unwrap();
    }
}

/// The async object calls from tasks on workers: writes and reads of objects against a
/// model, every answer checked, the data moved through the workers' rings (counted), and
/// the result the same after a reopen.
#[test]
fn tasks_write_and_read_objects_through_their_workers_rings() {
    for seed in seeds(2) {
        let dir = TempDir::with_prefix("objects-async").unwrap();
        let options = || Options { workers: 2, ..tiny(512) };
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("objects").unwrap();
        // A task cannot write a database's first object (that makes the objects tree): it
        // is told so, and the blocking call can.
        let first = tree.clone();
        let refused = db.spawn(async move { first.write_at_async(b"first", 0, b"x").await });
        assert!(
            matches!(refused.unwrap().wait(), Err(ferrite::Error::NotSupported { .. })),
            "seed {seed}: the first object from a task"
        );
        tree.write_at(b"first", 0, b"x").unwrap();
        // Each task owns one key: its model is its own.
        let handles: Vec<_> = (0..4u64)
            .map(|task| {
                let tree = tree.clone();
                db.spawn(async move {
                    let mut rng = Rng::new(seed * 31 + task);
                    let key = format!("object-{task}").into_bytes();
                    let mut model: Vec<u8> = Vec::new();
                    let mut present = false;
                    for step in 0..60 {
                        let context = format!("seed {seed} task {task} step {step}");
                        match rng.below(10) {
                            0..=4 => {
                                let (offset, size) = region(&mut rng, model.len() as u64);
                                let bytes = pattern(&mut rng, size);
                                tree.write_at_async(&key, offset, &bytes).await.unwrap();
                                write_model(&mut model, offset, &bytes);
                                present = true;
                            }
                            5 => {
                                let size = 1 + rng.below(9000) as usize;
                                let bytes = pattern(&mut rng, size);
                                let len = tree.append_async(&key, &bytes).await.unwrap();
                                model.extend_from_slice(&bytes);
                                present = true;
                                assert_eq!(len, model.len() as u64, "{context}: append");
                            }
                            6..=8 => {
                                let (offset, size) = region(&mut rng, model.len() as u64);
                                let mut buf = vec![0xEEu8; size];
                                let got = tree.read_at_async(&key, offset, &mut buf).await.unwrap();
                                if !present {
                                    assert_eq!(got, None, "{context}: absent");
                                    continue;
                                }
                                let from = (offset as usize).min(model.len());
                                let want = &model[from..(from + size).min(model.len())];
                                assert_eq!(got, Some(want.len()), "{context}: read length");
                                assert!(buf[..want.len()] == *want, "{context}: read_at_async");
                            }
                            _ => {
                                let got = tree.get_async(&key).await.unwrap();
                                let len = tree.object_len_async(&key).await.unwrap();
                                match present {
                                    true => {
                                        assert!(
                                            got.as_deref() == Some(&model[..]),
                                            "{context}: get_async"
                                        );
                                        assert_eq!(len, Some(model.len() as u64), "{context}: len");
                                    }
                                    false => {
                                        assert_eq!((got, len), (None, None), "{context}: absent")
                                    }
                                }
                            }
                        }
                    }
                    // A streamed reader and writer, as futures.
                    let streamed_key = format!("streamed-{task}").into_bytes();
                    let mut writer = tree.object_writer_async(&streamed_key).await.unwrap();
                    let streamed = pattern(&mut rng, 3 * BLOCK as usize + 100);
                    let mut at = 0;
                    while at < streamed.len() {
                        at += writer.write_async(&streamed[at..]).await.unwrap();
                    }
                    writer.flush_async().await.unwrap();
                    let got = tree.get_async(&streamed_key).await.unwrap();
                    assert!(got == Some(streamed), "seed {seed} task {task}: write_async");
                    let mut reader =
                        tree.object_reader_async(&key).await.unwrap().expect("present");
                    let mut back = vec![0u8; model.len()];
                    let mut at = 0;
                    while at < back.len() {
                        at += reader.read_async(&mut back[at..]).await.unwrap();
                    }
                    assert!(back == model, "seed {seed} task {task}: read_async");
                    (key, model)
                })
                .unwrap()
            })
            .collect();
        let models: Vec<(Vec<u8>, Vec<u8>)> = handles.into_iter().map(|h| h.wait()).collect();
        let transfers: u64 = db
            .worker_stats()
            .iter()
            .map(|s| s.transfers.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        assert!(transfers > 0, "seed {seed}: no object data went through a worker's ring");
        for (key, model) in &models {
            assert_object(&tree, key, model, &format!("seed {seed}"));
        }
        drop(tree);
        assert_check(&db);
        db.close().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("objects").unwrap();
        for (key, model) in &models {
            assert_object(&tree, key, model, &format!("seed {seed} after reopen"));
        }
        drop(tree);
        db.close().unwrap();
    }
}

/// Dropping a tree while writers put objects into it: every write either lands before the
/// drop (and its object goes with the tree) or fails with `TreeNotFound`; no object is left
/// behind (`check` finds every object's entries owned by a stub), and the database stays
/// writable (a group commit holding a write into the dropped tree must not fail the log).
#[test]
fn dropping_a_tree_beside_its_object_writers_leaks_nothing() {
    for round in 0..12u64 {
        let dir = TempDir::with_prefix("objects-drop").unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let keep = db.tree("keep").unwrap();
        keep.write_at(b"k", 0, [7u8; 5000]).unwrap();
        let doomed = db.tree("doomed").unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let writers: Vec<_> = (0..3u64)
                .map(|w| {
                    let (doomed, keep, stop, db) = (doomed.clone(), keep.clone(), &stop, &db);
                    scope.spawn(move || {
                        let mut i = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let key = format!("w{w}-{i}").into_bytes();
                            // (Whole blocks and a fragment: extents, runs and log entries.)
                            let bytes = vec![(i % 251) as u8 | 1; 2 * BLOCK as usize + 100];
                            // One writer in three writes batches across both trees.
                            let written = match w {
                                0 => {
                                    let mut batch = WriteBatch::new();
                                    batch.put(&keep, b"b", &bytes[..100]);
                                    batch.put(&doomed, &key, &bytes[..100]);
                                    batch.write_at(&doomed, &key, 10, &bytes);
                                    db.write(&batch)
                                }
                                _ => doomed.write_at(&key, (i % 3) * 1000, &bytes),
                            };
                            match written {
                                Ok(()) => {}
                                Err(ferrite::Error::TreeNotFound { .. }) => break,
                                Err(e) => panic!("round {round} writer {w}: {e}"),
                            }
                            // Writes into a tree that stays, in the same groups.
                            keep.write_at(b"k", i * 10 % 4000, b"0123456789").unwrap();
                            i += 1;
                        }
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(5 + round * 3));
            db.drop_tree("doomed").unwrap();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            for writer in writers {
                writer.join().unwrap();
            }
        });
        keep.write_at(b"k", 0, b"still writable").unwrap();
        drop((keep, doomed));
        assert_check(&db);
        db.close().unwrap();
    }
}

#[test]
fn large_values_stream_in_and_out_and_free_their_pages() {
    let dir = TempDir::with_prefix("objects-large").unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    let mut rng = Rng::new(7);
    let big = pattern(&mut rng, 5 * 1024 * 1024 + 123);
    tree.put(b"big", &big).unwrap();
    assert_eq!(tree.get(b"big").unwrap().as_deref(), Some(&big[..]));
    let stat = tree.object_stat(b"big").unwrap().unwrap();
    assert_eq!(stat.len, big.len() as u64);
    assert!(!stat.inline && stat.fragments == 0);
    assert_eq!(stat.extent_pages, (big.len() as u64).div_ceil(BLOCK));
    assert!(stat.extents <= 6, "1 MiB runs, joined when contiguous: {stat:?}");
    // Streamed both ways.
    let streamed = pattern(&mut rng, 3 * 1024 * 1024 + 5);
    assert_eq!(tree.put_from(b"streamed", &mut &streamed[..]).unwrap(), streamed.len() as u64);
    let mut out = Vec::new();
    assert_eq!(tree.get_into(b"streamed", &mut out).unwrap(), Some(streamed.len() as u64));
    assert!(out == streamed);
    // A reader and a writer with seeks.
    let mut reader = tree.object_reader(b"streamed").unwrap().unwrap();
    reader.seek(SeekFrom::Start(1_000_000)).unwrap();
    let mut part = vec![0u8; 10_000];
    reader.read_exact(&mut part).unwrap();
    assert!(part[..] == streamed[1_000_000..1_010_000]);
    let mut writer = tree.object_writer(b"written").unwrap();
    writer.write_all(&streamed[..2_000_000]).unwrap();
    writer.seek(SeekFrom::Start(10)).unwrap();
    writer.write_all(b"over").unwrap();
    writer.flush().unwrap();
    drop(writer);
    let mut want = streamed[..2_000_000].to_vec();
    want[10..14].copy_from_slice(b"over");
    assert_object(&tree, b"written", &want, "writer");
    // A small value whose bytes begin like a stub is an object, and reads back as itself.
    let tricky = [0xFE, 0x4F, 0x42, 0x4A, 0x00, 0x7F, 0x53, 0x01, 9, 9, 9];
    tree.put(b"tricky", tricky).unwrap();
    assert_eq!(tree.get(b"tricky").unwrap().as_deref(), Some(&tricky[..]));
    assert!(!tree.object_stat(b"tricky").unwrap().unwrap().inline);
    assert_check(&db);
    let pages_before = db.check().unwrap().page_count;
    // Overwriting and deleting free the extents: the next big put reuses them.
    tree.delete(b"big").unwrap();
    tree.put(b"streamed", b"small now").unwrap();
    db.checkpoint().unwrap();
    tree.put(b"again", &big).unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.all_faults());
    assert_eq!(report.page_count, pages_before, "freed extents were reused");
    assert_eq!(report.objects.objects, 3, "again, written, tricky");
}

#[test]
fn writes_split_into_extents_and_fragments_and_merge() {
    let dir = TempDir::with_prefix("objects-fragments").unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    let mut model = vec![0u8; 64 * BLOCK as usize];
    tree.write_at(b"o", 0, &model).unwrap();
    // An unaligned write: whole blocks in the middle, fragments at both ends.
    let bytes = vec![7u8; 3 * BLOCK as usize];
    tree.write_at(b"o", 100, &bytes).unwrap();
    write_model(&mut model, 100, &bytes);
    let stat = tree.object_stat(b"o").unwrap().unwrap();
    assert_eq!((stat.fragments, stat.fragment_bytes), (2, BLOCK), "head and tail: {stat:?}");
    assert_object(&tree, b"o", &model, "unaligned");
    // 2 KiB writes into many blocks: fragments until the merge takes them.
    for b in 0..64u64 {
        let bytes = vec![b as u8 + 1; 2048];
        tree.write_at(b"o", b * BLOCK + 1024, &bytes).unwrap();
        write_model(&mut model, b * BLOCK + 1024, &bytes);
    }
    assert_object(&tree, b"o", &model, "small writes");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let stat = tree.object_stat(b"o").unwrap().unwrap();
        if stat.fragments < 64 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no merge: {stat:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_object(&tree, b"o", &model, "after the merge");
    assert_check(&db);
}

/// Crashes of a simulated disk while objects are written, some writes `Sync`, some not
/// (`None`: their commit may be lost, with every later one): after each recovery the object
/// is exactly one of the states a prefix of the writes made, never before the last `Sync`
/// one, never torn; `check` finds every extent page owned once. Merges and checkpoints run
/// between writes, so crashes find their writes pending or done.
#[test]
fn acknowledged_object_writes_survive_crashes() {
    for seed in seeds(16) {
        let disk = SimDisk::new(seed);
        let mut rng = Rng::new(seed ^ 0xABCD);
        let options = sim_options(&disk);
        // The states since the last durable one: [durable, after write 1, after write 2, ...].
        let mut states: Vec<Vec<u8>> = vec![b"start".to_vec()];
        for cycle in 0..6 {
            let db = Db::open("/sim", options.clone()).unwrap();
            let tree = db.tree("t").unwrap();
            let context = format!("seed {seed} cycle {cycle}");
            if cycle == 0 {
                tree.write_at(b"o", 0, b"start").unwrap();
            } else {
                let now = tree.get(b"o").unwrap().expect("the object survives");
                let at = states.iter().rposition(|s| *s == now);
                let Some(at) = at else {
                    panic!("{context}: the object ({} bytes) is no state a prefix made", now.len())
                };
                states.drain(..at);
                states.truncate(1);
                let report = db.check().unwrap();
                assert!(report.is_ok(), "{context}: {:?}", report.all_faults());
            }
            for _ in 0..(4 + rng.below(8)) {
                let mut model = states.last().unwrap().clone();
                let durable = rng.below(3) == 0;
                let mut batch_durability =
                    if durable { Durability::Sync } else { Durability::None };
                if rng.below(6) == 0 {
                    let new_len = rng.below(model.len() as u64 + 1);
                    // Truncation always syncs (the database's durability).
                    batch_durability = Durability::Sync;
                    tree.truncate(b"o", new_len).unwrap();
                    model.resize(new_len as usize, 0);
                } else {
                    let (offset, size) = region(&mut rng, model.len() as u64);
                    let (offset, size) = (offset.min(200_000), size.min(50_000));
                    let bytes = pattern(&mut rng, size);
                    match batch_durability {
                        Durability::Sync => tree.write_at(b"o", offset, &bytes).unwrap(),
                        _ => tree.write_at_with(b"o", offset, &bytes, Durability::None).unwrap(),
                    }
                    write_model(&mut model, offset, &bytes);
                }
                if batch_durability == Durability::Sync {
                    states = vec![model];
                } else {
                    states.push(model);
                }
            }
            if rng.coin() {
                db.merge_fragments().unwrap();
            }
            if rng.coin() {
                db.checkpoint().unwrap();
                // Everything logged is durable now.
                states.drain(..states.len() - 1);
            }
            drop(tree);
            db.abandon();
            disk.crash();
        }
    }
}

/// The byte at `offset` of the big object's data.
fn byte_at(offset: u64) -> u8 {
    (offset.wrapping_mul(0x9E37_79B9) >> 13) as u8 | 1
}

/// Yields `byte_at` for offsets `at..end` (a value too big to hold in memory).
struct Generated {
    at: u64,
    end: u64,
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.end - self.at) as usize);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = byte_at(self.at + i as u64);
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// An object of 4 GiB, read back whole by streaming and every byte checked. Sparse by
/// default (3 MiB of data at the start, across the 2 GiB mark and at the end; holes read as
/// zeros), so it fits CI's disk and time; `FERRITE_BIG_OBJECT=1` writes all 4 GiB with
/// `put_from` (about 4 GiB of disk).
#[test]
fn an_object_of_4_gib_streams_back_whole() {
    const LEN: u64 = 4 << 30;
    const MIB: u64 = 1 << 20;
    let dir = TempDir::with_prefix("objects-4gib").unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    let dense = std::env::var_os("FERRITE_BIG_OBJECT").is_some();
    let written: Vec<(u64, u64)> = if dense {
        let n = tree.put_from(b"big", &mut Generated { at: 0, end: LEN }).unwrap();
        assert_eq!(n, LEN);
        vec![(0, LEN)]
    } else {
        let ranges =
            vec![(0, MIB), (2 * 1024 * MIB - 100, 2 * 1024 * MIB - 100 + MIB), (LEN - MIB, LEN)];
        for &(start, end) in &ranges {
            let mut bytes = vec![0u8; (end - start) as usize];
            Generated { at: start, end }.read_exact(&mut bytes).unwrap();
            tree.write_at(b"big", start, &bytes).unwrap();
        }
        ranges
    };
    assert_eq!(tree.object_len(b"big").unwrap(), Some(LEN));
    let mut reader = tree.object_reader(b"big").unwrap().unwrap();
    let mut chunk = vec![0u8; 8 << 20];
    let mut at = 0u64;
    while at < LEN {
        let n = reader.read(&mut chunk).unwrap();
        assert!(n > 0, "the stream ended at {at}");
        let got = &chunk[..n];
        let data = written.iter().find(|(s, e)| *s < at + n as u64 && at < *e);
        if data.is_none() {
            assert!(got.iter().all(|&b| b == 0), "a hole at {at} reads zeros");
        } else {
            for (i, &b) in got.iter().enumerate() {
                let o = at + i as u64;
                let want =
                    if written.iter().any(|(s, e)| *s <= o && o < *e) { byte_at(o) } else { 0 };
                assert_eq!(b, want, "byte {o}");
            }
        }
        at += n as u64;
    }
    assert_eq!(reader.read(&mut chunk).unwrap(), 0, "nothing past the end");
    assert_check(&db);
}

/// Regression (found by the power-cut suite): object data is allocated before its commit,
/// so a crash between the two left page ids that no record named below a page count a later
/// record raised: `check` called them lost. Recovery now counts such ids as free.
#[test]
fn pages_allocated_for_an_object_that_never_committed_are_free_after_a_crash() {
    let disk = SimDisk::new(3);
    let options = sim_options(&disk);
    let db = Db::open("/sim", options.clone()).unwrap();
    let tree = db.tree("t").unwrap();
    tree.put(b"stock", b"1").unwrap();
    db.checkpoint().unwrap();
    // A transaction whose big value is written before its commit, which then conflicts.
    let mut txn = db.transaction();
    txn.get(&tree, b"stock").unwrap();
    txn.put(&tree, b"big", vec![5u8; 300_000]).unwrap();
    tree.put(b"stock", b"2").unwrap();
    assert!(matches!(txn.commit(), Err(ferrite::Error::Conflict { .. })));
    // Later commits allocate pages past the object's.
    for i in 0..400u32 {
        tree.put(format!("key-{i:05}").as_bytes(), [7u8; 200]).unwrap();
    }
    drop(tree);
    db.abandon();
    disk.crash();
    let db = Db::open("/sim", options).unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.all_faults());
    assert_eq!(db.open_tree("t").unwrap().get(b"big").unwrap(), None);
}

/// Many writers in one object at once, no lock between them: each thread owns a region
/// whose ends fall inside blocks its neighbours also write (so their fragments and extents
/// meet in the same blocks and entries); a merge runs meanwhile. Every byte ends as its
/// owner last wrote it, and `check` is clean.
#[test]
fn concurrent_writers_of_one_object_lose_nothing() {
    const THREADS: u64 = 6;
    const REGION: u64 = 3 * BLOCK + 1_000;
    let dir = TempDir::with_prefix("objects-concurrent").unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    tree.write_at(b"o", 0, vec![0u8; (THREADS * REGION) as usize]).unwrap();
    let models: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let tree = tree.clone();
                scope.spawn(move || {
                    let mut rng = Rng::new(t + 100);
                    let mut model = vec![0u8; REGION as usize];
                    for _ in 0..150 {
                        let cap = if rng.coin() { 200 } else { 2 * BLOCK };
                        let len = 1 + rng.below(cap) as usize;
                        let at = rng.below(REGION - len as u64 + 1);
                        let bytes = pattern(&mut rng, len);
                        tree.write_at(b"o", t * REGION + at, &bytes).unwrap();
                        model[at as usize..at as usize + len].copy_from_slice(&bytes);
                    }
                    model
                })
            })
            .collect();
        let merger = scope.spawn(|| {
            for _ in 0..20 {
                db.merge_fragments().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        merger.join().unwrap();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_object(&tree, b"o", &models.concat(), "after concurrent writers");
    assert_check(&db);
}

/// Regression: two writers making the first object of a database at once both found the
/// objects tree missing, and the loser failed with "a tree named \0objects exists already"
/// (seen by the power-cut suite, whose writers put objects from two threads).
#[test]
fn writers_racing_to_make_the_first_object_both_succeed() {
    const THREADS: usize = 4;
    for round in 0..8 {
        let dir = TempDir::with_prefix("objects-first-race").unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (tree, start) = (tree.clone(), &start);
                scope.spawn(move || {
                    start.wait();
                    let key = [b'k', t as u8];
                    tree.put(key, vec![t as u8; 3 * BLOCK as usize]).unwrap_or_else(|e| {
                        panic!("round {round}, writer {t}: first object write failed: {e}")
                    });
                });
            }
        });
        for t in 0..THREADS {
            let value = tree.get([b'k', t as u8]).unwrap().expect("written");
            assert_eq!(value, vec![t as u8; 3 * BLOCK as usize], "round {round}, writer {t}");
        }
        assert_check(&db);
    }
}

/// 2 KiB writes at random unaligned offsets of an object much larger than the pool read
/// nothing from the device: their bytes are appended to the fragment log, whose last leaf is
/// in memory, and no old block or fragment is read (the merge, which does read, is off).
/// Then the merge folds them, a reopen rebuilds the index, and every byte is the model's.
#[test]
fn small_unaligned_writes_read_nothing_from_the_device() {
    let dir = TempDir::with_prefix("objects-no-read").unwrap();
    let options = Options { object_merge_bytes_per_sec: 0, ..options() };
    let len = 16 << 20; // 4,096 blocks, 8x the pool
    let mut rng = Rng::new(7);
    let mut model = pattern(&mut rng, len);
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let tree = db.tree("t").unwrap();
        tree.put_from(b"o", &mut &model[..]).unwrap();
        let reads_before = db.stats().unwrap().pool.reads;
        for _ in 0..400 {
            let at = rng.below(len as u64 - 2048);
            let at = if at % BLOCK == 0 { at + 1 } else { at };
            let bytes = pattern(&mut rng, 2048);
            tree.write_at(b"o", at, &bytes).unwrap();
            write_model(&mut model, at, &bytes);
        }
        let reads = db.stats().unwrap().pool.reads - reads_before;
        assert_eq!(reads, 0, "2 KiB writes read {reads} pages from the device");
        let stat = tree.object_stat(b"o").unwrap().unwrap();
        assert!(stat.fragments > 300 && stat.fragment_bytes == 400 * 2048, "{stat:?}");
        assert_check(&db);
    }
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    let stat = tree.object_stat(b"o").unwrap().unwrap();
    assert_eq!(stat.fragment_bytes, 400 * 2048, "the index after a reopen: {stat:?}");
    assert_object(&tree, b"o", &model, "fragments after a reopen");
    let merged = db.merge_fragments().unwrap();
    // (A block whose entries straddle two merges' scans is rewritten by both.)
    assert!(merged >= stat.fragments, "{merged} blocks merged, {} fragmented", stat.fragments);
    assert_eq!(tree.object_stat(b"o").unwrap().unwrap().fragments, 0);
    assert_object(&tree, b"o", &model, "after the merge");
    assert_check(&db);
}

/// Fragments past their budget make writers merge: the fragment log stays near its budget
/// however fast small writes come, and nothing is lost.
#[test]
fn writers_merge_when_fragments_pass_their_budget() {
    let dir = TempDir::with_prefix("objects-budget").unwrap();
    let budget = 64 << 10;
    let options =
        Options { object_merge_bytes_per_sec: 0, object_fragment_bytes: budget, ..options() };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    let mut rng = Rng::new(11);
    let len = 4 << 20;
    let mut model = pattern(&mut rng, len);
    tree.write_at(b"o", 0, &model).unwrap();
    let mut most = 0;
    for _ in 0..600 {
        let n = 1 + rng.below(1500) as usize;
        let at = rng.below((len - n) as u64);
        let bytes = pattern(&mut rng, n);
        tree.write_at(b"o", at, &bytes).unwrap();
        write_model(&mut model, at, &bytes);
        most = most.max(db.object_space_stats().fragment_bytes);
    }
    // One write past the budget before a writer merges (64 blocks of at most 1,500 bytes
    // each go per merge).
    assert!(most <= budget + 1500, "fragments reached {most} bytes, budget {budget}");
    assert!(db.object_space_stats().merged_blocks > 0, "the writers merged (no merge thread)");
    assert_object(&tree, b"o", &model, "after writers merged");
    assert_check(&db);
}

/// Tasks put values of any size with `put_async` (past the in-leaf limit their data goes
/// through the worker's ring into a new object): a value replaces the key's whole value,
/// whatever it was, and frees the object it replaces; what the tasks read back, and what a
/// reopen finds, is the model. A task's first object needs `Db::ready_objects`.
#[test]
fn tasks_put_values_of_any_size() {
    for seed in seeds(2) {
        let dir = TempDir::with_prefix("objects-put-async").unwrap();
        let options = || Options { workers: 2, ..tiny(512) };
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("values").unwrap();
        let first = tree.clone();
        let refused = db.spawn(async move { first.put_async(b"big", &[7u8; 9000]).await });
        assert!(
            matches!(refused.unwrap().wait(), Err(ferrite::Error::NotSupported { .. })),
            "seed {seed}: a task's first object before ready_objects"
        );
        db.ready_objects().unwrap();
        let sizes = [
            0usize,
            100,
            4056,
            4057,
            4096,
            4560,
            4561,
            9000,
            3 * BLOCK as usize,
            1 << 20,
            (1 << 20) + 3,
        ];
        let handles: Vec<_> = (0..4u64)
            .map(|task| {
                let tree = tree.clone();
                db.spawn(async move {
                    let mut rng = Rng::new(seed * 77 + task);
                    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                    for step in 0..40 {
                        let key = format!("t{task}-k{}", rng.below(5)).into_bytes();
                        let size = sizes[rng.below(sizes.len() as u64) as usize];
                        let value = pattern(&mut rng, size);
                        tree.put_async(&key, &value).await.unwrap();
                        model.insert(key.clone(), value);
                        let got = tree.get_async(&key).await.unwrap();
                        assert!(
                            got.as_deref() == model.get(&key).map(|v| &v[..]),
                            "seed {seed} task {task} step {step}: {size} bytes back"
                        );
                    }
                    model
                })
                .unwrap()
            })
            .collect();
        let model: BTreeMap<Vec<u8>, Vec<u8>> =
            handles.into_iter().flat_map(|h| h.wait()).collect();
        assert_check(&db);
        db.close().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("values").unwrap();
        for (key, value) in &model {
            assert!(tree.get(key).unwrap().as_deref() == Some(&value[..]), "seed {seed}: reopened");
        }
        // (Every replaced object's pages are free again: `check` finds none lost.)
        assert_check(&db);
        db.close().unwrap();
    }
}

/// `ValueSlices` from a task: a value in its leaf and an object read a slice at a time give
/// their bytes whole and in order; a value replaced or deleted between two slices ends the
/// reader with `None`, never bytes of the new value; a reader that began before the change
/// keeps none of it.
#[test]
fn value_slices_read_one_version_or_say_it_changed() {
    let dir = TempDir::with_prefix("objects-slices").unwrap();
    let db = Db::open(dir.path(), Options { workers: 1, ..tiny(512) }).unwrap();
    let tree = db.tree("t").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    tree.put(b"big", &big).unwrap();
    tree.put(b"small", b"a small value").unwrap();
    let reader = tree.clone();
    let big_copy = big.clone();
    let outcome = db
        .spawn(async move {
            let tree = reader;
            assert!(tree.value_slices_async(b"absent").await.unwrap().is_none());
            let mut small = tree.value_slices_async(b"small").await.unwrap().unwrap();
            assert!(!small.is_object());
            let mut buf = vec![0u8; 5];
            let mut got = Vec::new();
            while let Some(n) = small.read_async(&mut buf).await.unwrap() {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"a small value");
            // Whole, in slices of 64 KiB.
            let mut slices = tree.value_slices_async(b"big").await.unwrap().unwrap();
            assert!(slices.is_object());
            assert_eq!(slices.len(), big_copy.len() as u64);
            let mut buf = vec![0u8; 64 << 10];
            let mut got = Vec::new();
            loop {
                let n = slices.read_async(&mut buf).await.unwrap().expect("unchanged");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert!(got == big_copy, "read in slices");
            assert_eq!(slices.position(), slices.len());
            // Replaced between two slices: the next says so.
            let mut slices = tree.value_slices_async(b"big").await.unwrap().unwrap();
            assert_eq!(slices.read_async(&mut buf).await.unwrap(), Some(64 << 10));
            let other = vec![7u8; 200_000];
            tree.put_async(b"big", &other).await.unwrap();
            assert_eq!(slices.read_async(&mut buf).await.unwrap(), None, "replaced");
            // Deleted between two slices: the same.
            let mut slices = tree.value_slices_async(b"big").await.unwrap().unwrap();
            assert_eq!(slices.len(), 200_000);
            assert_eq!(slices.read_async(&mut buf).await.unwrap(), Some(64 << 10));
            assert!(buf.iter().all(|&b| b == 7));
            tree.delete_async(b"big").await.unwrap();
            assert_eq!(slices.read_async(&mut buf).await.unwrap(), None, "deleted");
        })
        .unwrap();
    outcome.wait();
    assert_check(&db);
    drop(tree);
    db.close().unwrap();
}
