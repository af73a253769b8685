//! Power cuts on a real file system: what `Durability::Sync` promises ("durable when the call
//! returns") checked against ext4 itself, not against a simulated disk.
//!
//! Each round:
//!
//! 1. A small ext4 image (a sparse file, loop-mounted in a temporary directory) holds the
//!    data directory. Round 0, and about one round in [`FRESH_IMAGE_ONE_IN`], start from a
//!    freshly made image, so that cuts also meet the creation of a database; the others reuse
//!    the image, so the database grows and its log segments are reused.
//! 2. A writer child (this test binary run again, as `sigkill.rs` does) opens the database
//!    (`Sync`, 1 MiB log segments, a checkpoint every 256 KiB or 1 MiB of log, a pool of
//!    [`POOL_PAGES`] pages with a small change buffer, no workers or two) and commits from
//!    [`THREADS`] threads: single puts (small values, and values long enough for Value pages),
//!    single deletes, and `WriteBatch`es over the three trees. Each thread owns its own keys
//!    (interleaved with the others' in the same leaves), so each thread's commits apply in
//!    its own order and the parent models each thread alone. The child prints `ack T N` once
//!    commit N of thread T returned `Ok`.
//! 3. At a seeded moment (a number of acknowledgements plus a few microseconds, or a few
//!    milliseconds into the child's open) the parent shuts the file system down without
//!    flushing its journal (`EXT4_IOC_SHUTDOWN`, `EXT4_GOING_FLAGS_NOLOGFLUSH`): from then on
//!    nothing reaches the image, and what the journal had not committed is lost, as in a
//!    power cut. Then it kills the child (SIGKILL), reaps it, unmounts and mounts again.
//! 4. It verifies: a read-only open (which recovers the directory in memory, writing
//!    nothing), then a writable open (recovery on disk). Every commit the child
//!    acknowledged, before or after the cut (an acknowledgement still in the pipe counts:
//!    the engine said it was durable), must be there with its exact values, deletes gone;
//!    the one commit per thread in flight at the cut may be there, whole, or not at all;
//!    nothing else; and `Db::check` must be clean.
//!
//! The commits and each round's plan are a function of the seed and the round, so a run
//! replays apart from the moment of each cut (the machine's timing). Environment:
//!
//! - `FERRITE_POWERCUT_ROUNDS=n`: run n rounds instead of [`DEFAULT_ROUNDS`].
//! - `FERRITE_POWERCUT_SEED=s`: the seed (default [`DEFAULT_SEED`]).
//! - `FERRITE_POWERCUT_ROUND=r`: replay round r alone, with the rounds it depends on (those
//!   since its image was made fresh); a failure prints the line to run.
//! - `FERRITE_POWERCUT_KEEP=dir`: copy each round's crash image (the data directory as the
//!   cut left it) to `dir/round-N` before it is opened.
//! - `FERRITE_REQUIRE_POWERCUT=1`: fail instead of skipping when the suite cannot run (it
//!   needs root, loop devices, `mkfs.ext4`, `mount` and `umount`; CI sets it).
//!
//! Every mount is undone by a guard, also when a round fails: it unmounts (retrying, lazily
//! at last) and detaches any loop device still backing the image. A run that was killed
//! leaves its mount behind; the next run unmounts it. (The image handling is
//! `common/ext4.rs`.)
//!
//! What the cut models: ext4 loses everything it had not sent to the device (page cache,
//! uncommitted journal), as after a power cut or a kernel crash. The loop device has no
//! volatile write cache, so a write the device received survives even without a flush: a
//! disk that loses its cache on a cut is not modelled (nor are torn sectors; the crash
//! suite on the simulated disk covers those).

mod common;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use common::child::Writer;
use common::commits::{self, apply, difference, run_commit, Commit, State, TREES};
use common::ext4::{clean_up_after_killed_runs, missing_prerequisite, Image};
use common::{copy_dir, tiny, Rng};
use ferrite::wal::segment::{decode_segment_header, HeaderRead, SEGMENT_HEADER_BYTES};
use ferrite::{Db, Durability, Error, Options, Tree, LOG_DIR_NAME};

/// This test's name: the child runs exactly it (`--exact`).
const TEST_NAME: &str = "acknowledged_commits_survive_power_cuts";
/// Set in the child's environment: the data directory to write to.
const CHILD_DIR_VAR: &str = "FERRITE_POWERCUT_CHILD";
/// Set in the child's environment: see [`ChildPlan`].
const CHILD_PLAN_VAR: &str = "FERRITE_POWERCUT_PLAN";
const ROUNDS_VAR: &str = "FERRITE_POWERCUT_ROUNDS";
const SEED_VAR: &str = "FERRITE_POWERCUT_SEED";
const ROUND_VAR: &str = "FERRITE_POWERCUT_ROUND";
const KEEP_VAR: &str = "FERRITE_POWERCUT_KEEP";
const REQUIRE_VAR: &str = "FERRITE_REQUIRE_POWERCUT";
/// The name of the images' temporary directories (`ferrite-test-powercut-PID-N`).
const IMAGE_LABEL: &str = "powercut";
/// What the child prints before each of its own lines (the test harness prints too).
const MARK: &str = "powercut-child: ";

/// Rounds of a default run: about 2 minutes of a debug build on 2 cores (measured: 100
/// rounds in 47 s while other builds kept the load at 6; a round whose cut comes at
/// [`WRITING_MAX`] takes about 1.4 s, the rest 0.05-0.5 s).
const DEFAULT_ROUNDS: u64 = 250;
const DEFAULT_SEED: u64 = 1;
/// A round starts from a freshly made image with this odds (and round 0 always).
const FRESH_IMAGE_ONE_IN: u64 = 8;

/// Threads of the child that commit, each over keys of its own.
const THREADS: usize = 3;
/// Keys of each thread (each in any of the trees).
const KEYS_PER_THREAD: u64 = 1_000;
/// The writer's pool (and recovery's): far smaller than the data, so pages are evicted and
/// written back all the time.
const POOL_PAGES: u64 = 128;
/// A change buffer small enough to fill: puts wait there, drains come often, and the log's
/// checkpoint records list its entries.
const CHANGE_BUFFER_BYTES: u64 = 32 << 10;
/// The smallest segment accepted: the log switches segments every few hundred commits.
const LOG_SEGMENT_BYTES: u64 = 1 << 20;
/// The checkpoint intervals a round chooses from: checkpoints every few hundred commits.
const CHECKPOINT_LOG_BYTES: [u64; 2] = [256 << 10, 1 << 20];
/// Cuts by acknowledgements come after up to this many (log-uniformly: as many rounds cut
/// below 16 as between 2,048 and 4,096; beyond about 3,000, [`WRITING_MAX`] comes first).
const CUT_ACKS_MAX: u64 = 8_192;
/// Cuts during the child's open come up to this many microseconds after it said it starts
/// opening (log-uniformly: an open took 2-16 ms here, so most land in it, the rest in the
/// first commits).
const CUT_OPEN_MICROS_MAX: u64 = 16_384;
/// The longest a child writes before the cut comes anyway.
const WRITING_MAX: Duration = Duration::from_millis(1_000);
/// The longest the parent waits for the child's first lines.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A child the parent lost (the parent failed) stops by itself after this.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);
/// A cut whose log end lies this close to a segment boundary counts as one at a segment
/// switch.
const SWITCH_WINDOW_BYTES: u64 = 64 << 10;

// ---------------------------------------------------------------------------------------
// The commits: a function of the seed, the thread and the commit's number.

/// Key `index` of thread `thread`: the threads' keys interleave in the same leaves; some keys
/// are long, so that leaves split at different counts.
fn key(thread: usize, index: u64) -> Vec<u8> {
    let mut key = format!("{index:04}.{thread}.").into_bytes();
    key.resize(key.len() + (index % 5 * 40) as usize, b'k');
    key
}

/// The thread a key belongs to.
fn thread_of(key: &[u8]) -> Option<usize> {
    let field = key.split(|&b| b == b'.').nth(1)?;
    let thread: usize = std::str::from_utf8(field).ok()?.parse().ok()?;
    (thread < THREADS).then_some(thread)
}

/// Commit `number` of thread `thread` (`common::commits`), its keys the thread's own.
fn commit(seed: u64, thread: usize, number: u64) -> Commit {
    let mut rng = Rng::new(
        seed.rotate_left(32)
            ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ number.wrapping_mul(0x2545_F491_4F6C_DD1D),
    );
    commits::commit(&mut rng, number, |rng| key(thread, rng.below(KEYS_PER_THREAD)))
}

// ---------------------------------------------------------------------------------------
// A round's plan: a function of the seed and the round.

/// When the parent cuts the power.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// This many microseconds after the child said it starts opening the database (a
    /// creation, or a recovery, or the first commits).
    DuringOpen { micros: u64 },
    /// This many microseconds after the child acknowledged this many commits (or after
    /// [`WRITING_MAX`] of writing).
    AfterAcks { acks: u64, micros: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Start from a freshly made image (a new database).
    fresh: bool,
    workers: usize,
    checkpoint_log_bytes: u64,
    cut: Cut,
    /// After verifying, give the recovered database up unclosed, so that the next child
    /// recovers it again (and may be cut while doing so); otherwise close it.
    abandon: bool,
}

fn round_rng(seed: u64, round: u64, stream: u64) -> Rng {
    Rng::new(seed.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ round.rotate_left(20) ^ stream)
}

/// Whether round `round` starts from a fresh image.
fn fresh_image(seed: u64, round: u64) -> bool {
    round == 0 || round_rng(seed, round, 1).below(FRESH_IMAGE_ONE_IN) == 0
}

/// A number from 1 to `max` (a power of two), each power of two as likely as the next.
fn log_uniform(rng: &mut Rng, max: u64) -> u64 {
    let scale = 1 << rng.below(max.ilog2() as u64);
    scale + rng.below(scale)
}

impl Plan {
    fn new(seed: u64, round: u64) -> Plan {
        let mut rng = round_rng(seed, round, 2);
        let fresh = fresh_image(seed, round);
        let workers = if rng.below(2) == 0 { 0 } else { 2 };
        let checkpoint_log_bytes = CHECKPOINT_LOG_BYTES[rng.below(2) as usize];
        let during_open_percent = if fresh { 40 } else { 15 };
        let cut = if rng.below(100) < during_open_percent {
            Cut::DuringOpen { micros: log_uniform(&mut rng, CUT_OPEN_MICROS_MAX) - 1 }
        } else {
            Cut::AfterAcks { acks: log_uniform(&mut rng, CUT_ACKS_MAX), micros: rng.below(1_000) }
        };
        Plan { fresh, workers, checkpoint_log_bytes, cut, abandon: rng.below(3) == 0 }
    }
}

/// The child's options; recovery runs with the same pool.
fn options(workers: usize, checkpoint_log_bytes: u64) -> Options {
    Options {
        workers,
        durability: Durability::Sync,
        log_segment_bytes: LOG_SEGMENT_BYTES,
        checkpoint_log_bytes: Some(checkpoint_log_bytes),
        change_buffer_bytes: Some(CHANGE_BUFFER_BYTES),
        create_if_missing: true,
        ..tiny(POOL_PAGES)
    }
}

// ---------------------------------------------------------------------------------------
// The child.

/// What the child is told: the seed, its options, and each thread's first commit number.
#[derive(Debug)]
struct ChildPlan {
    seed: u64,
    workers: usize,
    checkpoint_log_bytes: u64,
    first: [u64; THREADS],
}

impl ChildPlan {
    fn encode(&self) -> String {
        let first: Vec<String> = self.first.iter().map(u64::to_string).collect();
        format!("{},{},{},{}", self.seed, self.workers, self.checkpoint_log_bytes, first.join(","))
    }

    fn decode(text: &str) -> ChildPlan {
        let fields: Vec<u64> = text.split(',').map(|f| f.parse().expect("a plan field")).collect();
        assert_eq!(fields.len(), 3 + THREADS, "bad plan {text:?}");
        ChildPlan {
            seed: fields[0],
            workers: fields[1] as usize,
            checkpoint_log_bytes: fields[2],
            first: fields[3..].try_into().expect("THREADS numbers"),
        }
    }
}

/// Prints one line for the parent; a child whose parent is gone stops.
fn say(line: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{MARK}{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(3);
    }
}

/// The child: opens the database, then commits from every thread until it is killed, or
/// until a commit fails (the file system was shut down).
fn run_child(dir: &Path, plan: &str) -> ! {
    let plan = ChildPlan::decode(plan);
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_LIFETIME);
        std::process::exit(4);
    });
    say(format_args!("start"));
    let opening = Instant::now();
    let db = match Db::open(dir, options(plan.workers, plan.checkpoint_log_bytes)) {
        Ok(db) => db,
        Err(e) => {
            say(format_args!("error opening: {e}"));
            std::process::exit(2);
        }
    };
    say(format_args!("open {}", opening.elapsed().as_micros()));
    let trees: Vec<Tree> = match TREES.iter().map(|name| db.tree(name)).collect() {
        Ok(trees) => trees,
        Err(e) => {
            say(format_args!("error creating the trees: {e}"));
            std::process::exit(2);
        }
    };
    say(format_args!("ready"));
    std::thread::scope(|scope| {
        for (thread, &first) in plan.first.iter().enumerate() {
            let (db, trees) = (&db, &trees);
            scope.spawn(move || {
                for number in first.. {
                    match run_commit(db, trees, &commit(plan.seed, thread, number)) {
                        Ok(()) => say(format_args!("ack {thread} {number}")),
                        Err(e) => {
                            say(format_args!("fail {thread} {number}: {e}"));
                            return;
                        }
                    }
                }
            });
        }
    });
    // Every thread failed: the parent cut the power (or the round fails on the failures).
    std::process::exit(5)
}

/// What the parent heard from the child.
#[derive(Debug)]
struct Heard {
    started: bool,
    /// How long the child's open took, once it returned.
    opened: Option<Duration>,
    ready: bool,
    /// Per thread: the first commit number of the round, and how many were acknowledged.
    first: [u64; THREADS],
    acks: [u64; THREADS],
    /// Acknowledgements read after the cut: most were still in the pipe, some the engine may
    /// have given after it; either way it said they were durable.
    acks_after_cut: u64,
    /// Lines saying something failed, read before the cut (after it, failures are expected).
    errors_before_cut: Vec<String>,
}

impl Heard {
    fn new(first: [u64; THREADS]) -> Heard {
        Heard {
            started: false,
            opened: None,
            ready: false,
            first,
            acks: [0; THREADS],
            acks_after_cut: 0,
            errors_before_cut: Vec::new(),
        }
    }

    fn acks(&self) -> u64 {
        self.acks.iter().sum()
    }

    /// The commit of each thread in flight at the cut: the one after its last acknowledged.
    fn in_flight(&self) -> [u64; THREADS] {
        std::array::from_fn(|t| self.first[t] + self.acks[t])
    }

    fn take(&mut self, line: &str, after_cut: bool) {
        // The harness may have begun the line ("test NAME ... ").
        let Some(at) = line.find(MARK) else { return };
        let line = &line[at + MARK.len()..];
        match line {
            "start" => self.started = true,
            "ready" => self.ready = true,
            _ => {
                if let Some(micros) = line.strip_prefix("open ") {
                    let micros = micros.parse().expect("the open's duration");
                    self.opened = Some(Duration::from_micros(micros));
                } else if let Some(ack) = line.strip_prefix("ack ") {
                    let (thread, number) = ack.split_once(' ').expect("ack THREAD NUMBER");
                    let thread: usize = thread.parse().expect("a thread");
                    let number: u64 = number.parse().expect("a commit number");
                    assert_eq!(
                        number,
                        self.first[thread] + self.acks[thread],
                        "thread {thread}'s acknowledgements out of order"
                    );
                    self.acks[thread] += 1;
                    self.acks_after_cut += after_cut as u64;
                } else if !after_cut {
                    self.errors_before_cut.push(line.to_owned());
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The parent: one round.

/// A log segment file's header as the cut left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// Valid: the segment's start LSN and capacity.
    Valid(u64, u64),
    /// All zeros: a segment prepared ahead of use (or whose header never reached the disk).
    Zeros,
    /// Neither: damaged.
    Invalid,
}

/// The log segment files of a crash image: name, length, header.
#[derive(Debug, Default)]
struct LogFiles(Vec<(String, u64, Header)>);

impl LogFiles {
    fn read(db_dir: &Path) -> LogFiles {
        let mut files = Vec::new();
        let Ok(entries) = std::fs::read_dir(db_dir.join(LOG_DIR_NAME)) else {
            return LogFiles(files);
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            let header = &bytes[..bytes.len().min(SEGMENT_HEADER_BYTES as usize)];
            let header = match decode_segment_header(header) {
                HeaderRead::Valid(h) => Header::Valid(h.start, h.capacity),
                HeaderRead::Unused => Header::Zeros,
                HeaderRead::Damaged(_) => Header::Invalid,
            };
            files.push((name, bytes.len() as u64, header));
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        LogFiles(files)
    }

    fn count(&self, kind: fn(&Header) -> bool) -> usize {
        self.0.iter().filter(|(_, _, header)| kind(header)).count()
    }

    /// Whether `end_lsn` lies near the start or end of a segment (other than the log's very
    /// start): the cut came as the log was switching segments.
    fn near_switch(&self, end_lsn: u64) -> bool {
        self.0.iter().any(|(_, _, header)| match *header {
            Header::Valid(start, capacity) => {
                (start > 0 && start.abs_diff(end_lsn) <= SWITCH_WINDOW_BYTES)
                    || (start + capacity).abs_diff(end_lsn) <= SWITCH_WINDOW_BYTES
            }
            Header::Zeros | Header::Invalid => false,
        })
    }
}

impl std::fmt::Display for LogFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return write!(f, "no log segment files");
        }
        for (i, (name, len, header)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            match header {
                Header::Valid(start, capacity) => {
                    write!(f, "{sep}{name} ({len} bytes, LSN {start}+{capacity})")?
                }
                Header::Zeros => write!(f, "{sep}{name} ({len} bytes, header all zeros)")?,
                Header::Invalid => write!(f, "{sep}{name} ({len} bytes, header INVALID)")?,
            }
        }
        Ok(())
    }
}

/// The data directory on the mounted image.
fn db_dir(image: &Image) -> PathBuf {
    image.mount_point().join("db")
}

/// Every entry of every tree, split by thread. A tree missing is empty unless `trees_exist`.
fn contents(db: &Db, trees_exist: bool) -> Result<[State; THREADS], String> {
    let mut states: [State; THREADS] = Default::default();
    for (index, name) in TREES.iter().enumerate() {
        let tree = match db.open_tree(name) {
            Ok(tree) => tree,
            Err(Error::TreeNotFound { .. }) if !trees_exist => continue,
            Err(e) => return Err(format!("opening tree {name}: {e}")),
        };
        for entry in tree.iter() {
            let (key, value) = entry.map_err(|e| format!("reading tree {name}: {e}"))?;
            let Some(thread) = thread_of(&key) else {
                return Err(format!("tree {name} holds a key of no thread: {key:?}"));
            };
            states[thread].insert((index, key), value);
        }
    }
    Ok(states)
}

/// Compares what an open database holds with the model: per thread, whether its commit in
/// flight is there (it may be, whole, or not at all; nothing else may differ).
fn judge(
    db: &Db,
    trees_exist: bool,
    model: &[State; THREADS],
    in_flight: &[Commit; THREADS],
) -> Result<[bool; THREADS], String> {
    let have = contents(db, trees_exist)?;
    let mut present = [false; THREADS];
    let mut faults = String::new();
    for thread in 0..THREADS {
        if have[thread] == model[thread] {
            continue;
        }
        let mut with_in_flight = model[thread].clone();
        apply(&mut with_in_flight, &in_flight[thread]);
        if have[thread] == with_in_flight {
            present[thread] = true;
        } else {
            let _ = write!(
                faults,
                "\n  thread {thread}: neither its acknowledged commits nor them and its commit \
                 in flight: {}",
                difference(&have[thread], &model[thread], 7)
            );
        }
    }
    if !faults.is_empty() {
        return Err(format!("the trees do not hold what was acknowledged:{faults}"));
    }
    let report = db.check().map_err(|e| format!("check: {e}"))?;
    if !report.is_ok() {
        return Err(format!("check found faults:\n  {}", report.all_faults().join("\n  ")));
    }
    Ok(present)
}

/// The read-only verification's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadOnly {
    Verified,
    /// Failed on a database whose creation the cut interrupted.
    Unfinished,
}

/// Totals over the rounds, printed at the end.
#[derive(Debug, Default)]
struct Totals {
    rounds: u64,
    fresh_images: u64,
    acks: u64,
    acks_after_cut: u64,
    entries_checked: u64,
    in_flight_present: u64,
    cuts_during_open: u64,
    cuts_before_trees: u64,
    cuts_near_switch: u64,
    cuts_checkpoint_due: u64,
    read_only_verified: u64,
    /// Read-only opens of a database whose creation the cut interrupted (nothing to open).
    read_only_unfinished: u64,
}

/// The state the rounds of one image carry along.
#[derive(Debug)]
struct Carried {
    model: [State; THREADS],
    /// Each thread's next commit number.
    next: [u64; THREADS],
}

impl Carried {
    fn new() -> Carried {
        Carried { model: Default::default(), next: [0; THREADS] }
    }
}

/// The last `max` bytes of `text` (a child's stderr in a failure message).
fn tail(text: &str, max: usize) -> &str {
    let mut at = text.len().saturating_sub(max);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// Runs the child until the cut, cuts, kills it. Returns what it said, its status and
/// stderr.
fn write_until_cut(
    image: &Image,
    plan: &Plan,
    child_plan: &ChildPlan,
    context: &str,
) -> (Heard, ExitStatus, String) {
    let db_dir = db_dir(image);
    let encoded = child_plan.encode();
    let writer = Writer::start(
        TEST_NAME,
        [(CHILD_DIR_VAR, db_dir.as_os_str()), (CHILD_PLAN_VAR, encoded.as_ref())],
    );
    let mut heard = Heard::new(child_plan.first);
    let mut ready_at: Option<Instant> = None;
    loop {
        match plan.cut {
            Cut::DuringOpen { micros } if heard.started => {
                std::thread::sleep(Duration::from_micros(micros));
                break;
            }
            Cut::AfterAcks { acks, micros } if heard.acks() >= acks => {
                std::thread::sleep(Duration::from_micros(micros));
                break;
            }
            _ => {}
        }
        let timeout = match ready_at {
            Some(at) => match WRITING_MAX.checked_sub(at.elapsed()) {
                Some(left) => left,
                None => break,
            },
            None => START_TIMEOUT,
        };
        match writer.lines.recv_timeout(timeout) {
            Ok(line) => {
                heard.take(&line, false);
                if heard.ready && ready_at.is_none() {
                    ready_at = Some(Instant::now());
                }
                if !heard.errors_before_cut.is_empty() {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) if ready_at.is_some() => {}
            Err(e) => {
                let (status, _, stderr) = writer.kill();
                panic!(
                    "{context}: the writer stopped talking before the cut ({e:?}, {status})\n  \
                     its stderr: {}",
                    tail(&stderr, 2_000)
                );
            }
        }
    }
    // What arrived meanwhile came before the cut.
    for line in writer.lines.try_iter() {
        heard.take(&line, false);
    }
    if let Some(error) = heard.errors_before_cut.first() {
        let (_, _, stderr) = writer.kill();
        panic!(
            "{context}: the writer failed before the cut: {error}\n  its stderr: {}",
            tail(&stderr, 2_000)
        );
    }
    if let Err(e) = image.cut() {
        panic!("{context}: EXT4_IOC_SHUTDOWN on {}: {e}", image.mount_point().display());
    }
    let (status, rest, stderr) = writer.kill();
    for line in rest {
        heard.take(&line, true);
    }
    (heard, status, stderr)
}

/// One round: write, cut, remount, verify. Returns its line for the log.
fn run_round(
    image: &Image,
    seed: u64,
    round: u64,
    carried: &mut Carried,
    totals: &mut Totals,
) -> String {
    let round_started = Instant::now();
    let plan = Plan::new(seed, round);
    let replay = format!(
        "replay: {SEED_VAR}={seed} {ROUND_VAR}={round} cargo test -p ferrite-kv --test powercut \
         -- --nocapture"
    );
    let context = format!("powercut: seed {seed} round {round} ({plan:?}; {replay})");
    if plan.fresh {
        image.unmount().unwrap_or_else(|e| panic!("{context}: {e}"));
        image.format().unwrap_or_else(|e| panic!("{context}: making the image: {e}"));
        image.mount().unwrap_or_else(|e| panic!("{context}: {e}"));
        *carried = Carried::new();
        totals.fresh_images += 1;
    }
    let child_plan = ChildPlan {
        seed,
        workers: plan.workers,
        checkpoint_log_bytes: plan.checkpoint_log_bytes,
        first: carried.next,
    };

    let (heard, status, stderr) = write_until_cut(image, &plan, &child_plan, &context);
    let in_flight_numbers = heard.in_flight();
    for (thread, model) in carried.model.iter_mut().enumerate() {
        for number in carried.next[thread]..in_flight_numbers[thread] {
            apply(model, &commit(seed, thread, number));
        }
    }
    let in_flight: [Commit; THREADS] =
        std::array::from_fn(|t| commit(seed, t, in_flight_numbers[t]));
    let writer_text = format!(
        "{} commits acknowledged ({:?} per thread, {} of them read after the cut), commits \
         {:?} in flight; the writer {}{}{}; {status}",
        heard.acks(),
        heard.acks,
        heard.acks_after_cut,
        in_flight_numbers,
        if heard.started { "started" } else { "never started" },
        match heard.opened {
            Some(took) => format!(", opened the database in {took:.1?}"),
            None => String::new(),
        },
        if heard.ready { ", made the trees" } else { "" },
    );
    let stderr_tail = match tail(&stderr, 1_500).trim() {
        "" => String::new(),
        text => format!("\n  the writer's stderr ends: {text}"),
    };

    // The power comes back.
    image.unmount().unwrap_or_else(|e| panic!("{context}: {e}"));
    image.mount().unwrap_or_else(|e| panic!("{context}: {e}"));
    let db_dir = db_dir(image);
    let log = LogFiles::read(&db_dir);
    if let Some(keep) = std::env::var_os(KEEP_VAR) {
        if db_dir.exists() {
            copy_dir(&db_dir, &Path::new(&keep).join(format!("round-{round}")));
        }
    }
    let fail = |what: String| -> ! {
        panic!(
            "\npowercut: seed {seed} round {round} FAILED: {what}\n  plan: {plan:?}\n  writer: \
             {writer_text}\n  log after the cut: {log}{stderr_tail}\n  {replay}\n"
        )
    };

    // Read-only first: it changes nothing on disk.
    let read_only = Options { read_only: true, create_if_missing: false, ..options(0, 1 << 30) };
    let (read_only, read_only_present) = match Db::open(&db_dir, read_only) {
        Ok(db) => {
            let present = judge(&db, heard.ready, &carried.model, &in_flight)
                .unwrap_or_else(|e| fail(format!("read-only open: {e}")));
            db.close().unwrap_or_else(|e| fail(format!("closing the read-only open: {e}")));
            (ReadOnly::Verified, Some(present))
        }
        // A cut while the database was being made may leave nothing a read-only open can
        // take (the writable open below must still open it).
        Err(_) if plan.fresh && heard.opened.is_none() => (ReadOnly::Unfinished, None),
        Err(e) => fail(format!("read-only open: {e}")),
    };

    // Recovery.
    let db = Db::open(&db_dir, options(0, 1 << 30))
        .unwrap_or_else(|e| fail(format!("opening the database (recovery): {e}")));
    let report = db.recovery_report().clone();
    let present = judge(&db, heard.ready, &carried.model, &in_flight)
        .unwrap_or_else(|e| fail(format!("after recovery: {e}")));
    if let Some(read_only_present) = read_only_present {
        if read_only_present != present {
            fail(format!(
                "the read-only open found the commits in flight {read_only_present:?} (per \
                 thread), recovery {present:?}"
            ));
        }
    }
    if plan.abandon {
        db.abandon();
    } else {
        db.close().unwrap_or_else(|e| fail(format!("closing the recovered database: {e}")));
    }

    // Carry on from here.
    for thread in 0..THREADS {
        if present[thread] {
            apply(&mut carried.model[thread], &in_flight[thread]);
        }
        carried.next[thread] = in_flight_numbers[thread] + 1;
    }
    let entries: u64 = carried.model.iter().map(|m| m.len() as u64).sum();
    let near_switch = log.near_switch(report.end_lsn);
    let checkpoint_due = report.end_lsn - report.redo_lsn >= plan.checkpoint_log_bytes;
    totals.rounds += 1;
    totals.acks += heard.acks();
    totals.acks_after_cut += heard.acks_after_cut;
    totals.entries_checked += entries;
    totals.in_flight_present += present.iter().filter(|&&p| p).count() as u64;
    totals.cuts_during_open += heard.opened.is_none() as u64;
    totals.cuts_before_trees += !heard.ready as u64;
    totals.cuts_near_switch += near_switch as u64;
    totals.cuts_checkpoint_due += checkpoint_due as u64;
    totals.read_only_verified += (read_only == ReadOnly::Verified) as u64;
    totals.read_only_unfinished += (read_only == ReadOnly::Unfinished) as u64;
    let cut = match plan.cut {
        Cut::DuringOpen { micros } => format!("{micros}µs into the open"),
        Cut::AfterAcks { acks, micros } => format!("{micros}µs after ack {acks}"),
    };
    let opened = match (heard.opened, heard.ready) {
        (None, _) => "in the open".to_owned(),
        (Some(took), false) => format!("open {took:.0?}, before the trees"),
        (Some(took), true) => format!("open {took:.0?}"),
    };
    let mut notes = String::new();
    for (note, on) in [
        ("damaged segment header", log.count(|h| *h == Header::Invalid) > 0),
        ("segment switch", near_switch),
        ("checkpoint due", checkpoint_due),
    ] {
        if on {
            let _ = write!(notes, ", {note}");
        }
    }
    format!(
        "round {round}{}: workers {}, checkpoint {} KiB, cut {cut} ({opened}): {} acks, {}/{THREADS} \
         in flight present; {} log files{notes}; replayed {}; read-only {:?}; {entries} entries; \
         {:.0?}",
        if plan.fresh { " (fresh image)" } else { "" },
        plan.workers,
        plan.checkpoint_log_bytes >> 10,
        heard.acks(),
        present.iter().filter(|&&p| p).count(),
        log.0.len(),
        report.records,
        read_only,
        round_started.elapsed(),
    )
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.parse().unwrap_or_else(|_| panic!("{name} must be an integer, not {value:?}")))
}

/// Skips the suite with a message, or fails it if it is required.
fn skip(reason: &str) {
    if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
        panic!("powercut: cannot run: {reason}, and {REQUIRE_VAR}=1 requires it");
    }
    println!("powercut: SKIP: {reason} (set {REQUIRE_VAR}=1 to make this a failure)");
}

#[test]
fn acknowledged_commits_survive_power_cuts() {
    if let (Some(dir), Ok(plan)) = (std::env::var_os(CHILD_DIR_VAR), std::env::var(CHILD_PLAN_VAR))
    {
        run_child(Path::new(&dir), &plan);
    }
    if let Some(reason) = missing_prerequisite() {
        return skip(&reason);
    }
    let started = Instant::now();
    let seed = env_u64(SEED_VAR).unwrap_or(DEFAULT_SEED);
    let rounds = match env_u64(ROUND_VAR) {
        // The round, and the rounds since its image was made.
        Some(last) => (0..=last).rev().find(|&r| fresh_image(seed, r)).expect("round 0")..last + 1,
        None => 0..env_u64(ROUNDS_VAR).unwrap_or(DEFAULT_ROUNDS),
    };
    println!(
        "powercut: seed {seed}, rounds {rounds:?} (replay with {SEED_VAR}={seed}; one round \
         with {ROUND_VAR}=n)"
    );
    clean_up_after_killed_runs(IMAGE_LABEL);
    let image = Image::new(IMAGE_LABEL);
    if let Err(e) = image.format().and_then(|()| image.mount()) {
        return skip(&format!("cannot make and mount an ext4 image: {e}"));
    }
    image.unmount().expect("unmounting the first image");
    let mut carried = Carried::new();
    let mut totals = Totals::default();
    for round in rounds {
        let line = run_round(&image, seed, round, &mut carried, &mut totals);
        println!("powercut: {line}");
    }
    println!(
        "powercut: {} rounds ({} on fresh images) in {:.1?}: {} commits acknowledged ({} read \
         after the cut) and {} entries checked after the cuts; {} commits in flight present; \
         cuts: {} during the open, {} before the trees were made, {} at a segment switch, {} \
         with a checkpoint due; read-only opens verified {} (of a database whose creation was cut: \
         {}); unmounts retried {}",
        totals.rounds,
        totals.fresh_images,
        started.elapsed(),
        totals.acks,
        totals.acks_after_cut,
        totals.entries_checked,
        totals.in_flight_present,
        totals.cuts_during_open,
        totals.cuts_before_trees,
        totals.cuts_near_switch,
        totals.cuts_checkpoint_due,
        totals.read_only_verified,
        totals.read_only_unfinished,
        image.unmount_retries.get(),
    );
}
