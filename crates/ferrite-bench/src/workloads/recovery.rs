//! `ferrite bench recovery`: shows that recovery time and the log on disk stay bounded as a
//! run gets longer, however much the run wrote.
//!
//! For each length T of `seconds`, in a fresh database:
//!
//! 1. `committers` tasks spread over the workers insert new keys in random order (8-byte
//!    keys, 120-byte values), each acknowledged once durable (`Durability::Sync`): the
//!    durable fill of `fill --sync`, run by the same task code (`workload_tasks`);
//! 2. every 100 ms the log bytes on disk that a recovery may read (`Log::retained_bytes`)
//!    are sampled, and the largest kept; checkpoints start on their own every
//!    `checkpoint_bytes` of log, and each one lets the segments before it be reused;
//! 3. after T seconds the tasks stop and the database is given up as a crash would
//!    (`Db::abandon`: no final checkpoint, nothing more written; a checkpoint already under
//!    way is let finish). The files keep every write made, so the reopen replays the log
//!    from the last checkpoint exactly as after a power cut (minus torn writes);
//! 4. the reopen is timed (wall clock: recovery, then the checkpoint every open takes) and
//!    its `RecoveryReport` read: log bytes and records replayed, pages applied;
//! 5. every acknowledged key is read back with its value (one scan in key order); any
//!    missing, wrong or unexpected key fails the run.
//!
//! Bounded means: the longest run wrote several times the log of the shortest, yet its
//! largest log on disk, the log it replayed and its recovery time stay about the same. A
//! checkpoint starts when the interval was logged since the last began and frees the segments
//! below its start when it ends, so the log on disk peaks at about the interval + a segment +
//! what is logged while a checkpoint runs (twice that when checkpoints outlast the logging of
//! an interval: a checkpoint writes back every dirty page, so a large cache and a small
//! interval make that term the larger).
//!
//! Log segments are `Options::default().log_segment_bytes` but never larger than the
//! checkpoint interval (nor smaller than the engine's 1 MiB minimum): a checkpoint frees only
//! whole segments, so a segment larger than the interval would hide the bound.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite::wal::Log;
use ferrite::{Db, Options, RecoveryReport};

use crate::error::BenchError;
use crate::measure::phase::{wait, MEASURE, STOP};
use crate::measure::progress::Progress;
use crate::report::{self, ResultLine};
use crate::stores::ferrite::ferrite_options;
use crate::stores::FerriteTree;
use crate::stores::StoreKind;
use crate::workloads::fill::{compare_fill, FillCheck};
use crate::workloads::run::{append_json, remove_bench_dir, RunConfig, MARKER_FILE};
use crate::workloads::ycsb::{start_tasks, verify, KeySpace, Workload};

/// The default data directory.
pub const DEFAULT_DIR: &str = "ferrite-data/bench-recovery";
/// The default lengths of the runs, seconds.
pub const DEFAULT_SECONDS: [f64; 3] = [5.0, 10.0, 20.0];
pub const DEFAULT_COMMITTERS: usize = 16;
pub const DEFAULT_CACHE_MIB: u64 = 64;
/// Most runs one command may ask for.
pub const MAX_RUNS: usize = 64;
/// How often the log on disk is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// The inserts take keys from a random permutation of `0..KEY_SPACE`: new keys all along,
/// spread over the whole key range.
const KEY_SPACE: u64 = 1 << 32;
const TREE: &str = "bench";
/// The smallest log segment the engine accepts.
const MIN_SEGMENT_BYTES: u64 = 1 << 20;

/// The default checkpoint interval for a pool of `cache_mib`: the engine's
/// (`Options::checkpoint_interval`).
pub fn default_checkpoint_bytes(cache_mib: u64) -> u64 {
    Options { pool_bytes: cache_mib << 20, ..Options::default() }.checkpoint_interval()
}

/// Everything `ferrite bench recovery` is told.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryConfig {
    /// The data directory: emptied before each run, removed at the end unless `keep`.
    pub dir: PathBuf,
    /// One run per length, in this order, seconds.
    pub seconds: Vec<f64>,
    /// Concurrent committer tasks, spread over the workers.
    pub committers: usize,
    pub workers: usize,
    /// Ferrite's pool, MiB.
    pub cache_mib: u64,
    /// A checkpoint starts once this many log bytes were written since the last
    /// (`Options::checkpoint_log_bytes`).
    pub checkpoint_bytes: u64,
    pub direct_io: bool,
    /// Keep the last run's data directory (every other run's is emptied by the next).
    pub keep: bool,
    /// Append one JSON object per run to this file.
    pub json: Option<PathBuf>,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            dir: PathBuf::from(DEFAULT_DIR),
            seconds: DEFAULT_SECONDS.to_vec(),
            committers: DEFAULT_COMMITTERS,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cache_mib: DEFAULT_CACHE_MIB,
            checkpoint_bytes: default_checkpoint_bytes(DEFAULT_CACHE_MIB),
            direct_io: true,
            keep: false,
            json: None,
        }
    }
}

impl RecoveryConfig {
    /// Bytes per log segment: the engine's default, at most the checkpoint interval.
    pub fn segment_bytes(&self) -> u64 {
        Options::default().log_segment_bytes.min(self.checkpoint_bytes).max(MIN_SEGMENT_BYTES)
    }

    /// The durable fill the committers run (`fill --sync` as tasks).
    fn fill(&self) -> RunConfig {
        RunConfig {
            dir: self.dir.clone(),
            records: KEY_SPACE,
            cache_mib: self.cache_mib,
            workers: self.workers,
            committers: self.committers,
            direct_io: self.direct_io,
            ceiling: false,
            ..RunConfig::new(Workload::FillSync, StoreKind::Ferrite)
        }
    }

    /// The options of every open: the durable fill's, with this checkpoint interval.
    pub fn options(&self) -> Options {
        Options {
            checkpoint_log_bytes: Some(self.checkpoint_bytes),
            log_segment_bytes: self.segment_bytes(),
            ..ferrite_options(&self.fill())
        }
    }

    /// The ranges the parser cannot know.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| Err(BenchError::Config(reason));
        if self.seconds.is_empty() || self.seconds.len() > MAX_RUNS {
            return bad(format!(
                "between 1 and {MAX_RUNS} run lengths, not {}",
                self.seconds.len()
            ));
        }
        if let Some(s) = self.seconds.iter().find(|s| !(s.is_finite() && **s >= 1e-3 && **s <= 1e6))
        {
            return bad(format!("a run length of {s} seconds is not between 0.001 and 1e6"));
        }
        if self.committers == 0 || self.workers == 0 {
            return bad("at least one committer and one worker".into());
        }
        if self.checkpoint_bytes < 64 << 10 {
            return bad(format!(
                "a checkpoint interval of {} bytes is below the engine's 64 KiB",
                self.checkpoint_bytes
            ));
        }
        Ok(())
    }

    /// How the inserts are made, in words.
    pub fn concurrency(&self) -> String {
        self.fill().concurrency()
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryRun {
    /// Which run of how many (`index` from 0).
    pub index: usize,
    pub of: usize,
    /// The length asked, seconds.
    pub seconds: f64,
    /// Seconds the inserts ran.
    pub elapsed_s: f64,
    /// Inserts acknowledged (each durable when acknowledged).
    pub inserts: u64,
    /// The most log bytes on disk that a recovery could read, over the samples.
    pub log_max_bytes: u64,
    /// Log bytes the run appended, from the first byte to the end.
    pub log_written_bytes: u64,
    /// Log segment files when the run was given up (files are reused, never removed).
    pub log_files: u32,
    /// The most segments in use at once.
    pub segments_max: usize,
    /// What the reopen's recovery did.
    pub recovery: RecoveryReport,
    /// Wall time of the reopen (recovery, then the checkpoint every open takes), seconds.
    pub open_s: f64,
    /// The read-back of the acknowledged keys after the reopen.
    pub check: FillCheck,
    pub verify_s: f64,
}

impl RecoveryRun {
    /// `run 2/3 (30 s)`.
    pub fn label(&self) -> String {
        format!("run {}/{} ({} s)", self.index + 1, self.of, seconds_text(self.seconds))
    }

    /// Why the run failed: acknowledged keys that did not come back as they were written
    /// (`None`: every one did, and nothing else is there).
    pub fn failure(&self) -> Option<String> {
        let c = &self.check;
        if c.mismatches() == 0 && c.matched == self.inserts {
            return None;
        }
        Some(format!(
            "after recovery {} of {} acknowledged keys do not match ({} missing, {} with a \
             wrong value, {} never inserted); the first: {}",
            report::thousands(c.mismatches()),
            report::thousands(self.inserts),
            report::thousands(c.missing),
            report::thousands(c.wrong),
            report::thousands(c.unexpected),
            c.first.as_deref().unwrap_or("none")
        ))
    }

    pub fn ops_per_s(&self) -> f64 {
        self.inserts as f64 / self.elapsed_s.max(1e-9)
    }

    /// Log bytes the recovery read: from the last checkpoint's redo position to the end.
    pub fn replayed_bytes(&self) -> u64 {
        self.recovery.end_lsn.saturating_sub(self.recovery.redo_lsn)
    }

    pub fn recovery_ms(&self) -> f64 {
        self.recovery.duration.as_secs_f64() * 1e3
    }

    pub fn open_ms(&self) -> f64 {
        self.open_s * 1e3
    }

    /// The `result workload=recovery seconds=T ...` line of this run.
    pub fn result_line(&self, config: &RecoveryConfig) -> ResultLine {
        ResultLine::new()
            .word("workload", "recovery")
            .word("seconds", &seconds_text(self.seconds))
            .int("ops", self.inserts)
            .real("ops_per_s", self.ops_per_s(), 0)
            .int("log_max_bytes", self.log_max_bytes)
            .int("replayed_bytes", self.replayed_bytes())
            .int("replayed_records", self.recovery.records)
            .real("recovery_ms", self.recovery_ms(), 1)
            .real("open_ms", self.open_ms(), 1)
            .int("checkpoint_bytes", config.checkpoint_bytes)
            .int("verified", self.check.matched)
            .int("pages_applied", self.recovery.pages_applied)
            .int("torn_bytes", self.recovery.torn_bytes)
            .int("log_written_bytes", self.log_written_bytes)
            .int("log_files", u64::from(self.log_files))
            .int("segment_bytes", config.segment_bytes())
            .real("run_s", self.elapsed_s, 2)
            .real("verify_s", self.verify_s, 2)
            .word("store", "ferrite")
            .flag("sync", true)
            .int("committers", config.committers as u64)
            .int("workers", config.workers as u64)
            .int("cache_mib", config.cache_mib)
    }
}

/// Every run of one command.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryBench {
    pub config: RecoveryConfig,
    pub runs: Vec<RecoveryRun>,
}

impl RecoveryBench {
    /// The runs that failed, each as `run 2/3 (30 s): why`.
    pub fn failures(&self) -> Vec<String> {
        self.runs.iter().filter_map(|r| Some(format!("{}: {}", r.label(), r.failure()?))).collect()
    }

    /// `Ok` when every run got every acknowledged key back; else the error naming each
    /// failed run (a failed run prints no result line).
    pub fn verdict(&self) -> Result<(), BenchError> {
        match self.failures().as_slice() {
            [] => Ok(()),
            failures => Err(verify(failures.join("; "))),
        }
    }

    /// The table (one row per run), then what it shows.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut s = format!(
            "each run: durable inserts from {}, cache {} MiB, then a crash and a reopen\n\
             a checkpoint every {} of log, segments of {}\n\n",
            c.concurrency(),
            c.cache_mib,
            report::bytes(c.checkpoint_bytes),
            report::bytes(c.segment_bytes()),
        );
        s.push_str(&self.table());
        s.push('\n');
        for line in self.bounded() {
            s.push_str(&line);
            s.push('\n');
        }
        s
    }

    /// One row per run, columns aligned.
    pub fn table(&self) -> String {
        let header = [
            "run",
            "inserts",
            "inserts/s",
            "log written",
            "log max",
            "max/ckpt",
            "replayed",
            "records",
            "pages",
            "recovery",
            "open",
            "log files",
            "verified",
            "mismatches",
        ];
        let checkpoint = self.config.checkpoint_bytes as f64;
        let rows: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                vec![
                    format!("{} s", seconds_text(r.seconds)),
                    report::thousands(r.inserts),
                    report::si(r.ops_per_s()),
                    report::bytes(r.log_written_bytes),
                    report::bytes(r.log_max_bytes),
                    format!("{:.2}x", r.log_max_bytes as f64 / checkpoint),
                    report::bytes(r.replayed_bytes()),
                    report::thousands(r.recovery.records),
                    report::thousands(r.recovery.pages_applied),
                    millis(r.recovery_ms()),
                    millis(r.open_ms()),
                    r.log_files.to_string(),
                    report::thousands(r.check.matched),
                    match r.check.mismatches() {
                        0 if r.failure().is_none() => "0".to_owned(),
                        n => format!("{} FAILED", report::thousands(n)),
                    },
                ]
            })
            .collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &mut dyn Iterator<Item = &str>| {
            let text: Vec<String> =
                cells.zip(&widths).map(|(cell, &w)| format!("{cell:>w$}")).collect();
            out.push_str(text.join("  ").trim_end());
            out.push('\n');
        };
        line(&mut header.iter().copied());
        for row in &rows {
            line(&mut row.iter().map(String::as_str));
        }
        out
    }

    /// What the table shows, in words: the longest run against the shortest, and the
    /// largest log on disk against the checkpoint interval.
    pub fn bounded(&self) -> Vec<String> {
        let Some(longest) = self.runs.iter().max_by(|a, b| a.seconds.total_cmp(&b.seconds)) else {
            return Vec::new();
        };
        let shortest = self.runs.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds)).unwrap();
        let checkpoint = self.config.checkpoint_bytes;
        let largest = self.runs.iter().map(|r| r.log_max_bytes).max().unwrap_or(0);
        let mut lines = Vec::new();
        if longest.seconds > shortest.seconds {
            let ratio = |a: f64, b: f64| format!("{:.2}x", a / b.max(1e-9));
            let (l, s) = (longest, shortest);
            lines.push(format!(
                "longest ({} s) vs shortest ({} s) run:",
                seconds_text(l.seconds),
                seconds_text(s.seconds)
            ));
            lines.push(format!(
                "    work done:   inserts {}, log written {}",
                ratio(l.inserts as f64, s.inserts as f64),
                ratio(l.log_written_bytes as f64, s.log_written_bytes as f64),
            ));
            lines.push(format!(
                "    crash cost:  recovery {} ({} vs {}), open {} ({} vs {})",
                ratio(l.recovery_ms(), s.recovery_ms()),
                millis(l.recovery_ms()),
                millis(s.recovery_ms()),
                ratio(l.open_ms(), s.open_ms()),
                millis(l.open_ms()),
                millis(s.open_ms()),
            ));
            lines.push(format!(
                "    log kept:    replayed {} ({} vs {}), max on disk {} ({} vs {})",
                ratio(l.replayed_bytes() as f64, s.replayed_bytes() as f64),
                report::bytes(l.replayed_bytes()),
                report::bytes(s.replayed_bytes()),
                ratio(l.log_max_bytes as f64, s.log_max_bytes as f64),
                report::bytes(l.log_max_bytes),
                report::bytes(s.log_max_bytes),
            ));
        } else {
            lines.push("one run length: give --seconds several to compare them".into());
        }
        lines.push(format!(
            "largest log on disk in any run: {} = {:.2}x the checkpoint interval ({});",
            report::bytes(largest),
            largest as f64 / checkpoint as f64,
            report::bytes(checkpoint),
        ));
        lines.push(format!(
            "    bound: the interval + a segment ({}) + what is logged while a checkpoint runs \
             (twice that",
            report::bytes(self.config.segment_bytes())
        ));
        lines.push("    when a checkpoint outlasts the logging of an interval)".into());
        for failure in self.failures() {
            lines.push(format!("FAILED {failure}"));
        }
        if !self.failures().is_empty() {
            lines.push(
                "    recovery did not bring back every acknowledged insert: a failed run's \
                 times and sizes"
                    .into(),
            );
            lines.push("    measure a wrong recovery".into());
        }
        lines
    }
}

/// Runs every length of `config.seconds`; progress on stderr when `show`, a line per step
/// to `say`. A run whose read-back finds a difference is kept with its failure
/// (`RecoveryRun::failure`, `RecoveryBench::failures`) and the next run goes on; any other
/// error ends the command. A passing run's JSON object is appended as soon as it ended.
pub fn run(
    config: &RecoveryConfig,
    show: bool,
    say: &mut dyn FnMut(&str),
) -> Result<RecoveryBench, BenchError> {
    config.validate()?;
    let mut runs: Vec<RecoveryRun> = Vec::with_capacity(config.seconds.len());
    for index in 0..config.seconds.len() {
        let run = run_one(config, index, show, say)?;
        if let (Some(path), None) = (&config.json, run.failure()) {
            append_json(path, &run.result_line(config).to_json())?;
        }
        runs.push(run);
    }
    if runs.last().is_some_and(|r| r.failure().is_some()) {
        say(&format!(
            "{} is left as the failed run's recovery left it, for `ferrite check --db {0}`",
            config.dir.display()
        ));
    } else if !config.keep {
        remove_bench_dir(&config.dir)?;
    }
    Ok(RecoveryBench { config: config.clone(), runs })
}

/// The largest log on disk and the most segments, over the samples.
#[derive(Debug, Default)]
struct LogSamples {
    max_bytes: u64,
    max_segments: usize,
    files: u32,
}

impl LogSamples {
    fn sample(&mut self, log: &Log) {
        self.max_bytes = self.max_bytes.max(log.retained_bytes());
        let (segments, files) = log.segment_usage();
        self.max_segments = self.max_segments.max(segments);
        self.files = self.files.max(files);
    }
}

/// One run: write for `seconds`, crash, reopen, verify.
fn run_one(
    config: &RecoveryConfig,
    index: usize,
    show: bool,
    say: &mut dyn FnMut(&str),
) -> Result<RecoveryRun, BenchError> {
    let seconds = config.seconds[index];
    let label =
        &format!("run {}/{} ({} s)", index + 1, config.seconds.len(), seconds_text(seconds));
    let dir = &config.dir;
    fresh_dir(dir)?;
    let db = Db::open(dir, config.options())?;
    // Marked once the database made it (Ferrite refuses to create one among other files),
    // so that the next run, or the end, may remove it.
    std::fs::write(dir.join(MARKER_FILE), "made by `ferrite bench`, which removes it\n")
        .map_err(|e| BenchError::Io { context: format!("marking {}", dir.display()), source: e })?;
    let tree = db.tree(TREE)?;
    let log = Arc::clone(db.log().expect("a writable database has a log"));
    let keys = Arc::new(KeySpace::new(0));
    let phase = Arc::new(AtomicU8::new(MEASURE));
    let measure = Duration::from_secs_f64(seconds);
    let total_ms = measure.as_millis() as u64;
    let mut progress = if show {
        Progress::stderr(&format!("{label}: durable inserts"), "ms", total_ms)
    } else {
        Progress::hidden(total_ms)
    };
    let mut samples = LogSamples::default();
    let first_lsn = log.tail();
    let running = start_tasks(&db, &tree, &config.fill(), Arc::clone(&keys), Arc::clone(&phase))?;
    let start = Instant::now();
    loop {
        samples.sample(&log);
        let elapsed = start.elapsed();
        progress.set((elapsed.as_millis() as u64).min(total_ms));
        let left = measure.saturating_sub(elapsed);
        if left.is_zero() || phase.load(Ordering::Acquire) == STOP {
            break;
        }
        wait(&phase, left.min(SAMPLE_INTERVAL));
    }
    phase.store(STOP, Ordering::Release);
    let elapsed_s = start.elapsed().as_secs_f64();
    let finished = running.finish();
    progress.finish();
    finished?;
    samples.sample(&log);
    let inserts = keys.inserted();
    let log_written_bytes = log.tail() - first_lsn;
    say(&format!(
        "{label}: {} inserts acknowledged ({}/s), log on disk at most {}; giving the database \
         up as a crash would",
        report::thousands(inserts),
        report::si(inserts as f64 / elapsed_s.max(1e-9)),
        report::bytes(samples.max_bytes)
    ));
    drop((tree, log));
    db.abandon();

    let start = Instant::now();
    let db = Db::open(dir, config.options())?;
    let open_s = start.elapsed().as_secs_f64();
    let recovery = db.recovery_report().clone();
    let start = Instant::now();
    let check = compare_fill(&FerriteTree::new(&db, db.open_tree(TREE)?), &keys, KEY_SPACE)?;
    let verify_s = start.elapsed().as_secs_f64();
    db.close()?;
    let run = RecoveryRun {
        index,
        of: config.seconds.len(),
        seconds,
        elapsed_s,
        inserts,
        log_max_bytes: samples.max_bytes,
        log_written_bytes,
        log_files: samples.files,
        segments_max: samples.max_segments,
        recovery,
        open_s,
        check,
        verify_s,
    };
    say(&format!(
        "{label}: reopened in {}: replayed {} of log ({} records, {} pages) in {}; {} keys \
         read back in {}",
        millis(run.open_ms()),
        report::bytes(run.replayed_bytes()),
        report::thousands(run.recovery.records),
        report::thousands(run.recovery.pages_applied),
        millis(run.recovery_ms()),
        report::thousands(run.check.visited),
        report::duration(verify_s)
    ));
    if let Some(failure) = run.failure() {
        say(&format!("{label}: FAILED: {failure}"));
    }
    Ok(run)
}

/// Empties the data directory for a run: removes it if it is the benchmark's (never anyone
/// else's), then creates it.
fn fresh_dir(dir: &Path) -> Result<(), BenchError> {
    if dir.exists() {
        remove_bench_dir(dir)?;
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::Io { context: format!("creating {}", dir.display()), source: e })
}

/// A length in seconds as given: `10`, `0.3` (at most millisecond precision).
pub fn seconds_text(seconds: f64) -> String {
    let text = format!("{seconds:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Milliseconds for the table: `1,234 ms`, `56.7 ms`.
fn millis(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{} ms", report::thousands(ms.round() as u64))
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn tiny(dir: &TempDir) -> RecoveryConfig {
        RecoveryConfig {
            dir: dir.path().join("bench-recovery"),
            seconds: vec![0.3, 0.6],
            committers: 4,
            workers: 2,
            cache_mib: 32,
            checkpoint_bytes: 1 << 20,
            json: Some(dir.path().join("runs.jsonl")),
            ..RecoveryConfig::default()
        }
    }

    /// Two short runs with a 1 MiB checkpoint interval: every acknowledged key is back after
    /// the crash, the log on disk stays within a few intervals (tiny ones: see below), the result lines and the
    /// JSON objects say so, and the directory is gone at the end. The longer run writes a few
    /// intervals of log on any reasonable disk (8 committers share each sync): its
    /// checkpoints must then have freed segments, and recovery started from one of them.
    /// The pool holds all the data (evictions: the next test), and the tree
    /// stays small, so that a checkpoint is quick next to the logging of an interval.
    #[test]
    fn short_runs_recover_every_acknowledged_key_with_a_bounded_log() {
        let dir = TempDir::new().unwrap();
        let config =
            RecoveryConfig { seconds: vec![0.3, 2.0], committers: 8, cache_mib: 32, ..tiny(&dir) };
        let mut said = Vec::new();
        let bench = run(&config, false, &mut |line| said.push(line.to_owned())).unwrap();
        let summary = bench.summary();
        assert_eq!(bench.runs.len(), 2);
        for (run, seconds) in bench.runs.iter().zip([0.3, 2.0]) {
            assert_eq!(run.seconds, seconds);
            assert!(run.inserts > 0, "{run:?}");
            assert_eq!(run.check.matched, run.inserts, "every acknowledged key read back");
            assert_eq!(run.check.mismatches(), 0);
            assert!(run.log_max_bytes > 0 && run.log_written_bytes > 0, "{run:?}");
            // The interval + a segment (1 MiB each here) + what is logged while a checkpoint
            // writes the dirty pages back, twice when checkpoints outlast an interval: a
            // checkpoint takes ~0.2 s in a test build, about 2 MiB of log at full speed.
            assert!(run.log_max_bytes < 8 * config.checkpoint_bytes, "{run:?}\n{summary}");
            assert!(run.recovery.end_lsn >= run.recovery.redo_lsn);
            // (A checkpoint finishing after the last sample adds its record to the end.)
            assert!(run.replayed_bytes() <= run.log_max_bytes + (64 << 10), "{run:?}");
            assert!(run.log_files >= 1 && run.segments_max >= 1, "{run:?}");
            assert!(run.open_s > 0.0 && run.elapsed_s >= seconds);
            if run.log_written_bytes >= 5 * config.checkpoint_bytes / 2 {
                assert!(run.recovery.redo_lsn > 0, "no checkpoint in the run: {run:?}");
                assert!(run.log_max_bytes < run.log_written_bytes, "nothing freed: {run:?}");
                assert!(run.replayed_bytes() < run.log_written_bytes, "{run:?}");
            }
            if run.log_written_bytes >= 8 * config.checkpoint_bytes {
                // Most of what a longer run logged was freed again.
                assert!(run.log_max_bytes < run.log_written_bytes / 2, "{run:?}\n{summary}");
            }
            let line = run.result_line(&config);
            let text = line.to_string();
            assert!(text.starts_with("result workload=recovery seconds="), "{text}");
            assert_eq!(ResultLine::parse(&text), Some(line.clone()));
            assert_eq!(line.get("seconds"), Some(if seconds == 0.3 { "0.3" } else { "2" }));
            assert_eq!(line.get("ops"), Some(run.inserts.to_string().as_str()));
            assert_eq!(line.get("verified"), Some(run.inserts.to_string().as_str()));
            assert_eq!(line.get("checkpoint_bytes"), Some("1048576"));
            assert_eq!(line.get("segment_bytes"), Some("1048576"));
            let replayed = run.replayed_bytes().to_string();
            assert_eq!(line.get("replayed_bytes"), Some(replayed.as_str()));
            let records = run.recovery.records.to_string();
            assert_eq!(line.get("replayed_records"), Some(records.as_str()));
            for field in ["ops_per_s", "log_max_bytes", "recovery_ms", "open_ms", "pages_applied"] {
                assert!(line.get(field).is_some(), "{field} in {text}");
            }
        }
        assert_eq!(said.len(), 4, "{said:?}");
        assert_eq!(bench.table().lines().count(), 3, "{summary}");
        assert!(summary.contains("longest (2 s) vs shortest (0.3 s) run:"), "{summary}");
        assert!(summary.contains("the checkpoint interval (1.0 MiB)"), "{summary}");
        let json = std::fs::read_to_string(dir.path().join("runs.jsonl")).unwrap();
        assert_eq!(json.lines().count(), 2);
        assert!(json.lines().all(|l| l.starts_with("{\"workload\":\"recovery\",\"seconds\":")));
        assert!(json.contains("\"seconds\":0.3,") && json.contains("\"seconds\":2,"), "{json}");
        assert!(!config.dir.exists(), "the directory is removed without --keep");
    }

    /// A pool far smaller than the data: the workers evict (write back) dirty pages all
    /// along, and every acknowledged key must still be back after the crash. Regression: this
    /// benchmark once lost about two thirds of them (`--seconds 2 --cache-mib 1`), with leaves
    /// whose fences disagreed with their parents: recovery applied page images logged while
    /// it evicted pages by their position instead of their content's LSN.
    #[test]
    fn acknowledged_keys_survive_a_crash_after_evictions() {
        let dir = TempDir::new().unwrap();
        let config = RecoveryConfig {
            seconds: vec![2.0],
            committers: 16,
            cache_mib: 1,
            checkpoint_bytes: default_checkpoint_bytes(1),
            json: None,
            ..tiny(&dir)
        };
        let bench = run(&config, false, &mut |_| {}).unwrap();
        assert_eq!(bench.failures(), Vec::<String>::new());
        let run = &bench.runs[0];
        assert_eq!(run.check.matched, run.inserts, "{run:?}");
    }

    /// A run whose read-back found differences is marked in the table and in the lines
    /// under it, and makes the verdict an error naming it; the others still count.
    #[test]
    fn a_failed_read_back_is_shown_and_fails_the_verdict() {
        // (`RecoveryReport` is `#[non_exhaustive]`: built from its default.)
        let mut recovery = RecoveryReport::default();
        (recovery.end_lsn, recovery.records) = (3 << 20, 1000);
        let good = RecoveryRun {
            index: 0,
            of: 2,
            seconds: 1.0,
            elapsed_s: 1.0,
            inserts: 1000,
            log_max_bytes: 3 << 20,
            log_written_bytes: 3 << 20,
            log_files: 1,
            segments_max: 1,
            recovery,
            open_s: 0.1,
            check: FillCheck { visited: 1000, matched: 1000, ..FillCheck::default() },
            verify_s: 0.01,
        };
        let bad = RecoveryRun {
            index: 1,
            seconds: 2.5,
            inserts: 2000,
            check: FillCheck {
                visited: 1990,
                matched: 1990,
                missing: 10,
                first: Some("key 7 was acknowledged but is missing".into()),
                ..FillCheck::default()
            },
            ..good.clone()
        };
        let config = RecoveryConfig { checkpoint_bytes: 1 << 20, ..RecoveryConfig::default() };
        let passed = RecoveryBench { config: config.clone(), runs: vec![good.clone()] };
        assert!(passed.verdict().is_ok() && passed.failures().is_empty());
        assert!(passed.table().lines().nth(1).unwrap().ends_with("1,000           0"));
        let bench = RecoveryBench { config, runs: vec![good, bad.clone()] };
        assert_eq!(bad.label(), "run 2/2 (2.5 s)");
        let failures = bench.failures();
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].starts_with(
                "run 2/2 (2.5 s): after recovery 10 of 2,000 acknowledged keys do not match \
                 (10 missing, 0 with a wrong value, 0 never inserted); the first: key 7"
            ),
            "{failures:?}"
        );
        let e = bench.verdict().unwrap_err().to_string();
        assert!(e.starts_with("verification failed: run 2/2 (2.5 s): after recovery"), "{e}");
        let table = bench.table();
        assert!(table.lines().nth(2).unwrap().ends_with("10 FAILED"), "{table}");
        let summary = bench.summary();
        assert!(summary.contains("\nFAILED run 2/2 (2.5 s): after recovery 10 of"), "{summary}");
        assert!(summary.contains("longest (2.5 s) vs shortest (1 s) run:"), "{summary}");
    }

    /// `keep` leaves the last run's directory; a directory that is not the benchmark's is
    /// never emptied.
    #[test]
    fn keep_leaves_the_last_run_and_foreign_directories_are_refused() {
        let dir = TempDir::new().unwrap();
        let config = RecoveryConfig { seconds: vec![0.1], keep: true, json: None, ..tiny(&dir) };
        let bench = run(&config, false, &mut |_| {}).unwrap();
        assert!(bench.bounded()[0].starts_with("one run length"), "{:?}", bench.bounded());
        assert!(config.dir.join(ferrite::PAGE_FILE_NAME).exists());
        // Kept data is the benchmark's: the next run empties it.
        run(&RecoveryConfig { keep: false, ..config.clone() }, false, &mut |_| {}).unwrap();
        assert!(!config.dir.exists());
        std::fs::create_dir_all(&config.dir).unwrap();
        std::fs::write(config.dir.join("precious"), b"mine").unwrap();
        let e = run(&config, false, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("was not made by ferrite bench"), "{e}");
        assert!(config.dir.join("precious").exists());
    }

    #[test]
    fn configurations_are_checked_and_segments_fit_the_interval() {
        let base = RecoveryConfig::default();
        assert_eq!(base.checkpoint_bytes, base.cache_mib.max(256) << 20);
        assert_eq!(base.segment_bytes(), Options::default().log_segment_bytes);
        assert_eq!(base.options().durability, ferrite::Durability::Sync);
        let small = RecoveryConfig { checkpoint_bytes: 3 << 20, ..base.clone() };
        assert_eq!(small.segment_bytes(), 3 << 20);
        assert_eq!(small.options().checkpoint_log_bytes, Some(3 << 20));
        let tiny = RecoveryConfig { checkpoint_bytes: 64 << 10, ..base.clone() };
        assert_eq!(tiny.segment_bytes(), 1 << 20);
        base.validate().unwrap();
        for (bad, needle) in [
            (RecoveryConfig { seconds: vec![], ..base.clone() }, "run lengths"),
            (RecoveryConfig { seconds: vec![1.0, -1.0], ..base.clone() }, "-1 seconds"),
            (RecoveryConfig { committers: 0, ..base.clone() }, "committer"),
            (RecoveryConfig { checkpoint_bytes: 1000, ..base.clone() }, "64 KiB"),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        assert_eq!(seconds_text(10.0), "10");
        assert_eq!(seconds_text(0.3), "0.3");
        assert_eq!(seconds_text(2.125), "2.125");
        assert_eq!(millis(1234.4), "1,234 ms");
        assert_eq!(millis(5.24), "5.2 ms");
    }
}
