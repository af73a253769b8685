//! Facts about the calling thread that any layer may ask: is it a worker running a task,
//! and does its worker's ring carry a log flush? They live on the ground floor so that the
//! log and the buffer pool can ask them without reaching up into the scheduler: the
//! scheduler's worker loop (`sched/worker.rs`) sets them, everyone else only reads them.
//!
//! Both are thread-locals read with one load: `on_worker` is asked on every operation's
//! path (`sched::go_on`), so it must stay that cheap.

use std::cell::Cell;

thread_local! {
    /// Set while this thread runs a worker's loop and its I/O state is not hidden (a
    /// blocking call inside a task hides it: `sched::block_on`).
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread is a worker with a log flush on its ring.
    static LOG_FLUSH_IN_FLIGHT: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread is a worker whose I/O state a blocking call hides.
    static HIDDEN: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread runs a blocking call (`sched::block_on`), on a worker or not.
    static BLOCKING: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread polls a scan's load of a page (`scan_loads`).
    static SCANNING: Cell<bool> = const { Cell::new(false) };
    /// `1 + index` on a worker's thread, 0 on any other.
    static LANE: Cell<usize> = const { Cell::new(0) };
    /// Set while this thread's loads must neither read from nor copy into the second cache
    /// tier (`without_tier`).
    static TIER_BYPASS: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's lane for per-worker state kept outside the scheduler (the second
/// cache tier's admission): `1 + its index` on a worker's thread (in its tasks and its
/// loop's own work, such as eviction), 0 on every other thread.
#[inline]
pub fn lane() -> usize {
    LANE.with(Cell::get)
}

/// Whether the page being loaded now must bypass the second cache tier: not read from it,
/// and not copied into it when it leaves the pool ([`without_tier`]).
#[inline]
pub fn bypassing_tier() -> bool {
    TIER_BYPASS.with(Cell::get)
}

/// Runs `f` with every load it makes on this thread bypassing the second cache tier: what
/// `Db::check` verifies is the disk, never a cached copy (the tier is only a cache).
pub fn without_tier<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            TIER_BYPASS.with(|cell| cell.set(self.0));
        }
    }
    let _restore = Restore(TIER_BYPASS.with(|cell| cell.replace(true)));
    f()
}

/// Sets this thread's lane (the scheduler's worker loop).
pub(crate) fn set_lane(lane: usize) {
    LANE.with(|cell| cell.set(lane));
}

/// Whether the page being loaded now is a scan's: a page a scan brings in is not offered to
/// the second cache tier when it leaves the pool (scans bypass the tier).
#[inline]
pub fn scanning() -> bool {
    SCANNING.with(Cell::get)
}

/// Runs `future` as a scan's load: [`scanning`] is true while it is polled (only then: the
/// flag never leaks to what runs while it waits).
pub async fn scan_loads<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let was = SCANNING.with(|cell| cell.replace(true));
        let polled = future.as_mut().poll(cx);
        SCANNING.with(|cell| cell.set(was));
        polled
    })
    .await
}

/// Whether the calling code may use the engine's futures: inside a task, or inside one of
/// the engine's own blocking calls (which poll those futures on the calling thread, with
/// blocking reads on a miss). Anywhere else, such as a foreign executor's thread, a miss
/// would block that thread: the public `*_async` calls refuse to run there
/// (`Error::NotInTask`).
#[inline]
pub fn may_run_futures() -> bool {
    on_worker() || BLOCKING.with(Cell::get)
}

/// Sets whether this thread runs a blocking call; returns what it was.
#[inline]
pub(crate) fn set_blocking(blocking: bool) -> bool {
    BLOCKING.with(|cell| cell.replace(blocking))
}

/// Whether the calling code is a blocking call made inside a task (`sched::block_on` on a
/// worker): it must not wait for anything only its worker's own loop can finish, such as a
/// commit of another of the worker's tasks (`BufferPool::committed`).
#[inline]
pub fn in_blocking_call_on_worker() -> bool {
    HIDDEN.with(Cell::get)
}

/// Sets whether a blocking call hides this worker; returns what it was.
#[inline]
pub(crate) fn set_hidden(hidden: bool) -> bool {
    HIDDEN.with(|cell| cell.replace(hidden))
}

/// Whether the calling code runs inside a worker task (and not inside a blocking call made
/// from one, which loads with blocking reads as off a worker).
#[inline]
pub fn on_worker() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Whether the calling thread is a worker whose ring carries a log flush: it must not then
/// wait for the log with a blocking call (only its own loop can finish that flush).
#[inline]
pub fn log_flush_in_flight() -> bool {
    LOG_FLUSH_IN_FLIGHT.with(Cell::get)
}

/// Sets whether this thread counts as a worker (the scheduler's worker loop, and
/// `block_on` hiding it); returns what it was.
#[inline]
pub(crate) fn set_on_worker(on: bool) -> bool {
    ON_WORKER.with(|cell| cell.replace(on))
}

/// Sets whether this worker's ring carries a log flush (the scheduler's worker loop).
pub(crate) fn set_log_flush_in_flight(in_flight: bool) {
    LOG_FLUSH_IN_FLIGHT.with(|cell| cell.set(in_flight));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_per_thread_and_restored() {
        assert!(!on_worker() && !log_flush_in_flight());
        assert!(!set_on_worker(true));
        set_log_flush_in_flight(true);
        std::thread::spawn(|| assert!(!on_worker() && !log_flush_in_flight())).join().unwrap();
        assert!(on_worker() && log_flush_in_flight());
        assert!(set_on_worker(false));
        set_log_flush_in_flight(false);
        assert!(!on_worker() && !log_flush_in_flight());
    }
}
