//! The second cache tier (`Options::tier`) as a cache must be: a tiny pool over a tiny tier,
//! random puts, deletes, reads and tree drops checked against a model on threads (blocking
//! loads) and in tasks (loads on the worker's ring), so that pages go round pool → tier →
//! pool many times and change in between; a copy that went stale is never served; and after
//! a crash the tier's old contents are never trusted.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use common::{assert_check, seeds, tiny, Rng, TempDir};
use ferrite::{Db, Options, TierAdmission, TierFilter, TierMedium, TierOptions};

/// A pool of 48 pages over a tier of 96 (admitting every page unless told), without the
/// frequency filter: each evicted page admission lets in goes in, so pages go round.
fn options(dir: &Path, workers: usize, admission: TierAdmission) -> Options {
    filtered(dir, workers, admission, TierFilter::Off)
}

fn filtered(dir: &Path, workers: usize, admission: TierAdmission, filter: TierFilter) -> Options {
    let tier =
        TierOptions { admission, filter, ..TierOptions::new(dir.join("tier.cache"), 96 * 4096) };
    Options { workers, tier: Some(tier), ..tiny(48) }
}

fn value(rng: &mut Rng, key: u64) -> Vec<u8> {
    // Mostly small values (many per leaf); some on Value pages.
    let len = if rng.below(10) == 0 { 1000 + rng.index(3000) } else { 20 + rng.index(200) };
    let mut v = key.to_be_bytes().to_vec();
    v.extend(rng.bytes(len));
    v
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// Random changes and reads on two trees, the second dropped and made again now and then.
fn run_model(db: &Arc<Db>, seed: u64, in_tasks: bool) {
    let mut rng = Rng::new(seed);
    let mut models: [BTreeMap<u64, Vec<u8>>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let names = ["a", "b"];
    for step in 0..6_000 {
        let t = rng.index(2);
        let tree = db.tree(names[t]).unwrap();
        let k = rng.below(3_000);
        match rng.below(20) {
            0..=6 => {
                let v = value(&mut rng, k);
                tree.put(key(k), &v).unwrap();
                models[t].insert(k, v);
            }
            7 => {
                tree.delete(key(k)).unwrap();
                models[t].remove(&k);
            }
            8 if t == 1 && rng.below(40) == 0 => {
                db.drop_tree("b").unwrap();
                models[1].clear();
            }
            _ => {
                let got = if in_tasks {
                    let tree = tree.clone();
                    db.spawn(async move { tree.get_async(key(k)).await }).unwrap().wait().unwrap()
                } else {
                    tree.get(key(k)).unwrap()
                };
                assert!(
                    got.as_ref() == models[t].get(&k),
                    "seed {seed} step {step}: tree {} key {k}: {:?} bytes, {:?} expected",
                    names[t],
                    got.as_ref().map(Vec::len),
                    models[t].get(&k).map(Vec::len)
                );
            }
        }
    }
    for (t, model) in models.iter().enumerate() {
        let tree = db.tree(names[t]).unwrap();
        let all: Vec<(Vec<u8>, Vec<u8>)> = tree.iter().map(Result::unwrap).collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(k, v)| (key(*k).to_vec(), v.clone())).collect();
        assert!(all == expected, "seed {seed}: tree {} differs from its model", names[t]);
    }
}

#[test]
fn a_tiny_tier_under_a_tiny_pool_matches_the_model() {
    for seed in seeds(2) {
        for in_tasks in [false, true] {
            let dir = TempDir::with_prefix("tier-model").unwrap();
            for filter in [TierFilter::Off, TierFilter::Frequency] {
                let sub = dir.path().join(filter.name());
                std::fs::create_dir(&sub).unwrap();
                let workers = usize::from(in_tasks);
                let options = filtered(&sub, workers, TierAdmission::All, filter);
                let db = Arc::new(Db::open(sub.join("db"), options).unwrap());
                run_model(&db, seed, in_tasks);
                let tier = db.stats().unwrap().pool.tier.expect("a tier");
                // Pages went round: copied in, served, dropped when they changed, pushed
                // out (with the filter, some turned away by it).
                assert!(tier.hits > 100, "seed {seed}: {tier:?}");
                assert!(tier.inserts > 100 && tier.invalidations > 10, "seed {seed}: {tier:?}");
                assert!(tier.evictions > 10, "seed {seed}: {tier:?}");
                match filter {
                    TierFilter::Off => assert_eq!(tier.filtered, 0),
                    TierFilter::Frequency => assert!(tier.filtered > 10, "{tier:?}"),
                }
                assert_check(&db);
            }
        }
    }
}

/// A block medium: in tasks its copies are read and written through the workers' rings
/// (with completions held for an added latency, or not), on threads with blocking calls;
/// either way every read matches the model, and pages went round through the tier.
#[test]
fn a_block_tier_matches_the_model() {
    for (in_tasks, latency_us) in [(false, 0), (true, 0), (true, 30)] {
        let dir = TempDir::with_prefix("tier-block").unwrap();
        let mut options = options(dir.path(), usize::from(in_tasks) * 2, TierAdmission::All);
        let tier = options.tier.as_mut().unwrap();
        tier.medium = TierMedium::Block;
        tier.latency = std::time::Duration::from_micros(latency_us);
        let db = Arc::new(Db::open(dir.path().join("db"), options).unwrap());
        run_model(&db, 3, in_tasks);
        let tier = db.stats().unwrap().pool.tier.expect("a tier");
        let what = format!("tasks {in_tasks}, latency {latency_us} µs: {tier:?}");
        assert!(tier.hits > 100 && tier.inserts > 100, "{what}");
        assert!(tier.invalidations > 10 && tier.evictions > 10, "{what}");
        let ring: u64 = db
            .worker_stats()
            .iter()
            .map(|w| w.tier_reads.load(Relaxed) + w.tier_writes.load(Relaxed))
            .sum();
        // In tasks the workers' rings carry the tier's I/O; on threads, none.
        assert_eq!(ring > 100, in_tasks, "{ring} through the rings; {what}");
        assert_check(&db);
    }
}

/// A database with a block tier closed and opened again at once gets its tier back: the
/// workers' rings, which the kernel tears down after the close, never hold the tier's lock
/// (they open the file apart). With the lock's own descriptor in the rings, the next open
/// found the tier "in use".
#[test]
fn a_block_tier_is_free_again_as_soon_as_its_database_closed() {
    let dir = TempDir::with_prefix("tier-reopen").unwrap();
    for round in 0..5 {
        let mut options = options(dir.path(), 2, TierAdmission::All);
        options.tier.as_mut().unwrap().medium = TierMedium::Block;
        let db = Db::open(dir.path().join("db"), options)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let tree = db.tree("t").unwrap();
        tree.put(key(round), b"v").unwrap();
        db.close().unwrap();
    }
}

/// A page served from the tier, changed, and evicted again is served as it is now.
#[test]
fn a_changed_page_is_never_served_from_its_old_copy() {
    let dir = TempDir::with_prefix("tier-stale").unwrap();
    let db = Db::open(dir.path().join("db"), options(dir.path(), 0, TierAdmission::All)).unwrap();
    let tree = db.tree("t").unwrap();
    let filler = db.tree("filler").unwrap();
    let evict_all = |round: u64| {
        // More pages than the pool holds (and fewer than the tier): every page of `t`
        // leaves the pool. Leaves of two values each, no Value pages: while the clock also
        // chooses Value pages it spares leaves, `t`'s among them (`buffer/evict.rs`).
        for i in 0..120 {
            filler.put(format!("{round}-{i:03}"), vec![round as u8; 1400]).unwrap();
        }
    };
    for round in 0..20u64 {
        tree.put("k", round.to_be_bytes()).unwrap();
        evict_all(round);
        assert_eq!(tree.get("k").unwrap().as_deref(), Some(&round.to_be_bytes()[..]));
    }
    let tier = db.stats().unwrap().pool.tier.unwrap();
    assert!(tier.hits > 0 && tier.invalidations > 0, "{tier:?}");
    assert_check(&db);
}

/// After a crash the tier file still holds copies of pages that changed since they were
/// copied: the next open empties the tier, and every read is of the recovered data.
#[test]
fn after_a_crash_the_old_tier_is_never_trusted() {
    let dir = TempDir::with_prefix("tier-crash").unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng::new(7);
    for round in 0..3 {
        let db =
            Db::open(dir.path().join("db"), options(dir.path(), 0, TierAdmission::All)).unwrap();
        let tree = db.tree("t").unwrap();
        for k in 0..model.len() as u64 {
            assert!(tree.get(key(k)).unwrap().as_ref() == model.get(&k), "round {round} key {k}");
        }
        for _ in 0..2_000 {
            let k = rng.below(1_500);
            let v = value(&mut rng, k);
            tree.put(key(k), &v).unwrap();
            model.insert(k, v);
        }
        assert!(db.stats().unwrap().pool.tier.unwrap().inserts > 0);
        db.abandon(); // a crash: nothing written back, the tier file left as it is
    }
    let db = Db::open(dir.path().join("db"), options(dir.path(), 0, TierAdmission::All)).unwrap();
    let tree = db.tree("t").unwrap();
    let all: BTreeMap<u64, Vec<u8>> = tree
        .iter()
        .map(|e| e.map(|(k, v)| (u64::from_be_bytes(k.try_into().unwrap()), v)))
        .collect::<ferrite::Result<_>>()
        .unwrap();
    assert!(all == model, "the recovered data differs from what was committed");
    assert_check(&db);
}

/// `Never` copies nothing in; a tier too small is refused at open.
#[test]
fn admission_never_and_a_tier_too_small() {
    let dir = TempDir::with_prefix("tier-never").unwrap();
    let db = Arc::new(
        Db::open(dir.path().join("db"), options(dir.path(), 0, TierAdmission::Never)).unwrap(),
    );
    run_model(&db, 1, false);
    let tier = db.stats().unwrap().pool.tier.unwrap();
    assert_eq!((tier.inserts, tier.hits), (0, 0), "{tier:?}");
    assert!(tier.refused > 0 && tier.lookups > 0, "{tier:?}");
    drop(db);
    let small = TierOptions::new(dir.path().join("small"), 4096);
    let refused = Db::open(dir.path().join("db2"), Options { tier: Some(small), ..tiny(48) });
    assert!(matches!(refused, Err(ferrite::Error::BadOptions { .. })));
}

/// Scans bypass the tier: what a scan brings into the pool is not copied into the tier when
/// it leaves (on threads and in tasks), while the same pages read by point lookups are.
#[test]
fn scans_bypass_the_tier() {
    const KEYS: u64 = 8_000;
    for in_tasks in [false, true] {
        let dir = TempDir::with_prefix("tier-scans").unwrap();
        let options = options(dir.path(), usize::from(in_tasks), TierAdmission::All);
        let db = Arc::new(Db::open(dir.path().join("db"), options).unwrap());
        let tree = db.tree("t").unwrap();
        for k in 0..KEYS {
            tree.put(key(k), [7u8; 100]).unwrap();
        }
        let inserted = || db.stats().unwrap().pool.tier.unwrap().inserts;
        // The first scan pushes out the pages the puts brought in (those go to the tier).
        assert_eq!(tree.iter().count() as u64, KEYS);
        let before = inserted();
        for _ in 0..2 {
            if in_tasks {
                let tree = tree.clone();
                let seen = db
                    .spawn(async move { tree.scan_async(b"", usize::MAX, |_, _| ()).await })
                    .unwrap()
                    .wait()
                    .unwrap();
                assert_eq!(seen as u64, KEYS);
            } else {
                assert_eq!(tree.iter().count() as u64, KEYS);
            }
        }
        // A few pages that were no scan's may go in meanwhile: inner nodes the puts brought
        // in (the clock spares them longer than leaves), pages `stats` reads. Without the
        // bypass, the two scans copied in 440.
        let during = inserted() - before;
        assert!(during <= 16, "in_tasks {in_tasks}: {during} pages copied in while scanning");
        let before = inserted();
        for k in (0..KEYS).step_by(20) {
            if in_tasks {
                let tree = tree.clone();
                db.spawn(async move { tree.get_async(key(k)).await }).unwrap().wait().unwrap();
            } else {
                tree.get(key(k)).unwrap();
            }
        }
        // Point reads brought the leaves in; a scan pushes them out, into the tier.
        assert_eq!(tree.iter().count() as u64, KEYS);
        let after = inserted() - before;
        assert!(after > 20, "in_tasks {in_tasks}: point reads' pages copied in: {after}");
    }
}

/// `Db::check` verifies the disk: a page it misses is read from the device, never from the
/// tier's copy, and is not copied in when it leaves. Its walk leaves the tier's counters as
/// they were, while the same pages read by gets go through the tier.
#[test]
fn check_reads_the_disk_and_leaves_the_tier_alone() {
    const KEYS: u64 = 4_000;
    let dir = TempDir::with_prefix("tier-check").unwrap();
    let options = Options {
        durability: ferrite::Durability::None,
        ..options(dir.path(), 0, TierAdmission::All)
    };
    let db = Arc::new(Db::open(dir.path().join("db"), options).unwrap());
    let tree = db.tree("t").unwrap();
    for k in 0..KEYS {
        tree.put(key(k), [7u8; 100]).unwrap();
    }
    db.checkpoint().unwrap();
    for k in (0..KEYS).step_by(7) {
        tree.get(key(k)).unwrap();
    }
    // (The pool's own counters: `Db::stats` reads pages of its own.)
    let tier = || {
        let t = db.pool().stats().tier.unwrap();
        (t.lookups, t.hits, t.inserts)
    };
    let before = tier();
    assert!(before.2 > 0, "the gets' pages went round through the tier: {before:?}");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.all_faults());
    let after = tier();
    assert_eq!((after.0, after.1), (before.0, before.1), "the check read from the tier");
    // The walk pushes out the 48 pages the gets left in the pool (those go in, as any
    // eviction of theirs would), but none of its own: without the bypass, 120 more.
    let copied = after.2 - before.2;
    assert!(copied <= 48, "the check's pages were copied in: {copied}");
    // The gets again: their misses look in the tier.
    for k in (0..KEYS).step_by(7) {
        tree.get(key(k)).unwrap();
    }
    assert!(tier().0 > before.0);
    drop(tree);
    assert_check(&Arc::into_inner(db).unwrap());
}

/// The frequency filter through the pool: a hot set of leaves twice the pool's size, read
/// over and over between reads of cold leaves each read once. Without the filter each
/// cold leaf the pool evicts pushes out whatever copy the clock reaches, hot ones too
/// (their second chance spares some); with it cold leaves (looked up once) push nothing
/// out, and nearly every miss of a hot leaf is served by the tier.
#[test]
fn the_frequency_filter_keeps_hot_copies_through_a_stream_of_cold_pages() {
    // 1 KiB values: three to a leaf. Hot: keys 0..288 (about 96 leaves, the tier's size,
    // twice the pool's 48 pages); cold: the keys after, about 1,400 leaves.
    const HOT: u64 = 288;
    const COLD: u64 = 4_200;
    let mut hits = Vec::new();
    for filter in [TierFilter::Off, TierFilter::Frequency] {
        let dir = TempDir::with_prefix("tier-filter").unwrap();
        let options = filtered(dir.path(), 0, TierAdmission::All, filter);
        let db = Db::open(dir.path().join("db"), options).unwrap();
        let tree = db.tree("t").unwrap();
        for k in 0..HOT + COLD {
            tree.put(key(k), [k as u8; 1000]).unwrap();
        }
        let before = db.stats().unwrap().pool.tier.unwrap();
        let mut rng = Rng::new(5);
        for cold in HOT..HOT + COLD {
            let hot = rng.below(HOT);
            assert_eq!(tree.get(key(hot)).unwrap().unwrap(), [hot as u8; 1000]);
            assert_eq!(tree.get(key(cold)).unwrap().unwrap(), [cold as u8; 1000]);
        }
        let after = db.stats().unwrap().pool.tier.unwrap();
        let (lookups, served) = (after.lookups - before.lookups, after.hits - before.hits);
        match filter {
            TierFilter::Off => assert_eq!(after.filtered, 0),
            TierFilter::Frequency => assert!(after.filtered > 1_000, "{after:?}"),
        }
        assert_check(&db);
        hits.push((served, lookups));
    }
    let [(off, off_lookups), (on, on_lookups)] = hits[..] else { unreachable!() };
    // Each lookup is a pool miss: about 1,400 cold leaves, and about 3,100 of the 4,200
    // hot reads (measured: 2,098 hits without the filter, 3,016 with it).
    assert!(off_lookups > COLD && on_lookups > COLD, "{hits:?}");
    assert!(on * 4 > off * 5 && on > 2_700, "tier hits off / on: {hits:?}");
}
