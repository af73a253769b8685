//! The task scheduler: thousands of tasks on a tiny pool checked against a model, the model
//! sequences of `model.rs` run through the task API, shutdown with I/O in flight, and an I/O
//! error that fails only the task that owns it. The workers here use the real psync engine
//! behind a wrapper that can fail reads of a chosen page; every real engine also runs tasks
//! in `tasks_run_over_every_real_engine`, and has its own conformance suite.

#![allow(unsafe_code)] // implementing the unsafe `IoEngine::queue` of a wrapper

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_check, seeds, tiny, Rng, TempDir};
use ferrite::buffer::BufferPool;
use ferrite::io::{open_engine, EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError};
use ferrite::{Db, Error, Options};

const NO_PAGE: u64 = u64::MAX;

/// A real engine that fails reads of page `fail_page` with EIO instead of issuing them.
struct FailingEngine {
    inner: Box<dyn IoEngine>,
    failed: Vec<IoCompletion>,
    fail_page: Arc<AtomicU64>,
}

impl IoEngine for FailingEngine {
    fn kind(&self) -> EngineKind {
        self.inner.kind()
    }
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len()
    }
    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError> {
        let page = request.offset / 4096;
        if request.kind == IoKind::Read && page == self.fail_page.load(Ordering::Relaxed) {
            if self.in_flight() >= self.depth() {
                return Err(QueueError::Full);
            }
            let result = Err(std::io::Error::from_raw_os_error(libc::EIO));
            self.failed.push(IoCompletion { tag: request.tag, result });
            return Ok(());
        }
        // SAFETY: the caller's guarantee for `request` is passed on unchanged.
        unsafe { self.inner.queue(request) }
    }
    fn submit(&mut self) -> std::io::Result<usize> {
        self.inner.submit()
    }
    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> std::io::Result<usize> {
        let failed = self.failed.len();
        out.append(&mut self.failed);
        Ok(failed + self.inner.reap(out, wait && failed == 0)?)
    }
}

fn open(dir: &TempDir, pool_pages: u64, workers: usize, fail_page: &Arc<AtomicU64>) -> Db {
    let options = Options { workers, io_depth: 8, ..tiny(pool_pages) };
    let fail_page = Arc::clone(fail_page);
    Db::open_with_engines(dir.path(), options, move |_, pool: &BufferPool| {
        let inner =
            open_engine(EngineKind::Psync, pool.file().devices().expect("real devices"), 8)?;
        let fail_page = Arc::clone(&fail_page);
        Ok(Box::new(FailingEngine { inner, failed: Vec::new(), fail_page }) as Box<dyn IoEngine>)
    })
    .unwrap()
}

fn key(task: u64, i: u64) -> Vec<u8> {
    format!("task{task:05}/{i:03}").into_bytes()
}

#[test]
fn thousands_of_tasks_on_a_tiny_pool_match_the_model() {
    let dir = TempDir::with_prefix("tasks").unwrap();
    let no_failures = Arc::new(AtomicU64::new(NO_PAGE));
    let db = open(&dir, 32, 2, &no_failures);
    assert_eq!(db.worker_count(), 2);
    let tree = db.tree("t").unwrap();
    let handles: Vec<_> = (0..2000u64)
        .map(|task| {
            let tree = tree.clone();
            db.spawn(async move {
                let mut rng = Rng::new(task);
                let mut model = BTreeMap::new();
                for i in 0..6 {
                    let len = rng.below(300) as usize;
                    let value = rng.bytes(len);
                    tree.put_async(&key(task, i), &value).await?;
                    model.insert(key(task, i), value);
                }
                for i in 0..6 {
                    assert_eq!(
                        tree.get_async(&key(task, i)).await?,
                        model.get(&key(task, i)).cloned()
                    );
                }
                let gone = rng.below(6);
                assert!(tree.delete_async(&key(task, gone)).await?);
                model.remove(&key(task, gone));
                tree.update_async(&key(task, (gone + 1) % 6), |v| {
                    v.iter_mut().for_each(|b| *b ^= 0xff)
                })
                .await?;
                if let Some(v) = model.get_mut(&key(task, (gone + 1) % 6)) {
                    v.iter_mut().for_each(|b| *b ^= 0xff);
                }
                Ok::<_, Error>(model)
            })
            .unwrap()
        })
        .collect();
    let mut model = BTreeMap::new();
    for handle in handles {
        model.extend(handle.wait().unwrap());
    }
    let stats = db.pool().stats();
    assert!(stats.evictions > 0 && stats.reads > 0, "the pool must have been too small: {stats:?}");
    let all: Vec<_> = tree.iter().collect::<Result<_, _>>().unwrap();
    let want: Vec<_> = model.into_iter().collect();
    assert!(all == want, "contents differ from the model");
    let worker_reads: u64 = db.worker_stats().iter().map(|s| s.reads.load(Ordering::Relaxed)).sum();
    assert!(worker_reads > 0, "misses were served by the workers' engines");
    assert_check(&db);
    db.close().unwrap();
}

#[test]
fn model_sequences_run_through_tasks() {
    for seed in seeds(3) {
        let dir = TempDir::with_prefix("tasks-model").unwrap();
        let no_failures = Arc::new(AtomicU64::new(NO_PAGE));
        let db = open(&dir, 24, 1, &no_failures);
        let tree = db.tree("t").unwrap();
        let model = db
            .spawn(async move {
                let mut rng = Rng::new(seed);
                let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                for _ in 0..3000 {
                    let key = rng.below(1500).to_be_bytes().to_vec();
                    match rng.below(10) {
                        0..=4 => {
                            let len = rng.below(2000) as usize;
                            let value = rng.bytes(len);
                            tree.put_async(&key, &value).await.unwrap();
                            model.insert(key, value);
                        }
                        5..=6 => {
                            let removed = tree.delete_async(&key).await.unwrap();
                            assert_eq!(removed, model.remove(&key).is_some(), "seed {seed}");
                        }
                        _ => assert_eq!(
                            tree.get_async(&key).await.unwrap(),
                            model.get(&key).cloned(),
                            "seed {seed}"
                        ),
                    }
                }
                model
            })
            .unwrap()
            .wait();
        let tree = db.open_tree("t").unwrap();
        let all: Vec<_> = tree.iter().collect::<Result<_, _>>().unwrap();
        assert!(all == model.into_iter().collect::<Vec<_>>(), "seed {seed}: contents differ");
        assert_check(&db);
    }
}

#[test]
fn shutdown_with_io_in_flight_loses_nothing() {
    let dir = TempDir::with_prefix("tasks-shutdown").unwrap();
    let no_failures = Arc::new(AtomicU64::new(NO_PAGE));
    {
        let db = open(&dir, 20, 2, &no_failures);
        let tree = db.tree("t").unwrap();
        for task in 0..500u64 {
            let tree = tree.clone();
            // Handles dropped at once: nobody waits for these tasks but close.
            drop(db.spawn(async move {
                for i in 0..8 {
                    tree.put_async(&key(task, i), &[task as u8; 200]).await.unwrap();
                }
            }));
        }
        db.close().unwrap();
    }
    let db = open(&dir, 20, 1, &no_failures);
    let tree = db.open_tree("t").unwrap();
    for task in 0..500u64 {
        for i in 0..8 {
            assert_eq!(tree.get(key(task, i)).unwrap(), Some(vec![task as u8; 200]), "{task}/{i}");
        }
    }
    assert_check(&db);
}

/// A worker writing a dirty victim back takes the dirty pages beside it on disk into the
/// same write: updates swept in key order through a pool a fraction of the tree's size leave
/// runs of dirty leaves, and the pages written outnumber the workers' write requests. Every
/// update is there after the run and after a reopen.
#[test]
fn dirty_neighbours_go_out_in_their_victims_writes() {
    let dir = TempDir::with_prefix("tasks-neighbours").unwrap();
    let no_failures = Arc::new(AtomicU64::new(NO_PAGE));
    let key = |i: u64| format!("key{i:06}").into_bytes();
    let value = |i: u64, round: u8| vec![round ^ i as u8; 300];
    {
        let db = open(&dir, 32, 1, &no_failures);
        let tree = db.tree("t").unwrap();
        // About 80 leaves, written in key order (consecutive pages), then every key updated
        // in the same order.
        for round in 0..2u8 {
            let tree = tree.clone();
            let before = db.pool().stats().writes;
            let requests = || -> u64 {
                db.worker_stats().iter().map(|s| s.writes.load(Ordering::Relaxed)).sum()
            };
            let requests_before = requests();
            db.spawn(async move {
                for i in 0..1000 {
                    tree.put_async(&key(i), &value(i, round)).await?;
                }
                Ok::<_, Error>(())
            })
            .unwrap()
            .wait()
            .unwrap();
            let (pages, requests) =
                (db.pool().stats().writes - before, requests() - requests_before);
            assert!(requests > 0, "round {round}: the workers wrote victims back");
            if round == 1 {
                assert!(pages > requests, "{pages} pages written in {requests} requests");
            }
        }
        for i in 0..1000 {
            assert_eq!(tree.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
        }
        assert_check(&db);
        db.close().unwrap();
    }
    let db = open(&dir, 32, 1, &no_failures);
    let tree = db.open_tree("t").unwrap();
    for i in 0..1000 {
        assert_eq!(tree.get(key(i)).unwrap(), Some(value(i, 1)), "key {i} after a reopen");
    }
    assert_check(&db);
}

#[test]
fn an_io_error_fails_its_task_and_the_engine_goes_on() {
    let dir = TempDir::with_prefix("tasks-eio").unwrap();
    let fail_page = Arc::new(AtomicU64::new(NO_PAGE));
    {
        let db = open(&dir, 16, 1, &fail_page);
        let tree = db.tree("t").unwrap();
        for i in 0..3000u64 {
            tree.put(i.to_be_bytes(), [7u8; 100]).unwrap();
        }
        db.close().unwrap();
    }
    let db = open(&dir, 16, 2, &fail_page);
    let tree = db.open_tree("t").unwrap();
    let page_count = db.pool().stats().page_count;
    fail_page.store(page_count / 2, Ordering::Relaxed);
    let lookups = |tree: &ferrite::Tree| -> Vec<Result<Option<Vec<u8>>, Error>> {
        let handles: Vec<_> = (0..3000u64)
            .map(|i| {
                let tree = tree.clone();
                db.spawn(async move { tree.get_async(&i.to_be_bytes()).await }).unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.wait()).collect()
    };
    let results = lookups(&tree);
    let errors: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(!errors.is_empty(), "some key lives on the failing page");
    for e in &errors {
        let message = e.to_string();
        assert!(
            matches!(e, Error::Io { .. }) && message.contains(&format!("page {}", page_count / 2)),
            "{message}"
        );
    }
    let good = results.iter().filter(|r| matches!(r, Ok(Some(v)) if v == &vec![7u8; 100])).count();
    assert_eq!(good + errors.len(), 3000, "every other lookup succeeded");
    // The failure was the page's, not the engine's: once the device reads again, all work.
    fail_page.store(NO_PAGE, Ordering::Relaxed);
    assert!(lookups(&tree).iter().all(|r| matches!(r, Ok(Some(_)))));
    assert_check(&db);
}

#[test]
fn the_default_is_one_worker_per_core() {
    let dir = TempDir::with_prefix("tasks-default").unwrap();
    let db = Db::open(dir.path(), tiny(16)).unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(db.worker_count(), cores);
    assert_eq!(db.engine(), Some(EngineKind::IoUring));
    assert_eq!(db.spawn(async { 6 * 7 }).unwrap().wait(), 42);
    db.close().unwrap();
}

#[test]
fn spawn_without_workers_is_an_error() {
    let dir = TempDir::with_prefix("tasks-none").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(16) }).unwrap();
    assert!(matches!(db.spawn(async {}), Err(Error::NoWorkers)));
    let tree = db.tree("t").unwrap();
    tree.put(b"k", b"v").unwrap();
    // With nowhere to run them, the async calls are refused rather than blocking the thread
    // that polls them.
    let got = poll_on_this_thread(tree.get_async(b"k"));
    assert!(matches!(got, Err(Error::NotInTask { call: "Tree::get_async" })), "{got:?}");
    assert_eq!(tree.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// An async call polled by another executor (here, a plain thread polling by hand) is a
/// clear error naming the call, before it touches anything; the same call inside a task,
/// whose handle that executor awaits, works.
#[test]
fn async_calls_off_a_worker_are_refused_and_handles_bridge_executors() {
    let dir = TempDir::with_prefix("tasks-foreign").unwrap();
    let db = Db::open(dir.path(), Options { workers: 1, ..tiny(16) }).unwrap();
    let tree = db.tree("t").unwrap();
    let refused = [
        poll_on_this_thread(tree.put_async(b"k", b"v")).err(),
        poll_on_this_thread(tree.get_async(b"k")).err(),
        poll_on_this_thread(tree.scan_async(b"", 10, |_, _| ())).err(),
        poll_on_this_thread(db.write_async(&ferrite::WriteBatch::new())).err(),
        poll_on_this_thread(db.flush_async()).err(),
    ];
    let calls: Vec<_> = refused
        .iter()
        .map(|e| match e {
            Some(Error::NotInTask { call }) => *call,
            other => panic!("expected NotInTask, got {other:?}"),
        })
        .collect();
    assert_eq!(
        calls,
        [
            "Tree::put_async",
            "Tree::get_async",
            "Tree::scan_async",
            "Db::write_async",
            "Db::flush_async"
        ]
    );
    assert_eq!(tree.get(b"k").unwrap(), None, "the refused put wrote nothing");
    let message = Error::NotInTask { call: "Tree::get_async" }.to_string();
    assert!(message.contains("Tree::get_async") && message.contains("Db::spawn"), "{message}");

    // The bridge: the handle of a spawned task is a future this thread's "executor" awaits.
    let writer = tree.clone();
    let handle = db.spawn(async move { writer.put_async(b"k", b"v").await }).unwrap();
    poll_on_this_thread(handle).unwrap();
    let reader = tree.clone();
    let handle = db.spawn(async move { reader.get_async(b"k").await }).unwrap();
    assert_eq!(poll_on_this_thread(handle).unwrap().as_deref(), Some(&b"v"[..]));
}

/// A minimal foreign executor: polls `future` on this thread, parking between polls until
/// its waker unparks the thread.
fn poll_on_this_thread<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[test]
fn tasks_run_over_every_real_engine() {
    for engine in EngineKind::ALL {
        let dir = TempDir::with_prefix("tasks-engines").unwrap();
        {
            let db = Db::open(dir.path(), tiny(24)).unwrap();
            let tree = db.tree("t").unwrap();
            for i in 0..4000u64 {
                tree.put(i.to_be_bytes(), i.to_le_bytes().repeat(12)).unwrap();
            }
            db.close().unwrap();
        }
        let options = Options { workers: 2, engine: Some(engine), io_depth: 16, ..tiny(24) };
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.engine(), Some(engine), "the database says which engine it uses");
        let tree = db.open_tree("t").unwrap();
        let handles: Vec<_> = (0..8u64)
            .map(|task| {
                let tree = tree.clone();
                db.spawn(async move {
                    let mut rng = Rng::new(task);
                    for _ in 0..500 {
                        let i = rng.below(4000);
                        let value = tree.get_async(&i.to_be_bytes()).await.unwrap();
                        assert_eq!(value, Some(i.to_le_bytes().repeat(12)), "{engine:?} key {i}");
                    }
                    for i in (task * 500..task * 500 + 100).map(|i| i + 10_000) {
                        tree.put_async(&i.to_be_bytes(), b"new").await.unwrap();
                    }
                })
                .unwrap()
            })
            .collect();
        handles.into_iter().for_each(|h| h.wait());
        let reads: u64 = db.worker_stats().iter().map(|s| s.reads.load(Ordering::Relaxed)).sum();
        assert!(reads > 0, "{engine:?}: the workers read through the engine");
        assert_eq!(tree.iter().count(), 4000 + 800, "{engine:?}");
        assert_check(&db);
        db.close().unwrap();
    }
}

#[test]
fn scans_as_tasks_match_the_blocking_range_on_a_tiny_pool() {
    let dir = TempDir::with_prefix("tasks-scan").unwrap();
    let fail = Arc::new(AtomicU64::new(NO_PAGE));
    let db = open(&dir, 16, 2, &fail);
    let tree = db.tree("t").unwrap();
    let mut rng = Rng::new(0x5CA7);
    for i in 0..3000u64 {
        let len = (rng.below(60) + 1) as usize;
        tree.put((i * 7).to_be_bytes(), vec![i as u8; len]).unwrap();
    }
    let mut handles = Vec::new();
    for task in 0..64u64 {
        let tree = tree.clone();
        let start = (task * 311 % 21_000).to_be_bytes();
        let limit = (task % 9 * 40 + 1) as usize;
        handles.push((
            start,
            limit,
            db.spawn(async move {
                let mut seen = Vec::new();
                let n = tree
                    .scan_async(&start, limit, |k, v| seen.push((k.to_vec(), v.to_vec())))
                    .await
                    .unwrap();
                assert_eq!(n, seen.len());
                seen
            })
            .unwrap(),
        ));
    }
    for (start, limit, handle) in handles {
        let expected: Vec<_> =
            tree.range(&start[..]..).take(limit).map(|entry| entry.unwrap()).collect();
        assert_eq!(handle.wait(), expected, "scan from {start:?}, {limit} entries");
    }
    assert_check(&db);
}

/// Regression: a scan task that met a value stored out of line read its Value page with a
/// blocking read on the worker, which could wait forever for a read of that same worker.
/// Now the Value page is a queued read like any miss.
#[test]
fn scans_as_tasks_read_out_of_line_values_without_blocking_their_worker() {
    let dir = TempDir::with_prefix("tasks-scan-big").unwrap();
    let fail = Arc::new(AtomicU64::new(NO_PAGE));
    let db = open(&dir, 16, 2, &fail);
    let tree = db.tree("big").unwrap();
    for i in 0..120u64 {
        // Over 1.5 KiB beside an 8-byte key: the value goes to a Value page.
        let len = 1600 + (i as usize * 37) % 2000;
        tree.put(i.to_be_bytes(), vec![i as u8; len]).unwrap();
    }
    let handles: Vec<_> = (0..32u64)
        .map(|task| {
            let tree = tree.clone();
            db.spawn(async move {
                let start = (task * 3).to_be_bytes();
                let mut seen = Vec::new();
                tree.scan_async(&start, 25, |k, v| seen.push((k.to_vec(), v.to_vec())))
                    .await
                    .unwrap();
                (start, seen)
            })
            .unwrap()
        })
        .collect();
    for handle in handles {
        let (start, seen) = handle.wait();
        let expected: Vec<_> = tree.range(&start[..]..).take(25).map(|e| e.unwrap()).collect();
        assert_eq!(seen, expected);
    }
    assert_check(&db);
}

/// A blocking write inside a task is refused with a clear error (it could block its worker
/// on the commit lock held by a task of that worker, or on a log flush only that worker's loop
/// finishes: both workers once hung so); the async calls and blocking reads work.
#[test]
fn blocking_writes_inside_tasks_are_refused_not_hung() {
    let dir = TempDir::with_prefix("tasks-blocking-writes").unwrap();
    let options = Options { workers: 2, ..tiny(256) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("t").unwrap();
    let handles: Vec<_> = (0..16u64)
        .map(|task| {
            let tree = tree.clone();
            let db = Arc::clone(&db);
            db.clone()
                .spawn(async move {
                    let refused = db.checkpoint().unwrap_err();
                    assert!(matches!(refused, Error::BlockingWriteInTask), "{refused}");
                    for i in 0..50 {
                        tree.put_async(&key(task, i), b"async").await.unwrap();
                        assert!(tree.get(key(task, i)).unwrap().is_some());
                        let refused = tree.put(key(task, i), b"blocking").unwrap_err();
                        assert!(matches!(refused, Error::BlockingWriteInTask), "{refused}");
                    }
                })
                .unwrap()
        })
        .collect();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        handles.into_iter().for_each(|h| h.wait());
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the tasks did not finish within 60 s");
    assert_eq!(tree.iter().count(), 16 * 50);
    assert!(tree.iter().all(|entry| entry.unwrap().1 == b"async"));
}

/// A worker's idle time counts the wait under way (`WorkerStats::idle_ns_now`): one given
/// no task sleeps through the whole interval and shows it idle, where the time it charged
/// at its wake-ups alone would show nothing (found with TPC-C's affinity: one warehouse on
/// two workers reported its idle worker busy).
#[test]
fn a_worker_asleep_through_an_interval_counts_it_idle() {
    let dir = TempDir::with_prefix("tasks-idle").unwrap();
    let db = Db::open(dir.path(), Options { workers: 2, ..tiny(64) }).unwrap();
    // Both workers have started and gone to sleep.
    db.spawn_on(0, async {}).unwrap().wait();
    db.spawn_on(1, async {}).unwrap().wait();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let before: Vec<u64> = db.worker_stats().iter().map(|s| s.idle_ns_now()).collect();
    let started = std::time::Instant::now();
    // Worker 0 works; worker 1 gets nothing.
    let busy = db
        .spawn_on(0, async {
            let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while std::time::Instant::now() < until {
                ferrite::sched::yield_now().await;
            }
        })
        .unwrap();
    busy.wait();
    let interval = started.elapsed().as_nanos() as u64;
    let idle: Vec<u64> =
        db.worker_stats().iter().zip(&before).map(|(s, b)| s.idle_ns_now() - b).collect();
    assert!(idle[1] >= interval * 9 / 10, "worker 1 idle {idle:?} of {interval} ns");
    assert!(idle[0] < interval / 2, "worker 0 ran the task: idle {idle:?} of {interval} ns");
}

/// `task_run_ns` counts the time a task's polls take, and not the time it waits: busy work
/// shows in full, a sleep hardly at all, and off a worker there is no task to count.
#[test]
fn a_task_counts_its_run_time_not_its_waits() {
    use std::time::{Duration, Instant};
    assert_eq!(ferrite::sched::task_run_ns(), None, "no task off a worker");
    let dir = TempDir::new().unwrap();
    // io_uring, whose timers let a sleeping task give its worker back (a sleep through the
    // psync engine blocks the worker, and its poll takes the whole sleep).
    let db = Db::open(dir.path(), Options { workers: 1, ..tiny(256) }).unwrap();
    assert_eq!(db.engine(), Some(EngineKind::IoUring));
    let (busy, asleep) = db
        .spawn(async {
            let start = ferrite::sched::task_run_ns().expect("a task on a worker");
            let spin_until = Instant::now() + Duration::from_millis(30);
            let mut spins = 0u64;
            while Instant::now() < spin_until {
                spins = std::hint::black_box(spins + 1);
            }
            let after_busy = ferrite::sched::task_run_ns().unwrap();
            ferrite::sched::net::sleep(Duration::from_millis(300)).await;
            let after_sleep = ferrite::sched::task_run_ns().unwrap();
            (after_busy - start, after_sleep - after_busy)
        })
        .unwrap()
        .wait();
    assert!(busy >= 30_000_000, "30 ms of busy work counted as {busy} ns");
    assert!(asleep < 100_000_000, "a 300 ms sleep counted as {asleep} ns of running");
}

/// Commits that do not wait for the log (`Durability::None`) have it written in the
/// background once a megabyte of it is pending: nobody calls `flush`, no commit waits (the
/// four megabytes at which one would are never reached), and yet the log becomes durable
/// past the first megabyte. (Before, the log stayed unwritten until a commit found four
/// megabytes pending and every commit waited for that write.)
#[test]
fn commits_that_do_not_wait_have_the_log_written_in_the_background() {
    use std::time::{Duration, Instant};
    let dir = TempDir::new().unwrap();
    let options = Options { workers: 1, durability: ferrite::Durability::None, ..tiny(8192) };
    let db = Db::open(dir.path(), options).unwrap();
    let log = Arc::clone(db.log().expect("a writable database has a log"));
    let start = log.durable();
    let tree = db.tree("t").unwrap();
    let task_tree = tree.clone();
    // About 2 MiB of log: half of what makes a commit wait.
    db.spawn(async move {
        for i in 0..800u32 {
            task_tree.put_async(i.to_be_bytes(), [i as u8; 1000]).await.unwrap();
        }
    })
    .unwrap()
    .wait();
    let appended = log.tail() - start;
    assert!((3 << 19..4 << 20).contains(&appended), "{appended} bytes appended");
    let deadline = Instant::now() + Duration::from_secs(60);
    while log.durable() < start + (1 << 20) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let durable = log.durable() - start;
    assert!(durable >= 1 << 20, "{durable} of {appended} bytes written without a flush");
}

/// A worker out of work polls its inbox for `Options::idle_spin` before it sleeps: work
/// handed to it meanwhile starts at once, not when the poll ends, and a close ends the poll.
#[test]
fn a_worker_polling_for_work_takes_what_is_handed_to_it_at_once() {
    use std::time::{Duration, Instant};
    let dir = TempDir::new().unwrap();
    let spin = Duration::from_secs(5);
    let db = Db::open(dir.path(), Options { workers: 1, idle_spin: spin, ..tiny(256) }).unwrap();
    let tree = db.tree("t").unwrap();
    for round in 0..3u32 {
        // The worker ran out of work a moment ago and polls.
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        let task_tree = tree.clone();
        db.spawn(async move { task_tree.put_async(round.to_be_bytes(), b"v").await.unwrap() })
            .unwrap()
            .wait();
        let took = started.elapsed();
        assert!(took < spin / 4, "round {round}: a task handed to a polling worker took {took:?}");
    }
    assert_eq!(tree.get(2u32.to_be_bytes()).unwrap().as_deref(), Some(&b"v"[..]));
    drop(tree);
    let closing = Instant::now();
    db.close().unwrap();
    assert!(closing.elapsed() < spin / 4, "a close waited for the poll: {:?}", closing.elapsed());
}
