//! `ferrite bench tpcc` on any store (`--store ferrite|rocksdb|wiredtiger`): the data
//! directory (loaded once, reused with `--keep`), the terminals, the measured window, and the
//! consistency checks after the load and after the run (the report: `report.rs`). Written
//! once over `engine::Engine`: what differs between Ferrite and the peers (where terminals
//! run, what the store counts) is behind it.
//!
//! **Terminals.** Each warehouse has `terminals_per_warehouse` terminals (10 by default: one
//! per district, as the specification's), each running one transaction after the other,
//! closed loop. On Ferrite each is a task placed with `Db::spawn_on`: with affinity (the
//! default) every terminal of a warehouse runs on worker `(w - 1) mod workers`, so that its
//! transactions, which mostly touch that warehouse, do not conflict with those of other
//! workers; without it the terminals of a warehouse are spread over the workers. On a peer,
//! whose calls block, each terminal is a thread of its own (`peer.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite::Durability;

use super::check::{check, Violation, CHECKED};
use super::engine::{Counters, Engine, FerriteEngine, Running};
use super::load::{data_set, load, next_run};
use super::random::NuRandC;
use super::report::{record_outcome, Tally, TpccReport};
use super::schema::{DataSet, Scale, DISTRICTS};
use super::store::{TpccStore, TxnError};
use super::txns::{execute, Clock, Terminal};
use crate::error::BenchError;
use crate::gen::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::diskcap::{DiskCap, IopsCap};
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::phase::{wait, MEASURE, STOP, WARMUP};
use crate::measure::Progress;
use crate::report::{duration, thousands, ResultLine};
use crate::runner::now_ns;
use crate::stores::StoreKind;
use crate::workloads::run::{append_json, remove_bench_dir, MARKER_FILE};

/// The most warehouses a run takes (about 1 TB of data at the specification's scale).
pub const MAX_WAREHOUSES: u16 = 10_000;

/// What `ferrite bench tpcc` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TpccConfig {
    /// Ferrite, RocksDB or WiredTiger (the peers need the `peers` feature; LMDB has no
    /// transactions here).
    pub store: StoreKind,
    pub dir: PathBuf,
    pub warehouses: u16,
    /// The specification's cardinalities, or the reduced ones of tests (not TPC-C).
    pub reduced: bool,
    /// Ferrite's pool, RocksDB's block cache, WiredTiger's `cache_size`.
    pub cache_mib: u64,
    pub seconds: f64,
    /// Ferrite's workers (the peers run each terminal on a thread of its own).
    pub workers: usize,
    /// Ferrite's `Options::checkpoint_log_bytes` (`None`: the engine's default).
    pub checkpoint_bytes: Option<u64>,
    pub terminals_per_warehouse: u32,
    /// The terminals of a warehouse on one worker (Ferrite).
    pub affinity: bool,
    /// Keying and think times per the specification (clause 5.2.5); zero otherwise.
    pub spec_times: bool,
    /// Every commit durable before it returns (Ferrite: `Durability::Sync`, group commit;
    /// the peers: their log synced per commit).
    pub sync: bool,
    /// Paper parity: no log. Ferrite's log cannot be turned off: commits are not synced;
    /// the peers' logs are off (RocksDB `disableWAL`, WiredTiger `log=(enabled=false)`).
    pub no_log: bool,
    pub seed: u64,
    pub keep: bool,
    pub direct_io: bool,
    pub json: Option<PathBuf>,
    /// Only check the consistency of the data set kept in `dir` (after a crash, say): no
    /// load, no run, nothing removed (`check_kept`).
    pub check_only: bool,
    /// Requests per second the disk under `dir` takes from the run, from the warm-up to the
    /// end of the window, as a cloud volume's cap (`DiskCap`); the load and the checks run
    /// uncapped. Every store runs in this process, so each is held alike.
    pub disk_cap: IopsCap,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            store: StoreKind::Ferrite,
            dir: PathBuf::from("ferrite-data/bench-tpcc"),
            warehouses: 1,
            reduced: false,
            cache_mib: 1024,
            seconds: 30.0,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            checkpoint_bytes: None,
            terminals_per_warehouse: 10,
            affinity: true,
            spec_times: false,
            sync: false,
            no_log: false,
            seed: 42,
            keep: false,
            direct_io: true,
            json: None,
            check_only: false,
            disk_cap: IopsCap::default(),
        }
    }
}

#[cfg(test)]
impl TpccConfig {
    /// The tests' short run in `dir`: the reduced scale, one warehouse, a 16 MiB pool, one
    /// worker with two terminals, 0.3 s, buffered I/O (tmpfs has no `O_DIRECT`).
    pub(crate) fn short_test_run(dir: std::path::PathBuf) -> TpccConfig {
        TpccConfig {
            dir,
            reduced: true,
            cache_mib: 16,
            seconds: 0.3,
            workers: 1,
            terminals_per_warehouse: 2,
            direct_io: false,
            ..TpccConfig::default()
        }
    }
}

impl TpccConfig {
    pub fn scale(&self) -> Scale {
        match self.reduced {
            true => Scale::reduced(self.warehouses),
            false => Scale::spec(self.warehouses),
        }
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64((self.seconds / 4.0).min(5.0))
    }

    pub fn terminals(&self) -> u32 {
        u32::from(self.warehouses) * self.terminals_per_warehouse
    }

    /// What each commit asks for.
    pub fn durability(&self) -> Durability {
        match self.sync {
            true => Durability::Sync,
            false => Durability::None,
        }
    }

    /// The durability in words, for the summary.
    pub fn durability_text(&self) -> &'static str {
        if self.store != StoreKind::Ferrite {
            return self.peer_durability_text();
        }
        match (self.sync, self.no_log) {
            (true, _) => {
                "durable: each commit returns once its log record is synced (group commit)"
            }
            (false, true) => {
                "--no-log: Ferrite cannot turn its log off; commits are logged but not synced \
                 (Durability::None), a crash loses the last commits, never part of one"
            }
            (false, false) => {
                "commits logged but not synced (Durability::None): a crash loses the last \
                 commits, never part of one"
            }
        }
    }

    /// `durability_text` of the peers: their logs as `peer::peer_config` sets them.
    fn peer_durability_text(&self) -> &'static str {
        match (self.sync, self.no_log) {
            (true, _) => {
                "durable: each commit returns once the log is synced (RocksDB: WAL on, \
                 sync=true; WiredTiger: log on, transaction_sync=(enabled=true,method=fsync))"
            }
            (false, true) => {
                "--no-log: the log off (RocksDB disableWAL=true; WiredTiger \
                 log=(enabled=false)): a crash loses every commit since the last flush or \
                 checkpoint"
            }
            (false, false) => {
                "commits logged but not synced (RocksDB: WAL on, sync=false; WiredTiger: log \
                 on, transaction_sync off): a crash loses the last commits, never part of one"
            }
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match self.store {
            StoreKind::Ferrite | StoreKind::RocksDb | StoreKind::WiredTiger => {}
            StoreKind::Lmdb => {
                return Err("tpcc runs on ferrite, rocksdb and wiredtiger: lmdb has no \
                            transactions adapter"
                    .into())
            }
        }
        if !self.store.built_in() {
            return Err(format!(
                "--store {}: this build has no peers (build with --features peers)",
                self.store.name()
            ));
        }
        if self.warehouses == 0 || self.warehouses > MAX_WAREHOUSES {
            return Err(format!("--warehouses must be 1..={MAX_WAREHOUSES}"));
        }
        if self.store != StoreKind::Ferrite && self.checkpoint_bytes.is_some() {
            return Err("--checkpoint-mib sets Ferrite's checkpoints only: the peers keep \
                        their own settings (printed with their options)"
                .into());
        }
        if self.sync && self.no_log {
            return Err("--sync and --no-log contradict each other".into());
        }
        if self.check_only && self.disk_cap.is_set() {
            return Err(
                "--disk-read-iops and --disk-write-iops cap a run; --check runs none".into()
            );
        }
        if self.workers == 0 || self.terminals_per_warehouse == 0 {
            return Err("a run needs at least one worker and one terminal per warehouse".into());
        }
        if self.seconds.is_nan() || self.seconds <= 0.0 {
            return Err("--seconds must be positive".into());
        }
        Ok(())
    }
}

/// The record beside a loaded data set: a later run with `--keep` reuses the set if it is
/// the same.
const META_FILE: &str = "ferrite-bench-meta";

fn meta_text(config: &TpccConfig) -> String {
    let s = config.scale();
    format!(
        "format=tpcc-1 store={} warehouses={} items={} customers={} new_orders={}\n",
        config.store.name(),
        s.warehouses,
        s.items,
        s.customers,
        s.new_orders
    )
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

fn store_error(e: TxnError) -> BenchError {
    BenchError::Content(format!("tpcc: {e}"))
}

/// Runs the benchmark on `config.store`; `show`: progress on stderr.
pub fn run(config: &TpccConfig, show: bool) -> Result<TpccReport, BenchError> {
    config.validate().map_err(BenchError::Config)?;
    let dir = &config.dir;
    let reuse = reusable(dir, config);
    if !reuse && dir.exists() {
        remove_bench_dir(dir)?;
    }
    std::fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let report = match config.store {
        StoreKind::Ferrite => run_on(FerriteEngine::open(config)?, config, reuse, show)?,
        #[cfg(feature = "peers")]
        StoreKind::RocksDb | StoreKind::WiredTiger => {
            run_on(super::peer::PeerEngine::open(config)?, config, reuse, show)?
        }
        other => unreachable!("validate refuses {}", other.name()),
    };
    if let Some(path) = &config.json {
        append_json(path, &report.result_line().to_json())?;
    }
    if !config.keep {
        remove_bench_dir(dir)?;
    }
    Ok(report)
}

/// What `check_kept` found in a kept data set.
#[derive(Debug)]
pub struct KeptCheck {
    pub store_name: &'static str,
    pub data_set: DataSet,
    pub violations: Vec<Violation>,
    /// What opening the store did first (Ferrite: its recovery), in words.
    pub recovery: Option<String>,
    pub open_seconds: f64,
    pub check_seconds: f64,
}

impl KeptCheck {
    pub fn consistent(&self) -> bool {
        self.violations.is_empty()
    }

    /// What was checked and found, for a person.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "tpcc check on {}: {} warehouse{} ({} scale), opened in {}{}\n",
            self.store_name,
            self.data_set.scale.warehouses,
            if self.data_set.scale.warehouses == 1 { "" } else { "s" },
            if self.data_set.scale.is_spec() { "the specification's" } else { "a reduced" },
            duration(self.open_seconds),
            self.recovery.as_deref().map(|r| format!(" ({r})")).unwrap_or_default(),
        );
        let conditions: Vec<String> = CHECKED.iter().map(u8::to_string).collect();
        let checked = format!(
            "conditions {} of clause 3.3.2 and the indexes, in {}",
            conditions.join(", "),
            duration(self.check_seconds)
        );
        match self.violations.is_empty() {
            true => text.push_str(&format!("consistency: ok ({checked})\n")),
            false => {
                text.push_str(&format!(
                    "consistency: FAILED, {} violations ({checked})\n",
                    self.violations.len()
                ));
                for v in self.violations.iter().take(20) {
                    text.push_str(&format!("  {v}\n"));
                }
                if self.violations.len() > 20 {
                    text.push_str(&format!("  ... and {} more\n", self.violations.len() - 20));
                }
            }
        }
        text
    }

    /// `result store=S workload=tpcc-check warehouses=W consistency=ok|failed violations=N
    /// scale=spec|reduced open_seconds=X check_seconds=X`.
    pub fn result_line(&self) -> ResultLine {
        ResultLine::new()
            .word("store", self.store_name)
            .word("workload", "tpcc-check")
            .int("warehouses", u64::from(self.data_set.scale.warehouses))
            .word("consistency", if self.consistent() { "ok" } else { "failed" })
            .int("violations", self.violations.len() as u64)
            .word("scale", if self.data_set.scale.is_spec() { "spec" } else { "reduced" })
            .real("open_seconds", self.open_seconds, 2)
            .real("check_seconds", self.check_seconds, 2)
    }
}

/// Checks the consistency of the data set kept in `config.dir` and runs nothing: the way
/// to look at a database after a crash. Opening the store recovers it first (Ferrite
/// replays its log). The directory must hold a finished load of the same warehouses, scale
/// and store; it stays as it is.
pub fn check_kept(config: &TpccConfig, show: bool) -> Result<KeptCheck, BenchError> {
    config.validate().map_err(BenchError::Config)?;
    if !reusable(&config.dir, config) {
        return Err(BenchError::Config(format!(
            "{} holds no finished TPC-C load of {} warehouse{} at this scale on {} (made by \
             ferrite bench tpcc --keep with the same --warehouses, --reduced-scale and --store)",
            config.dir.display(),
            config.warehouses,
            if config.warehouses == 1 { "" } else { "s" },
            config.store.name()
        )));
    }
    let start = Instant::now();
    match config.store {
        StoreKind::Ferrite => check_on(FerriteEngine::open(config)?, start, show),
        #[cfg(feature = "peers")]
        StoreKind::RocksDb | StoreKind::WiredTiger => {
            check_on(super::peer::PeerEngine::open(config)?, start, show)
        }
        other => unreachable!("validate refuses {}", other.name()),
    }
}

fn check_on<E: Engine>(engine: E, start: Instant, show: bool) -> Result<KeptCheck, BenchError> {
    let open_seconds = start.elapsed().as_secs_f64();
    let store = engine.store();
    let data_set = data_set(store)
        .map_err(store_error)?
        .ok_or_else(|| BenchError::Content("tpcc: the kept data set has no load record".into()))?;
    if show {
        eprintln!("checking the consistency of the kept data set");
    }
    let start = Instant::now();
    let violations = check(store, &data_set.scale).map_err(store_error)?;
    Ok(KeptCheck {
        store_name: store.name(),
        data_set,
        violations,
        recovery: engine.recovery(),
        open_seconds,
        check_seconds: start.elapsed().as_secs_f64(),
    })
}

/// Loads (or reuses) the data set on `engine`, checks it, measures, checks again; the
/// engine is closed when this returns.
fn run_on<E: Engine>(
    engine: E,
    config: &TpccConfig,
    reuse: bool,
    show: bool,
) -> Result<TpccReport, BenchError> {
    let dir = &config.dir;
    // (After the open: Ferrite opens only an empty directory or its own.)
    std::fs::write(dir.join(MARKER_FILE), "made by `ferrite bench`, which removes it\n")
        .map_err(io_error(format!("marking {}", dir.display())))?;
    let store = engine.store();
    let (data_set, load_seconds, load_violations) = match reuse {
        true => {
            let set = data_set(store).map_err(store_error)?.ok_or_else(|| {
                BenchError::Config(format!("{} holds no finished TPC-C load", dir.display()))
            })?;
            (set, None, None)
        }
        false => {
            let _ = std::fs::remove_file(dir.join(META_FILE));
            let scale = config.scale();
            let mut progress = match show {
                true => Progress::stderr("loading tpcc", "districts", scale.districts()),
                false => Progress::hidden(scale.districts()),
            };
            let start = Instant::now();
            // A batch's operations must fit a quarter of the pool.
            let batch_rows = ((config.cache_mib << 20) / 4096 / 4).clamp(1, 20_000) as usize;
            let set = load(store, scale, config.seed, Clock::Wall.now(), batch_rows, &mut progress)
                .map_err(store_error)?;
            engine.settle()?;
            let load_seconds = start.elapsed().as_secs_f64();
            if show {
                eprintln!("checking the consistency of the load");
            }
            let violations = check(store, &set.scale).map_err(store_error)?;
            if violations.is_empty() {
                write_durably(dir, META_FILE, &meta_text(config))
                    .map_err(io_error("writing the data set's record".into()))?;
            }
            (set, Some(load_seconds), Some(violations))
        }
    };
    let run_number = next_run(store).map_err(store_error)?;
    // The disk's cap holds from the warm-up to the end of the window.
    let cap = match config.disk_cap.is_set() {
        true => Some(DiskCap::enter(dir, config.disk_cap).map_err(BenchError::Config)?),
        false => None,
    };
    let measured = measure(&engine, config, &data_set, run_number, show);
    let disk_cap = cap.as_ref().map(DiskCap::describe);
    // (Left before the check after the run, which reads at the disk's own pace.)
    drop(cap);
    let measured = measured?;
    if show {
        eprintln!("checking the consistency after the run");
    }
    let run_violations = check(store, &data_set.scale).map_err(store_error)?;
    let disk = measured.disk_name.zip(measured.disk);
    let (before, after) = (measured.before, measured.after);
    let pool = before.pool.zip(after.pool);
    let store_stats = before.store.as_ref().zip(after.store.as_ref()).map(|(b, a)| a.since(b));
    Ok(TpccReport {
        config: config.clone(),
        data_set,
        isolation: store.isolation(),
        reads_together: store.reads_together(),
        isolation_name: store.isolation_name(),
        store_name: store.name(),
        store_description: engine.describe(),
        load_seconds,
        load_violations,
        run_violations,
        tally: measured.tally,
        seconds: measured.seconds,
        cpu: measured.cpu,
        pool_reads: pool.map(|((r0, _), (r1, _))| r1 - r0),
        reads_by_table: reads_since(&before.reads_by_tree, &after.reads_by_tree),
        resident_by_table: (measured.census.iter())
            .map(|(name, pages, dirty)| {
                (name.strip_prefix("tpcc.").unwrap_or(name).to_owned(), *pages, *dirty)
            })
            .collect(),
        pool_writes: pool.map(|((_, w0), (_, w1))| w1 - w0),
        log: before.log.zip(after.log).map(|(b, a)| a.since(b)),
        disk,
        store_stats,
        workers: before.workers.zip(after.workers).map(|(b, a)| a.since(b)),
        worker_task_shares: after
            .task_ns
            .iter()
            .zip(&before.task_ns)
            .map(|(a, b)| a.saturating_sub(*b) as f64 / (measured.seconds * 1e9))
            .collect(),
        worker_count: engine.workers(),
        disk_cap,
    })
}

struct Measured {
    tally: Tally,
    seconds: f64,
    cpu: CpuTime,
    disk_name: Option<String>,
    disk: Option<DiskCounters>,
    /// The store's own counters at the window's start and end.
    before: Counters,
    /// The cache's pages per tree at the end of the window (`Engine::resident_by_tree`).
    census: Vec<(String, u64, u64)>,
    after: Counters,
}

/// Runs the terminals through warm-up and the measured window.
fn measure<E: Engine>(
    engine: &E,
    config: &TpccConfig,
    data_set: &DataSet,
    run_number: u32,
    show: bool,
) -> Result<Measured, BenchError> {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let done = Arc::new(AtomicU64::new(0));
    let mut seed_rng = Rng::stream(config.seed, u64::from(run_number) << 32);
    let load_c = NuRandC {
        c_last: data_set.c_last_load,
        c_id: data_set.c_id_load,
        ol_i_id: data_set.ol_i_id_load,
    };
    let run_c = NuRandC::for_run(load_c, &mut seed_rng);
    let workers = engine.workers().unwrap_or(1);
    let mut groups: Vec<Vec<Terminal>> = vec![Vec::new(); workers];
    let mut id = 0;
    for w in 1..=config.warehouses {
        for t in 0..config.terminals_per_warehouse {
            id += 1;
            let d = (t % u32::from(DISTRICTS)) as u8 + 1;
            let terminal = Terminal::new(
                w,
                d,
                id,
                run_number,
                config.seed ^ u64::from(run_number),
                run_c,
                data_set.scale,
                Clock::Wall,
            );
            let home = usize::from(w - 1);
            let group = match config.affinity {
                true => home % workers,
                false => (home + t as usize) % workers,
            };
            groups[group].push(terminal);
        }
    }
    let mut handles: Vec<Running> = Vec::new();
    for (worker, group) in groups.into_iter().enumerate() {
        for terminal in group {
            let started = engine.start(
                worker,
                Box::pin(terminal_loop(
                    engine.store().clone(),
                    terminal,
                    data_set.scale,
                    Arc::clone(&phase),
                    Arc::clone(&done),
                    config.spec_times,
                )),
            );
            match started {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    phase.store(STOP, Ordering::Release);
                    for handle in handles {
                        let _ = handle();
                    }
                    return Err(e);
                }
            }
        }
    }
    // Warm-up, then the window.
    if show {
        eprintln!(
            "running tpcc: {} of warm-up, then {} measured",
            duration(config.warmup().as_secs_f64()),
            duration(config.seconds)
        );
    }
    wait(&phase, config.warmup());
    let disk = Disk::of(&config.dir);
    let disk_before = disk.as_ref().and_then(Disk::counters);
    let before = engine.counters();
    let cpu_before = CpuTime::now();
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
    let start = Instant::now();
    let done_before = done.load(Ordering::Relaxed);
    let window = Duration::from_secs_f64(config.seconds);
    let step = (window / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        let left = window.saturating_sub(start.elapsed());
        if left.is_zero() || phase.load(Ordering::Acquire) == STOP {
            break;
        }
        wait(&phase, left.min(step));
        if show {
            let txs = done.load(Ordering::Relaxed) - done_before;
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "tpcc: {} of {}, {} transactions, {:.0} tx/s",
                duration(secs),
                duration(config.seconds),
                thousands(txs),
                txs as f64 / secs.max(1e-9)
            );
        }
    }
    phase.store(STOP, Ordering::Release);
    let seconds = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu_before);
    let after = engine.counters();
    let disk_after = disk.as_ref().and_then(Disk::counters);
    // The pool as the window left it (before the consistency check reads every table).
    let census = engine.resident_by_tree();
    let mut tally: Tally = Default::default();
    let mut failure = None;
    for handle in handles {
        match handle() {
            Ok(part) => tally.iter_mut().zip(&part).for_each(|(t, p)| t.add(p)),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Measured {
        tally,
        seconds,
        cpu,
        disk_name: disk.map(|d| d.name),
        disk: disk_before.zip(disk_after).map(|(b, a)| a.since(b)),
        census,
        before,
        after,
    })
}

/// One terminal: transactions one after the other until the phase says stop; counts once
/// the phase is `MEASURE`.
async fn terminal_loop<S: TpccStore>(
    store: S,
    mut terminal: Terminal,
    scale: Scale,
    phase: Arc<AtomicU8>,
    done: Arc<AtomicU64>,
    spec_times: bool,
) -> Result<Tally, BenchError> {
    let mut tally: Tally = Default::default();
    let mut seen = WARMUP;
    loop {
        let current = phase.load(Ordering::Relaxed);
        if current != seen {
            if current == STOP {
                break;
            }
            tally = Default::default();
            seen = current;
        }
        let input = terminal.next_input();
        let kind = input.kind();
        if spec_times {
            pause(kind.spec_times().0, &phase).await;
            if phase.load(Ordering::Relaxed) == STOP {
                // The run ended while the terminal was keying: no transaction.
                break;
            }
        }
        let start_ns = now_ns();
        let run_start = ferrite::sched::task_run_ns();
        let outcome = match execute(&store, &input, &scale).await {
            Ok(outcome) => outcome,
            Err(e) => {
                phase.store(STOP, Ordering::Release);
                return Err(store_error(e));
            }
        };
        let run_ns = run_start.zip(ferrite::sched::task_run_ns()).map(|(a, b)| b - a);
        record_outcome(&mut tally, kind, outcome, now_ns().saturating_sub(start_ns), run_ns);
        done.fetch_add(1, Ordering::Relaxed);
        if spec_times {
            // Negative exponential, at most ten times its mean (clause 5.2.5.4).
            let mean = kind.spec_times().1;
            let unit = ((terminal.rng().next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            pause((-unit.ln() * mean).min(10.0 * mean), &phase).await;
        }
    }
    Ok(tally)
}

/// Waits `seconds` without holding the worker, or less if the run stops.
async fn pause(seconds: f64, phase: &AtomicU8) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while phase.load(Ordering::Relaxed) != STOP {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        ferrite::sched::net::sleep(left.min(Duration::from_millis(100))).await;
    }
}

/// Writes `text` to `dir/name` so that it survives a power cut once this returns: a new
/// file synced, renamed over the old one, and the directory synced. (The record of a
/// finished load, written after the load itself is durable; without the syncs a power cut
/// could keep the load and lose its record, and the kept data set could not be checked.)
/// The pages read per table between two counts of `Db::reads_by_tree` (tables by their
/// names without the `tpcc.` prefix), most first; tables read from in the window only.
pub(super) fn reads_since(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut reads: Vec<(String, u64)> = after
        .iter()
        .map(|(name, pages)| {
            let earlier = before.iter().find(|(n, _)| n == name).map_or(0, |&(_, p)| p);
            (name.strip_prefix("tpcc.").unwrap_or(name).to_owned(), pages.saturating_sub(earlier))
        })
        .filter(|&(_, pages)| pages > 0)
        .collect();
    reads.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    reads
}

fn write_durably(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = dir.join(format!("{name}.new"));
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Whether `dir` holds a data set a run with `config` would reuse.
fn reusable(dir: &Path, config: &TpccConfig) -> bool {
    std::fs::read_to_string(dir.join(META_FILE)).is_ok_and(|text| text == meta_text(config))
}
