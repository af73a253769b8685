//! `bench lookup` through the task API: `workers × tasks` lookup tasks run on Ferrite's own
//! workers, each miss a read queued on its worker's engine. Measures what the blocking
//! variant measures, plus where the workers' time went (tree work, eviction, I/O submission,
//! completion, idle).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrite::{Db, Tree};

use crate::cpu::CpuTime;
use crate::error::BenchError;
use crate::histogram::Histogram;
use crate::keys::{check_value, key};
use crate::lookup::LookupRun;
use crate::phase::{wait, MEASURE, STOP, WARMUP};
use crate::rng::Rng;
use crate::store::{IoCounters, WorkerTimes};

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

/// Runs `tasks` lookup tasks per worker of `db` on `tree` (keys `0..keys`): `warmup`, then
/// `measure` counted, every value verified. Returns the run and the workers' time shares.
pub fn run_task_lookups(
    db: &Db,
    tree: &Tree,
    keys: u64,
    tasks: usize,
    seed: u64,
    warmup: Duration,
    measure: Duration,
) -> Result<(LookupRun, TimeShares), BenchError> {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let failure: Arc<Mutex<Option<BenchError>>> = Arc::new(Mutex::new(None));
    let count = db.worker_count() * tasks;
    let mut handles = Vec::with_capacity(count);
    for index in 0..count as u64 {
        let (tree, phase, failure) = (tree.clone(), Arc::clone(&phase), Arc::clone(&failure));
        let handle = db.spawn(async move {
            let mut rng = Rng::stream(seed, index);
            let mut latency_ns = Histogram::new();
            let mut lookups = 0u64;
            loop {
                let current = phase.load(Ordering::Relaxed);
                if current == STOP {
                    break;
                }
                let i = rng.below(keys);
                let start = Instant::now();
                let verdict = tree.get_with_async(&key(i), |v| check_value(i, Some(v))).await;
                let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let verdict = match verdict {
                    Ok(Some(checked)) => {
                        checked.map_err(|mismatch| BenchError::Verify { key: i, mismatch })
                    }
                    Ok(None) => check_value(i, None)
                        .map_err(|mismatch| BenchError::Verify { key: i, mismatch }),
                    Err(e) => Err(BenchError::Engine(e)),
                };
                if let Err(error) = verdict {
                    failure.lock().unwrap().get_or_insert(error);
                    phase.store(STOP, Ordering::Relaxed);
                    break;
                }
                if current == MEASURE {
                    latency_ns.record(nanos);
                    lookups += 1;
                }
            }
            (lookups, latency_ns)
        })?;
        handles.push(handle);
    }
    let warmup_start = Instant::now();
    wait(&phase, warmup);
    let warmup_seconds = warmup_start.elapsed().as_secs_f64();
    let stats = db.worker_stats();
    let (io_before, cpu_before, times_before) =
        (pool_io(db), CpuTime::now(), WorkerTimes::of(&stats));
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
    let start = Instant::now();
    wait(&phase, measure);
    phase.store(STOP, Ordering::Release);
    let seconds = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu_before);
    let (io_after, times_after) = (pool_io(db), WorkerTimes::of(&stats));
    let mut latency_ns = Histogram::new();
    let mut lookups = 0;
    for handle in handles {
        let (count, histogram) = handle.wait();
        lookups += count;
        latency_ns.merge(&histogram);
    }
    if let Some(error) = failure.lock().unwrap().take() {
        return Err(error);
    }
    let io = Some(io_after.since(io_before));
    let run = LookupRun { lookups, seconds, warmup_seconds, latency_ns, io, cpu };
    Ok((run, shares(times_before, times_after)))
}

fn pool_io(db: &Db) -> IoCounters {
    let stats = db.pool().stats();
    IoCounters { reads: stats.reads, writes: stats.writes, evictions: stats.evictions }
}

#[cfg(test)]
mod tests {
    use super::*;

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
