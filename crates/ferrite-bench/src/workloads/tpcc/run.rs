//! `ferrite bench tpcc` on Ferrite: the data directory (loaded once, reused with `--keep`),
//! the terminals as tasks on Ferrite's workers, the measured window, the consistency checks
//! after the load and after the run, and the report.
//!
//! **Terminals.** Each warehouse has `terminals_per_warehouse` terminals (10 by default: one
//! per district, as the specification's), each a task running one transaction after the
//! other, closed loop. `Db::spawn` places tasks on the workers round robin, so the order of
//! the spawns decides where each terminal runs: with affinity (the default) every terminal
//! of a warehouse runs on worker `(w - 1) mod workers`, so that its transactions, which
//! mostly touch that warehouse, do not conflict with those of other workers; without it the
//! terminals of a warehouse are spread over the workers. (An empty task fills a turn of the
//! rotation where a worker has no terminal left.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite::{Db, Durability, Options};

use super::check::{check, Violation, CHECKED};
use super::load::{data_set, load, next_run};
use super::random::NuRandC;
use super::schema::{DataSet, Scale, DISTRICTS};
use super::store::{FerriteTpcc, TpccStore, TxnError};
use super::txns::{execute, Clock, Kind, Outcome, Terminal};
use crate::error::BenchError;
use crate::gen::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::phase::{wait, MEASURE, STOP, WARMUP};
use crate::measure::Progress;
use crate::report::{duration, latency, thousands, ResultLine};
use crate::runner::{new_histogram, now_ns, record, Hdr};
use crate::stores::WorkerTimes;
use crate::workloads::run::{append_json, remove_bench_dir, MARKER_FILE};

/// The most warehouses a run takes (about 1 TB of data at the specification's scale).
pub const MAX_WAREHOUSES: u16 = 10_000;

/// What `ferrite bench tpcc` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TpccConfig {
    pub dir: PathBuf,
    pub warehouses: u16,
    /// The specification's cardinalities, or the reduced ones of tests (not TPC-C).
    pub reduced: bool,
    pub cache_mib: u64,
    pub seconds: f64,
    pub workers: usize,
    pub terminals_per_warehouse: u32,
    /// The terminals of a warehouse on one worker.
    pub affinity: bool,
    /// Keying and think times per the specification (clause 5.2.5); zero otherwise.
    pub spec_times: bool,
    /// Every commit durable before it returns (`Durability::Sync`: group commit).
    pub sync: bool,
    /// Paper parity: no log. Ferrite's log cannot be turned off: commits are not synced.
    pub no_log: bool,
    pub seed: u64,
    pub keep: bool,
    pub direct_io: bool,
    pub json: Option<PathBuf>,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            dir: PathBuf::from("ferrite-data/bench-tpcc"),
            warehouses: 1,
            reduced: false,
            cache_mib: 1024,
            seconds: 30.0,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            terminals_per_warehouse: 10,
            affinity: true,
            spec_times: false,
            sync: false,
            no_log: false,
            seed: 42,
            keep: false,
            direct_io: true,
            json: None,
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

    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses == 0 || self.warehouses > MAX_WAREHOUSES {
            return Err(format!("--warehouses must be 1..={MAX_WAREHOUSES}"));
        }
        if self.sync && self.no_log {
            return Err("--sync and --no-log contradict each other".into());
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

/// Per transaction type: what the terminals counted while measuring.
#[derive(Debug, Clone)]
pub struct KindTally {
    pub committed: u64,
    pub conflicts: u64,
    /// New-Orders rolled back (their unused item).
    pub rolled_back: u64,
    /// Deliveries: districts skipped (no new order).
    pub skipped: u64,
    pub latency_ns: Hdr,
}

impl Default for KindTally {
    fn default() -> Self {
        KindTally {
            committed: 0,
            conflicts: 0,
            rolled_back: 0,
            skipped: 0,
            latency_ns: new_histogram(),
        }
    }
}

impl KindTally {
    fn add(&mut self, o: &KindTally) {
        self.committed += o.committed;
        self.conflicts += o.conflicts;
        self.rolled_back += o.rolled_back;
        self.skipped += o.skipped;
        self.latency_ns.add(&o.latency_ns).expect("same histogram bounds");
    }

    /// Transactions done: committed or rolled back.
    pub fn done(&self) -> u64 {
        self.committed + self.rolled_back
    }
}

/// The tallies of the five types, in `Kind::ALL` order.
pub type Tally = [KindTally; 5];

fn record_outcome(tally: &mut Tally, kind: Kind, outcome: Outcome, nanos: u64) {
    let t = &mut tally[kind.index()];
    match outcome.rolled_back {
        true => t.rolled_back += 1,
        false => t.committed += 1,
    }
    t.conflicts += u64::from(outcome.conflicts);
    t.skipped += u64::from(outcome.skipped);
    record(&mut t.latency_ns, nanos);
}

/// What a run measured and found.
#[derive(Debug, Clone)]
pub struct TpccReport {
    pub config: TpccConfig,
    pub data_set: DataSet,
    pub isolation: &'static str,
    pub store_name: &'static str,
    /// Seconds the load took (`None`: a kept data set reused).
    pub load_seconds: Option<f64>,
    /// Violations after the load (fresh loads only) and after the run.
    pub load_violations: Option<Vec<Violation>>,
    pub run_violations: Vec<Violation>,
    pub tally: Tally,
    pub seconds: f64,
    pub cpu: CpuTime,
    /// Pages the pool read and wrote in the window.
    pub pool_reads: u64,
    pub pool_writes: u64,
    pub disk: Option<(String, DiskCounters)>,
    pub workers: Option<WorkerTimes>,
    /// Per worker, the share of the window it spent running tasks (affinity shows here).
    pub worker_task_shares: Vec<f64>,
    pub worker_count: usize,
}

impl TpccReport {
    pub fn transactions(&self) -> u64 {
        self.tally.iter().map(KindTally::done).sum()
    }

    pub fn tx_per_s(&self) -> f64 {
        self.transactions() as f64 / self.seconds.max(1e-9)
    }

    /// New-Orders per minute (committed, as tpmC counts them).
    pub fn tpmc(&self) -> f64 {
        self.tally[Kind::NewOrder.index()].committed as f64 * 60.0 / self.seconds.max(1e-9)
    }

    pub fn consistent(&self) -> bool {
        self.run_violations.is_empty() && self.load_violations.as_ref().is_none_or(Vec::is_empty)
    }

    fn per_tx(&self, n: u64) -> f64 {
        n as f64 / self.transactions().max(1) as f64
    }

    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let c = &self.config;
        let mut s = String::new();
        let scale = self.data_set.scale;
        let _ = writeln!(
            s,
            "tpcc on {}: {} warehouse{}{}, cache {} MiB, {} terminals on {} workers (affinity \
             {}), think and keying time {}",
            self.store_name,
            c.warehouses,
            if c.warehouses == 1 { "" } else { "s" },
            if scale.is_spec() {
                String::new()
            } else {
                format!(
                    " at a REDUCED scale, NOT TPC-C ({} items, {} customers and orders per \
                     district)",
                    scale.items, scale.customers
                )
            },
            c.cache_mib,
            c.terminals(),
            self.worker_count,
            if c.affinity { "on" } else { "off" },
            if c.spec_times { "per the specification" } else { "zero" },
        );
        let _ = writeln!(s, "isolation: {}", self.isolation);
        let _ = writeln!(s, "durability: {}", c.durability_text());
        match self.load_seconds {
            Some(secs) => {
                let _ = writeln!(s, "load: {}", duration(secs));
            }
            None => {
                let _ = writeln!(s, "load: the kept data set in {}", c.dir.display());
            }
        }
        let _ = writeln!(
            s,
            "{} transactions in {}: {:.0} tx/s, {:.0} tpmC (New-Orders per minute)",
            thousands(self.transactions()),
            duration(self.seconds),
            self.tx_per_s(),
            self.tpmc()
        );
        let _ = writeln!(
            s,
            "{:<13} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}",
            "type", "done", "share", "p50", "p99", "conflicts", "rollbacks"
        );
        for kind in Kind::ALL {
            let t = &self.tally[kind.index()];
            let p = |q: f64| match t.latency_ns.is_empty() {
                true => "-".to_owned(),
                false => latency(t.latency_ns.value_at_quantile(q)),
            };
            let _ = writeln!(
                s,
                "{:<13} {:>10} {:>6.1}% {:>10} {:>10} {:>10} {:>10}",
                kind.name(),
                thousands(t.done()),
                100.0 * self.per_tx(t.done()),
                p(0.5),
                p(0.99),
                thousands(t.conflicts),
                thousands(t.rolled_back)
            );
        }
        let delivery = &self.tally[Kind::Delivery.index()];
        if delivery.skipped > 0 {
            let _ =
                writeln!(s, "deliveries skipped {} empty districts", thousands(delivery.skipped));
        }
        let _ = writeln!(
            s,
            "per transaction: {:.2} page reads and {:.2} page writes by the pool, {:.0} µs CPU \
             (process, user + system)",
            self.per_tx(self.pool_reads),
            self.per_tx(self.pool_writes),
            self.cpu.total_s() * 1e6 / self.transactions().max(1) as f64
        );
        if let Some((name, disk)) = &self.disk {
            let _ = writeln!(
                s,
                "device {name} (all its traffic, the log's included): {:.2} reads and {:.2} \
                 writes per transaction",
                self.per_tx(disk.reads),
                self.per_tx(disk.writes)
            );
        }
        if let Some(w) = self.workers.filter(|w| w.total() > 0) {
            let share = |ns: u64| 100.0 * ns as f64 / w.total() as f64;
            let _ = writeln!(
                s,
                "worker time: tasks {:.0} %, eviction {:.0} %, submitting {:.0} %, completions \
                 {:.0} %, idle {:.0} %",
                share(w.task),
                share(w.evict),
                share(w.submit),
                share(w.complete),
                share(w.idle)
            );
        }
        if !self.worker_task_shares.is_empty() {
            let shares: Vec<String> =
                self.worker_task_shares.iter().map(|s| format!("{:.0} %", 100.0 * s)).collect();
            let _ = writeln!(s, "running tasks, per worker: {}", shares.join(", "));
        }
        let conditions: Vec<String> = CHECKED.iter().map(u8::to_string).collect();
        let checked =
            format!("conditions {} of clause 3.3.2 and the indexes", conditions.join(", "));
        for (when, violations) in [
            ("after the load", self.load_violations.as_ref()),
            ("after the run", Some(&self.run_violations)),
        ] {
            match violations {
                None => {}
                Some(v) if v.is_empty() => {
                    let _ = writeln!(s, "consistency {when}: ok ({checked})");
                }
                Some(v) => {
                    let _ = writeln!(
                        s,
                        "consistency {when}: FAILED, {} violations ({checked})",
                        v.len()
                    );
                    for violation in v.iter().take(20) {
                        let _ = writeln!(s, "  {violation}");
                    }
                }
            }
        }
        s
    }

    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let mut line = ResultLine::new()
            .word("store", self.store_name)
            .word("workload", "tpcc")
            .int("warehouses", u64::from(c.warehouses))
            .real("tx_per_s", self.tx_per_s(), 0)
            .real("tpmc", self.tpmc(), 0)
            .real("reads_per_tx", self.per_tx(self.pool_reads), 2)
            .real("writes_per_tx", self.per_tx(self.pool_writes), 2)
            .word("consistency", if self.consistent() { "ok" } else { "failed" })
            .word("scale", if self.data_set.scale.is_spec() { "spec" } else { "reduced" })
            // (The name every other workload's line gives its rate: a transaction is the
            // operation here.)
            .real("ops_per_s", self.tx_per_s(), 0)
            .int("tx", self.transactions())
            .real("seconds", self.seconds, 1)
            .real("cpu_us_per_tx", self.cpu.total_s() * 1e6 / self.transactions().max(1) as f64, 1);
        if let Some((_, disk)) = &self.disk {
            line = line.real("disk_reads_per_tx", self.per_tx(disk.reads), 2).real(
                "disk_writes_per_tx",
                self.per_tx(disk.writes),
                2,
            );
        }
        for kind in Kind::ALL {
            let t = &self.tally[kind.index()];
            let us = |q: f64| match t.latency_ns.is_empty() {
                true => 0.0,
                false => t.latency_ns.value_at_quantile(q) as f64 / 1000.0,
            };
            line = line
                .int(kind.name(), t.done())
                .real(&format!("{}_p50_us", kind.name()), us(0.5), 1)
                .real(&format!("{}_p99_us", kind.name()), us(0.99), 1)
                .int(&format!("{}_conflicts", kind.name()), t.conflicts);
        }
        line.int("rollbacks", self.tally[Kind::NewOrder.index()].rolled_back)
            .word("isolation", "serializable")
            .word("durability", if c.sync { "sync" } else { "none" })
            .flag("no_log", c.no_log)
            .flag("affinity", c.affinity)
            .flag("spec_times", c.spec_times)
            .int("terminals", u64::from(c.terminals()))
            .int("workers", self.worker_count as u64)
            .int("cache_mib", c.cache_mib)
            .int("seed", c.seed)
    }
}

/// The record beside a loaded data set: a later run with `--keep` reuses the set if it is
/// the same.
const META_FILE: &str = "ferrite-bench-meta";

fn meta_text(config: &TpccConfig) -> String {
    let s = config.scale();
    format!(
        "format=tpcc-1 store=ferrite warehouses={} items={} customers={} new_orders={}\n",
        s.warehouses, s.items, s.customers, s.new_orders
    )
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

fn store_error(e: TxnError) -> BenchError {
    BenchError::Content(format!("tpcc: {e}"))
}

/// Runs the benchmark on Ferrite; `show`: progress on stderr.
pub fn run(config: &TpccConfig, show: bool) -> Result<TpccReport, BenchError> {
    config.validate().map_err(BenchError::Config)?;
    let dir = &config.dir;
    let reuse = reusable(dir, config);
    if !reuse && dir.exists() {
        remove_bench_dir(dir)?;
    }
    std::fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let terminals_per_worker = config.terminals().div_ceil(config.workers as u32) as usize;
    let options = Options {
        pool_bytes: config.cache_mib << 20,
        direct_io: config.direct_io,
        create_if_missing: true,
        workers: config.workers,
        io_depth: terminals_per_worker.clamp(2, 4096),
        durability: Durability::None,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir, options)?);
    std::fs::write(dir.join(MARKER_FILE), "made by `ferrite bench`, which removes it\n")
        .map_err(io_error(format!("marking {}", dir.display())))?;
    let durability = config.sync.then_some(Durability::Sync);
    let store = FerriteTpcc::new(Arc::clone(&db), durability).map_err(store_error)?;
    let (data_set, load_seconds, load_violations) = match reuse {
        true => {
            let set = data_set(&store).map_err(store_error)?.ok_or_else(|| {
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
            let set =
                load(&store, scale, config.seed, Clock::Wall.now(), batch_rows, &mut progress)
                    .map_err(store_error)?;
            db.flush()?;
            let load_seconds = start.elapsed().as_secs_f64();
            if show {
                eprintln!("checking the consistency of the load");
            }
            let violations = check(&store, &set.scale).map_err(store_error)?;
            if violations.is_empty() {
                std::fs::write(dir.join(META_FILE), meta_text(config))
                    .map_err(io_error("writing the data set's record".into()))?;
            }
            (set, Some(load_seconds), Some(violations))
        }
    };
    let run_number = next_run(&store).map_err(store_error)?;
    let measured = measure(&store, config, &data_set, run_number, show)?;
    if show {
        eprintln!("checking the consistency after the run");
    }
    let run_violations = check(&store, &data_set.scale).map_err(store_error)?;
    let disk = measured.disk_name.zip(measured.disk);
    let report = TpccReport {
        config: config.clone(),
        data_set,
        isolation: store.isolation(),
        store_name: store.name(),
        load_seconds,
        load_violations,
        run_violations,
        tally: measured.tally,
        seconds: measured.seconds,
        cpu: measured.cpu,
        pool_reads: measured.pool_reads,
        pool_writes: measured.pool_writes,
        disk,
        workers: measured.workers,
        worker_task_shares: measured.worker_task_shares,
        worker_count: db.worker_count(),
    };
    drop(store);
    drop(db);
    if let Some(path) = &config.json {
        append_json(path, &report.result_line().to_json())?;
    }
    if !config.keep {
        remove_bench_dir(dir)?;
    }
    Ok(report)
}

struct Measured {
    tally: Tally,
    seconds: f64,
    cpu: CpuTime,
    pool_reads: u64,
    pool_writes: u64,
    disk_name: Option<String>,
    disk: Option<DiskCounters>,
    workers: Option<WorkerTimes>,
    worker_task_shares: Vec<f64>,
}

/// Runs the terminals through warm-up and the measured window.
fn measure(
    store: &FerriteTpcc,
    config: &TpccConfig,
    data_set: &DataSet,
    run_number: u32,
    show: bool,
) -> Result<Measured, BenchError> {
    let db = &store.db;
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let done = Arc::new(AtomicU64::new(0));
    let mut seed_rng = Rng::stream(config.seed, u64::from(run_number) << 32);
    let load_c = NuRandC {
        c_last: data_set.c_last_load,
        c_id: data_set.c_id_load,
        ol_i_id: data_set.ol_i_id_load,
    };
    let run_c = NuRandC::for_run(load_c, &mut seed_rng);
    let workers = db.worker_count().max(1);
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
    // Spawned round robin: slot i goes to worker (first + i) mod workers, so a group's
    // terminals share a worker.
    let mut handles = Vec::new();
    let mut queues: Vec<std::vec::IntoIter<Terminal>> =
        groups.into_iter().map(Vec::into_iter).collect();
    while queues.iter().any(|q| q.len() > 0) {
        for queue in &mut queues {
            let spawned = match queue.next() {
                Some(terminal) => db
                    .spawn(terminal_loop(
                        store.clone(),
                        terminal,
                        data_set.scale,
                        Arc::clone(&phase),
                        Arc::clone(&done),
                        config.spec_times,
                    ))
                    .map(|handle| handles.push(handle)),
                None => db.spawn(async {}).map(drop),
            };
            if let Err(e) = spawned {
                phase.store(STOP, Ordering::Release);
                for handle in handles {
                    let _ = handle.wait();
                }
                return Err(e.into());
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
    let pool_before = db.pool().stats();
    let workers_before = WorkerTimes::of(&db.worker_stats());
    let task_ns = || -> Vec<u64> {
        db.worker_stats().iter().map(|s| s.task_ns.load(Ordering::Relaxed)).collect()
    };
    let task_ns_before = task_ns();
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
    let pool_after = db.pool().stats();
    let workers_after = WorkerTimes::of(&db.worker_stats());
    let worker_task_shares = task_ns()
        .iter()
        .zip(&task_ns_before)
        .map(|(after, before)| after.saturating_sub(*before) as f64 / (seconds * 1e9))
        .collect();
    let disk_after = disk.as_ref().and_then(Disk::counters);
    let mut tally: Tally = Default::default();
    let mut failure = None;
    for handle in handles {
        match handle.wait() {
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
        pool_reads: pool_after.reads - pool_before.reads,
        pool_writes: pool_after.writes - pool_before.writes,
        disk_name: disk.map(|d| d.name),
        disk: disk_before.zip(disk_after).map(|(b, a)| a.since(b)),
        workers: Some(workers_after.since(workers_before)),
        worker_task_shares,
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
        let outcome = match execute(&store, &input, &scale).await {
            Ok(outcome) => outcome,
            Err(e) => {
                phase.store(STOP, Ordering::Release);
                return Err(store_error(e));
            }
        };
        record_outcome(&mut tally, kind, outcome, now_ns().saturating_sub(start_ns));
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

/// Whether `dir` holds a data set a run with `config` would reuse.
fn reusable(dir: &Path, config: &TpccConfig) -> bool {
    std::fs::read_to_string(dir.join(META_FILE)).is_ok_and(|text| text == meta_text(config))
}
