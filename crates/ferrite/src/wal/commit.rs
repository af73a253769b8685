//! The commit lock: one commit at a time applies its changes and appends its record, so
//! that records are in the log in the order their changes were made. Taken by blocking
//! threads (`lock`) and by tasks (`lock_async`, which yields instead of blocking the worker).
//! Held only while a commit applies and appends, never while it waits for the log's sync:
//! commits waiting for the same sync share it (group commit).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::{Context, Poll, Waker};

/// The commit lock (see the module documentation).
#[derive(Debug, Default)]
pub struct CommitLock {
    locked: Mutex<bool>,
    released: Condvar,
    /// Threads asleep on `released` (changed under `locked`): a release with none skips
    /// the notification, a system call each time (tasks, the usual committers, never
    /// sleep there).
    sleepers: AtomicUsize,
    /// Tasks waiting for the lock, in order: `(ticket, waker)`. A release wakes one (waking
    /// all, most of whom find the lock taken again and sleep, cost a context switch per
    /// waiter per commit).
    wakers: Mutex<VecDeque<(u64, Waker)>>,
    tickets: AtomicU64,
}

/// Holds the commit lock until dropped.
#[derive(Debug)]
pub struct CommitGuard<'a> {
    lock: &'a CommitLock,
}

impl CommitLock {
    /// Takes the lock, blocking the thread while another commit holds it.
    pub fn lock(&self) -> CommitGuard<'_> {
        let mut locked = self.locked.lock().unwrap();
        while *locked {
            self.sleepers.fetch_add(1, Ordering::Relaxed);
            locked = self.released.wait(locked).unwrap();
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
        *locked = true;
        CommitGuard { lock: self }
    }

    /// Takes the lock if no commit holds it.
    pub fn try_lock(&self) -> Option<CommitGuard<'_>> {
        let mut locked = self.locked.lock().unwrap();
        if *locked {
            return None;
        }
        *locked = true;
        Some(CommitGuard { lock: self })
    }

    /// Takes the lock, yielding while another commit holds it.
    pub fn lock_async(&self) -> LockFuture<'_> {
        LockFuture { lock: self, ticket: None }
    }

    fn unlock(&self) {
        let sleepers = {
            let mut locked = self.locked.lock().unwrap();
            *locked = false;
            // (Read under the lock a sleeper counts itself under before it waits.)
            self.sleepers.load(Ordering::Relaxed)
        };
        if sleepers > 0 {
            self.released.notify_one();
        }
        self.wake_next();
    }

    /// Wakes the first waiting task, if any.
    fn wake_next(&self) {
        let next = self.wakers.lock().unwrap().pop_front();
        if let Some((_, waker)) = next {
            waker.wake();
        }
    }
}

impl Drop for CommitGuard<'_> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

/// See [`CommitLock::lock_async`].
#[derive(Debug)]
pub struct LockFuture<'a> {
    lock: &'a CommitLock,
    /// This future's place among the waiters, once it has waited.
    ticket: Option<u64>,
}

impl<'a> Future for LockFuture<'a> {
    type Output = CommitGuard<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CommitGuard<'a>> {
        let lock = self.lock;
        let mut locked = lock.locked.lock().unwrap();
        let mut wakers = lock.wakers.lock().unwrap();
        let queued = self.ticket.and_then(|t| wakers.iter().position(|(w, _)| *w == t));
        if !*locked {
            *locked = true;
            if let Some(at) = queued {
                wakers.remove(at);
            }
            self.ticket = None;
            return Poll::Ready(CommitGuard { lock });
        }
        // Registered under the state lock: `unlock` clears the flag first, then wakes the
        // first waiter, so a waiter registered here is woken by a later release.
        match (queued, self.ticket) {
            (Some(at), _) => wakers[at].1.clone_from(cx.waker()),
            // Woken, but another took the lock first: first in line again.
            (None, Some(t)) => wakers.push_front((t, cx.waker().clone())),
            (None, None) => {
                let t = lock.tickets.fetch_add(1, Ordering::Relaxed);
                self.ticket = Some(t);
                wakers.push_back((t, cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl Drop for LockFuture<'_> {
    fn drop(&mut self) {
        // A waiter given up: out of the line; if a release had woken it (it is no longer in
        // line) and the lock is free, the wake-up passes to the next.
        let Some(ticket) = self.ticket else { return };
        let locked = self.lock.locked.lock().unwrap();
        let mut wakers = self.lock.wakers.lock().unwrap();
        match wakers.iter().position(|(t, _)| *t == ticket) {
            Some(at) => {
                wakers.remove(at);
            }
            None if !*locked => {
                drop(wakers);
                drop(locked);
                self.lock.wake_next();
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Polls `future` on this thread, parking between polls until its waker unparks it
    /// (the scheduler's `block_on` is a higher layer than the log's).
    fn park_on<F: Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            std::thread::park();
        }
    }

    /// Many threads taking the lock through the future (one waiter woken per release) and
    /// through the blocking call (three threads: a release must wake a sleeper whenever one
    /// sleeps), some giving up a wait half-way: every one gets it, one at
    /// a time, and nobody sleeps through a release.
    #[test]
    fn every_waiter_gets_the_lock_once_released() {
        let lock = Arc::new(CommitLock::default());
        let inside = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (lock, inside, done) = (lock.clone(), inside.clone(), done.clone());
                std::thread::spawn(move || {
                    for i in 0..500u64 {
                        let guard = if t < 3 {
                            lock.lock()
                        } else {
                            if (t + i) % 7 == 0 {
                                // A wait given up: polled once (maybe queued), then dropped.
                                let mut future = std::pin::pin!(lock.lock_async());
                                let waker = std::task::Waker::noop();
                                let mut cx = Context::from_waker(waker);
                                if let Poll::Ready(guard) = future.as_mut().poll(&mut cx) {
                                    drop(guard);
                                }
                            }
                            park_on(lock.lock_async())
                        };
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        // Held long enough that the others queue behind it.
                        for _ in 0..2_000 {
                            std::hint::spin_loop();
                        }
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(guard);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 8 * 500);
        assert!(lock.wakers.lock().unwrap().is_empty(), "nobody left in line");
    }
}
