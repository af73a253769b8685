//! `bench lookup`: Ferrite's own lookup benchmark. Uniform random point lookups over a data
//! set many times larger than the buffer pool, every value verified, measured against the
//! device's random-read ceiling in the same run.
//!
//! A run: open (or create) the data directory; reuse the `bench` tree if an earlier `--keep`
//! run left exactly this data set (tree `bench-meta` says so), else load it in key order;
//! close and reopen it read-only (its whole pool as frames); run lookups on the runner
//! (`crate::runner`), closed loop: from `threads` threads through the blocking API
//! (`--direct-api`), or as `workers × tasks` tasks on Ferrite's workers, each miss a read
//! queued on its worker's engine (then the device's ceiling is measured just before and just
//! after the lookups, and the workers' time is split into tree work, eviction, I/O
//! submission, completion and idle); first for a warm-up that is not counted, then for
//! `seconds`; close; remove the directory unless `--keep`. Any wrong or missing value stops
//! the run with an error (and no result line).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ferrite::buffer::PoolStats;
use ferrite::{Db, Options, Tree};

use crate::error::BenchError;
use crate::gen::keys::{check_value, key, value, ValueMismatch, KEY_LEN, VALUE_LEN};
use crate::gen::rng::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::phase::{wait, MEASURE, STOP, WARMUP};
use crate::measure::progress::Progress;
use crate::report::{self, ResultLine};
use crate::runner::{self, AsyncOps, BlockingOps, Hdr, Ops, Pacing};
use crate::stores::ferrite::tier_counters_of;
use crate::stores::{FerriteTree, IoCounters, KvStore, StoreError, TierCounters, WorkerTimes};
use crate::workloads::datadir::{BenchDir, DirFate};
use crate::workloads::run::{read_size_warning, TierConfig};
use crate::workloads::ycsb::Workload;

/// The tree holding the data set.
pub const BENCH_TREE: &str = "bench";
/// The tree describing the data set, so that a later run can tell whether to reuse it.
pub const META_TREE: &str = "bench-meta";
const META_KEY: &[u8] = b"lookup";
/// Bumped whenever keys or values change, so that old kept data is reloaded.
const DATA_FORMAT: u32 = 1;

/// Data directory when none is given.
pub const DEFAULT_DIR: &str = "./ferrite-data/bench-lookup";
/// Pool size when none is given.
pub const DEFAULT_POOL_MIB: u64 = 64;
/// Keys loaded when no count is given, meant to make the data about 10 times the default
/// pool. An entry takes 138 bytes in a leaf (8-byte key, 120-byte value, 10-byte slot), and
/// the key-order load fills leaves (the rightmost leaf splits at its end), ~28 entries a
/// page: measured, 4.6 M keys take 166,451 pages, 650 MiB, 10.2 times the 64 MiB pool.
pub const DEFAULT_KEYS: u64 = 4_600_000;
/// Measured seconds when none are given.
pub const DEFAULT_SECONDS: f64 = 20.0;
/// Longest warm-up; it is otherwise a quarter of the measured time.
pub const MAX_WARMUP_SECONDS: f64 = 5.0;
/// Most threads accepted.
pub const MAX_THREADS: usize = 1024;
/// Seed when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// Everything a `bench lookup` run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct LookupConfig {
    pub dir: PathBuf,
    pub keys: u64,
    pub pool_mib: u64,
    pub seconds: f64,
    pub threads: usize,
    pub seed: u64,
    /// Keep the data directory for the next run to reuse.
    pub keep: bool,
    pub direct_io: bool,
    /// Worker threads of the task API (default: one per core).
    pub workers: usize,
    /// Lookup tasks in flight per worker.
    pub tasks: usize,
    /// The submission engine the workers issue their I/O with.
    /// `None`: the best the kernel allows, as `Options::engine` (the run says which).
    pub engine: Option<ferrite::io::EngineKind>,
    /// The devices the data is striped over; empty means the single page file in `dir`.
    pub devices: Vec<PathBuf>,
    /// Look up through the blocking API from `threads` threads instead of tasks on workers.
    pub direct_api: bool,
    /// Append the result, as one JSON object, to this file.
    pub json: Option<PathBuf>,
    /// A second cache tier between the pool and the disk.
    pub tier: Option<TierConfig>,
}

impl Default for LookupConfig {
    fn default() -> Self {
        LookupConfig {
            dir: PathBuf::from(DEFAULT_DIR),
            keys: DEFAULT_KEYS,
            pool_mib: DEFAULT_POOL_MIB,
            seconds: DEFAULT_SECONDS,
            threads: 1,
            seed: DEFAULT_SEED,
            keep: false,
            direct_io: true,
            workers: thread::available_parallelism().map_or(1, |n| n.get()),
            tasks: 64,
            engine: None,
            devices: Vec::new(),
            direct_api: false,
            json: None,
            tier: None,
        }
    }
}

impl LookupConfig {
    /// The warm-up before measuring: a quarter of the measured time, at most 5 s.
    pub fn warmup_seconds(&self) -> f64 {
        (self.seconds / 4.0).min(MAX_WARMUP_SECONDS)
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| Err(BenchError::Config(reason));
        if self.keys == 0 {
            return bad("the number of keys must be at least 1".into());
        }
        if self.pool_mib == 0 || self.pool_mib > 1 << 30 {
            return bad(format!("pool of {} MiB is out of range", self.pool_mib));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 1e6) {
            return bad(format!("{} seconds is out of range", self.seconds));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return bad(format!("{} threads is out of range (1 to {MAX_THREADS})", self.threads));
        }
        if self.workers == 0 || self.workers > MAX_THREADS {
            return bad(format!("{} workers is out of range (1 to {MAX_THREADS})", self.workers));
        }
        /// Most lookup tasks per worker.
        const MAX_TASKS: usize = 1 << 16;
        if self.tasks == 0 || self.tasks > MAX_TASKS {
            return bad(format!(
                "{} tasks per worker is out of range (1 to {MAX_TASKS})",
                self.tasks
            ));
        }
        for (i, device) in self.devices.iter().enumerate() {
            if device.as_os_str().is_empty() {
                return bad("a device path is empty".into());
            }
            if self.devices[..i].contains(device) {
                return bad(format!("device {} is given twice", device.display()));
            }
        }
        Ok(())
    }

    fn options(&self) -> Options {
        Options {
            pool_bytes: self.pool_mib << 20,
            direct_io: self.direct_io,
            create_if_missing: true,
            workers: if self.direct_api { 0 } else { self.workers },
            engine: self.engine,
            io_depth: self.tasks.clamp(1, 4096),
            devices: self.devices.clone(),
            // Reads only (and a load, flushed at its end): no log to sync, as the peers'
            // read workloads run without theirs.
            durability: ferrite::Durability::None,
            tier: self.tier.as_ref().map(TierConfig::options),
            ..Options::default()
        }
    }
}

/// Where the data set came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DataSource {
    /// Loaded by this run, in `seconds`.
    Loaded { seconds: f64 },
    /// Left by an earlier `--keep` run.
    Reused,
}

/// The measured part of a run.
#[derive(Debug, Clone)]
pub struct LookupRun {
    /// Lookups finished while measuring.
    pub lookups: u64,
    /// Measured time.
    pub seconds: f64,
    /// Warm-up time before it (not counted).
    pub warmup_seconds: f64,
    /// Latency of each measured lookup, in nanoseconds.
    pub latency_ns: Hdr,
    /// Device and cache counts while measuring, if the store keeps them.
    pub io: Option<IoCounters>,
    /// The counters of the block device holding the data, while measuring (the whole
    /// device's: other I/O on it shows up here), if `/proc/diskstats` lists it.
    pub disk: Option<(String, DiskCounters)>,
    /// Processor time the whole process used while measuring.
    pub cpu: CpuTime,
    /// The second cache tier while measuring, if there is one.
    pub tier: Option<TierCounters>,
}

impl LookupRun {
    pub fn lookups_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.lookups as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Processor time (user + system, all threads) per measured lookup, in microseconds.
    pub fn cpu_us_per_lookup(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.cpu.total_s() * 1e6 / self.lookups as f64
        }
    }

    pub fn reads_per_lookup(&self) -> Option<f64> {
        let reads = self.io?.reads;
        Some(if self.lookups == 0 { 0.0 } else { reads as f64 / self.lookups as f64 })
    }

    /// KiB the device read per measured lookup, if its counters were read.
    pub fn device_kib_per_lookup(&self) -> Option<f64> {
        let (_, d) = self.disk.as_ref()?;
        Some(if self.lookups == 0 {
            0.0
        } else {
            d.read_bytes as f64 / 1024.0 / self.lookups as f64
        })
    }
}

/// What a run through the task API measures beyond the blocking one.
#[derive(Debug, Clone, Copy)]
pub struct TaskFigures {
    /// The engine the workers opened (the database says which).
    pub engine: &'static str,
    /// The device's random-read ceiling: the mean of `device_before` and `device_after`.
    pub device_iops: f64,
    /// The ceiling measured just before the lookups, and just after (the device is shared
    /// and its speed drifts; the mean of both brackets the lookups).
    pub device_before: f64,
    pub device_after: f64,
    pub shares: TimeShares,
}

/// Everything a finished run found.
#[derive(Debug, Clone)]
pub struct LookupReport {
    pub config: LookupConfig,
    pub store: &'static str,
    pub source: DataSource,
    /// Pages in the page file when measuring ended (data, inner nodes, free pages, header).
    pub data_pages: u64,
    pub pool_pages: u64,
    pub run: LookupRun,
    /// Tasks on workers: the device's random-read ceiling measured in this run (random
    /// 4 KiB reads, io_uring, QD 128), and where the workers' time went.
    pub tasks: Option<TaskFigures>,
    pub dir: DirFate,
}

const PAGE_BYTES: u64 = 4096;

impl LookupReport {
    pub fn data_bytes(&self) -> u64 {
        self.data_pages * PAGE_BYTES
    }

    pub fn pool_bytes(&self) -> u64 {
        self.pool_pages * PAGE_BYTES
    }

    /// Data size over pool size.
    pub fn data_pool_ratio(&self) -> f64 {
        self.data_bytes() as f64 / self.pool_bytes().max(1) as f64
    }

    fn load_seconds(&self) -> f64 {
        match self.source {
            DataSource::Loaded { seconds } => seconds,
            DataSource::Reused => 0.0,
        }
    }

    /// The human-readable summary, several lines, each ending with a newline.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let run = &self.run;
        let dir = match &self.dir {
            DirFate::Kept => "kept for the next run (--keep)".to_owned(),
            DirFate::Removed => "removed at the end; --keep keeps it for reuse".to_owned(),
            DirFate::Left(reason) => format!("left in place: {reason}"),
        };
        let data = match self.source {
            DataSource::Loaded { seconds } => format!(
                "loaded and written back in {} ({} keys/s)",
                report::duration(seconds),
                report::si(c.keys as f64 / seconds.max(1e-9))
            ),
            DataSource::Reused => "reused from an earlier --keep run".to_owned(),
        };
        let reads = match run.io {
            Some(io) => format!(
                "{:.3} per lookup (while measuring: {} reads, {} writes, {} evictions)",
                run.reads_per_lookup().unwrap_or(0.0),
                report::thousands(io.reads),
                report::thousands(io.writes),
                report::thousands(io.evictions)
            ),
            None => "not counted by this store".to_owned(),
        };
        let h = &run.latency_ns;
        let mut s = String::new();
        let mut line = |label: &str, text: String| s.push_str(&format!("  {label:<14}{text}\n"));
        line("bench lookup", "uniform random point lookups, every value verified".to_owned());
        line("directory", format!("{}, {dir}", c.dir.display()));
        line(
            "data",
            format!(
                "{} keys ({KEY_LEN}-byte keys, {VALUE_LEN}-byte values), {data}",
                report::thousands(c.keys)
            ),
        );
        line(
            "on disk",
            format!(
                "{} ({} pages of 4 KiB), {:.2} x the pool",
                report::bytes(self.data_bytes()),
                report::thousands(self.data_pages),
                self.data_pool_ratio()
            ),
        );
        line(
            "pool",
            format!(
                "{} ({} pages), {}",
                report::bytes(self.pool_bytes()),
                report::thousands(self.pool_pages),
                if c.direct_io { "O_DIRECT" } else { "buffered I/O (--no-direct)" }
            ),
        );
        let who = if self.tasks.is_some() {
            format!("{} workers x {} tasks", c.workers, c.tasks)
        } else {
            format!("{} thread{}", c.threads, if c.threads == 1 { "" } else { "s" })
        };
        if let (Some(tier), Some(t)) = (&c.tier, &run.tier) {
            line("tier", tier.describe(crate::stores::StoreKind::Ferrite));
            line("tier use", t.describe());
        }
        line(
            "lookups",
            format!(
                "{} in {} after a {} warm-up, {who}, seed {}: {} lookups/s",
                report::thousands(run.lookups),
                report::duration(run.seconds),
                report::duration(run.warmup_seconds),
                c.seed,
                report::thousands(run.lookups_per_s().round() as u64)
            ),
        );
        line(
            "latency",
            format!(
                "p50 {}, p99 {}, p99.9 {}, max {}, mean {}",
                report::latency(h.value_at_quantile(0.50)),
                report::latency(h.value_at_quantile(0.99)),
                report::latency(h.value_at_quantile(0.999)),
                report::latency(h.max()),
                report::latency(h.mean().round() as u64)
            ),
        );
        line("device reads", reads);
        if let (Some((name, d)), Some(per_lookup)) = (&run.disk, run.device_kib_per_lookup()) {
            line(
                "read size",
                format!(
                    "{name}: {:.1} KiB per device read, {per_lookup:.2} KiB read per lookup ({} reads, {} read)",
                    d.read_kib_per_read(),
                    report::thousands(d.reads),
                    report::bytes(d.read_bytes)
                ),
            );
        }
        if let Some(t) = &self.tasks {
            line(
                "mode",
                format!("tasks: {} workers x {} tasks, engine {}", c.workers, c.tasks, t.engine),
            );
            line(
                "device",
                format!(
                    "{} random 4 KiB reads/s (io_uring, QD 128; mean of {} before and {} after the lookups): lookups at {:.2}x",
                    report::thousands(t.device_iops.round() as u64),
                    report::thousands(t.device_before.round() as u64),
                    report::thousands(t.device_after.round() as u64),
                    run.lookups_per_s() / t.device_iops.max(1.0)
                ),
            );
            line(
                "worker time",
                format!(
                    "tree {:.1} %, eviction {:.1} %, submission {:.1} %, completion {:.1} %, idle {:.1} %",
                    t.shares.tree_pct,
                    t.shares.evict_pct,
                    t.shares.submit_pct,
                    t.shares.complete_pct,
                    t.shares.idle_pct
                ),
            );
        } else {
            line("mode", format!("blocking API from {} thread(s) (--direct-api)", c.threads));
        }
        line(
            "cpu",
            format!(
                "{:.2} us per lookup (user {:.1} s + system {:.1} s over {})",
                run.cpu_us_per_lookup(),
                run.cpu.user_s,
                run.cpu.system_s,
                report::duration(run.seconds)
            ),
        );
        line("verified", "every value read (warm-up included) was the expected one".to_owned());
        // Last, where it is seen: lookups that read more than their pages.
        let warning = run
            .disk
            .as_ref()
            .and_then(|(_, d)| read_size_warning(self.store, Workload::Lookup, d, run.lookups));
        if let Some(warning) = warning {
            s.push_str(&format!("  {warning}\n"));
        }
        s
    }

    /// The `result ...` line that ends the output.
    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let run = &self.run;
        let us = |nanos: u64| nanos as f64 / 1e3;
        let mut line = ResultLine::new()
            .real("lookups_per_s", run.lookups_per_s(), 0)
            .int("keys", c.keys)
            .int("pool_mib", c.pool_mib)
            .int("threads", c.threads as u64)
            .real("seconds", run.seconds, 2)
            .int("lookups", run.lookups)
            .real("data_mib", self.data_bytes() as f64 / f64::from(1 << 20), 1)
            .real("data_pool_ratio", self.data_pool_ratio(), 2);
        if let Some(reads) = run.reads_per_lookup() {
            line = line.real("reads_per_lookup", reads, 3);
        }
        // The comparison workloads' names for the device's own counts.
        if let (Some((_, d)), Some(per_lookup)) = (&run.disk, run.device_kib_per_lookup()) {
            let per_op =
                |x: u64| if run.lookups == 0 { 0.0 } else { x as f64 / run.lookups as f64 };
            line = line
                .real("dev_reads_per_op", per_op(d.reads), 3)
                .real("dev_read_kib_per_read", d.read_kib_per_read(), 2)
                .real("dev_read_kib_per_op", per_lookup, 3);
        }
        if let Some(t) = &self.tasks {
            let ratio = if t.device_iops > 0.0 { run.lookups_per_s() / t.device_iops } else { 0.0 };
            line = line
                .real("device_iops", t.device_iops, 0)
                .real("ratio", ratio, 3)
                .real("device_iops_before", t.device_before, 0)
                .real("device_iops_after", t.device_after, 0)
                .word("mode", "tasks")
                .int("workers", c.workers as u64)
                .int("tasks", c.tasks as u64)
                .word("engine", t.engine)
                .real("tree_pct", t.shares.tree_pct, 1)
                .real("evict_pct", t.shares.evict_pct, 1)
                .real("submit_pct", t.shares.submit_pct, 1)
                .real("complete_pct", t.shares.complete_pct, 1)
                .real("idle_pct", t.shares.idle_pct, 1);
        } else {
            line = line.word("mode", "direct");
        }
        line = line.real("cpu_us_per_lookup", run.cpu_us_per_lookup(), 2);
        let line = line
            .real("p50_us", us(run.latency_ns.value_at_quantile(0.50)), 2)
            .real("p99_us", us(run.latency_ns.value_at_quantile(0.99)), 2)
            .real("max_us", us(run.latency_ns.max()), 1)
            .real("load_s", self.load_seconds(), 2)
            .flag("reused", self.source == DataSource::Reused)
            .int("seed", c.seed)
            .flag("direct_io", c.direct_io)
            .word("store", self.store)
            // The comparison workloads' names for the same figures.
            .word("workload", "lookup")
            .real("ops_per_s", run.lookups_per_s(), 0);
        // The tier's fields, as the comparison workloads give them (zeros without one).
        let tier = run.tier.unwrap_or_default();
        tier.window_fields(tier.use_fields(line))
    }
}

/// Runs `bench lookup` on Ferrite: prepares the data, measures, cleans up. Progress of the
/// load goes to `progress`.
pub fn run(config: &LookupConfig, progress: &mut Progress) -> Result<LookupReport, BenchError> {
    config.validate()?;
    let dir = BenchDir::claim(&config.dir)?;
    // Device files this run creates are removed with the directory (never existing ones).
    let new_devices: Vec<PathBuf> =
        config.devices.iter().filter(|d| !d.exists()).cloned().collect();
    let mut owned = dir.is_fresh();
    // The data is prepared in a writable open, then measured in a read-only one: lookups
    // change nothing, and a read-only open gives the whole pool to frames (no change buffer).
    let outcome = with_db(config, config.options(), |db| prepare(db, config, progress, &mut owned))
        .and_then(|source| {
            let read_only = Options { read_only: true, ..config.options() };
            with_db(config, read_only, |db| measure(db, config, source))
        });
    let fate = if config.keep {
        DirFate::Kept
    } else if owned {
        for device in &new_devices {
            let _ = std::fs::remove_file(device);
        }
        dir.remove()
    } else {
        DirFate::Left("it held data before the run".to_owned())
    };
    let (source, run, pool, tasks) = outcome?;
    let report = LookupReport {
        config: config.clone(),
        store: "ferrite",
        source,
        data_pages: pool.page_count,
        pool_pages: pool.pool_pages,
        run,
        tasks,
        dir: fate,
    };
    if let Some(path) = &config.json {
        crate::workloads::run::append_json(path, &report.result_line().to_json())?;
    }
    Ok(report)
}

type Measured = (DataSource, LookupRun, PoolStats, Option<TaskFigures>);

/// Opens the run's directory with `options`, runs `f` on it and closes it (a failed close
/// fails the run).
fn with_db<T>(
    config: &LookupConfig,
    options: Options,
    f: impl FnOnce(&Db) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    let db = Db::open(&config.dir, options)?;
    let done = f(&db);
    let closed = db.close();
    done.and_then(|t| closed.map(|()| t).map_err(BenchError::from))
}

/// Checks that the directory holds only the benchmark's trees, then reuses or loads the data.
fn prepare(
    db: &Db,
    config: &LookupConfig,
    progress: &mut Progress,
    owned: &mut bool,
) -> Result<DataSource, BenchError> {
    let foreign: Vec<String> =
        db.tree_names()?.into_iter().filter(|n| n != BENCH_TREE && n != META_TREE).collect();
    if !foreign.is_empty() {
        return Err(BenchError::NotBenchData { path: config.dir.clone(), trees: foreign });
    }
    // Only the benchmark's trees: the directory is ours to remove.
    *owned = true;
    prepare_data(db, config.keys, progress)
}

/// Measures lookups on a prepared data set (`db` opened read-only).
fn measure(db: &Db, config: &LookupConfig, source: DataSource) -> Result<Measured, BenchError> {
    let store = FerriteTree::new(db, db.open_tree(BENCH_TREE)?);
    // With several devices the ceiling and the device counters are the first device's (they
    // are alike here).
    let page_file = match config.devices.first() {
        Some(first) => first.clone(),
        None => config.dir.join(ferrite::PAGE_FILE_NAME),
    };
    let params = LookupParams {
        keys: config.keys,
        threads: config.threads,
        seed: config.seed,
        warmup: Duration::from_secs_f64(config.warmup_seconds()),
        measure: Duration::from_secs_f64(config.seconds),
        disk: Disk::of(&page_file),
    };
    if config.direct_api {
        let run = run_lookups(&store, &params)?;
        return Ok((source, run, db.pool().stats(), None));
    }
    // 3 s each side for real runs; short (test) runs get a proportionally short ceiling.
    let ceiling_seconds = (config.seconds / 4.0).clamp(0.2, 3.0);
    let device_before =
        crate::workloads::io::device_read_ceiling(&page_file, config.direct_io, ceiling_seconds)?;
    let tree = db.open_tree(BENCH_TREE)?;
    let (run, shares) = run_task_lookups(db, &tree, config.tasks, &params)?;
    let stats = db.pool().stats();
    let device_after =
        crate::workloads::io::device_read_ceiling(&page_file, config.direct_io, ceiling_seconds)?;
    let engine = db.engine().map_or("none", |kind| kind.name());
    let device_iops = (device_before + device_after) / 2.0;
    let figures = TaskFigures { engine, device_iops, device_before, device_after, shares };
    Ok((source, run, stats, Some(figures)))
}

fn meta_value(keys: u64) -> String {
    format!("format={DATA_FORMAT} keys={keys} key_len={KEY_LEN} value_len={VALUE_LEN}")
}

/// Reuses the data set if the metadata describes exactly `keys` keys of this format (and a
/// spot check agrees), else (re)loads it; the metadata is written only once a load is done,
/// so an interrupted load is never reused.
fn prepare_data(db: &Db, keys: u64, progress: &mut Progress) -> Result<DataSource, BenchError> {
    let meta = db.tree(META_TREE)?;
    let expected = meta_value(keys);
    let has_bench = db.tree_names()?.iter().any(|n| n == BENCH_TREE);
    if has_bench && meta.get(META_KEY)?.as_deref() == Some(expected.as_bytes()) {
        let bench = FerriteTree::new(db, db.open_tree(BENCH_TREE)?);
        if spot_check(&bench, keys)? {
            return Ok(DataSource::Reused);
        }
    }
    meta.delete(META_KEY)?;
    match db.drop_tree(BENCH_TREE) {
        Ok(()) | Err(ferrite::Error::TreeNotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let bench = FerriteTree::new(db, db.create_tree(BENCH_TREE)?);
    let elapsed = load(&bench, keys, progress)?;
    meta.put(META_KEY, expected.as_bytes())?;
    Ok(DataSource::Loaded { seconds: elapsed.as_secs_f64() })
}

/// Whether the first, middle and last keys hold their values and the key after the last is
/// absent: cheap evidence that a kept data set is the one its metadata describes.
pub fn spot_check(store: &dyn KvStore, keys: u64) -> Result<bool, BenchError> {
    let mut buf = Vec::with_capacity(VALUE_LEN);
    for i in [0, keys / 2, keys - 1] {
        let found = store.get_into(&key(i), &mut buf).map_err(BenchError::Store)?;
        if check_value(i, found.then_some(&buf[..])).is_err() {
            return Ok(false);
        }
    }
    let beyond = store.get_into(&key(keys), &mut buf).map_err(BenchError::Store)?;
    Ok(!beyond)
}

/// Puts keys `0..keys` with their values, in key order, and writes them back to the device;
/// returns the time taken by both.
pub fn load(
    store: &dyn KvStore,
    keys: u64,
    progress: &mut Progress,
) -> Result<Duration, BenchError> {
    let start = Instant::now();
    for i in 0..keys {
        store.put(&key(i), &value(i)).map_err(BenchError::Store)?;
        progress.set(i + 1);
    }
    store.flush().map_err(BenchError::Store)?;
    let elapsed = start.elapsed();
    progress.finish();
    Ok(elapsed)
}

/// What `run_lookups` does.
#[derive(Debug, Clone)]
pub struct LookupParams {
    /// Keys are drawn uniformly from `0..keys`.
    pub keys: u64,
    pub threads: usize,
    /// Thread `t` draws from `Rng::stream(seed, t)`.
    pub seed: u64,
    pub warmup: Duration,
    pub measure: Duration,
    /// The device whose counters are read when measuring begins and ends, if any.
    pub disk: Option<Disk>,
}

/// Uniform random lookups of keys `0..keys`, every value checked: the operations of one
/// lookup thread (`S` a borrowed store: the blocking API) or task (`S` a `Tree`: the task
/// API). Only the lookup is timed, not the drawing or (on threads) the checking.
#[derive(Debug)]
pub struct LookupOps<S> {
    store: S,
    keys: u64,
    rng: Rng,
    /// The value read (threads).
    buf: Vec<u8>,
    lookups: u64,
}

impl<S> LookupOps<S> {
    pub fn new(store: S, keys: u64, rng: Rng) -> Self {
        assert!(keys > 0);
        LookupOps { store, keys, rng, buf: Vec::new(), lookups: 0 }
    }

    fn verified(&mut self, i: u64, checked: Result<(), ValueMismatch>) -> Result<(), BenchError> {
        checked.map_err(|mismatch| BenchError::Verify { key: i, mismatch })?;
        self.lookups += 1;
        Ok(())
    }
}

impl<S: KvStore + ?Sized> Ops for LookupOps<&S> {
    type Op = u64;
    type Outcome = Result<bool, StoreError>;
    type Counts = u64;

    #[inline(always)]
    fn next_op(&mut self) -> Option<u64> {
        Some(self.rng.below(self.keys))
    }

    #[inline(always)]
    fn verify(&mut self, i: u64, found: Result<bool, StoreError>) -> Result<(), BenchError> {
        let found = found.map_err(BenchError::Store)?;
        let checked = check_value(i, found.then_some(&self.buf[..]));
        self.verified(i, checked)
    }

    fn start_measuring(&mut self) {
        self.lookups = 0;
    }

    fn counts(&self) -> u64 {
        self.lookups
    }
}

impl<S: KvStore + ?Sized> BlockingOps for LookupOps<&S> {
    #[inline(always)]
    fn execute(&mut self, i: u64) -> Result<bool, StoreError> {
        self.store.get_into(&key(i), &mut self.buf)
    }
}

impl Ops for LookupOps<Tree> {
    type Op = u64;
    /// The value is checked as it is read, inside the tree's read.
    type Outcome = ferrite::Result<Option<Result<(), ValueMismatch>>>;
    type Counts = u64;

    #[inline(always)]
    fn next_op(&mut self) -> Option<u64> {
        Some(self.rng.below(self.keys))
    }

    #[inline(always)]
    fn verify(&mut self, i: u64, outcome: Self::Outcome) -> Result<(), BenchError> {
        let checked = match outcome {
            Ok(Some(checked)) => checked,
            Ok(None) => check_value(i, None),
            Err(e) => return Err(BenchError::Engine(e)),
        };
        self.verified(i, checked)
    }

    fn start_measuring(&mut self) {
        self.lookups = 0;
    }

    fn counts(&self) -> u64 {
        self.lookups
    }
}

impl AsyncOps for LookupOps<Tree> {
    async fn execute(&mut self, i: u64) -> Self::Outcome {
        self.store.get_with_async(&key(i), |v| check_value(i, Some(v))).await
    }
}

/// The measured window, as the controlling thread saw it.
struct Window<T> {
    warmup_seconds: f64,
    seconds: f64,
    cpu: CpuTime,
    /// `sample()` when measuring began and when it ended.
    before: T,
    after: T,
    /// What the device did meanwhile, if it was given and its counters could be read.
    disk: Option<(String, DiskCounters)>,
}

/// Waits out the warm-up (unless the run stops first), samples (and reads the device's
/// counters), measures, samples again, and stops the run.
fn window<T>(phase: &AtomicU8, params: &LookupParams, sample: impl Fn() -> T) -> Window<T> {
    let (warmup, measure) = (params.warmup, params.measure);
    let warmup_start = Instant::now();
    wait(phase, warmup);
    let warmup_seconds = warmup_start.elapsed().as_secs_f64();
    let disk_before = params.disk.as_ref().and_then(Disk::counters);
    let before = sample();
    let cpu_before = CpuTime::now();
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
    let start = Instant::now();
    wait(phase, measure);
    phase.store(STOP, Ordering::Release);
    let seconds = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu_before);
    let after = sample();
    let disk = params.disk.as_ref().and_then(|disk| {
        let now = disk.counters()?;
        Some((disk.name.clone(), now.since(disk_before?)))
    });
    Window { warmup_seconds, seconds, cpu, before, after, disk }
}

/// Runs uniform random lookups of keys `0..keys` from `threads` threads: `warmup`, then
/// `measure` counted. Stops at the first wrong or missing value or store error and returns
/// it. A panicking thread's panic is passed on.
pub fn run_lookups<S: KvStore + ?Sized>(
    store: &S,
    params: &LookupParams,
) -> Result<LookupRun, BenchError> {
    assert!(params.keys > 0 && params.threads > 0);
    let phase = AtomicU8::new(WARMUP);
    let make = |t: u64| LookupOps::new(store, params.keys, Rng::stream(params.seed, t));
    let (w, tally) = runner::on_threads(params.threads, &make, Pacing::Closed, &phase, || {
        window(&phase, params, || (store.io_counters(), store.tier_counters()))
    })?;
    let io = w.before.0.zip(w.after.0).map(|(before, after)| after.since(before));
    let tier = w.before.1.zip(w.after.1).map(|(before, after)| after.since(before));
    Ok(LookupRun {
        lookups: tally.counts,
        seconds: w.seconds,
        warmup_seconds: w.warmup_seconds,
        latency_ns: tally.latency_ns,
        io,
        disk: w.disk,
        cpu: w.cpu,
        tier,
    })
}

/// Shares of the workers' time, in percent of their total.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeShares {
    pub tree_pct: f64,
    pub evict_pct: f64,
    pub submit_pct: f64,
    pub complete_pct: f64,
    pub idle_pct: f64,
}

fn shares(before: WorkerTimes, after: WorkerTimes) -> TimeShares {
    let t = after.since(before);
    let total = t.total().max(1) as f64;
    let pct = |x: u64| 100.0 * x as f64 / total;
    TimeShares {
        tree_pct: pct(t.task),
        evict_pct: pct(t.evict),
        submit_pct: pct(t.submit),
        complete_pct: pct(t.complete),
        idle_pct: pct(t.idle),
    }
}

/// Runs `tasks` lookup tasks per worker of `db` on `tree` (keys `0..params.keys`, stream `t`
/// from `params.seed`; `params.threads` is not used): the warm-up, then the measured time,
/// every value verified. Returns the run and the workers' time shares.
pub fn run_task_lookups(
    db: &Db,
    tree: &Tree,
    tasks: usize,
    params: &LookupParams,
) -> Result<(LookupRun, TimeShares), BenchError> {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let count = (db.worker_count() * tasks) as u64;
    let (keys, seed) = (params.keys, params.seed);
    let streams =
        (0..count).map(|index| LookupOps::new(tree.clone(), keys, Rng::stream(seed, index)));
    let running = runner::spawn_tasks(db, streams, Pacing::Closed, &phase)?;
    let stats = db.worker_stats();
    let sample = || (pool_io(db), WorkerTimes::of(&stats), tier_counters_of(db));
    let w = window(&phase, params, sample);
    let tally = running.finish()?;
    let run = LookupRun {
        lookups: tally.counts,
        seconds: w.seconds,
        warmup_seconds: w.warmup_seconds,
        latency_ns: tally.latency_ns,
        io: Some(w.after.0.since(w.before.0)),
        disk: w.disk,
        cpu: w.cpu,
        tier: w.before.2.zip(w.after.2).map(|(before, after)| after.since(before)),
    };
    Ok((run, shares(w.before.1, w.after.1)))
}

fn pool_io(db: &Db) -> IoCounters {
    let stats = db.pool().stats();
    IoCounters { reads: stats.reads, writes: stats.writes, evictions: stats.evictions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::mem::MemStore;

    fn loaded(keys: u64) -> MemStore {
        let store = MemStore::default();
        load(&store, keys, &mut Progress::hidden(keys)).unwrap();
        store
    }

    fn params(keys: u64, threads: usize) -> LookupParams {
        LookupParams {
            keys,
            threads,
            seed: 9,
            warmup: Duration::from_millis(20),
            measure: Duration::from_millis(150),
            disk: None,
        }
    }

    #[test]
    fn load_puts_every_key_with_its_value() {
        let store = loaded(1_000);
        assert_eq!(store.len(), 1_000);
        let mut buf = Vec::new();
        for i in [0, 1, 500, 999] {
            assert!(store.get_into(&key(i), &mut buf).unwrap());
            assert_eq!(buf, value(i));
        }
        assert!(spot_check(&store, 1_000).unwrap());
        assert!(!spot_check(&store, 999).unwrap(), "key 999 is beyond a 999-key set");
        assert!(!spot_check(&store, 1_001).unwrap(), "key 1000 is missing");
    }

    #[test]
    fn lookups_are_counted_timed_and_verified() {
        let store = loaded(2_000);
        let run = run_lookups(&store, &params(2_000, 2)).unwrap();
        assert!(run.lookups > 100, "{} lookups", run.lookups);
        assert_eq!(run.latency_ns.len(), run.lookups);
        assert!(run.seconds >= 0.15 && run.seconds < 5.0, "{}", run.seconds);
        assert!(run.warmup_seconds >= 0.02);
        assert!(run.lookups_per_s() > 0.0);
        let reads = run.reads_per_lookup().unwrap();
        assert!(reads > 0.05 && reads < 0.15, "the store counts a read per 10 gets: {reads}");
    }

    #[test]
    fn a_wrong_value_fails_the_run() {
        let mut store = loaded(4);
        store.corrupt_key = Some(key(2).to_vec());
        match run_lookups(&store, &params(4, 2)) {
            Err(BenchError::Verify {
                key: 2,
                mismatch: ValueMismatch::Corrupt { offset: 100 },
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_key_fails_the_run_quickly() {
        let store = loaded(4);
        store.remove(&key(3));
        let mut p = params(4, 1);
        p.measure = Duration::from_secs(30);
        let start = Instant::now();
        let result = run_lookups(&store, &p);
        assert!(matches!(
            result,
            Err(BenchError::Verify { key: 3, mismatch: ValueMismatch::Missing })
        ));
        assert!(start.elapsed() < Duration::from_secs(5), "the failure stops the run");
    }

    #[test]
    fn a_store_error_fails_the_run() {
        let mut store = loaded(4);
        store.failing_key = Some(key(1).to_vec());
        let result = run_lookups(&store, &params(4, 3));
        assert!(
            matches!(&result, Err(BenchError::Store(e)) if e.to_string() == "injected failure")
        );
    }

    fn report(source: DataSource) -> LookupReport {
        let mut latency_ns = runner::new_histogram();
        for v in [2_000, 3_000, 4_000, 50_000] {
            latency_ns.record(v).unwrap();
        }
        LookupReport {
            config: LookupConfig { keys: 3_200_000, ..LookupConfig::default() },
            store: "ferrite",
            source,
            data_pages: 163_840,
            pool_pages: 16_384,
            run: LookupRun {
                lookups: 4_000_000,
                seconds: 20.0,
                warmup_seconds: 5.0,
                latency_ns,
                io: Some(IoCounters { reads: 3_000_000, writes: 0, evictions: 2_999_000 }),
                disk: Some((
                    "vda".to_owned(),
                    DiskCounters {
                        reads: 3_000_000,
                        read_bytes: 3_000_000 * 4096,
                        ..DiskCounters::default()
                    },
                )),
                cpu: CpuTime { user_s: 6.0, system_s: 2.0 },
                tier: Some(TierCounters {
                    lookups: 3_000_000,
                    hits: 1_000_000,
                    inserts: 100_000,
                    evictions: 50_000,
                    bytes_written: 100_000 * 4096,
                    windows: 40,
                    windows_over: 1,
                    ..TierCounters::default()
                }),
            },
            tasks: Some(TaskFigures {
                engine: "io_uring",
                device_iops: 250_000.0,
                device_before: 240_000.0,
                device_after: 260_000.0,
                shares: TimeShares {
                    tree_pct: 40.0,
                    evict_pct: 10.0,
                    submit_pct: 20.0,
                    complete_pct: 10.0,
                    idle_pct: 20.0,
                },
            }),
            dir: DirFate::Removed,
        }
    }

    #[test]
    fn result_line_has_the_contracted_fields() {
        let line = report(DataSource::Loaded { seconds: 41.234 }).result_line().to_string();
        assert!(
            line.starts_with("result lookups_per_s=200000 keys=3200000 pool_mib=64 "),
            "{line}"
        );
        for field in [
            "threads=1",
            "seconds=20.00",
            "lookups=4000000",
            "data_mib=640.0",
            "data_pool_ratio=10.00",
            "reads_per_lookup=0.750",
            "cpu_us_per_lookup=2.00",
            "device_iops=250000",
            "ratio=0.800",
            "mode=tasks",
            "engine=io_uring",
            "tasks=64",
            "tree_pct=40.0",
            "idle_pct=20.0",
            // HdrHistogram at 2 significant digits: 3000 ns lies in the bucket 2992..=3007,
            // 50000 ns in 49920..=50175; a percentile is its bucket's highest value.
            "p50_us=3.01",
            "p99_us=50.17",
            "max_us=50.2",
            "load_s=41.23",
            "reused=0",
            "seed=1",
            "direct_io=1",
            "store=ferrite",
            "dev_reads_per_op=0.750",
            "dev_read_kib_per_read=4.00",
            "dev_read_kib_per_op=3.000",
            "tier_hits=1000000",
            "tier_misses=2000000",
            "obp=0.050",
            "tier_write_mib=390.6",
            "obp_windows=40",
            "obp_windows_over=1",
        ] {
            assert!(line.split(' ').any(|f| f == field), "{field} missing from {line}");
        }
        assert!(ResultLine::parse(&line).is_some());
        let reused = report(DataSource::Reused).result_line();
        assert_eq!(reused.get("load_s"), Some("0.00"));
        assert_eq!(reused.get("reused"), Some("1"));
    }

    #[test]
    fn summary_names_the_numbers() {
        let text = report(DataSource::Loaded { seconds: 40.0 }).summary();
        for needle in [
            "3,200,000 keys",
            "loaded and written back in 40.0 s (80.0k keys/s)",
            "640.0 MiB (163,840 pages of 4 KiB), 10.00 x the pool",
            "64.0 MiB (16,384 pages), O_DIRECT",
            "200,000 lookups/s",
            "p50 3.0 us",
            "0.750 per lookup (while measuring: 3,000,000 reads, 0 writes, 2,999,000 evictions)",
            "removed",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from\n{text}");
        }
        assert!(text.ends_with('\n') && !text.contains("result "));
        assert!(text.contains("vda: 4.0 KiB per device read, 3.00 KiB read per lookup"), "{text}");
        assert!(!text.contains("warning"), "one block per read is no warning:\n{text}");
        assert!(report(DataSource::Reused).summary().contains("reused from an earlier --keep run"));
    }

    /// Lookups that make the device read more than two blocks a read are flagged, as the
    /// comparison runner flags any store's.
    #[test]
    fn summary_warns_when_lookups_read_large_blocks() {
        let mut r = report(DataSource::Reused);
        r.run.disk = Some((
            "vda".to_owned(),
            DiskCounters {
                reads: 3_000_000,
                read_bytes: 3_000_000 * 40 * 1024,
                ..Default::default()
            },
        ));
        let text = r.summary();
        assert!(text.contains("40.0 KiB per device read"), "{text}");
        assert!(
            text.lines().last().unwrap().contains("warning: ferrite read 40.0 KiB per device read"),
            "{text}"
        );
        assert_eq!(r.result_line().get("dev_read_kib_per_read"), Some("40.00"));
        r.run.disk = None;
        assert!(r.result_line().get("dev_read_kib_per_read").is_none(), "no counters, no field");
        assert!(!r.summary().contains("read size"));
    }

    #[test]
    fn config_validation_and_warmup() {
        let mut c = LookupConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(c.warmup_seconds(), 5.0);
        c.seconds = 1.0;
        assert_eq!(c.warmup_seconds(), 0.25);
        for bad in [
            LookupConfig { keys: 0, ..LookupConfig::default() },
            LookupConfig { threads: 0, ..LookupConfig::default() },
            LookupConfig { seconds: 0.0, ..LookupConfig::default() },
            LookupConfig { seconds: f64::NAN, ..LookupConfig::default() },
            LookupConfig { pool_mib: 0, ..LookupConfig::default() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn default_data_is_about_ten_times_the_default_pool_with_full_leaves() {
        let entry_bytes = (KEY_LEN + VALUE_LEN + 10) as f64;
        let data_bytes = DEFAULT_KEYS as f64 * entry_bytes / 0.97;
        let ratio = data_bytes / (DEFAULT_POOL_MIB << 20) as f64;
        assert!((8.0..12.0).contains(&ratio), "{ratio}");
    }
}

#[cfg(test)]
mod task_tests {
    use super::*;

    /// A whole run as tasks on Ferrite's workers: the ceiling measured around it, every
    /// lookup counted once, with its latency, and the directory removed.
    #[test]
    fn task_lookups_run_on_the_workers_and_are_counted_once() {
        let dir = tempfile::TempDir::new().unwrap();
        let config = LookupConfig {
            dir: dir.path().join("db"),
            keys: 20_000,
            pool_mib: 1,
            seconds: 0.3,
            workers: 2,
            tasks: 4,
            direct_io: false,
            ..LookupConfig::default()
        };
        let report = run(&config, &mut Progress::hidden(config.keys)).unwrap();
        let tasks = report.tasks.expect("a run as tasks");
        assert!(tasks.device_iops > 0.0);
        assert!(report.run.lookups > 0);
        assert_eq!(report.run.latency_ns.len(), report.run.lookups);
        assert!(report.run.reads_per_lookup().unwrap() > 0.0, "the data is ~3 times the pool");
        let line = report.result_line();
        assert_eq!((line.get("mode"), line.get("tasks")), (Some("tasks"), Some("4")));
        assert!(!config.dir.exists());
    }

    #[test]
    fn shares_add_up_to_a_hundred() {
        let before = WorkerTimes::default();
        let after = WorkerTimes { task: 50, evict: 10, submit: 20, complete: 10, idle: 10 };
        let s = shares(before, after);
        assert_eq!(s.tree_pct, 50.0);
        assert_eq!(s.idle_pct, 10.0);
        let total = s.tree_pct + s.evict_pct + s.submit_pct + s.complete_pct + s.idle_pct;
        assert!((total - 100.0).abs() < 1e-9);
    }
}
