//! The task scheduler: worker threads (one per core by default), each running cooperative
//! tasks in one loop with its own I/O engine (`worker.rs`), the tasks and their handles
//! (`task.rs`), and the one driver of the B+tree's restartable attempts (`run_async`): as a
//! task, a miss becomes a read queued on the worker's engine while the task yields, instead
//! of a thread blocked in `pread`; off a worker the same driver loads with blocking reads.
//! Every operation of the engine is written once, as a future over this driver, and the
//! blocking API runs that future on the calling thread (`block_on`).

pub mod net;
mod task;
mod worker;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

pub use task::{yield_now, TaskHandle};
pub(crate) use worker::{start_transfer, Transfer};
pub use worker::{task_run_ns, WorkerStats};

use crate::btree::{with_scratch, Scratch};
use crate::buffer::{Attempt, BufferPool, Interrupt};
use crate::error::{Error, PageId, Result};
use crate::io::IoEngine;
use crate::wal::Log;
use worker::{spend_budget, with_io, HideWorker, Inbox, LoadStep, Worker};

/// The running workers of one database.
#[derive(Debug)]
pub struct Workers {
    inboxes: Vec<Arc<Inbox>>,
    stats: Vec<Arc<WorkerStats>>,
    threads: Vec<JoinHandle<()>>,
    next: AtomicUsize,
    engine: crate::io::EngineKind,
}

impl Workers {
    /// Starts `count` workers over `pool`, worker `i` issuing its I/O through `engines[i]`;
    /// with a `log`, the workers write and sync its flushes on their rings. A worker out of
    /// work polls its inbox for `idle_spin` before it sleeps (`Options::idle_spin`).
    pub fn start(
        pool: &Arc<BufferPool>,
        log: Option<&Arc<Log>>,
        engines: Vec<Box<dyn IoEngine>>,
        idle_spin: std::time::Duration,
    ) -> Result<Workers> {
        let count = engines.len();
        assert!(count > 0, "at least one worker");
        let engine = engines[0].kind();
        let mut workers = Workers {
            inboxes: Vec::with_capacity(count),
            stats: Vec::with_capacity(count),
            threads: Vec::with_capacity(count),
            next: AtomicUsize::new(0),
            engine,
        };
        for (index, engine) in engines.into_iter().enumerate() {
            let inbox = Arc::new(Inbox::new());
            let stats = Arc::new(WorkerStats::default());
            let worker =
                Worker::new(index, count, Arc::clone(&inbox), Arc::clone(&stats), idle_spin);
            let pool = Arc::clone(pool);
            let log = log.cloned();
            let thread = std::thread::Builder::new()
                .name(format!("ferrite-worker-{index}"))
                .spawn(move || worker.run(pool, log, engine))
                .map_err(|e| Error::io("starting a worker thread", e))?;
            workers.inboxes.push(inbox);
            workers.stats.push(stats);
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// How many workers there are.
    pub fn count(&self) -> usize {
        self.inboxes.len()
    }

    /// The engine the workers issue their I/O with.
    pub fn engine(&self) -> crate::io::EngineKind {
        self.engine
    }

    /// Runs `future` on a worker (round robin); the handle yields its output.
    pub fn spawn<F, T>(&self, future: F) -> TaskHandle<T>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let worker = self.next.fetch_add(1, Ordering::Relaxed) % self.inboxes.len();
        self.spawn_on(worker, future)
    }

    /// Runs `future` on worker `worker`.
    pub fn spawn_on<F, T>(&self, worker: usize, future: F) -> TaskHandle<T>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (boxed, handle) = task::task(future);
        self.inboxes[worker % self.inboxes.len()].spawn(boxed);
        handle
    }

    /// Where each worker's time went so far.
    pub fn stats(&self) -> &[Arc<WorkerStats>] {
        &self.stats
    }

    /// Lets every task finish, completes all I/O in flight, and joins the threads.
    pub fn shut_down(&mut self) {
        for inbox in &self.inboxes {
            inbox.shut_down();
        }
        let me = std::thread::current().id();
        for thread in self.threads.drain(..) {
            if thread.thread().id() == me {
                continue; // closed from inside a task: this worker exits when it is done
            }
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        if !self.threads.is_empty() && !std::thread::panicking() {
            self.shut_down();
        }
    }
}

/// Whether the calling code runs inside a worker task (asked of the ground floor, where the
/// worker loop records it).
pub use crate::worker_context::on_worker;

/// Gets page `page_id` into the pool: on a worker, by queuing a read and yielding until it
/// completes (concurrent misses of one page share that read); elsewhere, with a blocking read.
pub async fn load_page(pool: &BufferPool, page_id: PageId) -> Result<()> {
    loop {
        let step = match with_io(|io| io.try_load(page_id)) {
            None => return pool.load(page_id),
            Some(step) => step?,
        };
        match step {
            LoadStep::Done => return Ok(()),
            LoadStep::Wait => return WaitLoad { page_id }.await,
            LoadStep::Retry => yield_now().await,
            LoadStep::Elsewhere => WaitForeignLoad { pool, page_id, registered: false }.await,
            LoadStep::Full => WaitSlot { registered: false }.await,
        }
    }
}

/// Rounds of [`load_together`] at most: a descent that misses at every level of a tall tree
/// takes one round per level, and a restart one more.
const LOAD_ROUNDS: u32 = 8;

/// Runs `count` descents inside one task with the reads of the pages they miss in flight
/// together (the lookups of a multi-key read: a transaction reading the stock rows of an
/// order): `attempt(i)` is descent `i`, failing with `Interrupt::Miss` at a page not in
/// memory. Each round runs every unfinished descent once, queues the reads of all the pages
/// they missed, and waits for them: however many there are, the wait is about one read's,
/// and the device sees them as one deep queue. A page another task or worker is reading,
/// or one there is no room to read yet, is waited for as `load_page` waits, only when none
/// of the round's reads is this task's.
///
/// The caller keeps what each finished descent found. A descent that fails with an error,
/// or is unfinished after [`LOAD_ROUNDS`] rounds, is dropped: the caller runs it alone,
/// which meets the error. Off a worker it does nothing (a thread reads one page at a time
/// anyway).
pub(crate) async fn load_together(
    pool: &BufferPool,
    count: usize,
    mut attempt: impl FnMut(usize, &mut Scratch) -> Attempt<()>,
) {
    if !on_worker() {
        return;
    }
    let mut pending: Vec<usize> = (0..count).collect();
    let mut missed = Vec::with_capacity(count);
    // Pages this worker reads for this round, and pages to wait for otherwise.
    let mut reads: Vec<PageId> = Vec::new();
    let mut others: Vec<PageId> = Vec::new();
    for _ in 0..LOAD_ROUNDS {
        for &i in &pending {
            let page_id = match with_scratch(|scratch| attempt(i, scratch)) {
                Ok(()) => {
                    // Each finished lookup spends the task's turn as a single read does
                    // (`go_on`): a batch of reads in memory holds the worker no longer
                    // than the same reads one by one.
                    if spend_budget() {
                        yield_now().await;
                    }
                    continue;
                }
                Err(Interrupt::Error(_)) => continue,
                Err(Interrupt::Restart) => {
                    missed.push(i);
                    continue;
                }
                Err(Interrupt::Miss(page_id)) => page_id,
            };
            missed.push(i);
            if reads.contains(&page_id) || others.contains(&page_id) {
                continue;
            }
            match with_io(|io| io.try_load(page_id)) {
                Some(Ok(LoadStep::Wait)) => reads.push(page_id),
                Some(Ok(LoadStep::Done)) => {}
                Some(Ok(LoadStep::Retry | LoadStep::Elsewhere | LoadStep::Full)) => {
                    others.push(page_id)
                }
                // Failed to start: the descent's own read meets the error.
                Some(Err(_)) | None => {
                    missed.pop();
                }
            }
        }
        if missed.is_empty() {
            break;
        }
        if reads.is_empty() {
            match others.first() {
                // Nothing of ours in flight: wait for one of the others' (or for room).
                Some(&page_id) => drop(load_page(pool, page_id).await),
                // Only restarts: let the latch holder run.
                None => yield_now().await,
            }
        }
        for page_id in reads.drain(..) {
            // A failed read is the descent's to meet, next round or after.
            let _ = WaitLoad { page_id }.await;
        }
        others.clear();
        std::mem::swap(&mut pending, &mut missed);
        missed.clear();
    }
}

/// Waits until one of this worker's reads finishes (there is room for another).
struct WaitSlot {
    registered: bool,
}

impl Future for WaitSlot {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered {
            return Poll::Ready(());
        }
        self.registered = true;
        match with_io(|io| io.wait_for_slot(cx.waker())) {
            Some(()) => Poll::Pending,
            None => Poll::Ready(()),
        }
    }
}

/// Waits for a read of a page that another worker (or a blocking thread) is doing.
struct WaitForeignLoad<'a> {
    pool: &'a BufferPool,
    page_id: PageId,
    registered: bool,
}

impl Future for WaitForeignLoad<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered {
            return Poll::Ready(());
        }
        self.registered = true;
        if self.pool.wait_for_load(self.page_id, cx.waker()) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

/// Waits for this worker's read of a page.
struct WaitLoad {
    page_id: PageId,
}

impl Future for WaitLoad {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match with_io(|io| io.wait_load(self.page_id, cx.waker())) {
            None => Poll::Ready(Ok(())), // the worker is gone: nothing to wait for
            Some(None) => Poll::Pending,
            Some(Some(result)) => Poll::Ready(result),
        }
    }
}

/// Runs `future` to its end on the calling thread: the blocking API of every operation. Off
/// a worker, the driver inside loads with blocking reads and waits (for the commit lock, the
/// log) park the thread. On a worker (a blocking call inside a task), the worker's I/O is
/// hidden meanwhile, so the same holds; blocking *writes* in a task are refused before they
/// get here (`Error::BlockingWriteInTask`: they could wait for this worker's own loop).
///
/// A future that finishes at its first poll (an in-memory read) costs one poll with a waker
/// that does nothing; only one that waits gets a waker that unparks this thread.
#[inline]
pub fn block_on<F: Future>(future: F) -> F::Output {
    let _hidden = HideWorker::new();
    let mut future = std::pin::pin!(future);
    if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        return output;
    }
    park_until_ready(future)
}

/// The rest of `block_on` for a future that waits: polled with a waker that unparks this
/// thread, until it is ready.
#[inline(never)]
fn park_until_ready<F: Future>(mut future: Pin<&mut F>) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            // A spurious unpark only costs another poll.
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Wakes a thread parked in `block_on`.
struct Unpark(std::thread::Thread);

/// A waker that unparks the calling thread: for a blocking call's own wait with a timeout
/// (`std::thread::park_timeout`), which `block_on` does not offer.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Spins briefly, then yields the thread: whoever holds the latch needs the core.
pub fn back_off(restarts: u32) {
    if restarts < 8 {
        for _ in 0..(1 << restarts) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

/// Runs `attempt` until it finishes, as a task: misses load pages without blocking the
/// worker, restarts yield to the other tasks. Off a worker (or in `block_on`) misses load
/// with blocking reads and restarts back off.
pub async fn run_async<T>(
    pool: &BufferPool,
    attempt: impl FnMut(&mut Scratch) -> Attempt<T>,
) -> Result<T> {
    run_async_with(pool, true, attempt).await
}

/// Restarts a task holding the commit lock retries at once before yielding.
const IMMEDIATE_RETRIES: u32 = 4;

/// [`run_async`]; `share_turn`: after an operation that did not wait, give the worker to
/// the other tasks when this worker's turn is spent. Commits do not (they hold the commit
/// lock, which every other commit would then wait for).
pub async fn run_async_with<T>(
    pool: &BufferPool,
    share_turn: bool,
    mut attempt: impl FnMut(&mut Scratch) -> Attempt<T>,
) -> Result<T> {
    let first = with_scratch(&mut attempt);
    go_on(pool, share_turn, attempt, first).await
}

/// [`run_async_with`] from the outcome of a first attempt made by the caller (the blocking
/// API makes it on its own thread, and needs the driver only when that attempt missed a
/// page or restarted).
pub async fn go_on<T>(
    pool: &BufferPool,
    share_turn: bool,
    mut attempt: impl FnMut(&mut Scratch) -> Attempt<T>,
    mut outcome: Attempt<T>,
) -> Result<T> {
    let mut restarts = 0u32;
    let mut failed_load: Option<PageId> = None;
    loop {
        match outcome {
            Ok(value) => {
                if share_turn && on_worker() && spend_budget() {
                    yield_now().await;
                }
                return Ok(value);
            }
            Err(Interrupt::Error(e)) => return Err(e),
            Err(Interrupt::Miss(page_id)) => match load_page(pool, page_id).await {
                Ok(()) => failed_load = None,
                // A page freed under us (between its parent's validation and the load)
                // fails once; twice is real.
                Err(e) if failed_load == Some(page_id) => return Err(e),
                Err(_) => failed_load = Some(page_id),
            },
            Err(Interrupt::Restart) => {
                restarts += 1;
                if !share_turn && restarts <= IMMEDIATE_RETRIES {
                    // Holding the commit lock: most restarts there are a put's after its
                    // split, which succeeds at once; yielding would keep every commit
                    // waiting behind this worker's other tasks.
                } else if on_worker() {
                    yield_now().await;
                } else {
                    back_off(restarts);
                }
            }
        }
        outcome = with_scratch(&mut attempt);
    }
}
