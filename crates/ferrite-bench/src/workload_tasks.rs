//! Ferrite in the comparison workloads: an owned store (`FerriteStore`, the blocking API, for
//! loads and `--direct-api`) and the task driver: `workers × tasks` tasks on Ferrite's own
//! workers (`fill-sync`: its committers, spread round robin over the workers), each running
//! the operation stream through `Tree::*_async`, so that a miss is a read queued on its
//! worker while the other tasks go on, and a commit waiting for its sync lets them go on too.
//!
//! Durability: `fill-sync` opens the database with `Durability::Sync` (a put returns once it
//! is durable); every other workload, and every load, with `Durability::None`, as the peers
//! run with their logs off.
//!
//! Open loop: one dispatcher thread draws Poisson arrivals at the target rate and hands each
//! one (its scheduled time) to the next idle task through an async queue; a task's latency is
//! counted from the scheduled arrival, so time spent queued counts. The dispatcher sleeps
//! between arrivals in steps of at most 100 µs, and its CPU counts against Ferrite's.

use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use ferrite::sched::TaskHandle;
use ferrite::{Db, Durability, Options, Tree};
use hdrhistogram::Histogram as Hdr;

use crate::error::BenchError;
use crate::phase::{MEASURE, STOP};
use crate::rng::Rng;
use crate::store::FerriteTree;
use crate::workload::{
    check_read, check_scanned, histogram, key, merge_parts, verify, Arrivals, OpCounts, OpenStore,
    RunConfig, RunningTasks, TaskDriver,
};
use crate::ycsb::{versioned_value, KeySpace, Op, OpStream};

const TREE: &str = "bench";

/// A Ferrite database and its benchmark tree, owned.
pub type FerriteStore = FerriteTree<Arc<Db>>;

/// Opens Ferrite in `dir` for `config`: the pool is the run's cache, the workers and their
/// depth as asked, durable commits for `fill-sync` only.
pub fn open_ferrite(config: &RunConfig, dir: &Path) -> Result<OpenStore, BenchError> {
    let options = ferrite_options(config);
    let durability = options.durability;
    let db = Arc::new(Db::open(dir, options)?);
    let tree = db.tree(TREE)?;
    let store = FerriteStore::new(Arc::clone(&db), tree.clone()).with_durability(durability);
    if config.tasks_mode() {
        Ok(OpenStore::with_tasks(Box::new(store), Box::new(FerriteTasks { db, tree })))
    } else {
        Ok(OpenStore::threads(Box::new(store)))
    }
}

/// The options Ferrite opens with for `config`: the pool is the run's cache, the workers and
/// their depth as asked, durable commits (`Durability::Sync`) for `fill-sync` only.
pub(crate) fn ferrite_options(config: &RunConfig) -> Options {
    let durability = if config.workload.durable() { Durability::Sync } else { Durability::None };
    let tasks_per_worker = config.task_count().div_ceil(config.workers.max(1));
    Options {
        pool_bytes: config.cache_mib << 20,
        direct_io: config.direct_io,
        create_if_missing: true,
        workers: if config.tasks_mode() { config.workers } else { 0 },
        // At least 2: a worker writes the log with a write linked to its sync, two entries
        // of its io_uring, which a ring of one cannot take (the worker panics on it).
        io_depth: tasks_per_worker.clamp(2, 4096),
        durability,
        change_buffer_bytes: config.change_buffer_mib.map(|mib| mib << 20),
        ..Options::default()
    }
}

/// The task driver.
#[derive(Debug)]
struct FerriteTasks {
    db: Arc<Db>,
    tree: Tree,
}

type PartResult = Result<(OpCounts, Hdr<u64>), BenchError>;

struct Running {
    handles: Vec<TaskHandle<PartResult>>,
    dispatcher: Option<thread::JoinHandle<()>>,
}

impl RunningTasks for Running {
    fn finish(self: Box<Self>) -> Result<(OpCounts, Hdr<u64>), BenchError> {
        let mut parts = Vec::with_capacity(self.handles.len());
        let mut failure = None;
        for handle in self.handles {
            match handle.wait() {
                Ok(part) => parts.push(part),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(dispatcher) = self.dispatcher {
            let _ = dispatcher.join();
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(merge_parts(parts)),
        }
    }
}

impl TaskDriver for FerriteTasks {
    fn start(
        &self,
        config: &RunConfig,
        keys: Arc<KeySpace>,
        phase: Arc<AtomicU8>,
    ) -> Result<Box<dyn RunningTasks>, BenchError> {
        start_tasks(&self.db, &self.tree, config, keys, phase)
    }
}

/// Spawns the run's tasks on `db`'s workers, each running its operation stream on `tree`
/// until `phase` says stop (or a fill inserted every key it may); operations count only
/// while `phase` is `MEASURE`. The task driver, and `recovery` (which owns its `Db`).
pub(crate) fn start_tasks(
    db: &Db,
    tree: &Tree,
    config: &RunConfig,
    keys: Arc<KeySpace>,
    phase: Arc<AtomicU8>,
) -> Result<Box<dyn RunningTasks>, BenchError> {
    let template =
        OpStream::new(config.workload, config.distribution, config.records, config.seed, 0);
    let count = config.task_count();
    let arrivals = config.rate.map(|_| Arc::new(ArrivalQueue::default()));
    let fill_limit = if config.workload.needs_data() { u64::MAX } else { config.records };
    let mut handles = Vec::with_capacity(count);
    for index in 0..count as u64 {
        let (tree, keys, phase) = (tree.clone(), Arc::clone(&keys), Arc::clone(&phase));
        let mut stream = template.fork(config.seed, index + 1);
        let arrivals = arrivals.clone();
        let handle = db.spawn(async move {
            let mut counts = OpCounts::default();
            let mut latency_ns = histogram();
            let mut buf = Vec::with_capacity(256);
            loop {
                let current = phase.load(Ordering::Relaxed);
                if current == STOP {
                    break;
                }
                let scheduled = match &arrivals {
                    Some(queue) => match queue.next().await {
                        Some(at) => at,
                        None => break,
                    },
                    None => Instant::now(),
                };
                let op = stream.next(&keys);
                if let Op::Insert(i) = op {
                    if i >= keys.loaded().saturating_add(fill_limit) {
                        phase.store(STOP, Ordering::Relaxed);
                        break;
                    }
                }
                let mut op_counts = OpCounts::default();
                let done = run_op_async(&tree, op, &mut stream, &keys, &mut buf, &mut op_counts);
                if let Err(e) = done.await {
                    phase.store(STOP, Ordering::Relaxed);
                    if let Some(queue) = &arrivals {
                        queue.close();
                    }
                    return Err(e);
                }
                if current == MEASURE {
                    let nanos = u64::try_from(scheduled.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    latency_ns.saturating_record(nanos.max(1));
                    counts.add_from(&op_counts);
                }
            }
            Ok((counts, latency_ns))
        })?;
        handles.push(handle);
    }
    let dispatcher = match (&arrivals, config.rate) {
        (Some(queue), Some(rate)) => {
            let (queue, phase) = (Arc::clone(queue), Arc::clone(&phase));
            let rng = Rng::stream(config.seed ^ 0xD15B, 0);
            Some(thread::spawn(move || dispatch(&queue, &phase, rate, rng)))
        }
        _ => None,
    };
    Ok(Box::new(Running { handles, dispatcher }))
}

/// Draws arrivals at `rate` until the run stops, handing each to the queue when it is due.
fn dispatch(queue: &ArrivalQueue, phase: &AtomicU8, rate: f64, rng: Rng) {
    let mut arrivals = Arrivals::new(rate, Instant::now(), rng);
    while phase.load(Ordering::Relaxed) != STOP {
        let now = Instant::now();
        if arrivals.next > now {
            thread::sleep((arrivals.next - now).min(Duration::from_micros(100)));
            continue;
        }
        while arrivals.next <= now {
            queue.push(arrivals.next);
            arrivals.advance();
        }
    }
    queue.close();
}

/// Scheduled arrivals waiting for a task, and the tasks waiting for an arrival.
#[derive(Debug, Default)]
struct ArrivalQueue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    due: VecDeque<Instant>,
    waiting: VecDeque<Waker>,
    closed: bool,
}

impl ArrivalQueue {
    fn push(&self, at: Instant) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.due.push_back(at);
            state.waiting.pop_front()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn close(&self) {
        let wakers = {
            let mut state = self.state.lock().unwrap();
            state.closed = true;
            std::mem::take(&mut state.waiting)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The next arrival, or `None` once the run is over.
    fn next(&self) -> NextArrival<'_> {
        NextArrival { queue: self }
    }
}

struct NextArrival<'a> {
    queue: &'a ArrivalQueue,
}

impl Future for NextArrival<'_> {
    type Output = Option<Instant>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        let mut state = self.queue.state.lock().unwrap();
        if let Some(at) = state.due.pop_front() {
            return Poll::Ready(Some(at));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        if !state.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            state.waiting.push_back(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// `workload::run_op` through the task API.
async fn run_op_async(
    tree: &Tree,
    op: Op,
    stream: &mut OpStream,
    keys: &KeySpace,
    buf: &mut Vec<u8>,
    counts: &mut OpCounts,
) -> Result<(), BenchError> {
    let engine = BenchError::Engine;
    match op {
        Op::Read(i) => {
            counts.reads += 1;
            let found = tree
                .get_with_async(&key(i), |v| {
                    buf.clear();
                    buf.extend_from_slice(v);
                })
                .await
                .map_err(engine)?;
            check_read(i, found.is_some(), buf, keys, counts)?;
        }
        Op::Update(i) => {
            counts.updates += 1;
            let value = versioned_value(i, stream.version());
            tree.put_async(&key(i), &value).await.map_err(engine)?;
        }
        Op::Insert(i) => {
            counts.inserts += 1;
            tree.put_async(&key(i), &versioned_value(i, 0)).await.map_err(engine)?;
            keys.insert_done();
        }
        Op::Scan(i, len) => {
            counts.scans += 1;
            let mut bad = None;
            let visited = tree
                .scan_async(&key(i), len as usize, |k, v| {
                    if bad.is_none() {
                        bad = check_scanned(k, v).err();
                    }
                })
                .await
                .map_err(engine)?;
            counts.scanned += visited as u64;
            if let Some(reason) = bad {
                return Err(verify(reason));
            }
        }
        Op::ReadModifyWrite(i) => {
            counts.rmws += 1;
            let found = tree
                .get_with_async(&key(i), |v| {
                    buf.clear();
                    buf.extend_from_slice(v);
                })
                .await
                .map_err(engine)?;
            let version = check_read(i, found.is_some(), buf, keys, counts)?;
            let value = versioned_value(i, version.wrapping_add(1));
            tree.put_async(&key(i), &value).await.map_err(engine)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::check_store;
    use crate::workload::{open_store, run, StoreKind};
    use crate::ycsb::{Distribution, Workload};
    use ferrite::test_util::TempDir;

    #[test]
    fn the_change_buffer_option_reaches_the_engine() {
        let mut config = RunConfig::new(Workload::Ycsb('c'), StoreKind::Ferrite);
        assert_eq!(ferrite_options(&config).change_buffer_bytes, None);
        config.change_buffer_mib = Some(8);
        assert_eq!(ferrite_options(&config).change_buffer_bytes, Some(8 << 20));
        config.change_buffer_mib = Some(0);
        let options = ferrite_options(&config);
        assert_eq!(options.pool_pages(), (64 << 20) / 4096, "0: every MiB a frame");
    }

    fn tiny(workload: Workload, dir: &TempDir) -> RunConfig {
        RunConfig {
            dir: dir.path().join("bench-ferrite"),
            records: 3000,
            cache_mib: 1,
            seconds: 0.3,
            threads: 3,
            workers: 2,
            tasks: 8,
            ceiling: false,
            ..RunConfig::new(workload, StoreKind::Ferrite)
        }
    }

    #[test]
    fn ferrite_conforms_through_the_store_trait() {
        let dir = TempDir::new("bench-conformance");
        let config = RunConfig { direct_api: true, ..tiny(Workload::Lookup, &dir) };
        let store = open_ferrite(&config, dir.path()).unwrap();
        check_store(store.kv(), 7, 4000);
    }

    /// Every workload runs on Ferrite as tasks and through the blocking API, verifying every
    /// value it reads, and reports operations of the kinds its mix has.
    #[test]
    fn every_workload_runs_as_tasks_and_as_threads() {
        let dir = TempDir::new("bench-workloads");
        let json = dir.path().join("runs.jsonl");
        for workload in Workload::ALL {
            for direct_api in [false, true] {
                let config = RunConfig {
                    direct_api,
                    keep: true,
                    json: Some(json.clone()),
                    ..tiny(workload, &dir)
                };
                let report = run(&config, &open_store, false)
                    .unwrap_or_else(|e| panic!("{workload} (direct {direct_api}): {e}"));
                let c = report.counts;
                assert!(c.total() > 0, "{workload}: no operations");
                match workload {
                    Workload::Lookup | Workload::Ycsb('c') => assert_eq!(c.total(), c.reads),
                    Workload::FillSequential | Workload::FillRandom | Workload::FillSync => {
                        assert_eq!(c.total(), c.inserts)
                    }
                    Workload::Ycsb('e') => assert!(c.scans > 0 && c.scanned > 0),
                    Workload::Ycsb('f') => assert!(c.rmws > 0 && c.reads > 0),
                    _ => {}
                }
                let line = report.result_line();
                assert_eq!(line.get("store"), Some("ferrite"));
                assert_eq!(line.get("workload"), Some(workload.name().as_str()));
                assert!(line.get("ops_per_s").is_some());
            }
        }
        let lines = std::fs::read_to_string(&json).unwrap();
        assert_eq!(lines.lines().count(), 2 * Workload::ALL.len());
        assert!(lines.lines().all(|l| l.starts_with("{\"store\":\"ferrite\"") && l.ends_with('}')));
    }

    #[test]
    fn a_fill_inserts_every_key_once_and_stops() {
        let dir = TempDir::new("bench-fill");
        for workload in [Workload::FillSequential, Workload::FillRandom] {
            let config = RunConfig { records: 2000, seconds: 60.0, ..tiny(workload, &dir) };
            let start = Instant::now();
            let report = run(&config, &open_store, false).unwrap();
            assert_eq!(report.counts.inserts, 2000, "{workload}");
            assert!(start.elapsed() < Duration::from_secs(30), "the fill ended when done");
        }
    }

    /// fill-sync: 4 committers as tasks and as threads insert every key of a small fill;
    /// the store, reopened, holds each with its value; the result line says what ran.
    #[test]
    fn a_sync_fill_commits_every_key_it_acknowledges() {
        let dir = TempDir::new("bench-fill-sync");
        let json = dir.path().join("runs.jsonl");
        for direct_api in [false, true] {
            let config = RunConfig {
                records: 1500,
                seconds: 60.0,
                committers: 4,
                direct_api,
                json: Some(json.clone()),
                ..tiny(Workload::FillSync, &dir)
            };
            assert_eq!(config.task_count(), 4);
            assert_eq!(config.thread_count(), 4);
            let start = Instant::now();
            let report = run(&config, &open_store, false).unwrap();
            assert!(start.elapsed() < Duration::from_secs(30), "the fill ended when done");
            assert_eq!(report.counts.inserts, 1500, "direct {direct_api}");
            assert_eq!(report.counts.total(), 1500);
            assert_eq!(report.verified.map(|(keys, _)| keys), Some(1500));
            assert!(report.store_description.contains("durability=Sync"));
            let line = report.result_line();
            assert_eq!(line.get("store"), Some("ferrite"));
            assert_eq!(line.get("workload"), Some("fill-sync"));
            assert_eq!(line.get("committers"), Some("4"));
            assert_eq!(line.get("sync"), Some("1"));
            assert_eq!(line.get("verified"), Some("1500"));
            assert_eq!(line.get("ops"), Some("1500"));
            for field in ["ops_per_s", "p50_us", "p99_us", "p999_us", "cpu_us_per_op"] {
                assert!(line.get(field).is_some(), "{field} in {line}");
            }
            let (mode, threads, tasks) =
                if direct_api { ("threads", "4", "0") } else { ("tasks", "0", "4") };
            assert_eq!(line.get("mode"), Some(mode));
            assert_eq!(line.get("threads"), Some(threads));
            assert_eq!(line.get("tasks"), Some(tasks));
            assert!(report.summary().contains("4 committers"));
            assert!(!config.data_dir().exists(), "a fill's directory is removed");
        }
        let lines = std::fs::read_to_string(&json).unwrap();
        assert_eq!(lines.lines().count(), 2);
        assert!(lines
            .lines()
            .all(|l| l.contains("\"workload\":\"fill-sync\"") && l.contains("\"committers\":4")));
    }

    /// A sync fill bounded by time rather than by its key count reads back exactly the keys
    /// it acknowledged.
    #[test]
    fn a_sync_fill_stopped_by_the_clock_verifies_what_it_acknowledged() {
        let dir = TempDir::new("bench-fill-sync-time");
        for direct_api in [false, true] {
            let config = RunConfig {
                records: 50_000_000,
                seconds: 0.2,
                committers: 4,
                direct_api,
                cache_mib: 8,
                ..tiny(Workload::FillSync, &dir)
            };
            let report = run(&config, &open_store, false).unwrap();
            let inserts = report.counts.inserts;
            assert!(inserts > 0 && inserts < config.records);
            assert_eq!(report.verified.map(|(keys, _)| keys), Some(inserts));
        }
    }

    /// Every other workload opens Ferrite without syncing (as the peers run without logs).
    #[test]
    fn only_the_sync_fill_syncs() {
        let dir = TempDir::new("bench-durability");
        for workload in [Workload::FillRandom, Workload::Ycsb('a'), Workload::FillSync] {
            let config = tiny(workload, &dir);
            let store = open_ferrite(&config, &dir.path().join(workload.name())).unwrap();
            let described = store.kv().describe();
            let want = if workload.durable() { "durability=Sync" } else { "durability=None" };
            assert!(described.contains(want), "{workload}: {described}");
        }
    }

    #[test]
    fn open_loop_offers_about_the_rate_asked() {
        let dir = TempDir::new("bench-open");
        for direct_api in [false, true] {
            let config = RunConfig {
                rate: Some(2000.0),
                seconds: 1.0,
                direct_api,
                distribution: Distribution::Uniform,
                ..tiny(Workload::Ycsb('c'), &dir)
            };
            let report = run(&config, &open_store, false).unwrap();
            let rate = report.ops_per_s();
            assert!((1200.0..2800.0).contains(&rate), "direct {direct_api}: {rate} ops/s");
            assert_eq!(report.result_line().get("loop"), Some("open"));
        }
    }
}
