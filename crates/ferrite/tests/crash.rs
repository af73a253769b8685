//! Crash and recovery on a simulated disk: thousands of seeded cycles of random batches over
//! two trees, checkpoints and injected write / sync failures, each ended by a simulated power
//! cut (unsynced writes lost or torn at 512-byte granularity), then recovery. After every
//! recovery the database must hold exactly what was acknowledged, plus a prefix of the
//! commits whose fate was open (not waited for, or failed), never part of one; and `check`
//! must find it whole. Some recoveries meet write errors and a power cut of their own before
//! the next one runs. Replay one seed with `FERRITE_SEED=n` (`FERRITE_TRACE=1` prints what
//! each cycle did).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::TempDir;
use ferrite::testing::{Rng, SimDisk, SimFaults};
use ferrite::{Db, Durability, Error, Options, WriteBatch};

/// Disks (seeds), and crash cycles per disk.
const DISKS: u64 = 250;
const CYCLES_PER_DISK: u64 = 8;

type State = BTreeMap<(u8, Vec<u8>), Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>, Vec<u8>),
    Delete(u8, Vec<u8>),
}

fn apply(state: &mut State, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(t, k, v) => {
                state.insert((*t, k.clone()), v.clone());
            }
            Op::Delete(t, k) => {
                state.remove(&(*t, k.clone()));
            }
        }
    }
}

fn options(disk: &Arc<SimDisk>) -> Options {
    common::sim_options(disk)
}

/// What a suite's disks hold: keys drawn from `keys` per tree, and `preload` keys per tree
/// written (and made durable) before the first crash, so that the trees outgrow the pool.
#[derive(Debug, Clone, Copy)]
struct Suite {
    keys: u64,
    preload: u64,
}

const SMALL: Suite = Suite { keys: 300, preload: 0 };
/// Trees of ~60 leaves each against a pool of 31 frames: puts meet leaves not in memory,
/// and the change buffer takes them.
const BUFFERED: Suite = Suite { keys: 3000, preload: 1500 };

fn random_batch(rng: &mut Rng, suite: Suite) -> Vec<Op> {
    // (At most 7 changes: what the suite's 32-page pool takes in one batch.)
    let most = if rng.below(4) == 0 { 7 } else { 3 };
    let len = 1 + rng.below(most);
    (0..len)
        .map(|_| {
            let tree = rng.below(2) as u8;
            let key = format!("key-{:04}", rng.below(suite.keys)).into_bytes();
            if rng.below(4) == 0 {
                Op::Delete(tree, key)
            } else {
                // Mostly small values; some go to Value pages.
                let len = if rng.below(10) == 0 { 1500 + rng.below(2500) } else { rng.below(120) };
                let byte = rng.next_u64() as u8;
                Op::Put(tree, key, vec![byte; len as usize])
            }
        })
        .collect()
}

fn read_all(db: &Db) -> State {
    let mut state = State::new();
    for (t, name) in ["a", "b"].iter().enumerate() {
        let tree = db.open_tree(name).expect("trees exist after the first cycle");
        for entry in tree.iter() {
            let (k, v) = entry.expect("reading a recovered tree");
            state.insert((t as u8, k), v);
        }
    }
    state
}

/// What the cycles went through, to show the suite is not vacuous.
#[derive(Debug, Default)]
struct Seen {
    cycles: u64,
    commits: u64,
    failed_commits: u64,
    records_replayed: u64,
    pages_replayed: u64,
    torn_tails: u64,
    open_commits_lost: u64,
    recoveries_interrupted: u64,
    recoveries_survived_faults: u64,
    /// Single puts (`Tree::put`), and how many of them the change buffer took.
    single_puts: u64,
    buffered_puts: u64,
    /// Batches committed as transactions instead (blind puts and deletes), and how many of
    /// them left entries in the change buffer.
    transactions: u64,
    buffered_transactions: u64,
    /// Entries recoveries found in the change buffer.
    recovered_buffered: u64,
}

/// Runs one disk through its crash cycles.
fn run_disk(seed: u64, seen: &mut Seen, suite: Suite) {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xA5A5);
    let disk = SimDisk::new(seed);
    let dir = TempDir::with_prefix("crash").unwrap();
    // What is acknowledged as durable, and the commits after it whose fate is open.
    let mut durable = State::new();
    let mut open: Vec<Vec<Op>> = Vec::new();
    for cycle in 0..CYCLES_PER_DISK {
        // Now and then recovery itself meets write errors and the power fails during it;
        // the next recovery starts over from what that one left.
        if cycle > 0 && rng.below(4) == 0 {
            disk.set_faults(SimFaults { write_error_per_million: 100_000, ..Default::default() });
            match Db::open(dir.path(), options(&disk)) {
                Ok(db) => {
                    if std::env::var_os("FERRITE_TRACE").is_some() {
                        eprintln!(
                            "cycle {cycle}: faulty recovery survived {:?}",
                            db.recovery_report()
                        );
                    }
                    seen.recoveries_survived_faults += 1;
                    disk.crash();
                    db.abandon();
                }
                Err(e) => {
                    if std::env::var_os("FERRITE_TRACE").is_some() {
                        eprintln!("cycle {cycle}: faulty recovery failed: {e}");
                    }
                    seen.recoveries_interrupted += 1;
                    disk.crash();
                }
            }
        }
        disk.set_faults(SimFaults::default());
        let db = match Db::open(dir.path(), options(&disk)) {
            Ok(db) => db,
            Err(e) => panic!("seed {seed} cycle {cycle}: recovery failed: {e}"),
        };
        // The recovered state: the durable one plus a prefix of the open commits.
        let found = read_all_or_create(&db, cycle);
        let mut candidate = durable.clone();
        let mut matched = found == candidate;
        for batch in &open {
            if matched {
                break;
            }
            apply(&mut candidate, batch);
            matched = found == candidate;
        }
        if !matched {
            for (key, value) in &durable {
                match found.get(key) {
                    Some(v) if v == value => {}
                    other => eprintln!(
                        "key {key:?}: acknowledged {} bytes of {:?}, found {:?}",
                        value.len(),
                        value.first(),
                        other.map(|v| (v.len(), v.first()))
                    ),
                }
            }
        }
        if matched {
            let kept = open.iter().scan(durable.clone(), |c, b| {
                apply(c, b);
                Some(c.clone())
            });
            let prefix = std::iter::once(durable.clone()).chain(kept).position(|c| c == found);
            seen.open_commits_lost += (open.len() - prefix.unwrap_or(0)) as u64;
        }
        assert!(
            matched,
            "seed {seed} cycle {cycle}: the recovered state is not the acknowledged one plus a \
             prefix of the {} open commits ({} keys found, {} acknowledged)",
            open.len(),
            found.len(),
            durable.len()
        );
        if std::env::var_os("FERRITE_TRACE").is_some() {
            eprintln!("cycle {cycle}: recovered {:?}", db.recovery_report());
        }
        seen.cycles += 1;
        seen.records_replayed += db.recovery_report().records;
        seen.pages_replayed += db.recovery_report().pages_applied;
        seen.torn_tails += (db.recovery_report().torn_bytes > 0) as u64;
        seen.recovered_buffered += db.recovery_report().buffered;
        let report = db.check().expect("check runs");
        assert!(report.is_ok(), "seed {seed} cycle {cycle}: {:?}", report.all_faults());
        durable = found;
        open.clear();
        if cycle == 0 && suite.preload > 0 {
            let preload_trees = [db.open_tree("a").unwrap(), db.open_tree("b").unwrap()];
            let mut batch = WriteBatch::new();
            batch.durability(Durability::None);
            for i in 0..suite.preload {
                let key = format!("key-{:04}", i * suite.keys / suite.preload).into_bytes();
                let value = vec![i as u8; 20 + (i % 40) as usize];
                for (t, tree) in preload_trees.iter().enumerate() {
                    batch.put(tree, &key, &value);
                    durable.insert((t as u8, key.clone()), value.clone());
                }
                if batch.len() >= 6 {
                    db.write(&batch).expect("preloading");
                    batch = WriteBatch::new();
                    batch.durability(Durability::None);
                }
            }
            db.write(&batch).expect("preloading");
            // An empty commit that waits: everything before it is durable.
            db.write(&WriteBatch::new()).expect("syncing the preload");
        }
        // Faults for this cycle: none, rare write errors, or rare sync errors.
        match rng.below(4) {
            0 => {
                disk.set_faults(SimFaults { write_error_per_million: 20_000, ..Default::default() })
            }
            1 => {
                disk.set_faults(SimFaults { sync_error_per_million: 50_000, ..Default::default() })
            }
            _ => {}
        }
        let trees = [db.open_tree("a").unwrap(), db.open_tree("b").unwrap()];
        let steps = 5 + rng.below(40);
        for _ in 0..steps {
            if rng.below(15) == 0 {
                if std::env::var_os("FERRITE_TRACE").is_some() {
                    eprintln!("cycle {cycle}: checkpoint");
                }
                if db.checkpoint().is_err() {
                    break;
                }
                continue;
            }
            let ops = random_batch(&mut rng, suite);
            let waits = rng.below(3) != 0;
            let mut batch = WriteBatch::new();
            for op in &ops {
                match op {
                    Op::Put(t, k, v) => batch.put(&trees[*t as usize], k, v),
                    Op::Delete(t, k) => batch.delete(&trees[*t as usize], k),
                };
            }
            batch.durability(if waits { Durability::Sync } else { Durability::None });
            // A single put that waits goes through `Tree::put` half of the time: into the
            // change buffer when its leaf is not in memory.
            let outcome = match &ops[..] {
                [Op::Put(t, k, v)] if waits && rng.below(2) == 0 => {
                    let before = db.change_buffer().0;
                    let outcome = trees[*t as usize].put(k, v);
                    seen.single_puts += 1;
                    seen.buffered_puts += (db.change_buffer().0 > before) as u64;
                    outcome
                }
                // A third of the others as a transaction of blind writes: its puts into
                // leaves not in memory wait in the change buffer too (its share of it).
                _ if rng.below(3) == 0 => {
                    let mut txn = db.transaction();
                    txn.durability(if waits { Durability::Sync } else { Durability::None });
                    for op in &ops {
                        match op {
                            Op::Put(t, k, v) => txn.put(&trees[*t as usize], k, v),
                            Op::Delete(t, k) => txn.delete(&trees[*t as usize], k),
                        }
                        .expect("a transaction takes the write");
                    }
                    let before = db.change_buffer().0;
                    let outcome = txn.commit();
                    seen.transactions += 1;
                    seen.buffered_transactions += (db.change_buffer().0 > before) as u64;
                    outcome
                }
                _ => db.write(&batch),
            };
            if std::env::var_os("FERRITE_TRACE").is_some() {
                eprintln!(
                    "cycle {cycle}: batch of {} -> {:?}",
                    ops.len(),
                    outcome.as_ref().err().map(|e| e.to_string())
                );
            }
            seen.commits += 1;
            match outcome {
                Ok(()) if waits => {
                    // Acknowledged durable: so is every commit before it.
                    for earlier in open.drain(..) {
                        apply(&mut durable, &earlier);
                    }
                    apply(&mut durable, &ops);
                }
                Ok(()) => open.push(ops),
                Err(_) => {
                    seen.failed_commits += 1;
                    // Its record may or may not have reached the disk; the database now
                    // refuses writes.
                    open.push(ops);
                    assert!(
                        matches!(db.write(&WriteBatch::new()), Err(Error::LogFailed { .. })),
                        "seed {seed}: a failed commit must stop further writes"
                    );
                    break;
                }
            }
        }
        disk.crash();
        db.abandon();
    }
}

fn read_all_or_create(db: &Db, cycle: u64) -> State {
    if cycle == 0 {
        db.tree("a").unwrap();
        db.tree("b").unwrap();
    }
    read_all(db)
}

#[test]
fn thousands_of_crashes_lose_nothing_acknowledged_and_no_half_batch() {
    let seeds: Vec<u64> = match std::env::var("FERRITE_SEED") {
        Ok(seed) => vec![seed.parse().expect("FERRITE_SEED is a number")],
        Err(_) => (0..DISKS).collect(),
    };
    let mut seen = Seen::default();
    for &seed in &seeds {
        run_disk(seed, &mut seen, SMALL);
    }
    eprintln!("{seen:?}");
    if seeds.len() > 1 {
        assert_eq!(seen.cycles, DISKS * CYCLES_PER_DISK);
        // The run covered what it claims to: replays, torn log tails, failed commits, and
        // commits lost because nobody waited for them.
        assert!(seen.records_replayed > seen.cycles, "{seen:?}");
        assert!(seen.torn_tails > 10, "{seen:?}");
        assert!(seen.failed_commits > 10, "{seen:?}");
        assert!(seen.open_commits_lost > 10, "{seen:?}");
        assert!(seen.recoveries_interrupted > 10, "{seen:?}");
    }
}

/// Disks of the change-buffer suite (each with `CYCLES_PER_DISK` cycles).
const BUFFERED_DISKS: u64 = 60;

/// The same cycles over trees larger than the pool: single puts into leaves not in memory
/// wait in the change buffer (and drain when it fills), so that crashes meet buffered puts
/// in the log and in checkpoints. Replay one seed with `FERRITE_SEED=n`.
#[test]
fn crashes_with_puts_in_the_change_buffer_lose_nothing_acknowledged() {
    let seeds: Vec<u64> = match std::env::var("FERRITE_SEED") {
        Ok(seed) => vec![seed.parse().expect("FERRITE_SEED is a number")],
        Err(_) => (1000..1000 + BUFFERED_DISKS).collect(),
    };
    let mut seen = Seen::default();
    for &seed in &seeds {
        run_disk(seed, &mut seen, BUFFERED);
    }
    eprintln!("{seen:?}");
    if seeds.len() > 1 {
        assert_eq!(seen.cycles, BUFFERED_DISKS * CYCLES_PER_DISK);
        // Puts went to the change buffer, and recoveries brought buffered entries back. (Each
        // open lends the buffer its one flex frame only once a put finds its leaf out of
        // memory, and the frame retires when eviction frees it: some puts of each cycle go to
        // their leaves first.)
        assert!(seen.buffered_puts > 50, "{seen:?}");
        assert!(seen.buffered_transactions > 20, "{seen:?}");
        assert!(seen.recovered_buffered > 100, "{seen:?}");
        assert!(seen.failed_commits > 5, "{seen:?}");
    }
}

#[test]
fn a_full_disk_is_reported_and_loses_nothing_acknowledged() {
    let disk = SimDisk::new(7);
    let dir = TempDir::with_prefix("crash-full").unwrap();
    let db = Db::open(dir.path(), options(&disk)).unwrap();
    let tree = db.tree("a").unwrap();
    let used: u64 = disk.file_names().iter().map(|n| disk.durable_len(n).unwrap_or(0)).sum();
    // Room for a few more log bytes and pages, not for many.
    disk.set_faults(SimFaults { capacity_bytes: Some(used + (256 << 10)), ..Default::default() });
    let mut acknowledged = Vec::new();
    let mut refused = Vec::new();
    // Puts until the disk is full: a put that meets ENOSPC fails with it (a commit that
    // changed nothing leaves the database usable; one whose log write failed fails the log,
    // and every later write gets `LogFailed`). Go on until the log failed.
    let mut next = 0;
    loop {
        let key = format!("key-{next:06}").into_bytes();
        next += 1;
        match tree.put(&key, [7u8; 900]) {
            Ok(()) => acknowledged.push(key),
            Err(Error::LogFailed { .. }) => break,
            Err(e) => {
                let message = e.to_string();
                assert!(message.contains("No space left on device"), "{message}");
                refused.push(key);
            }
        }
        assert!(next < 100_000, "the disk never filled up");
    }
    assert!(!refused.is_empty(), "no put met the full disk before the log failed");
    // Writes are refused from then on, with the reason.
    let again = tree.put(b"more", b"x").unwrap_err();
    assert!(matches!(again, Error::LogFailed { .. }), "{again}");
    disk.crash();
    db.abandon();
    disk.set_faults(SimFaults::default());
    let db = Db::open(dir.path(), options(&disk)).unwrap();
    let tree = db.open_tree("a").unwrap();
    for key in &acknowledged {
        assert_eq!(tree.get(key).unwrap().as_deref(), Some(&[7u8; 900][..]), "{key:?} lost");
    }
    // A refused put is not there, unless it was the one in flight when the log failed.
    let present = refused.iter().filter(|key| tree.get(key).unwrap().is_some()).count();
    assert!(present <= 1, "{present} refused puts are there");
    assert!(db.check().unwrap().is_ok());
    assert!(acknowledged.len() > 10, "only {} puts before the disk filled", acknowledged.len());
}

/// A full disk that stops the log from making its next segment: the commit fails, and every
/// later try (opens, puts) removes the segment file it could not prepare (a failing
/// preparation once left one new empty file per try, hundreds of them).
#[test]
fn failed_segment_preparations_leave_no_files() {
    let disk = SimDisk::new(17);
    let dir = TempDir::with_prefix("crash-full-log").unwrap();
    // The page file grows in big steps: the log is what meets the full disk.
    let options = Options { grow_chunk_bytes: 8 << 20, ..options(&disk) };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let tree = db.tree("a").unwrap();
    let used: u64 = disk.file_names().iter().map(|n| disk.durable_len(n).unwrap_or(0)).sum();
    disk.set_faults(SimFaults { capacity_bytes: Some(used + (64 << 10)), ..Default::default() });
    let files = disk.file_names();
    let mut acknowledged = Vec::new();
    let error = loop {
        let key = format!("key-{:06}", acknowledged.len()).into_bytes();
        match tree.put(&key, [7u8; 900]) {
            Ok(()) => acknowledged.push(key),
            Err(e) => break e,
        }
        assert!(acknowledged.len() < 100_000, "the disk never filled up");
    };
    assert!(error.to_string().contains("preparing log segment"), "{error}");
    drop(tree);
    disk.crash();
    db.abandon();
    assert_eq!(disk.file_names(), files, "the failed preparation left its file");
    let mut tries = 0;
    for _ in 0..5 {
        match Db::open(dir.path(), options.clone()) {
            Ok(db) => {
                let tree = db.open_tree("a").unwrap();
                let failed = (0..2_000)
                    .find_map(|i| tree.put(format!("late-{i}").as_bytes(), [1u8; 900]).err());
                assert!(failed.is_some(), "the full disk took 2,000 more puts");
                drop(tree);
                disk.crash();
                db.abandon();
            }
            Err(e) => assert!(e.to_string().contains("No space left on device"), "{e}"),
        }
        tries += 1;
        assert_eq!(disk.file_names(), files, "try {tries} left a file behind");
    }
    disk.set_faults(SimFaults::default());
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.open_tree("a").unwrap();
    for key in &acknowledged {
        assert_eq!(tree.get(key).unwrap().as_deref(), Some(&[7u8; 900][..]), "{key:?} lost");
    }
}

#[test]
fn periodic_durability_flushes_within_its_interval() {
    let disk = SimDisk::new(11);
    let dir = TempDir::with_prefix("crash-periodic").unwrap();
    let options = Options {
        durability: Durability::Periodic(std::time::Duration::from_millis(20)),
        ..options(&disk)
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let tree = db.tree("a").unwrap();
    tree.put(b"soon durable", b"yes").unwrap();
    // Returned at once; written and synced by the periodic flush well within this sleep.
    std::thread::sleep(std::time::Duration::from_millis(300));
    disk.crash();
    db.abandon();
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.open_tree("a").unwrap();
    assert_eq!(tree.get(b"soon durable").unwrap().as_deref(), Some(&b"yes"[..]));
}

#[test]
fn log_segments_are_reused_and_the_log_stays_bounded() {
    let disk = SimDisk::new(12);
    let dir = TempDir::with_prefix("crash-segments").unwrap();
    let options = Options { checkpoint_log_bytes: Some(256 << 10), ..options(&disk) };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let tree = db.tree("a").unwrap();
    let log = db.log().unwrap().clone();
    let mut most_retained = 0;
    for i in 0..6_000u32 {
        let mut batch = WriteBatch::new();
        batch.put(&tree, i.to_be_bytes(), [i as u8; 200]).durability(Durability::None);
        db.write(&batch).unwrap();
        if i % 500 == 499 {
            // The test takes the checkpoints (a checkpoint thread would race the disk's draws).
            db.checkpoint().unwrap();
        }
        most_retained = most_retained.max(log.retained_bytes());
    }
    let written = log.counters.bytes_written.load(std::sync::atomic::Ordering::Relaxed);
    let (in_use, slots) = log.segment_usage();
    eprintln!("{written} log bytes written over {slots} segment files, {in_use} in use; at most {most_retained} retained");
    assert!(written > 4 << 20, "only {written} log bytes written");
    assert!(
        slots <= 4 && in_use <= 3,
        "{in_use} segments in use, {slots} files, for {written} bytes"
    );
    assert!(most_retained < 2 << 20, "the log on disk reached {most_retained} bytes");
    disk.crash();
    db.abandon();
    let db = Db::open(dir.path(), options).unwrap();
    let report = db.recovery_report().clone();
    assert!(report.end_lsn - report.redo_lsn < 1 << 20, "{report:?}");
    assert_eq!(db.open_tree("a").unwrap().iter().count(), 6_000);
}

/// The log's counters tell page images and checkpoints apart: a page changed after a
/// completed checkpoint logs one image at its first write-back, however often it changed.
/// An image logged while a checkpoint writes the page back lies after that checkpoint's redo
/// LSN, so it still covers the page's write-back during the next checkpoint.
#[test]
fn a_page_logs_one_image_per_checkpoint_it_is_written_back_after() {
    use std::sync::atomic::Ordering::Relaxed;
    let disk = SimDisk::new(14);
    let dir = TempDir::with_prefix("crash-images").unwrap();
    let db = Db::open(dir.path(), options(&disk)).unwrap();
    let tree = db.tree("a").unwrap();
    for i in 0..200u32 {
        tree.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    db.checkpoint().unwrap();
    let counters = &db.log().unwrap().counters;
    let (images, checkpoints) = (counters.images.load(Relaxed), counters.checkpoints.load(Relaxed));
    let image_bytes = counters.image_bytes.load(Relaxed);
    let image_count = || counters.images.load(Relaxed) - images;
    // One leaf changed many times, then written back by a checkpoint: one image.
    for round in 0..50u8 {
        tree.put(7u32.to_be_bytes(), [round; 100]).unwrap();
    }
    db.checkpoint().unwrap();
    assert_eq!(image_count(), 1, "one image for one leaf");
    let image_bytes = counters.image_bytes.load(Relaxed) - image_bytes;
    eprintln!("the leaf's image: {image_bytes} bytes");
    assert!(image_bytes > 2000, "an image holds the page's entries: {image_bytes} bytes");
    // Written back again by the next checkpoint: the image above still covers it.
    tree.put(7u32.to_be_bytes(), [9u8; 100]).unwrap();
    db.checkpoint().unwrap();
    assert_eq!(image_count(), 1, "the image logged during the last checkpoint covers this one");
    // And by the one after: an image again.
    tree.put(7u32.to_be_bytes(), [10u8; 100]).unwrap();
    db.checkpoint().unwrap();
    assert_eq!(image_count(), 2);
    // Nothing changed: no image.
    db.checkpoint().unwrap();
    assert_eq!(image_count(), 2);
    assert_eq!(counters.checkpoints.load(Relaxed), checkpoints + 4);
}
