//! The one runner every workload runs on: operations issued from OS threads (a blocking API:
//! the peers, Ferrite with `--direct-api`) or as tasks on Ferrite's workers, closed loop (each
//! stream issues its next operation as soon as the last one is done) or open loop (Poisson
//! arrivals at a target rate; latency counted from each operation's scheduled arrival, so
//! that time spent queued counts).
//!
//! A workload supplies the operations as an `Ops` value per thread or task: `next_op` draws
//! one (untimed), `execute` runs it (timed), `verify` checks what it returned and counts it
//! (untimed). The loop is generic over the `Ops` type, so each workload gets its own
//! monomorphised loop with no dynamic call the workload does not make itself. Per operation
//! the runner adds: a relaxed load of the phase, two reads of the monotonic clock as `u64`
//! nanoseconds (`now_ns`) and one HdrHistogram `record`. Counts live in the `Ops` value and
//! the histogram in the loop's locals; both are reset when the loop first sees the phase
//! `MEASURE` (so nothing is counted during the warm-up, without a per-operation test) and
//! handed back at the end.
//!
//! The caller drives the phases (`crate::measure::phase`): warm-up, measuring, stop, and takes its own
//! counters around the measured window in the `control` closure it passes.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use ferrite::sched::TaskHandle;
use ferrite::Db;

use crate::error::BenchError;
use crate::gen::rng::Rng;
use crate::measure::phase::{StopOnDrop, MEASURE, STOP, WARMUP};

/// Latencies in nanoseconds.
pub type Hdr = hdrhistogram::Histogram<u64>;

/// Highest latency a histogram tells apart (longer ones are recorded as this): 100 s.
const HIGHEST_NS: u64 = 100_000_000_000;

/// An empty latency histogram: 1 ns to 100 s at 2 significant digits (1 %), ~32 KiB, one per
/// thread or task.
pub fn new_histogram() -> Hdr {
    Hdr::new_with_bounds(1, HIGHEST_NS, 2).expect("valid histogram bounds")
}

/// Records `nanos`, clamped to the histogram's range. The common case is one `record`.
#[inline(always)]
pub fn record(latency_ns: &mut Hdr, nanos: u64) {
    if latency_ns.record(nanos).is_err() {
        latency_ns.saturating_record(nanos);
    }
}

/// Now on the monotonic clock (the clock `Instant` reads), in nanoseconds. The loops time
/// operations with it rather than with `Instant`: two reads and a subtraction of plain
/// integers cost ~50 instructions less per operation than two `Instant`s and
/// `duration_since` (callgrind, lookups), which pays for HdrHistogram's `record`.
#[allow(unsafe_code)]
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable `timespec` for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC is always there on Linux");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The operations of one thread or task of a workload.
pub trait Ops {
    /// One operation, as drawn.
    type Op: Copy;
    /// What executing it returned, for `verify`.
    type Outcome;
    /// What the stream counted while measuring.
    type Counts: Default + std::ops::AddAssign + Send + 'static;

    /// The next operation, or `None` once the stream has nothing more to do (a fill that
    /// inserted every key it may): the run then stops.
    fn next_op(&mut self) -> Option<Self::Op>;

    /// Checks what `op` returned and counts it; an error stops the run.
    fn verify(&mut self, op: Self::Op, outcome: Self::Outcome) -> Result<(), BenchError>;

    /// Forgets what was counted so far: measuring starts.
    fn start_measuring(&mut self);

    /// What was counted since `start_measuring`.
    fn counts(&self) -> Self::Counts;
}

/// `Ops` run through a blocking API.
pub trait BlockingOps: Ops {
    fn execute(&mut self, op: Self::Op) -> Self::Outcome;
}

/// `Ops` run as a task.
pub trait AsyncOps: Ops<Op: Send, Outcome: Send> + Send + 'static {
    fn execute(&mut self, op: Self::Op) -> impl Future<Output = Self::Outcome> + Send + '_;
}

/// What one thread or task hands back, and what the runner merges them into.
#[derive(Debug, Clone)]
pub struct Tally<C> {
    pub counts: C,
    /// Latency of each operation counted, in nanoseconds.
    pub latency_ns: Hdr,
}

impl<C: Default + std::ops::AddAssign> Tally<C> {
    pub fn new() -> Self {
        Tally { counts: C::default(), latency_ns: new_histogram() }
    }

    pub fn add(&mut self, other: Tally<C>) {
        self.counts += other.counts;
        self.latency_ns.add(&other.latency_ns).expect("same histogram bounds");
    }
}

impl<C: Default + std::ops::AddAssign> Default for Tally<C> {
    fn default() -> Self {
        Self::new()
    }
}

/// Closed or open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each stream issues its next operation when the last one is done.
    Closed,
    /// Poisson arrivals, `rate` operations per second over all streams; arrivals are drawn
    /// from `Rng::stream(seed, ..)`.
    Open { rate: f64, seed: u64 },
}

impl Pacing {
    pub fn new(rate: Option<f64>, seed: u64) -> Self {
        match rate {
            Some(rate) => Pacing::Open { rate, seed },
            None => Pacing::Closed,
        }
    }
}

/// Runs `threads` threads, thread `t` executing the operations of `make(t)` until `phase`
/// says stop (or its stream ends, or an operation fails), while the calling thread runs
/// `control` (which moves `phase` through warm-up, measuring and stop). Returns what
/// `control` returned and the merged tally; the first failure (by thread) is the error, and
/// a panicking thread's panic is passed on.
pub fn on_threads<O, R>(
    threads: usize,
    make: &(dyn Fn(u64) -> O + Sync),
    pacing: Pacing,
    phase: &AtomicU8,
    control: impl FnOnce() -> R,
) -> Result<(R, Tally<O::Counts>), BenchError>
where
    O: BlockingOps,
{
    assert!(threads > 0);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                scope.spawn(move || {
                    let _stop = StopOnDrop(phase);
                    let ops = make(t);
                    match pacing {
                        Pacing::Closed => thread_loop::<O, false>(ops, phase, None),
                        Pacing::Open { rate, seed } => {
                            let rate = rate / threads as f64;
                            let arrivals = Arrivals::new(rate, now_ns(), Rng::stream(seed, t + 1));
                            thread_loop::<O, true>(ops, phase, Some(arrivals))
                        }
                    }
                })
            })
            .collect();
        let controlled = control();
        phase.store(STOP, Ordering::Release);
        let mut tally = Tally::new();
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(part)) => tally.add(part),
                Ok(Err(e)) => {
                    failure.get_or_insert(e);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok((controlled, tally)),
        }
    })
}

/// The loop of one thread. `OPEN`: `arrivals` is `Some` and paces it. Not inlined, so that
/// profiles name it (one call per thread).
#[inline(never)]
fn thread_loop<O: BlockingOps, const OPEN: bool>(
    mut ops: O,
    phase: &AtomicU8,
    mut arrivals: Option<Arrivals>,
) -> Result<Tally<O::Counts>, BenchError> {
    let mut latency_ns = new_histogram();
    let mut seen = WARMUP;
    loop {
        let current = phase.load(Ordering::Relaxed);
        if current != seen {
            if current == STOP {
                break;
            }
            debug_assert_eq!(current, MEASURE);
            ops.start_measuring();
            latency_ns.reset();
            seen = current;
        }
        let Some(op) = ops.next_op() else {
            phase.store(STOP, Ordering::Relaxed);
            break;
        };
        let start_ns = match (OPEN, &mut arrivals) {
            (true, Some(a)) => a.wait_next(),
            _ => now_ns(),
        };
        let outcome = ops.execute(op);
        let end_ns = now_ns();
        ops.verify(op, outcome)?;
        record(&mut latency_ns, end_ns.saturating_sub(start_ns));
    }
    Ok(Tally { counts: ops.counts(), latency_ns })
}

/// Tasks under way on Ferrite's workers (`spawn_tasks`).
#[derive(Debug)]
pub struct Running<C: Send + 'static> {
    handles: Vec<TaskHandle<Result<Tally<C>, BenchError>>>,
    dispatcher: Option<thread::JoinHandle<()>>,
}

impl<C: Default + std::ops::AddAssign + Send + 'static> Running<C> {
    /// Waits for every task (after the phase said stop) and merges what they counted; the
    /// first failure (by task) is the error.
    pub fn finish(self) -> Result<Tally<C>, BenchError> {
        let mut tally = Tally::new();
        let mut failure = None;
        for handle in self.handles {
            match handle.wait() {
                Ok(part) => tally.add(part),
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
            None => Ok(tally),
        }
    }
}

/// Spawns one task per `Ops` value of `streams` on `db`'s workers (round robin), each running
/// its operations until `phase` says stop (or its stream ends, or an operation fails: both
/// stop every task). Open loop: one dispatcher thread draws the arrivals at the total rate
/// and hands each to the next idle task; it sleeps between arrivals in steps of at most
/// 100 µs, and its CPU counts against Ferrite's.
pub fn spawn_tasks<O: AsyncOps>(
    db: &Db,
    streams: impl IntoIterator<Item = O>,
    pacing: Pacing,
    phase: &Arc<AtomicU8>,
) -> Result<Running<O::Counts>, BenchError> {
    let queue = match pacing {
        Pacing::Closed => None,
        Pacing::Open { .. } => Some(Arc::new(ArrivalQueue::default())),
    };
    let mut handles = Vec::new();
    for ops in streams {
        let shared = Arc::clone(phase);
        let handle = match &queue {
            None => db.spawn(task_loop::<O, false>(ops, shared, None)),
            Some(queue) => db.spawn(task_loop::<O, true>(ops, shared, Some(Arc::clone(queue)))),
        };
        match handle {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                // Stop the tasks already spawned before giving up.
                phase.store(STOP, Ordering::Release);
                if let Some(queue) = &queue {
                    queue.close();
                }
                for handle in handles {
                    let _ = handle.wait();
                }
                return Err(e.into());
            }
        }
    }
    let dispatcher = match (&queue, pacing) {
        (Some(queue), Pacing::Open { rate, seed }) => {
            let (queue, phase) = (Arc::clone(queue), Arc::clone(phase));
            let rng = Rng::stream(seed, 0);
            Some(thread::spawn(move || dispatch(&queue, &phase, rate, rng)))
        }
        _ => None,
    };
    Ok(Running { handles, dispatcher })
}

/// The loop of one task. `OPEN`: `queue` is `Some` and hands it its arrivals.
async fn task_loop<O: AsyncOps, const OPEN: bool>(
    mut ops: O,
    phase: Arc<AtomicU8>,
    queue: Option<Arc<ArrivalQueue>>,
) -> Result<Tally<O::Counts>, BenchError> {
    let mut latency_ns = new_histogram();
    let mut seen = WARMUP;
    let stop = |phase: &AtomicU8| {
        phase.store(STOP, Ordering::Relaxed);
        if let Some(queue) = &queue {
            queue.close();
        }
    };
    loop {
        let current = phase.load(Ordering::Relaxed);
        if current != seen {
            if current == STOP {
                break;
            }
            ops.start_measuring();
            latency_ns.reset();
            seen = current;
        }
        let Some(op) = ops.next_op() else {
            stop(&phase);
            break;
        };
        let start_ns = match (OPEN, &queue) {
            (true, Some(queue)) => match queue.next().await {
                Some(at_ns) => at_ns,
                None => break,
            },
            _ => now_ns(),
        };
        let outcome = ops.execute(op).await;
        let end_ns = now_ns();
        if let Err(e) = ops.verify(op, outcome) {
            stop(&phase);
            return Err(e);
        }
        record(&mut latency_ns, end_ns.saturating_sub(start_ns));
    }
    Ok(Tally { counts: ops.counts(), latency_ns })
}

/// The arrival schedule of one open-loop stream: Poisson arrivals at `rate` per second, on
/// the clock of `now_ns`.
#[derive(Debug)]
struct Arrivals {
    next_ns: u64,
    mean_gap_ns: f64,
    rng: Rng,
}

impl Arrivals {
    fn new(rate: f64, start_ns: u64, rng: Rng) -> Self {
        let mut a = Arrivals { next_ns: start_ns, mean_gap_ns: 1e9 / rate.max(1e-9), rng };
        a.advance();
        a
    }

    fn advance(&mut self) {
        let unit = ((self.rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let gap_ns = -unit.ln() * self.mean_gap_ns;
        self.next_ns += gap_ns as u64;
    }

    /// Sleeps until the next arrival is due; returns when it was due and draws the one after.
    fn wait_next(&mut self) -> u64 {
        let due_ns = self.next_ns;
        let now = now_ns();
        if due_ns > now {
            thread::sleep(Duration::from_nanos(due_ns - now));
        }
        self.advance();
        due_ns
    }
}

/// Draws arrivals at `rate` until the run stops, handing each to the queue when it is due.
fn dispatch(queue: &ArrivalQueue, phase: &AtomicU8, rate: f64, rng: Rng) {
    let mut arrivals = Arrivals::new(rate, now_ns(), rng);
    while phase.load(Ordering::Relaxed) != STOP {
        let now = now_ns();
        if arrivals.next_ns > now {
            thread::sleep(
                Duration::from_nanos(arrivals.next_ns - now).min(Duration::from_micros(100)),
            );
            continue;
        }
        while arrivals.next_ns <= now {
            queue.push(arrivals.next_ns);
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
    /// Scheduled arrivals, `now_ns` clock.
    due: VecDeque<u64>,
    waiting: VecDeque<Waker>,
    closed: bool,
}

impl ArrivalQueue {
    fn push(&self, at_ns: u64) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.due.push_back(at_ns);
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

    /// The next arrival (`now_ns` clock), or `None` once the run is over.
    fn next(&self) -> NextArrival<'_> {
        NextArrival { queue: self }
    }
}

struct NextArrival<'a> {
    queue: &'a ArrivalQueue,
}

impl Future for NextArrival<'_> {
    type Output = Option<u64>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u64>> {
        let mut state = self.queue.state.lock().unwrap();
        if let Some(at_ns) = state.due.pop_front() {
            return Poll::Ready(Some(at_ns));
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

/// A latency histogram over HdrHistogram with percentiles in percent and an infallible
/// `record` (values past the bounds are clamped), for `workloads::io`'s per-engine latencies.
#[derive(Debug, Clone)]
pub struct Histogram(Hdr);

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram(new_histogram())
    }

    pub fn record(&mut self, value: u64) {
        record(&mut self.0, value);
    }

    pub fn merge(&mut self, other: &Histogram) {
        self.0.add(&other.0).expect("same histogram bounds");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.min()
        }
    }

    /// The largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.max()
        }
    }

    pub fn mean(&self) -> f64 {
        self.0.mean()
    }

    /// The value at or below which `percent` % of the values lie (0 when empty).
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.value_at_percentile(percent.clamp(0.0, 100.0))
        }
    }

    pub fn hdr(&self) -> &Hdr {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Counts reads of a fixed key space; fails on a chosen index.
    struct Counter {
        next: u64,
        end: Option<u64>,
        fail_at: Option<u64>,
        done: u64,
    }

    impl Counter {
        fn new() -> Self {
            Counter { next: 0, end: None, fail_at: None, done: 0 }
        }
    }

    impl Ops for Counter {
        type Op = u64;
        type Outcome = u64;
        type Counts = u64;
        fn next_op(&mut self) -> Option<u64> {
            self.next += 1;
            (self.end != Some(self.next)).then_some(self.next)
        }
        fn verify(&mut self, op: u64, outcome: u64) -> Result<(), BenchError> {
            if Some(op) == self.fail_at {
                return Err(BenchError::Config(format!("failed at {op}")));
            }
            assert_eq!(outcome, op * 2);
            self.done += 1;
            Ok(())
        }
        fn start_measuring(&mut self) {
            self.done = 0;
        }
        fn counts(&self) -> u64 {
            self.done
        }
    }

    impl BlockingOps for Counter {
        fn execute(&mut self, op: u64) -> u64 {
            op * 2
        }
    }

    fn timed(phase: &AtomicU8, warmup_ms: u64, measure_ms: u64) -> Duration {
        crate::measure::phase::wait(phase, Duration::from_millis(warmup_ms));
        let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
        let start = Instant::now();
        crate::measure::phase::wait(phase, Duration::from_millis(measure_ms));
        start.elapsed()
    }

    #[test]
    fn threads_count_only_what_ran_while_measuring() {
        let phase = AtomicU8::new(WARMUP);
        let (elapsed, tally) =
            on_threads(3, &|_| Counter::new(), Pacing::Closed, &phase, || timed(&phase, 30, 100))
                .unwrap();
        assert!(elapsed >= Duration::from_millis(100));
        assert!(tally.counts > 1000, "{}", tally.counts);
        assert_eq!(tally.latency_ns.len(), tally.counts, "one latency per counted op");
    }

    #[test]
    fn a_stream_that_ends_stops_the_run_and_a_failure_fails_it() {
        let phase = AtomicU8::new(MEASURE);
        let make = |t: u64| Counter { end: Some(50 + t), ..Counter::new() };
        let (_, tally) =
            on_threads(2, &make, Pacing::Closed, &phase, || timed(&phase, 0, 30_000)).unwrap();
        assert!(tally.counts >= 49, "the first stream to end stops the others");
        let phase = AtomicU8::new(WARMUP);
        let make = |_| Counter { fail_at: Some(7), ..Counter::new() };
        let start = Instant::now();
        let result = on_threads(2, &make, Pacing::Closed, &phase, || timed(&phase, 0, 30_000));
        assert!(matches!(result, Err(BenchError::Config(m)) if m == "failed at 7"));
        assert!(start.elapsed() < Duration::from_secs(10), "the failure stopped the run");
    }

    #[test]
    fn open_loop_threads_offer_about_the_rate() {
        let phase = AtomicU8::new(WARMUP);
        let pacing = Pacing::Open { rate: 4000.0, seed: 3 };
        let (elapsed, tally) =
            on_threads(2, &|_| Counter::new(), pacing, &phase, || timed(&phase, 0, 500)).unwrap();
        let rate = tally.counts as f64 / elapsed.as_secs_f64();
        assert!((2500.0..5500.0).contains(&rate), "{rate} ops/s");
    }

    #[test]
    fn the_old_histogram_interface_reads_hdr() {
        let mut h = Histogram::new();
        assert_eq!((h.count(), h.min(), h.max(), h.percentile(50.0)), (0, 0, 0, 0));
        for v in 1..=10_000u64 {
            h.record(v);
        }
        h.record(u64::MAX);
        assert_eq!(h.count(), 10_001);
        let p50 = h.percentile(50.0) as f64;
        assert!((p50 - 5_000.0).abs() <= 50.0, "{p50}");
        assert!(h.max() >= HIGHEST_NS, "clamped, not lost");
        let mut other = Histogram::new();
        other.record(7);
        h.merge(&other);
        assert_eq!(h.count(), 10_002);
    }
}
