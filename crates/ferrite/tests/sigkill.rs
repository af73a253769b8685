//! A real process crash: the test runs its own binary again as a child that writes to a real
//! data directory (single puts, deletes, and batches or transactions over three trees, some
//! values on Value pages, `Durability::Sync`) and prints `ack N` once write N returned. The
//! parent kills it with SIGKILL after a seeded number of acknowledgements or milliseconds (some
//! rounds while it is still opening, i.e. recovering), then:
//!
//! - verifies the crash image's log read-only (`check_log`: a torn tail is fine, damage is not);
//! - recovers it (in place, or a copy while the next child recovers the original itself) and
//!   compares every tree with the model: every acknowledged write exactly, the one write in
//!   flight at the kill all or nothing, nothing after it; `check` must be clean.
//!
//! Rounds alternate 0 and the default number of workers, and a small `checkpoint_log_bytes`
//! (checkpoints, on their own thread, during the writes) with a large one. The writes are a
//! function of the seed and their number; `FERRITE_SEED=n` replays a seed's choices (the
//! moment of each kill is the machine's); `FERRITE_SIGKILL_KEEP=dir` keeps the crash images.
//!
//! The child writes with a pool of 256 pages, so that pages are written back all the time, and
//! recovery runs with the same pool, so that it evicts pages it replays (a recovery that did
//! so once lost changes: `regressions.rs`). `FERRITE_SIGKILL_LARGE_RECOVERY=1` recovers with
//! a pool that holds all the data instead. The last test runs the same writes with a 16-page
//! pool: every write finishes, or is refused as too large for the pool (it once livelocked).

mod common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::child::Writer;
use common::commits::{self, apply, difference, Change, Commit, State, TREES};
use common::{copy_dir, seeds, tiny, Rng, TempDir};
use ferrite::{Db, Options, WriteBatch};

/// This test's name: the child runs exactly it (`--exact`).
const TEST_NAME: &str = "acknowledged_writes_survive_sigkill";
/// Set in the child's environment: the data directory to write to.
const CHILD_DIR_VAR: &str = "FERRITE_SIGKILL_CHILD";
/// `seed,first write,workers,checkpoint_log_bytes,pool pages` for the child.
const CHILD_PLAN_VAR: &str = "FERRITE_SIGKILL_PLAN";

/// When set, each round's crash image is copied to `$FERRITE_SIGKILL_KEEP/round-N` before
/// it is recovered, for a failure to be looked at.
const KEEP_VAR: &str = "FERRITE_SIGKILL_KEEP";

/// Set: recover crash images with the writer's pool (see the module's comment).
const LARGE_RECOVERY_VAR: &str = "FERRITE_SIGKILL_LARGE_RECOVERY";
/// What the child prints before each of its own lines (the test harness prints too).
const MARK: &str = "sigkill-child: ";

const ROUNDS: u64 = 10;
const KEYS_PER_TREE: u64 = 1_200;
/// The writer's pool: far smaller than the data (a few MiB).
const POOL_PAGES: u64 = 256;
/// The pool of an open that recovers a crash image: holds every page of the data.
const RECOVERY_POOL_PAGES: u64 = 8_192;
const SMALL_CHECKPOINT_BYTES: u64 = 256 << 10;
const LARGE_CHECKPOINT_BYTES: u64 = 64 << 20;
/// A child that was never killed stops by itself (the parent failed without killing it).
const CHILD_LIFETIME: Duration = Duration::from_secs(60);
/// Longest a round writes (the test's run time stays bounded on a disk with slow syncs).
const WRITING_MAX: Duration = Duration::from_millis(800);
/// Longest the parent waits for an acknowledgement before it gives up on the child.
const ACK_TIMEOUT: Duration = Duration::from_secs(20);

fn key(index: u64) -> Vec<u8> {
    // Some keys long, so that leaves split at different counts.
    let mut key = format!("key{index:05}-").into_bytes();
    key.resize(key.len() + (index % 5 * 40) as usize, b'k');
    key
}

/// Write number `number` of the run seeded `seed` (a function of both only:
/// `common::commits`).
fn commit_number(seed: u64, number: u64) -> Commit {
    let mut rng = Rng::new(seed.rotate_left(32) ^ number.wrapping_mul(0x2545_F491_4F6C_DD1D));
    commits::commit(&mut rng, number, |rng| key(rng.below(KEYS_PER_TREE)))
}

fn options(pool_pages: u64, workers: usize, checkpoint_log_bytes: u64) -> Options {
    Options {
        workers,
        checkpoint_log_bytes: Some(checkpoint_log_bytes),
        log_segment_bytes: 1 << 20,
        create_if_missing: false,
        ..tiny(pool_pages)
    }
}

fn recovery_pool_pages() -> u64 {
    if std::env::var_os(LARGE_RECOVERY_VAR).is_some() {
        RECOVERY_POOL_PAGES
    } else {
        POOL_PAGES
    }
}

fn default_workers() -> usize {
    Options::default().workers
}

/// The child: writes from write `first` on, forever, acknowledging each on stdout.
fn run_child(dir: &Path, plan: &str) -> ! {
    let fields: Vec<u64> = plan.split(',').map(|f| f.parse().expect("a plan field")).collect();
    let [seed, first, workers, checkpoint_log_bytes, pool_pages] = fields[..] else {
        panic!("bad plan {plan:?}")
    };
    let started = Instant::now();
    let db = Db::open(dir, options(pool_pages, workers as usize, checkpoint_log_bytes))
        .unwrap_or_else(|e| panic!("child: opening {}: {e}", dir.display()));
    let trees = TREES.map(|name| db.open_tree(name).expect("the parent created the trees"));
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        if writeln!(out, "{MARK}{line}").and_then(|()| out.flush()).is_err() {
            // The parent is gone: nobody is listening, stop.
            std::process::exit(3);
        }
    };
    say(format!("open {}", db.recovery_report().records));
    for number in first.. {
        let commit = commit_number(seed, number);
        if commit.batch && number % 2 == 1 {
            // Half the batches as transactions: each key read first, then written, and read
            // again to see the transaction's own write.
            let mut txn = db.transaction();
            for change in &commit.changes {
                let (Change::Put(tree, key, _)
                | Change::Delete(tree, key)
                | Change::WriteAt(tree, key, ..)) = change;
                txn.get(&trees[*tree], key)
                    .unwrap_or_else(|e| panic!("child: transaction {number} read: {e}"));
                let wrote = match change {
                    Change::Put(_, _, value) => txn.put(&trees[*tree], key, value),
                    Change::Delete(_, _) => txn.delete(&trees[*tree], key),
                    Change::WriteAt(..) => unreachable!("write_at is never batched"),
                };
                wrote.unwrap_or_else(|e| panic!("child: transaction {number}: {e}"));
                let own = txn.get(&trees[*tree], key).expect("a read of the transaction's own");
                let expected = match change {
                    Change::Put(_, _, value) => Some(value.clone()),
                    Change::Delete(..) | Change::WriteAt(..) => None,
                };
                assert!(own == expected, "child: transaction {number} missed its own write");
            }
            txn.commit().unwrap_or_else(|e| panic!("child: transaction {number}: {e}"));
        } else if commit.batch {
            let mut batch = WriteBatch::new();
            for change in &commit.changes {
                match change {
                    Change::Put(tree, key, value) => batch.put(&trees[*tree], key, value),
                    Change::Delete(tree, key) => batch.delete(&trees[*tree], key),
                    Change::WriteAt(..) => unreachable!("write_at is never batched"),
                };
            }
            db.write(&batch).unwrap_or_else(|e| panic!("child: write {number}: {e}"));
        } else {
            match &commit.changes[0] {
                Change::Put(tree, key, value) => trees[*tree].put(key, value).map(|()| true),
                Change::Delete(tree, key) => trees[*tree].delete(key),
                Change::WriteAt(tree, key, offset, bytes) => {
                    trees[*tree].write_at(key, *offset, bytes).map(|()| true)
                }
            }
            .unwrap_or_else(|e| panic!("child: write {number}: {e}"));
        }
        say(format!("ack {number}"));
        if started.elapsed() > CHILD_LIFETIME {
            std::process::exit(4);
        }
    }
    unreachable!("the writes never end")
}

/// When the parent kills the child.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// Once this many writes of the round were acknowledged, or [`WRITING_MAX`] after the
    /// child opened the directory (on a disk with slow syncs).
    AfterAcks(u64),
    /// This long after the child was started (perhaps while it is still recovering).
    AfterMillis(u64),
}

/// How the parent verifies the crash image, and what the next child starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    /// Recover in place, verify, close cleanly.
    InPlaceClose,
    /// Recover in place, verify, then give the database up unclosed: the next child
    /// recovers a directory that was recovered already.
    InPlaceAbandon,
    /// Recover a copy; the next child recovers the crash image itself (and must decide the
    /// write in flight as the copy's recovery did).
    Copy,
}

/// The numbers a round's acknowledgements carry, parsed from the child's stdout (which also
/// holds the test harness's own lines).
#[derive(Debug, Default)]
struct Acks {
    /// When the child said it had opened the directory (recovered it).
    opened: Option<Instant>,
    last: Option<u64>,
    count: u64,
}

impl Acks {
    fn take(&mut self, line: &str, expected: u64) {
        // The harness may have begun the line ("test NAME ... ").
        let Some(at) = line.find(MARK) else { return };
        let line = &line[at + MARK.len()..];
        if line.starts_with("open ") {
            self.opened = Some(Instant::now());
        } else if let Some(number) = line.strip_prefix("ack ") {
            let number: u64 = number.parse().expect("an ack number");
            assert_eq!(number, expected + self.count, "acknowledgements out of order");
            self.last = Some(number);
            self.count += 1;
        }
    }
}

/// Runs the child of one round until `kill`, then kills it. Returns the acknowledgements.
fn write_until_killed(dir: &Path, plan: String, first: u64, kill: Kill) -> Acks {
    let started = Instant::now();
    let writer = Writer::start(
        TEST_NAME,
        [(CHILD_DIR_VAR, dir.as_os_str()), (CHILD_PLAN_VAR, plan.as_ref())],
    );
    let mut acks = Acks::default();
    loop {
        let timeout = match kill {
            Kill::AfterAcks(n) if acks.count >= n => break,
            Kill::AfterAcks(_) => match acks.opened {
                // Writing: until the count, or until the round has written long enough.
                Some(at) => match WRITING_MAX.checked_sub(at.elapsed()) {
                    Some(left) => left,
                    None => break,
                },
                None => ACK_TIMEOUT,
            },
            Kill::AfterMillis(ms) => {
                let Some(left) = Duration::from_millis(ms).checked_sub(started.elapsed()) else {
                    break;
                };
                left
            }
        };
        match writer.lines.recv_timeout(timeout) {
            Ok(line) => acks.take(&line, first),
            Err(RecvTimeoutError::Timeout) if matches!(kill, Kill::AfterMillis(_)) => break,
            Err(RecvTimeoutError::Timeout) if acks.opened.is_some() => continue,
            Err(e) => {
                let (status, _, stderr) = writer.kill();
                panic!("the child stopped writing ({e:?}, {status}); its stderr:\n{stderr}");
            }
        }
    }
    let (status, rest, stderr) = writer.kill();
    for line in rest {
        acks.take(&line, first);
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the child ended before it was killed ({status}); its stderr:\n{stderr}"
    );
    acks
}

/// Every entry of every tree.
fn contents(db: &Db) -> ferrite::Result<State> {
    let mut state = State::new();
    for (index, name) in TREES.iter().enumerate() {
        for entry in db.open_tree(name)?.iter() {
            let (key, value) = entry?;
            state.insert((index, key), value);
        }
    }
    Ok(state)
}

/// Totals over the rounds, printed at the end.
#[derive(Debug, Default)]
struct Totals {
    acks: u64,
    in_flight_present: u64,
    killed_while_opening: u64,
    torn_bytes: u64,
    records_replayed: u64,
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    if let (Some(dir), Ok(plan)) = (std::env::var_os(CHILD_DIR_VAR), std::env::var(CHILD_PLAN_VAR))
    {
        run_child(Path::new(&dir), &plan);
    }
    let started = Instant::now();
    let seed = seeds(1)[0];
    println!("sigkill: seed {seed} (replay its choices with FERRITE_SEED={seed})");
    let base = TempDir::with_prefix("sigkill").unwrap();
    let dir = base.path().join("db");
    {
        let db =
            Db::open(&dir, Options { create_if_missing: true, ..options(POOL_PAGES, 0, 1 << 20) })
                .expect("creating the directory");
        for name in TREES {
            db.create_tree(name).unwrap();
        }
        db.close().unwrap();
    }
    let mut rng = Rng::new(seed);
    let mut model = State::new();
    let mut next = 0u64;
    let mut totals = Totals::default();
    // The pool of the next child: it recovers the crash image itself after a `Verify::Copy`.
    let mut pool_pages = POOL_PAGES;
    for round in 0..ROUNDS {
        let workers = if (round + seed) % 2 == 0 { 0 } else { default_workers() };
        let checkpoint_log_bytes = if (round / 2 + seed) % 2 == 0 {
            SMALL_CHECKPOINT_BYTES
        } else {
            LARGE_CHECKPOINT_BYTES
        };
        let kill = if round % 5 == 4 {
            // Most likely while the child starts or recovers.
            Kill::AfterMillis(1 + rng.below(25))
        } else if rng.below(100) < 60 {
            Kill::AfterAcks(1 + rng.below(2_500))
        } else {
            Kill::AfterMillis(5 + rng.below(600))
        };
        let verify = match rng.below(3) {
            0 => Verify::InPlaceClose,
            1 => Verify::InPlaceAbandon,
            _ => Verify::Copy,
        };
        let plan = format!("{seed},{next},{workers},{checkpoint_log_bytes},{pool_pages}");
        let round_started = Instant::now();
        let acks = write_until_killed(&dir, plan, next, kill);
        let writing = round_started.elapsed();
        let in_flight = acks.last.map_or(next, |last| last + 1);
        for number in next..in_flight {
            apply(&mut model, &commit_number(seed, number));
        }
        let context = format!(
            "seed {seed} round {round} (pool {pool_pages} pages, workers {workers}, checkpoint \
             every {checkpoint_log_bytes} bytes, {kill:?}, {verify:?}): writes \
             {next}..{in_flight} acknowledged, {in_flight} in flight"
        );

        if let Some(keep) = std::env::var_os(KEEP_VAR) {
            copy_dir(&dir, &Path::new(&keep).join(format!("round-{round}")));
        }
        // The crash image, read-only: its log verified (a torn tail is fine, damage is not)
        // and replayed into memory; what it reads is what the writable recovery reads below.
        let read_only = Options { read_only: true, ..options(POOL_PAGES, 0, 1 << 20) };
        let image = Db::open(&dir, read_only).unwrap_or_else(|e| panic!("{context}: {e}"));
        let log = image
            .check_log()
            .unwrap_or_else(|e| panic!("{context}: check_log on the crash image: {e}"))
            .expect("the directory has a log");
        let image_has = contents(&image)
            .unwrap_or_else(|e| panic!("{context}: reading the crash image read-only: {e}"));
        image.close().unwrap();

        // Recover (the directory, or a copy of it) and compare with the model.
        let copy = base.path().join(format!("copy-{round}"));
        let recover_at = if verify == Verify::Copy {
            copy_dir(&dir, &copy);
            copy.clone()
        } else {
            dir.clone()
        };
        let db = Db::open(&recover_at, options(recovery_pool_pages(), 0, LARGE_CHECKPOINT_BYTES))
            .unwrap_or_else(|e| panic!("{context}: recovery: {e}"));
        let report = db.recovery_report().clone();
        assert_eq!(
            (report.redo_lsn, report.end_lsn, report.torn_bytes, report.records),
            (log.redo_lsn, log.end_lsn, log.torn_bytes, log.commits + log.images),
            "{context}: recovery and check_log disagree: {report:?} / {log:?}"
        );
        let have =
            contents(&db).unwrap_or_else(|e| panic!("{context}: reading the recovered trees: {e}"));
        assert!(
            image_has == have,
            "{context}: the read-only (in-memory) recovery read other contents than the \
             writable one"
        );
        let mut with_in_flight = model.clone();
        apply(&mut with_in_flight, &commit_number(seed, in_flight));
        let present = if have == model {
            false
        } else if have == with_in_flight {
            true
        } else {
            panic!(
                "{context}: the recovered trees match neither the acknowledged writes nor them \
                 and the write in flight:\n  {}",
                difference(&have, &model, 9)
            );
        };
        if present {
            model = with_in_flight;
        }
        let faults = db.check().expect("check ran").all_faults();
        assert!(faults.is_empty(), "{context}: check found faults:\n{}", faults.join("\n"));
        db.check_log()
            .unwrap_or_else(|e| panic!("{context}: check_log after recovery: {e}"))
            .expect("a log");
        match verify {
            Verify::InPlaceClose | Verify::Copy => db.close().unwrap(),
            Verify::InPlaceAbandon => db.abandon(),
        }
        if verify == Verify::Copy {
            std::fs::remove_dir_all(&copy).unwrap();
        }
        println!(
            "sigkill: round {round}: pool {pool_pages} pages, workers {workers}, checkpoint \
             every {} KiB, {kill:?}: {} writes acknowledged{}, the one in flight {}; recovery \
             replayed {} records ({} pages applied, {} torn bytes cut) in {:?}; {verify:?}; \
             writing {writing:.1?}, verifying {:.1?}",
            checkpoint_log_bytes >> 10,
            acks.count,
            if acks.opened.is_some() { "" } else { " (killed while opening)" },
            if present { "present" } else { "absent" },
            report.records,
            report.pages_applied,
            report.torn_bytes,
            report.duration,
            round_started.elapsed() - writing,
        );
        totals.acks += acks.count;
        totals.in_flight_present += present as u64;
        totals.killed_while_opening += acks.opened.is_none() as u64;
        totals.torn_bytes += report.torn_bytes;
        totals.records_replayed += report.records;
        next = in_flight + 1;
        pool_pages = if verify == Verify::Copy { recovery_pool_pages() } else { POOL_PAGES };
    }
    println!(
        "sigkill: {ROUNDS} rounds, {} writes acknowledged and found ({} entries at the end), \
         {} in-flight writes present after recovery, {} kills while opening, {} records \
         replayed, {} torn bytes cut, in {:.1?}",
        totals.acks,
        model.len(),
        totals.in_flight_present,
        totals.killed_while_opening,
        totals.records_replayed,
        totals.torn_bytes,
        started.elapsed()
    );
}

/// The child's writes with the smallest pool accepted (16 pages): each must finish, or be
/// refused (`BatchTooLarge`: a batch whose pinned pages could not fit) or fail with
/// `PoolExhausted`. Regression: write 209 of seed 1, a batch of 8, never returned: its put
/// missed page A, loading A evicted page B the retried attempt needed, and so on, while the
/// batch's changed pages stayed pinned.
#[test]
fn every_write_finishes_or_fails_with_a_pool_of_16_pages() {
    let dir = TempDir::with_prefix("sigkill-pool-16").unwrap();
    let options = Options { create_if_missing: true, ..options(16, 0, LARGE_CHECKPOINT_BYTES) };
    let db = Db::open(dir.path(), options).unwrap();
    let trees = TREES.map(|name| db.tree(name).unwrap());
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        for number in 0..400 {
            let commit = commit_number(1, number);
            let mut batch = WriteBatch::new();
            let mut result = Ok(());
            for change in &commit.changes {
                match change {
                    Change::Put(tree, key, value) => {
                        batch.put(&trees[*tree], key, value);
                    }
                    Change::Delete(tree, key) => {
                        batch.delete(&trees[*tree], key);
                    }
                    // Never batched: a call of its own.
                    Change::WriteAt(tree, key, offset, bytes) => {
                        result = trees[*tree].write_at(key, *offset, bytes)
                    }
                };
            }
            let result = result.and_then(|()| db.write(&batch));
            let failed =
                result.as_ref().is_err_and(|e| !matches!(e, ferrite::Error::BatchTooLarge { .. }));
            if done.send((number, result)).is_err() || failed {
                return;
            }
        }
    });
    for number in 0..400 {
        match finished.recv_timeout(Duration::from_secs(30)) {
            Ok((_, Ok(()))) | Ok((_, Err(ferrite::Error::BatchTooLarge { .. }))) => {}
            Ok((n, Err(e))) => {
                assert!(matches!(e, ferrite::Error::PoolExhausted { .. }), "write {n}: {e}");
                return;
            }
            Err(_) => panic!("write {number} did not return within 30 s"),
        }
    }
}
